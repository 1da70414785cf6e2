// Run-time selected x86 AVX2 versions of the Q8_0/Q8_1 activation quantizers
// (legacy_avx2.cpp, built with -mavx2 -mfma -mf16c) next to the scalar
// reference they must equal bit for bit (legacy.cpp). quantize_row_q8_0/_q8_1
// pick one with cpu_has_avx2(); tests call both.
#pragma once

#include <cstdint>

namespace synapse::quant::detail {

// x [n] floats -> y [n/32] block_q8_0 / block_q8_1; n a multiple of 32.
void quantize_row_q8_0_scalar(const float* x, void* y, int64_t n);
void quantize_row_q8_1_scalar(const float* x, void* y, int64_t n);
void quantize_row_q8_0_avx2(const float* x, void* y, int64_t n);
void quantize_row_q8_1_avx2(const float* x, void* y, int64_t n);

}  // namespace synapse::quant::detail

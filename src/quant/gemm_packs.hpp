// The activation block the plain AVX2 Q8_0 kernels (gemm_avx2.cpp) read,
// made once per matrix product by avx2::pack_q8_0_for_q8_0; its size is
// the AVX2 table's gemm_pack_bytes for Q8_0 (quant.cpp). Plain structs only
// (no inline code): included by an instruction-set translation unit and by
// generic code alike (as x8_packs.hpp for the interleaved kernels).
#pragma once

#include <cstdint>

namespace synapse::quant::avx2 {

// Packed activation block for Q8_0 weights: e/o = bytes 2k / 2k+1 as int16.
struct PackedQ8_0 {
  int16_t e[16];
  int16_t o[16];
  float d;
  uint8_t pad[28];
};
static_assert(sizeof(PackedQ8_0) == 96);

}  // namespace synapse::quant::avx2

// AVX-512 helpers of the kernels layer (include only from *_avx512.cpp
// files, which are built with the AVX-512 flags).
#pragma once

#include <immintrin.h>

namespace synapse::kernels {
// Internal linkage (an anonymous namespace, as ops_avx2.hpp): compiled with
// the including file's instruction-set flags, so no copy may be shared with
// another translation unit (scripts/check-isa-objects.sh).
namespace {

// quant::hsum_float_16 of one register: high 8 + low 8, then hsum_float_8's
// tree ((r0 + r2) + (r1 + r3) with r_i = h_{i+4} + h_i).
inline float hsum16(__m512 x) {
  const __m256 h = _mm256_add_ps(_mm512_extractf32x8_ps(x, 1), _mm512_castps512_ps256(x));
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

}  // namespace
}  // namespace synapse::kernels

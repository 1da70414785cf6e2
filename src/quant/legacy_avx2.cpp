// AVX2 versions of the Q8_0/Q8_1 activation quantizers: the same arithmetic
// as the scalar reference in legacy.cpp (and as ggml's x86 AVX2
// quantize_row_q8_0/_q8_1), eight lanes at a time. Tested bit-equal to the
// scalar reference (tests/quant/legacy_test.cpp, LegacyActivation).
#if defined(__AVX2__)
#include <immintrin.h>

#include "quant/formats.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::avx2 {
namespace {

// One block of 32: q (int8) into qs, returns d = amax / 127 and, through
// `sum`, the int32 sum of the rounded values before the saturating packs.
inline float quantize_block(const float* x, int8_t* qs, int32_t& sum) {
  __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
  __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1));
  m = _mm256_max_ps(m, _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
  __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);

  const float d = amax / 127.f;
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;  // half to even
  __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), kRound));
  __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), kRound));
  __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), kRound));
  __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), kRound));

  const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
  s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
  sum = _mm_cvtsi128_si32(s4);

  // int32 -> int16 -> int8 with saturation; the packs interleave 128-bit
  // halves, the permutation restores element order.
  i0 = _mm256_packs_epi32(i0, i1);
  i2 = _mm256_packs_epi32(i2, i3);
  i0 = _mm256_packs_epi16(i0, i2);
  i0 = _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), i0);
  return d;
}

}  // namespace

void quantize_row_q8_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q8_0*>(vy);
  for (int64_t i = 0; i < n / QK8_0; ++i, x += QK8_0) {
    int32_t sum = 0;
    y[i].d = fp32_to_fp16(quantize_block(x, y[i].qs, sum));
  }
}

void quantize_row_q8_1(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q8_1*>(vy);
  for (int64_t i = 0; i < n / QK8_1; ++i, x += QK8_1) {
    int32_t sum = 0;
    const float d = quantize_block(x, y[i].qs, sum);
    y[i].d = fp32_to_fp16(d);
    y[i].s = fp32_to_fp16(d * static_cast<float>(sum));
  }
}

}  // namespace synapse::quant::avx2
#endif

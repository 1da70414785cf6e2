// AVX2 versions of the dots of the 32-element block formats (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, IQ4_NL) with Q8_0/Q8_1 activations. legacy.cpp holds the
// scalar references and the order they define (ggml's AVX2 order): per block
// 8 int32 lanes, lane l = the exact integer dot of elements 4l..4l+3; each
// lane converted to float and accumulated with one fused multiply-add by
// d_w * d_a; the lanes reduced as hsum_float_8; for Q4_1/Q5_1 a separate
// float summs = fma(m_w, s_a, summs) per block, added last.
//
// The integer lanes are exact for every byte value: unsigned weight digits
// go through _mm256_maddubs_epi16 only where no pair can saturate (digits
// <= 63), with the offset (8, 16) subtracted as a second maddubs; signed
// int8 weights (Q8_0, IQ4_NL) are widened to int16 (even and odd bytes) and
// multiplied with _mm256_madd_epi16. (ggml's sign trick, abs(w) * sign(a, w),
// overflows when a = -128 and w < 0.) Tested bit-equal to the scalar kernels
// (tests/quant/simd_test.cpp).
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "quant/formats.hpp"
#include "quant/avx2_util.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::avx2 {
namespace {






// Lanes of sum (u - off) * a over groups of 4 bytes; u in 0..63.
inline __m256i lanes_unsigned(__m256i u, __m256i a, int off) {
  __m256i p = _mm256_maddubs_epi16(u, a);
  if (off != 0) p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(off)), a));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// Lanes of sum w * a over groups of 4 bytes, both signed int8 (any value).
inline __m256i lanes_signed(__m256i w, __m256i a) {
  const __m256i we = _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 8), wo = _mm256_srai_epi16(w, 8);
  const __m256i ae = _mm256_srai_epi16(_mm256_slli_epi16(a, 8), 8), ao = _mm256_srai_epi16(a, 8);
  return _mm256_add_epi32(_mm256_madd_epi16(we, ae), _mm256_madd_epi16(wo, ao));
}

inline __m256 scale_fma(float d, __m256i lanes, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc);
}

}  // namespace

float vec_dot_q4_0_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q4_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const __m256i l = lanes_unsigned(unpack_nibbles(w[i].qs), load32(a[i].qs), 8);
    acc = scale_fma(h2f(w[i].d) * h2f(a[i].d), l, acc);
  }
  return hsum_float_8(acc);
}

float vec_dot_q4_1_q8_1(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q4_1*>(vw);
  const auto* a = static_cast<const block_q8_1*>(va);
  __m256 acc = _mm256_setzero_ps();
  float summs = 0.0f;
  for (int64_t i = 0; i < n / QK4_1; ++i) {
    summs = std::fma(h2f(w[i].m), h2f(a[i].s), summs);
    const __m256i l = lanes_unsigned(unpack_nibbles(w[i].qs), load32(a[i].qs), 0);
    acc = scale_fma(h2f(w[i].d) * h2f(a[i].d), l, acc);
  }
  return hsum_float_8(acc) + summs;
}

float vec_dot_q5_0_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q5_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / QK5_0; ++i) {
    const __m256i u = _mm256_or_si256(unpack_nibbles(w[i].qs), fifth_bits(w[i].qh));
    const __m256i l = lanes_unsigned(u, load32(a[i].qs), 16);
    acc = scale_fma(h2f(w[i].d) * h2f(a[i].d), l, acc);
  }
  return hsum_float_8(acc);
}

float vec_dot_q5_1_q8_1(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q5_1*>(vw);
  const auto* a = static_cast<const block_q8_1*>(va);
  __m256 acc = _mm256_setzero_ps();
  float summs = 0.0f;
  for (int64_t i = 0; i < n / QK5_1; ++i) {
    summs = std::fma(h2f(w[i].m), h2f(a[i].s), summs);
    const __m256i u = _mm256_or_si256(unpack_nibbles(w[i].qs), fifth_bits(w[i].qh));
    const __m256i l = lanes_unsigned(u, load32(a[i].qs), 0);
    acc = scale_fma(h2f(w[i].d) * h2f(a[i].d), l, acc);
  }
  return hsum_float_8(acc) + summs;
}

float vec_dot_q8_0_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q8_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const __m256i l = lanes_signed(load32(w[i].qs), load32(a[i].qs));
    acc = scale_fma(h2f(w[i].d) * h2f(a[i].d), l, acc);
  }
  return hsum_float_8(acc);
}

float vec_dot_iq4_nl_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_iq4_nl*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kvalues_iq4nl)));
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / QK4_NL; ++i) {
    const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles(w[i].qs));
    const __m256i l = lanes_signed(q, load32(a[i].qs));
    acc = scale_fma(h2f(w[i].d) * h2f(a[i].d), l, acc);
  }
  return hsum_float_8(acc);
}

}  // namespace synapse::quant::avx2
#endif

// Small AVX2 helpers shared by the kernel files (*_avx2.cpp only: they need
// -mavx2 -mfma -mf16c). One definition, so the multi-row kernels (gemm_avx2)
// and the single-row dots they must equal bit for bit use the same
// instructions.
#pragma once
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/formats.hpp"

namespace synapse::quant::avx2 {

inline float h2f(ggml_fp16_t h) { return _cvtsh_ss(h); }

// Opaque copy: the value must be materialised (rounded) here.
inline float nc(float v) {
  __asm__("" : "+x"(v));
  return v;
}

inline __m256 nc(__m256 v) {
  __asm__("" : "+x"(v));
  return v;
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Two int16 madd factors: low word a, high word b.
inline int32_t word_pair(int a, int b) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(a)) |
                              (static_cast<uint32_t>(static_cast<uint16_t>(b)) << 16));
}

// sums[l] += d * lane[l], rounded product then sum, as the reference.
inline __m256 add_scaled(__m256 sums, float d, __m256i lanes) {
  return _mm256_add_ps(sums, nc(_mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes))));
}

// sumf + sums[0] + ... + sums[7], left to right.
inline float add_lanes_in_order(float sumf, __m256 sums) {
  float s[8];
  _mm256_storeu_ps(s, sums);
  for (float v : s) sumf += v;
  return sumf;
}

inline int hsum_i32_8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// Q4_K/Q5_K: bytes 0..7 the 6-bit scales, 8..15 the 6-bit mins of the 8
// sub-blocks (the unpacking of get_scale_min_k4 done 4 bytes at a time).
inline void scales_mins_k4(const uint8_t* packed, uint8_t out[16]) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t u[4];
  std::memcpy(u, packed, 12);
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t m03 = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = m03;
  u[0] &= kmask1;
  std::memcpy(out, u, 16);
}

inline float hsum_float_8(__m256 x) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// 16 bytes of packed nibbles -> 32 bytes: elements 0..15 (low nibbles), then
// 16..31 (high nibbles).
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

// The mod-8 lane accumulator of the K-quant dots (k_quants_avx2.cpp describes
// the lane layout); the multi-row kernels (gemm_avx2.cpp) use the same one.
struct Mod8 {
  __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();

  // ua/ub: permuted digits (0..63) of groups A and B, ya/yb: permuted
  // activations, sc: per half the word pair (scale of A, scale of B), off:
  // the digit offset (value = digit - off).
  inline void add(__m256i ua, __m256i ya, __m256i ub, __m256i yb, __m256i sc, int off) {
    __m256i pa = _mm256_maddubs_epi16(ua, ya);
    __m256i pb = _mm256_maddubs_epi16(ub, yb);
    if (off != 0) {
      const __m256i o = _mm256_set1_epi8(static_cast<char>(off));
      pa = _mm256_sub_epi16(pa, _mm256_maddubs_epi16(o, ya));
      pb = _mm256_sub_epi16(pb, _mm256_maddubs_epi16(o, yb));
    }
    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(pa, pb), sc));
    hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(pa, pb), sc));
  }

  // int32 lane l = elements with index % 8 == l.
  inline __m256i lanes() const {
    return _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
};

}  // namespace synapse::quant::avx2
#endif

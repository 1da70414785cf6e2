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
// Internal linkage (an anonymous namespace, as neon_util.hpp): these helpers
// are compiled with the including file's instruction-set flags, so no copy
// may be shared with another translation unit (scripts/check-isa-objects.sh).
namespace {

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

// Opaque integer vector: keeps the compiler from reassociating a chain of
// integer adds into a tree of products held in (spilled) registers.
inline __m256i nc(__m256i v) {
  __asm__("" : "+x"(v));
  return v;
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 32 int8 -> the even bytes (e) and the odd bytes (o) as int16 words, for
// _mm256_madd_epi16 dots that are exact for every byte value.
inline __m256i even_bytes_i16(__m256i q) { return _mm256_srai_epi16(_mm256_slli_epi16(q, 8), 8); }
inline __m256i odd_bytes_i16(__m256i q) { return _mm256_srai_epi16(q, 8); }

inline int hsum_i32_8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

inline int hsum_i32_4(__m128i s) {
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

inline float hsum_float_8(__m256 x) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// 16 bytes of packed nibbles -> 32 bytes: elements 0..15 (low nibbles), then
// 16..31 (high nibbles). One 128-bit broadcast load, then the shifted copy
// blended into the high half (no cross-lane insert).
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_blend_epi32(q, _mm256_srli_epi16(q, 4), 0xF0), _mm256_set1_epi8(0x0F));
}

// Every F16 bit pattern's float value (256 KiB; ggml keeps the same table,
// ggml_table_f32_f16): a weight block's scale is one load and a broadcast
// from memory instead of an insert, a conversion and a shuffle. Exact, so
// interchangeable with h2f.
inline const float* f16_table() {
  static const float* const table = [] {
    static float t[65536];
    for (uint32_t h = 0; h < 65536; ++h) t[h] = _cvtsh_ss(static_cast<unsigned short>(h));
    return t;
  }();
  return table;
}

// Byte j = 0x10 when bit j of the 32-bit qh is set, else 0 (the fifth bit
// of Q5_0/Q5_1 element j).
inline __m256i fifth_bits(const uint8_t* qh) {
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  // A broadcast straight from memory (one load), not through a general register.
  __m256i bytes = _mm256_shuffle_epi8(_mm256_broadcastd_epi32(_mm_loadu_si32(qh)), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));  // all bits but bit j%8
  return _mm256_and_si256(_mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}

// ---- K-quant blocks in ggml's AVX2 order (k_quants.cpp defines the order:
// per 32-element chunk, int32 lane q = scale * elements 4q..4q+3; lanes
// summed over a block's chunks; one fused multiply-add per lane and block).
// The single-row dots (k_quants_avx2.cpp) and the multi-row kernels
// (gemm_k_avx2.cpp) both build their integer lanes with these.

// ggml's get_scale_shuffle_k4: pshufb mask that puts word k (0..7) of each
// 16-byte half in every word of that half.
inline __m256i word_bcast_mask(int k) { return _mm256_set1_epi16(static_cast<int16_t>((2 * k) | ((2 * k + 1) << 8))); }

// ggml's get_scale_shuffle_q3k: pshufb mask putting word 2k of the low
// 16-byte half in every word of the low half and word 2k + 1 of the high
// half in every word of the high half (sub-blocks 2c, 2c + 1 of chunk c).
inline __m256i half_word_bcast_mask(int k) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>((4 * k + 2) | ((4 * k + 3) << 8))),
                          _mm_set1_epi16(static_cast<int16_t>((4 * k) | ((4 * k + 1) << 8))));
}

// Q3_K: the 16 6-bit scales minus 32 as int8, from the 12 packed bytes (low
// nibbles in bytes 0-7, top 2 bits in bytes 8-11; ggml's kmask unpacking).
inline __m128i q3_K_scales(const uint8_t* packed) {
  constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t a0, a1, a2;
  std::memcpy(&a0, packed, 4);
  std::memcpy(&a1, packed + 4, 4);
  std::memcpy(&a2, packed + 8, 4);
  const __m128i v = _mm_set_epi32(static_cast<int>(((a1 >> 4) & kmask2) | (((a2 >> 6) & kmask1) << 4)),
                                  static_cast<int>(((a0 >> 4) & kmask2) | (((a2 >> 4) & kmask1) << 4)),
                                  static_cast<int>((a1 & kmask2) | (((a2 >> 2) & kmask1) << 4)),
                                  static_cast<int>((a0 & kmask2) | ((a2 & kmask1) << 4)));
  return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

// Q4_K/Q5_K: the 8 scales (words 0..7) and 8 mins (words 8..15) of a block
// as int16, from the 12 packed bytes (scales_mins_k4's unpacking, built in
// registers: no store-forwarding stall).
inline __m256i k4_scales_mins(const uint8_t* packed) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t u0, u1, u2;
  std::memcpy(&u0, packed, 4);
  std::memcpy(&u1, packed + 4, 4);
  std::memcpy(&u2, packed + 8, 4);
  const uint32_t m47 = ((u2 >> 4) & kmask2) | (((u1 >> 6) & kmask3) << 4);
  const uint32_t s47 = (u2 & kmask2) | (((u0 >> 6) & kmask3) << 4);
  const __m128i v = _mm_set_epi32(static_cast<int>(m47), static_cast<int>(u1 & kmask1), static_cast<int>(s47),
                                  static_cast<int>(u0 & kmask1));
  return _mm256_cvtepu8_epi16(v);
}

// The 8 lanes of one chunk: madd(scale words, maddubs(digits, activations)).
// Exact for digits <= 63 and any int8 activations (k_quants.cpp, add_chunk).
inline __m256i chunk_lanes(__m256i u, __m256i a, __m256i scale) {
  return _mm256_madd_epi16(scale, _mm256_maddubs_epi16(u, a));
}

// Q6_K: the same with digit - 32: maddubs(u, a) - maddubs(32, a), off being
// the second term (q6_offset).
inline __m256i chunk_lanes_off(__m256i u, __m256i a, __m256i off, __m256i scale) {
  return _mm256_madd_epi16(scale, _mm256_sub_epi16(_mm256_maddubs_epi16(u, a), off));
}
inline __m256i q6_offset(__m256i a) { return _mm256_maddubs_epi16(_mm256_set1_epi8(32), a); }

// Q4_K/Q5_K min term lanes: madd(mins, hadd(bsums)) (4 int32; the int16
// hadd wraps as k4_min_prod in k_quants.cpp). sm: k4_scales_mins.
inline __m128i k4_min_lanes(__m256i sm, __m128i q8s) {
  return _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), q8s);
}
inline __m128i k4_bsum_pairs(const int16_t* bsums) {
  const __m256i b = load32(bsums);
  return _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
}

// Q5_K block unpacked: digits of the 8 chunks (0..31), the chunk scale
// words, the scales-and-mins words (for k4_min_lanes), d, dmin.
struct BlockK4 {
  __m256i u[8];
  __m256i sc[8];
  __m256i sm;
  float d, dmin;
};

// Scale words of the 8 chunks and the F16 scales of a Q5_K block.
template <typename B>
inline void unpack_k4_scales(const B& b, BlockK4& k) {
  k.sm = k4_scales_mins(b.scales);
  const __m256i s = _mm256_permute4x64_epi64(k.sm, 0x44);  // scales in both halves
  for (int c = 0; c < 8; ++c) k.sc[c] = _mm256_shuffle_epi8(s, word_bcast_mask(c));
  k.d = h2f(b.d);
  k.dmin = h2f(b.dmin);
}

// Fifth bit of element 64j + l: bit 2j of qh[l]; of 64j + 32 + l: bit 2j + 1.
inline void unpack_q5_K(const block_q5_K& b, BlockK4& k) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  __m256i h = load32(b.qh);  // bit 0 of each byte: the next fifth bit
  for (int j = 0; j < 4; ++j) {
    const __m256i q = load32(b.qs + 32 * j);
    k.u[2 * j] = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
    h = _mm256_srli_epi16(h, 1);
    k.u[2 * j + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                     _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
    h = _mm256_srli_epi16(h, 1);
  }
  unpack_k4_scales(b, k);
}

// The block's 8 integer lanes against activations q8 (256 bytes).
inline __m256i k4_lanes(const BlockK4& k, const int8_t* q8) {
  __m256i s = chunk_lanes(k.u[0], load32(q8), k.sc[0]);
  for (int c = 1; c < 8; ++c) s = _mm256_add_epi32(s, chunk_lanes(k.u[c], load32(q8 + 32 * c), k.sc[c]));
  return s;
}

// Q6_K block unpacked: digits 0..63 of the 8 chunks, scale words (low half:
// sub-block 2c, high half: 2c + 1), d.
struct BlockQ6K {
  __m256i u[8];
  __m256i sc[8];
  float d;
};

// Per 128 elements (half h): ql[64h + l] holds elements l (low nibble) and
// l + 64 (high), ql[64h + 32 + l] elements l + 32 and l + 96; qh[32h + l]
// bits 0-1, 2-3, 4-5, 6-7 their top two bits.
inline void unpack_q6_K(const block_q6_K& b, BlockQ6K& k) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03);
  for (int h = 0; h < 2; ++h) {
    const __m256i qa = load32(b.ql + 64 * h), qb = load32(b.ql + 64 * h + 32), qh = load32(b.qh + 32 * h);
    k.u[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(qa, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
    k.u[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(qb, m4),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
    k.u[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
    k.u[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
  }
  const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
  for (int c = 0; c < 8; ++c) {
    const __m128i mask = _mm_set_epi64x(0x0101010101010101LL * (2 * c + 1), 0x0101010101010101LL * (2 * c));
    k.sc[c] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s, mask));
  }
  k.d = h2f(b.d);
}

// The block's 8 integer lanes; off[c] = q6_offset of activation chunk c.
inline __m256i q6_K_lanes(const BlockQ6K& k, const int8_t* q8, const __m256i off[8]) {
  __m256i s = chunk_lanes_off(k.u[0], load32(q8), off[0], k.sc[0]);
  for (int c = 1; c < 8; ++c)
    s = _mm256_add_epi32(s, chunk_lanes_off(k.u[c], load32(q8 + 32 * c), off[c], k.sc[c]));
  return s;
}

inline void q6_offsets(const int8_t* q8, __m256i off[8]) {
  for (int c = 0; c < 8; ++c) off[c] = q6_offset(load32(q8 + 32 * c));
}

// The float accumulators of one Q5_K / Q6_K dot and one block's step, as
// ggml's AVX2 branches run them (k_quants.cpp gives the orders). Every
// kernel of those types that must equal the single-row dots goes through
// these. (Q4_K has its block order: k_quants_avx2.cpp, interleave_avx2.cpp.)
struct AccK {
  __m256 acc = _mm256_setzero_ps();  // the 8 lanes
  float summs = 0.0f;                // Q5_K: the min term
};

// The float step of one block, given its integer lanes (k4_lanes /
// q6_K_lanes, or the same sums built another way: integer sums are exact, so
// any grouping of the chunk products gives the same lanes). ad: the
// activation block's d; q8s: k4_bsum_pairs of its bsums.
// A Q4_K block's 8 integer lanes against activations q8 (256 bytes) in one
// pass, each digit vector and scale word made just before its use (lane q:
// scale times elements 4q..4q+3 of every chunk, summed; their sum is the
// block's isum, k_quants.cpp). sm: the block's k4_scales_mins, for the min
// lanes.
inline __m256i q4_K_lanes_direct(const block_q4_K& b, const int8_t* q8, __m256i& sm) {
  sm = k4_scales_mins(b.scales);
  const __m256i s = _mm256_permute4x64_epi64(sm, 0x44), m4 = _mm256_set1_epi8(0x0F);
  __m256i acc = _mm256_setzero_si256();
  for (int j = 0; j < 4; ++j) {
    const __m256i q = load32(b.qs + 32 * j);
    acc = nc(_mm256_add_epi32(
        acc, chunk_lanes(_mm256_and_si256(q, m4), load32(q8 + 64 * j), _mm256_shuffle_epi8(s, word_bcast_mask(2 * j)))));
    acc = nc(_mm256_add_epi32(acc, chunk_lanes(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), load32(q8 + 64 * j + 32),
                                               _mm256_shuffle_epi8(s, word_bcast_mask(2 * j + 1)))));
  }
  return acc;
}
inline void q5_K_accumulate(AccK& s, const BlockK4& k, float ad, __m128i q8s, __m256i lanes) {
  const float d = ad * k.d, dmin = -ad * k.dmin;
  s.summs = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(dmin), _mm_set_ss(static_cast<float>(hsum_i32_4(k4_min_lanes(k.sm, q8s)))),
                                        _mm_set_ss(s.summs)));
  s.acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), s.acc);
}
inline void q6_K_accumulate(AccK& s, const BlockQ6K& k, float ad, __m256i lanes) {
  const float d = ad * k.d;
  s.acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), s.acc);
}

// q8s: k4_bsum_pairs of the activation block a.
inline void q5_K_step(AccK& s, const BlockK4& k, const block_q8_K& a, __m128i q8s) {
  q5_K_accumulate(s, k, a.d, q8s, k4_lanes(k, a.qs));
}
inline float q5_K_result(const AccK& s) { return hsum_float_8(s.acc) + s.summs; }

// off: q6_offsets of the activation block a.
inline void q6_K_step(AccK& s, const BlockQ6K& k, const block_q8_K& a, const __m256i off[8]) {
  q6_K_accumulate(s, k, a.d, q6_K_lanes(k, a.qs, off));
}
inline float q6_K_result(const AccK& s) { return hsum_float_8(s.acc); }

}  // namespace
}  // namespace synapse::quant::avx2
#endif

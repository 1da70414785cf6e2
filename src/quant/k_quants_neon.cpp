// NEON (ARMv8.2 dotprod) versions of the K-quant dots with Q8_K activations:
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS. k_quants.cpp holds the scalar
// references and the order they define (ggml's AVX2 order, "The float order
// of ggml's AVX2 K-quant dots" there):
//   * integer lanes per block: lane q (0..7) = sum over the block's 8 chunks
//     of 32 elements of scale(chunk, q) * (the exact dot of the chunk's
//     elements 4q..4q+3), scale(q) the sub-block scale of elements 0..15
//     (q < 4) or 16..31 (q >= 4) of the chunk;
//   * float: acc[q] = fma(d, (float)lane[q], acc[q]) over the blocks, d the
//     product of the two block scales; min terms as each kernel says; the
//     8 lanes reduced as hsum_float_8.
// Here a chunk's elements 0..15 and 16..31 are two int8x16_t of digit minus
// offset (Q2_K 0..3, Q3_K -4..3, Q4_K 0..15, Q5_K 0..31, Q6_K -32..31,
// IQ4_XS |value| 0..127); SDOT gives the 4-element sums exactly (int32),
// vmlaq_n_s32 multiplies by the sub-block scale and adds: the same integers
// as the scalar reference (which stay within 2^24 in magnitude), no int16
// step except the bsums pair sums that the reference itself wraps as int16.
// Q4_K follows its own block order (k_quants.cpp, vec_dot_q4_K_q8_K).
// Tested bit-equal to the scalar kernels (tests/cross).
#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>

#include <cmath>

#include "quant/formats.hpp"
#include "quant/neon_util.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::neon {
namespace {

// Integer lanes of one block: lo = lanes 0..3, hi = lanes 4..7.
struct I8 {
  int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
};

// lane += scale * dot of one chunk: w_lo/w_hi the chunk's elements 0..15 /
// 16..31 (int8), a the chunk's 32 activations, sc_lo/sc_hi their scales.
inline void add_chunk(I8& l, int8x16_t w_lo, int8x16_t w_hi, const int8_t* a, int32_t sc_lo, int32_t sc_hi) {
  l.lo = vmlaq_n_s32(l.lo, dot4(w_lo, vld1q_s8(a)), sc_lo);
  l.hi = vmlaq_n_s32(l.hi, dot4(w_hi, vld1q_s8(a + 16)), sc_hi);
}

inline int8x16_t s8(uint8x16_t u) { return vreinterpretq_s8_u8(u); }
inline int8x16_t minus(uint8x16_t u, uint8_t off) { return s8(vsubq_u8(u, vdupq_n_u8(off))); }

// 0x10 (Q5_K) or 0x04 (Q3_K) where bit `bit` of the byte is set, else 0.
inline uint8x16_t bit_as(uint8x16_t bytes, int bit, uint8_t as) {
  return vandq_u8(vtstq_u8(bytes, vdupq_n_u8(static_cast<uint8_t>(1u << bit))), vdupq_n_u8(as));
}

// The min term of ggml's AVX2 Q5_K dot (k_quants.cpp's k4_min_prod):
// the 16 bsums added in adjacent pairs as int16 (ADDP wraps as
// _mm_hadd_epi16 does), then prod[k] = m[2k]*s[2k] + m[2k+1]*s[2k+1].
inline int32x4_t k4_min_prod(const int16_t* bsums, const uint8_t mins[8]) {
  const int16x8_t s = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
  const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mins)));
  return vpaddq_s32(vmull_s16(vget_low_s16(m), vget_low_s16(s)), vmull_high_s16(m, s));
}

// The 6-bit scales minus 32 of the 16 sub-blocks of a Q3_K block
// (k_quants.cpp's q3_K_scale).
inline void q3_K_scales(const uint8_t* scales, int32_t out[16]) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (scales[j] & 0xF) : (scales[j - 8] >> 4);
    const int hi = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = (lo | (hi << 4)) - 32;
  }
}

// The Q5_K integer lanes: `fifth` adds bit c of qh as the digits' 0x10 for
// chunk c (always on now: Q4_K has its own block order).
template <bool kFifth>
inline I8 k4_lanes(const uint8_t* qs, const uint8_t* qh, const int8_t* a, const uint8_t sc[8]) {
  I8 l;
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
  if constexpr (kFifth) {
    h0 = vld1q_u8(qh);
    h1 = vld1q_u8(qh + 16);
  }
  for (int j = 0; j < 4; ++j, qs += 32, a += 64) {  // chunks 2j (low nibbles) and 2j+1 (high nibbles)
    const uint8x16_t q0 = vld1q_u8(qs), q1 = vld1q_u8(qs + 16);
    uint8x16_t u0 = vandq_u8(q0, m4), u1 = vandq_u8(q1, m4);
    uint8x16_t v0 = vshrq_n_u8(q0, 4), v1 = vshrq_n_u8(q1, 4);
    if constexpr (kFifth) {
      u0 = vorrq_u8(u0, bit_as(h0, 2 * j, 0x10));
      u1 = vorrq_u8(u1, bit_as(h1, 2 * j, 0x10));
      v0 = vorrq_u8(v0, bit_as(h0, 2 * j + 1, 0x10));
      v1 = vorrq_u8(v1, bit_as(h1, 2 * j + 1, 0x10));
    }
    add_chunk(l, s8(u0), s8(u1), a, sc[2 * j], sc[2 * j]);
    add_chunk(l, s8(v0), s8(v1), a + 32, sc[2 * j + 1], sc[2 * j + 1]);
  }
  return l;
}

}  // namespace

// ggml_vec_dot_q2_K_q8_K in its AVX2 order (k_quants.cpp): w [n/256]
// block_q2_K, a [n/256] block_q8_K. Per block, d = a.d * fp16(w.d),
// dmin = -a.d * fp16(w.dmin); first the min term,
// acc[k] = fma(dmin, m[2k]*bsums[2k] + m[2k+1]*bsums[2k+1], acc[k]) (m the
// 4-bit mins), then acc[q] = fma(d, lane[q], acc[q]) with digits 0..3 (chunk
// 4j+k = bits 2k of qs[32j..32j+31]) and the 4-bit scales of sub-blocks 2c,
// 2c+1. Result hsum_float_8(acc).
float vec_dot_q2_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q2_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const uint8x16_t m3 = vdupq_n_u8(3);
  F8 acc = f8_zero();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = y[i].d * h2f(x[i].d);
    const float dmin = -y[i].d * h2f(x[i].dmin);
    const uint8_t* sc = x[i].scales;
    const uint8x16_t mins = vshrq_n_u8(vld1q_u8(sc), 4);
    const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
    const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(mins));
    const int16x8_t b0 = vld1q_s16(y[i].bsums), b1 = vld1q_s16(y[i].bsums + 8);
    const int32x4_t p_lo = vpaddq_s32(vmull_s16(vget_low_s16(m0), vget_low_s16(b0)), vmull_high_s16(m0, b0));
    const int32x4_t p_hi = vpaddq_s32(vmull_s16(vget_low_s16(m1), vget_low_s16(b1)), vmull_high_s16(m1, b1));
    acc = scale_fma(acc, dmin, p_lo, p_hi);
    I8 l;
    for (int j = 0; j < QK_K / 128; ++j) {
      const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * j), q1 = vld1q_u8(x[i].qs + 32 * j + 16);
      for (int k = 0; k < 4; ++k) {
        const int c = 4 * j + k;
        const int8x16_t u0 = s8(vandq_u8(vshlq_u8(q0, vdupq_n_s8(static_cast<int8_t>(-2 * k))), m3));
        const int8x16_t u1 = s8(vandq_u8(vshlq_u8(q1, vdupq_n_s8(static_cast<int8_t>(-2 * k))), m3));
        add_chunk(l, u0, u1, y[i].qs + 32 * c, sc[2 * c] & 0xF, sc[2 * c + 1] & 0xF);
      }
    }
    acc = scale_fma(acc, d, l.lo, l.hi);
  }
  return hsum_float_8(acc);
}

// ggml_vec_dot_q3_K_q8_K in its AVX2 order (k_quants.cpp): w [n/256]
// block_q3_K, a [n/256] block_q8_K. Per block, d = a.d * fp16(w.d); digits
// 0..7 (element 128j+32k+l: bits 2k of qs[32j+l], bit 4j+k of hmask[l] as
// the 4), value digit - 4, scales of sub-blocks 2c, 2c+1 minus 32;
// acc[q] = fma(d, lane[q], acc[q]). Result hsum_float_8(acc).
float vec_dot_q3_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q3_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const uint8x16_t m3 = vdupq_n_u8(3);
  F8 acc = f8_zero();
  int32_t sc[16];
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = y[i].d * h2f(x[i].d);
    q3_K_scales(x[i].scales, sc);
    const uint8x16_t h0 = vld1q_u8(x[i].hmask), h1 = vld1q_u8(x[i].hmask + 16);
    I8 l;
    for (int j = 0; j < QK_K / 128; ++j) {
      const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * j), q1 = vld1q_u8(x[i].qs + 32 * j + 16);
      for (int k = 0; k < 4; ++k) {
        const int c = 4 * j + k;
        const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * k));
        const uint8x16_t u0 = vorrq_u8(vandq_u8(vshlq_u8(q0, shift), m3), bit_as(h0, c, 4));
        const uint8x16_t u1 = vorrq_u8(vandq_u8(vshlq_u8(q1, shift), m3), bit_as(h1, c, 4));
        add_chunk(l, minus(u0, 4), minus(u1, 4), y[i].qs + 32 * c, sc[2 * c], sc[2 * c + 1]);
      }
    }
    acc = scale_fma(acc, d, l.lo, l.hi);
  }
  return hsum_float_8(acc);
}

// ggml_vec_dot_q4_K_q8_K in k_quants.cpp's block order: w [n/256]
// block_q4_K, a [n/256] block_q8_K. Per block the exact integers
// isum = sum_s scale_s * (SDOT of sub-block s, lanes summed) and
// msum = sum_s min_s * int16(bsums[2s] + bsums[2s+1]), then
// acc = fma(float(isum), fp16(w.d) * a.d, acc) and
// acc_min = fma(float(msum), fp16(w.dmin) * a.d, acc_min); acc - acc_min.
float vec_dot_q4_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q4_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  float acc = 0.0f, acc_min = 0.0f;
  uint8_t sc[8], mins[8];
  for (int64_t i = 0; i < n / QK_K; ++i) {
    unpack_scale_min_k4(x[i].scales, sc, mins);
    int32_t isum = 0, msum = 0;
    for (int g = 0; g < 4; ++g) {
      const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * g), q1 = vld1q_u8(x[i].qs + 32 * g + 16);
      const int8_t* a = y[i].qs + 64 * g;
      const int8x16_t lo0 = vreinterpretq_s8_u8(vandq_u8(q0, vdupq_n_u8(0x0F)));
      const int8x16_t lo1 = vreinterpretq_s8_u8(vandq_u8(q1, vdupq_n_u8(0x0F)));
      const int8x16_t hi0 = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), hi1 = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
      const int32_t s_lo = vaddvq_s32(vaddq_s32(dot4(lo0, vld1q_s8(a)), dot4(lo1, vld1q_s8(a + 16))));
      const int32_t s_hi = vaddvq_s32(vaddq_s32(dot4(hi0, vld1q_s8(a + 32)), dot4(hi1, vld1q_s8(a + 48))));
      isum += sc[2 * g] * s_lo + sc[2 * g + 1] * s_hi;
    }
    for (int s = 0; s < 8; ++s) msum += mins[s] * static_cast<int16_t>(y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]);
    acc = std::fma(static_cast<float>(isum), h2f(x[i].d) * y[i].d, acc);
    acc_min = std::fma(static_cast<float>(msum), h2f(x[i].dmin) * y[i].d, acc_min);
  }
  return acc - acc_min;
}

// ggml_vec_dot_q5_K_q8_K in its AVX2 order (k_quants.cpp): w [n/256]
// block_q5_K, a [n/256] block_q8_K. 8 lanes and acc with digits 0..31
// (the fifth bit of chunk c's element l is bit c of qh[l]); the min term
// summs = fma(dmin, (prod0 + prod1) + (prod2 + prod3), summs) per block
// (an exact integer sum). Result hsum_float_8(acc) + summs.
float vec_dot_q5_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q5_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  F8 acc = f8_zero();
  float summs = 0.0f;
  uint8_t sc[8], mins[8];
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = y[i].d * h2f(x[i].d);
    const float dmin = -y[i].d * h2f(x[i].dmin);
    unpack_scale_min_k4(x[i].scales, sc, mins);
    summs = std::fma(dmin, static_cast<float>(vaddvq_s32(k4_min_prod(y[i].bsums, mins))), summs);
    const I8 l = k4_lanes<true>(x[i].qs, x[i].qh, y[i].qs, sc);
    acc = scale_fma(acc, d, l.lo, l.hi);
  }
  return hsum_float_8(acc) + summs;
}

// ggml_vec_dot_q6_K_q8_K in its AVX2 order (k_quants.cpp): w [n/256]
// block_q6_K, a [n/256] block_q8_K. Per block, d = a.d * fp16(w.d); digits
// 0..63 (low 4 bits from ql, high 2 from qh), value digit - 32; chunk c's
// lanes 0-3 with the int8 scale 2c, lanes 4-7 with 2c + 1;
// acc[q] = fma(d, lane[q], acc[q]). Result hsum_float_8(acc).
float vec_dot_q6_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q6_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
  F8 acc = f8_zero();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = y[i].d * h2f(x[i].d);
    const int8_t* sc = x[i].scales;
    I8 l;
    for (int j = 0; j < QK_K / 128; ++j) {  // 128 values: ql[64j..], qh[32j..], chunks 4j..4j+3
      const uint8_t* ql = x[i].ql + 64 * j;
      const uint8_t* qh = x[i].qh + 32 * j;
      const int8_t* a = y[i].qs + 128 * j;
      const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
      const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
      const int c = 4 * j;
      // values l (bits 0-1 of qh), l+32 (bits 2-3), l+64 (4-5), l+96 (6-7)
      add_chunk(l, minus(vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(h0, 4), m30)), 32),
                minus(vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(h1, 4), m30)), 32), a, sc[2 * c], sc[2 * c + 1]);
      add_chunk(l, minus(vorrq_u8(vandq_u8(l2, m4), vandq_u8(vshlq_n_u8(h0, 2), m30)), 32),
                minus(vorrq_u8(vandq_u8(l3, m4), vandq_u8(vshlq_n_u8(h1, 2), m30)), 32), a + 32, sc[2 * c + 2],
                sc[2 * c + 3]);
      add_chunk(l, minus(vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(h0, m30)), 32),
                minus(vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(h1, m30)), 32), a + 64, sc[2 * c + 4], sc[2 * c + 5]);
      add_chunk(l, minus(vorrq_u8(vshrq_n_u8(l2, 4), vandq_u8(vshrq_n_u8(h0, 2), m30)), 32),
                minus(vorrq_u8(vshrq_n_u8(l3, 4), vandq_u8(vshrq_n_u8(h1, 2), m30)), 32), a + 96, sc[2 * c + 6],
                sc[2 * c + 7]);
    }
    acc = scale_fma(acc, d, l.lo, l.hi);
  }
  return hsum_float_8(acc);
}

// ggml_vec_dot_iq4_xs_q8_K in its AVX2 order (k_quants.cpp): w [n/256]
// block_iq4_xs, a [n/256] block_q8_K. Per block, d = fp16(w.d) * a.d;
// sub-block c (32 values v = kvalues_iq4nl[nibble], scale ls - 32) adds
// (ls - 32) * sum |v| * sign(a, v) over each group of 4 to lane q, where
// sign(a, v) negates a for v < 0 with int8 wrap-around (-(-128) = -128, as
// _mm256_sign_epi8 in ggml's mul_add_epi8): the reference's quirk kept.
// acc[q] = fma(d, lane[q], acc[q]). Result hsum_float_8(acc).
float vec_dot_iq4_xs_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_iq4_xs*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const int8x16_t table = vld1q_s8(kvalues_iq4nl);
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  F8 acc = f8_zero();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = h2f(x[i].d) * y[i].d;
    I8 l;
    for (int c = 0; c < QK_K / 32; ++c) {
      const int ls = ((x[i].scales_l[c / 2] >> 4 * (c % 2)) & 0xf) | (((x[i].scales_h >> 2 * c) & 3) << 4);
      const uint8x16_t q = vld1q_u8(x[i].qs + 16 * c);
      const int8x16_t v0 = vqtbl1q_s8(table, vandq_u8(q, m4)), v1 = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
      const int8_t* a = y[i].qs + 32 * c;
      const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16);
      const int8x16_t s0 = vbslq_s8(vcltzq_s8(v0), vnegq_s8(a0), a0);
      const int8x16_t s1 = vbslq_s8(vcltzq_s8(v1), vnegq_s8(a1), a1);
      l.lo = vmlaq_n_s32(l.lo, dot4(vabsq_s8(v0), s0), ls - 32);
      l.hi = vmlaq_n_s32(l.hi, dot4(vabsq_s8(v1), s1), ls - 32);
    }
    acc = scale_fma(acc, d, l.lo, l.hi);
  }
  return hsum_float_8(acc);
}

}  // namespace synapse::quant::neon
#elif defined(__aarch64__)
#error "the *_neon.cpp kernels need the dotprod extension: CMakeLists.txt builds them with -march=armv8.2-a+dotprod"
#endif

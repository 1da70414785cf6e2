// NEON (ARMv8.2 dotprod) versions of the dots of the 32-element block formats
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4) with Q8_0/Q8_1 activations.
// legacy.cpp holds the scalar references and the order they define (ggml's
// AVX2 order): per block 8 int32 lanes, lane l = the exact integer dot of
// elements 4l..4l+3; each lane converted to float and accumulated with one
// fused multiply-add by d_w * d_a (the product rounded to float first); the
// lanes reduced as hsum_float_8; for Q4_1/Q5_1 a separate float
// summs = fma(m_w, s_a, summs) per block, added last. Q4_0, Q5_0, Q8_0,
// IQ4_NL and MXFP4 instead sum each block's lanes to one exact integer and
// take one scalar fused multiply-add per block (legacy.cpp's Q4_0 order).
//
// Block layout to lanes: the weight digits of elements 0..15 (low nibbles)
// and 16..31 (high nibbles) are two int8x16_t; SDOT (vdotq_s32) of each with
// the activation bytes 0..15 / 16..31 gives lanes 0..3 / 4..7, each the sum
// of 4 consecutive exact int8 products in 32 bits: exact for every byte
// value (digits -16..31 or int8 weights, activations -128..127; no int16
// step anywhere). Tested bit-equal to the scalar kernels (tests/cross).
#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>

#include <cmath>

#include "quant/formats.hpp"
#include "quant/neon_util.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::neon {
namespace {

// Low nibbles (elements 0..15) and high nibbles (elements 16..31) of a
// 4-bit block, each byte 0..15.
struct Nibbles {
  uint8x16_t lo, hi;
};

inline Nibbles unpack_nibbles(const uint8_t* qs) {
  const uint8x16_t v = vld1q_u8(qs);
  return {vandq_u8(v, vdupq_n_u8(0x0F)), vshrq_n_u8(v, 4)};
}

// The fifth bits of Q5_0/Q5_1: byte j = 0x10 when bit j of the little-endian
// 32-bit qh is set, else 0; lo = elements 0..15, hi = 16..31.
inline Nibbles fifth_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const uint8x8_t b = vcreate_u8(bits);  // bytes qh[0..3], then zeros
  static constexpr uint8_t kIdxLo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  static constexpr uint8_t kIdxHi[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  static constexpr uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bq = vcombine_u8(b, b);
  const uint8x16_t bit = vld1q_u8(kBit), x10 = vdupq_n_u8(0x10);
  const uint8x16_t lo = vandq_u8(vtstq_u8(vqtbl1q_u8(bq, vld1q_u8(kIdxLo)), bit), x10);
  const uint8x16_t hi = vandq_u8(vtstq_u8(vqtbl1q_u8(bq, vld1q_u8(kIdxHi)), bit), x10);
  return {lo, hi};
}

// Digits minus `off` as int8 (digits 0..31, off 0, 8 or 16: -16..31).
inline int8x16_t digits(uint8x16_t u, uint8_t off) {
  return vreinterpretq_s8_u8(vsubq_u8(u, vdupq_n_u8(off)));
}

// One block's 8 lanes scaled into acc: w_lo/w_hi the int8 weights of
// elements 0..15 / 16..31, a the 32 activation bytes.
inline F8 block_fma(F8 acc, float d, int8x16_t w_lo, int8x16_t w_hi, const int8_t* a) {
  return scale_fma(acc, d, dot4(w_lo, vld1q_s8(a)), dot4(w_hi, vld1q_s8(a + 16)));
}

}  // namespace

// ggml_vec_dot_q4_0_q8_0 in legacy.cpp's Q4_0 order: w [n/32] block_q4_0, a [n/32] block_q8_0.
float vec_dot_q4_0_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q4_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  // legacy.cpp's Q4_0 order: the block's exact integer dot (SDOT lanes
  // summed), then one scalar fused multiply-add per block.
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const Nibbles q = unpack_nibbles(w[i].qs);
    const int32x4_t l = vaddq_s32(dot4(digits(q.lo, 8), vld1q_s8(a[i].qs)), dot4(digits(q.hi, 8), vld1q_s8(a[i].qs + 16)));
    acc = std::fma(static_cast<float>(vaddvq_s32(l)), h2f(w[i].d) * h2f(a[i].d), acc);
  }
  return acc;
}

// ggml_vec_dot_q4_1_q8_1: w [n/32] block_q4_1, a [n/32] block_q8_1.
float vec_dot_q4_1_q8_1(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q4_1*>(vw);
  const auto* a = static_cast<const block_q8_1*>(va);
  F8 acc = f8_zero();
  float summs = 0.0f;
  for (int64_t i = 0; i < n / QK4_1; ++i) {
    summs = std::fma(h2f(w[i].m), h2f(a[i].s), summs);
    const Nibbles q = unpack_nibbles(w[i].qs);
    acc = block_fma(acc, h2f(w[i].d) * h2f(a[i].d), digits(q.lo, 0), digits(q.hi, 0), a[i].qs);
  }
  return hsum_float_8(acc) + summs;
}

// ggml_vec_dot_q5_0_q8_0: w [n/32] block_q5_0, a [n/32] block_q8_0.
float vec_dot_q5_0_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q5_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  // legacy.cpp's Q4_0 order (as vec_dot_q4_0_q8_0 above).
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK5_0; ++i) {
    const Nibbles q = unpack_nibbles(w[i].qs), h = fifth_bits(w[i].qh);
    const int32x4_t l = vaddq_s32(dot4(digits(vorrq_u8(q.lo, h.lo), 16), vld1q_s8(a[i].qs)),
                                  dot4(digits(vorrq_u8(q.hi, h.hi), 16), vld1q_s8(a[i].qs + 16)));
    acc = std::fma(static_cast<float>(vaddvq_s32(l)), h2f(w[i].d) * h2f(a[i].d), acc);
  }
  return acc;
}

// ggml_vec_dot_q5_1_q8_1: w [n/32] block_q5_1, a [n/32] block_q8_1.
float vec_dot_q5_1_q8_1(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q5_1*>(vw);
  const auto* a = static_cast<const block_q8_1*>(va);
  F8 acc = f8_zero();
  float summs = 0.0f;
  for (int64_t i = 0; i < n / QK5_1; ++i) {
    summs = std::fma(h2f(w[i].m), h2f(a[i].s), summs);
    const Nibbles q = unpack_nibbles(w[i].qs), h = fifth_bits(w[i].qh);
    acc = block_fma(acc, h2f(w[i].d) * h2f(a[i].d), digits(vorrq_u8(q.lo, h.lo), 0), digits(vorrq_u8(q.hi, h.hi), 0),
                    a[i].qs);
  }
  return hsum_float_8(acc) + summs;
}

// ggml_vec_dot_q8_0_q8_0 in legacy.cpp's Q4_0 order: w, a [n/32] block_q8_0.
float vec_dot_q8_0_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q8_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const int32x4_t l = vaddq_s32(dot4(vld1q_s8(w[i].qs), vld1q_s8(a[i].qs)), dot4(vld1q_s8(w[i].qs + 16), vld1q_s8(a[i].qs + 16)));
    acc = std::fma(static_cast<float>(vaddvq_s32(l)), h2f(w[i].d) * h2f(a[i].d), acc);
  }
  return acc;
}

// ggml_vec_dot_iq4_nl_q8_0 in legacy.cpp's Q4_0 order: w [n/32]
// block_iq4_nl, a [n/32] block_q8_0; the nibbles index kvalues_iq4nl (TBL),
// the block's SDOT lanes summed to its exact integer dot, one scalar fused
// multiply-add per block by fp16(d_w) * fp16(d_a).
float vec_dot_iq4_nl_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_iq4_nl*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  const int8x16_t table = vld1q_s8(kvalues_iq4nl);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK4_NL; ++i) {
    const Nibbles q = unpack_nibbles(w[i].qs);
    const int32x4_t l = vaddq_s32(dot4(vqtbl1q_s8(table, q.lo), vld1q_s8(a[i].qs)),
                                  dot4(vqtbl1q_s8(table, q.hi), vld1q_s8(a[i].qs + 16)));
    acc = std::fma(static_cast<float>(vaddvq_s32(l)), h2f(w[i].d) * h2f(a[i].d), acc);
  }
  return acc;
}

// ggml_vec_dot_mxfp4_q8_0 in legacy.cpp's Q4_0 order: the nibbles index
// kvalues_mxfp4 (TBL), one scalar fused multiply-add per block by
// fp16(d_a) * 2^(e - 128).
float vec_dot_mxfp4_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_mxfp4*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  const int8x16_t table = vld1q_s8(kvalues_mxfp4);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK_MXFP4; ++i) {
    const Nibbles q = unpack_nibbles(w[i].qs);
    const int32x4_t l = vaddq_s32(dot4(vqtbl1q_s8(table, q.lo), vld1q_s8(a[i].qs)),
                                  dot4(vqtbl1q_s8(table, q.hi), vld1q_s8(a[i].qs + 16)));
    acc = std::fma(static_cast<float>(vaddvq_s32(l)), h2f(a[i].d) * kE8M0Half.v[w[i].e], acc);
  }
  return acc;
}

}  // namespace synapse::quant::neon
#elif defined(__aarch64__)
#error "the *_neon.cpp kernels need the dotprod extension: CMakeLists.txt builds them with -march=armv8.2-a+dotprod"
#endif

// NEON (ARMv8.2 dotprod) versions of the ternary dots, TQ1_0 and TQ2_0 with
// Q8_K activations. ternary.cpp holds the scalar references and their order
// (ggml's scalar ggml_vec_dot_tq{1,2}_0_q8_K): one exact integer sum per
// block (order-free), then sumf += (float)sum * d with d the product of the
// two block scales, a rounded multiply and a rounded add (no fma), block
// after block. Here the sum comes from SDOT lanes added up as integers.
// Tested bit-equal to the scalar kernels (tests/cross).
#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>

#include "quant/formats.hpp"
#include "quant/neon_util.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::neon {
namespace {

// Trits of TQ1_0 bytes already multiplied by 3^k (mod 256): ((q * 3) >> 8)
// - 1, a value -1, 0 or 1 per byte (ternary.cpp's unpack_trit).
inline int8x16_t trits(uint8x16_t q) {
  const uint8x16_t three = vdupq_n_u8(3);
  const uint8x8_t lo = vshrn_n_u16(vmull_u8(vget_low_u8(q), vget_low_u8(three)), 8);
  const uint8x8_t hi = vshrn_n_u16(vmull_high_u8(q, three), 8);
  return vreinterpretq_s8_u8(vsubq_u8(vcombine_u8(lo, hi), vdupq_n_u8(1)));
}

}  // namespace

// ggml_vec_dot_tq1_0_q8_K: w [n/256] block_tq1_0, a [n/256] block_q8_K.
// Trit k of qs[m] (m < 32) pairs with activation 32k + m, of qs[32 + m]
// (m < 16) with 160 + 16k + m, of qh[j] (k < 4) with 240 + 4k + j.
float vec_dot_tq1_0_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_tq1_0*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  static constexpr uint8_t kPow3Qh[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
  const uint8x16_t pow_qh = vld1q_u8(kPow3Qh);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const int8_t* q8 = y[i].qs;
    int32x4_t s = vdupq_n_s32(0);
    const uint8x16_t b0 = vld1q_u8(x[i].qs), b1 = vld1q_u8(x[i].qs + 16), b2 = vld1q_u8(x[i].qs + 32);
    for (int k = 0; k < 5; ++k) {
      const uint8x16_t p = vdupq_n_u8(kPow3[k]);
      s = vdotq_s32(s, trits(vmulq_u8(b0, p)), vld1q_s8(q8 + 32 * k));
      s = vdotq_s32(s, trits(vmulq_u8(b1, p)), vld1q_s8(q8 + 32 * k + 16));
      s = vdotq_s32(s, trits(vmulq_u8(b2, p)), vld1q_s8(q8 + 160 + 16 * k));
    }
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    s = vdotq_s32(s, trits(vmulq_u8(vreinterpretq_u8_u32(vdupq_n_u32(qh)), pow_qh)), vld1q_s8(q8 + 240));
    const int sum = vaddvq_s32(s);
    sumf += static_cast<float>(sum) * (h2f(x[i].d) * y[i].d);
  }
  return sumf;
}

// ggml_vec_dot_tq2_0_q8_K: w [n/256] block_tq2_0, a [n/256] block_q8_K.
// Bits 2k of qs[32j + m] (value - 1) pair with activation 128j + 32k + m.
float vec_dot_tq2_0_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_tq2_0*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int32x4_t s = vdupq_n_s32(0);
    for (int j = 0; j < 2; ++j) {
      const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * j), q1 = vld1q_u8(x[i].qs + 32 * j + 16);
      const int8_t* a = y[i].qs + 128 * j;
      for (int k = 0; k < 4; ++k) {
        const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * k));
        const uint8x16_t t0 = vsubq_u8(vandq_u8(vshlq_u8(q0, shift), m3), one);
        const uint8x16_t t1 = vsubq_u8(vandq_u8(vshlq_u8(q1, shift), m3), one);
        s = vdotq_s32(s, vreinterpretq_s8_u8(t0), vld1q_s8(a + 32 * k));
        s = vdotq_s32(s, vreinterpretq_s8_u8(t1), vld1q_s8(a + 32 * k + 16));
      }
    }
    const int32_t sumi = vaddvq_s32(s);
    const float d = y[i].d * h2f(x[i].d);
    sumf += static_cast<float>(sumi) * d;
  }
  return sumf;
}

}  // namespace synapse::quant::neon
#elif defined(__aarch64__)
#error "the *_neon.cpp kernels need the dotprod extension: CMakeLists.txt builds them with -march=armv8.2-a+dotprod"
#endif

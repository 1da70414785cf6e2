// Small NEON helpers shared by the ARM64 kernel files (*_neon.cpp only: they
// are built with -march=armv8.2-a+dotprod). The float steps mirror the scalar
// references' (legacy.cpp, float.cpp, k_quants.cpp) one for one:
//   8 float lanes        two float32x4_t, lanes 0..3 and 4..7
//   acc = fma(d, x, acc) vfmaq_f32(acc, x, d): one rounding, as std::fma
//   int32 -> float       vcvtq_f32_s32 (round to nearest even, as the cast)
//   hsum_float_8         ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))
// Everything here is static inline in an anonymous namespace, so no function
// compiled with the dotprod flags can be picked by the linker for code that
// runs on a CPU without them.
#pragma once
#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "quant/fp16.hpp"

namespace synapse::quant::neon {
namespace {

// F16 bits -> float with the FCVT instruction: exact for every finite value
// and infinity (subnormals included: FCVT ignores FPCR.FZ16); a NaN comes
// back quiet, where fp16_to_fp32 keeps a signalling payload (NaN in, NaN out
// either way).
[[maybe_unused]] inline float h2f(ggml_fp16_t h) {
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

// Eight float lanes: lo = lanes 0..3, hi = lanes 4..7.
struct F8 {
  float32x4_t lo, hi;
};

[[maybe_unused]] inline F8 f8_zero() { return {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }

// acc[l] = fma(d, (float)lane[l], acc[l]) for the 8 int32 lanes (lo, hi).
[[maybe_unused]] inline F8 scale_fma(F8 acc, float d, int32x4_t lo, int32x4_t hi) {
  const float32x4_t vd = vdupq_n_f32(d);
  return {vfmaq_f32(acc.lo, vcvtq_f32_s32(lo), vd), vfmaq_f32(acc.hi, vcvtq_f32_s32(hi), vd)};
}

// ggml's hsum_float_8: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
[[maybe_unused]] inline float hsum_float_8(F8 a) {
  const float32x4_t r = vaddq_f32(a.lo, a.hi);                        // r_l = a_l + a_{l+4}
  const float32x2_t s = vadd_f32(vget_low_f32(r), vget_high_f32(r));  // (r0+r2, r1+r3)
  return vget_lane_f32(s, 0) + vget_lane_f32(s, 1);
}

// Lanes of sum w*a over groups of 4 consecutive bytes: lane l of the result
// = w[4l]*a[4l] + ... + w[4l+3]*a[4l+3], exact for every int8 value (SDOT
// sums the four products, each at most 2^14 in magnitude, in 32 bits).
[[maybe_unused]] inline int32x4_t dot4(int8x16_t w, int8x16_t a) { return vdotq_s32(vdupq_n_s32(0), w, a); }

}  // namespace
}  // namespace synapse::quant::neon
#endif

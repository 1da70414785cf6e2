// NEON versions of the F32/F16/BF16 dots (float.cpp holds the scalar
// references and the orders they define; BF16: element i into lane i % 8 of one
// 8-lane fused multiply-add accumulator over the first n - n % 8 elements,
// ggml's hsum_float_8, then the n % 8 tail one fused multiply-add at a time).
// The 8 lanes are two float32x4_t (elements i..i+3 and i+4..i+7 of each
// group of 8). F16 and BF16 widen to float exactly (FCVTL; a 16-bit shift).
// Equal to the scalar kernels bit for bit (tests/cross).
#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>

#include <cmath>

#include "quant/formats.hpp"
#include "quant/neon_util.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::neon {
namespace {

struct LoadBF16 {
  static float32x4_t load(const ggml_bf16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
  static float get(ggml_bf16_t v) {
    const uint32_t u = static_cast<uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
};

// The common loop; one dependency chain per lane, as the order requires.
template <typename L, typename T>
inline float dot(int64_t n, const T* w, const T* a) {
  F8 acc = f8_zero();
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) {
    acc.lo = vfmaq_f32(acc.lo, L::load(w + i), L::load(a + i));
    acc.hi = vfmaq_f32(acc.hi, L::load(w + i + 4), L::load(a + i + 4));
  }
  float sum = hsum_float_8(acc);
  for (int64_t i = n8; i < n; ++i) sum = std::fma(L::get(w[i]), L::get(a[i]), sum);
  return sum;
}

}  // namespace

// F32 and F16 follow llama.cpp's AVX-512 orders (float.cpp), 16 lanes:
// the scalar references until a NEON form of them is written.
float vec_dot_f32_f32(int64_t n, const void* w, const void* a) { return quant::vec_dot_f32_f32(n, w, a); }

float vec_dot_f16_f16(int64_t n, const void* w, const void* a) { return quant::vec_dot_f16_f16(n, w, a); }

// w, a: [n] ggml_bf16_t (the activation already rounded to BF16).
float vec_dot_bf16_bf16(int64_t n, const void* w, const void* a) {
  return dot<LoadBF16>(n, static_cast<const ggml_bf16_t*>(w), static_cast<const ggml_bf16_t*>(a));
}

}  // namespace synapse::quant::neon
#elif defined(__aarch64__)
#error "the *_neon.cpp kernels need the dotprod extension: CMakeLists.txt builds them with -march=armv8.2-a+dotprod"
#endif

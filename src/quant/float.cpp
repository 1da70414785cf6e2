// Plain float formats: F32, F16 (IEEE half) and BF16 rows, and their dots.
//
// Conversions are element-wise and exact where the format allows:
//   F16:  ggml's ggml_fp32_to_fp16_row / ggml_fp16_to_fp32_row; on x86 with
//         F16C ggml uses vcvtps2ph with round-to-nearest-even, which
//         fp32_to_fp16 reproduces bit for bit (fp16.hpp).
//   BF16: ggml's ggml_fp32_to_bf16_row (ggml_compute_fp32_to_bf16: round to
//         nearest even, NaN made quiet) and ggml_bf16_to_fp32_row (exact).
//
// Dots. F32 and F16 follow llama.cpp v0.5.0 on AVX-512 (the build of the
// golden perplexity figures, golden/perplexity/README.md), where both
// operands are rows of the weight's type (ggml converts the activation row
// to F16 first for an F16 weight), every product formed in float:
//   n % 16 == 0: llamafile's tinyBLAS<16, __m512> (ggml_compute_forward_mul_mat
//     tries llamafile_sgemm first; it refuses k % 16 != 0): element i goes to
//     lane i % 16 of one fused multiply-add accumulator, then the lanes are
//     summed as _mm512_reduce_add_ps (hsum_float_16).
//   otherwise: ggml_vec_dot_f32 / ggml_vec_dot_f16 (GGML_F32_STEP 64, 4
//     accumulators of 16 lanes): element i of the first n & ~63 goes to lane
//     i % 16 of accumulator (i / 16) % 4; the accumulators are added as
//     (acc0 + acc2) + (acc1 + acc3), summed by hsum_float_16, and the tail is
//     added one element at a time: F32 in float (GCC's vectorized tail:
//     rounded products for the groups of 16 and 8, fused multiply-adds for
//     the last n % 8), F16 in double (ggml_float), each product rounded to
//     float first, the result rounded to float at the end.
// BF16 keeps the 8-lane order of the AVX2 build (tinyBLAS<8, __m256>):
// element i into lane i % 8 of one accumulator over n - n % 8 elements,
// hsum_float_8, then the tail one fused multiply-add at a time.
// The order is fixed per row (DESIGN.md contract 2); the SIMD kernels
// reproduce it exactly.
#include <cmath>
#include <cstring>

#include "quant/formats.hpp"

namespace synapse::quant {
namespace {

// The BF16 dot: `get(p, i)` decodes element i of row p to float.
template <typename T, typename Get>
float dot_8_lanes(int64_t n, const T* w, const T* a, Get get) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(get(w, i + l), get(a, i + l), acc[l]);
  }
  float sum = hsum_float_8(acc);
  for (int64_t i = n8; i < n; ++i) sum = std::fma(get(w, i), get(a, i), sum);
  return sum;
}

// ggml_vec_dot_f32 (kDoubleTail false) and ggml_vec_dot_f16 (true) of the
// AVX-512 build: 4 x 16 lanes over the multiples of 64, then the tail.
template <bool kDoubleTail, typename T, typename Get>
float dot_ggml_vec_order(int64_t n, const T* w, const T* a, Get get) {
  float acc[4][16] = {};
  const int64_t np = n & ~int64_t{63};
  for (int64_t i = 0; i < np; i += 64)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 16; ++l) acc[j][l] = std::fma(get(w, i + 16 * j + l), get(a, i + 16 * j + l), acc[j][l]);
  for (int l = 0; l < 16; ++l) {
    acc[0][l] += acc[2][l];
    acc[1][l] += acc[3][l];
  }
  for (int l = 0; l < 16; ++l) acc[0][l] += acc[1][l];
  const float r = hsum_float_16(acc[0]);
  if constexpr (kDoubleTail) {
    double s = r;
    for (int64_t i = np; i < n; ++i) s += static_cast<double>(get(w, i) * get(a, i));
    return static_cast<float>(s);
  } else {
    // GCC vectorizes this tail of ggml_vec_dot_f32 (read off v0.5.0's object
    // code): 16 and then 8 products at a time, each rounded, added in order;
    // the last n % 8 with scalar fused multiply-adds.
    float s = r;
    int64_t i = np;
    for (; n - i >= 16; i += 16)
      for (int l = 0; l < 16; ++l) s += get(w, i + l) * get(a, i + l);
    if (n - i >= 8) {
      for (int l = 0; l < 8; ++l) s += get(w, i + l) * get(a, i + l);
      i += 8;
    }
    for (; i < n; ++i) s = std::fma(get(w, i), get(a, i), s);
    return s;
  }
}

// The F32 and F16 dots of the AVX-512 build's matrix products.
template <bool kDoubleTail, typename T, typename Get>
float dot_avx512_order(int64_t n, const T* w, const T* a, Get get) {
  if (n % 16 == 0) {
    float acc[16] = {};
    for (int64_t i = 0; i < n; i += 16)
      for (int l = 0; l < 16; ++l) acc[l] = std::fma(get(w, i + l), get(a, i + l), acc[l]);
    return hsum_float_16(acc);
  }
  return dot_ggml_vec_order<kDoubleTail>(n, w, a, get);
}

}  // namespace

// F32: x [n] floats -> y [n] floats (copy).
void quantize_row_f32(const float* x, void* y, int64_t n) {
  std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_row_f32(const void* x, float* y, int64_t n) {
  std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
}

// F16: x [n] floats -> y [n] ggml_fp16_t, round to nearest even
// (ggml_cpu_fp32_to_fp16 with F16C).
void quantize_row_f16(const float* x, void* y, int64_t n) {
  auto* out = static_cast<ggml_fp16_t*>(y);
  for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

void dequantize_row_f16(const void* x, float* y, int64_t n) {
  const auto* in = static_cast<const ggml_fp16_t*>(x);
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(in[i]);
}

// BF16: x [n] floats -> y [n] ggml_bf16_t, round to nearest even, NaN quiet
// (ggml_cpu_fp32_to_bf16).
void quantize_row_bf16(const float* x, void* y, int64_t n) {
  auto* out = static_cast<ggml_bf16_t*>(y);
  for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_bf16(x[i]);
}

void dequantize_row_bf16(const void* x, float* y, int64_t n) {
  const auto* in = static_cast<const ggml_bf16_t*>(x);
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(in[i]);
}

// w, a: [n] floats.
float vec_dot_f32_f32(int64_t n, const void* w, const void* a) {
  return dot_avx512_order<false>(n, static_cast<const float*>(w), static_cast<const float*>(a),
                                 [](const float* p, int64_t i) { return p[i]; });
}

float vec_dot_f32_ggml(int64_t n, const float* x, const float* y) {
  return dot_ggml_vec_order<false>(n, x, y, [](const float* p, int64_t i) { return p[i]; });
}

// w, a: [n] ggml_fp16_t (the activation already rounded to F16).
float vec_dot_f16_f16(int64_t n, const void* w, const void* a) {
  return dot_avx512_order<true>(n, static_cast<const ggml_fp16_t*>(w), static_cast<const ggml_fp16_t*>(a),
                                [](const ggml_fp16_t* p, int64_t i) { return fp16_to_fp32(p[i]); });
}

// w, a: [n] ggml_bf16_t (the activation already rounded to BF16).
float vec_dot_bf16_bf16(int64_t n, const void* w, const void* a) {
  return dot_8_lanes(n, static_cast<const ggml_bf16_t*>(w), static_cast<const ggml_bf16_t*>(a),
                     [](const ggml_bf16_t* p, int64_t i) { return bf16_to_fp32(p[i]); });
}

}  // namespace synapse::quant

// Plain float formats: F32, F16 (IEEE half) and BF16 rows, and their dots.
//
// Conversions are element-wise and exact where the format allows:
//   F16:  ggml's ggml_fp32_to_fp16_row / ggml_fp16_to_fp32_row; on x86 with
//         F16C ggml uses vcvtps2ph with round-to-nearest-even, which
//         fp32_to_fp16 reproduces bit for bit (fp16.hpp).
//   BF16: ggml's ggml_fp32_to_bf16_row (ggml_compute_fp32_to_bf16: round to
//         nearest even, NaN made quiet) and ggml_bf16_to_fp32_row (exact).
//
// Dots (ggml_vec_dot_f32 / _f16 / _bf16 and llamafile's tinyBLAS, which
// serves ggml's F32/F16/BF16 matrix products on AVX2): both operands are
// rows of the same type (ggml converts the activation row to the weight's
// type first: vec_dot_type F16 for F16, BF16 for BF16), every product is
// formed in float. Reduction order (fixed per row, DESIGN.md contract 2):
// element i goes to lane i % 8 of an 8-lane accumulator updated with a fused
// multiply-add, over the first n - n % 8 elements; the lanes are then reduced
// as ggml's hsum_float_8 does, ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); the
// n % 8 trailing elements are then added one by one with fused multiply-adds.
// This is the order of tinyBLAS's 8-wide AVX2 kernel (one __m256 accumulator
// per output, _mm256_fmadd_ps, hsum), so a SIMD kernel reproduces it exactly.
#include <cmath>
#include <cstring>

#include "quant/formats.hpp"

namespace synapse::quant {
namespace {

// The common dot: `get(p, i)` decodes element i of row p to float.
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
  return dot_8_lanes(n, static_cast<const float*>(w), static_cast<const float*>(a),
                     [](const float* p, int64_t i) { return p[i]; });
}

// w, a: [n] ggml_fp16_t (the activation already rounded to F16).
float vec_dot_f16_f16(int64_t n, const void* w, const void* a) {
  return dot_8_lanes(n, static_cast<const ggml_fp16_t*>(w), static_cast<const ggml_fp16_t*>(a),
                     [](const ggml_fp16_t* p, int64_t i) { return fp16_to_fp32(p[i]); });
}

// w, a: [n] ggml_bf16_t (the activation already rounded to BF16).
float vec_dot_bf16_bf16(int64_t n, const void* w, const void* a) {
  return dot_8_lanes(n, static_cast<const ggml_bf16_t*>(w), static_cast<const ggml_bf16_t*>(a),
                     [](const ggml_bf16_t* p, int64_t i) { return bf16_to_fp32(p[i]); });
}

}  // namespace synapse::quant

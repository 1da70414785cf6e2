// AVX2 versions of the F32/F16/BF16 dots and of the F16 row conversion
// (float.cpp holds the scalar references and the orders they define: F32
// and F16 those of llama.cpp's AVX-512 build, 16 lanes as two __m256; BF16
// 8 lanes). Equal to the scalar kernels bit for bit
// (tests/quant/simd_test.cpp).
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cmath>

#include "quant/formats.hpp"
#include "quant/avx2_util.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::avx2 {
namespace {


inline __m256 load_f16(const ggml_fp16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline __m256 load_bf16(const ggml_bf16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

// The common loop: `load(p)` gives 8 floats of row p; `get(p, i)` one element.
// Four accumulators would be faster but change the order; the one-FMA chain
// (latency 4) is enough to saturate memory at 8 floats per 4 cycles for
// everything but cache-resident rows.
template <typename T, typename Load, typename Get>
inline float dot(int64_t n, const T* w, const T* a, Load load, Get get) {
  __m256 acc = _mm256_setzero_ps();
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) acc = _mm256_fmadd_ps(load(w + i), load(a + i), acc);
  float sum = hsum_float_8(acc);
  for (int64_t i = n8; i < n; ++i) sum = std::fma(get(w[i]), get(a[i]), sum);
  return sum;
}

// float.cpp's dot_avx512_order: a 16-lane accumulator is two __m256 (lanes
// 0..7, 8..15); hsum_float_16 = hsum_float_8(high + low).
template <bool kDoubleTail, typename T, typename Load, typename Get>
inline float dot16(int64_t n, const T* w, const T* a, Load load, Get get) {
  if (n % 16 == 0) {
    __m256 lo = _mm256_setzero_ps(), hi = lo;
    for (int64_t i = 0; i < n; i += 16) {
      lo = _mm256_fmadd_ps(load(w + i), load(a + i), lo);
      hi = _mm256_fmadd_ps(load(w + i + 8), load(a + i + 8), hi);
    }
    return hsum_float_8(_mm256_add_ps(hi, lo));
  }
  __m256 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
  const int64_t np = n & ~int64_t{63};
  for (int64_t i = 0; i < np; i += 64)
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(load(w + i + 8 * j), load(a + i + 8 * j), acc[j]);
  for (int j = 0; j < 4; ++j) acc[j] = _mm256_add_ps(acc[j], acc[j + 4]);  // acc0 += acc2, acc1 += acc3
  acc[0] = _mm256_add_ps(acc[0], acc[2]);                                   // acc0 += acc1
  acc[1] = _mm256_add_ps(acc[1], acc[3]);
  const float r = hsum_float_8(_mm256_add_ps(acc[1], acc[0]));
  if constexpr (kDoubleTail) {
    double s = r;
    for (int64_t i = np; i < n; ++i) s += static_cast<double>(get(w[i]) * get(a[i]));
    return static_cast<float>(s);
  } else {
    float s = r;  // float.cpp: rounded products by 16 and 8, then fused
    int64_t i = np;
    for (; n - i >= 16; i += 16)
      for (int l = 0; l < 16; ++l) s += get(w[i + l]) * get(a[i + l]);
    if (n - i >= 8) {
      for (int l = 0; l < 8; ++l) s += get(w[i + l]) * get(a[i + l]);
      i += 8;
    }
    for (; i < n; ++i) s = std::fma(get(w[i]), get(a[i]), s);
    return s;
  }
}

}  // namespace

float vec_dot_f32_f32(int64_t n, const void* w, const void* a) {
  return dot16<false>(
      n, static_cast<const float*>(w), static_cast<const float*>(a), [](const float* p) { return _mm256_loadu_ps(p); },
      [](float v) { return v; });
}

float vec_dot_f16_f16(int64_t n, const void* w, const void* a) {
  return dot16<true>(n, static_cast<const ggml_fp16_t*>(w), static_cast<const ggml_fp16_t*>(a), load_f16,
                     [](ggml_fp16_t v) { return fp16_to_fp32(v); });
}

float vec_dot_bf16_bf16(int64_t n, const void* w, const void* a) {
  return dot(n, static_cast<const ggml_bf16_t*>(w), static_cast<const ggml_bf16_t*>(a), load_bf16,
             [](ggml_bf16_t v) { return bf16_to_fp32(v); });
}

// x [n] floats -> y [n] F16, round to nearest even (vcvtps2ph, which
// fp32_to_fp16 reproduces, NaN payloads included).
void quantize_row_f16(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<ggml_fp16_t*>(vy);
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (int64_t i = n8; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

}  // namespace synapse::quant::avx2
#endif

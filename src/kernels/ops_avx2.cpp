// AVX2+FMA helpers of kernels/ops (built with those flags).
#include <cstdint>

#include "kernels/ops.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#include "kernels/ops_avx2.hpp"

namespace synapse::kernels {

void expf_ggml_avx2_n(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, expf_ggml_avx2(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t l = 0; i + l < n; ++l) t[l] = x[i + l];
    _mm256_storeu_ps(t, expf_ggml_avx2(_mm256_loadu_ps(t)));
    for (int64_t l = 0; i + l < n; ++l) y[i + l] = t[l];
  }
}

void silu_row_avx2(float* x, int64_t n) {
  const int64_t nv = n - n % 16;  // ggml_vec_silu_f32's AVX-512 groups of 16
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < nv; i += 8) {  // silu_ggml: z / (1 + expf_ggml(0 - z))
    const __m256 z = _mm256_loadu_ps(x + i);
    _mm256_storeu_ps(x + i, _mm256_div_ps(z, _mm256_add_ps(one, expf_ggml_avx2(_mm256_sub_ps(zero, z)))));
  }
  for (int64_t i = nv; i < n; ++i) x[i] = silu(x[i]);
}

void swiglu_rows_avx2(const float* gate, const float* up, float* y, int64_t n_rows, int64_t row_len) {
  const int64_t nv = row_len - row_len % 16;  // ggml_vec_swiglu_f32's AVX-512 groups of 16
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t o = r * row_len;
    for (int64_t i = 0; i < nv; i += 8) {  // silu_ggml: z / (1 + expf_ggml(0 - z)), then * up
      const __m256 g = _mm256_loadu_ps(gate + o + i);
      const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, expf_ggml_avx2(_mm256_sub_ps(zero, g))));
      _mm256_storeu_ps(y + o + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + o + i)));
    }
    for (int64_t i = nv; i < row_len; ++i) y[o + i] = silu(gate[o + i]) * up[o + i];
  }
}

}  // namespace synapse::kernels
#endif

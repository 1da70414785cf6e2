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

}  // namespace synapse::kernels
#else
namespace synapse::kernels {
void expf_ggml_avx2_n(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = expf_ggml(x[i]);
}
}  // namespace synapse::kernels
#endif

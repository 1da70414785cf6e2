// AVX-512 form of the gated delta rule's step (kernels/ops.hpp,
// delta_rule_step): bit for bit delta_rule_step_scalar. Its dots keep
// quant::vec_dot_f32_ggml's order, which is ggml_vec_dot_f32's AVX-512 one
// (four accumulators of 16 lanes: element i in lane i % 16 of accumulator
// (i / 16) % 4), so each accumulator is one zmm register; the decay and the
// rank-1 update are element-wise (a multiply, a fused multiply-add), exact
// in any width. No std:: templates or containers
// (scripts/check-isa-objects.sh).
#if defined(__x86_64__) || defined(_M_X64)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports as read uninitialized (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/avx512_util.hpp"
#include "kernels/ops.hpp"

namespace synapse::kernels {

void delta_rule_step_avx512(float* st, const float* q, const float* k, const float* v, float decay, float beta,
                            float scale, int64_t d, float* o) {
  if (d % 64 != 0) {  // vec_dot_f32_ggml's tail rules: the scalar form
    delta_rule_step_scalar(st, q, k, v, decay, beta, scale, d, o);
    return;
  }
  // dot_ggml_vec_order's reduction of its four accumulators:
  // (acc0 + acc2) + (acc1 + acc3), then hsum_float_16.
  const auto reduce = [](const __m512 a[4]) {
    return hsum16(_mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3])));
  };
  const __m512 dec = _mm512_set1_ps(decay);
  for (int64_t j = 0; j < d; ++j) {
    float* s = st + j * d;
    __m512 acc[4];
    for (int a = 0; a < 4; ++a) acc[a] = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 64)
      for (int a = 0; a < 4; ++a) {  // decay, then the dot with k
        const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + i + 16 * a), dec);
        _mm512_storeu_ps(s + i + 16 * a, x);
        acc[a] = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + i + 16 * a), acc[a]);
      }
    const __m512 delta = _mm512_set1_ps((v[j] - reduce(acc)) * beta);
    for (int a = 0; a < 4; ++a) acc[a] = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 64)
      for (int a = 0; a < 4; ++a) {  // the update, then the dot with q
        const __m512 x = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 16 * a), delta, _mm512_loadu_ps(s + i + 16 * a));
        _mm512_storeu_ps(s + i + 16 * a, x);
        acc[a] = _mm512_fmadd_ps(x, _mm512_loadu_ps(q + i + 16 * a), acc[a]);
      }
    o[j] = reduce(acc) * scale;
  }
}

}  // namespace synapse::kernels
#endif

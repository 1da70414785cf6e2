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

#include "kernels/ops.hpp"

namespace synapse::kernels {
namespace {

// quant::hsum_float_16 of one register: high 8 + low 8, then hsum_float_8's
// tree ((r0 + r2) + (r1 + r3) with r_i = h_{i+4} + h_i).
inline float hsum16(__m512 x) {
  const __m256 h = _mm256_add_ps(_mm512_extractf32x8_ps(x, 1), _mm512_castps512_ps256(x));
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// dot_ggml_vec_order's reduction of its four accumulators:
// (acc0 + acc2) + (acc1 + acc3), then hsum_float_16.
inline float reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  return hsum16(_mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3)));
}

}  // namespace

void delta_rule_step_avx512(float* st, const float* q, const float* k, const float* v, float decay, float beta,
                            float scale, int64_t d, float* o) {
  if (d % 64 != 0) {  // vec_dot_f32_ggml's tail rules: the scalar form
    delta_rule_step_scalar(st, q, k, v, decay, beta, scale, d, o);
    return;
  }
  const __m512 dec = _mm512_set1_ps(decay);
  for (int64_t j = 0; j < d; ++j) {
    float* s = st + j * d;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < d; i += 64) {
      const __m512 s0 = _mm512_mul_ps(_mm512_loadu_ps(s + i), dec);
      const __m512 s1 = _mm512_mul_ps(_mm512_loadu_ps(s + i + 16), dec);
      const __m512 s2 = _mm512_mul_ps(_mm512_loadu_ps(s + i + 32), dec);
      const __m512 s3 = _mm512_mul_ps(_mm512_loadu_ps(s + i + 48), dec);
      _mm512_storeu_ps(s + i, s0);
      _mm512_storeu_ps(s + i + 16, s1);
      _mm512_storeu_ps(s + i + 32, s2);
      _mm512_storeu_ps(s + i + 48, s3);
      a0 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(k + i), a0);
      a1 = _mm512_fmadd_ps(s1, _mm512_loadu_ps(k + i + 16), a1);
      a2 = _mm512_fmadd_ps(s2, _mm512_loadu_ps(k + i + 32), a2);
      a3 = _mm512_fmadd_ps(s3, _mm512_loadu_ps(k + i + 48), a3);
    }
    const __m512 delta = _mm512_set1_ps((v[j] - reduce4(a0, a1, a2, a3)) * beta);
    a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < d; i += 64) {
      const __m512 s0 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i), delta, _mm512_loadu_ps(s + i));
      const __m512 s1 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 16), delta, _mm512_loadu_ps(s + i + 16));
      const __m512 s2 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 32), delta, _mm512_loadu_ps(s + i + 32));
      const __m512 s3 = _mm512_fmadd_ps(_mm512_loadu_ps(k + i + 48), delta, _mm512_loadu_ps(s + i + 48));
      _mm512_storeu_ps(s + i, s0);
      _mm512_storeu_ps(s + i + 16, s1);
      _mm512_storeu_ps(s + i + 32, s2);
      _mm512_storeu_ps(s + i + 48, s3);
      a0 = _mm512_fmadd_ps(s0, _mm512_loadu_ps(q + i), a0);
      a1 = _mm512_fmadd_ps(s1, _mm512_loadu_ps(q + i + 16), a1);
      a2 = _mm512_fmadd_ps(s2, _mm512_loadu_ps(q + i + 32), a2);
      a3 = _mm512_fmadd_ps(s3, _mm512_loadu_ps(q + i + 48), a3);
    }
    o[j] = reduce4(a0, a1, a2, a3) * scale;
  }
}

}  // namespace synapse::kernels
#endif

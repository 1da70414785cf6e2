// AVX2+FMA form of the gated delta rule's step (kernels/ops.hpp,
// delta_rule_step): bit for bit delta_rule_step_scalar. Its dots keep
// quant::vec_dot_f32_ggml's order (four accumulators of 16 lanes: element i
// in lane i % 16 of accumulator (i / 16) % 4), each 16-lane accumulator here
// a pair of ymm registers (lanes 0-7, 8-15); the decay and the rank-1 update
// are element-wise (a multiply, a fused multiply-add), exact in any width.
#include <cstdint>

#include "kernels/ops.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

namespace synapse::kernels {
namespace {

// dot_ggml_vec_order's reduction of four 16-lane accumulators (lo: lanes
// 0-7, hi: 8-15): (acc0 + acc2) + (acc1 + acc3) lane by lane, then
// hsum_float_16 (high 8 + low 8, then hsum_float_8's tree).
inline float reduce4(const __m256 lo[4], const __m256 hi[4]) {
  const __m256 l = _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
  const __m256 h = _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
  const __m256 x = _mm256_add_ps(h, l);
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

}  // namespace

void delta_rule_step_avx2(float* st, const float* q, const float* k, const float* v, float decay, float beta,
                          float scale, int64_t d, float* o) {
  if (d % 64 != 0) {  // vec_dot_f32_ggml's tail rules: the scalar form
    delta_rule_step_scalar(st, q, k, v, decay, beta, scale, d, o);
    return;
  }
  const __m256 dec = _mm256_set1_ps(decay);
  for (int64_t j = 0; j < d; ++j) {
    float* s = st + j * d;
    __m256 lo[4], hi[4];
    for (int a = 0; a < 4; ++a) lo[a] = hi[a] = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 64)
      for (int a = 0; a < 4; ++a) {
        const int64_t e = i + 16 * a;
        const __m256 x0 = _mm256_mul_ps(_mm256_loadu_ps(s + e), dec);
        const __m256 x1 = _mm256_mul_ps(_mm256_loadu_ps(s + e + 8), dec);
        _mm256_storeu_ps(s + e, x0);
        _mm256_storeu_ps(s + e + 8, x1);
        lo[a] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(k + e), lo[a]);
        hi[a] = _mm256_fmadd_ps(x1, _mm256_loadu_ps(k + e + 8), hi[a]);
      }
    const __m256 delta = _mm256_set1_ps((v[j] - reduce4(lo, hi)) * beta);
    for (int a = 0; a < 4; ++a) lo[a] = hi[a] = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 64)
      for (int a = 0; a < 4; ++a) {
        const int64_t e = i + 16 * a;
        const __m256 x0 = _mm256_fmadd_ps(_mm256_loadu_ps(k + e), delta, _mm256_loadu_ps(s + e));
        const __m256 x1 = _mm256_fmadd_ps(_mm256_loadu_ps(k + e + 8), delta, _mm256_loadu_ps(s + e + 8));
        _mm256_storeu_ps(s + e, x0);
        _mm256_storeu_ps(s + e + 8, x1);
        lo[a] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(q + e), lo[a]);
        hi[a] = _mm256_fmadd_ps(x1, _mm256_loadu_ps(q + e + 8), hi[a]);
      }
    o[j] = reduce4(lo, hi) * scale;
  }
}

}  // namespace synapse::kernels
#endif

// AVX2+FMA forms of the Gated DeltaNet layer's kernels (kernels/ops.hpp):
// the delta rule's step, the short convolution and the two per-head norms,
// each bit for bit its scalar form.
//
// delta_rule_step_avx2: bit for bit delta_rule_step_scalar. Its dots keep
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

namespace {

// Channels [c, c + 8) of a d_conv 4 conv state (st = the state + 3 c; tap t
// of channel c + l at st[3 l + t]) to and from one vector per tap.
inline void load_conv_state8(const float* st, __m256 s[3]) {
  alignas(32) float t[3][8];
  for (int l = 0; l < 8; ++l)
    for (int k = 0; k < 3; ++k) t[k][l] = st[3 * l + k];
  for (int k = 0; k < 3; ++k) s[k] = _mm256_load_ps(t[k]);
}

inline void store_conv_state8(float* st, const __m256 s[3]) {
  alignas(32) float t[3][8];
  for (int k = 0; k < 3; ++k) _mm256_store_ps(t[k], s[k]);
  for (int l = 0; l < 8; ++l)
    for (int k = 0; k < 3; ++k) st[3 * l + k] = t[k][l];
}

// ssm_conv_scalar for d_conv 4 on the channels [c, c + 8): the taps in
// lanes, one fused multiply-add per tap in the scalar order (the first onto
// +0, as std::fma(s, w, 0.0f)). The state stays in registers while the rows
// share a sequence.
void conv_block8(float* x, int64_t ld, int64_t n_rows, float* const* states, const float* w, int64_t c) {
  alignas(32) float wt[4][8];
  for (int l = 0; l < 8; ++l)
    for (int t = 0; t < 4; ++t) wt[t][l] = w[(c + l) * 4 + t];
  const __m256 w0 = _mm256_load_ps(wt[0]), w1 = _mm256_load_ps(wt[1]), w2 = _mm256_load_ps(wt[2]),
               w3 = _mm256_load_ps(wt[3]), zero = _mm256_setzero_ps();
  float* cur = nullptr;
  __m256 s[3] = {zero, zero, zero};  // loaded from the first row's state
  for (int64_t i = 0; i < n_rows; ++i) {
    float* st = states[i] + c * 3;
    if (st != cur) {
      if (cur != nullptr) store_conv_state8(cur, s);
      cur = st;
      load_conv_state8(cur, s);
    }
    float* xp = x + i * ld + c;
    const __m256 xv = _mm256_loadu_ps(xp);
    __m256 sum = _mm256_fmadd_ps(s[0], w0, zero);
    sum = _mm256_fmadd_ps(s[1], w1, sum);
    sum = _mm256_fmadd_ps(s[2], w2, sum);
    sum = _mm256_fmadd_ps(xv, w3, sum);
    s[0] = s[1];
    s[1] = s[2];
    s[2] = xv;
    _mm256_storeu_ps(xp, sum);
  }
  if (cur != nullptr) store_conv_state8(cur, s);
}

// rms_norm's scale of 8 heads (head l at x + l d) in the lanes: each lane
// sums its head's float squares in double in element order (the scalar
// loop's order), then 1 / sqrt(float(sum / d) + eps) (every step IEEE,
// rounded as the scalar one).
inline __m256 rms_scales8(const float* x, int64_t d, float eps) {
  const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                         _mm256_set1_epi32(static_cast<int>(d)));
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  for (int64_t e = 0; e < d; ++e) {
    const __m256 v = _mm256_i32gather_ps(x + e, idx, 4);
    const __m256 sq = _mm256_mul_ps(v, v);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  const __m256d n = _mm256_set1_pd(static_cast<double>(d));
  const __m256 mean = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_div_pd(hi, n)), _mm256_cvtpd_ps(_mm256_div_pd(lo, n)));
  return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sqrt_ps(_mm256_add_ps(mean, _mm256_set1_ps(eps))));
}

}  // namespace

void ssm_conv_avx2(float* x, int64_t ld, int64_t n_rows, float* const* states, const float* w, int64_t c0,
                   int64_t c1, int64_t d_conv) {
  if (d_conv != 4) {
    ssm_conv_scalar(x, ld, n_rows, states, w, c0, c1, d_conv);
    return;
  }
  int64_t c = c0;
  for (; c + 8 <= c1; c += 8) conv_block8(x, ld, n_rows, states, w, c);
  if (c < c1) ssm_conv_scalar(x, ld, n_rows, states, w, c, c1, d_conv);
}

void l2_norm_heads_avx2(float* x, int64_t n_heads, int64_t d, float eps, float scale) {
  const __m256 post = _mm256_set1_ps(scale);
  int64_t h = 0;
  for (; h + 8 <= n_heads; h += 8) {
    alignas(32) float sc[8];
    _mm256_store_ps(sc, rms_scales8(x + h * d, d, eps));
    for (int l = 0; l < 8; ++l) {
      float* p = x + (h + l) * d;
      const __m256 s = _mm256_set1_ps(sc[l]);
      int64_t e = 0;
      for (; e + 8 <= d; e += 8) _mm256_storeu_ps(p + e, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p + e), s), post));
      for (; e < d; ++e) p[e] = (p[e] * sc[l]) * scale;
    }
  }
  if (h < n_heads) l2_norm_heads_scalar(x + h * d, n_heads - h, d, eps, scale);
}

void gated_norm_heads_avx2(float* x, float* z, const float* w, int64_t n_heads, int64_t d, float eps) {
  int64_t h = 0;
  for (; h + 8 <= n_heads; h += 8) {
    alignas(32) float sc[8];
    _mm256_store_ps(sc, rms_scales8(x + h * d, d, eps));
    for (int l = 0; l < 8; ++l) {
      float* o = x + (h + l) * d;
      float* zh = z + (h + l) * d;
      silu_row_avx2(zh, d);
      const __m256 s = _mm256_set1_ps(sc[l]);
      int64_t e = 0;
      for (; e + 8 <= d; e += 8) {
        const __m256 y = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(o + e), s), _mm256_loadu_ps(w + e));
        _mm256_storeu_ps(o + e, _mm256_mul_ps(y, _mm256_loadu_ps(zh + e)));
      }
      for (; e < d; ++e) o[e] = ((o[e] * sc[l]) * w[e]) * zh[e];
    }
  }
  if (h < n_heads) gated_norm_heads_scalar(x + h * d, z + h * d, w, n_heads - h, d, eps);
}

}  // namespace synapse::kernels
#endif

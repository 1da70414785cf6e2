// AVX-512 forms of the Gated DeltaNet layer's kernels (kernels/ops.hpp):
// the delta rule's step, the short convolution and the two per-head norms,
// each bit for bit its scalar form (the conv and norms hand what is left of
// 16 channels / heads to their AVX2 forms, which hand theirs to the scalar
// ones).
//
// delta_rule_step_avx512: bit for bit delta_rule_step_scalar. Its dots keep
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

namespace {

// Channels [c, c + 16) of a d_conv 4 conv state (st = the state + 3 c) to
// and from one vector per tap (as delta_rule_avx2.cpp's load_conv_state8).
inline void load_conv_state16(const float* st, __m512 s[3]) {
  alignas(64) float t[3][16];
  for (int l = 0; l < 16; ++l)
    for (int k = 0; k < 3; ++k) t[k][l] = st[3 * l + k];
  for (int k = 0; k < 3; ++k) s[k] = _mm512_load_ps(t[k]);
}

inline void store_conv_state16(float* st, const __m512 s[3]) {
  alignas(64) float t[3][16];
  for (int k = 0; k < 3; ++k) _mm512_store_ps(t[k], s[k]);
  for (int l = 0; l < 16; ++l)
    for (int k = 0; k < 3; ++k) st[3 * l + k] = t[k][l];
}

// ssm_conv_scalar for d_conv 4 on the channels [c, c + 16), as the AVX2
// conv_block8: one fused multiply-add per tap in the scalar order, the state
// in registers while the rows share a sequence.
void conv_block16(float* x, int64_t ld, int64_t n_rows, float* const* states, const float* w, int64_t c) {
  alignas(64) float wt[4][16];
  for (int l = 0; l < 16; ++l)
    for (int t = 0; t < 4; ++t) wt[t][l] = w[(c + l) * 4 + t];
  const __m512 w0 = _mm512_load_ps(wt[0]), w1 = _mm512_load_ps(wt[1]), w2 = _mm512_load_ps(wt[2]),
               w3 = _mm512_load_ps(wt[3]), zero = _mm512_setzero_ps();
  float* cur = nullptr;
  __m512 s[3] = {zero, zero, zero};  // loaded from the first row's state
  for (int64_t i = 0; i < n_rows; ++i) {
    float* st = states[i] + c * 3;
    if (st != cur) {
      if (cur != nullptr) store_conv_state16(cur, s);
      cur = st;
      load_conv_state16(cur, s);
    }
    float* xp = x + i * ld + c;
    const __m512 xv = _mm512_loadu_ps(xp);
    __m512 sum = _mm512_fmadd_ps(s[0], w0, zero);
    sum = _mm512_fmadd_ps(s[1], w1, sum);
    sum = _mm512_fmadd_ps(s[2], w2, sum);
    sum = _mm512_fmadd_ps(xv, w3, sum);
    s[0] = s[1];
    s[1] = s[2];
    s[2] = xv;
    _mm512_storeu_ps(xp, sum);
  }
  if (cur != nullptr) store_conv_state16(cur, s);
}

// rms_norm's scale of 16 heads (head l at x + l d) in the lanes, each lane's
// double sum in element order (as the AVX2 rms_scales8).
inline __m512 rms_scales16(const float* x, int64_t d, float eps) {
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(static_cast<int>(d)));
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t e = 0; e < d; ++e) {
    const __m512 v = _mm512_i32gather_ps(idx, x + e, 4);
    const __m512 sq = _mm512_mul_ps(v, v);
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(sq, 1)));
  }
  const __m512d n = _mm512_set1_pd(static_cast<double>(d));
  const __m512 mean = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_div_pd(lo, n))),
                                         _mm512_cvtpd_ps(_mm512_div_pd(hi, n)), 1);
  return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_sqrt_ps(_mm512_add_ps(mean, _mm512_set1_ps(eps))));
}

}  // namespace

void ssm_conv_avx512(float* x, int64_t ld, int64_t n_rows, float* const* states, const float* w, int64_t c0,
                     int64_t c1, int64_t d_conv) {
  if (d_conv != 4) {
    ssm_conv_scalar(x, ld, n_rows, states, w, c0, c1, d_conv);
    return;
  }
  int64_t c = c0;
  for (; c + 16 <= c1; c += 16) conv_block16(x, ld, n_rows, states, w, c);
  if (c < c1) ssm_conv_avx2(x, ld, n_rows, states, w, c, c1, d_conv);
}

void l2_norm_heads_avx512(float* x, int64_t n_heads, int64_t d, float eps, float scale) {
  const __m512 post = _mm512_set1_ps(scale);
  int64_t h = 0;
  for (; h + 16 <= n_heads; h += 16) {
    alignas(64) float sc[16];
    _mm512_store_ps(sc, rms_scales16(x + h * d, d, eps));
    for (int l = 0; l < 16; ++l) {
      float* p = x + (h + l) * d;
      const __m512 s = _mm512_set1_ps(sc[l]);
      int64_t e = 0;
      for (; e + 16 <= d; e += 16)
        _mm512_storeu_ps(p + e, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(p + e), s), post));
      for (; e < d; ++e) p[e] = (p[e] * sc[l]) * scale;
    }
  }
  if (h < n_heads) l2_norm_heads_avx2(x + h * d, n_heads - h, d, eps, scale);
}

void gated_norm_heads_avx512(float* x, float* z, const float* w, int64_t n_heads, int64_t d, float eps) {
  int64_t h = 0;
  for (; h + 16 <= n_heads; h += 16) {
    alignas(64) float sc[16];
    _mm512_store_ps(sc, rms_scales16(x + h * d, d, eps));
    for (int l = 0; l < 16; ++l) {
      float* o = x + (h + l) * d;
      float* zh = z + (h + l) * d;
      silu_row_avx2(zh, d);  // the table's silu_row (no AVX-512 form)
      const __m512 s = _mm512_set1_ps(sc[l]);
      int64_t e = 0;
      for (; e + 16 <= d; e += 16) {
        const __m512 y = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(o + e), s), _mm512_loadu_ps(w + e));
        _mm512_storeu_ps(o + e, _mm512_mul_ps(y, _mm512_loadu_ps(zh + e)));
      }
      for (; e < d; ++e) o[e] = ((o[e] * sc[l]) * w[e]) * zh[e];
    }
  }
  if (h < n_heads) gated_norm_heads_avx2(x + h * d, z + h * d, w, n_heads - h, d, eps);
}

}  // namespace synapse::kernels
#endif

// AVX2+FMA+F16C attention (built with those flags; chosen at run time). Bit
// for bit the order of attend_group_scalar (attention.hpp).
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention.hpp"
#include "kernels/ops.hpp"
#include "quant/avx2_util.hpp"

namespace synapse::kernels {
namespace {

// F16 -> F32 of n values (n a multiple of 8 handled by F16C, the rest one by one).
void load_f16(const quant::ggml_fp16_t* src, float* dst, int64_t n) {
  int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + d))));
  for (; d < n; ++d) dst[d] = _cvtsh_ss(src[d]);
}

// Rounds n floats through F16 in place.
void round_f16(float* x, int64_t n) {
  int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    _mm256_storeu_ps(x + d, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + d), _MM_FROUND_TO_NEAREST_INT)));
  for (; d < n; ++d) x[d] = _cvtsh_ss(_cvtss_sh(x[d], _MM_FROUND_TO_NEAREST_INT));
}

float dot_lanes8(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc);
  float r = quant::avx2::hsum_float_8(acc);  // ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))
  for (; d < n; ++d) r = std::fma(a[d], b[d], r);
  return r;
}

}  // namespace

void attend_group_avx2(const KvLayerView& kv, int64_t g, int64_t first, int64_t last, const float* q, int64_t n_gqa,
                       int64_t hd, int64_t hd_v, float kq_scale, float* out, AttentionScratch& s) {
  const int64_t n_kv = last - first + 1;
  s.q.assign(q, q + n_gqa * hd);
  s.kv_row.resize(static_cast<size_t>(std::max(hd, hd_v)));
  s.scores.resize(static_cast<size_t>(n_gqa * n_kv));
  round_f16(s.q.data(), n_gqa * hd);
  for (int64_t j = 0; j < n_kv; ++j) {
    load_f16(kv.k + ((first + j) % kv.capacity) * kv.k_stride + g * hd, s.kv_row.data(), hd);
    for (int64_t i = 0; i < n_gqa; ++i) s.scores[i * n_kv + j] = dot_lanes8(&s.q[i * hd], s.kv_row.data(), hd) * kq_scale;
  }
  for (int64_t i = 0; i < n_gqa; ++i) {
    softmax(&s.scores[i * n_kv], n_kv);
    round_f16(&s.scores[i * n_kv], n_kv);
  }
  std::fill(out, out + n_gqa * hd_v, 0.0f);
  for (int64_t j = 0; j < n_kv; ++j) {
    load_f16(kv.v + ((first + j) % kv.capacity) * kv.v_stride + g * hd_v, s.kv_row.data(), hd_v);
    for (int64_t i = 0; i < n_gqa; ++i) {
      const float p = s.scores[i * n_kv + j];
      const __m256 pv = _mm256_set1_ps(p);
      float* o = out + i * hd_v;
      int64_t d = 0;
      for (; d + 8 <= hd_v; d += 8)
        _mm256_storeu_ps(o + d, _mm256_fmadd_ps(pv, _mm256_loadu_ps(s.kv_row.data() + d), _mm256_loadu_ps(o + d)));
      for (; d < hd_v; ++d) o[d] = std::fma(p, s.kv_row[d], o[d]);
    }
  }
}

}  // namespace synapse::kernels
#endif

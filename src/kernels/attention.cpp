#include "kernels/attention.hpp"

#include <cmath>

#include "kernels/ops.hpp"
#include "quant/simd.hpp"

namespace synapse::kernels {
namespace {

// F16 -> F32 by table (256 KiB, built once): the scalar path converts every
// cached K and V value it reads.
const float* fp16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = quant::fp16_to_fp32(static_cast<quant::ggml_fp16_t>(h));
    return t;
  }();
  return table.data();
}

// The reference q.k order (see attention.hpp).
float dot_lanes8(const float* a, const float* b, int64_t n) {
  float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    for (int i = 0; i < 8; ++i) l[i] = std::fma(a[d + i], b[d + i], l[i]);
  float r = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
  for (; d < n; ++d) r = std::fma(a[d], b[d], r);
  return r;
}

}  // namespace

void attend_group_scalar(const KvLayerView& kv, int64_t g, int64_t first, int64_t last, const float* q,
                         int64_t n_gqa, int64_t hd, int64_t hd_v, float kq_scale, float* out,
                         AttentionScratch& s) {
  const float* h2f = fp16_table();
  const int64_t n_kv = last - first + 1;
  s.q.resize(static_cast<size_t>(n_gqa * hd));
  s.kv_row.resize(static_cast<size_t>(std::max(hd, hd_v)));
  s.scores.resize(static_cast<size_t>(n_gqa * n_kv));
  for (int64_t i = 0; i < n_gqa * hd; ++i) s.q[i] = h2f[quant::fp32_to_fp16(q[i])];
  for (int64_t j = 0; j < n_kv; ++j) {
    const quant::ggml_fp16_t* k = kv.k + ((first + j) % kv.capacity) * kv.k_stride + g * hd;
    for (int64_t d = 0; d < hd; ++d) s.kv_row[d] = h2f[k[d]];
    for (int64_t i = 0; i < n_gqa; ++i) s.scores[i * n_kv + j] = dot_lanes8(&s.q[i * hd], s.kv_row.data(), hd) * kq_scale;
  }
  for (int64_t i = 0; i < n_gqa; ++i) {
    float* p = &s.scores[i * n_kv];
    softmax(p, n_kv);
    for (int64_t j = 0; j < n_kv; ++j) p[j] = h2f[quant::fp32_to_fp16(p[j])];
  }
  for (int64_t i = 0; i < n_gqa * hd_v; ++i) out[i] = 0.0f;
  for (int64_t j = 0; j < n_kv; ++j) {
    const quant::ggml_fp16_t* v = kv.v + ((first + j) % kv.capacity) * kv.v_stride + g * hd_v;
    for (int64_t d = 0; d < hd_v; ++d) s.kv_row[d] = h2f[v[d]];
    for (int64_t i = 0; i < n_gqa; ++i) {
      const float p = s.scores[i * n_kv + j];
      float* o = out + i * hd_v;
      for (int64_t d = 0; d < hd_v; ++d) o[d] = std::fma(p, s.kv_row[d], o[d]);
    }
  }
}

#if !(defined(__x86_64__) || defined(_M_X64))
void attend_group_avx2(const KvLayerView& kv, int64_t g, int64_t first, int64_t last, const float* q, int64_t n_gqa,
                       int64_t hd, int64_t hd_v, float kq_scale, float* out, AttentionScratch& s) {
  attend_group_scalar(kv, g, first, last, q, n_gqa, hd, hd_v, kq_scale, out, s);
}
#endif

void attend_group(const KvLayerView& kv, int64_t g, int64_t first, int64_t last, const float* q, int64_t n_gqa,
                  int64_t hd, int64_t hd_v, float kq_scale, float* out, AttentionScratch& s) {
  static const bool use_avx2 = quant::active_isa() == quant::Isa::avx2;
  if (use_avx2) attend_group_avx2(kv, g, first, last, q, n_gqa, hd, hd_v, kq_scale, out, s);
  else attend_group_scalar(kv, g, first, last, q, n_gqa, hd, hd_v, kq_scale, out, s);
}

}  // namespace synapse::kernels

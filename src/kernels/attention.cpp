#include "kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ops.hpp"
#include "kernels/ops_table.hpp"
#include "quant/formats.hpp"

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

// The cached row of position p (KvLayerView): offset and stride are the K
// or the V ones.
const quant::ggml_fp16_t* kv_row(const KvLayerView& kv, int64_t offset, int64_t stride, int64_t p) {
  return kv.pages[p >> kv.page_shift] + offset + (p & ((int64_t{1} << kv.page_shift) - 1)) * stride;
}

}  // namespace

float dot_kq(const float* a, const float* b, int64_t n) {
  if (n % 16 == 0) {  // tinyBLAS<16, __m512> (F16 x F16)
    float l[16] = {};
    for (int64_t d = 0; d < n; d += 16)
      for (int i = 0; i < 16; ++i) l[i] = std::fma(a[d + i], b[d + i], l[i]);
    return quant::hsum_float_16(l);
  }
  // ggml_vec_dot_f16, AVX-512 (GGML_F16_STEP 64, 4 accumulators of 16 lanes).
  float l[4][16] = {};
  const int64_t np = n & ~int64_t{63};
  for (int64_t d = 0; d < np; d += 64)
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 16; ++i) l[k][i] = std::fma(a[d + 16 * k + i], b[d + 16 * k + i], l[k][i]);
  for (int i = 0; i < 16; ++i) {
    l[0][i] += l[2][i];
    l[1][i] += l[3][i];
  }
  for (int i = 0; i < 16; ++i) l[0][i] += l[1][i];
  double sum = quant::hsum_float_16(l[0]);
  for (int64_t d = np; d < n; ++d) sum += static_cast<double>(a[d] * b[d]);
  return static_cast<float>(sum);
}

void reduce_v_lanes(const float* acc, int64_t hd_v, float* out) {
  for (int64_t d = 0; d < hd_v; ++d) {
    float l[16];
    for (int i = 0; i < 16; ++i) l[i] = acc[i * hd_v + d];
    out[d] = quant::hsum_float_16(l);
  }
}

void softmax_f16_rows_scalar(float* x, int64_t ld, const int64_t* n, int64_t n_rows, const float* sinks,
                             int64_t n_sinks) {
  const float* h2f = fp16_table();
  for (int64_t r = 0; r < n_rows; ++r) {
    float* p = x + r * ld;
    softmax_pad16(p, n[r], sinks ? &sinks[r % n_sinks] : nullptr);
    for (int64_t j = 0; j < n[r]; ++j) p[j] = h2f[quant::fp32_to_fp16(p[j])];
  }
}

void attend_group_scalar(const KvLayerView& kv, int64_t g, int64_t first, int64_t last, const float* q,
                         int64_t n_gqa, int64_t hd, int64_t hd_v, float kq_scale, float* out,
                         AttentionScratch& s) {
  const float* h2f = fp16_table();
  const int64_t n_kv = last - first + 1;
  s.q.resize(static_cast<size_t>(n_gqa * hd));
  s.kv_row.resize(static_cast<size_t>(std::max(hd, hd_v)));
  s.scores.resize(static_cast<size_t>(n_gqa * n_kv));
  s.vacc.assign(static_cast<size_t>(n_gqa * 16 * hd_v), 0.0f);
  for (int64_t i = 0; i < n_gqa * hd; ++i) s.q[i] = h2f[quant::fp32_to_fp16(q[i])];
  for (int64_t j = 0; j < n_kv; ++j) {
    const quant::ggml_fp16_t* k = kv_row(kv, kv.k_offset, kv.k_stride, first + j) + g * hd;
    for (int64_t d = 0; d < hd; ++d) s.kv_row[d] = h2f[k[d]];
    for (int64_t i = 0; i < n_gqa; ++i) s.scores[i * n_kv + j] = dot_kq(&s.q[i * hd], s.kv_row.data(), hd) * kq_scale;
  }
  const float* sinks = kv.sinks ? kv.sinks + g * n_gqa : nullptr;
  for (int64_t i = 0; i < n_gqa; ++i)
    softmax_f16_rows_scalar(&s.scores[i * n_kv], n_kv, &n_kv, 1, sinks ? sinks + i : nullptr, 1);
  for (int64_t j = 0; j < n_kv; ++j) {
    const quant::ggml_fp16_t* v = kv_row(kv, kv.v_offset, kv.v_stride, first + j) + g * hd_v;
    for (int64_t d = 0; d < hd_v; ++d) s.kv_row[d] = h2f[v[d]];
    for (int64_t i = 0; i < n_gqa; ++i) {
      const float p = s.scores[i * n_kv + j];
      float* o = &s.vacc[(i * 16 + j % 16) * hd_v];
      for (int64_t d = 0; d < hd_v; ++d) o[d] = std::fma(p, s.kv_row[d], o[d]);
    }
  }
  for (int64_t i = 0; i < n_gqa; ++i) reduce_v_lanes(&s.vacc[i * 16 * hd_v], hd_v, out + i * hd_v);
}

ScratchPtrs size_scratch(AttentionScratch& s, int64_t q, int64_t kv_row, int64_t scores, int64_t kv_block,
                         int64_t n_kv, int64_t vacc) {
  const auto fit = [](auto& v, int64_t n) {
    if (n > 0) v.resize(static_cast<size_t>(n));
    return v.data();
  };
  return {fit(s.q, q),           fit(s.kv_row, kv_row), fit(s.scores, scores), fit(s.kv_block, kv_block),
          fit(s.n_kv, n_kv),     fit(s.vacc, vacc)};
}

int64_t attend_block_bk(int64_t hd, int64_t hd_v) {
  const int64_t row_bytes = 4 * std::max<int64_t>(1, std::max(hd, hd_v));
  return std::clamp<int64_t>((16384 / row_bytes) / 8 * 8, 8, 256);
}

RowSpan row_span(const QueryRow* rows, int64_t n_rows) {
  RowSpan s{rows[0].first, rows[0].last, 0};
  for (int64_t r = 0; r < n_rows; ++r) {
    s.lo = std::min(s.lo, rows[r].first);
    s.hi = std::max(s.hi, rows[r].last);
    s.ld = std::max(s.ld, rows[r].last - rows[r].first + 1);
  }
  return s;
}

void mask_scores(float* scores, int64_t ld, const QueryRow* rows, int64_t n_rows, int64_t n_gqa) {
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n_gqa; ++i)
      std::fill_n(scores + (r * n_gqa + i) * ld, rows[r].n_masked, -std::numeric_limits<float>::infinity());
}

void attend_block_scalar(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                         int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& s) {
  if (n_rows <= 0) return;
  const float* h2f = fp16_table();
  const auto [lo, hi, ld] = row_span(rows, n_rows);
  const int64_t n_q = n_rows * n_gqa;  // query vectors, row-major (row, head)
  s.q.resize(static_cast<size_t>(n_q * hd));
  s.scores.resize(static_cast<size_t>(n_q * ld));
  s.kv_block.resize(static_cast<size_t>(bk * std::max(hd, hd_v)));
  s.vacc.assign(static_cast<size_t>(n_q * 16 * hd_v), 0.0f);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n_gqa * hd; ++i) s.q[r * n_gqa * hd + i] = h2f[quant::fp32_to_fp16(rows[r].q[i])];
  float* blk = s.kv_block.data();

  // Scores, K block by K block: each row's positions of the block, in any
  // order (every score is its own dot product).
  for (int64_t j0 = lo; j0 <= hi; j0 += bk) {
    const int64_t j1 = std::min(hi + 1, j0 + bk);
    for (int64_t j = j0; j < j1; ++j) {
      const quant::ggml_fp16_t* k = kv_row(kv, kv.k_offset, kv.k_stride, j) + g * hd;
      for (int64_t d = 0; d < hd; ++d) blk[(j - j0) * hd + d] = h2f[k[d]];
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = std::max(j0, rows[r].first), b = std::min(j1 - 1, rows[r].last);
      for (int64_t i = 0; i < n_gqa; ++i) {
        const float* qi = &s.q[(r * n_gqa + i) * hd];
        float* sc = &s.scores[(r * n_gqa + i) * ld];
        for (int64_t j = a; j <= b; ++j) sc[j - rows[r].first] = dot_kq(qi, blk + (j - j0) * hd, hd) * kq_scale;
      }
    }
  }
  // Softmax of each full score row, probabilities rounded to F16.
  mask_scores(s.scores.data(), ld, rows, n_rows, n_gqa);
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t n_kv = rows[r].last - rows[r].first + 1;
    for (int64_t i = 0; i < n_gqa; ++i)
      softmax_f16_rows_scalar(&s.scores[(r * n_gqa + i) * ld], ld, &n_kv, 1,
                              kv.sinks ? kv.sinks + g * n_gqa + i : nullptr, 1);
  }
  // Weighted V, V block by V block: each output element's lane
  // (j - first) % 16 takes its positions in increasing order, as in
  // attend_group.
  for (int64_t j0 = lo; j0 <= hi; j0 += bk) {
    const int64_t j1 = std::min(hi + 1, j0 + bk);
    for (int64_t j = j0; j < j1; ++j) {
      const quant::ggml_fp16_t* v = kv_row(kv, kv.v_offset, kv.v_stride, j) + g * hd_v;
      for (int64_t d = 0; d < hd_v; ++d) blk[(j - j0) * hd_v + d] = h2f[v[d]];
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = std::max(j0, rows[r].first), b = std::min(j1 - 1, rows[r].last);
      for (int64_t i = 0; i < n_gqa; ++i) {
        const float* p = &s.scores[(r * n_gqa + i) * ld];
        for (int64_t j = a; j <= b; ++j) {
          const float pj = p[j - rows[r].first];
          const float* vj = blk + (j - j0) * hd_v;
          float* o = &s.vacc[((r * n_gqa + i) * 16 + (j - rows[r].first) % 16) * hd_v];
          for (int64_t d = 0; d < hd_v; ++d) o[d] = std::fma(pj, vj[d], o[d]);
        }
      }
    }
  }
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n_gqa; ++i)
      reduce_v_lanes(&s.vacc[(r * n_gqa + i) * 16 * hd_v], hd_v, rows[r].out + i * hd_v);
}

void attend_block(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd,
                  int64_t hd_v, float kq_scale, AttentionScratch& s) {
  if (kv.k_type != GgmlType::F16 || kv.v_type != GgmlType::F16)
    return attend_block_typed(kv, g, rows, n_rows, n_gqa, hd, hd_v, kq_scale, attend_block_bk(hd, hd_v), s);
  active_ops().attend_block(kv, g, rows, n_rows, n_gqa, hd, hd_v, kq_scale, attend_block_bk(hd, hd_v), s);
}

}  // namespace synapse::kernels

// attend_scores_typed and attend_values_typed (attention.hpp): attention over
// K/V rows of any cache type, through quant's row converters and dot products.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention.hpp"
#include "kernels/ops.hpp"
#include "quant/formats.hpp"
#include "quant/kernel_table.hpp"
#include "quant/quant.hpp"

namespace synapse::kernels {
namespace {

// Start of KV group g's slice of position p's K (or V) row: the row's words
// (KvLayerView), then row_size(type, g * head) bytes on (whole blocks, the
// head size a multiple of the type's block).
const uint8_t* group_slice(const KvLayerView& kv, int64_t offset, int64_t stride, int64_t p, GgmlType type, int64_t g,
                           int64_t head) {
  const quant::ggml_fp16_t* row =
      kv.pages[p >> kv.page_shift] + offset + (p & ((int64_t{1} << kv.page_shift) - 1)) * stride;
  return reinterpret_cast<const uint8_t*>(row) + row_size(type, g * head);
}

}  // namespace

TypedQueries typed_queries(GgmlType k_type, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd,
                           bool with_sums, AttentionScratch& s) {
  const quant::KernelTable& table = quant::active_kernels();
  const GgmlType vt = table.row(k_type).vec_dot_type;
  const int64_t n_q = n_rows * n_gqa;  // query vectors, row-major (row, head)
  const auto q_bytes = static_cast<int64_t>(row_size(vt, hd));
  s.q_typed.resize(static_cast<size_t>(n_q * q_bytes));
  // Each query head converted as ggml's flash attention does (q_to_vec_dot,
  // the CPU from_float of K's vec_dot_type).
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n_gqa; ++i)
      quant::quantize_row(table, vt, rows[r].q + i * hd, &s.q_typed[(r * n_gqa + i) * q_bytes], hd);
  if (!with_sums || vt != GgmlType::Q8_0) return {s.q_typed.data(), q_bytes, nullptr, nullptr};
  const int64_t nb = hd / quant::QK8_0;
  s.q_scales.resize(static_cast<size_t>(n_q * nb));
  s.q_sums.resize(static_cast<size_t>(n_q * nb * 9));
  const auto* blocks = reinterpret_cast<const quant::block_q8_0*>(s.q_typed.data());
  for (int64_t b = 0; b < n_q * nb; ++b) {
    s.q_scales[b] = quant::fp16_to_fp32(blocks[b].d);
    int32_t all = 0;
    for (int w = 0; w < 8; ++w) {
      int32_t sum = 0;
      for (int e = 0; e < 4; ++e) sum += blocks[b].qs[4 * w + e];
      s.q_sums[b * 9 + w] = sum;
      all += sum;
    }
    s.q_sums[b * 9 + 8] = all;
  }
  return {s.q_typed.data(), q_bytes, s.q_scales.data(), s.q_sums.data()};
}

void attend_scores_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                         int64_t hd, float kq_scale, int64_t /*bk*/, float* scores, int64_t ld, AttentionScratch& s) {
  if (n_rows <= 0) return;
  const quant::TypeKernels& kt = quant::active_kernels().row(kv.k_type);
  const RowSpan span = row_span(rows, n_rows);
  const TypedQueries tq = typed_queries(kv.k_type, rows, n_rows, n_gqa, hd, false, s);
  // One dot per (query vector, position), position by position so each K
  // slice is read once for every query that attends it.
  for (int64_t j = span.lo; j <= span.hi; ++j) {
    const uint8_t* k = group_slice(kv, kv.k_offset, kv.k_stride, j, kv.k_type, g, hd);
    for (int64_t r = 0; r < n_rows; ++r) {
      if (j < rows[r].first || j > rows[r].last) continue;
      for (int64_t i = 0; i < n_gqa; ++i)
        scores[(r * n_gqa + i) * ld + (j - rows[r].first)] =
            kt.vec_dot(hd, k, tq.q + (r * n_gqa + i) * tq.q_bytes) * kq_scale;
    }
  }
}

void attend_values_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                         int64_t hd_v, int64_t bk, const float* probs, int64_t ld, AttentionScratch& s) {
  if (n_rows <= 0) return;
  const quant::TypeKernels& vt = quant::active_kernels().row(kv.v_type);
  const RowSpan span = row_span(rows, n_rows);
  const int64_t n_q = n_rows * n_gqa;
  s.kv_block.resize(static_cast<size_t>(bk * hd_v));
  s.vacc.assign(static_cast<size_t>(n_q * hd_v), 0.0f);
  // V block by V block converted to floats: each output adds its positions
  // in increasing order, one fused multiply-add each (ggml_vec_mad_f32), a sum per chunk
  // (kAttendChunk positions from the row's first) added to the output in
  // chunk order.
  float* blk = s.kv_block.data();
  for (int64_t j0 = span.lo; j0 <= span.hi; j0 += bk) {
    const int64_t j1 = std::min(span.hi + 1, j0 + bk);
    for (int64_t j = j0; j < j1; ++j)
      vt.dequantize(group_slice(kv, kv.v_offset, kv.v_stride, j, kv.v_type, g, hd_v), blk + (j - j0) * hd_v, hd_v);
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = std::max(j0, rows[r].first), b = std::min(j1 - 1, rows[r].last);
      for (int64_t i = 0; i < n_gqa; ++i) {
        const float* p = probs + (r * n_gqa + i) * ld;
        float* o = &s.vacc[(r * n_gqa + i) * hd_v];
        float* out = rows[r].out + i * hd_v;
        for (int64_t j = a; j <= b; ++j) {
          const int64_t off = j - rows[r].first;
          const float pj = p[off];
          const float* vj = blk + (j - j0) * hd_v;
          for (int64_t d = 0; d < hd_v; ++d) o[d] = std::fma(pj, vj[d], o[d]);
          if ((off + 1) % kAttendChunk != 0 && j != rows[r].last) continue;
          for (int64_t d = 0; d < hd_v; ++d) out[d] = off >= kAttendChunk ? out[d] + o[d] : o[d];
          std::fill_n(o, hd_v, 0.0f);
        }
      }
    }
  }
}

}  // namespace synapse::kernels

// attend_scores_typed and attend_values_typed (attention.hpp): attention over
// K/V rows of any cache type, through quant's row converters and dot products.
#include <algorithm>
#include <cstring>

#include "kernels/attention.hpp"
#include "kernels/ops.hpp"
#include "quant/kernel_table.hpp"
#include "quant/quant.hpp"

namespace synapse::kernels {
namespace {

// Start of KV group g's slice of position p's K (or V) row: the row's words
// (KvLayerView), then row_size(type, g * head) bytes on (whole blocks, the
// head size a multiple of the type's block).
const uint8_t* group_slice(const KvLayerView& kv, int64_t offset, int64_t stride, int64_t p, GgmlType type,
                           int64_t g, int64_t head) {
  const quant::ggml_fp16_t* row =
      kv.pages[p >> kv.page_shift] + offset + (p & ((int64_t{1} << kv.page_shift) - 1)) * stride;
  return reinterpret_cast<const uint8_t*>(row) + row_size(type, g * head);
}

}  // namespace

void attend_scores_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                         int64_t hd, float kq_scale, int64_t /*bk*/, float* scores, int64_t ld, AttentionScratch& s) {
  if (n_rows <= 0) return;
  const quant::KernelTable& table = quant::active_kernels();
  const quant::TypeKernels& kt = table.row(kv.k_type);
  const RowSpan span = row_span(rows, n_rows);
  const int64_t n_q = n_rows * n_gqa;  // query vectors, row-major (row, head)
  const size_t q_bytes = row_size(kt.vec_dot_type, hd);
  s.q_typed.resize(static_cast<size_t>(n_q) * q_bytes);
  // Each query head converted as ggml's flash attention does (q_to_vec_dot,
  // the CPU from_float of K's vec_dot_type).
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n_gqa; ++i)
      quant::quantize_row(table, kt.vec_dot_type, rows[r].q + i * hd, &s.q_typed[(r * n_gqa + i) * q_bytes], hd);
  // One dot per (query vector, position), position by position so each K
  // slice is read once for every query that attends it.
  for (int64_t j = span.lo; j <= span.hi; ++j) {
    const uint8_t* k = group_slice(kv, kv.k_offset, kv.k_stride, j, kv.k_type, g, hd);
    for (int64_t r = 0; r < n_rows; ++r) {
      if (j < rows[r].first || j > rows[r].last) continue;
      for (int64_t i = 0; i < n_gqa; ++i)
        scores[(r * n_gqa + i) * ld + (j - rows[r].first)] =
            kt.vec_dot(hd, k, &s.q_typed[(r * n_gqa + i) * q_bytes]) * kq_scale;
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
  // in increasing order, one product and one sum each, a sum per chunk
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
          for (int64_t d = 0; d < hd_v; ++d) o[d] += pj * vj[d];
          if ((off + 1) % kAttendChunk != 0 && j != rows[r].last) continue;
          for (int64_t d = 0; d < hd_v; ++d) out[d] = off >= kAttendChunk ? out[d] + o[d] : o[d];
          std::fill_n(o, hd_v, 0.0f);
        }
      }
    }
  }
}

}  // namespace synapse::kernels

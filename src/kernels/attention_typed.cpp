// attend_block_typed (attention.hpp): attention over K/V rows of any cache
// type, through quant's row converters and dot products.
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

void attend_block_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                        int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& s) {
  if (n_rows <= 0) return;
  const quant::KernelTable& table = quant::active_kernels();
  const quant::TypeKernels& kt = table.row(kv.k_type);
  const quant::TypeKernels& vt = table.row(kv.v_type);
  const auto [lo, hi, ld] = row_span(rows, n_rows);
  const int64_t n_q = n_rows * n_gqa;  // query vectors, row-major (row, head)
  const size_t q_bytes = row_size(kt.vec_dot_type, hd);
  s.q_typed.resize(static_cast<size_t>(n_q) * q_bytes);
  s.scores.resize(static_cast<size_t>(n_q * ld));
  s.kv_block.resize(static_cast<size_t>(bk * hd_v));
  s.vacc.assign(static_cast<size_t>(n_q * hd_v), 0.0f);
  // Each query head converted as ggml's flash attention does (q_to_vec_dot,
  // the CPU from_float of K's vec_dot_type).
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n_gqa; ++i)
      quant::quantize_row(table, kt.vec_dot_type, rows[r].q + i * hd, &s.q_typed[(r * n_gqa + i) * q_bytes], hd);

  // Scores: one dot per (query vector, position), position by position so
  // each K slice is read once for every query that attends it.
  for (int64_t j = lo; j <= hi; ++j) {
    const uint8_t* k = group_slice(kv, kv.k_offset, kv.k_stride, j, kv.k_type, g, hd);
    for (int64_t r = 0; r < n_rows; ++r) {
      if (j < rows[r].first || j > rows[r].last) continue;
      for (int64_t i = 0; i < n_gqa; ++i)
        s.scores[(r * n_gqa + i) * ld + (j - rows[r].first)] =
            kt.vec_dot(hd, k, &s.q_typed[(r * n_gqa + i) * q_bytes]) * kq_scale;
    }
  }
  mask_scores(s.scores.data(), ld, rows, n_rows, n_gqa);
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t n_kv = rows[r].last - rows[r].first + 1;
    for (int64_t i = 0; i < n_gqa; ++i)
      softmax_pad16(&s.scores[(r * n_gqa + i) * ld], n_kv, kv.sinks ? kv.sinks + g * n_gqa + i : nullptr);
  }
  // Weighted V, V block by V block converted to floats: each output adds
  // its positions in increasing order, one product and one sum each.
  float* blk = s.kv_block.data();
  for (int64_t j0 = lo; j0 <= hi; j0 += bk) {
    const int64_t j1 = std::min(hi + 1, j0 + bk);
    for (int64_t j = j0; j < j1; ++j)
      vt.dequantize(group_slice(kv, kv.v_offset, kv.v_stride, j, kv.v_type, g, hd_v), blk + (j - j0) * hd_v, hd_v);
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = std::max(j0, rows[r].first), b = std::min(j1 - 1, rows[r].last);
      for (int64_t i = 0; i < n_gqa; ++i) {
        const float* p = &s.scores[(r * n_gqa + i) * ld];
        float* o = &s.vacc[(r * n_gqa + i) * hd_v];
        for (int64_t j = a; j <= b; ++j) {
          const float pj = p[j - rows[r].first];
          const float* vj = blk + (j - j0) * hd_v;
          for (int64_t d = 0; d < hd_v; ++d) o[d] += pj * vj[d];
        }
      }
    }
  }
  for (int64_t r = 0; r < n_rows; ++r)
    std::memcpy(rows[r].out, &s.vacc[r * n_gqa * hd_v], static_cast<size_t>(n_gqa * hd_v) * sizeof(float));
}

}  // namespace synapse::kernels

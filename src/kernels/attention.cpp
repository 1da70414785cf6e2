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

float row_max_scalar(const float* x, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[j]);
  return mx;
}

void scale_round_f16_scalar(float* x, int64_t n, float inv) {
  const float* h2f = fp16_table();
  for (int64_t j = 0; j < n; ++j) x[j] = h2f[quant::fp32_to_fp16(x[j] * inv)];
}

void softmax_rows_with(const OpsTable& t, float* x, int64_t ld, const int64_t* n, int64_t n_rows,
                       const float* sinks, int64_t n_sinks, bool round_f16) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = x + r * ld;
    const int64_t nr = n[r];
    const float* sink = sinks ? &sinks[r % n_sinks] : nullptr;
    float mx = t.row_max(row, nr);
    if (sink) mx = mx > *sink ? mx : *sink;  // ggml's MAX(max, sk[h])
    double sum = 0.0;
    for (int64_t c0 = 0; c0 < nr; c0 += kAttendChunk) sum += t.exp_sum(row + c0, std::min(kAttendChunk, nr - c0), mx);
    if (sink) sum += static_cast<double>(std::exp(*sink - mx));
    const float inv = static_cast<float>(1.0 / sum);
    if (round_f16) {
      t.scale_round_f16(row, nr, inv);
    } else {
      for (int64_t j = 0; j < nr; ++j) row[j] *= inv;
    }
  }
}

void softmax_f16_rows_scalar(float* x, int64_t ld, const int64_t* n, int64_t n_rows, const float* sinks,
                             int64_t n_sinks) {
  softmax_rows_with(ops_table(quant::Isa::scalar), x, ld, n, n_rows, sinks, n_sinks, true);
}

namespace {

// The end of a chunk of a row's weighted V (attention.hpp, top): the 16
// lanes acc ([16][hd_v]) summed into out (chunk 0) or into tmp and added to
// out (later chunks, in order), then cleared for the next chunk.
void flush_v_lanes(float* acc, int64_t hd_v, bool add, float* out, float* tmp) {
  reduce_v_lanes(acc, hd_v, add ? tmp : out);
  if (add)
    for (int64_t d = 0; d < hd_v; ++d) out[d] += tmp[d];
  std::fill_n(acc, 16 * hd_v, 0.0f);
}

}  // namespace

void attend_group_scalar(const KvLayerView& kv, int64_t g, int64_t first, int64_t last, const float* q,
                         int64_t n_gqa, int64_t hd, int64_t hd_v, float kq_scale, float* out,
                         AttentionScratch& s) {
  const float* h2f = fp16_table();
  const int64_t n_kv = last - first + 1;
  s.q.resize(static_cast<size_t>(n_gqa * hd));
  s.kv_row.resize(static_cast<size_t>(std::max(hd, hd_v) + hd_v));
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
  float* tmp = s.kv_row.data() + std::max(hd, hd_v);
  for (int64_t j = 0; j < n_kv; ++j) {
    const quant::ggml_fp16_t* v = kv_row(kv, kv.v_offset, kv.v_stride, first + j) + g * hd_v;
    for (int64_t d = 0; d < hd_v; ++d) s.kv_row[d] = h2f[v[d]];
    for (int64_t i = 0; i < n_gqa; ++i) {
      const float p = s.scores[i * n_kv + j];
      float* o = &s.vacc[(i * 16 + j % 16) * hd_v];
      for (int64_t d = 0; d < hd_v; ++d) o[d] = std::fma(p, s.kv_row[d], o[d]);
      if ((j + 1) % kAttendChunk == 0 || j == n_kv - 1)
        flush_v_lanes(&s.vacc[i * 16 * hd_v], hd_v, j >= kAttendChunk, out + i * hd_v, tmp);
    }
  }
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

void attend_scores_scalar(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                          int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld, AttentionScratch& s) {
  if (n_rows <= 0) return;
  const float* h2f = fp16_table();
  const RowSpan span = row_span(rows, n_rows);
  const int64_t n_q = n_rows * n_gqa;  // query vectors, row-major (row, head)
  s.q.resize(static_cast<size_t>(n_q * hd));
  s.kv_block.resize(static_cast<size_t>(bk * hd));
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n_gqa * hd; ++i) s.q[r * n_gqa * hd + i] = h2f[quant::fp32_to_fp16(rows[r].q[i])];
  float* blk = s.kv_block.data();
  // K block by K block: each row's positions of the block, in any order
  // (every score is its own dot product).
  for (int64_t j0 = span.lo; j0 <= span.hi; j0 += bk) {
    const int64_t j1 = std::min(span.hi + 1, j0 + bk);
    for (int64_t j = j0; j < j1; ++j) {
      const quant::ggml_fp16_t* k = kv_row(kv, kv.k_offset, kv.k_stride, j) + g * hd;
      for (int64_t d = 0; d < hd; ++d) blk[(j - j0) * hd + d] = h2f[k[d]];
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = std::max(j0, rows[r].first), b = std::min(j1 - 1, rows[r].last);
      for (int64_t i = 0; i < n_gqa; ++i) {
        const float* qi = &s.q[(r * n_gqa + i) * hd];
        float* sc = scores + (r * n_gqa + i) * ld;
        for (int64_t j = a; j <= b; ++j) sc[j - rows[r].first] = dot_kq(qi, blk + (j - j0) * hd, hd) * kq_scale;
      }
    }
  }
}

void attend_values_scalar(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                          int64_t hd_v, int64_t bk, const float* probs, int64_t ld, AttentionScratch& s) {
  if (n_rows <= 0) return;
  const float* h2f = fp16_table();
  const RowSpan span = row_span(rows, n_rows);
  const int64_t n_q = n_rows * n_gqa;
  s.kv_block.resize(static_cast<size_t>(bk * hd_v));
  s.kv_row.resize(static_cast<size_t>(hd_v));
  s.vacc.assign(static_cast<size_t>(n_q * 16 * hd_v), 0.0f);
  float* blk = s.kv_block.data();
  // V block by V block: each output element's lane (j - first) % 16 takes
  // its positions in increasing order, as in attend_group, the lanes summed
  // at each chunk's end.
  for (int64_t j0 = span.lo; j0 <= span.hi; j0 += bk) {
    const int64_t j1 = std::min(span.hi + 1, j0 + bk);
    for (int64_t j = j0; j < j1; ++j) {
      const quant::ggml_fp16_t* v = kv_row(kv, kv.v_offset, kv.v_stride, j) + g * hd_v;
      for (int64_t d = 0; d < hd_v; ++d) blk[(j - j0) * hd_v + d] = h2f[v[d]];
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = std::max(j0, rows[r].first), b = std::min(j1 - 1, rows[r].last);
      for (int64_t i = 0; i < n_gqa; ++i) {
        const float* p = probs + (r * n_gqa + i) * ld;
        float* acc = &s.vacc[(r * n_gqa + i) * 16 * hd_v];
        for (int64_t j = a; j <= b; ++j) {
          const int64_t off = j - rows[r].first;
          const float pj = p[off];
          const float* vj = blk + (j - j0) * hd_v;
          float* o = acc + (off % 16) * hd_v;
          for (int64_t d = 0; d < hd_v; ++d) o[d] = std::fma(pj, vj[d], o[d]);
          if ((off + 1) % kAttendChunk == 0 || j == rows[r].last)
            flush_v_lanes(acc, hd_v, off >= kAttendChunk, rows[r].out + i * hd_v, s.kv_row.data());
        }
      }
    }
  }
}

void attend_block_with(const OpsTable& t, const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows,
                       int64_t n_gqa, int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& s) {
  if (n_rows <= 0) return;
  const int64_t ld = row_span(rows, n_rows).ld;
  const int64_t n_q = n_rows * n_gqa;  // query vectors, row-major (row, head)
  const bool f16 = kv.k_type == GgmlType::F16 && kv.v_type == GgmlType::F16;
  s.scores.resize(static_cast<size_t>(n_q * ld));
  s.n_kv.resize(static_cast<size_t>(n_q));
  float* scores = s.scores.data();  // the pieces below leave s.scores as it is
  if (f16) t.attend_scores(kv, g, rows, n_rows, n_gqa, hd, kq_scale, bk, scores, ld, s);
  else t.attend_scores_typed(kv, g, rows, n_rows, n_gqa, hd, kq_scale, bk, scores, ld, s);
  // Softmax of each full score row (probabilities rounded to F16 for the F16 cache).
  mask_scores(scores, ld, rows, n_rows, n_gqa);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n_gqa; ++i) s.n_kv[r * n_gqa + i] = rows[r].last - rows[r].first + 1;
  softmax_rows_with(t, scores, ld, s.n_kv.data(), n_q, kv.sinks ? kv.sinks + g * n_gqa : nullptr, n_gqa, f16);
  if (f16) t.attend_values(kv, g, rows, n_rows, n_gqa, hd_v, bk, scores, ld, s);
  else t.attend_values_typed(kv, g, rows, n_rows, n_gqa, hd_v, bk, scores, ld, s);
}

void attend_block_scalar(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                         int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& s) {
  attend_block_with(ops_table(quant::Isa::scalar), kv, g, rows, n_rows, n_gqa, hd, hd_v, kq_scale, bk, s);
}

#if defined(__x86_64__) || defined(_M_X64)
// The x86 tables' entries, made of their pieces here (a generic translation
// unit: the pieces hold the instruction-set code).
void attend_block_avx2(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                       int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& s) {
  attend_block_with(ops_table(quant::Isa::avx2), kv, g, rows, n_rows, n_gqa, hd, hd_v, kq_scale, bk, s);
}

void attend_block_avx512(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                         int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& s) {
  attend_block_with(ops_table(quant::Isa::avx512), kv, g, rows, n_rows, n_gqa, hd, hd_v, kq_scale, bk, s);
}

void softmax_f16_rows_avx2(float* x, int64_t ld, const int64_t* n, int64_t n_rows, const float* sinks,
                           int64_t n_sinks) {
  softmax_rows_with(ops_table(quant::Isa::avx2), x, ld, n, n_rows, sinks, n_sinks, true);
}

void softmax_f16_rows_avx512(float* x, int64_t ld, const int64_t* n, int64_t n_rows, const float* sinks,
                             int64_t n_sinks) {
  softmax_rows_with(ops_table(quant::Isa::avx512), x, ld, n, n_rows, sinks, n_sinks, true);
}
#endif

void attend_block_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                        int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& s) {
  attend_block_with(active_ops(), kv, g, rows, n_rows, n_gqa, hd, hd_v, kq_scale, bk, s);
}

// Decode at depth: chunk c of a row as a row of its own (its scores are the
// row's, its lanes restart at its first position).
namespace {

QueryRow chunk_row(const QueryRow& row, int64_t c, float* out) {
  const int64_t first = row.first + c * kAttendChunk;
  return {row.q, out, first, std::min(row.last, first + kAttendChunk - 1), 0};
}

// The row's softmax max of head i: its chunks' maxima, then the sink.
float row_max_of_chunks(const KvLayerView& kv, int64_t g, const QueryRow& row, int64_t i, int64_t n_gqa,
                        const float* chunk_max) {
  const int64_t n_chunks = attend_chunk_count(row);
  float mx = chunk_max[i * n_chunks];
  for (int64_t c = 1; c < n_chunks; ++c) mx = std::max(mx, chunk_max[i * n_chunks + c]);
  const float* sink = kv.sinks ? kv.sinks + g * n_gqa + i : nullptr;
  return sink && !(mx > *sink) ? *sink : mx;  // ggml's MAX(max, sk[h])
}

bool f16_cache(const KvLayerView& kv) { return kv.k_type == GgmlType::F16 && kv.v_type == GgmlType::F16; }

}  // namespace

int64_t attend_chunk_count(const QueryRow& row) { return (row.last - row.first) / kAttendChunk + 1; }

void attend_chunk_scores(const KvLayerView& kv, int64_t g, const QueryRow& row, int64_t c, int64_t n_gqa, int64_t hd,
                         int64_t hd_v, float kq_scale, float* scores, float* chunk_max, AttentionScratch& s) {
  const OpsTable& t = active_ops();
  const int64_t n_kv = row.last - row.first + 1, n_chunks = attend_chunk_count(row);
  const QueryRow ch = chunk_row(row, c, nullptr);
  float* sc = scores + (ch.first - row.first);
  const int64_t bk = attend_block_bk(hd, hd_v);
  if (f16_cache(kv)) t.attend_scores(kv, g, &ch, 1, n_gqa, hd, kq_scale, bk, sc, n_kv, s);
  else t.attend_scores_typed(kv, g, &ch, 1, n_gqa, hd, kq_scale, bk, sc, n_kv, s);
  if (c == 0) mask_scores(scores, n_kv, &row, 1, n_gqa);
  for (int64_t i = 0; i < n_gqa; ++i) chunk_max[i * n_chunks + c] = t.row_max(sc + i * n_kv, ch.last - ch.first + 1);
}

void attend_chunk_exp(const KvLayerView& kv, int64_t g, const QueryRow& row, int64_t c, int64_t n_gqa, float* scores,
                      const float* chunk_max, double* chunk_sum) {
  const OpsTable& t = active_ops();
  const int64_t n_kv = row.last - row.first + 1, n_chunks = attend_chunk_count(row);
  const QueryRow ch = chunk_row(row, c, nullptr);
  for (int64_t i = 0; i < n_gqa; ++i)
    chunk_sum[i * n_chunks + c] = t.exp_sum(scores + i * n_kv + (ch.first - row.first), ch.last - ch.first + 1,
                                            row_max_of_chunks(kv, g, row, i, n_gqa, chunk_max));
}

void attend_chunk_values(const KvLayerView& kv, int64_t g, const QueryRow& row, int64_t c, int64_t n_gqa, int64_t hd,
                         int64_t hd_v, float* scores, const float* chunk_max, const double* chunk_sum,
                         float* partial, AttentionScratch& s) {
  const OpsTable& t = active_ops();
  const int64_t n_kv = row.last - row.first + 1, n_chunks = attend_chunk_count(row);
  const QueryRow ch = chunk_row(row, c, partial + c * n_gqa * hd_v);
  const int64_t n = ch.last - ch.first + 1;
  const bool f16 = f16_cache(kv);
  float* p = scores + (ch.first - row.first);
  for (int64_t i = 0; i < n_gqa; ++i) {
    // softmax_rows_with's denominator: the chunk sums in order, then the sink.
    double sum = 0.0;
    for (int64_t k = 0; k < n_chunks; ++k) sum += chunk_sum[i * n_chunks + k];
    if (kv.sinks)
      sum += static_cast<double>(std::exp(kv.sinks[g * n_gqa + i] - row_max_of_chunks(kv, g, row, i, n_gqa, chunk_max)));
    const float inv = static_cast<float>(1.0 / sum);
    if (f16) {
      t.scale_round_f16(p + i * n_kv, n, inv);
    } else {
      for (int64_t j = 0; j < n; ++j) p[i * n_kv + j] *= inv;
    }
  }
  const int64_t bk = attend_block_bk(hd, hd_v);
  if (f16) t.attend_values(kv, g, &ch, 1, n_gqa, hd_v, bk, p, n_kv, s);
  else t.attend_values_typed(kv, g, &ch, 1, n_gqa, hd_v, bk, p, n_kv, s);
}

void attend_chunks_combine(const QueryRow& row, int64_t n_gqa, int64_t hd_v, const float* partial) {
  const int64_t n_chunks = attend_chunk_count(row), w = n_gqa * hd_v;
  std::copy_n(partial, w, row.out);
  for (int64_t c = 1; c < n_chunks; ++c)
    for (int64_t e = 0; e < w; ++e) row.out[e] += partial[c * w + e];
}

void attend_block(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd,
                  int64_t hd_v, float kq_scale, AttentionScratch& s) {
  attend_block_with(active_ops(), kv, g, rows, n_rows, n_gqa, hd, hd_v, kq_scale, attend_block_bk(hd, hd_v), s);
}

}  // namespace synapse::kernels

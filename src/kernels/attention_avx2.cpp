// AVX2+FMA+F16C attention (built with those flags; chosen at run time). Bit
// for bit the order of attend_group_scalar (attention.hpp).
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention.hpp"
#include "kernels/attention_f16.hpp"
#include "kernels/ops.hpp"
#include "kernels/ops_avx2.hpp"
#include "quant/avx2_util.hpp"

namespace synapse::kernels {
namespace {

// dot_kq: hd % 16 == 0 as two 8-lane chains (lanes 0..7 and 8..15 of the
// 16), hsum_float_16 = hsum_float_8(high + low); other hd the reference.
float dot_kq16(const float* a, const float* b, int64_t n) {
  if (n % 16 != 0) return dot_kq(a, b, n);
  __m256 lo = _mm256_setzero_ps(), hi = lo;
  for (int64_t d = 0; d < n; d += 16) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + d + 8), _mm256_loadu_ps(b + d + 8), hi);
  }
  return quant::avx2::hsum_float_8(_mm256_add_ps(hi, lo));
}

// Lane l of the result = hsum_float_8(a_l): hsum_float_8's tree for 8
// accumulators at once (a transpose by permutes, shuffles and hadd; each
// add is the tree's add, operands at most swapped, so the bits are equal).
inline __m256 hsum8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6, __m256 a7) {
  // Step 1, lanes l + (l+4): pairs (a0,a4) (a1,a5) (a2,a6) (a3,a7) share a
  // register, so the later steps leave sums 0..3 in the low half, 4..7 high.
  const __m256 s04 = _mm256_add_ps(_mm256_permute2f128_ps(a0, a4, 0x20), _mm256_permute2f128_ps(a0, a4, 0x31));
  const __m256 s15 = _mm256_add_ps(_mm256_permute2f128_ps(a1, a5, 0x20), _mm256_permute2f128_ps(a1, a5, 0x31));
  const __m256 s26 = _mm256_add_ps(_mm256_permute2f128_ps(a2, a6, 0x20), _mm256_permute2f128_ps(a2, a6, 0x31));
  const __m256 s37 = _mm256_add_ps(_mm256_permute2f128_ps(a3, a7, 0x20), _mm256_permute2f128_ps(a3, a7, 0x31));
  // Step 2, t0 + t2 and t1 + t3 of each key.
  const __m256 u0145 = _mm256_add_ps(_mm256_shuffle_ps(s04, s15, _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm256_shuffle_ps(s04, s15, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 u2367 = _mm256_add_ps(_mm256_shuffle_ps(s26, s37, _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm256_shuffle_ps(s26, s37, _MM_SHUFFLE(3, 2, 3, 2)));
  // Step 3, (t0 + t2) + (t1 + t3): sums 0 1 2 3 | 4 5 6 7.
  return _mm256_hadd_ps(u0145, u2367);
}

// The scores of one query against 8 consecutive K rows k, k + hd, ...
// (hd % 16 == 0): eight dot_kq16 at once. Each key's two 8-lane chains are
// added (high + low, hsum_float_16's first step), then the 8 sums are
// reduced in hsum_float_8's tree for all 8 keys together.
void dot8_kq16(const float* q, const float* k, int64_t hd, float kq_scale, float* scores) {
  __m256 lo[8], hi[8];
  for (int t = 0; t < 8; ++t) lo[t] = hi[t] = _mm256_setzero_ps();
  for (int64_t d = 0; d < hd; d += 16) {
    const __m256 ql = _mm256_loadu_ps(q + d), qh = _mm256_loadu_ps(q + d + 8);
    for (int t = 0; t < 8; ++t) {
      lo[t] = _mm256_fmadd_ps(ql, _mm256_loadu_ps(k + t * hd + d), lo[t]);
      hi[t] = _mm256_fmadd_ps(qh, _mm256_loadu_ps(k + t * hd + d + 8), hi[t]);
    }
  }
  for (int t = 0; t < 8; ++t) lo[t] = _mm256_add_ps(hi[t], lo[t]);
  const __m256 r = hsum8x8(lo[0], lo[1], lo[2], lo[3], lo[4], lo[5], lo[6], lo[7]);
  _mm256_storeu_ps(scores, _mm256_mul_ps(r, _mm256_set1_ps(kq_scale)));
}

// The scores of 4 queries q, q + hd, q + 2 hd, q + 3 hd (the heads of one
// row) against 2 consecutive K rows k, k + hd (hd % 16 == 0): eight
// dot_kq16 as dot8_kq16 computes them, with each K load serving 4 queries.
// scores[h] gets query h's two scores.
void dot4x2_kq16(const float* q, const float* k, int64_t hd, float kq_scale, float* const scores[4]) {
  __m256 lo[8], hi[8];
  for (int t = 0; t < 8; ++t) lo[t] = hi[t] = _mm256_setzero_ps();
  for (int64_t d = 0; d < hd; d += 16) {
    const __m256 k0l = _mm256_loadu_ps(k + d), k1l = _mm256_loadu_ps(k + hd + d);
    const __m256 k0h = _mm256_loadu_ps(k + d + 8), k1h = _mm256_loadu_ps(k + hd + d + 8);
    for (int h = 0; h < 4; ++h) {
      const __m256 ql = _mm256_loadu_ps(q + h * hd + d), qh = _mm256_loadu_ps(q + h * hd + d + 8);
      lo[2 * h] = _mm256_fmadd_ps(ql, k0l, lo[2 * h]);
      lo[2 * h + 1] = _mm256_fmadd_ps(ql, k1l, lo[2 * h + 1]);
      hi[2 * h] = _mm256_fmadd_ps(qh, k0h, hi[2 * h]);
      hi[2 * h + 1] = _mm256_fmadd_ps(qh, k1h, hi[2 * h + 1]);
    }
  }
  for (int t = 0; t < 8; ++t) lo[t] = _mm256_add_ps(hi[t], lo[t]);
  const __m256 r = hsum8x8(lo[0], lo[1], lo[2], lo[3], lo[4], lo[5], lo[6], lo[7]);
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_mul_ps(r, _mm256_set1_ps(kq_scale)));
  for (int h = 0; h < 4; ++h) scores[h][0] = t[2 * h], scores[h][1] = t[2 * h + 1];
}

// o[0 .. 8*NV) = fma(p_j, v_j[.], o) for j = 0, 16, 32, .. < n (v_j = v + j
// * ld): one of the 16 position lanes, with the NV accumulators held in
// registers across its positions.
template <int NV>
void weighted_v(const float* p, const float* v, int64_t ld, int64_t n, float* o) {
  __m256 acc[NV];
  for (int k = 0; k < NV; ++k) acc[k] = _mm256_loadu_ps(o + 8 * k);
  for (int64_t j = 0; j < n; j += 16) {
    const __m256 pv = _mm256_broadcast_ss(p + j);
    for (int k = 0; k < NV; ++k) acc[k] = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + j * ld + 8 * k), acc[k]);
  }
  for (int k = 0; k < NV; ++k) _mm256_storeu_ps(o + 8 * k, acc[k]);
}

// weighted_v for G heads of one row at once (their probabilities p[h],
// lane accumulators o[h]): each V load serves the G heads. Per output element the
// same fused multiply-adds in the same order as weighted_v.
template <int G, int NV>
void weighted_v_heads(const float* const* p, const float* v, int64_t ld, int64_t n, float* const* o) {
  __m256 acc[G][NV];
  for (int h = 0; h < G; ++h)
    for (int k = 0; k < NV; ++k) acc[h][k] = _mm256_loadu_ps(o[h] + 8 * k);
  for (int64_t j = 0; j < n; j += 16) {
    __m256 vv[NV];
    for (int k = 0; k < NV; ++k) vv[k] = _mm256_loadu_ps(v + j * ld + 8 * k);
    for (int h = 0; h < G; ++h) {
      const __m256 pv = _mm256_broadcast_ss(p[h] + j);
      for (int k = 0; k < NV; ++k) acc[h][k] = _mm256_fmadd_ps(pv, vv[k], acc[h][k]);
    }
  }
  for (int h = 0; h < G; ++h)
    for (int k = 0; k < NV; ++k) _mm256_storeu_ps(o[h] + 8 * k, acc[h][k]);
}

}  // namespace

// max(x[0 .. n)), n >= 1, as kernels::softmax's std::max chain gives it for
// non-NaN values (max is exact in any order).
float row_max_avx2(const float* x, int64_t n) {
  int64_t j = 0;
  float mx = -INFINITY;
  if (n >= 32) {
    __m256 m0 = _mm256_loadu_ps(x), m1 = _mm256_loadu_ps(x + 8), m2 = _mm256_loadu_ps(x + 16),
           m3 = _mm256_loadu_ps(x + 24);
    for (j = 32; j + 32 <= n; j += 32) {
      m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + j));
      m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + j + 8));
      m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + j + 16));
      m3 = _mm256_max_ps(m3, _mm256_loadu_ps(x + j + 24));
    }
    const __m256 m = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    mx = _mm_cvtss_f32(h);
  }
  for (; j < n; ++j) mx = std::max(mx, x[j]);
  return mx;
}

// x[0 .. n) *= inv, then rounded through F16 (kernels::softmax's last step
// and the probabilities' rounding).
void scale_round_f16_avx2(float* x, int64_t n, float inv) { scale_round_f16(x, n, inv); }

double exp_sum_avx2(float* x, int64_t n, float m) {
  // kernels::exp_sum_pad16 (ggml_vec_soft_max_f32's AVX-512 loop over a row
  // padded with -inf to a multiple of 16), each group as two halves.
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 mx = _mm256_set1_ps(m);
  double sum = 0.0;
  for (int64_t j = 0; j < n; j += 16) {
    __m256 half[2];
    for (int h = 0; h < 2; ++h) {
      const int64_t jh = j + 8 * h;
      if (jh + 8 <= n) {
        half[h] = expf_ggml_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + jh), mx));
        _mm256_storeu_ps(x + jh, half[h]);
      } else if (jh >= n) {
        half[h] = _mm256_setzero_ps();
      } else {
        alignas(32) float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t l = 0; jh + l < n; ++l) t[l] = x[jh + l];
        __m256 val = expf_ggml_avx2(_mm256_sub_ps(_mm256_load_ps(t), mx));
        val = _mm256_and_ps(
            val, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - jh)), idx)));
        _mm256_store_ps(t, val);
        for (int64_t l = 0; jh + l < n; ++l) x[jh + l] = t[l];
        half[h] = val;
      }
    }
    sum += static_cast<double>(quant::avx2::hsum_float_8(_mm256_add_ps(half[1], half[0])));
  }
  return sum;
}

// out[d] = hsum_float_16 of the 16 lanes acc[l * hd_v + d] (reduce_v_lanes),
// 8 outputs at a time: each step of the tree is an elementwise add.
void reduce_v_lanes_avx2(const float* acc, int64_t hd_v, float* out) {
  int64_t d = 0;
  for (; d + 8 <= hd_v; d += 8) {
    __m256 l[8];
    for (int i = 0; i < 8; ++i) l[i] = _mm256_add_ps(_mm256_loadu_ps(acc + (i + 8) * hd_v + d),
                                                     _mm256_loadu_ps(acc + i * hd_v + d));
    for (int i = 0; i < 4; ++i) l[i] = _mm256_add_ps(l[i + 4], l[i]);
    _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_add_ps(l[0], l[2]), _mm256_add_ps(l[1], l[3])));
  }
  if (d < hd_v) {
    float t[16 * 8];
    const int64_t m = hd_v - d;
    for (int i = 0; i < 16; ++i)
      for (int64_t e = 0; e < m; ++e) t[i * m + e] = acc[i * hd_v + d + e];
    reduce_v_lanes(t, m, out + d);
  }
}

namespace {

// A row's weighted V at the end of one of its chunks (attention.hpp, top):
// the 16 lanes acc ([16][hd_v]) summed into out (the first chunk) or into
// tmp and added to out (later chunks), then cleared.
void flush_v_lanes8(float* acc, int64_t hd_v, bool add, float* out, float* tmp) {
  reduce_v_lanes_avx2(acc, hd_v, add ? tmp : out);
  int64_t d = 0;
  if (add) {
    for (; d + 8 <= hd_v; d += 8)
      _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_loadu_ps(out + d), _mm256_loadu_ps(tmp + d)));
    for (; d < hd_v; ++d) out[d] += tmp[d];
  }
  for (d = 0; d < 16 * hd_v; ++d) acc[d] = 0.0f;
}

// True when some row attends a position of [j0, j1).
bool block_used8(const QueryRow* rows, int64_t n_rows, int64_t j0, int64_t j1) {
  for (int64_t r = 0; r < n_rows; ++r)
    if (rows[r].first < j1 && rows[r].last >= j0) return true;
  return false;
}

}  // namespace

void attend_scores_avx2(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                        int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld, AttentionScratch& s) {
  if (n_rows <= 0) return;
  const RowSpan span = row_span(rows, n_rows);
  const int64_t n_q = n_rows * n_gqa;  // query vectors, row-major (row, head)
  const ScratchPtrs sp = size_scratch(s, n_q * hd, 0, 0, bk * hd, 0, 0);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n_gqa * hd; ++i) sp.q[r * n_gqa * hd + i] = rows[r].q[i];
  round_f16(sp.q, n_q * hd);
  float* blk = sp.kv_block;
  const bool wide = hd % 16 == 0;
  // K block by K block (each score is its own dot product).
  for (int64_t j0 = span.lo; j0 <= span.hi; j0 += bk) {
    const int64_t j1 = std::min(span.hi + 1, j0 + bk);
    if (!block_used8(rows, n_rows, j0, j1)) continue;
    load_rows_f16(kv.pages, kv.page_shift, kv.k_offset + g * hd, kv.k_stride, j0, j1, hd, blk);
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = std::max(j0, rows[r].first), b = std::min(j1 - 1, rows[r].last);
      if (a > b) continue;  // (the score pointers below would lie outside the row)
      int64_t i = 0;
      for (; wide && i + 4 <= n_gqa; i += 4) {  // four heads at a time: each K load serves 4 queries
        const float* qi = sp.q + (r * n_gqa + i) * hd;
        float* sc[4];
        for (int h = 0; h < 4; ++h) sc[h] = scores + (r * n_gqa + i + h) * ld + (a - rows[r].first);
        int64_t j = a;
        for (; j + 2 <= b + 1; j += 2) {
          dot4x2_kq16(qi, blk + (j - j0) * hd, hd, kq_scale, sc);
          for (int h = 0; h < 4; ++h) sc[h] += 2;
        }
        if (j <= b)
          for (int h = 0; h < 4; ++h) *sc[h] = dot_kq16(qi + h * hd, blk + (j - j0) * hd, hd) * kq_scale;
      }
      for (; i < n_gqa; ++i) {
        const float* qi = sp.q + (r * n_gqa + i) * hd;
        float* sc = scores + (r * n_gqa + i) * ld;
        int64_t j = a;
        for (; wide && j + 8 <= b + 1; j += 8) dot8_kq16(qi, blk + (j - j0) * hd, hd, kq_scale, sc + (j - rows[r].first));
        for (; j <= b; ++j) sc[j - rows[r].first] = dot_kq16(qi, blk + (j - j0) * hd, hd) * kq_scale;
      }
    }
  }
}

void attend_values_avx2(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                        int64_t hd_v, int64_t bk, const float* probs, int64_t ld, AttentionScratch& s) {
  if (n_rows <= 0) return;
  const RowSpan span = row_span(rows, n_rows);
  const int64_t n_q = n_rows * n_gqa;
  const ScratchPtrs sp = size_scratch(s, 0, hd_v, 0, bk * hd_v, 0, n_q * 16 * hd_v);
  for (int64_t i = 0; i < n_q * 16 * hd_v; ++i) sp.vacc[i] = 0.0f;
  float* blk = sp.kv_block;
  // V block by V block: lane l of each output element takes the positions j
  // with (j - first) % 16 == l of each chunk in increasing order, as in
  // attend_group; the lanes are summed at each chunk's end.
  for (int64_t j0 = span.lo; j0 <= span.hi; j0 += bk) {
    const int64_t j1 = std::min(span.hi + 1, j0 + bk);
    if (!block_used8(rows, n_rows, j0, j1)) continue;
    load_rows_f16(kv.pages, kv.page_shift, kv.v_offset + g * hd_v, kv.v_stride, j0, j1, hd_v, blk);
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t first = rows[r].first;
      const int64_t a0 = std::max(j0, first), b0 = std::min(j1 - 1, rows[r].last);
      // [a0, b0] cut at the row's chunk ends: [a, b] within one chunk.
      for (int64_t a = a0; a <= b0;) {
        const int64_t chunk_end = first + ((a - first) / kAttendChunk + 1) * kAttendChunk - 1;
        const int64_t b = std::min(b0, chunk_end);
        for (int64_t l = 0; l < 16; ++l) {
          // The first position of [a, b] in lane l, and how many follow it.
          const int64_t ja = a + ((l - (a - first)) % 16 + 16) % 16;
          if (ja > b) continue;
          const int64_t n = b - ja + 1;
          const float* vb = blk + (ja - j0) * hd_v;
          int64_t i = 0;
          // Four heads at a time, 16 elements of each: each V load serves the
          // 4 heads, 8 accumulators in registers.
          if (hd_v % 16 == 0) {
            for (; i + 4 <= n_gqa; i += 4) {
              const float* p[4];
              float* o[4];
              for (int h = 0; h < 4; ++h) {
                p[h] = probs + (r * n_gqa + i + h) * ld + (ja - first);
                o[h] = sp.vacc + ((r * n_gqa + i + h) * 16 + l) * hd_v;
              }
              for (int64_t d = 0; d < hd_v; d += 16) {
                float* od[4] = {o[0] + d, o[1] + d, o[2] + d, o[3] + d};
                weighted_v_heads<4, 2>(p, vb + d, hd_v, n, od);
              }
            }
          }
          for (; i < n_gqa; ++i) {
            const float* p = probs + (r * n_gqa + i) * ld + (ja - first);
            float* o = sp.vacc + ((r * n_gqa + i) * 16 + l) * hd_v;
            int64_t d = 0;
            for (; d + 64 <= hd_v; d += 64) weighted_v<8>(p, vb + d, hd_v, n, o + d);
            if (d + 32 <= hd_v) weighted_v<4>(p, vb + d, hd_v, n, o + d), d += 32;
            if (d + 16 <= hd_v) weighted_v<2>(p, vb + d, hd_v, n, o + d), d += 16;
            if (d + 8 <= hd_v) weighted_v<1>(p, vb + d, hd_v, n, o + d), d += 8;
            for (; d < hd_v; ++d)
              for (int64_t j = 0; j < n; j += 16) o[d] = std::fma(p[j], vb[j * hd_v + d], o[d]);
          }
        }
        if (b == chunk_end || b == rows[r].last)
          for (int64_t i = 0; i < n_gqa; ++i)
            flush_v_lanes8(sp.vacc + (r * n_gqa + i) * 16 * hd_v, hd_v, a - first >= kAttendChunk,
                          rows[r].out + i * hd_v, sp.kv_row);
        a = b + 1;
      }
    }
  }
}

void attend_group_avx2(const KvLayerView& kv, int64_t g, int64_t first, int64_t last, const float* q, int64_t n_gqa,
                       int64_t hd, int64_t hd_v, float kq_scale, float* out, AttentionScratch& s) {
  const int64_t n_kv = last - first + 1;
  const ScratchPtrs sp =
      size_scratch(s, n_gqa * hd, std::max(hd, hd_v) + hd_v, n_gqa * n_kv, 0, n_gqa, n_gqa * 16 * hd_v);
  for (int64_t i = 0; i < n_gqa * hd; ++i) sp.q[i] = q[i];
  round_f16(sp.q, n_gqa * hd);
  for (int64_t j = 0; j < n_kv; ++j) {
    load_f16(kv_row(kv.pages, kv.page_shift, kv.k_offset, kv.k_stride, first + j) + g * hd, sp.kv_row, hd);
    for (int64_t i = 0; i < n_gqa; ++i) sp.scores[i * n_kv + j] = dot_kq16(sp.q + i * hd, sp.kv_row, hd) * kq_scale;
  }
  for (int64_t i = 0; i < n_gqa; ++i) sp.n_kv[i] = n_kv;
  softmax_f16_rows_avx2(sp.scores, n_kv, sp.n_kv, n_gqa, kv.sinks ? kv.sinks + g * n_gqa : nullptr, n_gqa);
  for (int64_t i = 0; i < n_gqa * 16 * hd_v; ++i) sp.vacc[i] = 0.0f;
  float* tmp = sp.kv_row + std::max(hd, hd_v);
  for (int64_t j = 0; j < n_kv; ++j) {
    load_f16(kv_row(kv.pages, kv.page_shift, kv.v_offset, kv.v_stride, first + j) + g * hd_v, sp.kv_row, hd_v);
    for (int64_t i = 0; i < n_gqa; ++i) {
      const float p = sp.scores[i * n_kv + j];
      const __m256 pv = _mm256_set1_ps(p);
      float* o = sp.vacc + (i * 16 + j % 16) * hd_v;
      int64_t d = 0;
      for (; d + 8 <= hd_v; d += 8)
        _mm256_storeu_ps(o + d, _mm256_fmadd_ps(pv, _mm256_loadu_ps(sp.kv_row + d), _mm256_loadu_ps(o + d)));
      for (; d < hd_v; ++d) o[d] = std::fma(p, sp.kv_row[d], o[d]);
      if ((j + 1) % kAttendChunk == 0 || j == n_kv - 1)
        flush_v_lanes8(sp.vacc + i * 16 * hd_v, hd_v, j >= kAttendChunk, out + i * hd_v, tmp);
    }
  }
}

}  // namespace synapse::kernels
#endif

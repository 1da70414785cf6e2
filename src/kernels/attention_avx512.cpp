// AVX-512 attention (built with -mavx512f/bw/dq/vl; chosen at run time when
// the CPU reports them). Bit for bit the order of attend_group_scalar
// (attention.hpp): llama.cpp v0.5.0's AVX-512 orders are 16 lanes wide, one
// zmm register, so here every 16-lane partial sum is one register and the
// wider registers go across query heads, keys and outputs, never along a
// reduction. No std:: templates or containers (scripts/check-isa-objects.sh).
#if defined(__x86_64__) || defined(_M_X64)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized (-Wuninitialized where _mm512_reduce_max_ps is
// inlined into an exported function) reports as read uninitialized (GCC bug
// 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cmath>

#include "kernels/attention.hpp"
#include "kernels/attention_f16.hpp"
#include "kernels/avx512_util.hpp"

namespace synapse::kernels {
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max64(int64_t a, int64_t b) { return a < b ? b : a; }

// kernels::expf_ggml in 16 lanes: ggml_v_expf's AVX-512 form itself
// (_mm512_scalef_ps is the reference's std::ldexp, one rounding).
inline __m512 expf16(__m512 x) {
  const __m512 r = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
  const __m512 n = _mm512_sub_ps(z, r);
  const __m512 b =
      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 j = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
      u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  const __m512 res = _mm512_scalef_ps(j, n);
  if (!d) return res;
  const __m512 zero = _mm512_setzero_ps();
  const __m512 big = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, zero, _CMP_LE_OQ), _mm512_set1_ps(INFINITY), zero);
  return _mm512_mask_blend_ps(d, res, big);
}

// hsum_float_16 of 16 registers at once: lane 4c + e of the result is the
// horizontal sum of acc[4e + c]. Each level is one step of hsum_float_16's
// tree for all 16 (the same two operands per add, at most swapped):
//   h_i = a_{i+8} + a_i, r_i = h_{i+4} + h_i, t_0 = r_0 + r_2,
//   t_1 = r_1 + r_3, sum = t_0 + t_1.
inline __m512 hsum16x16(const __m512 acc[16]) {
  __m512 l1[8], l2[4];
  for (int m = 0; m < 8; ++m)  // l1[m] = [h(acc[2m]) | h(acc[2m+1])]
    l1[m] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * m], acc[2 * m + 1], 0x44),
                          _mm512_shuffle_f32x4(acc[2 * m], acc[2 * m + 1], 0xEE));
  for (int m = 0; m < 4; ++m)  // l2[m], 128-bit chunk c = r(acc[4m + c])
    l2[m] = _mm512_add_ps(_mm512_shuffle_f32x4(l1[2 * m], l1[2 * m + 1], 0x88),
                          _mm512_shuffle_f32x4(l1[2 * m], l1[2 * m + 1], 0xDD));
  // m0 chunk c = [t0, t1 of acc[c] | t0, t1 of acc[4 + c]]; m1 the same for acc[8 + c], acc[12 + c].
  const __m512 m0 = _mm512_add_ps(_mm512_shuffle_ps(l2[0], l2[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_ps(l2[0], l2[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 m1 = _mm512_add_ps(_mm512_shuffle_ps(l2[2], l2[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_ps(l2[2], l2[3], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_ps(m0, m1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(m0, m1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// dot_kq (hd % 16 == 0, tinyBLAS<16>'s order) of 4 queries q[c] with 4 keys
// k[e], times kq_scale: lane 4c + e = query c . key e. Each K and q load
// serves 4 products; each product is its own 16-lane fma chain.
inline __m512 dot4x4(const float* const q[4], const float* const k[4], int64_t hd, float kq_scale) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t d = 0; d < hd; d += 16) {
    __m512 qv[4], kv[4];
    for (int c = 0; c < 4; ++c) qv[c] = _mm512_loadu_ps(q[c] + d);
    for (int e = 0; e < 4; ++e) kv[e] = _mm512_loadu_ps(k[e] + d);
    for (int e = 0; e < 4; ++e)
      for (int c = 0; c < 4; ++c) acc[4 * e + c] = _mm512_fmadd_ps(qv[c], kv[e], acc[4 * e + c]);
  }
  return _mm512_mul_ps(hsum16x16(acc), _mm512_set1_ps(kq_scale));
}

// dot_kq of one query with 16 keys k[0..15], times kq_scale: lane i = key i.
inline __m512 dot1x16(const float* q, const float* const k[16], int64_t hd, float kq_scale) {
  __m512 acc[16];  // acc[4e + c] holds key 4c + e (hsum16x16's lane order)
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t d = 0; d < hd; d += 16) {
    const __m512 qv = _mm512_loadu_ps(q + d);
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k[4 * (i % 4) + i / 4] + d), acc[i]);
  }
  return _mm512_mul_ps(hsum16x16(acc), _mm512_set1_ps(kq_scale));
}

// o[h][0 .. 16*NV) = fma(p[h][j], v_j[.], o[h]) for j = 0, 16, 32, .. < n
// (v_j = v + j * ld), G heads at once: one of the 16 position lanes, the
// G*NV accumulators in registers across its positions, each V load serving
// the G heads. Per output element the fused multiply-adds of the reference
// in its order.
template <int G, int NV>
void weighted_v(const float* const* p, const float* v, int64_t ld, int64_t n, float* const* o) {
  __m512 acc[G][NV];
  for (int h = 0; h < G; ++h)
    for (int k = 0; k < NV; ++k) acc[h][k] = _mm512_loadu_ps(o[h] + 16 * k);
  for (int64_t j = 0; j < n; j += 16) {
    __m512 vv[NV];
    for (int k = 0; k < NV; ++k) vv[k] = _mm512_loadu_ps(v + j * ld + 16 * k);
    for (int h = 0; h < G; ++h) {
      const __m512 pv = _mm512_set1_ps(p[h][j]);
      for (int k = 0; k < NV; ++k) acc[h][k] = _mm512_fmadd_ps(pv, vv[k], acc[h][k]);
    }
  }
  for (int h = 0; h < G; ++h)
    for (int k = 0; k < NV; ++k) _mm512_storeu_ps(o[h] + 16 * k, acc[h][k]);
}

// weighted_v over all hd_v (a multiple of 16) columns: 64 at a time, then 32, 16.
template <int G>
void weighted_v_all(const float* const* p, const float* v, int64_t hd_v, int64_t n, float* const* o) {
  int64_t d = 0;
  float* od[G];
  for (; d + 64 <= hd_v; d += 64) {
    for (int h = 0; h < G; ++h) od[h] = o[h] + d;
    weighted_v<G, 4>(p, v + d, hd_v, n, od);
  }
  if (d + 32 <= hd_v) {
    for (int h = 0; h < G; ++h) od[h] = o[h] + d;
    weighted_v<G, 2>(p, v + d, hd_v, n, od);
    d += 32;
  }
  if (d < hd_v) {
    for (int h = 0; h < G; ++h) od[h] = o[h] + d;
    weighted_v<G, 1>(p, v + d, hd_v, n, od);
  }
}

// out[d] = hsum_float_16 of the 16 lanes acc[l * hd_v + d] (reduce_v_lanes),
// 16 outputs at a time (hd_v % 16 == 0): each step of the tree is a vertical add.
void reduce_v_lanes16(const float* acc, int64_t hd_v, float* out) {
  for (int64_t d = 0; d < hd_v; d += 16) {
    __m512 l[8];
    for (int i = 0; i < 8; ++i)
      l[i] = _mm512_add_ps(_mm512_loadu_ps(acc + (i + 8) * hd_v + d), _mm512_loadu_ps(acc + i * hd_v + d));
    for (int i = 0; i < 4; ++i) l[i] = _mm512_add_ps(l[i + 4], l[i]);
    _mm512_storeu_ps(out + d, _mm512_add_ps(_mm512_add_ps(l[0], l[2]), _mm512_add_ps(l[1], l[3])));
  }
}

}  // namespace

float row_max_avx512(const float* x, int64_t n) {
  // max is exact in any order; +-0 ties give the same exp(x - max)
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  __m512 m = ninf;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + j));
  if (j < n) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(ninf, first_n(n - j), x + j));
  return _mm512_reduce_max_ps(m);
}

double exp_sum_avx512(float* x, int64_t n, float m) {
  // kernels::exp_sum_pad16: ggml_vec_soft_max_f32's AVX-512 loop is this
  // loop (16 lanes, the last group masked: ggml_v_expf(-inf) = 0).
  const __m512 mx = _mm512_set1_ps(m);
  double sum = 0.0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 e = expf16(_mm512_sub_ps(_mm512_loadu_ps(x + j), mx));
    _mm512_storeu_ps(x + j, e);
    sum += static_cast<double>(hsum16(e));
  }
  if (j < n) {
    const __mmask16 k = first_n(n - j);
    const __m512 e = _mm512_maskz_mov_ps(k, expf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mx)));
    _mm512_mask_storeu_ps(x + j, k, e);
    sum += static_cast<double>(hsum16(e));
  }
  return sum;
}

void scale_round_f16_avx512(float* x, int64_t n, float inv) { scale_round_f16(x, n, inv); }

namespace {

// True when some row attends a position of [j0, j1).
bool block_used16(const QueryRow* rows, int64_t n_rows, int64_t j0, int64_t j1) {
  for (int64_t r = 0; r < n_rows; ++r)
    if (rows[r].first < j1 && rows[r].last >= j0) return true;
  return false;
}

// A row's weighted V at the end of one of its chunks (attention.hpp, top):
// the 16 lanes acc ([16][hd_v]) summed into out (the first chunk) or into
// tmp and added to out (later chunks), then cleared.
void flush_v_lanes16(float* acc, int64_t hd_v, bool add, float* out, float* tmp) {
  reduce_v_lanes16(acc, hd_v, add ? tmp : out);
  for (int64_t d = 0; add && d < hd_v; d += 16)
    _mm512_storeu_ps(out + d, _mm512_add_ps(_mm512_loadu_ps(out + d), _mm512_loadu_ps(tmp + d)));
  for (int64_t d = 0; d < 16 * hd_v; d += 16) _mm512_storeu_ps(acc + d, _mm512_setzero_ps());
}

}  // namespace

void attend_scores_avx512(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                          int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld, AttentionScratch& s) {
  // Head sizes off the 16-lane grid (vec_dot_f16's order for q.k): the AVX2
  // kernel, which gives the same bits.
  if (hd % 16 != 0) {
    attend_scores_avx2(kv, g, rows, n_rows, n_gqa, hd, kq_scale, bk, scores, ld, s);
    return;
  }
  if (n_rows <= 0) return;
  const RowSpan span = row_span(rows, n_rows);
  const int64_t lo = span.lo, hi = span.hi;
  const int64_t n_q = n_rows * n_gqa;  // query vectors, row-major (row, head)
  const ScratchPtrs sp = size_scratch(s, n_q * hd, 0, 0, bk * hd, 0, 0);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n_gqa * hd; ++i) sp.q[r * n_gqa * hd + i] = rows[r].q[i];
  round_f16(sp.q, n_q * hd);
  float* blk = sp.kv_block;
  // K block by K block (each score is its own dot product). Tiles of 4
  // heads x 4 keys; the keys past a row's range repeat its last key and the
  // missing heads repeat the last head (computed, never stored).
  alignas(64) float t[16];
  for (int64_t j0 = lo; j0 <= hi; j0 += bk) {
    const int64_t j1 = min64(hi + 1, j0 + bk);
    if (!block_used16(rows, n_rows, j0, j1)) continue;
    load_rows_f16(kv.pages, kv.page_shift, kv.k_offset + g * hd, kv.k_stride, j0, j1, hd, blk);
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = max64(j0, rows[r].first), b = min64(j1 - 1, rows[r].last);
      if (a > b) continue;
      const int64_t n4 = n_gqa - n_gqa % 4;
      for (int64_t i = 0; i < n4; i += 4) {
        const float* q[4];
        float* sc[4];
        for (int c = 0; c < 4; ++c) {
          q[c] = sp.q + (r * n_gqa + i + c) * hd;
          sc[c] = scores + (r * n_gqa + i + c) * ld + (a - rows[r].first);
        }
        for (int64_t j = a; j <= b; j += 4) {
          const float* k[4];
          for (int e = 0; e < 4; ++e) k[e] = blk + (min64(j + e, b) - j0) * hd;
          _mm512_store_ps(t, dot4x4(q, k, hd, kq_scale));
          const int64_t nk = min64(4, b - j + 1);
          for (int c = 0; c < 4; ++c)
            for (int64_t e = 0; e < nk; ++e) sc[c][j - a + e] = t[4 * c + e];
        }
      }
      for (int64_t i = n4; i < n_gqa; ++i) {  // the other heads: one query x 16 keys
        const float* q = sp.q + (r * n_gqa + i) * hd;
        float* sc = scores + (r * n_gqa + i) * ld + (a - rows[r].first);
        for (int64_t j = a; j <= b; j += 16) {
          const float* k[16];
          for (int e = 0; e < 16; ++e) k[e] = blk + (min64(j + e, b) - j0) * hd;
          _mm512_mask_storeu_ps(sc + (j - a), first_n(min64(16, b - j + 1)), dot1x16(q, k, hd, kq_scale));
        }
      }
    }
  }
}

void attend_values_avx512(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                          int64_t hd_v, int64_t bk, const float* probs, int64_t ld, AttentionScratch& s) {
  // hd_v off the 16-lane grid (a V tail): the AVX2 kernel, the same bits.
  if (hd_v % 16 != 0) {
    attend_values_avx2(kv, g, rows, n_rows, n_gqa, hd_v, bk, probs, ld, s);
    return;
  }
  if (n_rows <= 0) return;
  const RowSpan span = row_span(rows, n_rows);
  const int64_t lo = span.lo, hi = span.hi;
  const int64_t n_q = n_rows * n_gqa;
  const ScratchPtrs sp = size_scratch(s, 0, hd_v, 0, bk * hd_v, 0, n_q * 16 * hd_v);
  for (int64_t i = 0; i < n_q * 16 * hd_v; i += 16) _mm512_storeu_ps(sp.vacc + i, _mm512_setzero_ps());
  float* blk = sp.kv_block;
  // V block by V block: lane l of each output element takes the positions j
  // with (j - first) % 16 == l of each chunk in increasing order, as in
  // attend_group; the lanes are summed at each chunk's end.
  for (int64_t j0 = lo; j0 <= hi; j0 += bk) {
    const int64_t j1 = min64(hi + 1, j0 + bk);
    if (!block_used16(rows, n_rows, j0, j1)) continue;
    load_rows_f16(kv.pages, kv.page_shift, kv.v_offset + g * hd_v, kv.v_stride, j0, j1, hd_v, blk);
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t first = rows[r].first;
      const int64_t a0 = max64(j0, first), b0 = min64(j1 - 1, rows[r].last);
      // [a0, b0] cut at the row's chunk ends: [a, b] within one chunk.
      for (int64_t a = a0; a <= b0;) {
        const int64_t chunk_end = first + ((a - first) / kAttendChunk + 1) * kAttendChunk - 1;
        const int64_t b = min64(b0, chunk_end);
        for (int64_t l = 0; l < 16; ++l) {
          // The first position of [a, b] in lane l, and how many follow it.
          const int64_t ja = a + ((l - (a - first)) % 16 + 16) % 16;
          if (ja > b) continue;
          const int64_t n = b - ja + 1;
          const float* vb = blk + (ja - j0) * hd_v;
          const float* p[4];
          float* o[4];
          int64_t i = 0;
          for (; i + 4 <= n_gqa; i += 4) {
            for (int h = 0; h < 4; ++h) {
              p[h] = probs + (r * n_gqa + i + h) * ld + (ja - first);
              o[h] = sp.vacc + ((r * n_gqa + i + h) * 16 + l) * hd_v;
            }
            weighted_v_all<4>(p, vb, hd_v, n, o);
          }
          for (; i < n_gqa; ++i) {
            p[0] = probs + (r * n_gqa + i) * ld + (ja - first);
            o[0] = sp.vacc + ((r * n_gqa + i) * 16 + l) * hd_v;
            weighted_v_all<1>(p, vb, hd_v, n, o);
          }
        }
        if (b == chunk_end || b == rows[r].last)
          for (int64_t i = 0; i < n_gqa; ++i)
            flush_v_lanes16(sp.vacc + (r * n_gqa + i) * 16 * hd_v, hd_v, a - first >= kAttendChunk,
                            rows[r].out + i * hd_v, sp.kv_row);
        a = b + 1;
      }
    }
  }
}

}  // namespace synapse::kernels
#endif

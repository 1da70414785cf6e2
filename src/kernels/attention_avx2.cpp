// AVX2+FMA+F16C attention (built with those flags; chosen at run time). Bit
// for bit the order of attend_group_scalar (attention.hpp).
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention.hpp"
#include "kernels/ops.hpp"
#include "kernels/ops_avx2.hpp"
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

// The cache rows of one KV group are hd F16 values every k_stride: a strided
// stream, so the lines of the row kRowsAhead positions on are asked for
// while this one is converted (a prefetch never changes a result).
constexpr int64_t kRowsAhead = 16;

void prefetch_row(const quant::ggml_fp16_t* row, int64_t n) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t off = 0; off < n * 2; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

// Positions [j0, j1) of one KV group as floats: row j is the n F16 values at
// base + slot(j) * stride, slot(j) = j % capacity (kernels/attention.hpp),
// converted into blk[(j - j0) * n ..]; the row kRowsAhead positions on is
// prefetched. The slots advance by one per row (no division per row).
void load_rows_f16(const quant::ggml_fp16_t* base, int64_t stride, int64_t capacity, int64_t j0, int64_t j1,
                   int64_t n, float* blk) {
  int64_t slot = j0 % capacity, ahead = (j0 + kRowsAhead) % capacity;
  for (int64_t j = j0; j < j1; ++j) {
    prefetch_row(base + ahead * stride, n);
    load_f16(base + slot * stride, blk + (j - j0) * n, n);
    if (++slot == capacity) slot = 0;
    if (++ahead == capacity) ahead = 0;
  }
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

// The scores of one query against 8 consecutive K rows k, k + hd, ...: eight
// dot_lanes8 at once. Lane sums are reduced in hsum_float_8's tree for all 8
// accumulators together (a transpose by permutes, shuffles and hadd; each
// add is the tree's add, operands at most swapped, so the bits are equal);
// the hd % 8 tail is then added one fma per element in d order.
void dot8_lanes8(const float* q, const float* k, int64_t hd, float kq_scale, float* scores) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  int64_t d = 0;
  for (; d + 8 <= hd; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + d), a0);
    a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + hd + d), a1);
    a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 2 * hd + d), a2);
    a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 3 * hd + d), a3);
    a4 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 4 * hd + d), a4);
    a5 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 5 * hd + d), a5);
    a6 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 6 * hd + d), a6);
    a7 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 7 * hd + d), a7);
  }
  __m256 r = hsum8x8(a0, a1, a2, a3, a4, a5, a6, a7);
  for (; d < hd; ++d) {
    const __m256 kd = _mm256_setr_ps(k[d], k[hd + d], k[2 * hd + d], k[3 * hd + d], k[4 * hd + d], k[5 * hd + d],
                                     k[6 * hd + d], k[7 * hd + d]);
    r = _mm256_fmadd_ps(_mm256_set1_ps(q[d]), kd, r);
  }
  _mm256_storeu_ps(scores, _mm256_mul_ps(r, _mm256_set1_ps(kq_scale)));
}

// The scores of 4 queries q, q + hd, q + 2 hd, q + 3 hd (the heads of one
// row) against 2 consecutive K rows k, k + hd: eight dot_lanes8 as
// dot8_lanes8 computes them, with each K load serving 4 queries instead
// of 1 (6 loads per 8 fused multiply-adds instead of 9). scores[h] gets
// query h's two scores.
void dot4x2_lanes8(const float* q, const float* k, int64_t hd, float kq_scale, float* const scores[4]) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  int64_t d = 0;
  for (; d + 8 <= hd; d += 8) {
    const __m256 k0 = _mm256_loadu_ps(k + d), k1 = _mm256_loadu_ps(k + hd + d);
    const __m256 q0 = _mm256_loadu_ps(q + d), q1 = _mm256_loadu_ps(q + hd + d);
    a0 = _mm256_fmadd_ps(q0, k0, a0);
    a1 = _mm256_fmadd_ps(q0, k1, a1);
    a2 = _mm256_fmadd_ps(q1, k0, a2);
    a3 = _mm256_fmadd_ps(q1, k1, a3);
    const __m256 q2 = _mm256_loadu_ps(q + 2 * hd + d), q3 = _mm256_loadu_ps(q + 3 * hd + d);
    a4 = _mm256_fmadd_ps(q2, k0, a4);
    a5 = _mm256_fmadd_ps(q2, k1, a5);
    a6 = _mm256_fmadd_ps(q3, k0, a6);
    a7 = _mm256_fmadd_ps(q3, k1, a7);
  }
  __m256 r = hsum8x8(a0, a1, a2, a3, a4, a5, a6, a7);
  for (; d < hd; ++d) {
    const __m256 qd = _mm256_setr_ps(q[d], q[d], q[hd + d], q[hd + d], q[2 * hd + d], q[2 * hd + d], q[3 * hd + d],
                                     q[3 * hd + d]);
    const __m256 kd = _mm256_setr_ps(k[d], k[hd + d], k[d], k[hd + d], k[d], k[hd + d], k[d], k[hd + d]);
    r = _mm256_fmadd_ps(qd, kd, r);
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_mul_ps(r, _mm256_set1_ps(kq_scale)));
  for (int h = 0; h < 4; ++h) scores[h][0] = t[2 * h], scores[h][1] = t[2 * h + 1];
}

// o[0 .. 8*NV) = fma(p_j, v_j[.], o) for j = 0 .. n-1 (v_j = v + j * ld),
// with the NV accumulators held in registers across the positions.
template <int NV>
void weighted_v(const float* p, const float* v, int64_t ld, int64_t n, float* o) {
  __m256 acc[NV];
  for (int k = 0; k < NV; ++k) acc[k] = _mm256_loadu_ps(o + 8 * k);
  for (int64_t j = 0; j < n; ++j) {
    const __m256 pv = _mm256_broadcast_ss(p + j);
    for (int k = 0; k < NV; ++k) acc[k] = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + j * ld + 8 * k), acc[k]);
  }
  for (int k = 0; k < NV; ++k) _mm256_storeu_ps(o + 8 * k, acc[k]);
}

// weighted_v for G heads of one row at once (their probabilities p[h],
// outputs o[h]): each V load serves the G heads. Per output element the
// same fused multiply-adds in the same order as weighted_v.
template <int G, int NV>
void weighted_v_heads(const float* const* p, const float* v, int64_t ld, int64_t n, float* const* o) {
  __m256 acc[G][NV];
  for (int h = 0; h < G; ++h)
    for (int k = 0; k < NV; ++k) acc[h][k] = _mm256_loadu_ps(o[h] + 8 * k);
  for (int64_t j = 0; j < n; ++j) {
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

// max(x[0 .. n)), n >= 1, as kernels::softmax's std::max chain gives it for
// non-NaN values (max is exact in any order).
float max_row(const float* x, int64_t n) {
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
void scale_round_f16(float* x, int64_t n, float inv) {
  const __m256 iv = _mm256_set1_ps(inv);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(x + j, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + j), iv),
                                                             _MM_FROUND_TO_NEAREST_INT)));
  for (; j < n; ++j) x[j] = _cvtsh_ss(_cvtss_sh(x[j] * inv, _MM_FROUND_TO_NEAREST_INT));
}

}  // namespace

void softmax_f16_rows_avx2(float* x, int64_t ld, const int64_t* n, int64_t n_rows) {
  // kernels::softmax_pad8 (ggml_vec_soft_max_f32's AVX2 loop over a row
  // padded with -inf to a multiple of 8), then F16 rounding.
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = x + r * ld;
    const int64_t nr = n[r];
    const __m256 mx = _mm256_set1_ps(max_row(row, nr));
    double sum = 0.0;
    for (int64_t j = 0; j < nr; j += 8) {
      __m256 val;
      if (j + 8 <= nr) {
        val = expf_ggml_avx2(_mm256_sub_ps(_mm256_loadu_ps(row + j), mx));
        _mm256_storeu_ps(row + j, val);
      } else {
        alignas(32) float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t l = 0; j + l < nr; ++l) t[l] = row[j + l];
        val = expf_ggml_avx2(_mm256_sub_ps(_mm256_load_ps(t), mx));
        val = _mm256_and_ps(val, _mm256_castsi256_ps(_mm256_cmpgt_epi32(
                                     _mm256_set1_epi32(static_cast<int>(nr - j)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))));
        _mm256_store_ps(t, val);
        for (int64_t l = 0; j + l < nr; ++l) row[j + l] = t[l];
      }
      sum += static_cast<double>(quant::avx2::hsum_float_8(val));
    }
    scale_round_f16(row, nr, static_cast<float>(1.0 / sum));
  }
}

void attend_block_avx2(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                       int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& s) {
  if (n_rows <= 0) return;
  int64_t lo = rows[0].first, hi = rows[0].last, ld = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    lo = std::min(lo, rows[r].first);
    hi = std::max(hi, rows[r].last);
    ld = std::max(ld, rows[r].last - rows[r].first + 1);
  }
  const int64_t n_q = n_rows * n_gqa;  // query vectors, row-major (row, head)
  const ScratchPtrs sp = size_scratch(s, n_q * hd, 0, n_q * ld, bk * std::max(hd, hd_v), n_q);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n_gqa * hd; ++i) sp.q[r * n_gqa * hd + i] = rows[r].q[i];
  round_f16(sp.q, n_q * hd);
  float* blk = sp.kv_block;
  // True when some row attends a position of [j0, j1).
  auto used = [&](int64_t j0, int64_t j1) {
    for (int64_t r = 0; r < n_rows; ++r)
      if (rows[r].first < j1 && rows[r].last >= j0) return true;
    return false;
  };

  // Scores, K block by K block (each score is its own dot product).
  for (int64_t j0 = lo; j0 <= hi; j0 += bk) {
    const int64_t j1 = std::min(hi + 1, j0 + bk);
    if (!used(j0, j1)) continue;
    load_rows_f16(kv.k + g * hd, kv.k_stride, kv.capacity, j0, j1, hd, blk);
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = std::max(j0, rows[r].first), b = std::min(j1 - 1, rows[r].last);
      if (a > b) continue;  // (the score pointers below would lie outside the row)
      int64_t i = 0;
      for (; i + 4 <= n_gqa; i += 4) {  // four heads at a time: each K load serves 4 queries
        const float* qi = sp.q + (r * n_gqa + i) * hd;
        float* sc[4];
        for (int h = 0; h < 4; ++h) sc[h] = sp.scores + (r * n_gqa + i + h) * ld + (a - rows[r].first);
        int64_t j = a;
        for (; j + 2 <= b + 1; j += 2) {
          dot4x2_lanes8(qi, blk + (j - j0) * hd, hd, kq_scale, sc);
          for (int h = 0; h < 4; ++h) sc[h] += 2;
        }
        if (j <= b)
          for (int h = 0; h < 4; ++h) *sc[h] = dot_lanes8(qi + h * hd, blk + (j - j0) * hd, hd) * kq_scale;
      }
      for (; i < n_gqa; ++i) {
        const float* qi = sp.q + (r * n_gqa + i) * hd;
        float* sc = sp.scores + (r * n_gqa + i) * ld;
        int64_t j = a;
        for (; j + 8 <= b + 1; j += 8) dot8_lanes8(qi, blk + (j - j0) * hd, hd, kq_scale, sc + (j - rows[r].first));
        for (; j <= b; ++j) sc[j - rows[r].first] = dot_lanes8(qi, blk + (j - j0) * hd, hd) * kq_scale;
      }
    }
  }
  // Softmax of each full score row, probabilities rounded to F16.
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < n_gqa; ++i) sp.n_kv[r * n_gqa + i] = rows[r].last - rows[r].first + 1;
    for (int64_t i = 0; i < n_gqa * hd_v; ++i) rows[r].out[i] = 0.0f;
  }
  softmax_f16_rows_avx2(sp.scores, ld, sp.n_kv, n_q);
  // Weighted V, V block by V block: each output element takes its positions
  // in increasing order, as in attend_group.
  for (int64_t j0 = lo; j0 <= hi; j0 += bk) {
    const int64_t j1 = std::min(hi + 1, j0 + bk);
    if (!used(j0, j1)) continue;
    load_rows_f16(kv.v + g * hd_v, kv.v_stride, kv.capacity, j0, j1, hd_v, blk);
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = std::max(j0, rows[r].first), b = std::min(j1 - 1, rows[r].last);
      if (a > b) continue;
      const float* vb = blk + (a - j0) * hd_v;
      int64_t i = 0;
      // Four heads at a time, 16 elements of each: each V load serves the
      // 4 heads, 8 accumulators in registers (4 heads x 3 vectors, or 2
      // heads x 6, ran no faster; one head x 8 vectors is the loop below).
      if (hd_v % 16 == 0) {
        for (; i + 4 <= n_gqa; i += 4) {
          const float* p[4];
          float* o[4];
          for (int h = 0; h < 4; ++h) {
            p[h] = sp.scores + (r * n_gqa + i + h) * ld + (a - rows[r].first);
            o[h] = rows[r].out + (i + h) * hd_v;
          }
          for (int64_t d = 0; d < hd_v; d += 16) {
            float* od[4] = {o[0] + d, o[1] + d, o[2] + d, o[3] + d};
            weighted_v_heads<4, 2>(p, vb + d, hd_v, b - a + 1, od);
          }
        }
      }
      for (; i < n_gqa; ++i) {
        const float* p = sp.scores + (r * n_gqa + i) * ld + (a - rows[r].first);
        float* o = rows[r].out + i * hd_v;
        int64_t d = 0;
        for (; d + 64 <= hd_v; d += 64) weighted_v<8>(p, vb + d, hd_v, b - a + 1, o + d);
        if (d + 32 <= hd_v) weighted_v<4>(p, vb + d, hd_v, b - a + 1, o + d), d += 32;
        if (d + 16 <= hd_v) weighted_v<2>(p, vb + d, hd_v, b - a + 1, o + d), d += 16;
        if (d + 8 <= hd_v) weighted_v<1>(p, vb + d, hd_v, b - a + 1, o + d), d += 8;
        for (; d < hd_v; ++d)
          for (int64_t j = 0; j <= b - a; ++j) o[d] = std::fma(p[j], vb[j * hd_v + d], o[d]);
      }
    }
  }
}

void attend_group_avx2(const KvLayerView& kv, int64_t g, int64_t first, int64_t last, const float* q, int64_t n_gqa,
                       int64_t hd, int64_t hd_v, float kq_scale, float* out, AttentionScratch& s) {
  const int64_t n_kv = last - first + 1;
  const ScratchPtrs sp = size_scratch(s, n_gqa * hd, std::max(hd, hd_v), n_gqa * n_kv, 0, n_gqa);
  for (int64_t i = 0; i < n_gqa * hd; ++i) sp.q[i] = q[i];
  round_f16(sp.q, n_gqa * hd);
  for (int64_t j = 0; j < n_kv; ++j) {
    load_f16(kv.k + ((first + j) % kv.capacity) * kv.k_stride + g * hd, sp.kv_row, hd);
    for (int64_t i = 0; i < n_gqa; ++i) sp.scores[i * n_kv + j] = dot_lanes8(sp.q + i * hd, sp.kv_row, hd) * kq_scale;
  }
  for (int64_t i = 0; i < n_gqa; ++i) sp.n_kv[i] = n_kv;
  softmax_f16_rows_avx2(sp.scores, n_kv, sp.n_kv, n_gqa);
  for (int64_t i = 0; i < n_gqa * hd_v; ++i) out[i] = 0.0f;
  for (int64_t j = 0; j < n_kv; ++j) {
    load_f16(kv.v + ((first + j) % kv.capacity) * kv.v_stride + g * hd_v, sp.kv_row, hd_v);
    for (int64_t i = 0; i < n_gqa; ++i) {
      const float p = sp.scores[i * n_kv + j];
      const __m256 pv = _mm256_set1_ps(p);
      float* o = out + i * hd_v;
      int64_t d = 0;
      for (; d + 8 <= hd_v; d += 8)
        _mm256_storeu_ps(o + d, _mm256_fmadd_ps(pv, _mm256_loadu_ps(sp.kv_row + d), _mm256_loadu_ps(o + d)));
      for (; d < hd_v; ++d) o[d] = std::fma(p, sp.kv_row[d], o[d]);
    }
  }
}

}  // namespace synapse::kernels
#endif

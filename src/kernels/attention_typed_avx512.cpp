// AVX-512 VNNI pieces of the attention over a typed KV cache
// (attend_scores_typed_avx512, attend_values_typed_avx512; attention.hpp
// says what they compute, bit for bit the generic pieces of
// attention_typed.cpp). Built with -mavx512f/bw/dq/vl/vnni, chosen at run
// time. No std:: templates or containers (scripts/check-isa-objects.sh).
//
// Scores: 16 keys at a time. Q8_0, Q4_0, Q5_0 and IQ4_NL: register t[4c + r]
// holds half c (values 16c .. 16c + 15) of keys r, 4 + r, 8 + r, 12 + r
// in its 4 lanes of 128 bits, offset to unsigned bytes; the query's half,
// repeated in the 4 lanes, meets it in one vpdpbusd per half, and a 4 x 4
// transpose-and-add (reduce4) leaves key l's block sum in lane l: exact
// integers, so the order of their additions is free. The float steps are
// quant's (legacy.cpp's Q4_0 order): per block
// acc = fma(float(isum), d_k * d_q, acc). A tile's K registers are built once
// and serve every query vector of every row that attends its keys.
// Values: V rows converted 16 values at a time (quant's dequantize, the
// same floats), acc = fma(p_j, v, acc) with 4 heads x 64 outputs in
// registers; one row converts its V rows as it reads them, several rows
// share a block of bk rows converted once.
#if defined(__x86_64__) || defined(_M_X64)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (GCC bug
// 105593; attention_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstring>

#include "kernels/attention.hpp"
#include "kernels/attention_f16.hpp"
#include "kernels/attention_typed_isa.hpp"
#include "quant/formats.hpp"

namespace synapse::kernels {
namespace {

inline __m512i load4x16(const uint8_t* a, const uint8_t* b, const uint8_t* c, const uint8_t* d) {
  __m512i r = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
  r = _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  r = _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(c)), 2);
  return _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(d)), 3);
}

// The 16 fp16 values at kp[l] + off, as floats: scalar loads through the
// stack (a gather is slower on the cores this was written for).
inline __m512 load_scales16(const uint8_t* const kp[16], int64_t off) {
  alignas(32) quant::ggml_fp16_t d[16];
  for (int l = 0; l < 16; ++l) std::memcpy(&d[l], kp[l] + off, 2);
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d)));
}

// Block b (at byte boff of each key's slice) of the 16 keys kp[l], its
// values plus the format's offset (Q8_0, IQ4_NL: 128; Q4_0: 8; Q5_0: 16) as
// unsigned bytes: t[4c + r] 128-bit lane p = key 4p + r's values
// 16c .. 16c + 15. *dk = the 16 block scales.
template <Fmt F>
inline void load_k_tile(const uint8_t* const kp[16], int64_t boff, __m512i* t, __m512* dk) {
  if constexpr (F == Fmt::q8_0) {
    *dk = load_scales16(kp, boff);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int c = 0; c < 2; ++c) {
      const int64_t o = boff + 2 + 16 * c;
      for (int r = 0; r < 4; ++r)
        t[4 * c + r] = _mm512_xor_si512(load4x16(kp[r] + o, kp[4 + r] + o, kp[8 + r] + o, kp[12 + r] + o), flip);
    }
  } else {
    const int64_t qs = F == Fmt::q5_0 ? 6 : 2;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i lo[4], hi[4];
    for (int r = 0; r < 4; ++r) {
      const __m512i x =
          load4x16(kp[r] + boff + qs, kp[4 + r] + boff + qs, kp[8 + r] + boff + qs, kp[12 + r] + boff + qs);
      lo[r] = _mm512_and_si512(x, m4);
      hi[r] = _mm512_and_si512(_mm512_srli_epi16(x, 4), m4);
    }
    if constexpr (F == Fmt::q5_0) {
      // qh of each key (lane l = key l); its bit e is value e's fifth bit.
      // Words rearranged so that qword r (4 + r) is the 64-bit mask of
      // lo[r] (hi[r]): bit 16p + e = bit e (16 + e) of key 4p + r.
      *dk = load_scales16(kp, boff);
      alignas(64) uint32_t qh32[16];
      for (int l = 0; l < 16; ++l) std::memcpy(&qh32[l], kp[l] + boff + 2, 4);
      const __m512i qh = _mm512_load_si512(qh32);
      // word t < 16: r = t / 4, p = t % 4 -> word 2 (4p + r); t >= 16: the word after it.
      const __m512i idx = _mm512_set_epi16(31, 23, 15, 7, 29, 21, 13, 5, 27, 19, 11, 3, 25, 17, 9, 1,  //
                                           30, 22, 14, 6, 28, 20, 12, 4, 26, 18, 10, 2, 24, 16, 8, 0);
      alignas(64) uint64_t m[8];
      _mm512_store_si512(m, _mm512_permutexvar_epi16(idx, qh));
      const __m512i b4 = _mm512_set1_epi8(0x10);
      for (int r = 0; r < 4; ++r) {
        lo[r] = _mm512_or_si512(lo[r], _mm512_maskz_mov_epi8(_cvtu64_mask64(m[r]), b4));
        hi[r] = _mm512_or_si512(hi[r], _mm512_maskz_mov_epi8(_cvtu64_mask64(m[4 + r]), b4));
      }
    } else {
      *dk = load_scales16(kp, boff);
    }
    if constexpr (F == Fmt::iq4_nl) {
      // The levels plus 128 (each level's sign bit flipped), looked up by nibble.
      alignas(16) int8_t lv[16];
      for (int e = 0; e < 16; ++e) lv[e] = static_cast<int8_t>(quant::kvalues_iq4nl[e] ^ 0x80);
      const __m512i tbl = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(lv)));
      for (int r = 0; r < 4; ++r) {
        lo[r] = _mm512_shuffle_epi8(tbl, lo[r]);
        hi[r] = _mm512_shuffle_epi8(tbl, hi[r]);
      }
    }
    for (int r = 0; r < 4; ++r) {
      t[r] = lo[r];
      t[4 + r] = hi[r];
    }
  }
}

constexpr int32_t k_offset(Fmt f) { return f == Fmt::q4_0 ? 8 : f == Fmt::q5_0 ? 16 : 128; }

// The 16 keys' block sums from a[r] (r < 4), whose lane 4p + e holds a
// part of key 4p + r's: lane 4p + r of the result = the sum of a[r]'s
// lanes 4p .. 4p + 3 (exact integers, so in any order).
inline __m512i reduce4(const __m512i a[4]) {
  const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[0], a[1]), _mm512_unpackhi_epi32(a[0], a[1]));
  const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2], a[3]), _mm512_unpackhi_epi32(a[2], a[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}

// Query vectors v[0 .. G) (TypedQueries rows) against a tile's nb blocks:
// the 16 keys' scores (before kq_scale) of each, the block order of Q8_0,
// Q4_0, Q5_0 and IQ4_NL. Each query's 16-value halves, repeated in the 4 lanes, meet
// t[4c + r]: lane 4p + e gets key 4p + r's 4 values 16c + 4e .. against
// the query's; reduce4 sums each key's 4 lanes.
template <Fmt F, int G>
inline void dot_tile(const __m512i* tk, const __m512* dk, int64_t nb, const TypedQueries& tq, const int64_t* v,
                     __m512* acc) {
  const uint8_t* q[G];
  const float* qd[G];
  const int32_t* qs[G];
  for (int h = 0; h < G; ++h) {
    q[h] = tq.q + v[h] * tq.q_bytes + 2;
    qd[h] = tq.scales + v[h] * nb;
    qs[h] = tq.sums + v[h] * nb * 9;
    acc[h] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m512i qv[G][2], a[G][4];
    for (int h = 0; h < G; ++h)
      for (int c = 0; c < 2; ++c)
        qv[h][c] = _mm512_broadcast_i32x4(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(q[h] + b * sizeof(quant::block_q8_0) + 16 * c)));
    for (int r = 0; r < 4; ++r) {
      const __m512i t0 = _mm512_load_si512(tk + b * 8 + r), t1 = _mm512_load_si512(tk + b * 8 + 4 + r);
      for (int h = 0; h < G; ++h)
        a[h][r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), t0, qv[h][0]), t1, qv[h][1]);
    }
    for (int h = 0; h < G; ++h) {
      const __m512i is = _mm512_sub_epi32(reduce4(a[h]), _mm512_set1_epi32(k_offset(F) * qs[h][b * 9 + 8]));
      acc[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(dk[b], _mm512_set1_ps(qd[h][b])), acc[h]);
    }
  }
}

// Lanes from .. from + n - 1 of x into dst[0 .. n).
inline void store_lanes(float* dst, __m512 x, int64_t from, int64_t n) {
  if (from)
    x = _mm512_permutexvar_ps(_mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                               _mm512_set1_epi32(static_cast<int>(from))),
                              x);
  _mm512_mask_storeu_ps(dst, first_n(n), x);
}

template <Fmt F>
void scores_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd,
                  float kq_scale, float* scores, int64_t ld, const TypedQueries& tq) {
  const int64_t nb = hd / 32;
  alignas(64) __m512i tk[kTypedMaxHead / 32 * 8];
  __m512 dk[kTypedMaxHead / 32];
  const __m512 scale = _mm512_set1_ps(kq_scale);
  score_tiles<16>(
      kv, rows, n_rows, n_gqa, g * nb * block_bytes(F), 4, scores,
      [&](const uint8_t* const* kp) {
        for (int64_t b = 0; b < nb; ++b) load_k_tile<F>(kp, b * block_bytes(F), tk + b * 8, dk + b);
      },
      [&](int64_t n_h, const int64_t* v, float* sc, int64_t from, int64_t count) {
        __m512 acc[4];
        switch (n_h) {
          case 1:
            dot_tile<F, 1>(tk, dk, nb, tq, v, acc);
            break;
          case 2:
            dot_tile<F, 2>(tk, dk, nb, tq, v, acc);
            break;
          case 3:
            dot_tile<F, 3>(tk, dk, nb, tq, v, acc);
            break;
          default:
            dot_tile<F, 4>(tk, dk, nb, tq, v, acc);
            break;
        }
        for (int64_t h = 0; h < n_h; ++h) store_lanes(sc + v[h] * ld, _mm512_mul_ps(acc[h], scale), from, count);
      });
}

// 16 values of row x (a slice of format F) starting at value d (a
// multiple of 16) as floats: quant's dequantize_row_<t> for them.
template <Fmt F>
inline __m512 dequant16(const uint8_t* x, int64_t d) {
  if constexpr (F == Fmt::f16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 2 * d)));
  } else if constexpr (F == Fmt::bf16) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 2 * d)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  } else {
    const uint8_t* blk = x + (d / 32) * block_bytes(F);
    const int half = static_cast<int>(d % 32) / 16;  // values 0-15 or 16-31 of the block
    quant::ggml_fp16_t dh;
    std::memcpy(&dh, blk, 2);
    const __m512 scale = _mm512_set1_ps(_cvtsh_ss(dh));
    __m512i q;
    if constexpr (F == Fmt::q8_0) {
      q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2 + 16 * half)));
    } else {
      const __m512i b =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + (F == Fmt::q5_0 ? 6 : 2))));
      q = _mm512_and_si512(half ? _mm512_srli_epi32(b, 4) : b, _mm512_set1_epi32(15));
      if constexpr (F == Fmt::q4_0) {
        q = _mm512_sub_epi32(q, _mm512_set1_epi32(8));
      } else if constexpr (F == Fmt::q5_0) {
        uint32_t qh;
        std::memcpy(&qh, blk + 2, 4);
        q = _mm512_mask_or_epi32(q, static_cast<__mmask16>(qh >> (16 * half)), q, _mm512_set1_epi32(16));
        q = _mm512_sub_epi32(q, _mm512_set1_epi32(16));
      } else {
        const __m512i lv =
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kvalues_iq4nl)));
        q = _mm512_permutexvar_epi32(q, lv);
      }
    }
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), scale);
  }
}

// o[h][0 .. 16 NV) = fma(p[h][j], v_j[.], o[h]) for j < n, positions in
// order; v_j is src(j, k) (16 values of position j, k < NV); G heads'
// accumulators in registers, each V load serving the G heads.
template <int G, int NV, class Src>
inline void weighted_v(const float* const* p, int64_t n, float* const* o, Src src) {
  __m512 acc[G][NV];
  for (int h = 0; h < G; ++h)
    for (int k = 0; k < NV; ++k) acc[h][k] = _mm512_loadu_ps(o[h] + 16 * k);
  for (int64_t j = 0; j < n; ++j) {
    __m512 vv[NV];
    src(j, vv);
    for (int h = 0; h < G; ++h) {
      const __m512 pv = _mm512_set1_ps(p[h][j]);
      for (int k = 0; k < NV; ++k) acc[h][k] = _mm512_fmadd_ps(pv, vv[k], acc[h][k]);
    }
  }
  for (int h = 0; h < G; ++h)
    for (int k = 0; k < NV; ++k) _mm512_storeu_ps(o[h] + 16 * k, acc[h][k]);
}

// weighted_v over all hd_v columns (a multiple of 16), 64 at a time, then
// 32, 16. The V rows of positions a .. a + n - 1: from the float block
// blk (row j at blk + j * hd_v) when blk is set, else converted from the
// cache as they are read (one row attends them: no block to share).
template <Fmt F, int G>
void weighted_v_all(const float* const* p, int64_t n, float* const* o, int64_t hd_v, const float* blk,
                    const KvLayerView& kv, int64_t a, int64_t group_bytes, int64_t sb) {
  float* od[G];
  for (int64_t d = 0; d < hd_v;) {
    const int64_t w = hd_v - d >= 64 ? 64 : hd_v - d >= 32 ? 32 : 16;
    for (int h = 0; h < G; ++h) od[h] = o[h] + d;
    auto run = [&](auto nv) {
      constexpr int NV = decltype(nv)::value;
      if (blk) {
        weighted_v<G, NV>(p, n, od, [&](int64_t j, __m512* vv) {
          for (int k = 0; k < NV; ++k) vv[k] = _mm512_loadu_ps(blk + j * hd_v + d + 16 * k);
        });
      } else {
        weighted_v<G, NV>(p, n, od, [&](int64_t j, __m512* vv) {
          const uint8_t* x = slice_at(kv, kv.v_offset, kv.v_stride, a + j, group_bytes);
          const char* ahead = reinterpret_cast<const char*>(
              slice_at(kv, kv.v_offset, kv.v_stride, a + (j + 8 < n ? j + 8 : n - 1), group_bytes));
          _mm_prefetch(ahead, _MM_HINT_T0);
          _mm_prefetch(ahead + sb - 1, _MM_HINT_T0);
          for (int k = 0; k < NV; ++k) vv[k] = dequant16<F>(x, d + 16 * k);
        });
      }
    };
    if (w == 64)
      run(std::integral_constant<int, 4>{});
    else if (w == 32)
      run(std::integral_constant<int, 2>{});
    else
      run(std::integral_constant<int, 1>{});
    d += w;
  }
}

template <Fmt F>
void values_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd_v,
                  int64_t bk, const float* probs, int64_t ld, AttentionScratch& s) {
  const RowSpan span = row_span(rows, n_rows);
  const int64_t n_q = n_rows * n_gqa;
  const int64_t sb = slice_bytes<F>(hd_v), group_bytes = g * sb;
  // One row (a decode step, a chunk of one): its V rows converted as they
  // are read; several: each block of bk positions converted once for all.
  const bool shared = n_rows > 1;
  const ScratchPtrs sp = size_scratch(s, 0, 0, 0, shared ? bk * hd_v : 0, 0, n_q * hd_v);
  for (int64_t i = 0; i < n_q * hd_v; i += 16) _mm512_storeu_ps(sp.vacc + i, _mm512_setzero_ps());
  const int64_t step = shared ? bk : span.hi - span.lo + 1;
  for (int64_t j0 = span.lo; j0 <= span.hi; j0 += step) {
    const int64_t j1 = min64(span.hi + 1, j0 + step);
    if (shared) {
      // The block's positions some row reads, converted to floats once.
      const ReadRange rr = read_range(rows, n_rows, j0, j1);
      const int64_t a_min = rr.lo, b_max = rr.hi;
      for (int64_t j = a_min; j <= b_max; ++j) {
        const uint8_t* x = slice_at(kv, kv.v_offset, kv.v_stride, j, group_bytes);
        const char* ahead =
            reinterpret_cast<const char*>(slice_at(kv, kv.v_offset, kv.v_stride, min64(j + 8, b_max), group_bytes));
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + sb - 1, _MM_HINT_T0);
        for (int64_t d = 0; d < hd_v; d += 16) _mm512_storeu_ps(sp.kv_block + (j - j0) * hd_v + d, dequant16<F>(x, d));
      }
    }
    value_rows(
        rows, n_rows, n_gqa, hd_v, j0, j1, probs, ld, sp.vacc,
        [&](auto group, const float* const* p, float* const* o, int64_t a, int64_t b) {
          const float* vb = shared ? sp.kv_block + (a - j0) * hd_v : nullptr;
          weighted_v_all<F, decltype(group)::value>(p, b - a + 1, o, hd_v, vb, kv, a, group_bytes, sb);
        },
        [&](float* acc, float* out, bool add) {
          for (int64_t d = 0; d < hd_v; d += 16) {
            const __m512 x = _mm512_loadu_ps(acc + d);
            _mm512_storeu_ps(out + d, add ? _mm512_add_ps(_mm512_loadu_ps(out + d), x) : x);
            _mm512_storeu_ps(acc + d, _mm512_setzero_ps());
          }
        });
  }
}

// This width's kernels for scores_entry / values_entry.
struct Kernels {
  static constexpr int64_t v_fp_step = 16;
  template <Fmt F>
  static void scores(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd,
                     float kq_scale, float* scores, int64_t ld, const TypedQueries& tq) {
    scores_typed<F>(kv, g, rows, n_rows, n_gqa, hd, kq_scale, scores, ld, tq);
  }
  template <Fmt F>
  static void values(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                     int64_t hd_v, int64_t bk, const float* p, int64_t ld, AttentionScratch& s) {
    values_typed<F>(kv, g, rows, n_rows, n_gqa, hd_v, bk, p, ld, s);
  }
};

}  // namespace

void attend_scores_typed_avx512(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                                int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld,
                                AttentionScratch& s) {
  scores_entry<Kernels>(kv, g, rows, n_rows, n_gqa, hd, kq_scale, bk, scores, ld, s);
}

void attend_values_typed_avx512(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                                int64_t hd_v, int64_t bk, const float* p, int64_t ld, AttentionScratch& s) {
  values_entry<Kernels>(kv, g, rows, n_rows, n_gqa, hd_v, bk, p, ld, s);
}

}  // namespace synapse::kernels
#endif

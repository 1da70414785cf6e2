// AVX2 pieces of the attention over a typed KV cache
// (attend_scores_typed_avx2, attend_values_typed_avx2; attention.hpp says
// what they compute, bit for bit the generic pieces of attention_typed.cpp).
// Built with -mavx2 -mfma -mf16c, chosen at run time. No std:: templates or
// containers (scripts/check-isa-objects.sh).
//
// Scores: 8 keys at a time, one per lane, the keys' blocks transposed as in
// attention_typed_avx512.cpp (t[w] lane l = key l's values 4w .. 4w + 3).
// Each query's 4 bytes of group w, broadcast, meet the 8 keys' in one
// vpmaddubsw (unsigned times signed bytes, pairs summed to int16) and one
// vpmaddwd by ones (int32): Q4_0 and Q5_0 as their unsigned levels (the
// offset times the query's sum taken off after), Q8_0 and IQ4_NL as their
// magnitudes against the query's bytes signed by the key's (ggml's AVX2
// dots), no pair sum above 2 * 128 * 127, so every sum is exact. The float
// steps are quant's, as in the AVX-512 file.
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <cstring>

#include "kernels/attention.hpp"
#include "kernels/attention_typed_isa.hpp"
#include "quant/formats.hpp"

namespace synapse::kernels {
namespace {

inline __m256i load2x16(const uint8_t* a, const uint8_t* b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
}

// In each 128-bit lane p, a 4 x 4 transpose of dwords: out[w] lane p =
// [in[0] dword w, in[1] dword w, in[2] dword w, in[3] dword w].
inline void transpose4(const __m256i in[4], __m256i* out) {
  const __m256i t0 = _mm256_unpacklo_epi32(in[0], in[1]), t1 = _mm256_unpackhi_epi32(in[0], in[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(in[2], in[3]), t3 = _mm256_unpackhi_epi32(in[2], in[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}

// The 32 bits of m (bit 16p + e: lane p's byte e) as bytes 0x10 or 0.
inline __m256i bits_to_0x10(uint32_t m) {
  const __m256i x = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(m)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(x, bit), bit), _mm256_set1_epi8(0x10));
}

// Block b (at byte boff of each key's slice) of the 8 keys kp[l]: t[w]
// lane l = key l's values 4w .. 4w + 3 (Q8_0, IQ4_NL: signed; Q4_0, Q5_0:
// their unsigned levels, value + 8 or + 16); dk = the 8 block scales.
template <Fmt F>
inline void load_k_tile(const uint8_t* const kp[8], int64_t boff, __m256i* t, __m256* dk) {
  alignas(16) quant::ggml_fp16_t d[8];
  for (int l = 0; l < 8; ++l) std::memcpy(&d[l], kp[l] + boff, 2);
  *dk = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d)));
  if constexpr (F == Fmt::q8_0) {
    for (int c = 0; c < 2; ++c) {
      __m256i in[4];
      const int64_t o = boff + 2 + 16 * c;
      for (int r = 0; r < 4; ++r) in[r] = load2x16(kp[r] + o, kp[4 + r] + o);
      transpose4(in, t + 4 * c);
    }
  } else {
    const int64_t qs = F == Fmt::q5_0 ? 6 : 2;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i lo[4], hi[4];
    for (int r = 0; r < 4; ++r) {
      const __m256i x = load2x16(kp[r] + boff + qs, kp[4 + r] + boff + qs);
      lo[r] = _mm256_and_si256(x, m4);
      hi[r] = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
    }
    if constexpr (F == Fmt::q5_0) {
      // qh bit e is value e's fifth bit: lo[r] lane p takes bits 0-15 of
      // key 4p + r's qh, hi[r] bits 16-31.
      for (int r = 0; r < 4; ++r) {
        uint32_t h0, h1;
        std::memcpy(&h0, kp[r] + boff + 2, 4);
        std::memcpy(&h1, kp[4 + r] + boff + 2, 4);
        lo[r] = _mm256_or_si256(lo[r], bits_to_0x10((h0 & 0xFFFFu) | (h1 << 16)));
        hi[r] = _mm256_or_si256(hi[r], bits_to_0x10((h0 >> 16) | (h1 & 0xFFFF0000u)));
      }
    } else if constexpr (F == Fmt::iq4_nl) {
      const __m256i tbl =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kvalues_iq4nl)));
      for (int r = 0; r < 4; ++r) {
        lo[r] = _mm256_shuffle_epi8(tbl, lo[r]);
        hi[r] = _mm256_shuffle_epi8(tbl, hi[r]);
      }
    }
    transpose4(lo, t);
    transpose4(hi, t + 4);
  }
}

constexpr bool k_signed(Fmt f) { return f == Fmt::q8_0 || f == Fmt::iq4_nl; }
constexpr int32_t k_offset(Fmt f) { return f == Fmt::q4_0 ? 8 : f == Fmt::q5_0 ? 16 : 0; }

// The int32 dot of t (8 keys' 4 values, unsigned levels or signed) with
// the query's 4 bytes q4 broadcast, per lane.
template <Fmt F>
inline __m256i dot4(__m256i t, __m256i q4) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (k_signed(F))
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(t, t), _mm256_sign_epi8(q4, t)), ones);
  else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(t, q4), ones);
}

// Query vectors v[0 .. G) against a tile's nb blocks: the 8 keys' scores
// (before kq_scale) of each, the block order of Q8_0, Q4_0, Q5_0 and
// IQ4_NL (legacy.cpp's Q4_0 order).
template <Fmt F, int G>
inline void dot_tile(const __m256i* tk, const __m256* dk, int64_t nb, const TypedQueries& tq, const int64_t* v,
                     __m256* acc) {
  const uint8_t* q[G];
  const float* qd[G];
  const int32_t* qs[G];
  for (int h = 0; h < G; ++h) {
    q[h] = tq.q + v[h] * tq.q_bytes + 2;
    qd[h] = tq.scales + v[h] * nb;
    qs[h] = tq.sums + v[h] * nb * 9;
    acc[h] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m256i is[G];
    for (int h = 0; h < G; ++h) is[h] = _mm256_set1_epi32(-k_offset(F) * qs[h][b * 9 + 8]);
    for (int w = 0; w < 8; ++w) {
      const __m256i t = _mm256_load_si256(tk + b * 8 + w);
      for (int h = 0; h < G; ++h)
        is[h] = _mm256_add_epi32(is[h],
                                 dot4<F>(t, _mm256_set1_epi32(load_i32(q[h] + b * sizeof(quant::block_q8_0) + 4 * w))));
    }
    for (int h = 0; h < G; ++h)
      acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[h]), _mm256_mul_ps(dk[b], _mm256_set1_ps(qd[h][b])), acc[h]);
  }
}

// Lanes from .. from + n - 1 of x into dst[0 .. n).
inline void store_lanes(float* dst, __m256 x, int64_t from, int64_t n) {
  alignas(32) float t[8];
  _mm256_store_ps(t, x);
  for (int64_t l = 0; l < n; ++l) dst[l] = t[from + l];
}

template <Fmt F>
void scores_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd,
                  float kq_scale, float* scores, int64_t ld, const TypedQueries& tq) {
  const int64_t nb = hd / 32;
  alignas(32) __m256i tk[kTypedMaxHead / 32 * 8];
  __m256 dk[kTypedMaxHead / 32];
  const __m256 scale = _mm256_set1_ps(kq_scale);
  score_tiles<8>(
      kv, rows, n_rows, n_gqa, g * nb * block_bytes(F), 4, scores,
      [&](const uint8_t* const* kp) {
        for (int64_t b = 0; b < nb; ++b) load_k_tile<F>(kp, b * block_bytes(F), tk + b * 8, dk + b);
      },
      [&](int64_t n_h, const int64_t* v, float* sc, int64_t from, int64_t count) {
        __m256 acc[4];
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
        for (int64_t h = 0; h < n_h; ++h) store_lanes(sc + v[h] * ld, _mm256_mul_ps(acc[h], scale), from, count);
      });
}

// 8 values of row x (a slice of format F) starting at value d (a multiple
// of 8) as floats: quant's dequantize_row_<t> for them.
template <Fmt F>
inline __m256 dequant8(const uint8_t* x, int64_t d) {
  if constexpr (F == Fmt::f16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * d)));
  } else if constexpr (F == Fmt::bf16) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * d)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  } else {
    const uint8_t* blk = x + (d / 32) * block_bytes(F);
    const int64_t o = d % 32;  // values o .. o + 7 of the block
    quant::ggml_fp16_t dh;
    std::memcpy(&dh, blk, 2);
    const __m256 scale = _mm256_set1_ps(_cvtsh_ss(dh));
    __m256i q;
    if constexpr (F == Fmt::q8_0) {
      q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + o)));
    } else {
      // Values o .. o + 7 are bytes o % 16 .. + 7, low nibbles for o < 16.
      const __m256i b = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + (F == Fmt::q5_0 ? 6 : 2) + o % 16)));
      q = _mm256_and_si256(o >= 16 ? _mm256_srli_epi32(b, 4) : b, _mm256_set1_epi32(15));
      if constexpr (F == Fmt::q4_0) {
        q = _mm256_sub_epi32(q, _mm256_set1_epi32(8));
      } else if constexpr (F == Fmt::q5_0) {
        uint32_t qh;
        std::memcpy(&qh, blk + 2, 4);
        const __m256i bits = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(qh >> o)), _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0)),
            _mm256_set1_epi32(1));
        q = _mm256_sub_epi32(_mm256_or_si256(q, _mm256_slli_epi32(bits, 4)), _mm256_set1_epi32(16));
      } else {
        const __m256i lo =
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(quant::kvalues_iq4nl)));
        const __m256i hi =
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(quant::kvalues_iq4nl + 8)));
        // Levels 0-7 from lo, 8-15 from hi, by the nibble's low 3 bits.
        const __m256i l3 = _mm256_and_si256(q, _mm256_set1_epi32(7));
        const __m256i big = _mm256_cmpgt_epi32(q, _mm256_set1_epi32(7));
        q = _mm256_blendv_epi8(_mm256_permutevar8x32_epi32(lo, l3), _mm256_permutevar8x32_epi32(hi, l3), big);
      }
    }
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale);
  }
}

// o[h][0 .. 8 NV) = fma(p[h][j], v_j[.], o[h]) for j < n (v_j = v + j * ld),
// positions in order; G heads' accumulators in
// registers, each V load serving the G heads.
template <int G, int NV>
void weighted_v(const float* const* p, const float* v, int64_t ld, int64_t n, float* const* o) {
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

template <int G>
void weighted_v_all(const float* const* p, const float* v, int64_t hd_v, int64_t n, float* const* o) {
  int64_t d = 0;
  float* od[G];
  for (; d + 16 <= hd_v; d += 16) {
    for (int h = 0; h < G; ++h) od[h] = o[h] + d;
    weighted_v<G, 2>(p, v + d, hd_v, n, od);
  }
  if (d < hd_v) {
    for (int h = 0; h < G; ++h) od[h] = o[h] + d;
    weighted_v<G, 1>(p, v + d, hd_v, n, od);
  }
}

template <Fmt F>
void values_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd_v,
                  int64_t bk, const float* probs, int64_t ld, AttentionScratch& s) {
  const RowSpan span = row_span(rows, n_rows);
  const int64_t n_q = n_rows * n_gqa;
  const int64_t sb = slice_bytes<F>(hd_v), group_bytes = g * sb;
  const ScratchPtrs sp = size_scratch(s, 0, 0, 0, bk * hd_v, 0, n_q * hd_v);
  for (int64_t i = 0; i < n_q * hd_v; i += 8) _mm256_storeu_ps(sp.vacc + i, _mm256_setzero_ps());
  float* blk = sp.kv_block;
  for (int64_t j0 = span.lo; j0 <= span.hi; j0 += bk) {
    const int64_t j1 = min64(span.hi + 1, j0 + bk);
    // The block's positions some row reads, converted to floats once.
    const ReadRange rr = read_range(rows, n_rows, j0, j1);
    const int64_t a_min = rr.lo, b_max = rr.hi;
    for (int64_t j = a_min; j <= b_max; ++j) {
      const uint8_t* x = slice_at(kv, kv.v_offset, kv.v_stride, j, group_bytes);
      const char* ahead =
          reinterpret_cast<const char*>(slice_at(kv, kv.v_offset, kv.v_stride, min64(j + 8, b_max), group_bytes));
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + sb - 1, _MM_HINT_T0);
      for (int64_t d = 0; d < hd_v; d += 8) _mm256_storeu_ps(blk + (j - j0) * hd_v + d, dequant8<F>(x, d));
    }
    value_rows(
        rows, n_rows, n_gqa, hd_v, j0, j1, probs, ld, sp.vacc,
        [&](auto group, const float* const* p, float* const* o, int64_t a, int64_t b) {
          weighted_v_all<decltype(group)::value>(p, blk + (a - j0) * hd_v, hd_v, b - a + 1, o);
        },
        [&](float* acc, float* out, bool add) {
          for (int64_t d = 0; d < hd_v; d += 8) {
            const __m256 x = _mm256_loadu_ps(acc + d);
            _mm256_storeu_ps(out + d, add ? _mm256_add_ps(_mm256_loadu_ps(out + d), x) : x);
            _mm256_storeu_ps(acc + d, _mm256_setzero_ps());
          }
        });
  }
}

// This width's kernels for scores_entry / values_entry.
struct Kernels {
  static constexpr int64_t v_fp_step = 8;
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

void attend_scores_typed_avx2(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                              int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld, AttentionScratch& s) {
  scores_entry<Kernels>(kv, g, rows, n_rows, n_gqa, hd, kq_scale, bk, scores, ld, s);
}

void attend_values_typed_avx2(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                              int64_t hd_v, int64_t bk, const float* p, int64_t ld, AttentionScratch& s) {
  values_entry<Kernels>(kv, g, rows, n_rows, n_gqa, hd_v, bk, p, ld, s);
}

}  // namespace synapse::kernels
#endif

// AVX-512 VNNI pieces of the attention over a typed KV cache
// (attend_scores_typed_avx512, attend_values_typed_avx512; attention.hpp
// says what they compute, bit for bit the generic pieces of
// attention_typed.cpp). Built with -mavx512f/bw/dq/vl/vnni, chosen at run
// time. No std:: templates or containers (scripts/check-isa-objects.sh).
//
// Scores: 16 keys at a time, one per lane. Block b of the 16 keys is
// transposed into 8 registers t[w] (lane l = key l's values 4w .. 4w + 3,
// offset to unsigned bytes), so each query's 4 bytes of group w, broadcast,
// take one vpdpbusd for all 16 keys: the exact integer dot of each group
// or block, whatever the order of its additions. The float steps are
// quant's (legacy.cpp): per block acc = fma(float(isum), d_k * d_q, acc)
// for Q8_0, Q4_0, Q5_0; IQ4_NL 8 lanes of 4 bytes, each
// fma(d_k * d_q, float(lane), acc_w), then hsum_float_8's tree.
// A tile's transposed blocks are built once and serve every query vector
// of every row that attends its keys.
#if defined(__x86_64__) || defined(_M_X64)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (GCC bug
// 105593; attention_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/attention.hpp"
#include "kernels/attention_f16.hpp"
#include "quant/formats.hpp"

namespace synapse::kernels {
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max64(int64_t a, int64_t b) { return a < b ? b : a; }

// The cache formats these kernels read (K: the first four; V: all).
enum class Fmt { q8_0, q4_0, q5_0, iq4_nl, f16, bf16 };

bool fmt_of(GgmlType t, Fmt& f) {
  switch (t) {
    case GgmlType::Q8_0: f = Fmt::q8_0; return true;
    case GgmlType::Q4_0: f = Fmt::q4_0; return true;
    case GgmlType::Q5_0: f = Fmt::q5_0; return true;
    case GgmlType::IQ4_NL: f = Fmt::iq4_nl; return true;
    case GgmlType::F16: f = Fmt::f16; return true;
    case GgmlType::BF16: f = Fmt::bf16; return true;
    default: return false;
  }
}

// Bytes of a block of 32 values (F16 / BF16: 32 values too).
constexpr int64_t block_bytes(Fmt f) {
  return f == Fmt::q8_0     ? int64_t{sizeof(quant::block_q8_0)}
         : f == Fmt::q4_0   ? int64_t{sizeof(quant::block_q4_0)}
         : f == Fmt::q5_0   ? int64_t{sizeof(quant::block_q5_0)}
         : f == Fmt::iq4_nl ? int64_t{sizeof(quant::block_iq4_nl)}
                            : int64_t{64};
}

// Where position p's slice of the group starts (KvLayerView's pages; the
// group's first byte group_bytes into the row).
inline const uint8_t* slice_at(const KvLayerView& kv, int64_t offset, int64_t stride, int64_t p,
                               int64_t group_bytes) {
  return reinterpret_cast<const uint8_t*>(kv.pages[p >> kv.page_shift] + offset +
                                          (p & ((int64_t{1} << kv.page_shift) - 1)) * stride) +
         group_bytes;
}

inline __m512i load4x16(const uint8_t* a, const uint8_t* b, const uint8_t* c, const uint8_t* d) {
  __m512i r = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
  r = _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  r = _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(c)), 2);
  return _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(d)), 3);
}

// In each 128-bit lane p, a 4 x 4 transpose of dwords: out[w] lane p =
// [in[0] dword w, in[1] dword w, in[2] dword w, in[3] dword w].
inline void transpose4(const __m512i in[4], __m512i* out) {
  const __m512i t0 = _mm512_unpacklo_epi32(in[0], in[1]), t1 = _mm512_unpackhi_epi32(in[0], in[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(in[2], in[3]), t3 = _mm512_unpackhi_epi32(in[2], in[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// The 16 fp16 values at the addresses kpv (two registers of 8 pointers)
// plus off, as floats (a dword is read at each: the block scale and the
// two bytes after it).
inline __m512 gather_f16(__m512i kpv0, __m512i kpv1, int64_t off) {
  const __m512i o = _mm512_set1_epi64(off);
  const __m256i lo = _mm512_i64gather_epi32(_mm512_add_epi64(kpv0, o), nullptr, 1);
  const __m256i hi = _mm512_i64gather_epi32(_mm512_add_epi64(kpv1, o), nullptr, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1)));
}

// Block b (at byte boff of each key's slice) of the 16 keys kp[l]: t[w]
// lane l = key l's values 4w .. 4w + 3 plus the format's offset (Q8_0,
// IQ4_NL: 128; Q4_0: 8; Q5_0: 16) as unsigned bytes; *dk = the 16 block
// scales.
template <Fmt F>
inline void load_k_tile(const uint8_t* const kp[16], __m512i kpv0, __m512i kpv1, int64_t boff, __m512i* t,
                        __m512* dk) {
  if constexpr (F == Fmt::q8_0) {
    *dk = gather_f16(kpv0, kpv1, boff);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int c = 0; c < 2; ++c) {
      __m512i in[4];
      const int64_t o = boff + 2 + 16 * c;
      for (int r = 0; r < 4; ++r) in[r] = _mm512_xor_si512(load4x16(kp[r] + o, kp[4 + r] + o, kp[8 + r] + o, kp[12 + r] + o), flip);
      transpose4(in, t + 4 * c);
    }
  } else {
    const int64_t qs = F == Fmt::q5_0 ? 6 : 2;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i lo[4], hi[4];
    for (int r = 0; r < 4; ++r) {
      const __m512i x = load4x16(kp[r] + boff + qs, kp[4 + r] + boff + qs, kp[8 + r] + boff + qs, kp[12 + r] + boff + qs);
      lo[r] = _mm512_and_si512(x, m4);
      hi[r] = _mm512_and_si512(_mm512_srli_epi16(x, 4), m4);
    }
    if constexpr (F == Fmt::q5_0) {
      // The scale and qh of each key in one qword; qh's bit e is value e's
      // fifth bit. Words rearranged so that qword r (4 + r) is the 64-bit
      // mask of lo[r] (hi[r]): bit 16p + e = bit e (16 + e) of key 4p + r.
      const __m512i o = _mm512_set1_epi64(boff);
      const __m512i g0 = _mm512_i64gather_epi64(_mm512_add_epi64(kpv0, o), nullptr, 1);
      const __m512i g1 = _mm512_i64gather_epi64(_mm512_add_epi64(kpv1, o), nullptr, 1);
      const __m256i d16 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi64_epi16(g0)),
                                                  _mm512_cvtepi64_epi16(g1), 1);
      *dk = _mm512_cvtph_ps(d16);
      const __m512i qh = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_srli_epi64(g0, 16))),
                                            _mm512_cvtepi64_epi32(_mm512_srli_epi64(g1, 16)), 1);
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
      *dk = gather_f16(kpv0, kpv1, boff);
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
    transpose4(lo, t);
    transpose4(hi, t + 4);
  }
}

constexpr int32_t k_offset(Fmt f) { return f == Fmt::q4_0 ? 8 : f == Fmt::q5_0 ? 16 : 128; }

inline int32_t load_i32(const uint8_t* p) {
  int32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

// Query vectors v[0 .. G) (TypedQueries rows) against a tile's nb blocks:
// the 16 keys' scores (before kq_scale) of each, Q8_0 / Q4_0 / Q5_0's
// block order.
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
    __m512i is[G];
    for (int h = 0; h < G; ++h) is[h] = _mm512_set1_epi32(-k_offset(F) * qs[h][b * 9 + 8]);
    for (int w = 0; w < 8; ++w) {
      const __m512i t = _mm512_load_si512(tk + b * 8 + w);
      for (int h = 0; h < G; ++h)
        is[h] = _mm512_dpbusd_epi32(is[h], t, _mm512_set1_epi32(load_i32(q[h] + b * sizeof(quant::block_q8_0) + 4 * w)));
    }
    for (int h = 0; h < G; ++h)
      acc[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[h]), _mm512_mul_ps(dk[b], _mm512_set1_ps(qd[h][b])), acc[h]);
  }
}

// IQ4_NL's order for one query vector: 8 lanes per key (groups of 4
// values), then hsum_float_8's tree.
inline __m512 dot_tile_iq4_nl(const __m512i* tk, const __m512* dk, int64_t nb, const TypedQueries& tq, int64_t v) {
  const uint8_t* q = tq.q + v * tq.q_bytes + 2;
  const float* qd = tq.scales + v * nb;
  const int32_t* qs = tq.sums + v * nb * 9;
  __m512 a[8];
  for (int w = 0; w < 8; ++w) a[w] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 d = _mm512_mul_ps(dk[b], _mm512_set1_ps(qd[b]));
    for (int w = 0; w < 8; ++w) {
      const __m512i is = _mm512_dpbusd_epi32(_mm512_set1_epi32(-128 * qs[b * 9 + w]), _mm512_load_si512(tk + b * 8 + w),
                                             _mm512_set1_epi32(load_i32(q + b * sizeof(quant::block_q8_0) + 4 * w)));
      a[w] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(is), a[w]);
    }
  }
  const __m512 r0 = _mm512_add_ps(a[4], a[0]), r1 = _mm512_add_ps(a[5], a[1]);
  const __m512 r2 = _mm512_add_ps(a[6], a[2]), r3 = _mm512_add_ps(a[7], a[3]);
  return _mm512_add_ps(_mm512_add_ps(r0, r2), _mm512_add_ps(r1, r3));
}

// Lanes from .. from + n - 1 of x into dst[0 .. n).
inline void store_lanes(float* dst, __m512 x, int64_t from, int64_t n) {
  if (from) x = _mm512_permutexvar_ps(_mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                       _mm512_set1_epi32(static_cast<int>(from))),
                                      x);
  _mm512_mask_storeu_ps(dst, first_n(n), x);
}

template <Fmt F>
void scores_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd,
                  float kq_scale, float* scores, int64_t ld, const TypedQueries& tq) {
  const int64_t nb = hd / 32, group_bytes = g * nb * block_bytes(F);
  const RowSpan span = row_span(rows, n_rows);
  alignas(64) __m512i tk[kTypedMaxHead / 32 * 8];
  __m512 dk[kTypedMaxHead / 32];
  alignas(64) const uint8_t* kp[16];
  const __m512 scale = _mm512_set1_ps(kq_scale);
  for (int64_t j = span.lo; j <= span.hi; j += 16) {
    // The tile's positions some row reads: [a_min, b_max]; the other lanes
    // repeat its ends (computed, never stored).
    int64_t a_min = j + 16, b_max = j - 1;
    for (int64_t r = 0; r < n_rows; ++r) {
      if (rows[r].first > j + 15 || rows[r].last < j) continue;
      a_min = min64(a_min, max64(rows[r].first, j));
      b_max = max64(b_max, min64(rows[r].last, j + 15));
    }
    if (a_min > b_max) continue;
    // The keys' slices: in one page (the tile's rows consecutive, the usual
    // case: rows and chunks start at multiples of 16, pages hold 64), else
    // one by one.
    __m512i kpv0, kpv1;
    if (a_min == j && b_max == j + 15 && (j >> kv.page_shift) == ((j + 15) >> kv.page_shift)) {
      const uint8_t* k0 = slice_at(kv, kv.k_offset, kv.k_stride, j, group_bytes);
      const __m512i base = _mm512_set1_epi64(reinterpret_cast<int64_t>(k0));
      const __m512i step = _mm512_set1_epi64(2 * kv.k_stride);
      kpv0 = _mm512_add_epi64(base, _mm512_mullo_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), step));
      kpv1 = _mm512_add_epi64(base, _mm512_mullo_epi64(_mm512_set_epi64(15, 14, 13, 12, 11, 10, 9, 8), step));
      _mm512_store_si512(kp, kpv0);
      _mm512_store_si512(kp + 8, kpv1);
    } else {
      for (int l = 0; l < 16; ++l)
        kp[l] = slice_at(kv, kv.k_offset, kv.k_stride, min64(max64(j + l, a_min), b_max), group_bytes);
      kpv0 = _mm512_load_si512(kp);
      kpv1 = _mm512_load_si512(kp + 8);
    }
    for (int64_t b = 0; b < nb; ++b) load_k_tile<F>(kp, kpv0, kpv1, b * block_bytes(F), tk + b * 8, dk + b);
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = max64(rows[r].first, j), e = min64(rows[r].last, j + 15);
      if (a > e) continue;
      const int64_t v0 = r * n_gqa;
      float* sc = scores + (a - rows[r].first);
      if constexpr (F == Fmt::iq4_nl) {
        for (int64_t i = 0; i < n_gqa; ++i)
          store_lanes(sc + (v0 + i) * ld, _mm512_mul_ps(dot_tile_iq4_nl(tk, dk, nb, tq, v0 + i), scale), a - j, e - a + 1);
      } else {
        for (int64_t i = 0; i < n_gqa; i += 4) {
          const int64_t v[4] = {v0 + i, v0 + min64(i + 1, n_gqa - 1), v0 + min64(i + 2, n_gqa - 1),
                                v0 + min64(i + 3, n_gqa - 1)};
          __m512 acc[4];
          const int64_t n_h = min64(4, n_gqa - i);
          switch (n_h) {
            case 1: dot_tile<F, 1>(tk, dk, nb, tq, v, acc); break;
            case 2: dot_tile<F, 2>(tk, dk, nb, tq, v, acc); break;
            case 3: dot_tile<F, 3>(tk, dk, nb, tq, v, acc); break;
            default: dot_tile<F, 4>(tk, dk, nb, tq, v, acc); break;
          }
          for (int64_t h = 0; h < n_h; ++h) store_lanes(sc + v[h] * ld, _mm512_mul_ps(acc[h], scale), a - j, e - a + 1);
        }
      }
    }
  }
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
      const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + (F == Fmt::q5_0 ? 6 : 2))));
      q = _mm512_and_si512(half ? _mm512_srli_epi32(b, 4) : b, _mm512_set1_epi32(15));
      if constexpr (F == Fmt::q4_0) {
        q = _mm512_sub_epi32(q, _mm512_set1_epi32(8));
      } else if constexpr (F == Fmt::q5_0) {
        uint32_t qh;
        std::memcpy(&qh, blk + 2, 4);
        q = _mm512_mask_or_epi32(q, static_cast<__mmask16>(qh >> (16 * half)), q, _mm512_set1_epi32(16));
        q = _mm512_sub_epi32(q, _mm512_set1_epi32(16));
      } else {
        const __m512i lv = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kvalues_iq4nl)));
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
                    const KvLayerView& kv, int64_t a, int64_t group_bytes, int64_t slice_bytes) {
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
          _mm_prefetch(ahead + slice_bytes - 1, _MM_HINT_T0);
          for (int k = 0; k < NV; ++k) vv[k] = dequant16<F>(x, d + 16 * k);
        });
      }
    };
    if (w == 64) run(std::integral_constant<int, 4>{});
    else if (w == 32) run(std::integral_constant<int, 2>{});
    else run(std::integral_constant<int, 1>{});
    d += w;
  }
}

template <Fmt F>
void values_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                  int64_t hd_v, int64_t bk, const float* probs, int64_t ld, AttentionScratch& s) {
  const RowSpan span = row_span(rows, n_rows);
  const int64_t n_q = n_rows * n_gqa;
  const int64_t slice_bytes = F == Fmt::f16 || F == Fmt::bf16 ? 2 * hd_v : (hd_v / 32) * block_bytes(F);
  const int64_t group_bytes = g * slice_bytes;
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
      int64_t a_min = j1, b_max = j0 - 1;
      for (int64_t r = 0; r < n_rows; ++r) {
        if (rows[r].first >= j1 || rows[r].last < j0) continue;
        a_min = min64(a_min, max64(rows[r].first, j0));
        b_max = max64(b_max, min64(rows[r].last, j1 - 1));
      }
      for (int64_t j = a_min; j <= b_max; ++j) {
        const uint8_t* x = slice_at(kv, kv.v_offset, kv.v_stride, j, group_bytes);
        const char* ahead =
            reinterpret_cast<const char*>(slice_at(kv, kv.v_offset, kv.v_stride, min64(j + 8, b_max), group_bytes));
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + slice_bytes - 1, _MM_HINT_T0);
        for (int64_t d = 0; d < hd_v; d += 16) _mm512_storeu_ps(sp.kv_block + (j - j0) * hd_v + d, dequant16<F>(x, d));
      }
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t first = rows[r].first;
      const int64_t a0 = max64(j0, first), b0 = min64(j1 - 1, rows[r].last);
      // [a0, b0] cut at the row's chunk ends: [a, b] within one chunk.
      for (int64_t a = a0; a <= b0;) {
        const int64_t chunk_end = first + ((a - first) / kAttendChunk + 1) * kAttendChunk - 1;
        const int64_t b = min64(b0, chunk_end);
        const float* vb = shared ? sp.kv_block + (a - j0) * hd_v : nullptr;
        const float* p[4];
        float* o[4];
        int64_t i = 0;
        for (; i + 4 <= n_gqa; i += 4) {
          for (int h = 0; h < 4; ++h) {
            p[h] = probs + (r * n_gqa + i + h) * ld + (a - first);
            o[h] = sp.vacc + (r * n_gqa + i + h) * hd_v;
          }
          weighted_v_all<F, 4>(p, b - a + 1, o, hd_v, vb, kv, a, group_bytes, slice_bytes);
        }
        for (; i < n_gqa; ++i) {
          p[0] = probs + (r * n_gqa + i) * ld + (a - first);
          o[0] = sp.vacc + (r * n_gqa + i) * hd_v;
          weighted_v_all<F, 1>(p, b - a + 1, o, hd_v, vb, kv, a, group_bytes, slice_bytes);
        }
        if (b == chunk_end || b == rows[r].last) {
          // The chunk's sums into the output (the first chunk) or added to it, in chunk order.
          const bool add = a - first >= kAttendChunk;
          for (int64_t h = 0; h < n_gqa; ++h) {
            float* acc = sp.vacc + (r * n_gqa + h) * hd_v;
            float* out = rows[r].out + h * hd_v;
            for (int64_t d = 0; d < hd_v; d += 16) {
              const __m512 x = _mm512_loadu_ps(acc + d);
              _mm512_storeu_ps(out + d, add ? _mm512_add_ps(_mm512_loadu_ps(out + d), x) : x);
              _mm512_storeu_ps(acc + d, _mm512_setzero_ps());
            }
          }
        }
        a = b + 1;
      }
    }
  }
}

}  // namespace

void attend_scores_typed_avx512(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows,
                                int64_t n_gqa, int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld,
                                AttentionScratch& s) {
  Fmt f;
  if (!fmt_of(kv.k_type, f) || f == Fmt::f16 || f == Fmt::bf16 || hd % 32 != 0 || hd > kTypedMaxHead) {
    attend_scores_typed(kv, g, rows, n_rows, n_gqa, hd, kq_scale, bk, scores, ld, s);
    return;
  }
  if (n_rows <= 0) return;
  const TypedQueries tq = typed_queries(kv.k_type, rows, n_rows, n_gqa, hd, true, s);
  switch (f) {
    case Fmt::q8_0: scores_typed<Fmt::q8_0>(kv, g, rows, n_rows, n_gqa, hd, kq_scale, scores, ld, tq); break;
    case Fmt::q4_0: scores_typed<Fmt::q4_0>(kv, g, rows, n_rows, n_gqa, hd, kq_scale, scores, ld, tq); break;
    case Fmt::q5_0: scores_typed<Fmt::q5_0>(kv, g, rows, n_rows, n_gqa, hd, kq_scale, scores, ld, tq); break;
    default: scores_typed<Fmt::iq4_nl>(kv, g, rows, n_rows, n_gqa, hd, kq_scale, scores, ld, tq); break;
  }
}

void attend_values_typed_avx512(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows,
                                int64_t n_gqa, int64_t hd_v, int64_t bk, const float* p, int64_t ld,
                                AttentionScratch& s) {
  Fmt f;
  const bool fp = kv.v_type == GgmlType::F16 || kv.v_type == GgmlType::BF16;
  if (!fmt_of(kv.v_type, f) || hd_v % (fp ? 16 : 32) != 0) {
    attend_values_typed(kv, g, rows, n_rows, n_gqa, hd_v, bk, p, ld, s);
    return;
  }
  if (n_rows <= 0) return;
  switch (f) {
    case Fmt::q8_0: values_typed<Fmt::q8_0>(kv, g, rows, n_rows, n_gqa, hd_v, bk, p, ld, s); break;
    case Fmt::q4_0: values_typed<Fmt::q4_0>(kv, g, rows, n_rows, n_gqa, hd_v, bk, p, ld, s); break;
    case Fmt::q5_0: values_typed<Fmt::q5_0>(kv, g, rows, n_rows, n_gqa, hd_v, bk, p, ld, s); break;
    case Fmt::iq4_nl: values_typed<Fmt::iq4_nl>(kv, g, rows, n_rows, n_gqa, hd_v, bk, p, ld, s); break;
    case Fmt::f16: values_typed<Fmt::f16>(kv, g, rows, n_rows, n_gqa, hd_v, bk, p, ld, s); break;
    default: values_typed<Fmt::bf16>(kv, g, rows, n_rows, n_gqa, hd_v, bk, p, ld, s); break;
  }
}

}  // namespace synapse::kernels
#endif

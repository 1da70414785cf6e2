// AVX2 kernels of interleaved Q4_0 / Q5_0 / MXFP4 matrices (interleave.hpp)
// against Q8_0 activation rows, of interleaved Q8_0 (q8_0x8_tile, below)
// and IQ4_NL (iq4_nlx8_tile), of
// interleaved Q4_K against Q8_K (q4_Kx8_tile) and of interleaved
// Q6_K (the 8-lane order), one kernel per type for decode (one
// activation row) and prefill alike, but for Q6_K (q6_Kx8_tile decodes,
// q6_Kx8_many takes 4 rows and more) and Q8_0 (prefill takes two groups
// at a time).
//
// Q4_0 / Q5_0: per group of 8 rows and 32-element block, for each chunk c = 0..3 one
// 32-byte load holds bytes 4c..4c+3 of the 8 rows' qs (lane l = row l):
// the low nibbles are the rows' elements 4c..4c+3, the high nibbles their
// elements 16+4c..16+4c+3 (Q5_0: the whole 5-bit digits of the first four
// and the low 3 bits of the others, whose top bits lie in the qh byte in
// the same place: block_q5_0x8; MXFP4: its levels plus 12 by pshufb,
// block_mxfp4x8). Against the activation's bytes
// 4c..4c+3 and 16+4c..16+4c+3, each broadcast to all lanes,
// _mm256_maddubs_epi16 gives per row two int16 sums of 2 products. Those of
// a block are added in int16 while they cannot saturate (digits <= 15,
// bytes -128..127: all 4 chunks, |sum| <= 4 * 2 * 2 * 15 * 128 = 30720;
// Q5_0 digits <= 31: 2 chunks at a time, <= 31744; MXFP4 digits <= 24: 2
// chunks, <= 24576), _mm256_madd_epi16 by 1
// adds each row's words into int32, and subtracting offset * (sum of the
// activation block's bytes) leaves row l's exact isum = sum (q - offset) * a
// in lane l. Then, as legacy.cpp's Q4_0 order has it,
// acc = fma(float(isum), d_w * d_a, acc) lane by lane: the same integer and
// the same two roundings as vec_dot_q4_0_q8_0 / vec_dot_q5_0_q8_0 /
// vec_dot_mxfp4_q8_0 (d_w: MXFP4's 2^(e - 128), exact).
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "quant/avx2_util.hpp"
#include "quant/gemm_tiles.hpp"
#include "quant/interleave.hpp"
#include "quant/x8_packs.hpp"

namespace synapse::quant::avx2 {
namespace {

using namespace tiles;
using x8::PackedQ8x8;
using x8::PackedQ8x8m;
using x8::PackedQ8Kx8;
using x8::PackedQ8Kx8o;


// f.template operator()<c>() for c = 0 .. N-1, unrolled at compile time
// (c indexes registers and is a template argument).
template <int N, class F>
inline void unrolled(F&& f) {
  [&]<int... c>(std::integer_sequence<int, c...>) { (f.template operator()<c>(), ...); }(std::make_integer_sequence<int, N>{});
}

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// The digits of chunk c of an interleaved block: q = the chunk's 32 bytes.
struct Q4x8 {
  using X8 = block_q4_0x8;
  static constexpr bool kTwoStep = false;  // int16 sums of all 4 chunks cannot saturate
  static __m256 scales(const X8& b) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d))); }
  template <int c>
  static __m256i lo(const X8&, __m256i q, __m256i m4) { return _mm256_and_si256(q, m4); }
  template <int c>
  static __m256i hi(const X8&, __m256i q, __m256i m4) { return _mm256_and_si256(_mm256_srli_epi16(q, 4), m4); }
};
// Bits 2c, 2c + 1 of each byte of v moved to bits 3, 4 (other bits:
// garbage). 16-bit shifts keep them within their byte: left by at most 3
// from bits 0, 1, right by at most 3 from bits 6, 7.
template <int c>
inline __m256i top_bits_to_3(__m256i v) {
  if constexpr (c == 0) return _mm256_slli_epi16(v, 3);
  else if constexpr (c == 1) return _mm256_slli_epi16(v, 1);
  else if constexpr (c == 2) return _mm256_srli_epi16(v, 1);
  else return _mm256_srli_epi16(v, 3);
}

// block_q5_0x8 (interleave.hpp): the chunk's first 16 digits are its bytes'
// bits 0..4, the other 16 their bits 5..7 below qh's bits 2c, 2c + 1.
struct Q5x8 {
  using X8 = block_q5_0x8;
  static constexpr bool kTwoStep = true;  // int16 sums of 2 chunks at a time
  static __m256 scales(const X8& b) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d))); }
  template <int c>
  static __m256i lo(const X8&, __m256i q, __m256i) { return _mm256_and_si256(q, _mm256_set1_epi8(0x1F)); }
  template <int c>
  static __m256i hi(const X8& b, __m256i q, __m256i) {
    return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 5), _mm256_set1_epi8(0x07)),
                           _mm256_and_si256(top_bits_to_3<c>(load32(b.qh)), _mm256_set1_epi8(0x18)));
  }
};

// kvalues_mxfp4 plus 12: the levels as unsigned digits 0..24.
alignas(16) constexpr int8_t kMxfp4Plus12[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

// The 8 rows' scales 2^(e - 128) from their E8M0 bytes, kE8M0Half's
// values: (e - 1) << 23 as float bits for e >= 2, the subnormals
// 0x00200000 << e for e = 0, 1.
inline __m256 e8m0_half8(const uint8_t* e) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
  const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(sub, normal, _mm256_cmpgt_epi32(v, _mm256_set1_epi32(1))));
}

// block_mxfp4x8 (interleave.hpp): the nibbles look up the levels plus 12
// (digits <= 24, so the offset pack's term 12 * sum(a) is taken off as
// Q4_0's 8 * sum(a) is); int16 sums of 2 chunks at a time (<= 2 * 2 * 2 *
// 24 * 128 = 24576).
struct MXFP4x8 {
  using X8 = block_mxfp4x8;
  static constexpr bool kTwoStep = true;
  static __m256 scales(const X8& b) { return e8m0_half8(b.e); }
  static __m256i table() { return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kMxfp4Plus12))); }
  template <int c>
  static __m256i lo(const X8&, __m256i q, __m256i m4) { return _mm256_shuffle_epi8(table(), _mm256_and_si256(q, m4)); }
  template <int c>
  static __m256i hi(const X8&, __m256i q, __m256i m4) {
    return _mm256_shuffle_epi8(table(), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
  }
};

// A group's blocks (nb of them) by A activation rows (as bytes apart):
// y[m * ys + l] for the 8 rows l. Each chunk's weight bytes are unpacked
// once for the A rows. kStream: prefetch the weights ahead (decode, which
// streams them from memory; gemm_x8).
template <class T, int A, bool kStream>
void x8_tile(int64_t nb, const typename T::X8* w, const uint8_t* a, size_t as, float* y, size_t ys) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 acc[A];
  for (int m = 0; m < A; ++m) acc[m] = _mm256_setzero_ps();
  const PrefetchDistances pf = kStream ? prefetch_distances() : PrefetchDistances{};
  for (int64_t i = 0; i < nb; ++i) {
    const typename T::X8& b = w[i];
    if constexpr (kStream) prefetch_ahead(&b, pf);
    __m256i s[A], s32[A];
    const auto chunk = [&]<int c>() {
      const __m256i q = load32(b.qs + 32 * c);
      const __m256i lo = T::template lo<c>(b, q, m4), hi = T::template hi<c>(b, q, m4);
      for (int m = 0; m < A; ++m) {
        const PackedQ8x8& x = act_row<PackedQ8x8>(a, as, m)[i];
        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(x.qs + 4 * c)),
                                           _mm256_maddubs_epi16(hi, bcast4(x.qs + 16 + 4 * c)));
        // Q4_0's four-chunk sums kept as chains (nc): reassociated into trees
        // they spill. Q5_0's two-chunk sums ran slower as chains and stay as
        // the compiler orders them (docs/PERFORMANCE.md, "Measurements moved
        // out of the code").
        if constexpr (T::kTwoStep) {
          s[m] = (c == 0 || c == 2) ? p : _mm256_add_epi16(s[m], p);
        } else {
          s[m] = c == 0 ? p : nc(_mm256_add_epi16(s[m], p));
        }
        if constexpr (T::kTwoStep && c == 1) s32[m] = _mm256_madd_epi16(s[m], ones);
      }
    };
    unrolled<4>(chunk);
    const __m256 dw = T::scales(b);
    for (int m = 0; m < A; ++m) {
      const PackedQ8x8& x = act_row<PackedQ8x8>(a, as, m)[i];
      __m256i dot = _mm256_madd_epi16(s[m], ones);
      if constexpr (T::kTwoStep) dot = _mm256_add_epi32(s32[m], dot);
      const __m256i isum = _mm256_sub_epi32(dot, _mm256_set1_epi32(x.off));
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_broadcast_ss(&x.d)), acc[m]);
    }
  }
  for (int m = 0; m < A; ++m) _mm256_storeu_ps(y + static_cast<size_t>(m) * ys, acc[m]);
}

// The nibble formats as gemm_x8 takes them, with the activation rows per
// tile (kActs) that ran fastest: Q4_0 2 (with 4 its int16 sums and
// accumulators spill), Q5_0 4 (its fifth bits make the weight unpacking
// worth sharing among more rows); docs/PERFORMANCE.md, "Measurements moved
// out of the code".
template <class T, int Acts>
struct NibbleTile {
  using X8 = typename T::X8;
  static constexpr int kActs = Acts;
  static constexpr int kBlock = 32;
  template <int A, bool kStream>
  static void tile(int64_t nb, const X8* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    x8_tile<T, A, kStream>(nb, w, a, as, y, ys);
  }
};
using Q4Tile = NibbleTile<Q4x8, 2>;
using Q5Tile = NibbleTile<Q5x8, 4>;
// MXFP4 with Q5_0's tile: its digits cost a lookup, as Q5_0's fifth bits do.
using MXFP4Tile = NibbleTile<MXFP4x8, 4>;

// A group's IQ4_NL blocks (block_iq4_nlx8) by A activation rows, in
// legacy.cpp's Q4_0 order. Chunk c's load holds bytes 4c..4c+3 of the 8
// rows' nibbles; one pshufb of each half gives the signed levels of
// elements 4c..4c+3 and 16+4c..16+4c+3 (lane l = row l). Against the
// activation packed as for Q8_0 (PackedQ8x8, PackedQ8x8m), each is
// multiplied as q8_0x8_tile does: _mm256_sign_epi8 gives level * sign(a)
// (exact: no level is -128), _mm256_maddubs_epi16 against the broadcast
// |a| the int16 sums of 2 products (<= 2 * 128 * 127), _mm256_madd_epi16 by
// 1 the exact int32 of 4; the chunks' sums make each row's exact block
// dot, and acc = fma(float(isum), d_w * d_a, acc) serves the 8 rows.
template <int A, bool kStream>
void iq4_nlx8_tile(int64_t nb, const block_iq4_nlx8* w, const uint8_t* a, size_t as, float* y, size_t ys) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kvalues_iq4nl)));
  __m256 acc[A];
  for (int m = 0; m < A; ++m) acc[m] = _mm256_setzero_ps();
  const PrefetchDistances pf = kStream ? prefetch_distances() : PrefetchDistances{};
  for (int64_t i = 0; i < nb; ++i) {
    const block_iq4_nlx8& b = w[i];
    if constexpr (kStream) prefetch_ahead(&b, pf);
    __m256i s[A];
    unrolled<4>([&]<int c>() {
      const __m256i q = load32(b.qs + 32 * c);
      const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
      const __m256i hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
      for (int m = 0; m < A; ++m) {
        const PackedQ8x8* x = act_row<PackedQ8x8>(a, as, m);
        const int8_t* mag = reinterpret_cast<const int8_t*>(reinterpret_cast<const PackedQ8x8m*>(x + nb)[i].mag);
        const __m256i pl = _mm256_madd_epi16(
            _mm256_maddubs_epi16(bcast4(mag + 4 * c), _mm256_sign_epi8(lo, bcast4(x[i].qs + 4 * c))), ones);
        const __m256i ph = _mm256_madd_epi16(
            _mm256_maddubs_epi16(bcast4(mag + 16 + 4 * c), _mm256_sign_epi8(hi, bcast4(x[i].qs + 16 + 4 * c))), ones);
        const __m256i p = _mm256_add_epi32(pl, ph);
        if constexpr (c == 0) s[m] = p;
        else s[m] = nc(_mm256_add_epi32(s[m], p));
      }
    });
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
    for (int m = 0; m < A; ++m)
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[m]),
                               _mm256_mul_ps(dw, _mm256_broadcast_ss(&act_row<PackedQ8x8>(a, as, m)[i].d)), acc[m]);
  }
  for (int m = 0; m < A; ++m) _mm256_storeu_ps(y + static_cast<size_t>(m) * ys, acc[m]);
}

// Four activation rows per tile share each weight unpack, as Q8_0's.
struct IQ4NLTile {
  using X8 = block_iq4_nlx8;
  static constexpr int kActs = 4;
  static constexpr int kBlock = 32;
  template <int A, bool kStream>
  static void tile(int64_t nb, const X8* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    iq4_nlx8_tile<A, kStream>(nb, w, a, as, y, ys);
  }
};

// The 8-lane order's last step (Q6_K) for 8 rows at once: lane l of r[q] is row
// l's accumulator of lane q, and hsum_float_8's sum ((a0+a4)+(a2+a6)) +
// ((a1+a5)+(a3+a7)) is taken across the 8 registers.
inline __m256 hsum_lanes(const __m256 r[8]) {
  return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(r[4], r[0]), _mm256_add_ps(r[6], r[2])),
                       _mm256_add_ps(_mm256_add_ps(r[5], r[1]), _mm256_add_ps(r[7], r[3])));
}

// G groups' Q8_0 blocks (w[g], 8 output rows each, at y + 8g) by A
// activation rows, in legacy.cpp's Q4_0 order. Chunk c's load holds bytes
// 4c..4c+3 of a group's 8 rows (lane l = row l): _mm256_sign_epi8 gives
// w * sign(a) (exact, as no weight byte is -128: rows_interleave_exactly),
// _mm256_maddubs_epi16 against the broadcast |a| the int16 sums of 2
// products (|sum| <= 2 * 128 * 127 = 32512, no saturation),
// _mm256_madd_epi16 by 1 the exact int32 of 4 products for the 8 rows; the
// 8 chunks' int32 added make each row's exact block dot, and
// acc = fma(float(isum), d_w * d_a, acc) serves the 8 rows at once. The
// chunks are unrolled, so the sums of the A rows stay in registers. Each
// activation broadcast serves the G groups: with one group the broadcasts
// (two loads per 32 products) bound the prefill tile.
template <int G, int A, bool kStream>
void q8_0x8_tile(int64_t nb, const block_q8_0x8* const* w, const uint8_t* a, size_t as, float* y, size_t ys) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[G][A];
  for (int g = 0; g < G; ++g)
    for (int m = 0; m < A; ++m) acc[g][m] = _mm256_setzero_ps();
  const PrefetchDistances pf = kStream ? prefetch_distances() : PrefetchDistances{};
  for (int64_t i = 0; i < nb; ++i) {
    if constexpr (kStream) prefetch_ahead(&w[0][i], pf);  // decode streams one group at a time
    __m256i s[G][A];
    unrolled<8>([&]<int c>() {
      __m256i q[G];
      for (int g = 0; g < G; ++g) q[g] = load32(w[g][i].qs + 32 * c);
      for (int m = 0; m < A; ++m) {
        const PackedQ8x8* x = act_row<PackedQ8x8>(a, as, m);
        const PackedQ8x8m& xm = reinterpret_cast<const PackedQ8x8m*>(x + nb)[i];
        const __m256i mag = bcast4(reinterpret_cast<const int8_t*>(xm.mag) + 4 * c), sgn = bcast4(x[i].qs + 4 * c);
        for (int g = 0; g < G; ++g) {
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(mag, _mm256_sign_epi8(q[g], sgn)), ones);
          if constexpr (c == 0) s[g][m] = p;
          else s[g][m] = nc(_mm256_add_epi32(s[g][m], p));
        }
      }
    });
    for (int g = 0; g < G; ++g) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[g][i].d)));
      for (int m = 0; m < A; ++m)
        acc[g][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[g][m]),
                                    _mm256_mul_ps(dw, _mm256_broadcast_ss(&act_row<PackedQ8x8>(a, as, m)[i].d)),
                                    acc[g][m]);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int m = 0; m < A; ++m) _mm256_storeu_ps(y + static_cast<size_t>(m) * ys + kInterleave * g, acc[g][m]);
}

// One group (decode, and a lone last group in prefill): four activation
// rows per tile share each weight load.
struct Q8Tile {
  using X8 = block_q8_0x8;
  static constexpr int kActs = 4;
  static constexpr int kBlock = 32;
  template <int A, bool kStream>
  static void tile(int64_t nb, const X8* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q8_0x8_tile<1, A, kStream>(nb, &w, a, as, y, ys);
  }
};


// A group's Q4_K blocks by A activation rows. Per 64-element group g and
// chunk c, one load holds bytes 32g + 4c..+3 of the 8 rows (low nibbles:
// sub-block 2g, high: 2g + 1); _mm256_maddubs_epi16 against the broadcast
// activation bytes, summed in int16 over the 8 chunks of a sub-block
// (<= 8 * 2 * 15 * 128 = 30720), then _mm256_madd_epi16 with the rows'
// scale of that sub-block in both words of each lane: row l's exact isum in
// lane l. The mins: _mm256_madd_epi16 of the rows' (min 2t, min 2t+1) with
// the activation's (bsum 2t, bsum 2t+1). Then k_quants.cpp's order: one
// fused multiply-add into each of two accumulators, subtracted at the end.
template <int A, bool kStream>
void q4_Kx8_tile(int64_t nb, const block_q4_Kx8* w, const uint8_t* a, size_t as, float* y, size_t ys) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[A], acc_min[A];
  for (int m = 0; m < A; ++m) acc[m] = acc_min[m] = _mm256_setzero_ps();
  const PrefetchDistances pf = kStream ? prefetch_distances() : PrefetchDistances{};
  for (int64_t i = 0; i < nb; ++i) {
    const block_q4_Kx8& b = w[i];
    if constexpr (kStream) prefetch_ahead(&b, pf);
    __m256i i32[A];
    for (int m = 0; m < A; ++m) i32[m] = _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      __m256i slo[A], shi[A];
      for (int c = 0; c < 8; ++c) {
        const __m256i q = load32(b.qs + 32 * (8 * g + c));
        const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        for (int m = 0; m < A; ++m) {
          const int8_t* x = act_row<PackedQ8Kx8>(a, as, m)[i].qs + 64 * g + 4 * c;
          const __m256i pl = _mm256_maddubs_epi16(lo, bcast4(x)), ph = _mm256_maddubs_epi16(hi, bcast4(x + 32));
          // (nc: as chains; reassociated into trees they spill.)
          slo[m] = c == 0 ? pl : nc(_mm256_add_epi16(slo[m], pl));
          shi[m] = c == 0 ? ph : nc(_mm256_add_epi16(shi[m], ph));
        }
      }
      const __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.sc[2 * g])));
      const __m256i v1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.sc[2 * g + 1])));
      const __m256i s0 = _mm256_or_si256(v0, _mm256_slli_epi32(v0, 16));
      const __m256i s1 = _mm256_or_si256(v1, _mm256_slli_epi32(v1, 16));
      for (int m = 0; m < A; ++m)
        i32[m] = _mm256_add_epi32(i32[m], _mm256_add_epi32(_mm256_madd_epi16(slo[m], s0), _mm256_madd_epi16(shi[m], s1)));
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
    const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.dmin)));
    __m256i mp[4];
    for (int t = 0; t < 4; ++t) mp[t] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.mp[t])));
    for (int m = 0; m < A; ++m) {
      const PackedQ8Kx8& x = act_row<PackedQ8Kx8>(a, as, m)[i];
      __m256i ms = _mm256_madd_epi16(mp[0], bcast4(reinterpret_cast<const int8_t*>(x.bsum)));
      for (int t = 1; t < 4; ++t)
        ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mp[t], bcast4(reinterpret_cast<const int8_t*>(x.bsum + 2 * t))));
      const __m256 da = _mm256_broadcast_ss(&x.d);
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32[m]), _mm256_mul_ps(dw, da), acc[m]);
      acc_min[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_mul_ps(dm, da), acc_min[m]);
    }
  }
  for (int m = 0; m < A; ++m) _mm256_storeu_ps(y + static_cast<size_t>(m) * ys, _mm256_sub_ps(acc[m], acc_min[m]));
}

// Q4_K as gemm_x8 takes it: Acts activation rows per tile. 2 in general
// (with 4 the accumulators spill), 4 on Intel (quant::cpu_is_intel), where
// the spills cost less than the unpacking they save (docs/PERFORMANCE.md,
// "Measurements moved out of the code").
template <int Acts>
struct Q4KTile {
  using X8 = block_q4_Kx8;
  static constexpr int kActs = Acts;
  static constexpr int kBlock = QK_K;
  template <int A, bool kStream>
  static void tile(int64_t nb, const X8* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q4_Kx8_tile<A, kStream>(nb, w, a, as, y, ys);
  }
};


// Row l's int8 scales of one sub-block (8 bytes, row l at byte l) as
// int16 pairs (s_l, s_l) in int32 lane l, for _mm256_madd_epi16.
inline __m256i scale_pairs(const int8_t* sc) {
  const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc)), dup));
}

// The digits (0..63) of half h of chunk c (block_q6_Kx8): u[f] = register
// q6x8_register(h, f). The 16-bit shifts keep each field in its byte
// (what they bring in from the neighbouring byte is masked off).
inline void q6x8_digits(const block_q6_Kx8& b, int c, int h, __m256i u[4]) {
  const __m256i m6 = _mm256_set1_epi8(0x3F), m2 = _mm256_set1_epi8(0x03), m3c = _mm256_set1_epi8(0x3C);
  const __m256i x0 = load32(b.q[c][h][0]), x1 = load32(b.q[c][h][1]), x2 = load32(b.q[c][h][2]);
  u[0] = _mm256_and_si256(x0, m6);
  u[1] = _mm256_and_si256(x1, m6);
  u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x0, 6), m2), _mm256_and_si256(_mm256_slli_epi16(x2, 2), m3c));
  u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x1, 6), m2), _mm256_and_si256(_mm256_srli_epi16(x2, 2), m3c));
}

// A group's Q6_K blocks by A activation rows, in k_quants.cpp's 8-lane
// order. Register (c, q) (block_q6_Kx8): its digits u = low 4 bits | top
// 2 bits << 4 (0..63); _mm256_maddubs_epi16(u, a) - 32 * (pair sums of a)
// is the int16 sum of 2 products (u - 32) * a (|.| <= 2 * 32 * 128, the
// maddubs itself <= 2 * 63 * 128: no saturation), _mm256_madd_epi16 with
// the rows' scale of sub-block 2c + q / 4 adds the pair into lane q's int32
// (lane l = row l), summed over the 8 chunks: each row's exact lane q.
// Then acc[q] = fma(d_a * d_w, float(lane), acc[q]) and, at the end,
// hsum_float_8 across the 8 accumulators (hsum_lanes).
template <int A, bool kStream>
void q6_Kx8_tile(int64_t nb, const block_q6_Kx8* w, const uint8_t* a, size_t as, float* y, size_t ys) {
  __m256 acc[A][8];
  for (int m = 0; m < A; ++m)
    for (int q = 0; q < 8; ++q) acc[m][q] = _mm256_setzero_ps();
  const PrefetchDistances pf = kStream ? prefetch_distances() : PrefetchDistances{};
  for (int64_t i = 0; i < nb; ++i) {
    const block_q6_Kx8& b = w[i];
    if constexpr (kStream) prefetch_ahead(&b, pf);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
    // The lanes in two halves, h = 0 (q = 0, 1, 4, 5) and h = 1 (2, 3, 6,
    // 7): 4 int32 accumulators per activation row at a time, which stay in
    // registers (all 8 spilled).
    for (int h = 0; h < 2; ++h) {
      __m256i lane[A][4];
      for (int m = 0; m < A; ++m)
        for (int f = 0; f < 4; ++f) lane[m][f] = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        const __m256i s_lo = scale_pairs(b.sc[2 * c]), s_hi = scale_pairs(b.sc[2 * c + 1]);
        // Register (c, q) is digit f of half h (block_q6_Kx8).
        const auto add = [&](int f, __m256i u) {
          const int q = q6x8_register(h, f);
          for (int m = 0; m < A; ++m) {
            const PackedQ8Kx8o& x = act_row<PackedQ8Kx8o>(a, as, m)[i];
            const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, bcast4(x.qs + 32 * c + 4 * q)),
                                               bcast4(reinterpret_cast<const int8_t*>(x.off + 2 * (8 * c + q))));
            lane[m][f] = nc(_mm256_add_epi32(lane[m][f], _mm256_madd_epi16(p, f < 2 ? s_lo : s_hi)));
          }
        };
        __m256i u[4];
        q6x8_digits(b, c, h, u);
        for (int f = 0; f < 4; ++f) add(f, u[f]);
      }
      for (int m = 0; m < A; ++m) {
        const __m256 d = _mm256_mul_ps(_mm256_broadcast_ss(&act_row<PackedQ8Kx8o>(a, as, m)[i].d), dw);
        for (int f = 0; f < 4; ++f) {
          const int q = q6x8_register(h, f);
          acc[m][q] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lane[m][f]), acc[m][q]);
        }
      }
    }
  }
  for (int m = 0; m < A; ++m) {
    _mm256_storeu_ps(y + static_cast<size_t>(m) * ys, hsum_lanes(acc[m]));
  }
}

// Prefill: G groups' Q6_K blocks (w[g], 8 output rows each, at y + 8g) by
// M (1..kQ6Rows<G>) activation rows, each block unpacked once, into a
// scratch of 64 digit registers and 16 scale pairs per group in L1, for all
// M rows (q6_Kx8_tile unpacks them in registers per tile of A rows, and
// with A = 2 its accumulators spill). Each
// activation load (bytes, offset term) serves the G groups' digits, and
// each digit register and scale pair a pair of activation rows (M odd: the
// last row alone). The same steps per output as q6_Kx8_tile,
// so the same bits. Two groups rather than one: the activation broadcasts,
// two loads per 32 products of one group, bound the one-group pass.
// Activation rows per call: the float accumulators take 16 KiB of L1.
template <int G>
inline constexpr int64_t kQ6Rows = 64 / G;
template <int G>
void q6_Kx8_many(int64_t nb, const block_q6_Kx8* const* w, const uint8_t* a, size_t as, int64_t M, float* y,
                 size_t ys) {
  __m256 acc[G][kQ6Rows<G>][8];
  for (int g = 0; g < G; ++g)
    for (int64_t m = 0; m < M; ++m)
      for (int q = 0; q < 8; ++q) acc[g][m][q] = _mm256_setzero_ps();
  // Registers per pass over a half chunk: the int32 lane accumulators
  // (G x 2 rows x K) stay in registers (one group: all 4 at a time ran
  // faster than 2).
  constexpr int K = G == 1 ? 4 : 2;
  __m256i u[G][2][8][4], sc[G][16];
  for (int64_t i = 0; i < nb; ++i) {
    __m256 dw[G];
    for (int g = 0; g < G; ++g) {
      const block_q6_Kx8& b = w[g][i];
      for (int sb = 0; sb < 16; ++sb) sc[g][sb] = scale_pairs(b.sc[sb]);
      for (int h = 0; h < 2; ++h)
        for (int c = 0; c < 8; ++c) q6x8_digits(b, c, h, u[g][h][c]);
      dw[g] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.d)));
    }
    const auto rows = [&]<int R>(int64_t m0) {
      const PackedQ8Kx8o* x[R];
      for (int r = 0; r < R; ++r) x[r] = &act_row<PackedQ8Kx8o>(a, as, static_cast<int>(m0 + r))[i];
      for (int h = 0; h < 2; ++h)
        for (int fp = 0; fp < 4 / K; ++fp) {  // digits f = K fp .. K fp + K - 1
          __m256i lane[G][R][K];
          for (int g = 0; g < G; ++g)
            for (int r = 0; r < R; ++r)
              for (int k = 0; k < K; ++k) lane[g][r][k] = _mm256_setzero_si256();
          for (int c = 0; c < 8; ++c) {
            for (int k = 0; k < K; ++k) {
              // Digit f's scale is sub-block 2c + f / 2, written so the
              // compiler sees it fixed across k when K = 2 (as f / 2 it
              // reloaded it).
              const int f = K * fp + k, q = q6x8_register(h, f), sb = 2 * c + K * fp / 2 + k / 2;
              for (int r = 0; r < R; ++r) {
                const __m256i xq = bcast4(x[r]->qs + 32 * c + 4 * q);
                const __m256i xo = bcast4(reinterpret_cast<const int8_t*>(x[r]->off + 2 * (8 * c + q)));
                for (int g = 0; g < G; ++g) {
                  const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u[g][h][c][f], xq), xo);
                  // (nc: the chain as written, faster than the compiler's tree.)
                  lane[g][r][k] = nc(_mm256_add_epi32(lane[g][r][k], _mm256_madd_epi16(p, sc[g][sb])));
                }
              }
            }
          }
          for (int r = 0; r < R; ++r)
            for (int g = 0; g < G; ++g) {
              const __m256 d = _mm256_mul_ps(_mm256_broadcast_ss(&x[r]->d), dw[g]);
              for (int k = 0; k < K; ++k) {
                const int q = q6x8_register(h, K * fp + k);
                acc[g][m0 + r][q] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lane[g][r][k]), acc[g][m0 + r][q]);
              }
            }
        }
    };
    int64_t m = 0;
    for (; m + 2 <= M; m += 2) rows.template operator()<2>(m);
    if (m < M) rows.template operator()<1>(m);
  }
  for (int g = 0; g < G; ++g)
    for (int64_t m = 0; m < M; ++m)
      _mm256_storeu_ps(y + static_cast<size_t>(m) * ys + kInterleave * g, hsum_lanes(acc[g][m]));
}

struct Q6KTile {
  using X8 = block_q6_Kx8;
  static constexpr int kActs = 1;
  static constexpr int kBlock = QK_K;
  template <int A, bool kStream>
  static void tile(int64_t nb, const X8* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q6_Kx8_tile<A, kStream>(nb, w, a, as, y, ys);
  }
};

// The groups of gemm_x8, each by all n_rows activation rows in tiles of
// T::kActs (the last smaller).
template <class T, bool kStream>
void groups_x8(int64_t nb, const uint8_t* w, size_t group_bytes, int64_t n_groups, const uint8_t* a, size_t as,
               int64_t n_rows, float* y, size_t ys) {
  for (int64_t g = 0; g < n_groups; ++g) {
    const auto* wg = reinterpret_cast<const typename T::X8*>(w + static_cast<size_t>(g) * group_bytes);
    float* yg = y + kInterleave * g;
    int64_t m = 0;
    for (; m + T::kActs <= n_rows; m += T::kActs)
      T::template tile<T::kActs, kStream>(nb, wg, a + m * as, as, yg + m * ys, ys);
    if constexpr (T::kActs > 1) {  // (tiles of one row leave no remainder)
      switch (n_rows - m) {
        case 3: T::template tile<3, kStream>(nb, wg, a + m * as, as, yg + m * ys, ys); break;
        case 2: T::template tile<2, kStream>(nb, wg, a + m * as, as, yg + m * ys, ys); break;
        case 1: T::template tile<1, kStream>(nb, wg, a + m * as, as, yg + m * ys, ys); break;
        default: break;
      }
    }
  }
}

// Decode (n_rows < kTile) reads the matrix once, from memory: the stream
// is started (prefetch_start) and the tiles prefetch it ahead
// (prefetch_ahead). Prefill re-reads each group for every tile of
// activation rows, from cache after the first, so its tiles prefetch
// nothing (prefetching there ran slower on every model measured:
// docs/PERFORMANCE.md, "Measurements moved out of the code").
template <class T>
void gemm_x8(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows, float* y,
             size_t ys) {
  const int64_t nb = n / T::kBlock;
  const size_t group_bytes = static_cast<size_t>(nb) * sizeof(typename T::X8);
  if (n_rows < kTile) {
    prefetch_start(w, static_cast<size_t>(n_groups) * group_bytes);
    groups_x8<T, true>(nb, w, group_bytes, n_groups, a, as, n_rows, y, ys);
  } else {
    groups_x8<T, false>(nb, w, group_bytes, n_groups, a, as, n_rows, y, ys);
  }
}

template <int kOffset>
void pack_offset(int64_t n, const void* src, void* dst) {
  const auto* x = static_cast<const block_q8_0*>(src);
  auto* p = static_cast<PackedQ8x8*>(dst);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    std::memcpy(p[i].qs, x[i].qs, 32);
    p[i].d = h2f(x[i].d);
    p[i].off = kOffset * hsum_i32_8(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), load32(x[i].qs)),
                                                      _mm256_set1_epi16(1)));
  }
}

}  // namespace

void gemm_q4_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                      float* y, size_t ys) {
  gemm_x8<Q4Tile>(n, w, n_groups, a, as, n_rows, y, ys);
}

void gemm_q5_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                      float* y, size_t ys) {
  gemm_x8<Q5Tile>(n, w, n_groups, a, as, n_rows, y, ys);
}

void gemm_q8_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                      float* y, size_t ys) {
  if (n_rows < kTile || n_groups < 2) {  // decode (and a lone group): one group at a time
    gemm_x8<Q8Tile>(n, w, n_groups, a, as, n_rows, y, ys);
    return;
  }
  const int64_t nb = n / QK8_0;
  const size_t group_bytes = static_cast<size_t>(nb) * sizeof(block_q8_0x8);
  const auto group = [&](int64_t g) { return reinterpret_cast<const block_q8_0x8*>(w + static_cast<size_t>(g) * group_bytes); };
  int64_t g = 0;
  for (; g + 2 <= n_groups; g += 2) {
    float* yg = y + kInterleave * g;
    int64_t m = 0;
    const block_q8_0x8* pair[2] = {group(g), group(g + 1)};
    for (; m + 2 <= n_rows; m += 2) q8_0x8_tile<2, 2, false>(nb, pair, a + m * as, as, yg + m * ys, ys);
    for (; m < n_rows; ++m) q8_0x8_tile<2, 1, false>(nb, pair, a + m * as, as, yg + m * ys, ys);
  }
  if (g < n_groups) gemm_x8<Q8Tile>(n, reinterpret_cast<const uint8_t*>(group(g)), 1, a, as, n_rows, y + kInterleave * g, ys);
}

void pack_q8_0_for_q8_0x8(int64_t n, const void* src, void* dst) {
  pack_offset<128>(n, src, dst);
  const auto* x = static_cast<const block_q8_0*>(src);
  const int64_t nb = n / QK8_0;
  auto* pm = reinterpret_cast<PackedQ8x8m*>(static_cast<PackedQ8x8*>(dst) + nb);
  for (int64_t i = 0; i < nb; ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(pm[i].mag), _mm256_abs_epi8(load32(x[i].qs)));
}

void gemm_q4_Kx8_q8_K(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                      float* y, size_t ys) {
  if (n_rows >= kTile && cpu_is_intel()) gemm_x8<Q4KTile<4>>(n, w, n_groups, a, as, n_rows, y, ys);
  else gemm_x8<Q4KTile<2>>(n, w, n_groups, a, as, n_rows, y, ys);
}

void gemm_q6_Kx8_q8_K(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                      float* y, size_t ys) {
  if (n_rows < kTile) {  // decode: the digits unpacked in registers
    gemm_x8<Q6KTile>(n, w, n_groups, a, as, n_rows, y, ys);
    return;
  }
  const int64_t nb = n / QK_K;
  const auto group = [&](int64_t g) {
    return reinterpret_cast<const block_q6_Kx8*>(w + static_cast<size_t>(g * nb) * sizeof(block_q6_Kx8));
  };
  int64_t g = 0;
  for (; g + 2 <= n_groups; g += 2) {
    const block_q6_Kx8* pair[2] = {group(g), group(g + 1)};
    for (int64_t m = 0; m < n_rows; m += kQ6Rows<2>)
      q6_Kx8_many<2>(nb, pair, a + m * as, as, std::min(kQ6Rows<2>, n_rows - m), y + m * ys + kInterleave * g, ys);
  }
  if (g < n_groups) {
    const block_q6_Kx8* last = group(g);
    for (int64_t m = 0; m < n_rows; m += kQ6Rows<1>)
      q6_Kx8_many<1>(nb, &last, a + m * as, as, std::min(kQ6Rows<1>, n_rows - m), y + m * ys + kInterleave * g, ys);
  }
}

void pack_q8_K_for_q6_Kx8(int64_t n, const void* src, void* dst) {
  const auto* x = static_cast<const block_q8_K*>(src);
  auto* p = static_cast<PackedQ8Kx8o*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    p[i].d = x[i].d;
    std::memset(p[i].pad, 0, sizeof p[i].pad);
    std::memcpy(p[i].qs, x[i].qs, QK_K);
    for (int k = 0; k < 128; ++k) p[i].off[k] = static_cast<int16_t>(32 * (x[i].qs[2 * k] + x[i].qs[2 * k + 1]));
  }
}

void pack_q8_K_for_q4_Kx8(int64_t n, const void* src, void* dst) {
  const auto* x = static_cast<const block_q8_K*>(src);
  auto* p = static_cast<PackedQ8Kx8*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    p[i].d = x[i].d;
    for (int s = 0; s < 8; ++s) p[i].bsum[s] = static_cast<int16_t>(x[i].bsums[2 * s] + x[i].bsums[2 * s + 1]);
    std::memcpy(p[i].qs, x[i].qs, QK_K);
    std::memset(p[i].pad, 0, sizeof p[i].pad);
  }
}

void pack_q8_0_for_q4_0x8(int64_t n, const void* src, void* dst) { pack_offset<8>(n, src, dst); }

void pack_q8_0_for_mxfp4x8(int64_t n, const void* src, void* dst) { pack_offset<12>(n, src, dst); }

void gemm_iq4_nlx8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                        float* y, size_t ys) {
  gemm_x8<IQ4NLTile>(n, w, n_groups, a, as, n_rows, y, ys);
}

void gemm_mxfp4x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                       float* y, size_t ys) {
  gemm_x8<MXFP4Tile>(n, w, n_groups, a, as, n_rows, y, ys);
}

void pack_q8_0_for_q5_0x8(int64_t n, const void* src, void* dst) { pack_offset<16>(n, src, dst); }

}  // namespace synapse::quant::avx2
#endif

// AVX-512 VNNI kernels of interleaved Q4_0 / Q5_0 / Q8_0 / IQ4_NL / MXFP4 / Q4_K / Q6_K
// matrices (interleave.hpp) for prefill: the AVX2 kernels' steps
// (interleave_avx2.cpp) on 512-bit registers that hold two groups, 16 weight
// rows side by side (lanes 0..7 group g, 8..15 group g + 1), so every
// activation broadcast and every float step serves 16 outputs. The extra
// width goes across outputs only: each output keeps, per block, the exact
// integer and the float operations of vec_dot_<t>_<vt> in their order, so
// these kernels give the AVX2 and scalar kernels' bits (contract 2;
// tests/quant/interleave_test.cpp compares them with memcmp).
//
// vpdpbusd (_mm512_dpbusd_epi32: unsigned bytes times signed bytes, four
// products added into each int32 lane without saturation) replaces
// maddubs + madd + add: the same exact int32 sums, as no int16 step is left
// to saturate. The weight digits are the unsigned operand (Q4_0 0..15,
// Q5_0 0..31, Q4_K 0..15; Q8_0 its bytes + 128, IQ4_NL its levels + 128,
// MXFP4 its levels + 12), the activation bytes the
// signed one, and the digit offset comes off as the packs' offset term
// (x8_packs.hpp). Q4_K multiplies its int32 sub-block sums by the
// scales with vpmulld (sums up to 32 * 15 * 128 do not fit the int16 of
// madd). Q6_K (its 8-lane order scales every 4 products) takes vpdpbusd
// per 4 products with the operands' roles swapped, packs two chunks' sums
// into int16 pairs and scales them with one vpdpwssd (q6_many).
//
// Decode (fewer than kMinRows activation rows, which streams the weights
// from memory) and a lone last group run the AVX2 kernels, which give the
// same bits. No STL and no inline function of a shared header here: code
// compiled with -mavx512* must not become the definition generic code links.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports as read uninitialized (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "quant/interleave.hpp"
#include "quant/x8_packs.hpp"

namespace synapse::quant::avx512 {
namespace {

using x8::PackedQ8Kx8;
using x8::PackedQ8Kx8o;
using x8::PackedQ8x8;

// Activation rows below which a product runs the AVX2 (decode) kernels.
constexpr int64_t kMinRows = 4;

template <int N, class F>
inline void unrolled(F&& f) {
  [&]<int... c>(std::integer_sequence<int, c...>) { (f.template operator()<c>(), ...); }(std::make_integer_sequence<int, N>{});
}

template <class B>
inline const B& act(const uint8_t* a, size_t as, int m, int64_t i) {
  return reinterpret_cast<const B*>(a + static_cast<size_t>(m) * as)[i];
}

// 4 bytes broadcast to the 16 int32 lanes, read as one int32 that may alias
// the bytes (so the compiler can fold it into vpdpbusd's {1to16} operand).
typedef int32_t unaligned_i32 __attribute__((may_alias, aligned(1)));
inline __m512i bcast4(const void* p) { return _mm512_set1_epi32(*static_cast<const unaligned_i32*>(p)); }
typedef int64_t unaligned_i64 __attribute__((may_alias, aligned(1)));
inline __m512i bcast8(const void* p) { return _mm512_set1_epi64(*static_cast<const unaligned_i64*>(p)); }

// 32 bytes of group g (lanes 0..7) and 32 of group g + 1 (lanes 8..15).
inline __m512i load_pair(const void* p0, const void* p1) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(p0))),
                            _mm256_loadu_si256(static_cast<const __m256i*>(p1)), 1);
}

inline __m256i load_pair16(const void* p0, const void* p1) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p0))),
                                 _mm_loadu_si128(static_cast<const __m128i*>(p1)), 1);
}

inline __m128i load_pair8(const void* p0, const void* p1) {
  return _mm_unpacklo_epi64(_mm_loadl_epi64(static_cast<const __m128i*>(p0)),
                            _mm_loadl_epi64(static_cast<const __m128i*>(p1)));
}

// The 8 F16 scales of each group as 16 floats (exact conversions).
inline __m512 f16_pair(const ggml_fp16_t* d0, const ggml_fp16_t* d1) { return _mm512_cvtph_ps(load_pair16(d0, d1)); }

// Runs K::run<A>(nb, w, a, as, y, ys) for rem (< K::kActs) rows.
template <class K, int A>
inline void rest(int64_t rem, int64_t nb, const typename K::X8* const* w, const uint8_t* a, size_t as, float* y,
                 size_t ys) {
  if constexpr (A > 0) {
    if (rem == A) K::template run<A>(nb, w, a, as, y, ys);
    else rest<K, A - 1>(rem, nb, w, a, as, y, ys);
  }
}

// Groups [g, g + 2 * K::kPairs) (K::kPairs pairs, 16 outputs each) against
// all n_rows activation rows, in tiles of K::kActs rows (the last smaller).
template <class K>
void run_tiles(int64_t nb, const uint8_t* w, size_t gb, int64_t g, const uint8_t* a, size_t as, int64_t n_rows, float* y,
               size_t ys) {
  const typename K::X8* wg[2 * K::kPairs];
  for (int k = 0; k < 2 * K::kPairs; ++k)
    wg[k] = reinterpret_cast<const typename K::X8*>(w + static_cast<size_t>(g + k) * gb);
  float* yg = y + kInterleave * g;
  int64_t m = 0;
  for (; m + K::kActs <= n_rows; m += K::kActs) K::template run<K::kActs>(nb, wg, a + m * as, as, yg + m * ys, ys);
  rest<K, K::kActs - 1>(n_rows - m, nb, wg, a + m * as, as, yg + m * ys, ys);
}

// gemm_x8 of the AVX-512 table: K::kPairs pairs of groups at a time, then
// one pair at a time (K1, kPairs 1), in tiles of activation rows; decode
// and a lone last group through `narrow` (the AVX2 kernel of the type).
// Q4_0, Q5_0 and Q8_0 take two pairs by 5 rows (each activation broadcast
// then feeds two vpdpbusd; 4 accumulators per row and 5 rows fill the 32
// registers), a last pair by 8 rows; Q4_K two pairs by 3 rows (5
// accumulators per row and pair), a last pair by 4 (5 and up spill).
// kernels::matmul hands them tiles of whole main tiles
// (KernelTable::x8_tile_step). The rows per tile are the fastest measured
// (docs/PERFORMANCE.md, "Measurements moved out of the code").
template <class K, class K1 = K>
void gemm_pairs(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows, float* y,
                size_t ys, GemmX8Fn narrow) {
  static_assert(K1::kPairs == 1);
  if (n_rows < kMinRows) {
    narrow(n, w, n_groups, a, as, n_rows, y, ys);
    return;
  }
  const int64_t nb = n / K::kBlock;
  const size_t gb = static_cast<size_t>(nb) * sizeof(typename K::X8);
  int64_t g = 0;
  for (; g + 2 * K::kPairs <= n_groups; g += 2 * K::kPairs) run_tiles<K>(nb, w, gb, g, a, as, n_rows, y, ys);
  for (; g + 2 <= n_groups; g += 2) run_tiles<K1>(nb, w, gb, g, a, as, n_rows, y, ys);
  if (g < n_groups) narrow(n, w + static_cast<size_t>(g) * gb, 1, a, as, n_rows, y + kInterleave * g, ys);
}

// ---- Q4_0 / Q5_0: digits of chunk c of the 16 rows from q = the chunk's
// bytes of both groups (block_q4_0x8 / block_q5_0x8).
struct Q4Digits {
  using X8 = block_q4_0x8;
  static __m512 scales(const X8& b0, const X8& b1) { return f16_pair(b0.d, b1.d); }
  template <int c>
  static void get(const X8&, const X8&, __m512i q, __m512i& lo, __m512i& hi) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    lo = _mm512_and_si512(q, m4);
    hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
  }
};

// Bits 2c, 2c + 1 of each byte moved to bits 3, 4 (other bits: garbage;
// the 16-bit shifts keep them within their byte).
template <int c>
inline __m512i top_bits_to_3(__m512i v) {
  if constexpr (c == 0) return _mm512_slli_epi16(v, 3);
  else if constexpr (c == 1) return _mm512_slli_epi16(v, 1);
  else if constexpr (c == 2) return _mm512_srli_epi16(v, 1);
  else return _mm512_srli_epi16(v, 3);
}

struct Q5Digits {
  using X8 = block_q5_0x8;
  static __m512 scales(const X8& b0, const X8& b1) { return f16_pair(b0.d, b1.d); }
  template <int c>
  static void get(const X8& b0, const X8& b1, __m512i q, __m512i& lo, __m512i& hi) {
    lo = _mm512_and_si512(q, _mm512_set1_epi8(0x1F));
    hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q, 5), _mm512_set1_epi8(0x07)),
                         _mm512_and_si512(top_bits_to_3<c>(load_pair(b0.qh, b1.qh)), _mm512_set1_epi8(0x18)));
  }
};

// IQ4_NL and MXFP4 (block_iq4_nlx8, block_mxfp4x8): the nibbles look up
// the levels as unsigned digits, IQ4_NL's plus 128 (sign bit flipped:
// 1..241) against Q8_0's pack (offset term 128 * sum(a)), MXFP4's plus 12
// (0..24) against the offset pack of 12, as the AVX2 kernels read them.
// Table: the 16 digits.
struct Digits16 {
  alignas(16) int8_t v[16];
};
// levels[k] + off as the byte pshufb looks up (+ 128: the sign bit flipped).
constexpr Digits16 offset_levels(const int8_t (&levels)[16], int off) {
  Digits16 t{};
  for (int k = 0; k < 16; ++k) t.v[k] = static_cast<int8_t>(static_cast<uint8_t>(levels[k] + off));
  return t;
}
constexpr Digits16 kIQ4NLPlus128 = offset_levels(kvalues_iq4nl, 128);
constexpr Digits16 kMxfp4Plus12 = offset_levels(kvalues_mxfp4, 12);

template <class B, const Digits16& Table>
struct TableDigits {
  using X8 = B;
  template <int c>
  static void get(const X8&, const X8&, __m512i q, __m512i& lo, __m512i& hi) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i t = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(Table.v)));
    lo = _mm512_shuffle_epi8(t, _mm512_and_si512(q, m4));
    hi = _mm512_shuffle_epi8(t, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
  }
};

struct IQ4NLDigits : TableDigits<block_iq4_nlx8, kIQ4NLPlus128> {
  static __m512 scales(const X8& b0, const X8& b1) { return f16_pair(b0.d, b1.d); }
};

// The 16 rows' 2^(e - 128) from their E8M0 bytes, as kE8M0Half has them:
// (e - 1) << 23 as float bits for e >= 2, the subnormals 0x00200000 << e
// for e = 0, 1.
struct MXFP4Digits : TableDigits<block_mxfp4x8, kMxfp4Plus12> {
  static __m512 scales(const X8& b0, const X8& b1) {
    const __m512i v = _mm512_cvtepu8_epi32(load_pair8(b0.e, b1.e));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
    return _mm512_castsi512_ps(
        _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(v, _mm512_set1_epi32(1)), sub, normal));
  }
};

// The integer sums of a Q4_0 / Q5_0 / IQ4_NL / MXFP4 block of W pairs of groups (b[2p],
// b[2p + 1]) against A activation rows, added into s[p][m] (one int32 chain
// per row and pair: the chains are independent, enough to cover
// vpdpbusd's latency); each activation broadcast serves the W pairs.
template <class D>
struct NibbleSums {
  using X8 = typename D::X8;
  using Pack = PackedQ8x8;
  static __m512 scales(const X8& b0, const X8& b1) { return D::scales(b0, b1); }
  template <int A, int W>
  static void add(const X8* const* b, const uint8_t* a, size_t as, int64_t i, __m512i (*s)[A]) {
    unrolled<4>([&]<int c>() {
      __m512i lo[W], hi[W];
      for (int p = 0; p < W; ++p)
        D::template get<c>(b[2 * p][i], b[2 * p + 1][i], load_pair(b[2 * p][i].qs + 32 * c, b[2 * p + 1][i].qs + 32 * c),
                           lo[p], hi[p]);
      for (int m = 0; m < A; ++m) {
        const PackedQ8x8& x = act<PackedQ8x8>(a, as, m, i);
        const __m512i xl = bcast4(x.qs + 4 * c), xh = bcast4(x.qs + 16 + 4 * c);
        for (int p = 0; p < W; ++p) {
          s[p][m] = _mm512_dpbusd_epi32(s[p][m], lo[p], xl);
          s[p][m] = _mm512_dpbusd_epi32(s[p][m], hi[p], xh);
        }
      }
    });
  }
};

// Q8_0: the weight bytes + 128 (xor 0x80: 0..255, the unsigned operand)
// against the activation bytes, into s[p][m]; the chain starts at minus
// PackedQ8x8::off = 128 * sum(a), so it ends at the exact block dot.
struct Q8Sums {
  using X8 = block_q8_0x8;
  using Pack = PackedQ8x8;
  static __m512 scales(const X8& b0, const X8& b1) { return f16_pair(b0.d, b1.d); }
  template <int A, int W>
  static void add(const X8* const* b, const uint8_t* a, size_t as, int64_t i, __m512i (*s)[A]) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    unrolled<8>([&]<int c>() {
      __m512i q[W];
      for (int p = 0; p < W; ++p)
        q[p] = _mm512_xor_si512(load_pair(b[2 * p][i].qs + 32 * c, b[2 * p + 1][i].qs + 32 * c), flip);
      for (int m = 0; m < A; ++m) {
        const __m512i x = bcast4(act<PackedQ8x8>(a, as, m, i).qs + 4 * c);
        for (int p = 0; p < W; ++p) s[p][m] = _mm512_dpbusd_epi32(s[p][m], q[p], x);
      }
    });
  }
};

// W pairs of groups' 32-element blocks (Q4_0, Q5_0, Q8_0) by A activation
// rows: per row and pair a chain that starts at minus the offset term and
// ends at row l's exact isum in lane l, then acc = fma(float(isum),
// d_w * d_a, acc): legacy.cpp's Q4_0 order. Pair p's 16 outputs of a row
// go to y[16 p ..].
template <class S, int Pairs, int Acts>
struct Block32Kernel {
  using X8 = typename S::X8;
  using Pack = typename S::Pack;
  static constexpr int kPairs = Pairs;
  static constexpr int kActs = Acts;
  static constexpr int kBlock = 32;
  template <int A>
  static void run(int64_t nb, const X8* const* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    __m512 acc[Pairs][A];
    for (int p = 0; p < Pairs; ++p)
      for (int m = 0; m < A; ++m) acc[p][m] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      __m512i s[Pairs][A];
      for (int m = 0; m < A; ++m) {
        const __m512i off = _mm512_set1_epi32(-act<Pack>(a, as, m, i).off);
        for (int p = 0; p < Pairs; ++p) s[p][m] = off;
      }
      S::template add<A, Pairs>(w, a, as, i, s);
      for (int p = 0; p < Pairs; ++p) {
        const __m512 dw = S::scales(w[2 * p][i], w[2 * p + 1][i]);
        for (int m = 0; m < A; ++m) {
          const __m512 da = _mm512_set1_ps(act<Pack>(a, as, m, i).d);
          acc[p][m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[p][m]), _mm512_mul_ps(dw, da), acc[p][m]);
        }
      }
    }
    for (int p = 0; p < Pairs; ++p)
      for (int m = 0; m < A; ++m) _mm512_storeu_ps(y + static_cast<size_t>(m) * ys + 16 * p, acc[p][m]);
  }
};

// ---- Q4_K: per 64-element group g, sub-blocks 2g (low nibbles) and 2g + 1
// (high) summed in int32 by vpdpbusd over their 8 chunks, times the rows'
// scales (vpmulld) into isum; the mins as the AVX2 kernel takes them (madd
// of the (min 2t, min 2t+1) pairs with the bsum pairs, here vpdpwssd); then
// k_quants.cpp's two fused multiply-adds, subtracted at the end. Pairs
// pairs of groups side by side (pair p's outputs at y[16 p ..]): each
// activation broadcast feeds one vpdpbusd per pair.
template <int Pairs, int Acts>
struct Q4KKernel {
  using X8 = block_q4_Kx8;
  static constexpr int kPairs = Pairs;
  static constexpr int kActs = Acts;
  static constexpr int kBlock = QK_K;
  template <int A>
  static void run(int64_t nb, const X8* const* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[Pairs][A], acc_min[Pairs][A];
    for (int p = 0; p < Pairs; ++p)
      for (int m = 0; m < A; ++m) acc[p][m] = acc_min[p][m] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      __m512i isum[Pairs][A];
      for (int p = 0; p < Pairs; ++p)
        for (int m = 0; m < A; ++m) isum[p][m] = _mm512_setzero_si512();
      for (int g = 0; g < 4; ++g) {
        __m512i slo[Pairs][A], shi[Pairs][A];
        for (int p = 0; p < Pairs; ++p)
          for (int m = 0; m < A; ++m) slo[p][m] = shi[p][m] = _mm512_setzero_si512();
        unrolled<8>([&]<int c>() {
          __m512i lo[Pairs], hi[Pairs];
          for (int p = 0; p < Pairs; ++p) {
            const __m512i q = load_pair(w[2 * p][i].qs + 32 * (8 * g + c), w[2 * p + 1][i].qs + 32 * (8 * g + c));
            lo[p] = _mm512_and_si512(q, m4);
            hi[p] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
          }
          for (int m = 0; m < A; ++m) {
            const int8_t* x = act<PackedQ8Kx8>(a, as, m, i).qs + 64 * g + 4 * c;
            const __m512i xl = bcast4(x), xh = bcast4(x + 32);
            for (int p = 0; p < Pairs; ++p) {
              slo[p][m] = _mm512_dpbusd_epi32(slo[p][m], lo[p], xl);
              shi[p][m] = _mm512_dpbusd_epi32(shi[p][m], hi[p], xh);
            }
          }
        });
        for (int p = 0; p < Pairs; ++p) {
          const X8& b0 = w[2 * p][i];
          const X8& b1 = w[2 * p + 1][i];
          const __m512i sc0 = _mm512_cvtepu8_epi32(load_pair8(b0.sc[2 * g], b1.sc[2 * g]));
          const __m512i sc1 = _mm512_cvtepu8_epi32(load_pair8(b0.sc[2 * g + 1], b1.sc[2 * g + 1]));
          for (int m = 0; m < A; ++m)
            isum[p][m] = _mm512_add_epi32(isum[p][m], _mm512_add_epi32(_mm512_mullo_epi32(slo[p][m], sc0),
                                                                       _mm512_mullo_epi32(shi[p][m], sc1)));
        }
      }
      for (int p = 0; p < Pairs; ++p) {
        const X8& b0 = w[2 * p][i];
        const X8& b1 = w[2 * p + 1][i];
        const __m512 dw = f16_pair(b0.d, b1.d), dm = f16_pair(b0.dmin, b1.dmin);
        __m512i mp[4];
        for (int t = 0; t < 4; ++t) mp[t] = _mm512_cvtepu8_epi16(load_pair16(b0.mp[t], b1.mp[t]));
        for (int m = 0; m < A; ++m) {
          const PackedQ8Kx8& x = act<PackedQ8Kx8>(a, as, m, i);
          __m512i ms = _mm512_setzero_si512();
          for (int t = 0; t < 4; ++t) ms = _mm512_dpwssd_epi32(ms, mp[t], bcast4(x.bsum + 2 * t));
          const __m512 da = _mm512_set1_ps(x.d);
          acc[p][m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[p][m]), _mm512_mul_ps(dw, da), acc[p][m]);
          acc_min[p][m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(dm, da), acc_min[p][m]);
        }
      }
    }
    for (int p = 0; p < Pairs; ++p)
      for (int m = 0; m < A; ++m)
        _mm512_storeu_ps(y + static_cast<size_t>(m) * ys + 16 * p, _mm512_sub_ps(acc[p][m], acc_min[p][m]));
  }
};

// ---- Q6_K (k_quants.cpp's 8-lane order): hsum_float_8's sum
// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) across the 8 lane accumulators.
inline __m512 hsum_lanes(const __m512 r[8]) {
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(r[4], r[0]), _mm512_add_ps(r[6], r[2])),
                       _mm512_add_ps(_mm512_add_ps(r[5], r[1]), _mm512_add_ps(r[7], r[3])));
}

// q6x8_register of interleave.hpp, local: a shared header's function could
// be emitted here, compiled for AVX-512, and linked into generic code.
constexpr int q6_register(int h, int f) { return 2 * h + f % 2 + 4 * (f / 2); }

// Two groups' Q6_K blocks by M (1..kQ6Rows) activation rows, in
// k_quants.cpp's 8-lane order: lane q of output l is the exact int32
// sum over chunks c of sc[2c + q / 4][l] * (dot of register (c, q)), and
// integer sums are the same in any order, so the kernel groups them as it
// likes; only the float steps after (one fma per lane and block, then
// hsum_lanes) must keep the reference's order, and do.
//
// The operands: the weights as signed v = digit - 32 (-32..31), the
// activation bytes as unsigned a + 128 (0..255), so vpdpbusd gives a
// register's 4-product sum, (a + 128) . v in [-32640, 31620], an int16
// value; that sum is the exact one plus 128 * (sum of the 4 v), a
// per-weight-row term (made once per block with the same steps against
// bytes of 1) whose negation, corr[q], starts every lane sum.
//
// Chunks 2p and 2p + 1 of lane q pair up: each group's weight register
// (q, p) holds, per row, chunk 2p's 4 digits in dword 2j and chunk 2p + 1's
// in dword 2j + 1 (a vpermd of the block's bytes), and one 8-byte
// broadcast of the activations (their bytes permuted the same way) feeds
// both groups' vpdpbusd; vpackssdw (no value saturates) puts each row's two
// sums side by side as int16 in one dword, and one vpdpwssd multiplies
// them by the two chunks' scales and adds both into lane q. Per 128
// products: 2 vpdpbusd + 1 vpdpwssd + 1 shuffle, against 2 vpmaddubsw + 2
// vpdpwssd before. The pack leaves the 16 rows in the order kPackedRows
// (per 128-bit lane: 2 rows of group g, 2 of group g + 1); the scales, d
// and the accumulators follow it, and the stores put the rows back.
//
// With `prefetch` (the first call over a pair of groups, which reads its
// blocks from memory: a decode step of the server's 16 rows reads every
// matrix once) each block asks for the next one; the hardware prefetchers
// alone left the weight unpacking waiting on its loads.
constexpr int64_t kQ6Rows = 32;
alignas(64) constexpr int32_t kPairChunks[16] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};
alignas(64) constexpr int32_t kPackedRows[16] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
alignas(64) constexpr int32_t kNaturalRows[16] = {0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15};

// The digits (0..63) of half h of chunks 2p (dwords 2j) and 2p + 1
// (dwords 2j + 1) of one group's 8 rows: u[f] = register q6_register(h, f).
inline void q6_digit_pairs(const block_q6_Kx8& b, int p, int h, __m512i u[4]) {
  const __m512i m6 = _mm512_set1_epi8(0x3F), m2 = _mm512_set1_epi8(0x03), m3c = _mm512_set1_epi8(0x3C);
  const __m512i pc = _mm512_load_si512(kPairChunks);
  const __m512i x0 = _mm512_permutexvar_epi32(pc, load_pair(b.q[2 * p][h][0], b.q[2 * p + 1][h][0]));
  const __m512i x1 = _mm512_permutexvar_epi32(pc, load_pair(b.q[2 * p][h][1], b.q[2 * p + 1][h][1]));
  const __m512i x2 = _mm512_permutexvar_epi32(pc, load_pair(b.q[2 * p][h][2], b.q[2 * p + 1][h][2]));
  u[0] = _mm512_and_si512(x0, m6);
  u[1] = _mm512_and_si512(x1, m6);
  u[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(x0, 6), m2), _mm512_and_si512(_mm512_slli_epi16(x2, 2), m3c));
  u[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(x1, 6), m2), _mm512_and_si512(_mm512_srli_epi16(x2, 2), m3c));
}

// The 16 rows' int8 scales of sub-block sb as int32, in kPackedRows order.
inline __m512i packed_scales(const block_q6_Kx8& b0, const block_q6_Kx8& b1, int sb) {
  return _mm512_permutexvar_epi32(_mm512_load_si512(kPackedRows), _mm512_cvtepi8_epi32(load_pair8(b0.sc[sb], b1.sc[sb])));
}

// Lane sums of register pair (q, p) of both groups against the 8 bytes at
// x (chunk 2p's 4, chunk 2p + 1's 4), added into lane by the scales s.
inline __m512i q6_pair_step(__m512i lane, const void* x, __m512i w0, __m512i w1, __m512i s) {
  const __m512i b = bcast8(x);
  const __m512i t0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), b, w0);
  const __m512i t1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), b, w1);
  return _mm512_dpwssd_epi32(lane, _mm512_packs_epi32(t0, t1), s);
}

void q6_many(int64_t nb, const block_q6_Kx8* w0, const block_q6_Kx8* w1, const uint8_t* a, size_t as, int64_t M,
             float* y, size_t ys, bool prefetch) {
  __m512 acc[kQ6Rows][8];
  for (int64_t m = 0; m < M; ++m)
    for (int q = 0; q < 8; ++q) acc[m][q] = _mm512_setzero_ps();
  // Per block: v of register pair (q, p) of each group, the scale pairs of
  // lanes q < 4 and q >= 4 and chunk pair p, -128 * sum_c sc * (sum of v).
  __m512i v[8][4][2], sc[2][4], corr[8];
  alignas(64) uint8_t ax[8][QK_K];
  alignas(8) uint8_t ones[8];
  std::memset(ones, 1, sizeof ones);
  const __m512i k32 = _mm512_set1_epi8(32), flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
  for (int64_t i = 0; i < nb; ++i) {
    if (prefetch) {
      // The next block of both groups into L1 while this one is worked on;
      // after the last, the first blocks of the next two groups (groups lie
      // one after the other; past the matrix a prefetch touches the next
      // tensor or nothing, and never faults).
      const bool last = i + 1 == nb;
      const char* p0 = reinterpret_cast<const char*>(last ? w1 + nb : w0 + i + 1);
      const char* p1 = reinterpret_cast<const char*>(last ? w1 + 2 * nb : w1 + i + 1);
      for (size_t off = 0; off < sizeof(block_q6_Kx8); off += 64) {
        _mm_prefetch(p0 + off, _MM_HINT_T0);
        _mm_prefetch(p1 + off, _MM_HINT_T0);
      }
    }
    for (int hf = 0; hf < 2; ++hf)
      for (int p = 0; p < 4; ++p) {
        const __m512i s0 = packed_scales(w0[i], w1[i], 4 * p + hf), s1 = packed_scales(w0[i], w1[i], 4 * p + 2 + hf);
        sc[hf][p] = _mm512_or_si512(_mm512_and_si512(s0, lo16), _mm512_slli_epi32(s1, 16));
      }
    for (int p = 0; p < 4; ++p)
      for (int h = 0; h < 2; ++h) {
        __m512i u0[4], u1[4];
        q6_digit_pairs(w0[i], p, h, u0);
        q6_digit_pairs(w1[i], p, h, u1);
        for (int f = 0; f < 4; ++f) {
          const int q = q6_register(h, f);
          v[q][p][0] = _mm512_sub_epi8(u0[f], k32);
          v[q][p][1] = _mm512_sub_epi8(u1[f], k32);
        }
      }
    for (int q = 0; q < 8; ++q) {
      __m512i c = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) c = q6_pair_step(c, ones, v[q][p][0], v[q][p][1], sc[q / 4][p]);
      corr[q] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(c, 7));
    }
    const __m512 dw = _mm512_permutexvar_ps(_mm512_load_si512(kPackedRows), f16_pair(w0[i].d, w1[i].d));
    const __m512i pc = _mm512_load_si512(kPairChunks);
    const auto rows = [&]<int R>(int64_t m0) {
      __m512 d[R];
      for (int r = 0; r < R; ++r) {
        const PackedQ8Kx8o& x = act<PackedQ8Kx8o>(a, as, static_cast<int>(m0 + r), i);
        d[r] = _mm512_mul_ps(_mm512_set1_ps(x.d), dw);
        for (int k = 0; k < QK_K; k += 64)
          _mm512_store_si512(ax[r] + k, _mm512_permutexvar_epi32(pc, _mm512_xor_si512(_mm512_loadu_si512(x.qs + k), flip)));
      }
      for (int q = 0; q < 8; ++q) {
        __m512i lane[R];
        for (int r = 0; r < R; ++r) lane[r] = corr[q];
        for (int p = 0; p < 4; ++p)
          for (int r = 0; r < R; ++r) lane[r] = q6_pair_step(lane[r], ax[r] + 64 * p + 8 * q, v[q][p][0], v[q][p][1], sc[q / 4][p]);
        for (int r = 0; r < R; ++r)
          acc[m0 + r][q] = _mm512_fmadd_ps(d[r], _mm512_cvtepi32_ps(lane[r]), acc[m0 + r][q]);
      }
    };
    int64_t m = 0;
    for (; m + 8 <= M; m += 8) rows.template operator()<8>(m);
    if (m + 4 <= M) {
      rows.template operator()<4>(m);
      m += 4;
    }
    if (m + 2 <= M) {
      rows.template operator()<2>(m);
      m += 2;
    }
    if (m < M) rows.template operator()<1>(m);
  }
  const __m512i natural = _mm512_load_si512(kNaturalRows);
  for (int64_t m = 0; m < M; ++m) {
    const __m512 s = hsum_lanes(acc[m]);  // the masked form: GCC 12 warns on the plain one's undefined source
    _mm512_storeu_ps(y + static_cast<size_t>(m) * ys, _mm512_mask_permutexvar_ps(s, 0xFFFF, natural, s));
  }
}

}  // namespace

void gemm_q4_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                      float* y, size_t ys) {
  gemm_pairs<Block32Kernel<NibbleSums<Q4Digits>, 2, 5>, Block32Kernel<NibbleSums<Q4Digits>, 1, 8>>(n, w, n_groups, a, as, n_rows, y, ys, avx2::gemm_q4_0x8_q8_0);
}

void gemm_q5_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                      float* y, size_t ys) {
  gemm_pairs<Block32Kernel<NibbleSums<Q5Digits>, 2, 5>, Block32Kernel<NibbleSums<Q5Digits>, 1, 8>>(n, w, n_groups, a, as, n_rows, y, ys, avx2::gemm_q5_0x8_q8_0);
}

void gemm_q8_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                      float* y, size_t ys) {
  gemm_pairs<Block32Kernel<Q8Sums, 2, 5>, Block32Kernel<Q8Sums, 1, 8>>(n, w, n_groups, a, as, n_rows, y, ys, avx2::gemm_q8_0x8_q8_0);
}

void gemm_iq4_nlx8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                        float* y, size_t ys) {
  gemm_pairs<Block32Kernel<NibbleSums<IQ4NLDigits>, 2, 5>, Block32Kernel<NibbleSums<IQ4NLDigits>, 1, 8>>(
      n, w, n_groups, a, as, n_rows, y, ys, avx2::gemm_iq4_nlx8_q8_0);
}

void gemm_mxfp4x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                       float* y, size_t ys) {
  gemm_pairs<Block32Kernel<NibbleSums<MXFP4Digits>, 2, 5>, Block32Kernel<NibbleSums<MXFP4Digits>, 1, 8>>(
      n, w, n_groups, a, as, n_rows, y, ys, avx2::gemm_mxfp4x8_q8_0);
}

void gemm_q4_Kx8_q8_K(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                      float* y, size_t ys) {
  gemm_pairs<Q4KKernel<2, 3>, Q4KKernel<1, 4>>(n, w, n_groups, a, as, n_rows, y, ys, avx2::gemm_q4_Kx8_q8_K);
}

void gemm_q6_Kx8_q8_K(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t as, int64_t n_rows,
                      float* y, size_t ys) {
  if (n_rows < kMinRows) {
    avx2::gemm_q6_Kx8_q8_K(n, w, n_groups, a, as, n_rows, y, ys);
    return;
  }
  const int64_t nb = n / QK_K;
  const size_t gb = static_cast<size_t>(nb) * sizeof(block_q6_Kx8);
  int64_t g = 0;
  for (; g + 2 <= n_groups; g += 2) {
    const auto* w0 = reinterpret_cast<const block_q6_Kx8*>(w + static_cast<size_t>(g) * gb);
    const auto* w1 = reinterpret_cast<const block_q6_Kx8*>(w + static_cast<size_t>(g + 1) * gb);
    for (int64_t m = 0; m < n_rows; m += kQ6Rows)
      q6_many(nb, w0, w1, a + m * as, as, n_rows - m < kQ6Rows ? n_rows - m : kQ6Rows,
              y + m * ys + kInterleave * g, ys, m == 0);
  }
  if (g < n_groups)
    avx2::gemm_q6_Kx8_q8_K(n, w + static_cast<size_t>(g) * gb, 1, a, as, n_rows, y + kInterleave * g, ys);
}

}  // namespace synapse::quant::avx512
#endif

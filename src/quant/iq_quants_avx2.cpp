// AVX2 dots and multi-row kernels of the lattice formats (IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) against Q8_K activations, in the
// order of iq_quants.cpp's references (one exact integer per block and
// row, then one scalar fma per block): tested bit-equal to them
// (tests/quant/simd_test.cpp, gemm_test.cpp, iq_quants_test.cpp).
//
// Every 32-value chunk of a block becomes its int8 values (grid entries
// gathered from iq_grids.hpp with scalar loads; IQ2/IQ3 signs applied to
// the magnitudes, IQ1 grids as they are) and a vector of its scales as
// int16 words (one per 16 values). Two ways to multiply them, both exact
// integers, so both give the reference's bits:
//   * the dots and the multi-row kernel for a few activation rows (a tile
//     of 1-4 rows per weight row, gemm_tiles.hpp by_tiles): each chunk
//     decoded in registers; IQ2/IQ3 as magnitudes and signs, the signs
//     moved onto the activations: madd(maddubs(|w|, sign(a, s)), scales)
//     (|w| <= 62, |a| <= 127: no pair saturates; exact while no activation
//     is -128, which quantize_row_q8_K never writes), the IQ2_XXS/IQ2_XS/
//     IQ3_XXS signs one table load per 8 values (kSignBytes); IQ1 as
//     madd(maddubs(|a|, sign(w, a)), scales), exact for every byte;
//   * the prefill GEMM (8 activation rows or more): 2 weight rows decoded
//     8 blocks at a time into IqDecoded blocks (iq_decoded.hpp, 13 KiB: in
//     L1), every activation tile of the call run over them (register tiles
//     of 2 weight rows x 4 activation rows, madd(maddubs(a ^ 0x80, w),
//     scales) less the block's precomputed bias, the a + 128 offset), each
//     output's running sum kept between chunks: each weight block is
//     unpacked once for all the call's rows, each activation chunk loaded
//     once for 2 weight rows, and a tile's 8 outputs reduced and stepped
//     together, lane by lane (each lane the scalar fma of its output).
// IQ1_S's shift term comes from Q8_K's bsums (madd with scale x sign),
// IQ1_M's from its +-1 signs per group of 8 as a second set of values.
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "quant/avx2_util.hpp"
#include "quant/formats.hpp"
#include "quant/gemm.hpp"
#include "quant/gemm_tiles.hpp"
#include "quant/iq_decoded.hpp"
#include "quant/iq_grids.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::avx2 {
namespace {

using tiles::act_row;
using tiles::by_tiles;
using tiles::dot_by_tile;
using tiles::weight_row;

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// 32 sign bits (bit k: value k negative) -> bytes 0xFF (negative) or 0x01,
// the operand _mm256_sign_epi8 takes.
inline __m256i sign_bytes(uint32_t bits) {
  const __m256i shuffle = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuffle);
  return _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit), _mm256_set1_epi8(1));
}

// ksigns_iq2xs[i] as 8 bytes, 0xFF where bit k of it is set (value k
// negative), else 0x01: one load per group of 8 instead of expanding bits.
struct SignBytes {
  uint64_t v[128];
};
constexpr SignBytes make_sign_bytes() {
  SignBytes t{};
  for (int i = 0; i < 128; ++i)
    for (int k = 0; k < 8; ++k) t.v[i] |= static_cast<uint64_t>((ksigns_iq2xs[i] >> k) & 1 ? 0xFF : 0x01) << (8 * k);
  return t;
}
constexpr SignBytes kSignBytes = make_sign_bytes();

// The sign operand of 4 groups of 8 from a word of 7-bit ksigns indices
// (IQ2_XXS, IQ3_XXS: bits 7l..7l+6).
inline __m256i ksigns4(uint32_t w) {
  return _mm256_set_epi64x(static_cast<int64_t>(kSignBytes.v[(w >> 21) & 127]),
                           static_cast<int64_t>(kSignBytes.v[(w >> 14) & 127]),
                           static_cast<int64_t>(kSignBytes.v[(w >> 7) & 127]),
                           static_cast<int64_t>(kSignBytes.v[w & 127]));
}

inline __m256i grid4(uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3) {
  return _mm256_set_epi64x(static_cast<int64_t>(g3), static_cast<int64_t>(g2), static_cast<int64_t>(g1),
                           static_cast<int64_t>(g0));
}

// One scale for the 32 values, or one per 16 (low half, high half).
inline __m256i scale32(int ls) { return _mm256_set1_epi16(static_cast<int16_t>(ls)); }
inline __m256i scale16(int ls_lo, int ls_hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(ls_hi)), _mm_set1_epi16(static_cast<int16_t>(ls_lo)));
}

// ---------------------------------------------------------------- formats
// Each: Block, kOut (the factor applied to the sum), kKind (0: one set of
// values; 1: IQ1_S, plus the bsums term; 2: IQ1_M, plus the shift values),
// values(b, c) / scales(b, c) of chunk c, d(b).

enum Kind { kPlain = 0, kIq1s = 1, kIq1m = 2 };

struct IQ2_XXS {
  using Block = block_iq2_xxs;
  static constexpr float kOut = 0.125f;
  static constexpr int kKind = kPlain;
  static __m256i magnitudes(const Block& b, int c) {
    const uint8_t* idx = reinterpret_cast<const uint8_t*>(b.qs + 4 * c);
    return grid4(iq2xxs_grid[idx[0]], iq2xxs_grid[idx[1]], iq2xxs_grid[idx[2]], iq2xxs_grid[idx[3]]);
  }
  static __m256i signs(const Block& b, int c) { return ksigns4(load_u32(b.qs + 4 * c + 2)); }
  static __m256i scales(const Block& b, int c) { return scale32(static_cast<int>(2 * (load_u32(b.qs + 4 * c + 2) >> 28) + 1)); }
  static float d(const Block& b) { return h2f(b.d); }
};

struct IQ2_XS {
  using Block = block_iq2_xs;
  static constexpr float kOut = 0.125f;
  static constexpr int kKind = kPlain;
  static __m256i magnitudes(const Block& b, int c) {
    const uint16_t* q = b.qs + 4 * c;
    return grid4(iq2xs_grid[q[0] & 511], iq2xs_grid[q[1] & 511], iq2xs_grid[q[2] & 511], iq2xs_grid[q[3] & 511]);
  }
  static __m256i signs(const Block& b, int c) {
    const uint16_t* q = b.qs + 4 * c;
    const auto s = [&](int j) { return static_cast<int64_t>(kSignBytes.v[q[j] >> 9]); };
    return _mm256_set_epi64x(s(3), s(2), s(1), s(0));
  }
  static __m256i scales(const Block& b, int c) { return scale16(2 * (b.scales[c] & 0xf) + 1, 2 * (b.scales[c] >> 4) + 1); }
  static float d(const Block& b) { return h2f(b.d); }
};

struct IQ2_S {
  using Block = block_iq2_s;
  static constexpr float kOut = 0.125f;
  static constexpr int kKind = kPlain;
  static __m256i magnitudes(const Block& b, int c) {
    const uint8_t* qs = b.qs + 4 * c;
    const uint32_t qh = b.qh[c];
    return grid4(iq2s_grid[qs[0] | ((qh << 8) & 0x300)], iq2s_grid[qs[1] | ((qh << 6) & 0x300)],
                 iq2s_grid[qs[2] | ((qh << 4) & 0x300)], iq2s_grid[qs[3] | ((qh << 2) & 0x300)]);
  }
  static __m256i signs(const Block& b, int c) { return sign_bytes(load_u32(b.qs + QK_K / 8 + 4 * c)); }
  static __m256i scales(const Block& b, int c) { return scale16(2 * (b.scales[c] & 0xf) + 1, 2 * (b.scales[c] >> 4) + 1); }
  static float d(const Block& b) { return h2f(b.d); }
};

struct IQ3_XXS {
  using Block = block_iq3_xxs;
  static constexpr float kOut = 0.25f;
  static constexpr int kKind = kPlain;
  static __m256i magnitudes(const Block& b, int c) {
    const uint8_t* q3 = b.qs + 8 * c;
    return _mm256_setr_epi32(
        static_cast<int>(iq3xxs_grid[q3[0]]), static_cast<int>(iq3xxs_grid[q3[1]]),
        static_cast<int>(iq3xxs_grid[q3[2]]), static_cast<int>(iq3xxs_grid[q3[3]]),
        static_cast<int>(iq3xxs_grid[q3[4]]), static_cast<int>(iq3xxs_grid[q3[5]]),
        static_cast<int>(iq3xxs_grid[q3[6]]), static_cast<int>(iq3xxs_grid[q3[7]]));
  }
  static __m256i signs(const Block& b, int c) { return ksigns4(load_u32(b.qs + QK_K / 4 + 4 * c)); }
  static __m256i scales(const Block& b, int c) {
    return scale32(static_cast<int>(2 * (load_u32(b.qs + QK_K / 4 + 4 * c) >> 28) + 1));
  }
  static float d(const Block& b) { return h2f(b.d); }
};

struct IQ3_S {
  using Block = block_iq3_s;
  static constexpr float kOut = 1.0f;
  static constexpr int kKind = kPlain;
  static __m256i magnitudes(const Block& b, int c) {
    const uint8_t* qs = b.qs + 8 * c;
    const uint32_t qh = b.qh[c];
    const auto g = [&](int k) { return static_cast<int>(iq3s_grid[qs[k] | ((qh << (8 - k)) & 256)]); };
    return _mm256_setr_epi32(g(0), g(1), g(2), g(3), g(4), g(5), g(6), g(7));
  }
  static __m256i signs(const Block& b, int c) { return sign_bytes(load_u32(b.signs + 4 * c)); }
  static __m256i scales(const Block& b, int c) { return scale32(2 * ((b.scales[c / 2] >> 4 * (c % 2)) & 0xf) + 1); }
  static float d(const Block& b) { return h2f(b.d); }
};

struct IQ1_S {
  using Block = block_iq1_s;
  static constexpr float kOut = 1.0f;
  static constexpr int kKind = kIq1s;
  static __m256i values(const Block& b, int c) {
    const uint32_t qh = b.qh[c];
    const uint8_t* qs = b.qs + 4 * c;
    return grid4(iq1s_grid[qs[0] | ((qh << 8) & 0x700)], iq1s_grid[qs[1] | ((qh << 5) & 0x700)],
                 iq1s_grid[qs[2] | ((qh << 2) & 0x700)], iq1s_grid[qs[3] | ((qh >> 1) & 0x700)]);
  }
  static __m256i scales(const Block& b, int c) { return scale32(2 * ((b.qh[c] >> 12) & 7) + 1); }
  // Words 2c, 2c + 1: the scale of sub-block c times its shift sign (the
  // factors of bsums[2c], bsums[2c + 1]).
  static __m256i coef(const Block& b) {
    alignas(32) int16_t k[16];
    for (int c = 0; c < QK_K / 32; ++c) {
      const int ls = 2 * ((b.qh[c] >> 12) & 7) + 1;
      k[2 * c] = k[2 * c + 1] = static_cast<int16_t>(b.qh[c] & 0x8000 ? -ls : ls);
    }
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(k));
  }
  static float d(const Block& b) { return h2f(b.d); }
};

struct IQ1_M {
  using Block = block_iq1_m;
  static constexpr float kOut = 1.0f;
  static constexpr int kKind = kIq1m;
  static __m256i values(const Block& b, int c) {
    const uint8_t* qs = b.qs + 4 * c;
    const uint32_t qh0 = b.qh[2 * c], qh1 = b.qh[2 * c + 1];
    return grid4(iq1s_grid[qs[0] | ((qh0 << 8) & 0x700)], iq1s_grid[qs[1] | ((qh0 << 4) & 0x700)],
                 iq1s_grid[qs[2] | ((qh1 << 8) & 0x700)], iq1s_grid[qs[3] | ((qh1 << 4) & 0x700)]);
  }
  // +1 / -1 per group of 8 (the shift's sign).
  static __m256i shifts(const Block& b, int c) {
    const uint32_t qh0 = b.qh[2 * c], qh1 = b.qh[2 * c + 1];
    const auto s = [](uint32_t bit) { return static_cast<int64_t>(bit ? 0xFFFFFFFFFFFFFFFF : 0x0101010101010101); };
    return _mm256_set_epi64x(s(qh1 & 0x80), s(qh1 & 0x08), s(qh0 & 0x80), s(qh0 & 0x08));
  }
  static __m256i scales(const Block& b, int c) {
    const int w = load_u16(b.scales + 2 * (c / 2)) >> (6 * (c % 2));
    return scale16(2 * (w & 7) + 1, 2 * ((w >> 3) & 7) + 1);
  }
  static float d(const Block& b) {
    uint16_t sc[4];
    std::memcpy(sc, b.scales, sizeof sc);
    return h2f(static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                     (sc[3] & 0xf000)));
  }
  static uint16_t load_u16(const void* p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
};

// The signed int8 values of chunk c: the magnitudes with their signs (plain
// kinds), or the IQ1 grids as they are.
template <typename F>
inline __m256i values(const typename F::Block& b, int c) {
  if constexpr (F::kKind == kPlain) {
    return _mm256_sign_epi8(F::magnitudes(b, c), F::signs(b, c));
  } else {
    return F::values(b, c);
  }
}

// The reference's float step for one block of one (weight, activation)
// row pair: d = fp16(w.d) * a.d, sum the exact integer (sum2 the second
// one: IQ1_S's bsums term, IQ1_M's shift term, scaled by 1/8).
template <int K>
inline float block_step(float sumf, float d, int32_t sum, int32_t sum2) {
  if constexpr (K == kPlain) {
    return std::fma(d, static_cast<float>(sum), sumf);
  } else {
    return std::fma(d, std::fma(0.125f, static_cast<float>(sum2), static_cast<float>(sum)), sumf);
  }
}

// ---------------------------------------------------------------- few rows
// One weight row against T activation rows. Plain kinds: the weights'
// signs moved onto the activations, madd(maddubs(|w|, sign(a, s)), sc):
// exact while a != -128, which quantize_row_q8_K never writes (its values
// lie in [-127, 127]; ggml's own AVX2 dots rely on the same). IQ1 kinds:
// maddubs(|a|, sign(w, a)), exact for every byte.
inline __m256i signed_lanes(__m256i w, __m256i av, __m256i sc) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(av), _mm256_sign_epi8(w, av)), sc);
}

template <typename F>
struct FewRows {
  template <int T>
  void run(int64_t nb, const typename F::Block* x, const uint8_t* a, size_t as, float* y, size_t ys) {
    float sumf[T];
    for (int m = 0; m < T; ++m) sumf[m] = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
      __m256i acc[T], acc2[T];
      for (int m = 0; m < T; ++m) acc[m] = acc2[m] = _mm256_setzero_si256();
      for (int c = 0; c < QK_K / 32; ++c) {
        if constexpr (F::kKind == kPlain) {
          const __m256i q = F::magnitudes(x[i], c), s = F::signs(x[i], c), sc = F::scales(x[i], c);
          for (int m = 0; m < T; ++m) {
            const __m256i av = _mm256_sign_epi8(load32(act_row<block_q8_K>(a, as, m)[i].qs + 32 * c), s);
            acc[m] = _mm256_add_epi32(acc[m], _mm256_madd_epi16(_mm256_maddubs_epi16(q, av), sc));
          }
        } else {
          const __m256i w = F::values(x[i], c), sc = F::scales(x[i], c);
          [[maybe_unused]] __m256i w2;
          if constexpr (F::kKind == kIq1m) w2 = F::shifts(x[i], c);
          for (int m = 0; m < T; ++m) {
            const __m256i av = load32(act_row<block_q8_K>(a, as, m)[i].qs + 32 * c);
            acc[m] = _mm256_add_epi32(acc[m], signed_lanes(w, av, sc));
            if constexpr (F::kKind == kIq1m) acc2[m] = _mm256_add_epi32(acc2[m], signed_lanes(w2, av, sc));
          }
        }
      }
      const float dw = F::d(x[i]);
      [[maybe_unused]] __m256i coef;
      if constexpr (F::kKind == kIq1s) coef = F::coef(x[i]);
      for (int m = 0; m < T; ++m) {
        const block_q8_K& ab = act_row<block_q8_K>(a, as, m)[i];
        int32_t sum2 = 0;
        if constexpr (F::kKind == kIq1s) sum2 = hsum_i32_8(_mm256_madd_epi16(load32(ab.bsums), coef));
        if constexpr (F::kKind == kIq1m) sum2 = hsum_i32_8(acc2[m]);
        sumf[m] = block_step<F::kKind>(sumf[m], dw * ab.d, hsum_i32_8(acc[m]), sum2);
      }
    }
    for (int m = 0; m < T; ++m) y[m * ys] = F::kOut * sumf[m];
  }
};

// ---------------------------------------------------------------- many rows
// Decodes nb blocks of a weight row into IqDecoded blocks.
template <typename F>
void decode_row(const typename F::Block* x, int64_t nb, IqDecoded* out) {
  const __m256i k128 = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t i = 0; i < nb; ++i) {
    IqDecoded& o = out[i];
    __m256i bias = _mm256_setzero_si256(), bias2 = _mm256_setzero_si256();
    for (int c = 0; c < QK_K / 32; ++c) {
      const __m256i w = values<F>(x[i], c), sc = F::scales(x[i], c);
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.w + 32 * c), w);
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.sc[c]), sc);
      bias = _mm256_add_epi32(bias, _mm256_madd_epi16(_mm256_maddubs_epi16(k128, w), sc));
      if constexpr (F::kKind == kIq1m) {
        const __m256i w2 = F::shifts(x[i], c);
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.w2 + 32 * c), w2);
        bias2 = _mm256_add_epi32(bias2, _mm256_madd_epi16(_mm256_maddubs_epi16(k128, w2), sc));
      }
    }
    if constexpr (F::kKind == kIq1s) _mm256_store_si256(reinterpret_cast<__m256i*>(o.coef), F::coef(x[i]));
    o.bias = hsum_i32_8(bias);
    o.bias2 = hsum_i32_8(bias2);
    o.d = F::d(x[i]);
  }
}

// Lane p of the result = the sum of the 8 lanes of v[p] (exact int32).
inline __m256i sums8(const __m256i* v) {
  const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i h0123 = _mm256_hadd_epi32(h01, h23), h4567 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20), _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

// R decoded weight rows (dec + r * kb: their blocks [0, kb)) against A
// activation rows (plain Q8_K rows, their blocks from b0): per chunk each
// activation's bytes + 128 once, madd(maddubs(a', w), sc) for every (r, m);
// per block the 8 outputs' exact sums (less the bias) side by side in one
// register (lane r * A + m) and the reference's float step lane by lane
// into sumf, each output's running sum.
template <int K, int R, int A>
void decoded_tile(int64_t kb, const IqDecoded* dec, const uint8_t* a, size_t as, int64_t b0, __m256& sumf) {
  static_assert(R * A <= 8, "one lane per output");
  const __m256i k128 = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t i = 0; i < kb; ++i) {
    __m256i acc[R][A], acc2[R][A];
    for (int r = 0; r < R; ++r)
      for (int m = 0; m < A; ++m) acc[r][m] = acc2[r][m] = _mm256_setzero_si256();
    const block_q8_K* ab[A];
    for (int m = 0; m < A; ++m) ab[m] = act_row<block_q8_K>(a, as, m) + b0 + i;
    for (int c = 0; c < QK_K / 32; ++c) {
      __m256i av[A];
      for (int m = 0; m < A; ++m) av[m] = _mm256_xor_si256(load32(ab[m]->qs + 32 * c), k128);
      for (int r = 0; r < R; ++r) {
        const IqDecoded& o = dec[r * kb + i];
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(o.w + 32 * c));
        const __m256i sc = _mm256_load_si256(reinterpret_cast<const __m256i*>(o.sc[c]));
        for (int m = 0; m < A; ++m)
          acc[r][m] = _mm256_add_epi32(acc[r][m], _mm256_madd_epi16(_mm256_maddubs_epi16(av[m], w), sc));
        if constexpr (K == kIq1m) {
          const __m256i w2 = _mm256_load_si256(reinterpret_cast<const __m256i*>(o.w2 + 32 * c));
          for (int m = 0; m < A; ++m)
            acc2[r][m] = _mm256_add_epi32(acc2[r][m], _mm256_madd_epi16(_mm256_maddubs_epi16(av[m], w2), sc));
        }
      }
    }
    __m256i f[8], f2[8];
    alignas(32) int32_t bias[8] = {}, bias2[8] = {};
    alignas(32) float dw[8] = {}, da[8] = {};
    for (int p = 0; p < 8; ++p) f[p] = f2[p] = _mm256_setzero_si256();
    for (int r = 0; r < R; ++r) {
      const IqDecoded& o = dec[r * kb + i];
      for (int m = 0; m < A; ++m) {
        const int p = r * A + m;
        f[p] = acc[r][m];
        if constexpr (K == kIq1m) f2[p] = acc2[r][m];
        if constexpr (K == kIq1s) {
          f2[p] = _mm256_madd_epi16(load32(ab[m]->bsums), _mm256_load_si256(reinterpret_cast<const __m256i*>(o.coef)));
        }
        bias[p] = o.bias;
        bias2[p] = o.bias2;
        dw[p] = o.d;
        da[p] = ab[m]->d;
      }
    }
    const __m256 d = _mm256_mul_ps(_mm256_load_ps(dw), _mm256_load_ps(da));  // fp16(w.d) * a.d, lane by lane
    const __m256 sum = _mm256_cvtepi32_ps(
        _mm256_sub_epi32(sums8(f), _mm256_load_si256(reinterpret_cast<const __m256i*>(bias))));
    if constexpr (K == kPlain) {
      sumf = _mm256_fmadd_ps(d, sum, sumf);
    } else {
      __m256i s2 = sums8(f2);
      if constexpr (K == kIq1m) s2 = _mm256_sub_epi32(s2, _mm256_load_si256(reinterpret_cast<const __m256i*>(bias2)));
      const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(0.125f), _mm256_cvtepi32_ps(s2), sum);
      sumf = _mm256_fmadd_ps(d, inner, sumf);
    }
  }
}

// Every tile of 4 activation rows (the last one smaller) over the decoded
// blocks; sums: 8 floats a tile, their running sums.
template <int K, int R>
void decoded_tiles(int64_t kb, const IqDecoded* dec, const uint8_t* a, size_t as, int64_t n_rows, int64_t b0,
                   float* sums) {
  int64_t m = 0, t = 0;
  for (; m + 4 <= n_rows; m += 4, ++t) {
    __m256 s = _mm256_load_ps(sums + 8 * t);
    decoded_tile<K, R, 4>(kb, dec, a + m * as, as, b0, s);
    _mm256_store_ps(sums + 8 * t, s);
  }
  if (m == n_rows) return;
  __m256 s = _mm256_load_ps(sums + 8 * t);
  switch (n_rows - m) {
    case 3: decoded_tile<K, R, 3>(kb, dec, a + m * as, as, b0, s); break;
    case 2: decoded_tile<K, R, 2>(kb, dec, a + m * as, as, b0, s); break;
    default: decoded_tile<K, R, 1>(kb, dec, a + m * as, as, b0, s); break;
  }
  _mm256_store_ps(sums + 8 * t, s);
}

// From this many activation rows on, the weight rows are decoded once per
// call (below: each tile of 4 rows unpacks its blocks again).
constexpr int64_t kDecodeRows = 8;
constexpr int64_t kChunk = 8;  // blocks decoded at a time (2 rows: 13 KiB, in L1)

template <typename F>
void gemm_of(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
             float* y, size_t ys) {
  using B = typename F::Block;
  const int64_t nb = n / QK_K;
  if (n_rows < kDecodeRows) {
    by_tiles<FewRows<F>, B>(FewRows<F>{}, nb, w, ws, n_w, a, as, n_rows, y, ys);
    return;
  }
  // IQ1_M's two sets of values take twice the accumulators: one weight row a tile.
  constexpr int R = F::kKind == kIq1m ? 1 : 2;
  const int64_t n_tiles = (n_rows + 3) / 4;
  const size_t dec_bytes = static_cast<size_t>(R * kChunk) * sizeof(IqDecoded);
  auto* base = static_cast<uint8_t*>(thread_scratch(dec_bytes + static_cast<size_t>(n_tiles) * 32));
  auto* dec = reinterpret_cast<IqDecoded*>(base);
  auto* sums = reinterpret_cast<float*>(base + dec_bytes);
  for (int64_t r0 = 0; r0 < n_w; r0 += R) {
    const int rr = static_cast<int>(std::min<int64_t>(R, n_w - r0));
    std::memset(sums, 0, static_cast<size_t>(n_tiles) * 32);
    for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
      const int64_t kb = std::min(kChunk, nb - b0);
      for (int r = 0; r < rr; ++r) decode_row<F>(weight_row<B>(w, ws, static_cast<int>(r0 + r)) + b0, kb, dec + r * kb);
      if (rr == R) {
        decoded_tiles<F::kKind, R>(kb, dec, a, as, n_rows, b0, sums);
      } else {
        decoded_tiles<F::kKind, 1>(kb, dec, a, as, n_rows, b0, sums);
      }
    }
    // Lane r * A + m of tile t: weight row r0 + r, activation row 4t + m.
    for (int64_t m = 0; m < n_rows; ++m) {
      const int64_t t = m / 4, A = std::min<int64_t>(4, n_rows - 4 * t);
      for (int r = 0; r < rr; ++r) y[m * static_cast<int64_t>(ys) + r0 + r] = F::kOut * sums[8 * t + r * A + m % 4];
    }
  }
}

}  // namespace

#define SYNAPSE_IQ_KERNELS(t, F)                                                                                 \
  float vec_dot_##t##_q8_K(int64_t n, const void* vw, const void* va) {                                         \
    return dot_by_tile<FewRows<F>, block_##t>(n / QK_K, vw, va);                                                 \
  }                                                                                                              \
  void gemm_##t##_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,       \
                       int64_t n_rows, float* y, size_t ys) {                                                   \
    gemm_of<F>(n, w, ws, n_w, a, as, n_rows, y, ys);                                                             \
  }                                                                                                              \
  void decode_##t##_rows(const uint8_t* w, size_t ws, int64_t n_w, int64_t nb, IqDecoded* out) {               \
    for (int64_t r = 0; r < n_w; ++r) decode_row<F>(weight_row<block_##t>(w, ws, static_cast<int>(r)), nb, out + r * nb); \
  }

SYNAPSE_IQ_KERNELS(iq2_xxs, IQ2_XXS)
SYNAPSE_IQ_KERNELS(iq2_xs, IQ2_XS)
SYNAPSE_IQ_KERNELS(iq2_s, IQ2_S)
SYNAPSE_IQ_KERNELS(iq3_xxs, IQ3_XXS)
SYNAPSE_IQ_KERNELS(iq3_s, IQ3_S)
SYNAPSE_IQ_KERNELS(iq1_s, IQ1_S)
SYNAPSE_IQ_KERNELS(iq1_m, IQ1_M)

#undef SYNAPSE_IQ_KERNELS

}  // namespace synapse::quant::avx2
#endif

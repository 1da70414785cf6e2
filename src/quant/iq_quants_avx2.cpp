// AVX2 dots and multi-row kernels of the lattice formats (IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) against Q8_K activations, in the
// order of iq_quants.cpp's references (one exact integer per block and
// row, then one scalar fma per block): tested bit-equal to them
// (tests/quant/simd_test.cpp, gemm_test.cpp, iq_quants_test.cpp).
//
// Each kernel is a tile (gemm_tiles.hpp): one weight row against T
// activation rows, each weight block's 32-value chunks unpacked once (grid
// entries gathered from iq_grids.hpp with scalar loads, signs expanded to
// bytes) for the T rows. Per chunk and row:
//   IQ2/IQ3  madd(maddubs(|grid|, sign(a, s)), scales): grid bytes <= 62,
//            so no maddubs pair saturates (2 * 62 * 128 < 32768); sign is
//            _mm256_sign_epi8, which leaves a negated -128 at -128, the
//            reference's definition.
//   IQ1      grid + 1 (0..2) against a, less the pair sums of a
//            (maddubs(1, a)): the exact products of the int8 grid; IQ1_M's
//            shift term takes the same pair sums, signed as int16.
// Integer lanes add up exactly, so their order is free; the block's sum
// and the float step are the reference's.
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "quant/avx2_util.hpp"
#include "quant/formats.hpp"
#include "quant/gemm.hpp"
#include "quant/gemm_tiles.hpp"
#include "quant/iq_grids.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::avx2 {
namespace {

using tiles::act_row;
using tiles::by_tiles;
using tiles::dot_by_tile;

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

// The 4 ksigns_iq2xs bytes of a word of 7-bit sign indices (IQ2_XXS,
// IQ3_XXS: bits 7l..7l+6), as 32 sign bits.
inline uint32_t ksigns4(uint32_t w) {
  return ksigns_iq2xs[w & 127] | static_cast<uint32_t>(ksigns_iq2xs[(w >> 7) & 127]) << 8 |
         static_cast<uint32_t>(ksigns_iq2xs[(w >> 14) & 127]) << 16 |
         static_cast<uint32_t>(ksigns_iq2xs[(w >> 21) & 127]) << 24;
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

// One 32-value chunk of an IQ2/IQ3 block: magnitudes, signs, scale words.
struct Chunk {
  __m256i q, s, sc;
};

struct IQ2_XXS {
  using Block = block_iq2_xxs;
  static constexpr float kOut = 0.125f;
  static Chunk chunk(const Block& b, int ib32) {
    const uint32_t idx = load_u32(b.qs + 4 * ib32), sgn = load_u32(b.qs + 4 * ib32 + 2);
    return {grid4(iq2xxs_grid[idx & 255], iq2xxs_grid[(idx >> 8) & 255], iq2xxs_grid[(idx >> 16) & 255],
                  iq2xxs_grid[idx >> 24]),
            sign_bytes(ksigns4(sgn)), scale32(static_cast<int>(2 * (sgn >> 28) + 1))};
  }
};

struct IQ2_XS {
  using Block = block_iq2_xs;
  static constexpr float kOut = 0.125f;
  static Chunk chunk(const Block& b, int ib32) {
    const uint16_t* q = b.qs + 4 * ib32;
    const uint32_t signs = ksigns_iq2xs[q[0] >> 9] | static_cast<uint32_t>(ksigns_iq2xs[q[1] >> 9]) << 8 |
                           static_cast<uint32_t>(ksigns_iq2xs[q[2] >> 9]) << 16 |
                           static_cast<uint32_t>(ksigns_iq2xs[q[3] >> 9]) << 24;
    return {grid4(iq2xs_grid[q[0] & 511], iq2xs_grid[q[1] & 511], iq2xs_grid[q[2] & 511], iq2xs_grid[q[3] & 511]),
            sign_bytes(signs), scale16(2 * (b.scales[ib32] & 0xf) + 1, 2 * (b.scales[ib32] >> 4) + 1)};
  }
};

struct IQ2_S {
  using Block = block_iq2_s;
  static constexpr float kOut = 0.125f;
  static Chunk chunk(const Block& b, int ib32) {
    const uint8_t* qs = b.qs + 4 * ib32;
    const uint32_t qh = b.qh[ib32];
    return {grid4(iq2s_grid[qs[0] | ((qh << 8) & 0x300)], iq2s_grid[qs[1] | ((qh << 6) & 0x300)],
                  iq2s_grid[qs[2] | ((qh << 4) & 0x300)], iq2s_grid[qs[3] | ((qh << 2) & 0x300)]),
            sign_bytes(load_u32(b.qs + QK_K / 8 + 4 * ib32)),
            scale16(2 * (b.scales[ib32] & 0xf) + 1, 2 * (b.scales[ib32] >> 4) + 1)};
  }
};

struct IQ3_XXS {
  using Block = block_iq3_xxs;
  static constexpr float kOut = 0.25f;
  static Chunk chunk(const Block& b, int ib32) {
    const uint8_t* q3 = b.qs + 8 * ib32;
    const uint32_t sgn = load_u32(b.qs + QK_K / 4 + 4 * ib32);
    const __m256i q = _mm256_setr_epi32(
        static_cast<int>(iq3xxs_grid[q3[0]]), static_cast<int>(iq3xxs_grid[q3[1]]),
        static_cast<int>(iq3xxs_grid[q3[2]]), static_cast<int>(iq3xxs_grid[q3[3]]),
        static_cast<int>(iq3xxs_grid[q3[4]]), static_cast<int>(iq3xxs_grid[q3[5]]),
        static_cast<int>(iq3xxs_grid[q3[6]]), static_cast<int>(iq3xxs_grid[q3[7]]));
    return {q, sign_bytes(ksigns4(sgn)), scale32(static_cast<int>(2 * (sgn >> 28) + 1))};
  }
};

struct IQ3_S {
  using Block = block_iq3_s;
  static constexpr float kOut = 1.0f;
  static Chunk chunk(const Block& b, int ib32) {
    const uint8_t* qs = b.qs + 8 * ib32;
    const uint32_t qh = b.qh[ib32];
    const auto g = [&](int k) { return static_cast<int>(iq3s_grid[qs[k] | ((qh << (8 - k)) & 256)]); };
    const __m256i q = _mm256_setr_epi32(g(0), g(1), g(2), g(3), g(4), g(5), g(6), g(7));
    return {q, sign_bytes(load_u32(b.signs + 4 * ib32)),
            scale32(2 * ((b.scales[ib32 / 2] >> 4 * (ib32 % 2)) & 0xf) + 1)};
  }
};

// IQ2/IQ3: per block and row the exact sum of madd(maddubs(q, sign(a, s)),
// sc) over the 8 chunks, then sumf = fma(fp16(d) * a.d, sum, sumf); the
// result kOut * sumf.
template <typename F>
struct SignedGridTile {
  template <int T>
  void run(int64_t nb, const typename F::Block* x, const uint8_t* a, size_t as, float* y, size_t ys) {
    float sumf[T];
    for (int m = 0; m < T; ++m) sumf[m] = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
      __m256i acc[T];
      for (int m = 0; m < T; ++m) acc[m] = _mm256_setzero_si256();
      for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
        const Chunk c = F::chunk(x[i], ib32);
        for (int m = 0; m < T; ++m) {
          const __m256i av = load32(act_row<block_q8_K>(a, as, m)[i].qs + 32 * ib32);
          const __m256i p = _mm256_maddubs_epi16(c.q, _mm256_sign_epi8(av, c.s));
          acc[m] = _mm256_add_epi32(acc[m], _mm256_madd_epi16(p, c.sc));
        }
      }
      const float dw = h2f(x[i].d);
      for (int m = 0; m < T; ++m) {
        const float d = dw * act_row<block_q8_K>(a, as, m)[i].d;
        sumf[m] = std::fma(d, static_cast<float>(hsum_i32_8(acc[m])), sumf[m]);
      }
    }
    for (int m = 0; m < T; ++m) y[m * ys] = F::kOut * sumf[m];
  }
};

// ---------------------------------------------------------------- IQ1

// The exact products of int8 grid bytes g (-1..1) with a, pairwise as
// int16: maddubs(g + 1, a) - ones_a, ones_a = maddubs(1, a).
inline __m256i iq1_products(__m256i g, __m256i av, __m256i ones_a) {
  return _mm256_sub_epi16(_mm256_maddubs_epi16(_mm256_add_epi8(g, _mm256_set1_epi8(1)), av), ones_a);
}

// IQ1_S: sumi = sum ls * (grid . a) (lanes), sumi1 = sum ls * delta *
// (bsums pair) (madd of the 16 bsums with each pair's ls * delta), then
// fma(fp16(d) * a.d, fma(1/8, sumi1, sumi), sumf).
struct IQ1_STile {
  template <int T>
  void run(int64_t nb, const block_iq1_s* x, const uint8_t* a, size_t as, float* y, size_t ys) {
    const __m256i ones = _mm256_set1_epi8(1);
    float sumf[T];
    for (int m = 0; m < T; ++m) sumf[m] = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
      __m256i acc[T];
      for (int m = 0; m < T; ++m) acc[m] = _mm256_setzero_si256();
      alignas(32) int16_t coef[16];
      for (int ib = 0; ib < QK_K / 32; ++ib) {
        const uint16_t qh = x[i].qh[ib];
        const uint8_t* qs = x[i].qs + 4 * ib;
        const int ls = 2 * ((qh >> 12) & 7) + 1;
        coef[2 * ib] = coef[2 * ib + 1] = static_cast<int16_t>(qh & 0x8000 ? -ls : ls);
        const __m256i g = grid4(iq1s_grid[qs[0] | ((qh << 8) & 0x700)], iq1s_grid[qs[1] | ((qh << 5) & 0x700)],
                                iq1s_grid[qs[2] | ((qh << 2) & 0x700)], iq1s_grid[qs[3] | ((qh >> 1) & 0x700)]);
        const __m256i sc = scale32(ls);
        for (int m = 0; m < T; ++m) {
          const __m256i av = load32(act_row<block_q8_K>(a, as, m)[i].qs + 32 * ib);
          const __m256i p = iq1_products(g, av, _mm256_maddubs_epi16(ones, av));
          acc[m] = _mm256_add_epi32(acc[m], _mm256_madd_epi16(p, sc));
        }
      }
      const __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(coef));
      const float dw = h2f(x[i].d);
      for (int m = 0; m < T; ++m) {
        const block_q8_K& ab = act_row<block_q8_K>(a, as, m)[i];
        const int sumi1 = hsum_i32_8(_mm256_madd_epi16(load32(ab.bsums), c));
        const float d = dw * ab.d;
        sumf[m] = std::fma(d, std::fma(kIq1sDelta, static_cast<float>(sumi1), static_cast<float>(hsum_i32_8(acc[m]))),
                           sumf[m]);
      }
    }
    for (int m = 0; m < T; ++m) y[m * ys] = sumf[m];
  }
};

// IQ1_M: per 16 values scale ls (words: low half ls1, high half ls2);
// sumi1 lanes madd(grid products, ls), sumi2 lanes madd(sign(ones_a,
// delta), ls) with delta per group of 8 (4 words).
struct IQ1_MTile {
  template <int T>
  void run(int64_t nb, const block_iq1_m* x, const uint8_t* a, size_t as, float* y, size_t ys) {
    const __m256i ones = _mm256_set1_epi8(1);
    float sumf[T];
    for (int m = 0; m < T; ++m) sumf[m] = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
      __m256i acc1[T], acc2[T];
      for (int m = 0; m < T; ++m) acc1[m] = acc2[m] = _mm256_setzero_si256();
      uint16_t sc[4];
      std::memcpy(sc, x[i].scales, sizeof sc);
      for (int ib = 0; ib < QK_K / 32; ++ib) {
        const uint8_t* qs = x[i].qs + 4 * ib;
        const uint32_t qh0 = x[i].qh[2 * ib], qh1 = x[i].qh[2 * ib + 1];
        const __m256i g = grid4(iq1s_grid[qs[0] | ((qh0 << 8) & 0x700)], iq1s_grid[qs[1] | ((qh0 << 4) & 0x700)],
                                iq1s_grid[qs[2] | ((qh1 << 8) & 0x700)], iq1s_grid[qs[3] | ((qh1 << 4) & 0x700)]);
        const int w = sc[ib / 2] >> (6 * (ib % 2));
        const __m256i ls = scale16(2 * (w & 7) + 1, 2 * ((w >> 3) & 7) + 1);
        const auto dsign = [](uint32_t bit) { return static_cast<int64_t>(bit ? 0xFFFFFFFFFFFFFFFF : 0x0001000100010001); };
        const __m256i delta = _mm256_set_epi64x(dsign(qh1 & 0x80), dsign(qh1 & 0x08), dsign(qh0 & 0x80), dsign(qh0 & 0x08));
        for (int m = 0; m < T; ++m) {
          const __m256i av = load32(act_row<block_q8_K>(a, as, m)[i].qs + 32 * ib);
          const __m256i ones_a = _mm256_maddubs_epi16(ones, av);
          acc1[m] = _mm256_add_epi32(acc1[m], _mm256_madd_epi16(iq1_products(g, av, ones_a), ls));
          acc2[m] = _mm256_add_epi32(acc2[m], _mm256_madd_epi16(_mm256_sign_epi16(ones_a, delta), ls));
        }
      }
      const uint16_t h = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                               (sc[3] & 0xf000));
      const float dw = h2f(h);
      for (int m = 0; m < T; ++m) {
        const float d = dw * act_row<block_q8_K>(a, as, m)[i].d;
        const float inner = std::fma(kIq1mDelta, static_cast<float>(hsum_i32_8(acc2[m])),
                                     static_cast<float>(hsum_i32_8(acc1[m])));
        sumf[m] = std::fma(d, inner, sumf[m]);
      }
    }
    for (int m = 0; m < T; ++m) y[m * ys] = sumf[m];
  }
};

template <typename Tile, typename B>
void gemm_of(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
             float* y, size_t ys) {
  by_tiles<Tile, B>(Tile{}, n / QK_K, w, ws, n_w, a, as, n_rows, y, ys);
}

}  // namespace

#define SYNAPSE_IQ_KERNELS(t, Tile)                                                                              \
  float vec_dot_##t##_q8_K(int64_t n, const void* vw, const void* va) {                                         \
    return dot_by_tile<Tile, block_##t>(n / QK_K, vw, va);                                                       \
  }                                                                                                              \
  void gemm_##t##_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,       \
                       int64_t n_rows, float* y, size_t ys) {                                                   \
    gemm_of<Tile, block_##t>(n, w, ws, n_w, a, as, n_rows, y, ys);                                             \
  }

SYNAPSE_IQ_KERNELS(iq2_xxs, SignedGridTile<IQ2_XXS>)
SYNAPSE_IQ_KERNELS(iq2_xs, SignedGridTile<IQ2_XS>)
SYNAPSE_IQ_KERNELS(iq2_s, SignedGridTile<IQ2_S>)
SYNAPSE_IQ_KERNELS(iq3_xxs, SignedGridTile<IQ3_XXS>)
SYNAPSE_IQ_KERNELS(iq3_s, SignedGridTile<IQ3_S>)
SYNAPSE_IQ_KERNELS(iq1_s, IQ1_STile)
SYNAPSE_IQ_KERNELS(iq1_m, IQ1_MTile)

#undef SYNAPSE_IQ_KERNELS

}  // namespace synapse::quant::avx2
#endif

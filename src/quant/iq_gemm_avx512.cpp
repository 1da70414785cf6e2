// AVX-512 VNNI prefill GEMMs of the lattice formats (IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M): the AVX2 decoder
// (iq_quants_avx2.cpp, decode_<t>_rows) turns a few weight rows' blocks into
// int8 values, scale words and a bias (iq_decoded.hpp), and register tiles
// of 4 weight rows x 4 activation rows (IQ1_M, with its second set of
// values: 2 x 4) multiply them with the activations + 128:
// vpdpwssd(acc, vpmaddubsw(a ^ 0x80, w), scales), 64 values a step (pairs
// at most 2 * 255 * 62 < 32768: exact). Per block each output's exact sum
// less the bias, then the reference's float step (iq_quants.cpp): the 16
// outputs of a tile reduced and stepped together, lane by lane, each lane
// doing exactly the scalar fma of its output. Same bits as the scalar and
// AVX2 kernels (tests/quant/gemm_test.cpp, iq_quants_test.cpp).
//
// Blocks are decoded kChunk at a time for a group of weight rows (a few KiB,
// in L1), and every activation tile of the call runs over them before the
// next chunk: each output's blocks still go in order, its running sum kept
// between chunks.
//
// Fewer than 8 activation rows (decode), and the dots: IQ2/IQ3 blocks read
// in place, 64 values a step, the signs applied to the activations under a
// mask (FewRows below); IQ1_S and IQ1_M take the AVX2 kernel.
//
// No STL and no inline function of a shared header with external linkage
// here (LAYERS.md); scratch from quant::thread_scratch.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized and -Wuninitialized report as read uninitialized
// (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/formats.hpp"
#include "quant/gemm.hpp"
#include "quant/gemm_tiles.hpp"
#include "quant/iq_decoded.hpp"
#include "quant/iq_grids.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::avx512 {
namespace {

namespace tiles = avx2::tiles;  // the row tiling of the AVX2 kernels (internal linkage, this file's flags)

enum Kind { kPlain = 0, kIq1s = 1, kIq1m = 2 };

constexpr int64_t kDecodeRows = 8;  // as the AVX2 kernels: fewer rows take their few-rows tiles
constexpr int64_t kChunk = 4;       // blocks decoded at a time (4 rows: 13 KiB)

inline __m256i fold(__m512i v) { return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)); }

// Lane p of the result = the sum of the 8 lanes of v[p] (exact int32).
inline __m256i sums8(const __m256i* v) {
  const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i h0123 = _mm256_hadd_epi32(h01, h23), h4567 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20), _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

// Lane p (< 16) = the sum of v[p]'s 8 lanes.
inline __m512i sums16(const __m256i* v) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(sums8(v)), sums8(v + 8), 1);
}

// R decoded weight rows (dec + r * kb: their blocks [0, kb)) against A
// activation rows (a: plain Q8_K rows, their blocks from b0): output (r, m)
// is lane r * A + m of sumf, its running sum over the blocks so far.
template <int K, int R, int A>
void tile(int64_t kb, const IqDecoded* dec, const uint8_t* a, size_t as, int64_t b0, __m512& sumf) {
  static_assert(R * A <= 16, "one lane per output");
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t i = 0; i < kb; ++i) {
    __m512i acc[R][A], acc2[R][A];
    for (int r = 0; r < R; ++r)
      for (int m = 0; m < A; ++m) acc[r][m] = acc2[r][m] = _mm512_setzero_si512();
    const block_q8_K* ab[A];
    for (int m = 0; m < A; ++m) ab[m] = reinterpret_cast<const block_q8_K*>(a + static_cast<size_t>(m) * as) + b0 + i;
    for (int k = 0; k < QK_K / 64; ++k) {
      __m512i av[A];
      for (int m = 0; m < A; ++m) av[m] = _mm512_xor_si512(_mm512_loadu_si512(ab[m]->qs + 64 * k), k128);
      for (int r = 0; r < R; ++r) {
        const IqDecoded& o = dec[r * kb + i];
        const __m512i w = _mm512_load_si512(o.w + 64 * k), sc = _mm512_load_si512(o.sc[2 * k]);
        for (int m = 0; m < A; ++m) acc[r][m] = _mm512_dpwssd_epi32(acc[r][m], _mm512_maddubs_epi16(av[m], w), sc);
        if constexpr (K == kIq1m) {
          const __m512i w2 = _mm512_load_si512(o.w2 + 64 * k);
          for (int m = 0; m < A; ++m)
            acc2[r][m] = _mm512_dpwssd_epi32(acc2[r][m], _mm512_maddubs_epi16(av[m], w2), sc);
        }
      }
    }
    // The tile's outputs side by side: exact sums, biases, scales.
    __m256i f[16], f2[16];
    alignas(64) int32_t bias[16] = {}, bias2[16] = {};
    alignas(64) float dw[16] = {}, da[16] = {};
    for (int p = 0; p < 16; ++p) f[p] = f2[p] = _mm256_setzero_si256();
    for (int r = 0; r < R; ++r) {
      const IqDecoded& o = dec[r * kb + i];
      for (int m = 0; m < A; ++m) {
        const int p = r * A + m;
        f[p] = fold(acc[r][m]);
        if constexpr (K == kIq1m) f2[p] = fold(acc2[r][m]);
        if constexpr (K == kIq1s) {
          f2[p] = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab[m]->bsums)),
                                    _mm256_load_si256(reinterpret_cast<const __m256i*>(o.coef)));
        }
        bias[p] = o.bias;
        bias2[p] = o.bias2;
        dw[p] = o.d;
        da[p] = ab[m]->d;
      }
    }
    const __m512 d = _mm512_mul_ps(_mm512_load_ps(dw), _mm512_load_ps(da));  // fp16(w.d) * a.d, lane by lane
    const __m512 sum = _mm512_cvtepi32_ps(_mm512_sub_epi32(sums16(f), _mm512_load_si512(bias)));
    if constexpr (K == kPlain) {
      sumf = _mm512_fmadd_ps(d, sum, sumf);
    } else {
      __m512i s2 = sums16(f2);
      if constexpr (K == kIq1m) s2 = _mm512_sub_epi32(s2, _mm512_load_si512(bias2));
      const __m512 inner = _mm512_fmadd_ps(_mm512_set1_ps(0.125f), _mm512_cvtepi32_ps(s2), sum);
      sumf = _mm512_fmadd_ps(d, inner, sumf);
    }
  }
}

template <int K, int R>
void tiles_of_rows(int64_t kb, const IqDecoded* dec, const uint8_t* a, size_t as, int64_t n_rows, int64_t b0,
                   float* sums) {
  // sums: [n_rows / 4 tiles][16 lanes], the running sums of every tile.
  int64_t m = 0, t = 0;
  for (; m + 4 <= n_rows; m += 4, ++t) {
    __m512 s = _mm512_load_ps(sums + 16 * t);
    tile<K, R, 4>(kb, dec, a + m * as, as, b0, s);
    _mm512_store_ps(sums + 16 * t, s);
  }
  if (m == n_rows) return;
  __m512 s = _mm512_load_ps(sums + 16 * t);
  switch (n_rows - m) {
    case 3: tile<K, R, 3>(kb, dec, a + m * as, as, b0, s); break;
    case 2: tile<K, R, 2>(kb, dec, a + m * as, as, b0, s); break;
    default: tile<K, R, 1>(kb, dec, a + m * as, as, b0, s); break;
  }
  _mm512_store_ps(sums + 16 * t, s);
}

// ---------------------------------------------------------------- few rows
// Fewer than 8 activation rows (decode): each weight block's magnitudes,
// signs and scales prepared once and multiplied with every activation row of
// the tile: vpdpwssd(acc, vpmaddubsw(|w|, a negated where w < 0), scales),
// 64 values a step. The signs go onto the activations as a 64-bit mask
// (vpsubb under the mask): exact while a != -128, which quantize_row_q8_K
// never writes (its values lie in [-127, 127]). Per block the exact sum of
// each output (a reduction of int32 lanes: any order), then the reference's
// scalar fma: the same bits as the scalar and AVX2 kernels.

// Per block: sign bits (bit j: value j negative) and the scale of every 16
// values as two int16 halves of a dword (the pair vpdpwssd multiplies).
// The VBMI forms also keep the block's 256 magnitudes (mag).
struct Prepared {
  alignas(32) uint8_t signs[QK_K / 8];
  __m512i scales;
  alignas(64) uint8_t mag[QK_K];
};

// b | parity(b) << 7 for 32 bytes b < 128: ksigns_iq2xs[b] (the eighth sign
// of a group makes the count of negatives even).
inline __m256i ksigns_bytes(__m256i b) {
  const __m256i parity = _mm256_setr_epi8(0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0,
                                          0, 1, 0, 1, 1, 0);
  const __m256i lo = _mm256_set1_epi8(0x0F);
  const __m256i x = _mm256_xor_si256(_mm256_and_si256(b, lo), _mm256_and_si256(_mm256_srli_epi16(b, 4), lo));
  return _mm256_or_si256(b, _mm256_slli_epi16(_mm256_shuffle_epi8(parity, x), 7));
}

// 8 words, each 4 7-bit fields (bits 7l..7l+6) -> their 32 fields as bytes.
inline __m256i fields4(__m256i w) {
  const __m256i m = _mm256_set1_epi32(127);
  __m256i r = _mm256_and_si256(w, m);
  r = _mm256_or_si256(r, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w, 7), m), 8));
  r = _mm256_or_si256(r, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w, 14), m), 16));
  return _mm256_or_si256(r, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w, 21), m), 24));
}

// 2 v + 1 in both int16 halves of each dword.
inline __m512i odd_pairs(__m512i v) {
  v = _mm512_or_si512(_mm512_slli_epi32(v, 1), _mm512_set1_epi32(1));
  return _mm512_or_si512(v, _mm512_slli_epi32(v, 16));
}

// Scales of the 8 chunks of 32 (dwords 0-7 of v) spread to the 16 groups of 16.
inline __m512i per32(__m512i v) {
  return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), v);
}

// The nibbles of the low 8 bytes of b, low then high nibble of each byte,
// as 16 scales 2 v + 1 (odd_pairs).
inline __m512i nibble_scales(__m128i b) {
  const __m128i m = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
  return odd_pairs(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)));
}

// Scales of the 16 groups of 16 from 8 bytes of nibbles (low: first 16 of
// chunk c, high: the second).
inline __m512i nibble_scales16(const uint8_t* sc) {
  return nibble_scales(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc)));
}

// IQ2_XXS and IQ3_XXS: per chunk a word of 4 7-bit ksigns indices and, in
// bits 28-31, the chunk's scale.
inline void prepare_ksigns_words(__m256i w, Prepared& p) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(p.signs), ksigns_bytes(fields4(w)));
  p.scales = per32(odd_pairs(_mm512_castsi256_si512(_mm256_srli_epi32(w, 28))));
}

// Each format: Block, kOut, prepare(b, p), magnitudes(b, k) (the unsigned
// values of chunks 2k and 2k + 1).
struct IQ2_XXS {
  using Block = block_iq2_xxs;
  static constexpr float kOut = 0.125f;
  static void prepare(const Block& b, Prepared& p) {
    // Chunk c: 4 grid indices (bytes 8c..8c+3 of qs), then its word.
    prepare_ksigns_words(_mm512_cvtepi64_epi32(_mm512_srli_epi64(_mm512_loadu_si512(b.qs), 32)), p);
  }
  static __m512i magnitudes(const Block& b, int k) {
    const uint8_t* q = reinterpret_cast<const uint8_t*>(b.qs) + 16 * k;
    return _mm512_setr_epi64(static_cast<int64_t>(iq2xxs_grid[q[0]]), static_cast<int64_t>(iq2xxs_grid[q[1]]),
                             static_cast<int64_t>(iq2xxs_grid[q[2]]), static_cast<int64_t>(iq2xxs_grid[q[3]]),
                             static_cast<int64_t>(iq2xxs_grid[q[8]]), static_cast<int64_t>(iq2xxs_grid[q[9]]),
                             static_cast<int64_t>(iq2xxs_grid[q[10]]), static_cast<int64_t>(iq2xxs_grid[q[11]]));
  }
};

struct IQ2_XS {
  using Block = block_iq2_xs;
  static constexpr float kOut = 0.125f;
  static void prepare(const Block& b, Prepared& p) {
    // Each 16-bit word: a 9-bit grid index, a 7-bit ksigns index.
    const __m256i f = _mm512_cvtepi16_epi8(_mm512_srli_epi16(_mm512_loadu_si512(b.qs), 9));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.signs), ksigns_bytes(f));
    p.scales = nibble_scales16(b.scales);
  }
  static __m512i magnitudes(const Block& b, int k) {
    const uint16_t* q = b.qs + 8 * k;
    const auto g = [&](int j) { return static_cast<int64_t>(iq2xs_grid[q[j] & 511]); };
    return _mm512_setr_epi64(g(0), g(1), g(2), g(3), g(4), g(5), g(6), g(7));
  }
};

struct IQ2_S {
  using Block = block_iq2_s;
  static constexpr float kOut = 0.125f;
  static void prepare(const Block& b, Prepared& p) {
    std::memcpy(p.signs, b.qs + QK_K / 8, sizeof p.signs);  // the sign bits as they are
    p.scales = nibble_scales16(b.scales);
  }
  static __m512i magnitudes(const Block& b, int k) {
    const auto g = [&](int c, int l) {
      const uint32_t high = (static_cast<uint32_t>(b.qh[c]) << (8 - 2 * l)) & 0x300;
      return static_cast<int64_t>(iq2s_grid[b.qs[4 * c + l] | high]);
    };
    const int c = 2 * k;
    return _mm512_setr_epi64(g(c, 0), g(c, 1), g(c, 2), g(c, 3), g(c + 1, 0), g(c + 1, 1), g(c + 1, 2), g(c + 1, 3));
  }
};

struct IQ3_XXS {
  using Block = block_iq3_xxs;
  static constexpr float kOut = 0.25f;
  static void prepare(const Block& b, Prepared& p) {
    // qs: 64 grid indices, then the 8 chunks' words.
    prepare_ksigns_words(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + QK_K / 4)), p);
  }
  static __m512i magnitudes(const Block& b, int k) {
    const uint8_t* q = b.qs + 16 * k;
    alignas(64) uint32_t g[16];
    for (int j = 0; j < 16; ++j) g[j] = iq3xxs_grid[q[j]];
    return _mm512_load_si512(g);
  }
};

struct IQ3_S {
  using Block = block_iq3_s;
  static constexpr float kOut = 1.0f;
  static void prepare(const Block& b, Prepared& p) {
    std::memcpy(p.signs, b.signs, sizeof p.signs);
    // Chunk c's scale: nibble c % 2 of scales[c / 2] (4 bytes: the block's last).
    uint32_t sc;
    std::memcpy(&sc, b.scales, sizeof sc);
    p.scales = per32(nibble_scales(_mm_cvtsi32_si128(static_cast<int>(sc))));
  }
  static __m512i magnitudes(const Block& b, int k) {
    // Index j of chunk c: qs[8c + j] | bit j of qh[c] as bit 8.
    const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * k)));
    const __m512i qh = _mm512_inserti64x4(_mm512_set1_epi32(b.qh[2 * k]), _mm256_set1_epi32(b.qh[2 * k + 1]), 1);
    const __m512i sh = _mm512_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1, 8, 7, 6, 5, 4, 3, 2, 1);
    const __m512i idx = _mm512_or_si512(lo, _mm512_and_si512(_mm512_sllv_epi32(qh, sh), _mm512_set1_epi32(256)));
    return _mm512_i32gather_epi32(idx, iq3s_grid, 4);  // the indices are built in a vector
  }
};

// ---------------------------------------------------------------- VBMI
// With AVX-512 VBMI (cpu_has_avx512_vbmi) the IQ3 grids are looked up a
// block (64 entries) at a time: each grid as 4 byte planes (plane p: byte p
// of every entry), each plane's 256 or 512 bytes indexed with vpermi2b (128
// bytes a lookup, the index's bit 7 and IQ3_S's bit 8 choosing between
// lookups under a mask), and the planes interleaved back into entry order
// with vpermt2b. Only these functions carry the VBMI target; the table calls
// them only when the CPU has it.
template <int B, size_t N>
struct Planes {
  alignas(64) uint8_t p[B][N];
};
template <int B, typename G, size_t N>
constexpr Planes<B, N> make_planes(const G (&grid)[N]) {
  Planes<B, N> t{};
  for (size_t e = 0; e < N; ++e)
    for (int b = 0; b < B; ++b) t.p[b][e] = static_cast<uint8_t>(grid[e] >> (8 * b));
  return t;
}
constexpr Planes<4, 256> kIq3xxsPlanes = make_planes<4>(iq3xxs_grid);
constexpr Planes<4, 512> kIq3sPlanes = make_planes<4>(iq3s_grid);

// Byte-permute indices, built at compile time (see their users).
struct Bytes64 {
  alignas(64) uint8_t v[4][64];
};
constexpr Bytes64 make_interleave4() {  // out byte 4j + b of step k: plane b's entry 16k + j
  Bytes64 t{};
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 16; ++j)
      for (int b = 0; b < 4; ++b) t.v[k][4 * j + b] = static_cast<uint8_t>((b % 2 ? 64 : 0) + 16 * k + j);
  return t;
}
constexpr Bytes64 kInterleave4 = make_interleave4();

// The 4 planes of 64 entries -> 256 bytes in entry order (out[4e + b] =
// plane b's byte e).
__attribute__((target("avx512vbmi"))) void interleave_planes(const __m512i* pl, uint8_t* out) {
  for (int k = 0; k < 4; ++k) {
    // Even planes from the first source, odd ones (index bit 6) from the second.
    const __m512i ix = _mm512_load_si512(kInterleave4.v[k]);
    const __m512i lo = _mm512_permutex2var_epi8(pl[0], ix, pl[1]), hi = _mm512_permutex2var_epi8(pl[2], ix, pl[3]);
    _mm512_store_si512(out + 64 * k, _mm512_mask_blend_epi8(0xCCCCCCCCCCCCCCCCull, lo, hi));
  }
}

// IQ3_XXS: 64 8-bit indices (qs[0..63]).
__attribute__((target("avx512vbmi"))) void iq3xxs_magnitudes_vbmi(const uint8_t* qs, uint8_t* out) {
  const __m512i idx = _mm512_loadu_si512(qs);
  const __mmask64 high = _mm512_movepi8_mask(idx);  // entries 128-255
  __m512i pl[4];
  for (int b = 0; b < 4; ++b) {
    const uint8_t* t = kIq3xxsPlanes.p[b];
    const __m512i lo = _mm512_permutex2var_epi8(_mm512_load_si512(t), idx, _mm512_load_si512(t + 64));
    const __m512i hi = _mm512_permutex2var_epi8(_mm512_load_si512(t + 128), idx, _mm512_load_si512(t + 192));
    pl[b] = _mm512_mask_blend_epi8(high, lo, hi);
  }
  interleave_planes(pl, out);
}

// IQ3_S: 64 9-bit indices, the low 8 bits in qs[0..63], bit 8 of entry e bit
// e of the 64 qh bits.
__attribute__((target("avx512vbmi"))) void iq3s_magnitudes_vbmi(const uint8_t* qs, const uint8_t* qh, uint8_t* out) {
  const __m512i idx = _mm512_loadu_si512(qs);
  const __mmask64 b7 = _mm512_movepi8_mask(idx);
  uint64_t h;
  std::memcpy(&h, qh, sizeof h);
  const __mmask64 b8 = _cvtu64_mask64(h);
  __m512i pl[4];
  for (int b = 0; b < 4; ++b) {
    const uint8_t* t = kIq3sPlanes.p[b];
    __m512i quarter[4];  // entries 128q .. 128q + 127
    for (int q = 0; q < 4; ++q)
      quarter[q] = _mm512_permutex2var_epi8(_mm512_load_si512(t + 128 * q), idx, _mm512_load_si512(t + 128 * q + 64));
    const __m512i low = _mm512_mask_blend_epi8(b7, quarter[0], quarter[1]);
    const __m512i high = _mm512_mask_blend_epi8(b7, quarter[2], quarter[3]);
    pl[b] = _mm512_mask_blend_epi8(b8, low, high);
  }
  interleave_planes(pl, out);
}

struct IQ3_XXS_VBMI : IQ3_XXS {
  static constexpr bool kPreparedMagnitudes = true;
  static void prepare(const Block& b, Prepared& p) {
    IQ3_XXS::prepare(b, p);
    iq3xxs_magnitudes_vbmi(b.qs, p.mag);
  }
};

struct IQ3_S_VBMI : IQ3_S {
  static constexpr bool kPreparedMagnitudes = true;
  static void prepare(const Block& b, Prepared& p) {
    IQ3_S::prepare(b, p);
    iq3s_magnitudes_vbmi(b.qs, b.qh, p.mag);
  }
};

// T activation rows against one weight row (tiles::by_tiles and
// dot_by_tile run it). F::magnitudes(b, k) or, for the VBMI forms, the
// prepared p.mag.
template <typename F>
struct FewRows {
  template <int T>
  void run(int64_t nb, const typename F::Block* x, const uint8_t* a, size_t as, float* y, size_t ys) {
    float sumf[T];
    for (int m = 0; m < T; ++m) sumf[m] = 0.0f;
    Prepared p;
    for (int64_t i = 0; i < nb; ++i) {
      F::prepare(x[i], p);
      __m512i acc[T];
      for (int m = 0; m < T; ++m) acc[m] = _mm512_setzero_si512();
      for (int k = 0; k < QK_K / 64; ++k) {
        __m512i q;
        if constexpr (requires { F::kPreparedMagnitudes; }) {
          q = _mm512_load_si512(p.mag + 64 * k);
        } else {
          q = F::magnitudes(x[i], k);
        }
        uint64_t bits;
        std::memcpy(&bits, p.signs + 8 * k, sizeof bits);
        const __mmask64 neg = _cvtu64_mask64(bits);
        const int g = 4 * k;  // the step's 4 groups of 16, one per 128-bit lane
        const __m512i sc = _mm512_permutexvar_epi32(
            _mm512_setr_epi32(g, g, g, g, g + 1, g + 1, g + 1, g + 1, g + 2, g + 2, g + 2, g + 2, g + 3, g + 3, g + 3,
                              g + 3),
            p.scales);
        for (int m = 0; m < T; ++m) {
          const block_q8_K& ab = tiles::act_row<block_q8_K>(a, as, m)[i];
          __m512i av = _mm512_loadu_si512(ab.qs + 64 * k);
          av = _mm512_mask_sub_epi8(av, neg, _mm512_setzero_si512(), av);
          acc[m] = _mm512_dpwssd_epi32(acc[m], _mm512_maddubs_epi16(q, av), sc);
        }
      }
      const float dw = _cvtsh_ss(x[i].d);
      for (int m = 0; m < T; ++m) {
        const block_q8_K& ab = tiles::act_row<block_q8_K>(a, as, m)[i];
        sumf[m] = __builtin_fmaf(dw * ab.d, static_cast<float>(_mm512_reduce_add_epi32(acc[m])), sumf[m]);
      }
    }
    for (int m = 0; m < T; ++m) y[static_cast<size_t>(m) * ys] = F::kOut * sumf[m];
  }
};

// Every weight row against the n_rows (< 8) activation rows, in tiles of up
// to 4 activation rows.
template <typename F>
void few_rows(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
              float* y, size_t ys) {
  tiles::by_tiles<FewRows<F>, typename F::Block>(FewRows<F>{}, n / QK_K, w, ws, n_w, a, as, n_rows, y, ys);
}

using DecodeFn = void (*)(const uint8_t* w, size_t w_stride, int64_t n_w, int64_t nb, IqDecoded* out);

template <int K>
void gemm_decoded(DecodeFn decode, size_t block_bytes, float out, int64_t n, const uint8_t* w, size_t ws, int64_t n_w,
                  const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  constexpr int R = K == kIq1m ? 2 : 4;
  const int64_t nb = n / QK_K, n_tiles = (n_rows + 3) / 4;
  // One allocation: the decoded chunk (R rows x kChunk blocks), then the
  // running sums (16 floats a tile).
  const size_t dec_bytes = static_cast<size_t>(R * kChunk) * sizeof(IqDecoded);
  auto* base = static_cast<uint8_t*>(thread_scratch(dec_bytes + static_cast<size_t>(n_tiles) * 64));
  auto* dec = reinterpret_cast<IqDecoded*>(base);
  auto* sums = reinterpret_cast<float*>(base + dec_bytes);
  for (int64_t r0 = 0; r0 < n_w; r0 += R) {
    const int rr = n_w - r0 < R ? static_cast<int>(n_w - r0) : R;
    std::memset(sums, 0, static_cast<size_t>(n_tiles) * 64);
    for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
      const int64_t kb = nb - b0 < kChunk ? nb - b0 : kChunk;
      decode(w + static_cast<size_t>(r0) * ws + static_cast<size_t>(b0) * block_bytes, ws, rr, kb, dec);
      if (rr == R) {
        tiles_of_rows<K, R>(kb, dec, a, as, n_rows, b0, sums);
      } else if (rr == 1) {
        tiles_of_rows<K, 1>(kb, dec, a, as, n_rows, b0, sums);
      } else if constexpr (R > 2) {
        if (rr == 2) tiles_of_rows<K, 2>(kb, dec, a, as, n_rows, b0, sums);
        else tiles_of_rows<K, 3>(kb, dec, a, as, n_rows, b0, sums);
      }
    }
    // Lane r * A + m of tile t: weight row r0 + r, activation row 4t + m.
    for (int64_t m = 0; m < n_rows; ++m) {
      const int64_t t = m / 4, A = n_rows - 4 * t < 4 ? n_rows - 4 * t : 4;
      for (int r = 0; r < rr; ++r) y[m * static_cast<int64_t>(ys) + r0 + r] = out * sums[16 * t + r * A + m % 4];
    }
  }
}

}  // namespace

// FEW: the few-rows kernel (fewer than 8 activation rows) of this file, or
// the AVX2 one (IQ1_S, IQ1_M).
#define SYNAPSE_IQ_GEMM(t, K, out, FEW)                                                                           \
  void gemm_##t##_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,        \
                       int64_t n_rows, float* y, size_t ys) {                                                    \
    if (n_rows < kDecodeRows) {                                                                                   \
      FEW(n, w, ws, n_w, a, as, n_rows, y, ys);                                                                   \
      return;                                                                                                     \
    }                                                                                                             \
    gemm_decoded<K>(avx2::decode_##t##_rows, sizeof(block_##t), out, n, w, ws, n_w, a, as, n_rows, y, ys);       \
  }

SYNAPSE_IQ_GEMM(iq2_xxs, kPlain, 0.125f, few_rows<IQ2_XXS>)
SYNAPSE_IQ_GEMM(iq2_xs, kPlain, 0.125f, few_rows<IQ2_XS>)
SYNAPSE_IQ_GEMM(iq2_s, kPlain, 0.125f, few_rows<IQ2_S>)
SYNAPSE_IQ_GEMM(iq3_xxs, kPlain, 0.25f, few_rows<IQ3_XXS>)
SYNAPSE_IQ_GEMM(iq3_s, kPlain, 1.0f, few_rows<IQ3_S>)
SYNAPSE_IQ_GEMM(iq1_s, kIq1s, 1.0f, avx2::gemm_iq1_s_q8_K)
SYNAPSE_IQ_GEMM(iq1_m, kIq1m, 1.0f, avx2::gemm_iq1_m_q8_K)

#define SYNAPSE_IQ_DOT(name, t, F)                                                                                \
  float name(int64_t n, const void* w, const void* a) {                                                          \
    return tiles::dot_by_tile<FewRows<F>, block_##t>(n / QK_K, w, a);                                             \
  }

SYNAPSE_IQ_DOT(vec_dot_iq2_xxs_q8_K, iq2_xxs, IQ2_XXS)
SYNAPSE_IQ_DOT(vec_dot_iq2_xs_q8_K, iq2_xs, IQ2_XS)
SYNAPSE_IQ_DOT(vec_dot_iq2_s_q8_K, iq2_s, IQ2_S)
SYNAPSE_IQ_DOT(vec_dot_iq3_xxs_q8_K, iq3_xxs, IQ3_XXS)
SYNAPSE_IQ_DOT(vec_dot_iq3_s_q8_K, iq3_s, IQ3_S)

// The VBMI forms (the table takes them when cpu_has_avx512_vbmi): the few
// rows with the grids looked up by vpermi2b, 8 rows or more as above.
#define SYNAPSE_IQ_VBMI(t, F)                                                                                     \
  SYNAPSE_IQ_DOT(vec_dot_##t##_q8_K_vbmi, t, F)                                                                   \
  void gemm_##t##_q8_K_vbmi(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,   \
                            int64_t n_rows, float* y, size_t ys) {                                               \
    if (n_rows < kDecodeRows) {                                                                                   \
      few_rows<F>(n, w, ws, n_w, a, as, n_rows, y, ys);                                                           \
      return;                                                                                                     \
    }                                                                                                             \
    gemm_##t##_q8_K(n, w, ws, n_w, a, as, n_rows, y, ys);                                                         \
  }

SYNAPSE_IQ_VBMI(iq3_xxs, IQ3_XXS_VBMI)
SYNAPSE_IQ_VBMI(iq3_s, IQ3_S_VBMI)

#undef SYNAPSE_IQ_VBMI
#undef SYNAPSE_IQ_DOT
#undef SYNAPSE_IQ_GEMM

}  // namespace synapse::quant::avx512
#endif

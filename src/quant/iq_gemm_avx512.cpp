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
// between chunks. Fewer than 8 activation rows take the AVX2 kernel.
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
#include "quant/iq_decoded.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::avx512 {
namespace {

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

#define SYNAPSE_IQ_GEMM(t, K, out)                                                                                \
  void gemm_##t##_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,        \
                       int64_t n_rows, float* y, size_t ys) {                                                    \
    if (n_rows < kDecodeRows) {                                                                                   \
      avx2::gemm_##t##_q8_K(n, w, ws, n_w, a, as, n_rows, y, ys);                                                 \
      return;                                                                                                     \
    }                                                                                                             \
    gemm_decoded<K>(avx2::decode_##t##_rows, sizeof(block_##t), out, n, w, ws, n_w, a, as, n_rows, y, ys);       \
  }

SYNAPSE_IQ_GEMM(iq2_xxs, kPlain, 0.125f)
SYNAPSE_IQ_GEMM(iq2_xs, kPlain, 0.125f)
SYNAPSE_IQ_GEMM(iq2_s, kPlain, 0.125f)
SYNAPSE_IQ_GEMM(iq3_xxs, kPlain, 0.25f)
SYNAPSE_IQ_GEMM(iq3_s, kPlain, 1.0f)
SYNAPSE_IQ_GEMM(iq1_s, kIq1s, 1.0f)
SYNAPSE_IQ_GEMM(iq1_m, kIq1m, 1.0f)

#undef SYNAPSE_IQ_GEMM

}  // namespace synapse::quant::avx512
#endif

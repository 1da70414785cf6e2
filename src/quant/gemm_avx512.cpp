// AVX-512 VNNI multi-row dots (gemm.hpp GemmFn) of plain (not interleaved)
// matrices for prefill: Q4_1 / Q5_1 (Q8_1 activations), Q2_K, Q3_K, Q5_K
// and IQ4_XS (Q8_K). (IQ4_NL and MXFP4 take legacy.cpp's Q4_0 order, one
// integer per block and row: their matrices run interleaved, and the few
// plain rows left take the AVX2 kernel.) Each keeps the 8-lane order of
// its AVX2 kernel (legacy_dot_avx2.cpp, gemm_k_avx2.cpp, k_quants_avx2.cpp:
// ggml's AVX2 orders) on 512-bit registers holding two weight rows side by
// side (lanes 0..7 row r, 8..15 row r + 1), so every activation load and
// every float step serves two outputs. The width goes across outputs only: each output
// keeps its 8 exact integer lanes, its fused multiply-adds and its final
// reduction, so the kernels give the AVX2 and scalar kernels' bits
// (contract 2; tests/quant/gemm_test.cpp compares every table's gemm with
// the scalar vec_dot by memcmp, on random and on raw-byte rows).
//
// The integer lanes come from vpdpbusd (unsigned bytes times signed bytes,
// 4 products per int32 lane, no saturation) in place of maddubs + madd
// (IQ4_XS keeps ggml's maddubs of |v| and sign-adjusted bytes, whose a =
// -128 case the reference defines).
// Where a lane is scaled per chunk (Q2_K, Q3_K, Q5_K, IQ4_XS), the chunk's
// 4-product or 2-product sums fit an int16 and vpdpwssd multiplies them by
// the scale and adds them in (Q5_K: a 4-product sum is at most
// 4 * 31 * 128 = 15872 in magnitude, so it is exact as the low int16 of its
// dword, whose high int16 is its sign, against the dword (sc, 0)).
//
// No STL and no inline function of a shared header with external linkage
// here: code compiled with -mavx512* must not become the definition generic
// code links (avx2_util.hpp's helpers are internal: each file gets its own).
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

#include "quant/avx2_util.hpp"
#include "quant/formats.hpp"
#include "quant/gemm.hpp"

namespace synapse::quant::avx512 {
namespace {

// Activation rows per register tile (each weight unpack serves that many):
// 8 ran fastest of 3..16 on Q5_K (docs/PERFORMANCE.md, "Plain-type AVX-512
// GEMMs"); Q5_K and IQ4_XS then hold their digits and chunk scales as
// memory operands, the compiler's choice.
constexpr int kActs = 8;

// 32 bytes of row 0 (lanes 0..7) and 32 of row 1 (lanes 8..15).
inline __m512i load_rows(const void* p0, const void* p1) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(p0))),
                            _mm256_loadu_si256(static_cast<const __m256i*>(p1)), 1);
}

// Two F16 scales as floats, row 0's in lanes 0..7, row 1's in 8..15.
inline __m512 f16_rows(ggml_fp16_t h0, ggml_fp16_t h1) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(_cvtsh_ss(h0))), _mm256_set1_ps(_cvtsh_ss(h1)), 1);
}

// 32 activation bytes in both 256-bit halves.
inline __m512i act32(const int8_t* qs) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)));
}

// The two rows' 8 float lanes, each reduced as avx2_util.hpp hsum_float_8.
inline void hsum_rows(__m512 acc, float out[2]) {
  out[0] = avx2::hsum_float_8(_mm512_castps512_ps256(acc));
  out[1] = avx2::hsum_float_8(_mm512_castps512_ps256(_mm512_shuffle_f32x4(acc, acc, 0xEE)));
}

// y[m * ys + r] = hsum_float_8 of row r's lanes of acc[m] (plus lane r of
// summs[m], the Q4_1 / Q5_1 / Q5_K min term added last, when given).
template <int A>
inline void store_rows(const __m512* acc, const __m128* summs, float* y, size_t ys) {
  for (int m = 0; m < A; ++m) {
    float h[2], sm[4];
    hsum_rows(acc[m], h);
    if (summs != nullptr) {
      _mm_storeu_ps(sm, summs[m]);
      for (int r = 0; r < 2; ++r) h[r] += sm[r];
    }
    y[static_cast<size_t>(m) * ys] = h[0];
    y[static_cast<size_t>(m) * ys + 1] = h[1];
  }
}

// Q5_K rows w0 and w1 (nb blocks each) against A activation rows of Q8_K
// blocks: y[m * ys] (row w0) and y[m * ys + 1] (row w1).
struct Q5K {
  using Block = block_q5_K;
  static constexpr int64_t kBlock = QK_K;
  template <int A>
  static void run(int64_t nb, const block_q5_K* w0, const block_q5_K* w1, const uint8_t* a, size_t as, float* y,
                  size_t ys);
};

template <int A>
void Q5K::run(int64_t nb, const block_q5_K* w0, const block_q5_K* w1, const uint8_t* a, size_t as, float* y,
              size_t ys) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
  __m512 acc[A];
  __m128 summs[A];  // lanes 0 and 1: the two rows' min terms
  for (int m = 0; m < A; ++m) {
    acc[m] = _mm512_setzero_ps();
    summs[m] = _mm_setzero_ps();
  }
  for (int64_t i = 0; i < nb; ++i) {
    const block_q5_K& b0 = w0[i];
    const block_q5_K& b1 = w1[i];
    // Digits 0..31 of the 8 chunks: the fifth bit of element 64j + l is bit
    // 2j of qh[l], of 64j + 32 + l bit 2j + 1.
    __m512i u[8];
    __m512i h = load_rows(b0.qh, b1.qh);
    for (int j = 0; j < 4; ++j) {
      const __m512i q = load_rows(b0.qs + 32 * j, b1.qs + 32 * j);
      u[2 * j] = _mm512_or_si512(_mm512_and_si512(q, m4), _mm512_slli_epi16(_mm512_and_si512(h, one), 4));
      h = _mm512_srli_epi16(h, 1);
      u[2 * j + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q, 4), m4),
                                     _mm512_slli_epi16(_mm512_and_si512(h, one), 4));
      h = _mm512_srli_epi16(h, 1);
    }
    // Chunk c's scale as the dword (sc, 0) in each row's 8 lanes; the mins
    // as int16, row 0's in the low 8 words, row 1's in the high 8.
    // (avx2::k4_scales_mins: words 0..7 the scales, 8..15 the mins.)
    const __m256i sm0 = avx2::k4_scales_mins(b0.scales), sm1 = avx2::k4_scales_mins(b1.scales);
    const __m512i sc32 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(sm0))),
                                            _mm256_cvtepu16_epi32(_mm256_castsi256_si128(sm1)), 1);
    __m512i sc[8];
    for (int c = 0; c < 8; ++c) {
      const __m512i idx = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(c)), _mm256_set1_epi32(8 + c), 1);
      sc[c] = _mm512_permutexvar_epi32(idx, sc32);
    }
    const __m256i mins = _mm256_permute2x128_si256(sm0, sm1, 0x31);
    const __m512 dw = f16_rows(b0.d, b1.d);
    const __m128 dmin = _mm_setr_ps(_cvtsh_ss(b0.dmin), _cvtsh_ss(b1.dmin), 0.0f, 0.0f);
    for (int m = 0; m < A; ++m) {
      const block_q8_K& x = reinterpret_cast<const block_q8_K*>(a + static_cast<size_t>(m) * as)[i];
      __m512i lanes = _mm512_setzero_si512();
      for (int c = 0; c < 8; ++c) {
        const __m512i xc = act32(x.qs + 32 * c);
        lanes = _mm512_dpwssd_epi32(lanes, _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], xc), sc[c]);
      }
      // q5_K_accumulate: d = ad * d_w, dmin = -ad * dmin_w; the min term's
      // integer sum_j min_j * (bsum 2j + bsum 2j+1, wrapped to int16) is
      // exact in any order.
      const __m512 d = _mm512_mul_ps(_mm512_set1_ps(x.d), dw);
      acc[m] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc[m]);
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
      const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
      __m256i t = _mm256_madd_epi16(mins, _mm256_broadcastsi128_si256(q8s));
      t = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, 0x4E));
      t = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, 0xB1));  // each half's sum in its dword 0
      const __m128i mi = _mm_unpacklo_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
      summs[m] = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(-x.d), dmin), _mm_cvtepi32_ps(mi), summs[m]);
    }
  }
  // q5_K_result: hsum_float_8 of each row's lanes, plus its min term.
  store_rows<A>(acc, summs, y, ys);
}

// IQ4_XS rows w0 and w1 against A activation rows of Q8_K blocks, in
// ggml's AVX2 order (k_quants_avx2.cpp iq4_xs_tile): per chunk c of 32
// elements the table values v against the activations as mul_add_epi8
// takes them, maddubs(|v|, sign(a, v)) (for a = -128 and v < 0 the sign
// step wraps to -128, so the exact reference keeps that product), then
// madd with the chunk's scale ls - 32 into the 8 lanes; acc = fma(d_w * d_a,
// lanes, acc) per block; hsum_float_8. AVX-512 has no vpsignb: sign(a, v)
// is a masked byte negation of a (wrapping alike) where v < 0, and the
// table has no zero. vpdpwssd against the scale words does madd + add.
struct IQ4XS {
  using Block = block_iq4_xs;
  static constexpr int64_t kBlock = QK_K;
  template <int A>
  static void run(int64_t nb, const block_iq4_xs* w0, const block_iq4_xs* w1, const uint8_t* a, size_t as,
                  float* y, size_t ys);
};

template <int A>
void IQ4XS::run(int64_t nb, const block_iq4_xs* w0, const block_iq4_xs* w1, const uint8_t* a, size_t as, float* y,
                size_t ys) {
  const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kvalues_iq4nl)));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[A];
  for (int m = 0; m < A; ++m) acc[m] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const block_iq4_xs& b0 = w0[i];
    const block_iq4_xs& b1 = w1[i];
    __m512i abs_v[8], sc[8];
    __mmask64 neg[8];
    for (int c = 0; c < 8; ++c) {
      // Elements 0..15 of the chunk: the low nibbles of its 16 bytes, 16..31
      // the high ones; row 0 in the low 256 bits, row 1 in the high.
      const __m512i q = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0.qs + 16 * c)))),
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b1.qs + 16 * c))), 1);
      const __m512i digits = _mm512_mask_blend_epi64(0xCC, _mm512_and_si512(q, m4),
                                                     _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
      const __m512i v = _mm512_shuffle_epi8(table, digits);
      abs_v[c] = _mm512_abs_epi8(v);
      neg[c] = _mm512_movepi8_mask(v);
      const int ls0 = ((b0.scales_l[c / 2] >> 4 * (c % 2)) & 0xf) | (((b0.scales_h >> 2 * c) & 3) << 4);
      const int ls1 = ((b1.scales_l[c / 2] >> 4 * (c % 2)) & 0xf) | (((b1.scales_h >> 2 * c) & 3) << 4);
      sc[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<int16_t>(ls0 - 32))),
                                 _mm256_set1_epi16(static_cast<int16_t>(ls1 - 32)), 1);
    }
    const __m512 dw = f16_rows(b0.d, b1.d);
    for (int m = 0; m < A; ++m) {
      const block_q8_K& x = reinterpret_cast<const block_q8_K*>(a + static_cast<size_t>(m) * as)[i];
      __m512i lanes = _mm512_setzero_si512();
      for (int c = 0; c < 8; ++c) {
        const __m512i xc = act32(x.qs + 32 * c);
        const __m512i sx = _mm512_mask_sub_epi8(xc, neg[c], _mm512_setzero_si512(), xc);
        lanes = _mm512_dpwssd_epi32(lanes, _mm512_maddubs_epi16(abs_v[c], sx), sc[c]);
      }
      acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x.d)), _mm512_cvtepi32_ps(lanes), acc[m]);
    }
  }
  store_rows<A>(acc, nullptr, y, ys);
}

// ---- Q3_K and Q2_K (k_quants_avx2.cpp q3_K_tile, q2_K_tile: ggml's AVX2
// order): chunk (j, k) of a block is elements 128j + 32k .. + 31, its lanes
// 0..3 scaled by sub-block 8j + 2k, lanes 4..7 by 8j + 2k + 1 (16 elements
// each); lanes summed over the block; acc = fma(d_a * d_w, lanes, acc); Q2_K
// first adds its min lanes, acc = fma(-d_a * dmin_w, madd(mins, bsums),
// acc). A 4-product sum is at most 4 * 7 * 128 in magnitude, an int16, so
// vpdpwssd against the dword (scale, 0) scales it exactly.

// The scale dwords of chunk (j, k) for both rows from their 16 int32 scales
// each (low word the scale, high word 0).
inline __m512i chunk_scales(__m512i s0, __m512i s1, int j, int k) {
  const int a = 8 * j + 2 * k;
  const __m512i idx = _mm512_setr_epi32(a, a, a, a, a + 1, a + 1, a + 1, a + 1, 16 + a, 16 + a, 16 + a, 16 + a,
                                        17 + a, 17 + a, 17 + a, 17 + a);
  return _mm512_permutex2var_epi32(s0, idx, s1);
}

// Q3_K: digits low2 | high << 2 (element 128j + 32k + l: bits 2k of
// qs[32j + l], bit 4j + k of hmask[l]), offset 4 taken off as a second
// vpdpbusd of bytes 4 against the activations.
struct Q3K {
  using Block = block_q3_K;
  static constexpr int64_t kBlock = QK_K;
  template <int A>
  static void run(int64_t nb, const block_q3_K* w0, const block_q3_K* w1, const uint8_t* a, size_t as, float* y,
                  size_t ys) {
    const __m512i m3 = _mm512_set1_epi8(0x03), one = _mm512_set1_epi8(1), four = _mm512_set1_epi8(4);
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    __m512 acc[A];
    for (int m = 0; m < A; ++m) acc[m] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const __m512i s0 = _mm512_and_si512(_mm512_cvtepi8_epi32(avx2::q3_K_scales(w0[i].scales)), lo16);
      const __m512i s1 = _mm512_and_si512(_mm512_cvtepi8_epi32(avx2::q3_K_scales(w1[i].scales)), lo16);
      const __m512i hm = load_rows(w0[i].hmask, w1[i].hmask);
      __m512i u[8], sc[8];
      for (int j = 0; j < 2; ++j) {
        const __m512i q = load_rows(w0[i].qs + 32 * j, w1[i].qs + 32 * j);
        for (int k = 0; k < 4; ++k) {
          u[4 * j + k] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q, 2 * k), m3),
                                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hm, 4 * j + k), one), 2));
          sc[4 * j + k] = chunk_scales(s0, s1, j, k);
        }
      }
      const __m512 dw = f16_rows(w0[i].d, w1[i].d);
      for (int m = 0; m < A; ++m) {
        const block_q8_K& x = reinterpret_cast<const block_q8_K*>(a + static_cast<size_t>(m) * as)[i];
        __m512i lanes = _mm512_setzero_si512();
        for (int c = 0; c < 8; ++c) {
          const __m512i xc = act32(x.qs + 32 * c);
          const __m512i t = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], xc),
                                             _mm512_dpbusd_epi32(_mm512_setzero_si512(), four, xc));
          lanes = _mm512_dpwssd_epi32(lanes, t, sc[c]);
        }
        acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(x.d), dw), _mm512_cvtepi32_ps(lanes), acc[m]);
      }
    }
    store_rows<A>(acc, nullptr, y, ys);
  }
};

// Q2_K: digits (qs[32j + l] >> 2k) & 3, scales the low nibbles of
// scales[16], mins the high ones.
struct Q2K {
  using Block = block_q2_K;
  static constexpr int64_t kBlock = QK_K;
  template <int A>
  static void run(int64_t nb, const block_q2_K* w0, const block_q2_K* w1, const uint8_t* a, size_t as, float* y,
                  size_t ys) {
    const __m512i m3 = _mm512_set1_epi8(0x03);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m512 acc[A];
    for (int m = 0; m < A; ++m) acc[m] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const __m128i sm0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w0[i].scales));
      const __m128i sm1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w1[i].scales));
      const __m512i mins = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm0, 4), m4))),
          _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm1, 4), m4)), 1);
      const __m512i s0 = _mm512_cvtepu8_epi32(_mm_and_si128(sm0, m4)), s1 = _mm512_cvtepu8_epi32(_mm_and_si128(sm1, m4));
      __m512i u[8], sc[8];
      for (int j = 0; j < 2; ++j) {
        const __m512i q = load_rows(w0[i].qs + 32 * j, w1[i].qs + 32 * j);
        for (int k = 0; k < 4; ++k) {
          u[4 * j + k] = _mm512_and_si512(_mm512_srli_epi16(q, 2 * k), m3);
          sc[4 * j + k] = chunk_scales(s0, s1, j, k);
        }
      }
      const __m512 dw = f16_rows(w0[i].d, w1[i].d);
      const __m512 dmw = f16_rows(w0[i].dmin, w1[i].dmin);
      for (int m = 0; m < A; ++m) {
        const block_q8_K& x = reinterpret_cast<const block_q8_K*>(a + static_cast<size_t>(m) * as)[i];
        const __m512i bs = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums)));
        acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(-x.d), dmw), _mm512_cvtepi32_ps(_mm512_madd_epi16(mins, bs)),
                                 acc[m]);
        __m512i lanes = _mm512_setzero_si512();
        for (int c = 0; c < 8; ++c) {
          const __m512i xc = act32(x.qs + 32 * c);
          lanes = _mm512_dpwssd_epi32(lanes, _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], xc), sc[c]);
        }
        acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(x.d), dw), _mm512_cvtepi32_ps(lanes), acc[m]);
      }
    }
    store_rows<A>(acc, nullptr, y, ys);
  }
};

// ---- 32-element blocks (legacy_dot_avx2.cpp's order, ggml's AVX2 one):
// per block 8 int32 lanes, lane l the exact dot of elements 4l..4l+3;
// acc = fma(d_w * d_a, lanes, acc); hsum_float_8; Q4_1 / Q5_1 also
// summs = fma(m_w, s_a, summs) per block, added last.

// The 32 elements of each row's 16 bytes of nibbles (elements 0..15 the
// low nibbles, 16..31 the high): row 0 in the low 256 bits, row 1 high.
inline __m512i nibbles_rows(const uint8_t* q0, const uint8_t* q1) {
  const __m512i q = _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q0)))),
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q1))), 1);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  return _mm512_mask_blend_epi64(0xCC, _mm512_and_si512(q, m4), _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
}

// Q4_1 (Q5 = false) / Q5_1 (true) with Q8_1 activations: digits 0..15
// (0..31 with the fifth bit) unsigned, so vpdpbusd gives the lanes.
template <class B, bool Q5>
struct Q1Kernel {
  using Block = B;
  static constexpr int64_t kBlock = 32;
  template <int A>
  static void run(int64_t nb, const B* w0, const B* w1, const uint8_t* a, size_t as, float* y, size_t ys) {
    __m512 acc[A];
    __m128 summs[A];  // lanes 0 and 1: the two rows' m terms
    for (int m = 0; m < A; ++m) {
      acc[m] = _mm512_setzero_ps();
      summs[m] = _mm_setzero_ps();
    }
    for (int64_t i = 0; i < nb; ++i) {
      __m512i u = nibbles_rows(w0[i].qs, w1[i].qs);
      if constexpr (Q5) {
        uint32_t h0, h1;
        std::memcpy(&h0, w0[i].qh, 4);
        std::memcpy(&h1, w1[i].qh, 4);
        u = _mm512_or_si512(u, _mm512_maskz_mov_epi8(static_cast<__mmask64>(h0) | (static_cast<__mmask64>(h1) << 32),
                                                     _mm512_set1_epi8(0x10)));
      }
      const __m512 dw = f16_rows(w0[i].d, w1[i].d);
      const __m128 mw = _mm_setr_ps(_cvtsh_ss(w0[i].m), _cvtsh_ss(w1[i].m), 0.0f, 0.0f);
      for (int m = 0; m < A; ++m) {
        const block_q8_1& x = reinterpret_cast<const block_q8_1*>(a + static_cast<size_t>(m) * as)[i];
        summs[m] = _mm_fmadd_ps(mw, _mm_set1_ps(_cvtsh_ss(x.s)), summs[m]);
        const __m512i lanes = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, act32(x.qs));
        acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(x.d))), _mm512_cvtepi32_ps(lanes), acc[m]);
      }
    }
    store_rows<A>(acc, summs, y, ys);
  }
};

// K::run<A> for rem (< kActs) activation rows.
template <class K, int A>
void rest(int64_t rem, int64_t nb, const typename K::Block* w0, const typename K::Block* w1, const uint8_t* a,
          size_t as, float* y, size_t ys) {
  if constexpr (A > 0) {
    if (rem == A) K::template run<A>(nb, w0, w1, a, as, y, ys);
    else rest<K, A - 1>(rem, nb, w0, w1, a, as, y, ys);
  }
}

// GemmFn over pairs of weight rows, in tiles of kActs activation rows; a
// last odd row through `narrow` (the AVX2 kernel, which gives the same bits).
template <class K>
void by_row_pairs(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
                  float* y, size_t ys, GemmFn narrow) {
  using B = typename K::Block;
  const int64_t nb = n / K::kBlock;
  int64_t r = 0;
  for (; r + 2 <= n_w; r += 2) {
    const auto* w0 = reinterpret_cast<const B*>(w + static_cast<size_t>(r) * ws);
    const auto* w1 = reinterpret_cast<const B*>(w + static_cast<size_t>(r + 1) * ws);
    int64_t m = 0;
    for (; m + kActs <= n_rows; m += kActs)
      K::template run<kActs>(nb, w0, w1, a + static_cast<size_t>(m) * as, as, y + static_cast<size_t>(m) * ys + r, ys);
    rest<K, kActs - 1>(n_rows - m, nb, w0, w1, a + static_cast<size_t>(m) * as, as,
                       y + static_cast<size_t>(m) * ys + r, ys);
  }
  if (r < n_w) narrow(n, w + static_cast<size_t>(r) * ws, ws, 1, a, as, n_rows, y + r, ys);
}

}  // namespace

void gemm_q5_K_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,
                    int64_t n_rows, float* y, size_t ys) {
  by_row_pairs<Q5K>(n, w, ws, n_w, a, as, n_rows, y, ys, avx2::gemm_q5_K_q8_K);
}

void gemm_q2_K_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
                    float* y, size_t ys) {
  by_row_pairs<Q2K>(n, w, ws, n_w, a, as, n_rows, y, ys, avx2::gemm_q2_K_q8_K);
}

void gemm_q3_K_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
                    float* y, size_t ys) {
  by_row_pairs<Q3K>(n, w, ws, n_w, a, as, n_rows, y, ys, avx2::gemm_q3_K_q8_K);
}

void gemm_q4_1_q8_1(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
                    float* y, size_t ys) {
  by_row_pairs<Q1Kernel<block_q4_1, false>>(n, w, ws, n_w, a, as, n_rows, y, ys, avx2::gemm_q4_1_q8_1);
}

void gemm_q5_1_q8_1(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
                    float* y, size_t ys) {
  by_row_pairs<Q1Kernel<block_q5_1, true>>(n, w, ws, n_w, a, as, n_rows, y, ys, avx2::gemm_q5_1_q8_1);
}

void gemm_iq4_xs_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,
                      int64_t n_rows, float* y, size_t ys) {
  by_row_pairs<IQ4XS>(n, w, ws, n_w, a, as, n_rows, y, ys, avx2::gemm_iq4_xs_q8_K);
}

}  // namespace synapse::quant::avx512
#endif

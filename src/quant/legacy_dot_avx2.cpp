// AVX2 versions of the dots of the 32-element block formats (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4) with Q8_0/Q8_1 activations. legacy.cpp holds the
// scalar references and the order they define (ggml's AVX2 order): per block
// 8 int32 lanes, lane l = the exact integer dot of elements 4l..4l+3; each
// lane converted to float and accumulated with one fused multiply-add by
// d_w * d_a; the lanes reduced as hsum_float_8; for Q4_1/Q5_1 a separate
// float summs = fma(m_w, s_a, summs) per block, added last. Q4_0, Q5_0,
// Q8_0, IQ4_NL and MXFP4 instead sum each block's lanes to one exact
// integer and take one scalar fused multiply-add per block (legacy.cpp's
// Q4_0 order).
//
// The integer lanes are exact for every byte value: unsigned weight digits
// go through _mm256_maddubs_epi16 only where no pair can saturate (digits
// <= 63), with the offset (8, 16) subtracted as a second maddubs; signed
// int8 weights (Q8_0, IQ4_NL) are widened to int16 (even and odd bytes) and
// multiplied with _mm256_madd_epi16. (ggml's sign trick, abs(w) * sign(a, w),
// overflows when a = -128 and w < 0.) MXFP4's levels are at most 12 in
// magnitude, so the sign goes the other way, abs(a) * sign(w, a), which
// cannot overflow. Tested bit-equal to the scalar kernels
// (tests/quant/simd_test.cpp).
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "quant/formats.hpp"
#include "quant/avx2_util.hpp"
#include "quant/gemm.hpp"
#include "quant/gemm_tiles.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::avx2 {
namespace {

using namespace tiles;

// Lanes of sum (u - off) * a over groups of 4 bytes; u in 0..63.
inline __m256i lanes_unsigned(__m256i u, __m256i a, int off) {
  __m256i p = _mm256_maddubs_epi16(u, a);
  if (off != 0) p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(off)), a));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// Lanes of sum w * a over groups of 4 bytes, both signed int8 (any value).
inline __m256i lanes_signed(__m256i w, __m256i a) {
  return _mm256_add_epi32(_mm256_madd_epi16(even_bytes_i16(w), even_bytes_i16(a)),
                          _mm256_madd_epi16(odd_bytes_i16(w), odd_bytes_i16(a)));
}

// Lanes of sum w * a over groups of 4 bytes, |w| <= 12 and any int8 a:
// maddubs(|a|, w * sign(a)): |a| <= 128 as an unsigned byte, w * sign(a)
// fits an int8, and a pair sums to at most 2 * 128 * 12 in magnitude (no
// saturation).
inline __m256i lanes_small_signed(__m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(a), _mm256_sign_epi8(w, a)), _mm256_set1_epi16(1));
}

inline __m256 scale_fma(float d, __m256i lanes, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc);
}

// Q4_1 / Q5_1 (Q8_1 activations), IQ4_NL and MXFP4 (Q8_0) written for a tile of
// T activation rows against one weight row (the weight block unpacked once,
// then each activation row's steps): the single-row vec_dot is the tile of
// one and gemm_<t> (gemm.hpp) runs tiles of 4, so both give the same bits
// by construction. a: T activation rows, as bytes apart; y[m * ys].

// The digits of a Q4_1 / Q5_1 block (no offset: value = d * digit + m).
inline __m256i digits(const block_q4_1& b) { return unpack_nibbles(b.qs); }
inline __m256i digits(const block_q5_1& b) { return _mm256_or_si256(unpack_nibbles(b.qs), fifth_bits(b.qh)); }

template <int T, typename B>
void q_1_tile(int64_t nb, const B* w, const uint8_t* a, size_t as, float* y, size_t ys) {
  __m256 acc[T];
  float summs[T];
  for (int m = 0; m < T; ++m) acc[m] = _mm256_setzero_ps(), summs[m] = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i u = digits(w[i]);
    const float dw = h2f(w[i].d), mw = h2f(w[i].m);
    for (int m = 0; m < T; ++m) {
      const block_q8_1& b = reinterpret_cast<const block_q8_1*>(a + static_cast<size_t>(m) * as)[i];
      summs[m] = std::fma(mw, h2f(b.s), summs[m]);
      acc[m] = scale_fma(dw * h2f(b.d), lanes_unsigned(u, load32(b.qs), 0), acc[m]);
    }
  }
  for (int m = 0; m < T; ++m) y[m * ys] = hsum_float_8(acc[m]) + summs[m];
}

// The 4-bit table formats, IQ4_NL and MXFP4: each nibble indexes 16 int8
// levels (one pshufb), one scale per block. F: the format (Block, the
// table, the block's scale as a float, the exact integer lanes).
struct IQ4_NLFormat {
  using Block = block_iq4_nl;
  static const int8_t* table() { return kvalues_iq4nl; }
  static float scale(const Block& b) { return h2f(b.d); }
  static __m256i lanes(__m256i w, __m256i a) { return lanes_signed(w, a); }
};
struct MXFP4Format {
  using Block = block_mxfp4;
  static const int8_t* table() { return kvalues_mxfp4; }
  static float scale(const Block& b) { return kE8M0Half.v[b.e]; }
  static __m256i lanes(__m256i w, __m256i a) { return lanes_small_signed(w, a); }
};

// Per block and activation row legacy.cpp's Q4_0 order: the lanes summed
// to the block's exact integer dot, then acc = fma(float(isum), d_w * d_a,
// acc), d_w the fp16 d (IQ4_NL) or 2^(e - 128) (MXFP4). (Matrices with
// whole groups of 8 rows run interleave_avx2.cpp instead; this is for rows
// that are not interleaved.)
template <int T, class F>
void table4_tile(int64_t nb, const typename F::Block* w, const uint8_t* a, size_t as, float* y, size_t ys) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(F::table())));
  float acc[T];
  for (int m = 0; m < T; ++m) acc[m] = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles(w[i].qs));
    const float dw = F::scale(w[i]);
    for (int m = 0; m < T; ++m) {
      const block_q8_0& b = reinterpret_cast<const block_q8_0*>(a + static_cast<size_t>(m) * as)[i];
      const int isum = hsum_i32_8(F::lanes(q, load32(b.qs)));
      acc[m] = std::fma(static_cast<float>(isum), dw * h2f(b.d), acc[m]);
    }
  }
  for (int m = 0; m < T; ++m) y[m * ys] = acc[m];
}

struct Q4_1Tile {
  template <int T>
  void run(int64_t nb, const block_q4_1* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q_1_tile<T>(nb, w, a, as, y, ys);
  }
};
struct Q5_1Tile {
  template <int T>
  void run(int64_t nb, const block_q5_1* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q_1_tile<T>(nb, w, a, as, y, ys);
  }
};
template <class F>
struct Table4Tile {
  template <int T>
  void run(int64_t nb, const typename F::Block* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    table4_tile<T, F>(nb, w, a, as, y, ys);
  }
};
using IQ4_NLTile = Table4Tile<IQ4_NLFormat>;
using MXFP4Tile = Table4Tile<MXFP4Format>;

}  // namespace

float vec_dot_q4_0_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q4_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  // legacy.cpp's Q4_0 order: the block's exact integer dot, then one scalar
  // fused multiply-add per block. (Matrices run interleave_avx2.cpp instead;
  // this is for rows that are not interleaved.)
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const int isum = hsum_i32_8(lanes_unsigned(unpack_nibbles(w[i].qs), load32(a[i].qs), 8));
    acc = std::fma(static_cast<float>(isum), h2f(w[i].d) * h2f(a[i].d), acc);
  }
  return acc;
}

float vec_dot_q5_0_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q5_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  // legacy.cpp's Q4_0 order (as vec_dot_q4_0_q8_0 above).
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK5_0; ++i) {
    const __m256i u = _mm256_or_si256(unpack_nibbles(w[i].qs), fifth_bits(w[i].qh));
    const int isum = hsum_i32_8(lanes_unsigned(u, load32(a[i].qs), 16));
    acc = std::fma(static_cast<float>(isum), h2f(w[i].d) * h2f(a[i].d), acc);
  }
  return acc;
}

float vec_dot_q8_0_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q8_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  // legacy.cpp's Q4_0 order (as vec_dot_q4_0_q8_0 above).
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const int isum = hsum_i32_8(lanes_signed(load32(w[i].qs), load32(a[i].qs)));
    acc = std::fma(static_cast<float>(isum), h2f(w[i].d) * h2f(a[i].d), acc);
  }
  return acc;
}

float vec_dot_q4_1_q8_1(int64_t n, const void* vw, const void* va) {
  return dot_by_tile<Q4_1Tile, block_q4_1>(n / QK4_1, vw, va);
}

float vec_dot_q5_1_q8_1(int64_t n, const void* vw, const void* va) {
  return dot_by_tile<Q5_1Tile, block_q5_1>(n / QK5_1, vw, va);
}

float vec_dot_iq4_nl_q8_0(int64_t n, const void* vw, const void* va) {
  return dot_by_tile<IQ4_NLTile, block_iq4_nl>(n / QK4_NL, vw, va);
}

float vec_dot_mxfp4_q8_0(int64_t n, const void* vw, const void* va) {
  return dot_by_tile<MXFP4Tile, block_mxfp4>(n / QK_MXFP4, vw, va);
}

void gemm_q4_1_q8_1(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
                    float* y, size_t ys) {
  by_tiles<Q4_1Tile, block_q4_1>(Q4_1Tile{}, n / QK4_1, w, ws, n_w, a, as, n_rows, y, ys);
}

void gemm_q5_1_q8_1(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
                    float* y, size_t ys) {
  by_tiles<Q5_1Tile, block_q5_1>(Q5_1Tile{}, n / QK5_1, w, ws, n_w, a, as, n_rows, y, ys);
}

void gemm_iq4_nl_q8_0(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,
                      int64_t n_rows, float* y, size_t ys) {
  by_tiles<IQ4_NLTile, block_iq4_nl>(IQ4_NLTile{}, n / QK4_NL, w, ws, n_w, a, as, n_rows, y, ys);
}

void gemm_mxfp4_q8_0(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,
                     int64_t n_rows, float* y, size_t ys) {
  by_tiles<MXFP4Tile, block_mxfp4>(MXFP4Tile{}, n / QK_MXFP4, w, ws, n_w, a, as, n_rows, y, ys);
}

}  // namespace synapse::quant::avx2
#endif

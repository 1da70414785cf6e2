// AVX2 versions of the dots of the 256-element formats (Q2_K..Q6_K, IQ4_XS,
// TQ1_0, TQ2_0) with Q8_K activations, and of the Q8_K activation quantizer.
// k_quants.cpp and ternary.cpp hold the scalar references and the orders
// they define; every kernel here is tested bit-equal to its reference
// (tests/quant/simd_test.cpp).
//
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS: ggml's AVX2 ggml_vec_dot_<t>_q8_K,
// the order the x86 llama.cpp build runs (k_quants.cpp states it): per
// 32-element chunk _mm256_maddubs_epi16(digits, activations) (IQ4_XS: of
// |value| and the sign-adjusted activations) then _mm256_madd_epi16 with the
// chunk's scale words, so lane q holds elements 4q..4q+3; lanes summed over
// the block; _mm256_fmadd_ps per block; hsum_float_8 at the end (Q4_K:
// its block order instead, k_quants.cpp). Every
// integer step is exact (digits <= 63: no maddubs pair saturates; signed
// weights as digit - offset with a second maddubs of the offset). The
// Q4_K/Q5_K/Q6_K block steps live in avx2_util.hpp, shared with the
// multi-row kernels.
//
// TQ1_0, TQ2_0 and the Q8_K quantizer write the reference's float steps
// mul-then-add; `nc` keeps the compiler from contracting them into fused
// multiply-adds (this file is built with -mfma, and GCC contracts across
// intrinsics).
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

// ---------------------------------------------------------------- Q4_K
// vec_dot_q4_K_q8_K in k_quants.cpp's block order: the block's integer
// lanes (q4_K_lanes_direct) and min lanes (k4_min_lanes: madd of the mins
// with the int16 pair sums of bsums) each summed to one exact integer, then
// one scalar fused multiply-add per block into each of the two
// accumulators. (Matrices run
// interleave_avx2.cpp; this is for rows that are not interleaved.)
float vec_dot_q4_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q4_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  float acc = 0.0f, acc_min = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    __m256i sm;
    const int isum = hsum_i32_8(q4_K_lanes_direct(x[i], y[i].qs, sm));
    const int msum = hsum_i32_4(k4_min_lanes(sm, k4_bsum_pairs(y[i].bsums)));
    acc = std::fma(static_cast<float>(isum), h2f(x[i].d) * y[i].d, acc);
    acc_min = std::fma(static_cast<float>(msum), h2f(x[i].dmin) * y[i].d, acc_min);
  }
  return acc - acc_min;
}

// ---------------------------------------------------------------- Q5_K
// ggml's AVX2 ggml_vec_dot_q5_K_q8_K: lanes and acc as Q4_K; the min lanes
// added as integers, summs = fma(dmin, sum, summs); hsum_float_8(acc) + summs.
float vec_dot_q5_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q5_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  AccK s;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    BlockK4 k;
    unpack_q5_K(x[i], k);
    q5_K_step(s, k, y[i], k4_bsum_pairs(y[i].bsums));
  }
  return q5_K_result(s);
}

// ---------------------------------------------------------------- Q6_K
// ggml's AVX2 ggml_vec_dot_q6_K_q8_K: per block acc = fma(d, lanes, acc);
// hsum_float_8(acc).
float vec_dot_q6_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q6_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  AccK s;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    BlockQ6K k;
    unpack_q6_K(x[i], k);
    __m256i off[8];
    q6_offsets(y[i].qs, off);
    q6_K_step(s, k, y[i], off);
  }
  return q6_K_result(s);
}

namespace {

using namespace tiles;

// The dots below are written for a tile of T activation rows against one
// weight row (the weight block unpacked once, then each activation row's
// steps): the single-row vec_dot is the tile of one, and gemm_<t>_q8_K
// (gemm.hpp) runs tiles of 4, so both give the same bits by construction.
// a: T rows of block_q8_K, as bytes apart; y[m * ys].

// ---------------------------------------------------------------- Q3_K
// ggml's AVX2 ggml_vec_dot_q3_K_q8_K: digits low2 | high << 2 (element
// 128j + 32k + l: bits 2k of qs[32j + l], bit 4j + k of hmask[l]), offset 4
// as a second maddubs, scales - 32 per 16 elements; acc = fma(d, lanes, acc).
template <int T>
void q3_K_tile(int64_t nb, const block_q3_K* x, const uint8_t* a, size_t as, float* y, size_t ys) {
  const __m256i m3 = _mm256_set1_epi8(0x03), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
  __m256 acc[T];
  for (int m = 0; m < T; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i all = _mm256_cvtepi8_epi16(q3_K_scales(x[i].scales));
    const __m256i hm = load32(x[i].hmask);
    __m256i sumi[T];
    for (int m = 0; m < T; ++m) sumi[m] = _mm256_setzero_si256();
    for (int j = 0; j < 2; ++j) {
      const __m256i sc = j == 0 ? _mm256_permute4x64_epi64(all, 0x44) : _mm256_permute4x64_epi64(all, 0xEE);  // sub-blocks 8j..8j+7
      const __m256i q = load32(x[i].qs + 32 * j);
      for (int k = 0; k < 4; ++k) {
        const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3),
                                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, 4 * j + k), one), 2));
        const __m256i scale = _mm256_shuffle_epi8(sc, half_word_bcast_mask(k));
        for (int m = 0; m < T; ++m) {
          const __m256i av = load32(act_row<block_q8_K>(a, as, m)[i].qs + 128 * j + 32 * k);
          sumi[m] = nc(_mm256_add_epi32(sumi[m], chunk_lanes_off(u, av, _mm256_maddubs_epi16(four, av), scale)));
        }
      }
    }
    for (int m = 0; m < T; ++m) {
      const float d = act_row<block_q8_K>(a, as, m)[i].d * h2f(x[i].d);
      acc[m] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[m]), acc[m]);
    }
  }
  for (int m = 0; m < T; ++m) y[m * ys] = hsum_float_8(acc[m]);
}

// ---------------------------------------------------------------- Q2_K
// ggml's AVX2 ggml_vec_dot_q2_K_q8_K: per block first acc = fma(dmin,
// madd(mins, bsums), acc), then acc = fma(d, lanes, acc) with the 4-bit
// scales per 16 elements; hsum_float_8(acc).
template <int T>
void q2_K_tile(int64_t nb, const block_q2_K* x, const uint8_t* a, size_t as, float* y, size_t ys) {
  const __m256i m3 = _mm256_set1_epi8(0x03);
  const __m128i m4 = _mm_set1_epi8(0x0F);
  __m256 acc[T];
  for (int m = 0; m < T; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
    for (int m = 0; m < T; ++m) {
      const block_q8_K& b = act_row<block_q8_K>(a, as, m)[i];
      const float dmin = -b.d * h2f(x[i].dmin);
      acc[m] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, load32(b.bsums))), acc[m]);
    }
    const __m256i all = _mm256_cvtepu8_epi16(_mm_and_si128(sm, m4));
    __m256i sumi[T];
    for (int m = 0; m < T; ++m) sumi[m] = _mm256_setzero_si256();
    for (int j = 0; j < 2; ++j) {
      const __m256i sc = j == 0 ? _mm256_permute4x64_epi64(all, 0x44) : _mm256_permute4x64_epi64(all, 0xEE);  // sub-blocks 8j..8j+7
      const __m256i q = load32(x[i].qs + 32 * j);
      for (int k = 0; k < 4; ++k) {
        const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
        const __m256i scale = _mm256_shuffle_epi8(sc, half_word_bcast_mask(k));
        for (int m = 0; m < T; ++m) {
          const __m256i av = load32(act_row<block_q8_K>(a, as, m)[i].qs + 128 * j + 32 * k);
          sumi[m] = nc(_mm256_add_epi32(sumi[m], chunk_lanes(u, av, scale)));
        }
      }
    }
    for (int m = 0; m < T; ++m) {
      const float d = act_row<block_q8_K>(a, as, m)[i].d * h2f(x[i].d);
      acc[m] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[m]), acc[m]);
    }
  }
  for (int m = 0; m < T; ++m) y[m * ys] = hsum_float_8(acc[m]);
}

// ---------------------------------------------------------------- IQ4_XS
// ggml's AVX2 ggml_vec_dot_iq4_xs_q8_K: per sub-block of 32 the table
// values against the activations with ggml's mul_add_epi8 (maddubs(|v|,
// sign(a, v)), k_quants.cpp says what it computes for a = -128), madd with
// the scale ls - 32; acc = fma(d, lanes, acc) per block; hsum_float_8.
template <int T>
void iq4_xs_tile(int64_t nb, const block_iq4_xs* x, const uint8_t* a, size_t as, float* y, size_t ys) {
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kvalues_iq4nl)));
  __m256 acc[T];
  for (int m = 0; m < T; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t ibl = 0; ibl < nb; ++ibl) {
    __m256i sumi[T];
    for (int m = 0; m < T; ++m) sumi[m] = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      const int ls = ((x[ibl].scales_l[c / 2] >> 4 * (c % 2)) & 0xf) | (((x[ibl].scales_h >> 2 * c) & 3) << 4);
      const __m256i v = _mm256_shuffle_epi8(table, unpack_nibbles(x[ibl].qs + 16 * c));
      const __m256i abs_v = _mm256_sign_epi8(v, v), scale = _mm256_set1_epi16(static_cast<int16_t>(ls - 32));
      for (int m = 0; m < T; ++m) {
        const __m256i av = load32(act_row<block_q8_K>(a, as, m)[ibl].qs + 32 * c);
        const __m256i p = _mm256_maddubs_epi16(abs_v, _mm256_sign_epi8(av, v));
        sumi[m] = nc(_mm256_add_epi32(sumi[m], _mm256_madd_epi16(p, scale)));
      }
    }
    for (int m = 0; m < T; ++m) {
      const float d = h2f(x[ibl].d) * act_row<block_q8_K>(a, as, m)[ibl].d;
      acc[m] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[m]), acc[m]);
    }
  }
  for (int m = 0; m < T; ++m) y[m * ys] = hsum_float_8(acc[m]);
}

// ---------------------------------------------------------------- TQ2_0
// Reference: sumi = sum (digit - 1) * a over the block (exact), then
// sumf += sumi * (d_8 * d_w). qs[32 g + m] holds values 128 g + 32 k + m at bits 2k.
template <int T>
void tq2_0_tile(int64_t nb, const block_tq2_0* x, const uint8_t* a, size_t as, float* y, size_t ys) {
  const __m256i m2 = _mm256_set1_epi8(0x03), ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  float sumf[T];
  for (int m = 0; m < T; ++m) sumf[m] = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    __m256i acc[T];
    for (int m = 0; m < T; ++m) acc[m] = _mm256_setzero_si256();
    for (int g = 0; g < 2; ++g) {
      __m256i q = load32(x[i].qs + 32 * g);
      for (int k = 0; k < 4; ++k) {
        const __m256i digits = _mm256_and_si256(q, m2);
        for (int m = 0; m < T; ++m) {
          const __m256i av = load32(act_row<block_q8_K>(a, as, m)[i].qs + 128 * g + 32 * k);
          const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(digits, av), _mm256_maddubs_epi16(ones8, av));
          acc[m] = nc(_mm256_add_epi32(acc[m], _mm256_madd_epi16(p, ones16)));
        }
        q = _mm256_srli_epi16(q, 2);
      }
    }
    for (int m = 0; m < T; ++m) {
      const float d = act_row<block_q8_K>(a, as, m)[i].d * h2f(x[i].d);
      sumf[m] += nc(static_cast<float>(hsum_i32_8(acc[m])) * d);
    }
  }
  for (int m = 0; m < T; ++m) y[m * ys] = sumf[m];
}

struct Q3_KTile {
  template <int T>
  void run(int64_t nb, const block_q3_K* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q3_K_tile<T>(nb, w, a, as, y, ys);
  }
};
struct Q2_KTile {
  template <int T>
  void run(int64_t nb, const block_q2_K* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q2_K_tile<T>(nb, w, a, as, y, ys);
  }
};
struct IQ4_XSTile {
  template <int T>
  void run(int64_t nb, const block_iq4_xs* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    iq4_xs_tile<T>(nb, w, a, as, y, ys);
  }
};
struct TQ2_0Tile {
  template <int T>
  void run(int64_t nb, const block_tq2_0* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    tq2_0_tile<T>(nb, w, a, as, y, ys);
  }
};

}  // namespace

float vec_dot_q3_K_q8_K(int64_t n, const void* vw, const void* va) {
  return dot_by_tile<Q3_KTile, block_q3_K>(n / QK_K, vw, va);
}

float vec_dot_q2_K_q8_K(int64_t n, const void* vw, const void* va) {
  return dot_by_tile<Q2_KTile, block_q2_K>(n / QK_K, vw, va);
}

float vec_dot_iq4_xs_q8_K(int64_t n, const void* vw, const void* va) {
  return dot_by_tile<IQ4_XSTile, block_iq4_xs>(n / QK_K, vw, va);
}

float vec_dot_tq2_0_q8_K(int64_t n, const void* vw, const void* va) {
  return dot_by_tile<TQ2_0Tile, block_tq2_0>(n / QK_K, vw, va);
}

void gemm_q3_K_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
                    float* y, size_t ys) {
  by_tiles<Q3_KTile, block_q3_K>(Q3_KTile{}, n / QK_K, w, ws, n_w, a, as, n_rows, y, ys);
}

void gemm_q2_K_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
                    float* y, size_t ys) {
  by_tiles<Q2_KTile, block_q2_K>(Q2_KTile{}, n / QK_K, w, ws, n_w, a, as, n_rows, y, ys);
}

void gemm_iq4_xs_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,
                      int64_t n_rows, float* y, size_t ys) {
  by_tiles<IQ4_XSTile, block_iq4_xs>(IQ4_XSTile{}, n / QK_K, w, ws, n_w, a, as, n_rows, y, ys);
}

void gemm_tq2_0_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
                     float* y, size_t ys) {
  by_tiles<TQ2_0Tile, block_tq2_0>(TQ2_0Tile{}, n / QK_K, w, ws, n_w, a, as, n_rows, y, ys);
}

// ---------------------------------------------------------------- TQ1_0
// Reference: one exact integer sum per block, sumf += sum * (d_w * d_8).
// Trit k of a byte b: q = b * 3^k mod 256, trit = (3 q) >> 8, which is
// (q >= 86) + (q >= 171). qs[0..32): values m + 32k (k = 0..4); qs[32..48):
// 160 + m + 16k; qh[0..4): 240 + j + 4k (k = 0..3).
namespace {

// b * c mod 256 per byte.
inline __m256i mul_bytes(__m256i b, int c) {
  const __m256i f = _mm256_set1_epi16(static_cast<int16_t>(c));
  const __m256i even = _mm256_and_si256(_mm256_mullo_epi16(b, f), _mm256_set1_epi16(0x00FF));
  const __m256i odd = _mm256_mullo_epi16(_mm256_and_si256(b, _mm256_set1_epi16(static_cast<int16_t>(0xFF00))), f);
  return _mm256_or_si256(even, odd);
}

// Digits 0..2 (trit + 1) of bytes q.
inline __m256i trit_digits(__m256i q) {
  const __m256i ge86 = _mm256_cmpeq_epi8(_mm256_max_epu8(q, _mm256_set1_epi8(86)), q);
  const __m256i ge171 = _mm256_cmpeq_epi8(_mm256_max_epu8(q, _mm256_set1_epi8(static_cast<char>(171))), q);
  return _mm256_sub_epi8(_mm256_setzero_si256(), _mm256_add_epi8(ge86, ge171));
}

// Lanes of sum (digit - 1) * a.
inline __m256i trit_lanes(__m256i digits, __m256i a) {
  const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(digits, a), _mm256_maddubs_epi16(_mm256_set1_epi8(1), a));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

inline int unpack_trit(uint8_t byte, int k) {
  constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t q = static_cast<uint8_t>(byte * kPow3[k]);
  return ((static_cast<uint16_t>(q) * 3) >> 8) - 1;
}

}  // namespace

float vec_dot_tq1_0_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_tq1_0*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  constexpr int kPow3[5] = {1, 3, 9, 27, 81};
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const int8_t* q8 = y[i].qs;
    const __m256i b32 = load32(x[i].qs);
    // qs[32..48) twice: the low half is used with values 160 + m + 16k (k even
    // pairs are loaded as two 16-byte halves).
    const __m128i b16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].qs + 32));
    const __m256i b16x2 = _mm256_set_m128i(b16, b16);
    __m256i acc = _mm256_setzero_si256();
    for (int k = 0; k < 5; ++k) {
      acc = _mm256_add_epi32(acc, trit_lanes(trit_digits(mul_bytes(b32, kPow3[k])), load32(q8 + 32 * k)));
    }
    const __m256i d16[3] = {trit_digits(mul_bytes(b16x2, 1)), trit_digits(mul_bytes(b16x2, 3)),
                            trit_digits(mul_bytes(b16x2, 9))};
    const __m256i d16b[2] = {trit_digits(mul_bytes(b16x2, 27)), trit_digits(mul_bytes(b16x2, 81))};
    // values 160..191: k = 0 (low half) and k = 1 (high half)
    acc = _mm256_add_epi32(acc, trit_lanes(_mm256_blend_epi32(d16[0], d16[1], 0xF0), load32(q8 + 160)));
    // values 192..223: k = 2 and k = 3
    acc = _mm256_add_epi32(acc, trit_lanes(_mm256_blend_epi32(d16[2], d16b[0], 0xF0), load32(q8 + 192)));
    int sum = hsum_i32_8(acc);
    // values 224..239: k = 4 (16 bytes)
    const __m128i d4 = _mm256_castsi256_si128(d16b[1]);
    const __m128i a4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q8 + 224));
    __m128i p4 = _mm_sub_epi16(_mm_maddubs_epi16(d4, a4), _mm_maddubs_epi16(_mm_set1_epi8(1), a4));
    p4 = _mm_madd_epi16(p4, _mm_set1_epi16(1));
    p4 = _mm_add_epi32(p4, _mm_unpackhi_epi64(p4, p4));
    p4 = _mm_add_epi32(p4, _mm_shuffle_epi32(p4, 1));
    sum += _mm_cvtsi128_si32(p4);
    for (int k = 0; k < 4; ++k) {
      for (int j = 0; j < 4; ++j) sum += unpack_trit(x[i].qh[j], k) * q8[240 + 4 * k + j];
    }
    sumf += nc(static_cast<float>(sum) * (h2f(x[i].d) * y[i].d));
  }
  return sumf;
}

// ---------------------------------------------------------------- Q8_K
// quantize_row_q8_K_ref (k_quants.cpp): max = first element of largest |x|
// (NaN never wins), iscale = -127 / max, q = min(127, nearest_int(iscale * x))
// truncated to 8 bits, bsums = sums of 16, d = 1 / iscale; all-zero block:
// d = 0, q = 0, bsums = 0.
void quantize_row_q8_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q8_K*>(vy);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < QK_K; j += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), m);
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    if (amax == 0.f) {
      std::memset(&y[i], 0, sizeof(block_q8_K));
      continue;
    }
    float max = 0.0f;
    const __m256 va = _mm256_set1_ps(amax);
    for (int j = 0; j < QK_K; j += 8) {
      const __m256 v = _mm256_loadu_ps(x + j);
      const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v), va, _CMP_EQ_OQ));
      if (mask != 0) {
        max = x[j + __builtin_ctz(static_cast<unsigned>(mask))];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 vs = _mm256_set1_ps(iscale), magic = _mm256_set1_ps(12582912.f);
    const __m256i mant = _mm256_set1_epi32(0x007fffff), bias = _mm256_set1_epi32(0x00400000);
    const __m256i m127 = _mm256_set1_epi32(127), low = _mm256_set1_epi32(0xFF);
    for (int j = 0; j < QK_K; j += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 v = _mm256_add_ps(nc(_mm256_mul_ps(vs, _mm256_loadu_ps(x + j + 8 * k))), magic);
        __m256i iv = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(v), mant), bias);
        q[k] = _mm256_and_si256(_mm256_min_epi32(iv, m127), low);  // low 8 bits, as the int8_t cast
      }
      __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(q[0], q[1]), _mm256_packus_epi32(q[2], q[3]));
      p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + j), p);
      // bsums of the two 16s: unsigned byte sums of q + 128, less 16 * 128
      const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(p, _mm256_set1_epi8(static_cast<char>(0x80))),
                                        _mm256_setzero_si256());
      int64_t s64[4];
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(s64), s);
      y[i].bsums[j / 16] = static_cast<int16_t>(s64[0] + s64[1] - 2048);
      y[i].bsums[j / 16 + 1] = static_cast<int16_t>(s64[2] + s64[3] - 2048);
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace synapse::quant::avx2
#endif

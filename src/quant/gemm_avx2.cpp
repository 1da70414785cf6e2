// AVX2 multi-row dots (gemm.hpp): one weight row against a tile of up to 4
// activation rows, each weight block unpacked once per tile. Per activation
// row every step is the one of the single-row AVX2 kernel of the same type
// (legacy_dot_avx2.cpp, k_quants_avx2.cpp, float_avx2.cpp; the orders are
// explained there): the same integer instructions on the same operands, the
// same float multiplies / adds / fused multiply-adds in the same order, the
// same final reduction. Only the weight-side work (nibble and high-bit
// unpacking, byte permutes, scale decoding, F16 conversion) is hoisted out
// of the loop over rows, and for Q4_K/Q5_K/Q6_K the activation-side byte
// permute is done once per matrix product (pack_q8_K_permuted) instead of
// once per weight row: the kernels read the same permuted bytes. Tested bit-equal per row, for 1..17 rows, in
// tests/quant/gemm_test.cpp.
//
// The small helpers (F16 conversion, lane sums, scale decoding) come from
// quant/avx2_util.hpp, shared with the single-row kernels.
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "quant/formats.hpp"
#include "quant/avx2_util.hpp"
#include "quant/gemm.hpp"

namespace synapse::quant::avx2 {
namespace {

constexpr int kTile = 4;  // activation rows per weight-block unpack






template <typename B>
inline const B* act_row(const uint8_t* a, size_t stride, int m) {
  return reinterpret_cast<const B*>(a + static_cast<size_t>(m) * stride);
}

// ------------------------------------------------ 32-element blocks (Q8_0 activations)


// vec_dot_q4_0_q8_0, T rows at a time.
template <int T>
void q4_0_tile(int64_t nb, const block_q4_0* w, const uint8_t* a, size_t as, float* y, size_t ys) {
  __m256 acc[T];
  for (int m = 0; m < T; ++m) acc[m] = _mm256_setzero_ps();
  const __m256i off = _mm256_set1_epi8(8), ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i u = unpack_nibbles(w[i].qs);
    const float dw = h2f(w[i].d);
    for (int m = 0; m < T; ++m) {
      const block_q8_0* b = act_row<block_q8_0>(a, as, m) + i;
      const __m256i av = load32(b->qs);
      const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, av), _mm256_maddubs_epi16(off, av));
      const __m256i l = _mm256_madd_epi16(p, ones);
      acc[m] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(b->d)), _mm256_cvtepi32_ps(l), acc[m]);
    }
  }
  for (int m = 0; m < T; ++m) y[m * ys] = hsum_float_8(acc[m]);
}

// vec_dot_q8_0_q8_0 (both operands signed, widened to int16), T rows at a time.
template <int T>
void q8_0_tile(int64_t nb, const block_q8_0* w, const uint8_t* a, size_t as, float* y, size_t ys) {
  __m256 acc[T];
  for (int m = 0; m < T; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i wq = load32(w[i].qs);
    const __m256i we = _mm256_srai_epi16(_mm256_slli_epi16(wq, 8), 8), wo = _mm256_srai_epi16(wq, 8);
    const float dw = h2f(w[i].d);
    for (int m = 0; m < T; ++m) {
      const block_q8_0* b = act_row<block_q8_0>(a, as, m) + i;
      const __m256i av = load32(b->qs);
      const __m256i ae = _mm256_srai_epi16(_mm256_slli_epi16(av, 8), 8), ao = _mm256_srai_epi16(av, 8);
      const __m256i l = _mm256_add_epi32(_mm256_madd_epi16(we, ae), _mm256_madd_epi16(wo, ao));
      acc[m] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(b->d)), _mm256_cvtepi32_ps(l), acc[m]);
    }
  }
  for (int m = 0; m < T; ++m) y[m * ys] = hsum_float_8(acc[m]);
}

// ------------------------------------------------ 256-element blocks (Q8_K activations)

// In each 16-byte half, bytes k and k + 8 side by side (k = 0..7).
inline __m256i perm(__m256i v) {
  const __m256i s = _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,  //
                                     0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  return _mm256_shuffle_epi8(v, s);
}






// min_term's mins operand: mins[j / 2] as int16 in word j.
inline __m256i mins_words(const uint8_t* mins) {
  const __m128i m = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mins)));
  return _mm256_set_m128i(_mm_unpackhi_epi16(m, m), _mm_unpacklo_epi16(m, m));
}

// A Q4_K / Q5_K block unpacked: permuted digits of the 8 groups of 32, the
// 4 scale word pairs, the min words and the two F16 scales.
struct UnpackedK4 {
  __m256i u[8];
  __m256i sc[4];
  __m256i mins;
  float d, dmin;
};

// Per activation row, the body of vec_dot_q4_K_q8_K / vec_dot_q5_K_q8_K.
template <int T>
inline void k4_rows(const UnpackedK4& k, int64_t i, const uint8_t* a, size_t as, __m256* sums, float* sumf) {
  for (int m = 0; m < T; ++m) {
    const block_q8_K* b = act_row<block_q8_K>(a, as, m) + i;
    const int8_t* q8 = b->qs;
    Mod8 acc;
    for (int j = 0; j < QK_K / 64; ++j)
      acc.add(k.u[2 * j], load32(q8 + 64 * j), k.u[2 * j + 1], load32(q8 + 64 * j + 32), k.sc[j], 0);
    const int sumi = hsum_i32_8(_mm256_madd_epi16(k.mins, load32(b->bsums)));
    sums[m] = add_scaled(sums[m], k.d * b->d, acc.lanes());
    const float dmin = k.dmin * b->d;
    sumf[m] -= nc(dmin * static_cast<float>(sumi));
  }
}

template <int T>
void q4_K_tile(int64_t nb, const block_q4_K* x, const uint8_t* a, size_t as, float* y, size_t ys) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 sums[T];
  float sumf[T];
  for (int m = 0; m < T; ++m) {
    sums[m] = _mm256_setzero_ps();
    sumf[m] = 0.0f;
  }
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sm[16];
    scales_mins_k4(x[i].scales, sm);
    UnpackedK4 k;
    for (int j = 0; j < QK_K / 64; ++j) {
      const __m256i q = perm(load32(x[i].qs + 32 * j));
      k.u[2 * j] = _mm256_and_si256(q, m4);
      k.u[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      k.sc[j] = _mm256_set1_epi32(word_pair(sm[2 * j], sm[2 * j + 1]));
    }
    k.mins = mins_words(sm + 8);
    k.d = h2f(x[i].d);
    k.dmin = h2f(x[i].dmin);
    k4_rows<T>(k, i, a, as, sums, sumf);
  }
  for (int m = 0; m < T; ++m) y[m * ys] = add_lanes_in_order(sumf[m], sums[m]);
}

template <int T>
void q5_K_tile(int64_t nb, const block_q5_K* x, const uint8_t* a, size_t as, float* y, size_t ys) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1), two = _mm256_set1_epi8(2);
  __m256 sums[T];
  float sumf[T];
  for (int m = 0; m < T; ++m) {
    sums[m] = _mm256_setzero_ps();
    sumf[m] = 0.0f;
  }
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sm[16];
    scales_mins_k4(x[i].scales, sm);
    UnpackedK4 k;
    __m256i h = perm(load32(x[i].qh));
    for (int j = 0; j < QK_K / 64; ++j) {
      const __m256i q = perm(load32(x[i].qs + 32 * j));
      k.u[2 * j] = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
      k.u[2 * j + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                       _mm256_slli_epi16(_mm256_and_si256(h, two), 3));
      h = _mm256_srli_epi16(h, 2);
      k.sc[j] = _mm256_set1_epi32(word_pair(sm[2 * j], sm[2 * j + 1]));
    }
    k.mins = mins_words(sm + 8);
    k.d = h2f(x[i].d);
    k.dmin = h2f(x[i].dmin);
    k4_rows<T>(k, i, a, as, sums, sumf);
  }
  for (int m = 0; m < T; ++m) y[m * ys] = add_lanes_in_order(sumf[m], sums[m]);
}

template <int T>
void q6_K_tile(int64_t nb, const block_q6_K* x, const uint8_t* a, size_t as, float* y, size_t ys) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03), m30 = _mm256_set1_epi8(0x30);
  __m256 sums[T];
  for (int m = 0; m < T; ++m) sums[m] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i u[8], sc[4];
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[i].ql + 64 * h;
      const int8_t* s = x[i].scales + 8 * h;
      const __m256i qa = perm(load32(ql)), qb = perm(load32(ql + 32)), qh = perm(load32(x[i].qh + 32 * h));
      u[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(qa, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
      u[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(qb, m4),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
      u[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4), _mm256_and_si256(qh, m30));
      u[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4),
                                     _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
      sc[2 * h] = _mm256_set_m128i(_mm_set1_epi32(word_pair(s[1], s[3])), _mm_set1_epi32(word_pair(s[0], s[2])));
      sc[2 * h + 1] = _mm256_set_m128i(_mm_set1_epi32(word_pair(s[5], s[7])), _mm_set1_epi32(word_pair(s[4], s[6])));
    }
    const float d = h2f(x[i].d);
    for (int m = 0; m < T; ++m) {
      const block_q8_K* b = act_row<block_q8_K>(a, as, m) + i;
      Mod8 acc;
      for (int h = 0; h < 2; ++h) {
        const int8_t* q8 = b->qs + 128 * h;
        acc.add(u[4 * h + 0], load32(q8), u[4 * h + 1], load32(q8 + 32), sc[2 * h], 32);
        acc.add(u[4 * h + 2], load32(q8 + 64), u[4 * h + 3], load32(q8 + 96), sc[2 * h + 1], 32);
      }
      sums[m] = add_scaled(sums[m], d * b->d, acc.lanes());
    }
  }
  for (int m = 0; m < T; ++m) y[m * ys] = add_lanes_in_order(0.0f, sums[m]);
}

// ------------------------------------------------ F32 / F16

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const ggml_fp16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline float get1(float v) { return v; }
inline float get1(ggml_fp16_t v) { return fp16_to_fp32(v); }

// float_avx2.cpp's dot: one fused multiply-add chain over n - n % 8
// elements, hsum_float_8, then the tail one std::fma at a time.
template <int T, typename E>
void float_tile(int64_t n, const E* w, const uint8_t* a, size_t as, float* y, size_t ys) {
  __m256 acc[T];
  for (int m = 0; m < T; ++m) acc[m] = _mm256_setzero_ps();
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 wv = load8(w + i);
    for (int m = 0; m < T; ++m) acc[m] = _mm256_fmadd_ps(wv, load8(act_row<E>(a, as, m) + i), acc[m]);
  }
  for (int m = 0; m < T; ++m) {
    const E* am = act_row<E>(a, as, m);
    float sum = hsum_float_8(acc[m]);
    for (int64_t i = n8; i < n; ++i) sum = std::fma(get1(w[i]), get1(am[i]), sum);
    y[m * ys] = sum;
  }
}

// Runs tile<T>(args) over n_rows rows in tiles of kTile, the last one
// smaller; `Tile` is a template functor with `template <int T> void run(...)`.
template <typename Tile, typename W>
void by_tiles(Tile tile, int64_t nb, const W* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  int64_t m = 0;
  for (; m + kTile <= n_rows; m += kTile) tile.template run<kTile>(nb, w, a + m * as, as, y + m * ys, ys);
  switch (n_rows - m) {
    case 3: tile.template run<3>(nb, w, a + m * as, as, y + m * ys, ys); break;
    case 2: tile.template run<2>(nb, w, a + m * as, as, y + m * ys, ys); break;
    case 1: tile.template run<1>(nb, w, a + m * as, as, y + m * ys, ys); break;
    default: break;
  }
}
static_assert(kTile == 4, "by_tiles handles remainders up to 3");

struct Q4_0Tile {
  template <int T>
  void run(int64_t nb, const block_q4_0* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q4_0_tile<T>(nb, w, a, as, y, ys);
  }
};
struct Q8_0Tile {
  template <int T>
  void run(int64_t nb, const block_q8_0* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q8_0_tile<T>(nb, w, a, as, y, ys);
  }
};
struct Q4_KTile {
  template <int T>
  void run(int64_t nb, const block_q4_K* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q4_K_tile<T>(nb, w, a, as, y, ys);
  }
};
struct Q5_KTile {
  template <int T>
  void run(int64_t nb, const block_q5_K* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q5_K_tile<T>(nb, w, a, as, y, ys);
  }
};
struct Q6_KTile {
  template <int T>
  void run(int64_t nb, const block_q6_K* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q6_K_tile<T>(nb, w, a, as, y, ys);
  }
};
struct FloatTile {
  template <int T, typename E>
  void run(int64_t n, const E* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    float_tile<T>(n, w, a, as, y, ys);
  }
};

}  // namespace

void pack_q8_K_permuted(int64_t n, const void* src, void* dst) {
  std::memcpy(dst, src, static_cast<size_t>(n / QK_K) * sizeof(block_q8_K));
  auto* b = static_cast<block_q8_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i)
    for (int c = 0; c < QK_K; c += 32)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + c), perm(load32(b[i].qs + c)));
}

void gemm_q4_0_q8_0(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(Q4_0Tile{}, n / QK4_0, static_cast<const block_q4_0*>(w), a, as, n_rows, y, ys);
}

void gemm_q8_0_q8_0(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(Q8_0Tile{}, n / QK8_0, static_cast<const block_q8_0*>(w), a, as, n_rows, y, ys);
}

void gemm_q4_K_q8_K(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(Q4_KTile{}, n / QK_K, static_cast<const block_q4_K*>(w), a, as, n_rows, y, ys);
}

void gemm_q5_K_q8_K(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(Q5_KTile{}, n / QK_K, static_cast<const block_q5_K*>(w), a, as, n_rows, y, ys);
}

void gemm_q6_K_q8_K(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(Q6_KTile{}, n / QK_K, static_cast<const block_q6_K*>(w), a, as, n_rows, y, ys);
}

void gemm_f16_f16(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(FloatTile{}, n, static_cast<const ggml_fp16_t*>(w), a, as, n_rows, y, ys);
}

void gemm_f32_f32(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(FloatTile{}, n, static_cast<const float*>(w), a, as, n_rows, y, ys);
}

}  // namespace synapse::quant::avx2
#endif

// AVX2 multi-row dots (gemm.hpp) of the K-quants with Q8_K activations:
// gemm_* take one weight row against a tile of activation rows, each weight
// block unpacked once per tile; the orders are those of the single-row
// kernels in k_quants_avx2.cpp (explained there), per output element the
// same integer instructions on the same operands and the same float
// operations in the same order. Tested bit-equal per row in
// tests/quant/gemm_test.cpp.
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>

#include "quant/avx2_util.hpp"
#include "quant/formats.hpp"
#include "quant/gemm.hpp"
#include "quant/gemm_tiles.hpp"

namespace synapse::quant::avx2 {
namespace {

using namespace tiles;

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

}  // namespace

void pack_q8_K_permuted(int64_t n, const void* src, void* dst) {
  std::memcpy(dst, src, static_cast<size_t>(n / QK_K) * sizeof(block_q8_K));
  auto* b = static_cast<block_q8_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i)
    for (int c = 0; c < QK_K; c += 32)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + c), perm(load32(b[i].qs + c)));
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

}  // namespace synapse::quant::avx2
#endif

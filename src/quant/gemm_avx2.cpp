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
#include "quant/gemm_tiles.hpp"

namespace synapse::quant::avx2 {
namespace {

using namespace tiles;








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
struct FloatTile {
  template <int T, typename E>
  void run(int64_t n, const E* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    float_tile<T>(n, w, a, as, y, ys);
  }
};

// ------------------------------------------------ decode: R weight rows, one activation row



// vec_dot_q4_0_q8_0 for R weight rows; the activation-side offset product
// maddubs(8, a) is computed once per block for all rows.
template <int R>
void q4_0_rows(int64_t nb, const uint8_t* w, size_t ws, const block_q8_0* a, float* y) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i off = _mm256_set1_epi8(8), ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i av = load32(a[i].qs);
    const __m256i ao = _mm256_maddubs_epi16(off, av);
    const float da = h2f(a[i].d);
    for (int r = 0; r < R; ++r) {
      const block_q4_0* b = weight_row<block_q4_0>(w, ws, r) + i;
      const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(unpack_nibbles(b->qs), av), ao);
      const __m256i l = _mm256_madd_epi16(p, ones);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b->d) * da), _mm256_cvtepi32_ps(l), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = hsum_float_8(acc[r]);
}

// vec_dot_q8_0_q8_0 for R weight rows; the activation is widened once.
template <int R>
void q8_0_rows(int64_t nb, const uint8_t* w, size_t ws, const block_q8_0* a, float* y) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256i av = load32(a[i].qs);
    const __m256i ae = _mm256_srai_epi16(_mm256_slli_epi16(av, 8), 8), ao = _mm256_srai_epi16(av, 8);
    const float da = h2f(a[i].d);
    for (int r = 0; r < R; ++r) {
      const block_q8_0* b = weight_row<block_q8_0>(w, ws, r) + i;
      const __m256i wq = load32(b->qs);
      const __m256i we = _mm256_srai_epi16(_mm256_slli_epi16(wq, 8), 8), wo = _mm256_srai_epi16(wq, 8);
      const __m256i l = _mm256_add_epi32(_mm256_madd_epi16(we, ae), _mm256_madd_epi16(wo, ao));
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b->d) * da), _mm256_cvtepi32_ps(l), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = hsum_float_8(acc[r]);
}

// float_tile with the roles swapped: R weight rows, one activation row.
template <int R, typename E>
void float_rows(int64_t n, const uint8_t* w, size_t ws, const E* a, float* y) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t n8 = n - n % 8;
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 av = load8(a + i);
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(load8(weight_row<E>(w, ws, r) + i), av, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    const E* wr = weight_row<E>(w, ws, r);
    float sum = hsum_float_8(acc[r]);
    for (int64_t i = n8; i < n; ++i) sum = std::fma(get1(wr[i]), get1(a[i]), sum);
    y[r] = sum;
  }
}


struct Q4_0Rows {
  int64_t nb;
  const block_q8_0* a;
  template <int R>
  void run(const uint8_t* w, size_t ws, float* y) const { q4_0_rows<R>(nb, w, ws, a, y); }
};
struct Q8_0Rows {
  int64_t nb;
  const block_q8_0* a;
  template <int R>
  void run(const uint8_t* w, size_t ws, float* y) const { q8_0_rows<R>(nb, w, ws, a, y); }
};
template <typename E>
struct FloatRows {
  int64_t n;
  const E* a;
  template <int R>
  void run(const uint8_t* w, size_t ws, float* y) const { float_rows<R>(n, w, ws, a, y); }
};

}  // namespace

void gemv_q4_0_q8_0(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, float* y) {
  by_row_groups(Q4_0Rows{n / QK4_0, reinterpret_cast<const block_q8_0*>(a)}, w, ws, n_w, y);
}

void gemv_q8_0_q8_0(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, float* y) {
  by_row_groups(Q8_0Rows{n / QK8_0, reinterpret_cast<const block_q8_0*>(a)}, w, ws, n_w, y);
}

void gemv_f16_f16(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, float* y) {
  by_row_groups(FloatRows<ggml_fp16_t>{n, reinterpret_cast<const ggml_fp16_t*>(a)}, w, ws, n_w, y);
}

void gemv_f32_f32(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, float* y) {
  by_row_groups(FloatRows<float>{n, reinterpret_cast<const float*>(a)}, w, ws, n_w, y);
}

void gemm_q4_0_q8_0(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(Q4_0Tile{}, n / QK4_0, static_cast<const block_q4_0*>(w), a, as, n_rows, y, ys);
}

void gemm_q8_0_q8_0(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(Q8_0Tile{}, n / QK8_0, static_cast<const block_q8_0*>(w), a, as, n_rows, y, ys);
}

void gemm_f16_f16(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(FloatTile{}, n, static_cast<const ggml_fp16_t*>(w), a, as, n_rows, y, ys);
}

void gemm_f32_f32(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(FloatTile{}, n, static_cast<const float*>(w), a, as, n_rows, y, ys);
}

}  // namespace synapse::quant::avx2
#endif

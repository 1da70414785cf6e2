// AVX2 multi-row dots (gemm.hpp) of the 32-element format Q8_0 (Q4_0 and
// Q5_0 matrices run interleaved: interleave_avx2.cpp) and of F16/F32:
// gemm_* take register tiles of 2 weight rows by 4 activation rows
// (F16/F32: one weight row by 4; prefill), gemv_* up to 4 weight rows
// against one activation row (decode). Per output element every step is the
// one of the single-row AVX2 kernel of the same type (legacy_dot_avx2.cpp,
// float_avx2.cpp; the orders are explained there): the same exact integer
// lanes (Q8_0: summed to the block's one integer), the same float
// multiplies / fused multiply-adds in the same order, the same final
// reduction (F16/F32). Only work that does not depend on the pair is
// hoisted: the weight-side unpacking per weight block, and the
// activation-side work once per matrix product (pack_q8_0_for_q8_0: F16
// scale to float, int16 widening). The K-quant kernels are in
// gemm_k_avx2.cpp. Tested bit-equal per row in tests/quant/gemm_test.cpp.
//
// The small helpers (F16 conversion, lane sums, nibble unpacking) come from
// quant/avx2_util.hpp, shared with the single-row kernels.
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "quant/formats.hpp"
#include "quant/avx2_util.hpp"
#include "quant/gemm.hpp"
#include "quant/gemm_packs.hpp"
#include "quant/gemm_tiles.hpp"

namespace synapse::quant::avx2 {
namespace {

using namespace tiles;

// ------------------------------------------------ 32-element blocks (Q8_0 activations)
//
// The Q8_0 kernels read the activation rows in a packed layout made once
// per matrix product (pack_q8_0_for_q8_0): per 32-element block the
// activation-side work of the single-row kernel done ahead (the F16 scale
// converted to float, the bytes widened to int16 even/odd words). The integer lanes are the same exact integers and the float
// steps the same operations, so every output equals the vec_dot.

// The packed activation block: PackedQ8_0 (gemm_packs.hpp).

// Q8_0 lanes: even and odd int16 products, pairwise, added.
inline __m256i q8_0_lanes(__m256i we, __m256i wo, const PackedQ8_0& b) {
  return _mm256_add_epi32(_mm256_madd_epi16(we, load32(b.e)), _mm256_madd_epi16(wo, load32(b.o)));
}

// The same register tile for Q8_0 (weights widened to int16 once per block).
template <int R, int A>
void q8_0_block(int64_t nb, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* y, size_t ys) {
  float acc[R][A] = {};
  const float* f16 = f16_table();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i we[R], wo[R];
    float dw[R];
    for (int r = 0; r < R; ++r) {
      const block_q8_0& b = weight_row<block_q8_0>(w, ws, r)[i];
      const __m256i wq = load32(b.qs);
      we[r] = even_bytes_i16(wq);
      wo[r] = odd_bytes_i16(wq);
      dw[r] = f16[b.d];
    }
    for (int m = 0; m < A; ++m) {
      const PackedQ8_0& b = act_row<PackedQ8_0>(a, as, m)[i];
      for (int r = 0; r < R; ++r)
        acc[r][m] = std::fma(static_cast<float>(hsum_i32_8(q8_0_lanes(we[r], wo[r], b))), dw[r] * b.d, acc[r][m]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < A; ++m) y[m * ys + r] = acc[r][m];
}

// ------------------------------------------------ F32 / F16

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const ggml_fp16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline float get1(float v) { return v; }
inline float get1(ggml_fp16_t v) { return fp16_to_fp32(v); }

// float_avx2.cpp's dot (float.cpp's order of llama.cpp's AVX-512 build):
// n % 16 == 0, a 16-lane fused multiply-add accumulator per output as two
// __m256, hsum_float_16; any other n, ggml_vec_dot_*'s order, one output at
// a time (the vec_dot kernel: no Llama-family shape takes that path in a
// model of any size, stories260K's 172-column ffn_down aside).
inline float vec_dot1(int64_t n, const float* w, const float* a) { return vec_dot_f32_f32(n, w, a); }
inline float vec_dot1(int64_t n, const ggml_fp16_t* w, const ggml_fp16_t* a) { return vec_dot_f16_f16(n, w, a); }

template <int T, typename E>
void float_tile(int64_t n, const E* w, const uint8_t* a, size_t as, float* y, size_t ys) {
  if (n % 16 != 0) {
    for (int m = 0; m < T; ++m) y[m * ys] = vec_dot1(n, w, act_row<E>(a, as, m));
    return;
  }
  __m256 lo[T], hi[T];
  for (int m = 0; m < T; ++m) lo[m] = hi[m] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __m256 wl = load8(w + i), wh = load8(w + i + 8);
    for (int m = 0; m < T; ++m) {
      lo[m] = _mm256_fmadd_ps(wl, load8(act_row<E>(a, as, m) + i), lo[m]);
      hi[m] = _mm256_fmadd_ps(wh, load8(act_row<E>(a, as, m) + i + 8), hi[m]);
    }
  }
  for (int m = 0; m < T; ++m) y[m * ys] = hsum_float_8(_mm256_add_ps(hi[m], lo[m]));
}

struct Q8_0Block {
  int64_t nb;
  template <int R, int A>
  void run(const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* y, size_t ys) const {
    q8_0_block<R, A>(nb, w, ws, a, as, y, ys);
  }
};
struct FloatTile {
  template <int T, typename E>
  void run(int64_t n, const E* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    float_tile<T>(n, w, a, as, y, ys);
  }
};

// ------------------------------------------------ decode: R weight rows, one activation row

// vec_dot_q8_0_q8_0 for R weight rows against one packed activation row.
template <int R>
void q8_0_rows(int64_t nb, const uint8_t* w, size_t ws, const PackedQ8_0* a, float* y) {
  float acc[R] = {};
  const float* f16 = f16_table();
  const PrefetchDistances pf = prefetch_distances();
  // Unrolled: the loop's counter and pointer updates were a fifth of the
  // instructions of a block (docs/PERFORMANCE.md, "Measurements moved out
  // of the code"). Same operations per row, in the same order.
#pragma GCC unroll 4
  for (int64_t i = 0; i < nb; ++i) {
    for (int r = 0; r < R; ++r) {
      const block_q8_0* b = weight_row<block_q8_0>(w, ws, r) + i;
      prefetch_ahead(b, pf);
      const __m256i wq = load32(b->qs);
      const __m256i we = even_bytes_i16(wq), wo = odd_bytes_i16(wq);
      acc[r] = std::fma(static_cast<float>(hsum_i32_8(q8_0_lanes(we, wo, a[i]))), f16[b->d] * a[i].d, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = acc[r];
}

// float_tile with the roles swapped: R weight rows, one activation row.
template <int R, typename E>
void float_rows(int64_t n, const uint8_t* w, size_t ws, const E* a, float* y) {
  if (n % 16 != 0) {
    for (int r = 0; r < R; ++r) y[r] = vec_dot1(n, weight_row<E>(w, ws, r), a);
    return;
  }
  __m256 lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __m256 al = load8(a + i), ah = load8(a + i + 8);
    for (int r = 0; r < R; ++r) {
      lo[r] = _mm256_fmadd_ps(load8(weight_row<E>(w, ws, r) + i), al, lo[r]);
      hi[r] = _mm256_fmadd_ps(load8(weight_row<E>(w, ws, r) + i + 8), ah, hi[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = hsum_float_8(_mm256_add_ps(hi[r], lo[r]));
}

// Rows side by side in the decode kernels (tiles::by_row_groups): Q8_0 (two
// loads per block) streams best one row at a time (docs/PERFORMANCE.md,
// "Measurements moved out of the code").
struct Q8_0Rows {
  static constexpr int kGroup = 1;
  int64_t nb;
  const PackedQ8_0* a;
  template <int R>
  void run(const uint8_t* w, size_t ws, float* y) const { q8_0_rows<R>(nb, w, ws, a, y); }
};
template <typename E>
struct FloatRows {
  static constexpr int kGroup = 4;  // one fused multiply-add per 8 elements: four chains side by side
  int64_t n;
  const E* a;
  template <int R>
  void run(const uint8_t* w, size_t ws, float* y) const { float_rows<R>(n, w, ws, a, y); }
};

}  // namespace

void pack_q8_0_for_q8_0(int64_t n, const void* src, void* dst) {
  const auto* x = static_cast<const block_q8_0*>(src);
  auto* p = static_cast<PackedQ8_0*>(dst);
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    const __m256i q = load32(x[i].qs);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p[i].e), even_bytes_i16(q));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p[i].o), odd_bytes_i16(q));
    p[i].d = h2f(x[i].d);
    std::memset(p[i].pad, 0, sizeof p[i].pad);
  }
}

void gemv_q8_0_q8_0(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, float* y) {
  by_row_groups(Q8_0Rows{n / QK8_0, reinterpret_cast<const PackedQ8_0*>(a)}, w, ws, n_w, y);
}

void gemv_f16_f16(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, float* y) {
  by_row_groups(FloatRows<ggml_fp16_t>{n, reinterpret_cast<const ggml_fp16_t*>(a)}, w, ws, n_w, y);
}

void gemv_f32_f32(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, float* y) {
  by_row_groups(FloatRows<float>{n, reinterpret_cast<const float*>(a)}, w, ws, n_w, y);
}

void gemm_q8_0_q8_0(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,
                    int64_t n_rows, float* y, size_t ys) {
  by_blocks(Q8_0Block{n / QK8_0}, w, ws, n_w, a, as, n_rows, y, ys);
}

void gemm_f16_f16(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,
                  int64_t n_rows, float* y, size_t ys) {
  by_tiles<FloatTile, ggml_fp16_t>(FloatTile{}, n, w, ws, n_w, a, as, n_rows, y, ys);
}

void gemm_f32_f32(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,
                  int64_t n_rows, float* y, size_t ys) {
  by_tiles<FloatTile, float>(FloatTile{}, n, w, ws, n_w, a, as, n_rows, y, ys);
}

}  // namespace synapse::quant::avx2
#endif

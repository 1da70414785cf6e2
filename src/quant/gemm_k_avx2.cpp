// AVX2 multi-row dots (gemm.hpp) of the K-quants with Q8_K activations:
// gemm_* take one weight row against a tile of activation rows (prefill,
// batches), gemv_* several weight rows against one activation row (decode).
// The order of every output is that of the single-row kernels in
// k_quants_avx2.cpp, ggml's AVX2 order (k_quants.cpp defines it). Tested
// bit-equal per row in tests/quant/gemm_test.cpp.
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include "quant/avx2_util.hpp"
#include "quant/formats.hpp"
#include "quant/gemm.hpp"
#include "quant/gemm_tiles.hpp"

namespace synapse::quant::avx2 {
namespace {

using namespace tiles;

// ------------------------------------------------ 256-element blocks (Q8_K activations)
//
// Every output goes through the per-block steps of avx2_util.hpp
// (q4_K_step, q5_K_step, q6_K_step) that the single-row kernels use: the
// same integer lanes, the same fused multiply-adds in the same order, the
// same final reduction. Only where the work sits changes: gemm tiles unpack
// a weight block once for up to 4 activation rows; gemv kernels unpack the
// blocks of up to 4 weight rows and share the activation-side work (bsum
// pairs, Q6_K offsets) of the one activation row.

// One Q4_K / Q5_K weight row against T activation rows.
template <int T, typename B, void (*Unpack)(const B&, BlockK4&), void (*Step)(AccK&, const BlockK4&,
                                                                              const block_q8_K&, __m128i),
          float (*Result)(const AccK&)>
void k4_tile(int64_t nb, const B* x, const uint8_t* a, size_t as, float* y, size_t ys) {
  AccK s[T];
  for (int64_t i = 0; i < nb; ++i) {
    BlockK4 k;
    Unpack(x[i], k);
    for (int m = 0; m < T; ++m) {
      const block_q8_K& b = act_row<block_q8_K>(a, as, m)[i];
      Step(s[m], k, b, k4_bsum_pairs(b.bsums));
    }
  }
  for (int m = 0; m < T; ++m) y[m * ys] = Result(s[m]);
}

// One Q6_K weight row against T activation rows.
template <int T>
void q6_K_tile(int64_t nb, const block_q6_K* x, const uint8_t* a, size_t as, float* y, size_t ys) {
  AccK s[T];
  for (int64_t i = 0; i < nb; ++i) {
    BlockQ6K k;
    unpack_q6_K(x[i], k);
    for (int m = 0; m < T; ++m) {
      const block_q8_K& b = act_row<block_q8_K>(a, as, m)[i];
      __m256i off[8];
      q6_offsets(b.qs, off);
      q6_K_step(s[m], k, b, off);
    }
  }
  for (int m = 0; m < T; ++m) y[m * ys] = q6_K_result(s[m]);
}

// R Q4_K / Q5_K weight rows against one activation row.
template <int R, typename B, void (*Unpack)(const B&, BlockK4&), void (*Step)(AccK&, const BlockK4&,
                                                                              const block_q8_K&, __m128i),
          float (*Result)(const AccK&)>
void k4_rows(int64_t nb, const uint8_t* w, size_t ws, const block_q8_K* a, float* y) {
  AccK s[R];
  for (int64_t i = 0; i < nb; ++i) {
    const __m128i q8s = k4_bsum_pairs(a[i].bsums);
    for (int r = 0; r < R; ++r) {
      BlockK4 k;
      prefetch_ahead(weight_row<B>(w, ws, r) + i);
      Unpack(weight_row<B>(w, ws, r)[i], k);
      Step(s[r], k, a[i], q8s);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = Result(s[r]);
}

// R Q6_K weight rows against one activation row.
template <int R>
void q6_K_rows(int64_t nb, const uint8_t* w, size_t ws, const block_q8_K* a, float* y) {
  AccK s[R];
  for (int64_t i = 0; i < nb; ++i) {
    __m256i off[8];
    q6_offsets(a[i].qs, off);
    for (int r = 0; r < R; ++r) {
      BlockQ6K k;
      prefetch_ahead(weight_row<block_q6_K>(w, ws, r) + i);
      unpack_q6_K(weight_row<block_q6_K>(w, ws, r)[i], k);
      q6_K_step(s[r], k, a[i], off);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = q6_K_result(s[r]);
}

struct Q4_KTile {
  template <int T>
  void run(int64_t nb, const block_q4_K* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    k4_tile<T, block_q4_K, unpack_q4_K, q4_K_step, q4_K_result>(nb, w, a, as, y, ys);
  }
};
struct Q5_KTile {
  template <int T>
  void run(int64_t nb, const block_q5_K* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    k4_tile<T, block_q5_K, unpack_q5_K, q5_K_step, q5_K_result>(nb, w, a, as, y, ys);
  }
};
struct Q6_KTile {
  template <int T>
  void run(int64_t nb, const block_q6_K* w, const uint8_t* a, size_t as, float* y, size_t ys) {
    q6_K_tile<T>(nb, w, a, as, y, ys);
  }
};

struct Q4_KRows {
  int64_t nb;
  const block_q8_K* a;
  template <int R>
  void run(const uint8_t* w, size_t ws, float* y) const {
    k4_rows<R, block_q4_K, unpack_q4_K, q4_K_step, q4_K_result>(nb, w, ws, a, y);
  }
};
struct Q5_KRows {
  int64_t nb;
  const block_q8_K* a;
  template <int R>
  void run(const uint8_t* w, size_t ws, float* y) const {
    k4_rows<R, block_q5_K, unpack_q5_K, q5_K_step, q5_K_result>(nb, w, ws, a, y);
  }
};
struct Q6_KRows {
  int64_t nb;
  const block_q8_K* a;
  template <int R>
  void run(const uint8_t* w, size_t ws, float* y) const { q6_K_rows<R>(nb, w, ws, a, y); }
};

}  // namespace

void gemm_q4_K_q8_K(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(Q4_KTile{}, n / QK_K, static_cast<const block_q4_K*>(w), a, as, n_rows, y, ys);
}

void gemm_q5_K_q8_K(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(Q5_KTile{}, n / QK_K, static_cast<const block_q5_K*>(w), a, as, n_rows, y, ys);
}

void gemm_q6_K_q8_K(int64_t n, const void* w, const uint8_t* a, size_t as, int64_t n_rows, float* y, size_t ys) {
  by_tiles(Q6_KTile{}, n / QK_K, static_cast<const block_q6_K*>(w), a, as, n_rows, y, ys);
}

void gemv_q4_K_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, float* y) {
  by_row_groups(Q4_KRows{n / QK_K, reinterpret_cast<const block_q8_K*>(a)}, w, ws, n_w, y);
}

void gemv_q5_K_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, float* y) {
  by_row_groups(Q5_KRows{n / QK_K, reinterpret_cast<const block_q8_K*>(a)}, w, ws, n_w, y);
}

void gemv_q6_K_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, float* y) {
  by_row_groups(Q6_KRows{n / QK_K, reinterpret_cast<const block_q8_K*>(a)}, w, ws, n_w, y);
}

}  // namespace synapse::quant::avx2
#endif

// AVX2 multi-row dots (gemm.hpp) of the K-quants with Q8_K activations
// (Q4_K matrices run interleaved instead: interleave_avx2.cpp):
// gemm_* take a few weight rows against a few activation rows at once
// (prefill, batches), gemv_* several weight rows against one activation row
// (decode).
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
// Every output goes through the float steps of avx2_util.hpp
// (q5_K_accumulate, q6_K_accumulate) that the single-row
// kernels use, on the same exact integer lanes: the same fused multiply-adds
// in the same order, the same final reduction. Only where the work sits changes: gemm register
// tiles unpack a weight block once for up to 4 activation rows and load an
// activation chunk once for 2 weight rows; gemv kernels (R weight rows
// against one activation row) run with R = 1 (Rows::kGroup, gemm_tiles.hpp
// by_row_groups: one sequential stream through the matrix).

// R weight rows by A activation rows of Q5_K (a register tile,
// gemm_tiles.hpp by_blocks): per block the R weight blocks are unpacked
// once; then per 32-element chunk each activation chunk is loaded once and
// multiplied into the R x A integer lane sums, all held in registers; the
// float step per output is the single-row kernel's (q5_K_accumulate on
// the same integer lanes: integer sums are exact).
template <int R, int A, typename B, void (*Unpack)(const B&, BlockK4&),
          void (*Accumulate)(AccK&, const BlockK4&, float, __m128i, __m256i), float (*Result)(const AccK&)>
void k4_block(int64_t nb, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* y, size_t ys) {
  AccK s[R][A];
  for (int64_t i = 0; i < nb; ++i) {
    BlockK4 k[R];
    for (int r = 0; r < R; ++r) Unpack(weight_row<B>(w, ws, r)[i], k[r]);
    const block_q8_K* b[A];
    for (int m = 0; m < A; ++m) b[m] = act_row<block_q8_K>(a, as, m) + i;
    __m256i lanes[R][A];
    for (int r = 0; r < R; ++r)
      for (int m = 0; m < A; ++m) lanes[r][m] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      for (int m = 0; m < A; ++m) {
        const __m256i q = load32(b[m]->qs + 32 * c);
        for (int r = 0; r < R; ++r)
          lanes[r][m] = nc(_mm256_add_epi32(lanes[r][m], chunk_lanes(k[r].u[c], q, k[r].sc[c])));
      }
    }
    for (int m = 0; m < A; ++m) {
      const __m128i q8s = k4_bsum_pairs(b[m]->bsums);
      for (int r = 0; r < R; ++r) Accumulate(s[r][m], k[r], b[m]->d, q8s, lanes[r][m]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < A; ++m) y[m * ys + r] = Result(s[r][m]);
}

// The same register tile for Q6_K: the activation-side offset term
// (q6_offset) is computed once per activation chunk for the R weight rows.
template <int R, int A>
void q6_K_block(int64_t nb, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* y, size_t ys) {
  AccK s[R][A];
  for (int64_t i = 0; i < nb; ++i) {
    BlockQ6K k[R];
    for (int r = 0; r < R; ++r) unpack_q6_K(weight_row<block_q6_K>(w, ws, r)[i], k[r]);
    const block_q8_K* b[A];
    for (int m = 0; m < A; ++m) b[m] = act_row<block_q8_K>(a, as, m) + i;
    __m256i lanes[R][A];
    for (int r = 0; r < R; ++r)
      for (int m = 0; m < A; ++m) lanes[r][m] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      for (int m = 0; m < A; ++m) {
        const __m256i q = load32(b[m]->qs + 32 * c);
        const __m256i off = q6_offset(q);
        for (int r = 0; r < R; ++r)
          lanes[r][m] = nc(_mm256_add_epi32(lanes[r][m], chunk_lanes_off(k[r].u[c], q, off, k[r].sc[c])));
      }
    }
    for (int m = 0; m < A; ++m)
      for (int r = 0; r < R; ++r) q6_K_accumulate(s[r][m], k[r], b[m]->d, lanes[r][m]);
  }
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < A; ++m) y[m * ys + r] = q6_K_result(s[r][m]);
}

// R Q5_K weight rows against one activation row.
template <int R, typename B, void (*Unpack)(const B&, BlockK4&), void (*Step)(AccK&, const BlockK4&,
                                                                              const block_q8_K&, __m128i),
          float (*Result)(const AccK&)>
void k4_rows(int64_t nb, const uint8_t* w, size_t ws, const block_q8_K* a, float* y) {
  AccK s[R];
  const PrefetchDistances pf = prefetch_distances();
  for (int64_t i = 0; i < nb; ++i) {
    const __m128i q8s = k4_bsum_pairs(a[i].bsums);
    for (int r = 0; r < R; ++r) {
      BlockK4 k;
      prefetch_ahead(weight_row<B>(w, ws, r) + i, pf);
      Unpack(weight_row<B>(w, ws, r)[i], k);
      Step(s[r], k, a[i], q8s);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = Result(s[r]);
}

// q6_offsets of one activation block (its 8 chunks).
struct Q6Offsets {
  __m256i c[8];
};

// R Q6_K weight rows against one activation row; off[i]: q6_offsets of
// activation block i, made once per call for all its rows.
template <int R>
void q6_K_rows(int64_t nb, const uint8_t* w, size_t ws, const block_q8_K* a, const Q6Offsets* off, float* y) {
  AccK s[R];
  const PrefetchDistances pf = prefetch_distances();
  for (int64_t i = 0; i < nb; ++i) {
    for (int r = 0; r < R; ++r) {
      BlockQ6K k;
      prefetch_ahead(weight_row<block_q6_K>(w, ws, r) + i, pf);
      unpack_q6_K(weight_row<block_q6_K>(w, ws, r)[i], k);
      q6_K_step(s[r], k, a[i], off[i].c);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = q6_K_result(s[r]);
}

struct Q5_KBlock {
  int64_t nb;
  template <int R, int A>
  void run(const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* y, size_t ys) const {
    k4_block<R, A, block_q5_K, unpack_q5_K, q5_K_accumulate, q5_K_result>(nb, w, ws, a, as, y, ys);
  }
};
struct Q6_KBlock {
  int64_t nb;
  template <int R, int A>
  void run(const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* y, size_t ys) const {
    q6_K_block<R, A>(nb, w, ws, a, as, y, ys);
  }
};

struct Q5_KRows {
  static constexpr int kGroup = 1;  // tiles::by_row_groups: one stream
  int64_t nb;
  const block_q8_K* a;
  template <int R>
  void run(const uint8_t* w, size_t ws, float* y) const {
    k4_rows<R, block_q5_K, unpack_q5_K, q5_K_step, q5_K_result>(nb, w, ws, a, y);
  }
};
struct Q6_KRows {
  static constexpr int kGroup = 1;  // tiles::by_row_groups: one stream
  int64_t nb;
  const block_q8_K* a;
  const Q6Offsets* off;
  template <int R>
  void run(const uint8_t* w, size_t ws, float* y) const { q6_K_rows<R>(nb, w, ws, a, off, y); }
};

}  // namespace

void gemm_q5_K_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,
                    int64_t n_rows, float* y, size_t ys) {
  by_blocks(Q5_KBlock{n / QK_K}, w, ws, n_w, a, as, n_rows, y, ys);
}

void gemm_q6_K_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,
                    int64_t n_rows, float* y, size_t ys) {
  by_blocks(Q6_KBlock{n / QK_K}, w, ws, n_w, a, as, n_rows, y, ys);
}

void gemv_q5_K_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, float* y) {
  by_row_groups(Q5_KRows{n / QK_K, reinterpret_cast<const block_q8_K*>(a)}, w, ws, n_w, y);
}

void gemv_q6_K_q8_K(int64_t n, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, float* y) {
  // The activation-side term of every chunk (q6_offset: 8 maddubs per
  // block), once for all the rows of this call instead of once per row:
  // with one row at a time it was about a tenth of a block's instructions.
  const int64_t nb = n / QK_K;
  const auto* act = reinterpret_cast<const block_q8_K*>(a);
  auto* off = static_cast<Q6Offsets*>(thread_scratch(static_cast<size_t>(nb) * sizeof(Q6Offsets)));
  for (int64_t i = 0; i < nb; ++i) q6_offsets(act[i].qs, off[i].c);
  by_row_groups(Q6_KRows{nb, act, off}, w, ws, n_w, y);
}

}  // namespace synapse::quant::avx2
#endif

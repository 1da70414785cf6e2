// Tiling helpers of the AVX2 multi-row kernels (gemm_avx2.cpp for the
// 32-element and float formats, gemm_k_avx2.cpp for the K-quants,
// iq_quants_avx2.cpp) and of the AVX-512 lattice few-rows kernel
// (iq_gemm_avx512.cpp, compiled with its flags): they
// only decide which rows a kernel instance handles and what is prefetched,
// never an order of operations inside an output element.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "quant/simd.hpp"

namespace synapse::quant::avx2::tiles {
// Internal linkage (an anonymous namespace, as neon_util.hpp): these helpers
// are compiled with the including file's instruction-set flags, so no copy
// may be shared with another translation unit (scripts/check-isa-objects.sh).
namespace {

constexpr int kTile = 4;  // activation rows per weight-block unpack

template <typename B>
inline const B* act_row(const uint8_t* a, size_t stride, int m) {
  return reinterpret_cast<const B*>(a + static_cast<size_t>(m) * stride);
}

template <typename B>
inline const B* weight_row(const uint8_t* w, size_t stride, int r) {
  return reinterpret_cast<const B*>(w + static_cast<size_t>(r) * stride);
}

// Runs tile<T>(args) for each of the n_w weight rows (ws bytes apart) over
// n_rows activation rows in tiles of kTile, the last one smaller; `Tile` is
// a template functor with `template <int T> void run(...)`. Output of weight
// row r, activation row m: y[m * ys + r].
template <typename Tile, typename W>
void by_tiles(Tile tile, int64_t nb, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as,
              int64_t n_rows, float* y, size_t ys) {
  for (int64_t r = 0; r < n_w; ++r) {
    const W* wr = weight_row<W>(w, ws, static_cast<int>(r));
    float* yr = y + r;
    int64_t m = 0;
    for (; m + kTile <= n_rows; m += kTile) tile.template run<kTile>(nb, wr, a + m * as, as, yr + m * ys, ys);
    switch (n_rows - m) {
      case 3: tile.template run<3>(nb, wr, a + m * as, as, yr + m * ys, ys); break;
      case 2: tile.template run<2>(nb, wr, a + m * as, as, yr + m * ys, ys); break;
      case 1: tile.template run<1>(nb, wr, a + m * as, as, yr + m * ys, ys); break;
      default: break;
    }
  }
}
static_assert(kTile == 4, "by_tiles handles remainders up to 3");

// The single-row dot of a kernel written as a tile (Tile::run<T>, as
// by_tiles takes it): the tile of one activation row, so the vec_dot and the
// gemm tiles are the same code.
template <typename Tile, typename W>
float dot_by_tile(int64_t nb, const void* w, const void* a) {
  float r;
  Tile{}.template run<1>(nb, static_cast<const W*>(w), static_cast<const uint8_t*>(a), 0, &r, 1);
  return r;
}

// Software prefetch for the decode kernels: the weights are read once per
// token, from DRAM for any real model, and the matrix rows lie one after the
// other, so each row's current block asks for the lines prefetch_ahead_bytes()
// ahead into L1 and, where prefetch_far_bytes() is not 0, those that far
// ahead into L2, which keeps the matrix streaming ahead of the arithmetic
// across rows (and across 4 KiB pages, where the hardware prefetchers stop).
// How far ahead pays depends on the core (quant::prefetch_ahead_bytes,
// cpu.hpp). Prefetching never changes a result; past the end of a matrix
// it touches the next tensor or nothing (a prefetch does not fault).
inline int64_t prefetch_ahead_bytes() {
  static const int64_t bytes = quant::prefetch_ahead_bytes();  // (one guard check per call)
  return bytes;
}
inline int64_t prefetch_far_bytes() {
  static const int64_t bytes = quant::prefetch_far_bytes();
  return bytes;
}

// The first prefetch_far_bytes() (at least prefetch_ahead_bytes()) of a run
// of rows (a thread's chunk of a matrix), which prefetch_ahead only reaches
// once the run is under way: into L1 as far as prefetch_ahead_bytes(), the
// rest into L2.
inline void prefetch_start(const uint8_t* w, size_t bytes) {
  const char* p = reinterpret_cast<const char*>(w);
  const size_t near = std::min(bytes, static_cast<size_t>(prefetch_ahead_bytes()));
  const size_t far = std::min(bytes, static_cast<size_t>(prefetch_far_bytes()));
  size_t off = 0;
  for (; off < near; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
  for (; off < far; off += 64) _mm_prefetch(p + off, _MM_HINT_T1);
}

// The two distances as a kernel reads them: once per call, outside its
// block loop. (Read through the function-local statics above inside the
// loop, every prefetch re-checked a static's guard, which the compiler
// cannot hoist: 8 scalar instructions and 2 branches per prefetched line,
// about 150 a Q4_K x8 block against its ~420 of vector work.)
struct PrefetchDistances {
  int64_t near;  // bytes ahead into L1 (prefetch_ahead_bytes)
  int64_t far;   // bytes ahead into L2, 0 for none (prefetch_far_bytes)
};
inline PrefetchDistances prefetch_distances() { return {prefetch_ahead_bytes(), prefetch_far_bytes()}; }

// The lines of `block`, d.near bytes ahead into L1 and, where d.far is not
// 0, d.far bytes ahead into L2: one prefetch per 64 bytes of the block,
// unrolled.
template <typename B>
inline void prefetch_ahead(const B* block, PrefetchDistances d) {
  const char* p = reinterpret_cast<const char*>(block);
#pragma GCC unroll 32
  for (size_t off = 0; off < sizeof(B); off += 64) _mm_prefetch(p + d.near + off, _MM_HINT_T0);
  if (d.far > 0) {
#pragma GCC unroll 32
    for (size_t off = 0; off < sizeof(B); off += 64) _mm_prefetch(p + d.far + off, _MM_HINT_T1);
  }
}

// Runs rows.run<G>(w, ...) over n_w weight rows, G = Rows::kGroup rows side
// by side (1 or 4), the last group smaller, after prefetch_start of the
// whole run. G is per weight type: the rows of a group are separate
// streams through memory, so one row at a time reads the matrix as one
// sequential stream (what the prefetchers serve best), while four rows
// overlap the dependent fused multiply-add chains of F16/F32 (one per 8
// elements); docs/PERFORMANCE.md, "Measurements moved out of the code".
// (The 32-element formats run interleaved instead, interleave.hpp: 8 rows
// that are one stream.)
template <typename Rows>
void by_row_groups(Rows rows, const uint8_t* w, size_t ws, int64_t n_w, float* y) {
  constexpr int G = Rows::kGroup;
  static_assert(G == 1 || G == 4, "groups of 1 or 4 rows");
  prefetch_start(w, static_cast<size_t>(n_w) * ws);
  int64_t r = 0;
  for (; r + G <= n_w; r += G) rows.template run<G>(w + r * ws, ws, y + r);
  if constexpr (G == 4) {
    switch (n_w - r) {
      case 3: rows.template run<3>(w + r * ws, ws, y + r); break;
      case 2: rows.template run<2>(w + r * ws, ws, y + r); break;
      case 1: rows.template run<1>(w + r * ws, ws, y + r); break;
      default: break;
    }
  }
}

// Register tiles: kBlockRows weight rows by kBlockActs activation rows
// whose integer sums are all live in registers at once (each activation
// chunk loaded once for the weight rows, each weight chunk once for the
// activation rows). Runs block.run<R, A>(w, ws, a, as, y, ys) over n_w x
// n_rows in such tiles, the edge tiles smaller; y[m * ys + r] as by_tiles.
constexpr int kBlockRows = 2, kBlockActs = 4;

template <int R, typename Block>
void by_blocks_of_rows(Block block, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, int64_t n_rows, float* y,
                       size_t ys) {
  int64_t m = 0;
  for (; m + kBlockActs <= n_rows; m += kBlockActs) block.template run<R, kBlockActs>(w, ws, a + m * as, as, y + m * ys, ys);
  switch (n_rows - m) {
    case 3: block.template run<R, 3>(w, ws, a + m * as, as, y + m * ys, ys); break;
    case 2: block.template run<R, 2>(w, ws, a + m * as, as, y + m * ys, ys); break;
    case 1: block.template run<R, 1>(w, ws, a + m * as, as, y + m * ys, ys); break;
    default: break;
  }
}
static_assert(kBlockActs == 4, "by_blocks_of_rows handles remainders up to 3");

template <typename Block>
void by_blocks(Block block, const uint8_t* w, size_t ws, int64_t n_w, const uint8_t* a, size_t as, int64_t n_rows,
               float* y, size_t ys) {
  int64_t r = 0;
  for (; r + kBlockRows <= n_w; r += kBlockRows)
    by_blocks_of_rows<kBlockRows>(block, w + r * ws, ws, a, as, n_rows, y + r, ys);
  if (r < n_w) by_blocks_of_rows<1>(block, w + r * ws, ws, a, as, n_rows, y + r, ys);
}
static_assert(kBlockRows == 2, "by_blocks handles a remainder of 1");

}  // namespace
}  // namespace synapse::quant::avx2::tiles

// The search tables of ggml's lattice quantizers (ggml-quants.c,
// iq2xs_init_impl and iq3xs_init_impl): each grid point as odd integers
// 2*level+1, a map from every point of the surrounding integer box to its
// grid index, and for points off the grid the list of grid points nearest to
// them. Internal to quant's IQ quantizers (iq_quantize*.cpp).
//
// The levels of a grid are the ranks of its distinct byte values in
// iq_grids.hpp (iq2 grids: 8, 25, 43 -> 0, 1, 2; iq1s: -1, 0, 1; iq3xxs:
// 4 ... 62 -> 0 ... 7; iq3s: 1 ... 15), which reproduces ggml's packed
// kgrid_* tables value for value.
//
// Thread-safety: lattice() builds each table once (a function-local static)
// and returns it read-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace synapse::quant {

struct Lattice {
  int grid_size = 0;            // points: 256, 512, 1024 or 2048
  int group = 0;                // values per point: 8 (IQ2, IQ1) or 4 (IQ3)
  int bits = 0;                 // bits per level in a map index: 2 (IQ2, IQ1) or 3 (IQ3)
  std::vector<int8_t> pos;      // [grid_size * group]: 2 * level + 1 (ggml's kgrid_q2xs / kgrid_q3xs bytes)
  std::vector<float> fpos;      // the same as floats (what the quantizers' searches multiply)
  std::vector<int32_t> map;     // index (levels packed `bits` apart) -> grid index, or -(offset + 1) off the grid
  std::vector<uint16_t> neighbours;  // at offset: the count n, then n grid indices nearest first

  const int8_t* point(int j) const { return pos.data() + static_cast<size_t>(j) * group; }
  const float* fpoint(int j) const { return fpos.data() + static_cast<size_t>(j) * group; }
  // The neighbour list (count first) of an off-grid map index u (map[u] < 0).
  const uint16_t* neighbours_of(int u) const { return neighbours.data() + (-map[u] - 1); }
};

enum class LatticeId { iq2xxs, iq2xs, iq2s, iq1s, iq3xxs, iq3s };

// The tables of one lattice, built on first use (iq2 and iq1 ones take a
// few hundred milliseconds: 43,692 box points against the grid).
const Lattice& lattice(LatticeId id);

}  // namespace synapse::quant

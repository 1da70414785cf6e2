// ggml's lattice search tables (iq_lattice.hpp): ggml-quants.c,
// iq2xs_init_impl (IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S/IQ1_M) and iq3xs_init_impl
// (IQ3_XXS, IQ3_S), llama.cpp v0.5.0.
#include "quant/iq_lattice.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>

#include "quant/iq_grids.hpp"

namespace synapse::quant {
namespace {

struct LatticeSpec {
  const void* grid;  // iq_grids.hpp table: uint64_t (group 8) or uint32_t (group 4) entries
  int grid_size;
  int group;
  bool signed_bytes;  // iq1s_grid holds int8 -1, 0, 1
  int nwant;          // how many distinct distances a neighbour list spans
  int map_size;       // ggml's kmap_size: 43692 for the 8-groups (levels 0-2 packed 2 bits apart), 4096 for the 4-groups
};

LatticeSpec spec(LatticeId id) {
  switch (id) {
    case LatticeId::iq2xxs: return {iq2xxs_grid, 256, 8, false, 2, 43692};
    case LatticeId::iq2xs: return {iq2xs_grid, 512, 8, false, 2, 43692};
    case LatticeId::iq2s: return {iq2s_grid, 1024, 8, false, 1, 43692};
    case LatticeId::iq1s: return {iq1s_grid, 2048, 8, true, 3, 43692};
    case LatticeId::iq3xxs: return {iq3xxs_grid, 256, 4, false, 2, 4096};
    case LatticeId::iq3s: return {iq3s_grid, 512, 4, false, 3, 4096};
  }
  return {};
}

int grid_value(const LatticeSpec& s, int j, int i) {
  const uint64_t g = s.group == 8 ? static_cast<const uint64_t*>(s.grid)[j] : static_cast<const uint32_t*>(s.grid)[j];
  const auto b = static_cast<uint8_t>(g >> (8 * i));
  return s.signed_bytes ? static_cast<int8_t>(b) : b;
}

// The two loops below run 43692 x 2048 x 8 times for IQ1_S's table. They
// are kept out of the sanitizers' instrumentation (the attribute: every index
// runs below n, the length of the caller's vectors) and compiled at -O2 in
// sanitized builds too (CMakeLists.txt), where the checks otherwise stop
// their vectorization and each process's first IQ quantization spent
// seconds here. (gcc does not inline them into an instrumented caller.)
// Without sanitizers the attribute changes nothing.
// d2[j] += (c[j] - p)^2 for j < n (a squared distance: at most 784, below).
__attribute__((no_sanitize("address", "undefined")))
void add_squared_distances(const int16_t* c, int16_t p, int16_t* d2, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    const auto diff = static_cast<int16_t>(c[j] - p);
    d2[j] = static_cast<int16_t>(d2[j] + diff * diff);
  }
}

// The smallest d[j] (j < n) greater than `below`; INT16_MAX if none.
__attribute__((no_sanitize("address", "undefined")))
int16_t smallest_above(const int16_t* d, size_t n, int below) {
  int16_t m = INT16_MAX;
  for (size_t j = 0; j < n; ++j) m = d[j] > below && d[j] < m ? d[j] : m;
  return m;
}

Lattice build(LatticeId id) {
  const LatticeSpec s = spec(id);
  Lattice t;
  t.grid_size = s.grid_size;
  t.group = s.group;
  t.bits = s.group == 8 ? 2 : 3;

  // The levels: ranks of the grid's distinct values.
  std::vector<int> values;
  for (int j = 0; j < s.grid_size; ++j)
    for (int i = 0; i < s.group; ++i) values.push_back(grid_value(s, j, i));
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  t.pos.resize(static_cast<size_t>(s.grid_size) * s.group);
  t.map.assign(static_cast<size_t>(s.map_size), -1);
  for (int j = 0; j < s.grid_size; ++j) {
    int index = 0;
    for (int i = 0; i < s.group; ++i) {
      const int level = static_cast<int>(std::lower_bound(values.begin(), values.end(), grid_value(s, j, i)) -
                                         values.begin());
      t.pos[static_cast<size_t>(j) * s.group + i] = static_cast<int8_t>(2 * level + 1);
      index |= level << (t.bits * i);
    }
    t.map[static_cast<size_t>(index)] = j;
  }
  t.fpos.assign(t.pos.begin(), t.pos.end());

  // Every box point off the grid: the grid points at its nwant smallest
  // squared distances, in (distance, index) order (ggml sorts the pairs
  // with qsort and iq2/iq3_compare_func, a total order, so this is its
  // list), stored at increasing offsets in index order as ggml's prefix sum
  // places them.
  const int mask = (1 << t.bits) - 1;
  // The grid by position (cols[k][j]: value k of point j), so that the
  // distances of one box point to every grid point vectorize across j.
  std::vector<std::vector<int16_t>> cols(static_cast<size_t>(s.group), std::vector<int16_t>(static_cast<size_t>(s.grid_size)));
  for (int j = 0; j < s.grid_size; ++j)
    for (int k = 0; k < s.group; ++k) cols[static_cast<size_t>(k)][static_cast<size_t>(j)] = t.point(j)[k];
  std::vector<int16_t> d2(static_cast<size_t>(s.grid_size));
  for (int u = 0; u < s.map_size; ++u) {
    if (t.map[static_cast<size_t>(u)] >= 0) continue;
    std::fill(d2.begin(), d2.end(), int16_t{0});
    for (int k = 0; k < s.group; ++k) {
      const auto p = static_cast<int16_t>(2 * ((u >> (t.bits * k)) & mask) + 1);
      add_squared_distances(cols[static_cast<size_t>(k)].data(), p, d2.data(), d2.size());
    }
    // The nwant smallest distinct distances, ascending (at most 784, so
    // int16 holds them).
    std::array<int, 3> distinct{};
    int n_distinct = 0;
    int below = -1;
    for (; n_distinct < s.nwant; ++n_distinct) {
      const int16_t m = smallest_above(d2.data(), d2.size(), below);
      if (m == INT16_MAX) break;
      distinct[static_cast<size_t>(n_distinct)] = below = m;
    }
    t.map[static_cast<size_t>(u)] = -(static_cast<int32_t>(t.neighbours.size()) + 1);
    const size_t start = t.neighbours.size();
    t.neighbours.push_back(0);
    for (int m = 0; m < n_distinct; ++m)
      for (int j = 0; j < s.grid_size; ++j)
        if (d2[static_cast<size_t>(j)] == distinct[static_cast<size_t>(m)]) t.neighbours.push_back(static_cast<uint16_t>(j));
    t.neighbours[start] = static_cast<uint16_t>(t.neighbours.size() - start - 1);
  }
  return t;
}

}  // namespace

const Lattice& lattice(LatticeId id) {
  switch (id) {
    case LatticeId::iq2xxs: { static const Lattice t = build(id); return t; }
    case LatticeId::iq2xs: { static const Lattice t = build(id); return t; }
    case LatticeId::iq2s: { static const Lattice t = build(id); return t; }
    case LatticeId::iq1s: { static const Lattice t = build(id); return t; }
    case LatticeId::iq3xxs: { static const Lattice t = build(id); return t; }
    case LatticeId::iq3s: break;
  }
  static const Lattice iq3s = build(LatticeId::iq3s);
  return iq3s;
}

}  // namespace synapse::quant

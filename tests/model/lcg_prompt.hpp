// Prompts for the model layer's invariance tests: the same ids on every
// platform, no tokenizer needed.
#pragma once

#include <cstdint>
#include <vector>

#include "synapse/tokenizer.hpp"

namespace synapse::test {

// n token ids: 1 (BOS), then ids in [3, n_vocab) from a 64-bit LCG seeded
// with seed (Knuth's MMIX constants, the high bits).
inline std::vector<token_id> lcg_prompt(int64_t n, uint64_t seed, int64_t n_vocab) {
  std::vector<token_id> ids{1};
  uint64_t x = seed;
  while (static_cast<int64_t>(ids.size()) < n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<token_id>(3 + (x >> 33) % static_cast<uint64_t>(n_vocab - 3)));
  }
  return ids;
}

}  // namespace synapse::test

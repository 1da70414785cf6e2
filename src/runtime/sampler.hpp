// Choosing the next token from a row of logits.
//
// The chain and defaults are llama.cpp's common_sampler ones for the stages
// implemented here: top-k 40 -> top-p 0.95 -> min-p 0.05 -> temperature 0.8
// -> a draw from the softmax with a seeded RNG. temp <= 0 is greedy: the
// argmax, ties to the lowest id (llama_sampler_init_greedy).
#pragma once

#include <cstdint>
#include <random>
#include <span>

#include "synapse/tokenizer.hpp"

namespace synapse::runtime {

struct SamplerParams {
  float temp = 0.8f;
  int32_t top_k = 40;    // <= 0: off
  float top_p = 0.95f;   // >= 1: off
  float min_p = 0.05f;   // <= 0: off
  uint32_t seed = 0xFFFFFFFFu;  // LLAMA_DEFAULT_SEED: a random seed
};

// argmax of logits, ties to the lowest id. Throws Error(invalid_argument) on
// an empty row.
token_id sample_greedy(std::span<const float> logits);

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p);
  // One token from a row of n_vocab logits.
  token_id sample(std::span<const float> logits);
  uint32_t seed() const { return seed_; }

 private:
  SamplerParams p_;
  uint32_t seed_;
  std::mt19937 rng_;
};

}  // namespace synapse::runtime

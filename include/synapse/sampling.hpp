// Choosing the next token from a row of logits: llama.cpp's common_sampler
// chain (common/sampling.cpp, src/llama-sampling.cpp, c392e509).
//
// The chain, in llama.cpp's default order and with its defaults:
//
//   logit bias -> penalties (repeat/frequency/presence over the last 64
//   accepted tokens; off by default) -> top-k 40 -> typical-p 1.0 (off)
//   -> top-p 0.95 -> min-p 0.05 -> temperature 0.8 -> seeded draw
//
// DRY, XTC, top-n-sigma and mirostat are llama.cpp stages that are off by
// default; they are not implemented. temp <= 0 makes the last step an argmax
// of the surviving candidates, ties to the lowest id (llama.cpp's temp sampler
// keeps one maximum and the draw then picks it).
//
// Each stage is also a free function over Candidates so that tests (and
// callers that want another order) can run stages one at a time.
//
// Thread-safety: the free functions are thread-safe on distinct Candidates;
// a Sampler holds an RNG and a penalty window, so one thread per Sampler.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "synapse/tokenizer.hpp"

namespace synapse {

// LLAMA_DEFAULT_SEED: draw a seed from std::random_device.
inline constexpr uint32_t kDefaultSeed = 0xFFFFFFFFu;

// One entry of llama.cpp's --logit-bias: `bias` is added to token's logit
// (-inf forbids the token).
struct LogitBias {
  token_id token;
  float bias;
};

// common_params_sampling's fields for the stages implemented here, with its
// defaults. Flag names (tools/sampler_flags.hpp) are llama.cpp's.
struct SamplerParams {
  uint32_t seed = kDefaultSeed;  // --seed
  int32_t penalty_last_n = 64;   // --repeat-last-n: 0 off, -1 the context size
  float penalty_repeat = 1.0f;   // --repeat-penalty: 1 off
  float penalty_freq = 0.0f;     // --frequency-penalty: 0 off
  float penalty_present = 0.0f;  // --presence-penalty: 0 off
  int32_t top_k = 40;            // --top-k: <= 0 off
  float typical_p = 1.0f;        // --typical: >= 1 off
  float top_p = 0.95f;           // --top-p: >= 1 off
  float min_p = 0.05f;           // --min-p: <= 0 off
  float temp = 0.8f;             // --temp: <= 0 greedy
  size_t min_keep = 0;           // at least this many candidates survive each stage (0: 1)
  std::vector<LogitBias> logit_bias;  // --logit-bias, in order
  // --grammar / --grammar-file / --json-schema (converted to GBNF first):
  // GBNF text whose rule `root` the reply must match; empty: none. Applied by
  // Generation (synapse/generation.hpp), which knows the vocabulary: tokens
  // the grammar refuses leave the candidates before the first stage, and
  // end of generation is allowed exactly when the reply is a sentence.
  std::string grammar;
};

// Parses one --logit-bias value "TOKEN(+|-)BIAS" as llama.cpp's arg.cpp does:
// "15043+1", "15043-0.5", "2-inf". Throws Error(invalid_argument) naming the
// value when it is not of that form.
LogitBias parse_logit_bias(std::string_view value);

// llama_token_data: a candidate token, its (modified) logit and, after a
// stage that computes one, its probability.
struct TokenData {
  token_id id;
  float logit;
  float p;
};

// llama_token_data_array: the surviving candidates in their current order and
// whether that order is descending by logit. Ties in a sort are broken by the
// lower id first (llama.cpp leaves their order to std::partial_sort).
struct Candidates {
  std::vector<TokenData> data;
  bool sorted = false;

  // All ids of a row of n_vocab logits, in id order, p = 0. Throws
  // Error(invalid_argument) on an empty row.
  static Candidates from_logits(std::span<const float> logits);
};

// argmax of logits, ties to the lowest id (llama_sampler_init_greedy). Throws
// Error(invalid_argument) on an empty row.
token_id sample_greedy(std::span<const float> logits);

// The stages. Each keeps at least max(min_keep, 1) candidates when it had
// that many. Formulas are llama.cpp's (llama-sampling.cpp, same names).

// llama_sampler_softmax_impl: p_i = exp(l_i - max) / sum, in float; with
// do_sort the candidates are first sorted by logit. When the max is +inf
// (+inf logit biases) the +inf candidates share p equally, the rest get 0.
void softmax(Candidates& c, bool do_sort);
// llama_sampler_logit_bias: logit += bias for each entry. Throws
// Error(out_of_range) for a token outside the candidates' id range.
void apply_logit_bias(Candidates& c, std::span<const LogitBias> biases);
// llama_sampler_penalties: for each candidate occurring n > 0 times in
// `window`: logit /= repeat if logit > 0 else logit *= repeat; then
// logit -= n * freq + present. No-op when repeat == 1, freq == 0, present == 0.
void apply_penalties(Candidates& c, std::span<const token_id> window, float repeat, float freq,
                     float present);
// llama_sampler_top_k: the k highest logits, sorted. k <= 0: no-op.
void apply_top_k(Candidates& c, int32_t k);
// llama_sampler_typical (Meister et al. 2022, "Locally Typical Sampling"):
// sort by |-log p_i - H| and keep the smallest prefix whose probability mass
// exceeds p. Leaves the candidates unsorted. p >= 1: no-op.
void apply_typical(Candidates& c, float p, size_t min_keep);
// llama_sampler_top_p (Holtzman et al. 2019, nucleus): the smallest prefix, by
// descending probability, whose cumulative probability reaches p. p >= 1: no-op.
void apply_top_p(Candidates& c, float p, size_t min_keep);
// llama_sampler_min_p: keep logit >= max_logit + log(p), i.e. p_i >= p * p_max;
// keeps the order of unsorted candidates. p <= 0: no-op.
void apply_min_p(Candidates& c, float p, size_t min_keep);
// llama_sampler_temp: logit /= temp. temp <= 0, or a temp so small that a
// finite logit / temp overflows (1e-40): every candidate but the maximum (the
// lowest id among equal maxima) gets logit -inf, the limit temp -> 0.
void apply_temperature(Candidates& c, float temp);
// llama_sampler_dist: p_i = expf(l_i - max) (float), a double sum, one
// uniform_real_distribution<double>(0, 1) draw u, and the first candidate
// whose running sum reaches u * sum. Returns its index in c.data (0 without a
// draw when one candidate is left). +inf logits (+inf biases) are drawn
// uniformly among themselves, as softmax() weighs them. Throws Error(invalid_argument) when c is empty.
size_t sample_dist(Candidates& c, std::mt19937& rng);

class Sampler {
 public:
  // n_ctx resolves penalty_last_n = -1 (common_init_from_params sets it to the
  // context size). Throws Error(invalid_argument) naming the field for a NaN
  // parameter, penalty_last_n < -1, or -1 with n_ctx <= 0.
  explicit Sampler(const SamplerParams& p, int32_t n_ctx = 0);

  // One token from a row of n_vocab logits through the whole chain. Does not
  // accept it: call accept() with the token kept. Throws Error(invalid_argument)
  // on an empty row, Error(out_of_range) for a logit-bias token >= n_vocab.
  token_id sample(std::span<const float> logits);
  // The same chain over the tokens of `allowed` only (bit i of allowed[i / 64]:
  // token i may be drawn; a grammar's mask): the others leave the candidates
  // before the first stage, as a -inf logit would remove them. Throws
  // Error(invalid_argument) when allowed has fewer than n_vocab bits or no
  // token is allowed.
  token_id sample(std::span<const float> logits, std::span<const uint64_t> allowed);
  // temp <= 0: the chain ends in an argmax, so a token that is the argmax of
  // all candidates and allowed is also the argmax of the allowed ones.
  bool greedy() const { return p_.temp <= 0.0f; }

  // common_sampler_accept: records a token (prompt or generated) in the
  // penalty window of the last penalty_last_n tokens.
  void accept(token_id id);
  // Clears the penalty window and reseeds the RNG with seed() (llama_sampler_reset).
  void reset();

  uint32_t seed() const { return seed_; }  // the seed in use (drawn when kDefaultSeed)
  const SamplerParams& params() const { return p_; }
  // The candidates as the last sample() left them before the draw (after
  // temperature), with p filled by the draw: for inspection and tests.
  const Candidates& last_candidates() const { return cur_; }

 private:
  token_id run_chain(bool biased);  // the stages over cur_ (logit bias unless done), then the draw
  SamplerParams p_;
  size_t window_cap_;  // 0: penalties off
  uint32_t seed_;
  std::mt19937 rng_;
  std::deque<token_id> window_;
  std::vector<token_id> window_buf_;
  Candidates cur_;
  std::vector<float> biased_;  // sample(logits, allowed): the row with the logit bias added
};

}  // namespace synapse


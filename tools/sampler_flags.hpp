// The sampler flags of llama.cpp's common/arg.cpp, with its names and defaults,
// for any subcommand that samples (run, chat, serve).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "synapse/sampling.hpp"
#include "synapse/error.hpp"

namespace synapse::tools {

// Registers --temp --top-k --top-p --min-p --typical --repeat-penalty
// --repeat-last-n --presence-penalty --frequency-penalty -l/--logit-bias
// -s/--seed on `app`, writing into `sp` (which must outlive parsing). Each
// --logit-bias TOKEN(+|-)BIAS is parsed when given; a malformed one fails the
// parse with synapse::parse_logit_bias's message.
inline void add_sampler_flags(CLI::App& app, synapse::SamplerParams& sp) {
  app.add_option("--temp", sp.temp, "temperature; <= 0 = greedy (default 0.8)");
  app.add_option("--top-k", sp.top_k, "top-k sampling (default 40, 0 = off)");
  app.add_option("--top-p", sp.top_p, "top-p sampling (default 0.95, 1.0 = off)");
  app.add_option("--min-p", sp.min_p, "min-p sampling (default 0.05, 0.0 = off)");
  app.add_option("--typical", sp.typical_p, "locally typical sampling, parameter p (default 1.0 = off)");
  app.add_option("--repeat-penalty", sp.penalty_repeat, "penalize repeated tokens (default 1.0 = off)");
  app.add_option("--repeat-last-n", sp.penalty_last_n,
                 "last n tokens to consider for the penalties (default 64, 0 = off, -1 = context size)");
  app.add_option("--presence-penalty", sp.penalty_present, "presence penalty (default 0.0 = off)");
  app.add_option("--frequency-penalty", sp.penalty_freq, "frequency penalty (default 0.0 = off)");
  app.add_option_function<std::vector<std::string>>(
         "-l,--logit-bias",
         [&sp](const std::vector<std::string>& values) {
           for (const std::string& v : values) {
             try {
               sp.logit_bias.push_back(synapse::parse_logit_bias(v));
             } catch (const Error& e) {
               throw CLI::ValidationError(e.what());  // reported like any flag error
             }
           }
         },
         "modify a token's likelihood, TOKEN_ID(+|-)BIAS, e.g. 15043+1 or 15043-inf (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  // llama.cpp reads the seed with stoul, so -1 wraps to LLAMA_DEFAULT_SEED:
  // a random seed. Other negative values are refused.
  app.add_option_function<long long>(
      "-s,--seed",
      [&sp](long long v) {
        if (v < -1 || v > static_cast<long long>(UINT32_MAX))
          throw CLI::ValidationError("--seed", std::to_string(v) + ": must be -1 (random) or in [0, 4294967295]");
        sp.seed = v == -1 ? synapse::kDefaultSeed : static_cast<uint32_t>(v);
      },
      "RNG seed (default -1: random)");
}

}  // namespace synapse::tools

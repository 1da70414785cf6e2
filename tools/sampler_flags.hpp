// The sampler flags of llama.cpp's common/arg.cpp, with its names and defaults,
// for any subcommand that samples (run, chat, serve).
#pragma once

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common_flags.hpp"

#include "synapse/error.hpp"
#include "synapse/grammar.hpp"
#include "synapse/sampling.hpp"

namespace synapse::tools {

// Registers --temp --top-k --top-p --min-p --typical --repeat-penalty
// --repeat-last-n --presence-penalty --frequency-penalty -l/--logit-bias
// -s/--seed --grammar --grammar-file -j/--json-schema -jf/--json-schema-file
// on `app`, writing into `sp` (which must outlive parsing). Each --logit-bias
// TOKEN(+|-)BIAS is parsed when given; a malformed one fails the parse with
// synapse::parse_logit_bias's message. A grammar or schema is compiled when
// given, so a bad one fails the parse naming its line and column (or the
// schema keyword); the last of the four flags given wins, as in llama.cpp.
inline void add_sampler_flags(CLI::App& app, synapse::SamplerParams& sp) {
  // Ranges: llama.cpp checks none of these; values outside them mean nothing
  // (a probability above 1, a negative penalty) and are refused here.
  const double big = 1e30;
  app.add_option("--temp,--temperature", sp.temp, "temperature; <= 0 = greedy (default 0.8)")->check(num_range(-big, big));
  app.add_option("--top-k", sp.top_k, "top-k sampling (default 40, 0 = off)")->check(int_range(INT32_MIN, INT32_MAX));
  app.add_option("--top-p", sp.top_p, "top-p sampling (default 0.95, 1.0 = off)")->check(num_range(0, 1));
  app.add_option("--min-p", sp.min_p, "min-p sampling (default 0.05, 0.0 = off)")->check(num_range(0, 1));
  app.add_option("--typical,--typical-p", sp.typical_p, "locally typical sampling, parameter p (default 1.0 = off)")
      ->check(num_range(0, big));
  app.add_option("--repeat-penalty", sp.penalty_repeat, "penalize repeated tokens (default 1.0 = off)")
      ->check(num_range(0, big));
  app.add_option("--repeat-last-n", sp.penalty_last_n,
                 "last n tokens to consider for the penalties (default 64, 0 = off, -1 = context size)")
      ->check(int_range(-1, INT32_MAX));
  app.add_option("--presence-penalty", sp.penalty_present, "presence penalty (default 0.0 = off)")
      ->check(num_range(-big, big));
  app.add_option("--frequency-penalty", sp.penalty_freq, "frequency penalty (default 0.0 = off)")
      ->check(num_range(-big, big));
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
  auto set_grammar = [&sp](const std::string& flag, const std::string& text, bool schema) {
    try {
      sp.grammar = schema ? synapse::json_schema_to_gbnf(text) : text;
      synapse::Grammar::parse(sp.grammar);
    } catch (const Error& e) {
      throw CLI::ValidationError(flag, e.what());
    }
  };
  auto read_text = [](const std::string& flag, const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw CLI::ValidationError(flag, "cannot open '" + path + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  app.add_option_function<std::string>(
      "--grammar", [set_grammar](const std::string& v) { set_grammar("--grammar", v, false); },
      "BNF-like grammar (llama.cpp's GBNF) to constrain generations");
  app.add_option_function<std::string>(
      "--grammar-file",
      [set_grammar, read_text](const std::string& v) { set_grammar("--grammar-file", read_text("--grammar-file", v), false); },
      "file to read the grammar from");
  app.add_option_function<std::string>(
      "-j,--json-schema", [set_grammar](const std::string& v) { set_grammar("--json-schema", v, true); },
      "JSON Schema to constrain generations, e.g. '{\"type\": \"object\"}' for any JSON object");
  app.add_option_function<std::string>(
      "--json-schema-file",
      [set_grammar, read_text](const std::string& v) {
        set_grammar("--json-schema-file", read_text("--json-schema-file", v), true);
      },
      "file containing a JSON Schema to constrain generations (-jf)");
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

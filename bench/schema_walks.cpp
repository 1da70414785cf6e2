// Soundness of the JSON Schema converter without a model (issue 42): random
// walks through each schema's grammar, for bench/validate_walks.py to check
// with python3-jsonschema.
//
//   bench_schema_walks [--walks N] [--seed S] [--max-bytes B] [--gbnf] SCHEMA.json... | -
//
// ("-": the schema paths one per line on standard input.) For each schema
// prints one JSON line: {"path": P, "compiled": true, "texts": [...],
// "unfinished": K} or {"path": P, "compiled": false, "error": MESSAGE}. A
// walk feeds the grammar one byte at a time over a vocabulary of the 256
// bytes and an end-of-generation token: at each step the matcher's mask, then
// a seeded choice among the allowed bytes (half the time among the allowed
// ASCII bytes where there are some, so that strings end and structure is
// reached), ending with probability 1/4 wherever the grammar accepts (or
// when nothing else is allowed). A walk past --max-bytes (default 4000) is
// dropped and counted as unfinished. The texts are what the grammar lets a
// model write; every one must validate. Single-threaded; deterministic for a
// given seed and file list. --gbnf adds each grammar ("gbnf").
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "grammar_util.hpp"  // tests/: byte_vocab(), the 256 bytes and end of generation (256)
#include "synapse/error.hpp"
#include "synapse/grammar.hpp"

using namespace synapse;

namespace {

// One walk; false when it passed max_bytes.
bool walk(const std::shared_ptr<const Grammar>& g, const std::shared_ptr<const TokenVocabulary>& vocab,
          std::mt19937& rng, size_t max_bytes, std::string& text) {
  GrammarMatcher m(g, vocab);
  std::vector<uint64_t> mask;
  std::vector<int32_t> all, ascii;
  text.clear();
  while (text.size() <= max_bytes) {
    m.fill_mask(mask);
    all.clear();
    ascii.clear();
    for (int32_t t = 0; t < 256; ++t)
      if ((mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1) {
        all.push_back(t);
        if (t < 0x80) ascii.push_back(t);
      }
    const bool can_end = (mask[256 >> 6] >> (256 & 63)) & 1;
    if (can_end && (all.empty() || rng() % 4 == 0)) return true;
    if (all.empty()) throw Error(Errc::invalid_argument, "a walk reached a state with no byte and no end allowed");
    const auto& from = !ascii.empty() && rng() % 2 == 0 ? ascii : all;
    const int32_t b = from[rng() % from.size()];
    m.accept(b);
    text += static_cast<char>(b);
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int walks = 4;
  unsigned seed = 1;
  size_t max_bytes = 4000;
  bool gbnf = false;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--walks") && has_value) {
      walks = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seed") && has_value) {
      seed = static_cast<unsigned>(std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--max-bytes") && has_value) {
      max_bytes = static_cast<size_t>(std::atoll(argv[++i]));
    } else if (!std::strcmp(argv[i], "--gbnf")) {
      gbnf = true;
    } else if (!std::strcmp(argv[i], "-")) {
      for (std::string line; std::getline(std::cin, line);)
        if (!line.empty()) paths.push_back(line);
    } else {
      paths.emplace_back(argv[i]);
    }
  }
  if (paths.empty()) {
    std::fprintf(stderr, "usage: %s [--walks N] [--seed S] [--max-bytes B] [--gbnf] SCHEMA.json... | -\n", argv[0]);
    return 2;
  }
  const auto vocab = test::byte_vocab();
  std::mt19937 rng(seed);
  for (const std::string& path : paths) {
    nlohmann::json out = {{"path", path}};
    try {
      std::ifstream f(path, std::ios::binary);
      std::stringstream ss;
      ss << f.rdbuf();
      const std::string text = json_schema_to_gbnf(ss.str());
      const auto g = Grammar::parse(text);
      out["compiled"] = true;
      if (gbnf) out["gbnf"] = text;
      out["texts"] = nlohmann::json::array();
      int unfinished = 0;
      std::string walked;
      for (int w = 0; w < walks; ++w) {
        if (walk(g, vocab, rng, max_bytes, walked)) {
          out["texts"].push_back(walked);
        } else {
          ++unfinished;
        }
      }
      out["unfinished"] = unfinished;
    } catch (const Error& e) {
      out["compiled"] = false;
      out["error"] = e.what();
    }
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    std::fflush(stdout);
  }
  return 0;
}

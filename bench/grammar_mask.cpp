// Time of the grammar's token mask per step (issue 42: median <= 50 us,
// p99 <= 1 ms on a 128k vocabulary).
//
//   bench_grammar_mask MODEL.gguf GRAMMAR.gbnf|SCHEMA.json|DIR [--steps N] [--runs R] [--seed S] [--cold] [--why]
//
// Loads only the vocabulary of MODEL, compiles the grammar (a .json file is a
// JSON Schema, converted first; a directory means every .json schema in it,
// those the converter refuses counted and skipped), then R random walks of
// up to N tokens per grammar: at each step the full mask is computed (timed:
// GrammarMatcher::fill_mask) and a token drawn uniformly among the allowed
// ones (EOG only when nothing else is allowed, so walks go deep). Prints the
// vocabulary size, the steps timed, median, p90, p99 and max of the mask time,
// and the time of building the trie. A uniform draw is harder than a model's
// choices: it visits states a model rarely reaches. --cold times each mask in
// a fresh matcher that has replayed the walk's tokens (no mask cached, no
// transition computed yet): the cost of a state's first visit. --why prints
// the refused schemas' reasons, counted (the message up to its JSON pointer).
// --slowest K prints the K slowest masks: the grammar's file, the step and
// the walk's last 60 bytes before it (what the slow parser state is).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "synapse/error.hpp"
#include "synapse/gguf.hpp"
#include "synapse/grammar.hpp"
#include "synapse/tokenizer.hpp"

using namespace synapse;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf GRAMMAR.gbnf [--steps N] [--runs R] [--seed S]\n", argv[0]);
    return 2;
  }
  int steps = 200, runs = 20;
  unsigned seed = 1;
  bool cold = false, why = false;
  size_t slowest = 0;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cold")) cold = true;
    if (!std::strcmp(argv[i], "--why")) why = true;
    if (i + 1 >= argc) break;
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seed")) seed = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--slowest")) slowest = static_cast<size_t>(std::atoi(argv[i + 1]));
  }
  try {
    const auto file = gguf::File::open(argv[1]);
    const Tokenizer tok = Tokenizer::from_gguf(file);
    auto read = [](const std::filesystem::path& p) {
      std::ifstream f(p, std::ios::binary);
      std::stringstream ss;
      ss << f.rdbuf();
      return ss.str();
    };
    std::vector<std::filesystem::path> inputs;
    const std::filesystem::path arg(argv[2]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::directory_iterator(arg))
        if (e.path().extension() == ".json") inputs.push_back(e.path());
      std::sort(inputs.begin(), inputs.end());
    } else {
      inputs.push_back(arg);
    }
    const auto t0 = Clock::now();
    std::vector<std::shared_ptr<const Grammar>> grammars;
    std::vector<std::string> grammar_files;
    size_t refused = 0, n_rules = 0;
    std::map<std::string, int> reasons;
    for (const auto& p : inputs) {
      try {
        const std::string text = read(p);
        grammars.push_back(Grammar::parse(p.extension() == ".json" ? json_schema_to_gbnf(text) : text));
        n_rules += grammars.back()->n_rules();
        grammar_files.push_back(p.string());
      } catch (const Error& e) {
        if (inputs.size() == 1) throw;
        ++refused;
        std::string m = e.what();  // without its JSON pointer: "... at /a/b: why" -> "...: why"
        if (const size_t at = m.find(" at "); at != std::string::npos) {
          const size_t colon = m.find(": ", at);
          m = m.substr(0, at) + (colon == std::string::npos ? "" : m.substr(colon));
        }
        ++reasons[m.substr(0, 140)];
      }
    }
    const auto t1 = Clock::now();
    const int32_t n = tok.n_vocab();
    std::vector<std::string> pieces(static_cast<size_t>(n));
    std::vector<bool> eog(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
      pieces[static_cast<size_t>(i)] = tok.token_to_piece(i, false);
      eog[static_cast<size_t>(i)] = tok.is_eog(i);
    }
    const auto vocab = std::make_shared<const TokenVocabulary>(std::move(pieces), std::move(eog));
    const auto t2 = Clock::now();
    std::mt19937 rng(seed);
    std::vector<double> us;
    std::vector<uint64_t> mask;
    std::vector<int32_t> allowed;
    struct Slow {
      double us;
      size_t grammar;
      int step;
      std::string text;
    };
    std::vector<Slow> slow;
    for (size_t gi = 0; gi < grammars.size(); ++gi) {
      const auto& grammar = grammars[gi];
      for (int r = 0; r < runs; ++r) {
        GrammarMatcher m(grammar, vocab);
        std::vector<int32_t> taken;
        for (int s = 0; s < steps; ++s) {
          std::chrono::steady_clock::time_point a, b;
          if (cold) {
            GrammarMatcher fresh(grammar, vocab);
            for (const int32_t t : taken) fresh.accept(t);
            a = Clock::now();
            fresh.fill_mask(mask);
            b = Clock::now();
          } else {
            a = Clock::now();
            m.fill_mask(mask);
            b = Clock::now();
          }
          us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
          if (slowest > 0) {
            std::string text;
            for (const int32_t t : taken) text += tok.token_to_piece(t, false);
            if (text.size() > 60) text = text.substr(text.size() - 60);
            slow.push_back({us.back(), gi, s, std::move(text)});
            std::sort(slow.begin(), slow.end(), [](const Slow& x, const Slow& y) { return x.us > y.us; });
            if (slow.size() > slowest) slow.pop_back();
          }
          allowed.clear();
          for (int32_t t = 0; t < n; ++t)
            if (((mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1) && !tok.is_eog(t)) allowed.push_back(t);
          if (allowed.empty()) break;
          taken.push_back(allowed[rng() % allowed.size()]);
          m.accept(taken.back());
        }
      }
    }
    if (us.empty()) throw Error(Errc::invalid_argument, "no grammar compiled, nothing timed");
    if (why) {
      std::vector<std::pair<int, std::string>> by;
      for (const auto& [m, k] : reasons) by.emplace_back(k, m);
      std::sort(by.rbegin(), by.rend());
      for (const auto& [k, m] : by) std::printf("%6d  %s\n", k, m.c_str());
    }
    for (const Slow& x : slow)
      std::printf("%9.1f us  %s step %d after: %s\n", x.us, grammar_files[x.grammar].c_str(), x.step, x.text.c_str());
    std::sort(us.begin(), us.end());
    auto q = [&](double f) { return us[std::min(us.size() - 1, static_cast<size_t>(f * static_cast<double>(us.size())))]; };
    std::printf("vocabulary %d tokens; %zu grammars (%zu rules) compiled in %.2f ms, %zu refused; trie built in %.1f ms\n",
                n, grammars.size(), n_rules, std::chrono::duration<double, std::milli>(t1 - t0).count(), refused,
                std::chrono::duration<double, std::milli>(t2 - t1).count());
    std::printf("mask: %zu steps, median %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us\n", us.size(), q(0.5), q(0.9),
                q(0.99), us.back());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_grammar_mask: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Time of the grammar's token mask per step (issue 42: median <= 50 us,
// p99 <= 1 ms on a 128k vocabulary).
//
//   bench_grammar_mask MODEL.gguf GRAMMAR.gbnf [--steps N] [--runs R] [--seed S] [--cold]
//
// Loads only the vocabulary of MODEL, compiles the grammar, then R random
// walks of up to N tokens: at each step the full mask is computed (timed:
// GrammarMatcher::fill_mask) and a token drawn uniformly among the allowed
// ones (EOG only when nothing else is allowed, so walks go deep). Prints the
// vocabulary size, the steps timed, median, p90, p99 and max of the mask time,
// and the time of building the trie. A uniform draw is harder than a model's
// choices: it visits states a model rarely reaches. --cold times each mask in
// a fresh matcher that has replayed the walk's tokens (no mask cached, no
// transition computed yet): the cost of a state's first visit.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

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
  bool cold = false;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cold")) cold = true;
    if (i + 1 >= argc) break;
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seed")) seed = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  try {
    const auto file = gguf::File::open(argv[1]);
    const Tokenizer tok = Tokenizer::from_gguf(file);
    std::ifstream gf(argv[2]);
    std::stringstream ss;
    ss << gf.rdbuf();
    const auto t0 = Clock::now();
    const auto grammar = Grammar::parse(ss.str());
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
        allowed.clear();
        bool eog_ok = false;
        for (int32_t t = 0; t < n; ++t)
          if ((mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1) {
            if (tok.is_eog(t)) eog_ok = true;
            else allowed.push_back(t);
          }
        if (allowed.empty()) break;
        (void)eog_ok;
        taken.push_back(allowed[rng() % allowed.size()]);
        m.accept(taken.back());
      }
    }
    std::sort(us.begin(), us.end());
    auto q = [&](double f) { return us[std::min(us.size() - 1, static_cast<size_t>(f * static_cast<double>(us.size())))]; };
    std::printf("vocabulary %d tokens; grammar %zu rules compiled in %.2f ms; trie built in %.1f ms\n", n,
                grammar->n_rules(), std::chrono::duration<double, std::milli>(t1 - t0).count(),
                std::chrono::duration<double, std::milli>(t2 - t1).count());
    std::printf("mask: %zu steps, median %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us\n", us.size(), q(0.5), q(0.9),
                q(0.99), us.back());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_grammar_mask: %s\n", e.what());
    return 1;
  }
  return 0;
}

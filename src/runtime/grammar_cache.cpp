#include "runtime/grammar_cache.hpp"

#include <algorithm>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "synapse/error.hpp"

namespace synapse::runtime {

namespace {

constexpr size_t kMaxGrammars = 64;
constexpr size_t kMaxVocabularies = 4;

struct GrammarCache {
  std::mutex mu;
  std::list<std::pair<std::string, std::shared_ptr<const Grammar>>> lru;  // most recent first
};

struct VocabCache {
  std::mutex mu;
  std::list<std::pair<uint64_t, std::shared_ptr<const TokenVocabulary>>> lru;
};

}  // namespace

std::shared_ptr<const Grammar> cached_grammar(const std::string& gbnf) {
  static GrammarCache cache;
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    for (auto it = cache.lru.begin(); it != cache.lru.end(); ++it)
      if (it->first == gbnf) {
        cache.lru.splice(cache.lru.begin(), cache.lru, it);
        return it->second;
      }
  }
  // Compiled outside the lock: two requests may both compile a new grammar once.
  auto g = Grammar::parse(gbnf);
  std::lock_guard<std::mutex> lock(cache.mu);
  cache.lru.emplace_front(gbnf, g);
  if (cache.lru.size() > kMaxGrammars) cache.lru.pop_back();
  return g;
}

std::vector<int32_t> resolve_grammar_tokens(const Grammar& g, const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (const GrammarTokenRef& r : g.token_refs()) {
    int32_t id = r.id;
    if (!r.text.empty()) {
      const std::vector<token_id> t = tok.tokenize(r.text, /*add_special=*/false, /*parse_special=*/true);
      if (t.size() != 1)
        throw Error(Errc::invalid_argument, "grammar: invalid token '" + r.text + "': the model's tokenizer makes " +
                                                std::to_string(t.size()) + " tokens of it, not one");
      id = t[0];
    }
    if (id >= tok.n_vocab())
      throw Error(Errc::invalid_argument, "grammar: the token reference <[" + std::to_string(id) +
                                              "]> is outside the vocabulary of " + std::to_string(tok.n_vocab()) +
                                              " tokens");
    ids.push_back(id);
  }
  return ids;
}

std::shared_ptr<const TokenVocabulary> cached_vocabulary(const Tokenizer& tok, std::span<const token_id> preserved) {
  static VocabCache cache;
  const int32_t n = tok.n_vocab();
  // The key: FNV-1a over every token's raw text, type and end-of-generation
  // flag (what token_to_piece and is_eog read), without rendering the pieces.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t x) { h = (h ^ x) * 1099511628211ull; };
  for (int32_t i = 0; i < n; ++i) {
    const std::string& t = tok.text(i);
    mix(t.size());
    for (const char c : t) mix(static_cast<uint8_t>(c));
    mix(static_cast<uint64_t>(tok.type(i)) * 2 + (tok.is_eog(i) ? 1 : 0));
  }
  const auto is_preserved = [&](token_id i) {
    return std::find(preserved.begin(), preserved.end(), i) != preserved.end();
  };
  mix(preserved.size());
  for (int32_t i = 0; i < n; ++i)
    if (is_preserved(i)) mix(static_cast<uint64_t>(i));
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    for (auto it = cache.lru.begin(); it != cache.lru.end(); ++it)
      if (it->first == h) {
        cache.lru.splice(cache.lru.begin(), cache.lru, it);
        return it->second;
      }
  }
  std::vector<std::string> pieces(static_cast<size_t>(n));
  std::vector<bool> eog(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    pieces[static_cast<size_t>(i)] = tok.token_to_piece(i, /*special=*/is_preserved(i));
    eog[static_cast<size_t>(i)] = tok.is_eog(i);
  }
  auto v = std::make_shared<const TokenVocabulary>(std::move(pieces), std::move(eog));
  std::lock_guard<std::mutex> lock(cache.mu);
  cache.lru.emplace_front(h, v);
  if (cache.lru.size() > kMaxVocabularies) cache.lru.pop_back();
  return v;
}

}  // namespace synapse::runtime

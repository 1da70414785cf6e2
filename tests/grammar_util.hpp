// Test helpers for grammars: a vocabulary of the 256 single bytes (token b is
// byte b) plus token 256, end of generation; and whether a grammar accepts a
// text exactly, fed byte by byte to a GrammarMatcher.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "synapse/grammar.hpp"

namespace synapse::test {

inline std::shared_ptr<const TokenVocabulary> byte_vocab() {
  static const std::shared_ptr<const TokenVocabulary> v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    pieces.emplace_back("");
    std::vector<bool> eog(257, false);
    eog[256] = true;
    return std::make_shared<const TokenVocabulary>(std::move(pieces), std::move(eog));
  }();
  return v;
}

// Every byte allowed in turn, then the end of generation.
inline bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g, byte_vocab());
  for (const char c : text) {
    const int32_t t = static_cast<uint8_t>(c);
    if (!m.allows(t)) return false;
    m.accept(t);
  }
  return m.allows(256);
}

}  // namespace synapse::test

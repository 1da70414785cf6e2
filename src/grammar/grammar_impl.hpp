// The compiled form of a grammar, shared by the GBNF compiler (gbnf.cpp) and
// the matcher (matcher.cpp).
//
// Every rule is a list of alternatives, each a sequence of elements, all
// stored back to back in one array as llama.cpp's llama_grammar_rule does:
// an alternative ends with kAlt (another follows) or kEnd (the rule's last).
// Terminals are bytes: a kBytes element matches one byte of the set
// byte_sets[value]; a character class over code points was compiled into a
// rule whose alternatives are UTF-8 byte-range sequences, so the matcher
// never decodes UTF-8 and a token may end inside a character.
// Token terminals (llama.cpp's LLAMA_GRETYPE_TOKEN / TOKEN_NOT) match one
// whole token by id: a kToken element the token token_refs[value], a
// kTokenNot element any token but that one; a token's bytes never cross them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "synapse/grammar.hpp"

namespace synapse::grammar {

enum class ElemType : uint8_t { kEnd, kAlt, kRuleRef, kBytes, kToken, kTokenNot };

struct Elem {
  ElemType type;
  uint32_t value;  // kRuleRef: rule id; kBytes: index into byte_sets; kToken(Not): into token_refs
};

// 256 bits: bit b set when byte b matches.
struct ByteSet {
  std::array<uint64_t, 4> w{};
  bool has(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint32_t lo, uint32_t hi) {
    for (uint32_t b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

}  // namespace synapse::grammar

namespace synapse {

struct Grammar::Impl {
  std::vector<grammar::Elem> elems;     // every rule's alternatives, back to back
  std::vector<uint32_t> rule_start;     // rule id -> index in elems of its first alternative
  std::vector<std::string> rule_names;  // rule id -> its name (generated rules: "name-N")
  std::vector<grammar::ByteSet> byte_sets;
  // byte_rep[b]: the smallest byte in exactly the same byte sets as b. Two
  // such bytes step every parser state to the same state, so the matcher
  // computes one transition per class of bytes (a JSON grammar has a few
  // dozen) instead of one per byte.
  std::array<uint8_t, 256> byte_rep{};
  std::vector<GrammarTokenRef> token_refs;  // each <[id]> and <text> once, in order of first use
  uint32_t root = 0;
  size_t max_matcher_states = 1u << 16;  // GrammarLimits::max_matcher_states
  size_t max_matcher_work = 1u << 20;    // GrammarLimits::max_matcher_work

  // Whether elems[i] ends an alternative.
  bool ends(uint32_t i) const {
    return elems[i].type == grammar::ElemType::kEnd || elems[i].type == grammar::ElemType::kAlt;
  }
};

}  // namespace synapse

// Compiled grammars and vocabulary tries, cached across requests.
//
// Compiling a grammar (a JSON Schema's is a few hundred rules) and building
// the trie of a 128k vocabulary cost milliseconds; requests repeat both, so
// each is kept: grammars by their GBNF text (the 64 most recently used),
// vocabularies by a hash of every token's bytes and end-of-generation flag
// (so a Tokenizer freed and another allocated at its address cannot meet a
// stale trie). Thread-safe: a mutex guards each cache; what they return is
// immutable.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "synapse/grammar.hpp"
#include "synapse/tokenizer.hpp"

namespace synapse::runtime {

// Grammar::parse(gbnf), cached. Throws what Grammar::parse throws.
std::shared_ptr<const Grammar> cached_grammar(const std::string& gbnf);

// The id of each of g.token_refs() for GrammarMatcher: <[id]> as written,
// <text> what llama_tokenize(text, add_special = false, parse_special = true)
// makes of it, which must be exactly one token (llama.cpp's parse_token: a
// special token's text, or a text the vocabulary has as one token). Throws
// Error(invalid_argument) "grammar: invalid token '<text>' ..." otherwise, or
// for an id outside the vocabulary. Thread-safe.
std::vector<int32_t> resolve_grammar_tokens(const Grammar& g, const Tokenizer& tok);

// The TokenVocabulary of tok: token_to_piece(id, special = false) (control
// tokens render as "", so no grammar produces them) and is_eog(id); the
// `preserved` tokens render with special = true (a grammar can write a chat
// format's markers as the control tokens its model was tuned on).
std::shared_ptr<const TokenVocabulary> cached_vocabulary(const Tokenizer& tok,
                                                         std::span<const token_id> preserved = {});

}  // namespace synapse::runtime

// The two subword algorithms, each applied to one raw-text fragment (special
// tokens already split out by tokenizer.cpp).
#pragma once

#include <string>
#include <vector>

#include "tokenizer/pretokenize.hpp"
#include "tokenizer/vocab.hpp"

namespace synapse::tokenizer {

// llm_tokenizer_spm_session::tokenize: `text` already has spaces escaped to
// U+2581 (and the prefix space added). Appends ids to `out`.
void spm_tokenize(const Vocab& vocab, const std::string& text, std::vector<token_id>& out);

// llm_tokenizer_bpe_session::tokenize: pre-tokenizes `text` with `pre`, then
// merges each word by rank. Appends ids to `out`.
void bpe_tokenize(const Vocab& vocab, const PreTokenizer& pre, const std::string& text,
                  std::vector<token_id>& out);

}  // namespace synapse::tokenizer

// BPE pre-tokenization: splitting text into words with the regex list of the
// vocabulary's tokenizer.ggml.pre, as llama.cpp's unicode_regex_split does it
// (src/unicode.cpp, src/llama-vocab.cpp llm_tokenizer_bpe, commit c392e509).
//
// llama.cpp runs every regex that uses \p{..} categories on a "collapsed" copy
// of the text: each code point >= 0x80 becomes one byte standing for its
// category (0xD1 number, 0xD2 letter, 0xD3 punctuation, 0xD4 mark, 0xD5
// symbol, 0x0B white space, 0xD0 anything else), and \p{X} in the regex
// becomes [that byte + the ASCII members]. We do the same and match with PCRE2
// on bytes, so the words are the ones llama.cpp gets (its hand-written GPT-2
// and Llama-3 splitters agree with their regexes). Regexes without categories
// run on the code points (non-ASCII white space -> U+000B), like std::wregex.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace synapse::tokenizer {

// llama_vocab_pre_type values synapse knows (the pre-tokenizers of c392e509,
// and gpt4o as llama.cpp v0.5.0 defines it).
enum class PreType {
  default_,
  llama3,
  deepseek_llm,
  deepseek_coder,
  deepseek3_llm,
  falcon,
  mpt,
  starcoder,
  gpt2,
  refact,
  command_r,
  stablelm2,
  qwen2,
  olmo,
  dbrx,
  smaug,
  poro,
  chatglm4,
  viking,
  jais,
  tekken,
  smollm,
  codeshell,
  bloom,
  gpt3_finnish,
  exaone,
  chameleon,
  minerva,
  gpt4o,
};

// The regexes llama.cpp applies for `pre`, in order.
std::vector<std::string> pre_regexes(PreType pre);

class PreTokenizer {
 public:
  explicit PreTokenizer(PreType pre);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Splits `text` (any bytes; invalid UTF-8 becomes U+FFFD) into words, each
  // re-encoded as UTF-8 and, when `byte_encode`, spelled with GPT-2's
  // byte-to-unicode map. Never throws on any input; linear in practice.
  std::vector<std::string> split(std::string_view text, bool byte_encode) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace synapse::tokenizer

// Text <-> token ids, exactly as llama.cpp's llama_tokenize / llama_detokenize.
//
// The vocabulary comes from a GGUF file's tokenizer.ggml.* keys:
//   tokenizer.ggml.model       "llama" (SentencePiece) or "gpt2" (byte-level BPE)
//   tokenizer.ggml.pre         the BPE pre-tokenizer name ("llama-bpe", "qwen2", ...)
//   tokenizer.ggml.tokens      [n_vocab] strings
//   tokenizer.ggml.scores      [n_vocab] FLOAT32 (SPM merge priority)
//   tokenizer.ggml.token_type  [n_vocab] INT32 (llama_token_type)
//   tokenizer.ggml.merges      BPE merges "a b", rank = index
//   tokenizer.ggml.{bos,eos,eot,eom,unknown,padding}_token_id, add_bos_token,
//   add_eos_token, add_space_prefix
//   tokenizer.ggml.fim_{pre,suf,mid,pad,rep,sep}_token_id (and the older
//   prefix/suffix/middle_token_id); without them, found by their texts
//   (<|fim_prefix|>, <PRE>, ...) as llama.cpp v0.5.0's vocabulary loader does
//
// Thread-safety: a Tokenizer is immutable after loading; its const members
// (tokenize, token_to_piece, ...) may run on any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "synapse/gguf.hpp"

namespace synapse {

using token_id = int32_t;

// llama.cpp's llama_token_type / llama_token_attr origins (GGUF token_type).
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

// The fill-in-the-middle tokens of a vocabulary (llama_vocab_fim_pre() and
// the others of llama.cpp); -1 each one the vocabulary lacks.
struct FimTokens {
  token_id pre = -1;  // before the prefix text
  token_id suf = -1;  // before the suffix text
  token_id mid = -1;  // where the model writes the middle
  token_id pad = -1;
  token_id rep = -1;  // the repository name's marker (repo-level FIM)
  token_id sep = -1;  // before each file's name (repo-level FIM)
};

class Tokenizer {
 public:
  // Reads the vocabulary from `file`. Throws Error(format) naming the key when
  // a tokenizer key is missing or of the wrong type (e.g. scores not FLOAT32),
  // Error(unsupported) for an unknown tokenizer.ggml.model.
  static Tokenizer from_gguf(const gguf::File& file);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // llama_tokenize(text, add_special, parse_special): add_special adds BOS
  // (and EOS) per add_bos_token/add_eos_token; parse_special turns control and
  // user-defined token texts in `text` into their ids. Never throws on any
  // byte string (invalid UTF-8 included).
  std::vector<token_id> tokenize(std::string_view text, bool add_special,
                                 bool parse_special) const;

  // llama_token_to_piece(id, lstrip = 0, special): the bytes of one token.
  // `special` false renders control tokens as "". Throws Error(out_of_range)
  // for an id outside [0, n_vocab).
  std::string token_to_piece(token_id id, bool special) const;

  // llama_detokenize(ids, remove_special, unparse_special).
  std::string detokenize(const std::vector<token_id>& ids, bool remove_special,
                         bool unparse_special) const;

  int32_t n_vocab() const;
  token_id bos() const;  // -1 when the vocabulary has none
  token_id eos() const;
  token_id eot() const;  // end of turn (tokenizer.ggml.eot_token_id or a known text, e.g. <|im_end|>); -1 when none
  bool add_bos() const;
  bool add_eos() const;
  FimTokens fim() const;
  // End of generation: eos, eot, eom and the known end tokens of the vocabulary.
  bool is_eog(token_id id) const;
  // Every id of [0, n_vocab()) that is_eog, ascending. Computed from the
  // vocabulary's set at each call (a few ids): keep it where it is read often.
  std::vector<token_id> eog_ids() const;
  TokenType type(token_id id) const;
  const std::string& text(token_id id) const;  // the raw vocabulary string

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace synapse

// The vocabulary as llama.cpp's llama_vocab holds it (src/llama-vocab.cpp,
// commit c392e509): token texts, scores, attributes, special ids and flags,
// the BPE merge ranks, the special-token and piece caches.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "synapse/gguf.hpp"
#include "synapse/tokenizer.hpp"
#include "tokenizer/pretokenize.hpp"

namespace synapse::tokenizer {

// llama_token_attr bits.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrNormalized = 1u << 6,
  kAttrLstrip = 1u << 7,
  kAttrRstrip = 1u << 8,
  kAttrSingleWord = 1u << 9,
};

enum class VocabType { spm, bpe };

inline constexpr token_id kNull = -1;  // LLAMA_TOKEN_NULL

struct Vocab {
  VocabType type = VocabType::spm;
  std::string model;     // tokenizer.ggml.model
  std::string pre_name;  // tokenizer.ggml.pre as given
  PreType pre = PreType::default_;

  std::vector<std::string> text;   // [n_vocab]
  std::vector<float> score;        // [n_vocab]
  std::vector<uint32_t> attr;      // [n_vocab] TokenAttr bits
  std::vector<TokenType> ttype;    // [n_vocab] as the file says
  std::unordered_map<std::string, token_id> to_id;

  token_id bos = 1, eos = 2, eot = kNull, eom = kNull, unk = 0, sep = kNull, pad = kNull;
  token_id fim_pre = kNull, fim_suf = kNull, fim_mid = kNull, fim_pad = kNull,
           fim_rep = kNull, fim_sep = kNull;

  bool add_space_prefix = false;
  bool add_bos = false;
  bool add_eos = false;
  bool ignore_merges = false;
  bool clean_spaces = false;
  bool escape_whitespaces = true;

  // BPE merges: "left right" -> rank (index in tokenizer.ggml.merges).
  std::unordered_map<std::string, int32_t> merge_rank;

  std::set<token_id> eog;
  // Control, user-defined and unknown tokens, longest text first (the order
  // llama.cpp's tokenizer_st_partition tries them in).
  std::vector<token_id> special_cache;
  // token_to_piece(id, special = true) for every id.
  std::vector<std::string> piece_cache;
  // Bit (a << 8 | b) is set when byte b follows byte a inside some token
  // text. Where two neighbouring text bytes are not such a pair, no token can
  // span the boundary between them, so the SPM merges on either side of it
  // are independent (spm.cpp splits the work there; a speed-up only).
  std::vector<uint64_t> inner_pairs = std::vector<uint64_t>(1024, 0);

  int32_t n_vocab() const { return static_cast<int32_t>(text.size()); }
  token_id find(std::string_view s) const {
    auto it = to_id.find(std::string(s));
    return it == to_id.end() ? kNull : it->second;
  }
  bool pair_inside_token(uint8_t a, uint8_t b) const {
    const unsigned k = (unsigned(a) << 8) | b;
    return (inner_pairs[k >> 6] >> (k & 63)) & 1;
  }
  // Rank of merging `left` and `right`; -1 when no merge exists.
  int32_t rank(std::string_view left, std::string_view right) const;
  // llama_vocab::byte_to_token: "<0xXX>" for SPM (then the byte itself, then
  // unk), the GPT-2 stand-in for BPE; kNull if none exists.
  token_id byte_to_token(uint8_t b) const;

  static Vocab load(const gguf::File& file);
};

}  // namespace synapse::tokenizer

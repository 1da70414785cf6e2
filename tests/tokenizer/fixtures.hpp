// Shared helpers for the tokenizer tests: vocabularies loaded once per
// process, the case files, base64.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "synapse/gguf.hpp"
#include "synapse/tokenizer.hpp"

namespace synapse::test {

inline std::string tokenizer_data(const std::string& rel) {
  return std::string(SYNAPSE_TEST_DATA) + "/tokenizer/" + rel;
}

// The GGUF file behind a case-file name ("llama-spm" -> ggml-vocab-llama-spm.gguf;
// "tiny-gpt-oss", the gpt-4o pre-tokenizer's cases, uses that test model's
// synthetic vocabulary: no o200k vocabulary is available offline; "tiny-gemma3",
// SentencePiece without a space prefix, that model's).
inline std::string vocab_path(const std::string& name) {
  if (name == "stories260K") return tokenizer_data("vocab/stories260K.gguf");
  if (name == "tiny-gpt-oss") return std::string(SYNAPSE_TEST_DATA) + "/models/tiny-gpt-oss-f32.gguf";
  if (name == "tiny-gemma3") return std::string(SYNAPSE_TEST_DATA) + "/models/tiny-gemma3-f32.gguf";
  return tokenizer_data("vocab/ggml-vocab-" + name + ".gguf");
}

// Each vocabulary is parsed once per test process (the BPE files are 6-8 MB).
inline const Tokenizer& load_tokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[name];
  if (!slot) {
    const gguf::File file = gguf::File::open(vocab_path(name));
    slot = std::make_unique<Tokenizer>(Tokenizer::from_gguf(file));
  }
  return *slot;
}

inline std::string base64_decode(const std::string& in) {
  static const std::string chars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const size_t v = chars.find(c);
    if (v == std::string::npos) continue;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

// One line of tests/data/tokenizer/cases/<vocab>.jsonl.
struct Case {
  std::string name;
  std::string text;
  bool add_special = false;
  bool parse_special = false;
  std::vector<token_id> ids;
  std::vector<std::string> pieces;
  std::string detok;
  std::string detok_plain;
};

std::vector<Case> load_cases(const std::string& vocab_name);

// Every case file, in a fixed order.
inline const std::vector<std::string>& case_vocabs() {
  static const std::vector<std::string> v = {"stories260K", "llama-spm",  "mistral-spm",
                                             "phi-3",       "llama-bpe",  "llama-bpe-3.1",
                                             "qwen2",       "gpt-2",      "tiny-gpt-oss",
                                             "tiny-gemma3"};
  return v;
}

}  // namespace synapse::test

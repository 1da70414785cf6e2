// What synapse perplexity and synapse imatrix share with llama-perplexity
// and llama-imatrix (llama.cpp v0.5.0): the text file as -f reads it and
// the NLL of one scored position.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "synapse/error.hpp"
#include "synapse/tokenizer.hpp"

namespace synapse::tools {

// The text of -f FILE as llama.cpp's common -f reads it: the bytes, one
// trailing '\n' dropped. Throws Error(io) for a file that cannot be read,
// Error(invalid_argument) for an empty one.
inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(Errc::io, path + ": cannot open the text (" + std::strerror(errno) + ")");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw Error(Errc::io, path + ": read error");
  if (!s.empty() && s.back() == '\n') s.pop_back();  // as llama.cpp's -f
  if (s.empty()) throw Error(Errc::invalid_argument, path + ": the text file is empty");
  return s;
}

// llama.cpp's log_softmax(n_vocab, logits, tok) of llama-perplexity and
// llama-imatrix: -log p(tok) from one row of logits [n_vocab], the exp sum
// in double, the max in float.
inline double row_nll(const float* logits, int64_t n_vocab, token_id tok) {
  float max_logit = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) max_logit = std::max(max_logit, logits[i]);
  double sum_exp = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  return -(static_cast<double>(logits[tok] - max_logit) - std::log(sum_exp));
}

}  // namespace synapse::tools

// When generation stops, and what text is safe to show before it does.
//
// Three rules, as llama.cpp's llama-cli / llama-server apply them:
//   - an end-of-generation token (Tokenizer::is_eog: eos, eot, eom, <|im_end|>,
//     ...) ends the reply and is not printed;
//   - a stop string (llama-server's "stop", llama-cli's -r) ends the reply at
//     its first occurrence, also when it arrives split across tokens; neither
//     it nor anything after it is printed;
//   - -n N ends the reply after N generated tokens (N < 0: no limit).
//
// StopFilter is the streaming part: text goes in piece by piece, and it hands
// back only what can no longer turn out to be the start of a stop string
// (llama-server's find_stopping_strings with partial matches held back). It
// also holds back an incomplete UTF-8 sequence at the end, so a multi-byte
// character split over byte tokens is printed whole.
//
// Thread-safety: a Stopper holds per-reply state: one thread per Stopper.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "synapse/tokenizer.hpp"

namespace synapse {

class StopFilter {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopFilter(std::vector<std::string> stops = {});

  // Appends `piece` and returns the text that is now safe to print: all of it
  // except a suffix that is a proper prefix of some stop string or an
  // incomplete UTF-8 sequence. When a stop string completes, returns the text
  // before its earliest occurrence and stopped() becomes true; later calls
  // return "".
  std::string feed(std::string_view piece);

  // Generation ended without a stop string: returns what was held back (the
  // partial match was not a stop after all). "" after a stop.
  std::string flush();

  bool stopped() const { return stopped_; }
  // The stop string that matched ("" when none did).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

enum class StopReason {
  none,         // still generating
  eog,          // an end-of-generation token
  stop_string,  // a stop string
  n_predict,    // -n tokens generated
};

// "none", "eog", "stop string", "n_predict".
const char* stop_reason_name(StopReason r) noexcept;

struct StopParams {
  int32_t n_predict = -1;          // -n: tokens to generate; < 0: no limit
  std::vector<std::string> stops;  // stop strings
  bool ignore_eos = false;         // --ignore-eos: EOG tokens are printed and do not stop
  // Control tokens printed as their text (llama-server's preserved_tokens):
  // the markers a chat format's parser reads (gpt-oss's <|channel|>,
  // Mistral's [TOOL_CALLS]). Other control tokens print as "".
  std::vector<token_id> preserved_tokens = {};
};

// The whole stopping rule for one reply: feed each sampled token, print what
// comes back, stop when done() is true.
//
//   synapse::Stopper stop(tok, {.n_predict = 128, .stops = {"User:"}});
//   while (!stop.done()) {
//     token_id t = sampler.sample(logits);
//     print(stop.on_token(t));
//     if (stop.done()) break;
//     ... forward t ...
//   }
//   print(stop.finish());
class Stopper {
 public:
  Stopper(const Tokenizer& tok, StopParams p);

  // Records one sampled token and returns the text to print now (pieces
  // rendered with token_to_piece(id, special = false), so control tokens print
  // as "", except preserved_tokens, rendered with special = true). An EOG
  // token returns "" and ends the reply. Throws
  // Error(out_of_range) for an id outside the vocabulary, Error(invalid_argument)
  // when called after done().
  std::string on_token(token_id id);

  // The held-back text when the reply ended by EOG, -n or the caller's own
  // reason (context full, Ctrl-C); "" after a stop string. Call once at the end.
  std::string finish();

  bool done() const { return reason_ != StopReason::none; }
  StopReason reason() const { return reason_; }
  int32_t n_generated() const { return n_gen_; }  // tokens accepted, EOG excluded
  const std::string& matched() const { return filter_.matched(); }  // the stop string that ended it, or ""

 private:
  const Tokenizer& tok_;
  StopParams p_;
  StopFilter filter_;
  StopReason reason_ = StopReason::none;
  int32_t n_gen_ = 0;
  bool finished_ = false;
};

}  // namespace synapse


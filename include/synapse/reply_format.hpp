// One formatter of OpenAI-shaped replies (text_completion, chat.completion,
// their streamed chunks, logprobs, usage), shared by the HTTP server
// (src/server/response.cpp, through the same code's nlohmann form in
// src/runtime/reply_format.hpp) and the Python package (llama-cpp-python's
// dicts, python/src/reply.cpp), so the two cannot drift apart.
//
// Where llama-cpp-python deliberately differs from llama-server/OpenAI, the
// dialect says which one a reply follows:
//
//   field                       llama_server                   llama_cpp_python
//   ------------------------    ---------------------------    -----------------------------------
//   head                        + system_fingerprint           id, object, created, model
//   usage                       + prompt_tokens_details         prompt/completion/total_tokens
//                                 .cached_tokens
//   token text ("token", keys)  token_to_piece(special=true);  token_to_piece(special=false),
//                               invalid UTF-8 becomes U+FFFD   invalid UTF-8 bytes dropped
//                               when written                   (Python's decode(errors="ignore"))
//   choice text                 the reply's bytes (U+FFFD)     invalid UTF-8 bytes dropped
//   completion top_logprobs     the n_probs candidates only    the candidates plus the chosen
//                                                              token (llama-cpp-python's
//                                                              top_logprob.update({token: lp}))
//   completion text_offset      bytes of earlier pieces        characters of earlier pieces
//   chat logprobs               {"content", "refusal": null}   {"content"}
//   key order                   sorted (the server's bytes)    llama-cpp-python's order
//
// llama-cpp-python itself (llama_cpp/llama.py, _create_completion) counts a
// whole reply's text_offset in characters of the decoded prefix and the end
// of a stream's in bytes of the detokenized prefix; the synapse package counts
// characters of each piece (decoded alone) in both, from the prompt's length
// in characters. For the chosen token in top_logprobs llama-cpp-python calls
// update(); here a candidate of the same text keeps its own value (setdefault).
// The two differ only when two tokens have the same text.
//
// Every function is a pure function of its arguments (thread-safe). The
// JSON text returned is valid UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "synapse/generation.hpp"
#include "synapse/tokenizer.hpp"

namespace synapse {

enum class ReplyDialect {
  llama_server,      // OpenAI's fields as llama-server v0.5.0 writes them (synapse serve)
  llama_cpp_python,  // llama-cpp-python's dicts (the synapse Python package)
};

// One generated token as the formatter reads it: its id, log p(id), and the
// n_probs most likely candidates of its row (views: valid while the
// GenerationResult or steps they came from are).
struct TokenProbs {
  token_id id = -1;
  float logprob = 0;
  std::span<const TokenLogprob> top;
};

// The tokens of a finished reply (one per GenerationResult::tokens; logprob 0
// and no candidates where the reply has none).
std::vector<TokenProbs> token_probs(const GenerationResult& r);
// The steps that put a token in the reply (closing steps, id -1, and
// end-of-generation tokens left out).
std::vector<TokenProbs> token_probs(std::span<const GeneratedToken> steps);

// The fields every object of one reply shares.
struct ReplyHead {
  std::string id;                  // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;             // Unix seconds
  std::string model;               // the name the reply reports
  std::string system_fingerprint;  // llama_server only
};

// One choice of a completion or chat reply, or of one streamed chunk.
struct ReplyChoice {
  int index = 0;
  // completion: the text (UTF-8 bytes, possibly cut mid-character); chat: the
  // JSON text of the message (a whole reply) or of the delta (a chunk).
  std::string text;
  bool logprobs = false;           // false: "logprobs": null
  std::vector<TokenProbs> tokens;  // the tokens whose logprobs the choice carries
  size_t text_offset = 0;          // completion: text_offset of tokens[0] (dialect's unit)
  std::string finish_reason;       // "" while generating: null
};

// OpenAI's usage; cached_tokens is llama_server's prompt_tokens_details.
struct ReplyUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};

// A whole text_completion reply (chunk false: with usage) or one streamed
// text_completion chunk (chunk true: no usage), as JSON text. Throws
// Error(out_of_range) for a token id outside the vocabulary.
std::string completion_json(ReplyDialect d, const ReplyHead& head, const ReplyChoice& choice, const ReplyUsage& usage,
                            const Tokenizer& tok, bool chunk);

// A whole chat.completion reply (chunk false: choice.text the message, with
// usage) or one chat.completion.chunk (chunk true: choice.text the delta), as
// JSON text. Throws Error(invalid_argument) when choice.text is not a JSON
// object, Error(out_of_range) for a token id outside the vocabulary.
std::string chat_json(ReplyDialect d, const ReplyHead& head, const ReplyChoice& choice, const ReplyUsage& usage,
                      const Tokenizer& tok, bool chunk);

// `s` with every byte that is not part of a valid UTF-8 sequence removed
// (Python's bytes.decode("utf-8", errors="ignore"): overlong forms,
// surrogates and code points above U+10FFFF are invalid).
std::string drop_invalid_utf8(std::string_view s);

}  // namespace synapse

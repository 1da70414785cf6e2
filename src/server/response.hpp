// Replies in the shapes clients parse: OpenAI's chat.completion,
// chat.completion.chunk, text_completion (with usage and
// prompt_tokens_details.cached_tokens) and llama-server's native /completion
// object; errors as {"error":{"message","type","param","code"}}; server-sent
// events as "data: <json>\n\n" lines.
//
// Everything here is a pure function of its arguments: the bytes of a
// reply's text, token ids and logprobs depend on the generation alone.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/request.hpp"
#include "synapse/generation.hpp"
#include "synapse/tokenizer.hpp"

namespace synapse::server {

// The fields every reply of one request shares.
struct ReplyMeta {
  std::string id;                  // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;             // Unix seconds
  std::string model;               // the alias or file name served
  std::string system_fingerprint;  // the build that answered
};

// llama-server's error types by status: 400 invalid_request_error,
// 401 authentication_error, 404 not_found_error, 413 invalid_request_error,
// 503 unavailable_error, else server_error. code is the status.
nlohmann::json error_body(int status, const std::string& message, const std::string& param = {});

// The whole non-streamed reply for `req` (choices in order prompts x n).
nlohmann::json completion_reply(const CompletionRequest& req, const ReplyMeta& meta,
                                std::span<const GenerationResult> choices, const Tokenizer& tok);

// One streamed chunk for choice `index`: the text released since the last
// chunk and the steps since then (their tokens' logprobs when asked; closing
// steps, id -1, and end-of-generation tokens carry no token;
// text_offset: the bytes of this choice's earlier tokens, for the completions
// route's text_offset). A
// non-empty finish_reason marks the choice's last chunk (with its `out` for
// the native route's final fields). chat's first chunk carries the role.
nlohmann::json stream_chunk(const CompletionRequest& req, const ReplyMeta& meta, int index, const std::string& text,
                            std::span<const GeneratedToken> steps, size_t text_offset, const Tokenizer& tok,
                            bool first, const GenerationResult* final_out);

// OpenAI's finish_reason of a finished reply: "stop" or "length" (a cancelled
// reply, which no client reads, is reported as "stop").
const char* finish_reason_of(const GenerationResult& r);

// The usage object of all choices (OpenAI: prompt tokens counted once per prompt).
nlohmann::json usage_of(const CompletionRequest& req, std::span<const GenerationResult> choices);

// The chunk stream_options.include_usage adds before [DONE]: empty choices, usage.
nlohmann::json usage_chunk(const CompletionRequest& req, const ReplyMeta& meta, std::span<const GenerationResult> choices);

// "data: " + JSON + "\n\n" (invalid UTF-8 in text replaced by U+FFFD).
std::string sse_event(const nlohmann::json& j);

// JSON text with invalid UTF-8 replaced by U+FFFD (never throws on text a
// model produced byte by byte).
std::string dump_json(const nlohmann::json& j);

}  // namespace synapse::server

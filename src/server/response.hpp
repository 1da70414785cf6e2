// Replies in the shapes clients parse (OpenAI's fields through the shared
// formatter, runtime/reply_format.hpp, in its llama_server dialect): OpenAI's chat.completion,
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

#include "runtime/reply_format.hpp"
#include "server/request.hpp"
#include "synapse/generation.hpp"
#include "synapse/scheduler.hpp"
#include "synapse/tokenizer.hpp"

namespace synapse::server {

// The fields every reply of one request shares (id "chatcmpl-..." /
// "cmpl-...", created, model: the alias or file name served,
// system_fingerprint: the build that answered).
using ReplyMeta = ReplyHead;

// llama-server's error types by status: 400 invalid_request_error,
// 401 authentication_error, 404 not_found_error, 413 invalid_request_error,
// 503 unavailable_error, else server_error. code is the status, or `code`
// when given (OpenAI's string codes: "context_length_exceeded").
nlohmann::json error_body(int status, const std::string& message, const std::string& param = {},
                          const std::string& code = {});

// The whole non-streamed reply for `req` (choices in order prompts x n). A
// chat reply with req.chat_output is parsed (runtime::parse_output, choice
// i's call ids from chat_output->for_choice(i)) into chat_message's fields,
// its logprobs still those of every generated token. An OpenAI-shaped reply
// carries llama-server's "timings" of its first choice (wall-clock values:
// the one part of the reply that depends on the load).
nlohmann::json completion_reply(const CompletionRequest& req, const ReplyMeta& meta,
                                std::span<const GenerationResult> choices, const Tokenizer& tok);

// One streamed chunk for choice `index`: the text released since the last
// chunk and the steps since then (their tokens' logprobs when asked; closing
// steps, id -1, and end-of-generation tokens carry no token;
// text_offset: the bytes of this choice's earlier tokens, for the completions
// route's text_offset). A
// non-empty finish_reason marks the choice's last chunk (with its `out` for
// the native route's final fields; `tool_calls`: the reply made calls, so a
// chat reply that ended by itself says "tool_calls"). chat's first chunk
// carries the role (content null when it has no text, as llama-server's). A parsed chat reply (req.chat_output) sends only its
// first and last chunks here, its text through delta_chunks. "timings"
// (llama-server's): on an OpenAI-shaped last chunk unless usage_chunk
// follows; with req.timings_per_token on every chunk of a step that sampled
// a token (its GeneratedToken::timings), on any route.
nlohmann::json stream_chunk(const CompletionRequest& req, const ReplyMeta& meta, int index, const std::string& text,
                            std::span<const GeneratedToken> steps, size_t text_offset, const Tokenizer& tok,
                            bool first, const GenerationResult* final_out, bool tool_calls = false);

// llama-server's prompt-progress chunk (return_progress) for choice `index`:
// the route's empty chunk (chat's the role with content null, as
// llama-server sends one with each report) with "prompt_progress" {total,
// cache, processed, time_ms}, and with req.timings_per_token the timings so
// far (prompt_n and prompt_ms 0 at the first report).
nlohmann::json progress_chunk(const CompletionRequest& req, const ReplyMeta& meta, int index, const PromptProgress& pp,
                              const Tokenizer& tok);

// The chat.completion.chunk objects of one step of a parsed chat reply
// (req.chat_output; the deltas of its runtime::OutputStream), one per delta
// as OpenAI streams them: {"content"}, {"reasoning_content"}, a call's
// header {"tool_calls": [{index, id, type: "function", function: {name,
// arguments: ""}}]}, then its argument fragments {"tool_calls": [{index,
// function: {arguments}}]}. The step's logprobs ride on its first chunk, or
// on one with an empty delta when the parser holds the step's text (text
// that may begin a marker, a call not yet complete): with parsing, logprobs
// come with the step that sampled the token, not with the delta its text
// ends up in. With req.timings_per_token the last chunk carries the step's
// timings.
std::vector<nlohmann::json> delta_chunks(const CompletionRequest& req, const ReplyMeta& meta, int index,
                                         std::span<const runtime::Delta> deltas,
                                         std::span<const GeneratedToken> steps, const Tokenizer& tok);

// OpenAI's finish_reason of a finished reply: "length", else "tool_calls"
// when the reply made calls, else "stop" (a cancelled reply, which no client
// reads, is reported as "stop"). llama-server's rule.
const char* finish_reason_of(const GenerationResult& r, bool tool_calls = false);

// The usage object of all choices (OpenAI: prompt tokens counted once per prompt).
nlohmann::json usage_of(const CompletionRequest& req, std::span<const GenerationResult> choices);

// The chunk stream_options.include_usage adds before [DONE]: empty choices,
// usage, and the timings of `last` (the choice that ended last).
nlohmann::json usage_chunk(const CompletionRequest& req, const ReplyMeta& meta, std::span<const GenerationResult> choices,
                           const GenerationResult& last);

// "data: " + JSON + "\n\n" (invalid UTF-8 in text replaced by U+FFFD).
std::string sse_event(const nlohmann::json& j);

// JSON text with invalid UTF-8 replaced by U+FFFD (never throws on text a
// model produced byte by byte).
std::string dump_json(const nlohmann::json& j);

}  // namespace synapse::server

// The reply formatter of synapse/reply_format.hpp as JSON values, for the
// server (which adds llama-server's own routes and fields around them) and
// the public functions that write JSON text for the Python package.
//
// Json is nlohmann::json (keys sorted: the server's bytes) or
// nlohmann::ordered_json (keys in the order written here, which is
// llama-cpp-python's); both are instantiated in reply_format.cpp. The dialect
// decides the fields and values (the table in synapse/reply_format.hpp).
// Pure functions of their arguments (thread-safe); Error(out_of_range) for a
// token id outside the vocabulary.
#pragma once

#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/chat_output.hpp"
#include "synapse/reply_format.hpp"

namespace synapse::runtime {

// {"id", "object", "created", "model"} (+ "system_fingerprint": llama_server).
template <class Json>
Json reply_head(ReplyDialect d, const ReplyHead& head, const char* object);

// {"prompt_tokens", "completion_tokens", "total_tokens"}
// (+ "prompt_tokens_details": {"cached_tokens"}: llama_server).
template <class Json>
Json reply_usage(ReplyDialect d, const ReplyUsage& u);

// OpenAI's per-token entries [{"token", "logprob", "bytes", "top_logprobs":
// [{"token", "logprob", "bytes"}]}] (chat's logprobs.content); with_id adds
// llama-server's "id" to each (its /completion completion_probabilities).
template <class Json>
Json token_entries(ReplyDialect d, std::span<const TokenProbs> tokens, const Tokenizer& tok, bool with_id);

// chat's logprobs: {"content": token_entries} (+ "refusal": null: llama_server).
template <class Json>
Json chat_logprobs(ReplyDialect d, std::span<const TokenProbs> tokens, const Tokenizer& tok);

// OpenAI's legacy completions logprobs: {"tokens", "text_offset",
// "token_logprobs", "top_logprobs": [{piece: logprob}]}; `offset` is
// text_offset of tokens[0], in the dialect's unit (bytes or characters).
template <class Json>
Json completion_logprobs(ReplyDialect d, std::span<const TokenProbs> tokens, const Tokenizer& tok, size_t offset);

// A text_completion choice {"text", "index", "logprobs", "finish_reason"}
// (a whole reply's or a chunk's): logprobs null unless choice.logprobs.
template <class Json>
Json completion_choice(ReplyDialect d, const ReplyChoice& choice, const Tokenizer& tok);

// A chat choice {"index", "message" (or "delta"), "logprobs",
// "finish_reason"} with `body` as the message or delta.
template <class Json>
Json chat_choice(ReplyDialect d, const ReplyChoice& choice, const char* field, Json body, const Tokenizer& tok);

// A parsed chat reply as OpenAI's assistant message: role, content (null
// when empty beside calls), reasoning_content (when there is some),
// tool_calls (chat_tool_calls, when there are some). Both dialects.
template <class Json>
Json chat_message(const ParsedOutput& p);

// OpenAI's tool_calls: [{"id", "type": "function", "function": {"name",
// "arguments": JSON text}}].
template <class Json>
Json chat_tool_calls(std::span<const ToolCall> calls);

// One streamed delta of a parsed chat reply, as OpenAI streams it:
// {"content"}, {"reasoning_content"}, a call's header {"tool_calls":
// [{"index", "id", "type": "function", "function": {"name", "arguments":
// ""}}]}, then its argument fragments {"tool_calls": [{"index", "function":
// {"arguments"}}]}. Both dialects.
template <class Json>
Json chat_delta(const Delta& d);

// Text as the dialect writes it: llama_server keeps the bytes (the
// serializer writes U+FFFD for invalid UTF-8), llama_cpp_python drops the
// invalid bytes.
std::string reply_text(ReplyDialect d, std::string_view s);

}  // namespace synapse::runtime

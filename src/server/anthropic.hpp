// Anthropic's Messages API (POST /v1/messages, POST /v1/messages/count_tokens)
// as a translation onto the chat-completions route: a request becomes a chat
// body, the chat reply (or each chunk of its stream) becomes Anthropic's.
// Shapes and names from Anthropic's API reference ("Messages", "Count message
// tokens", "Streaming messages", "Errors"); llama.cpp's tools/server speaks
// the same API and was read for its choices where the reference is silent.
//
// Everything here is a pure function of its arguments, except AnthropicStream,
// which keeps the state of one stream.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/translation.hpp"

namespace synapse::server {

// A Messages request -> the chat-completions body that asks the same:
//   system (a string or text blocks)      -> a first {"role":"system"} message
//   messages[i] {role user|assistant, content: a string or blocks}:
//     text                                 -> {"type":"text","text"} parts of that message
//     thinking (assistant)                 -> the message's reasoning_content
//     redacted_thinking (assistant)        -> dropped (opaque to any other model)
//     tool_use {id,name,input} (assistant) -> tool_calls[{id, type:function, function:{name, arguments:
//                                             input as JSON text}}]
//     tool_result {tool_use_id, content: a string or text blocks, is_error} (user)
//                                          -> a {"role":"tool","tool_call_id","content"} message, in block
//                                             order with the user's text (is_error has no chat counterpart:
//                                             the result's text tells the model what failed)
//   max_tokens (required)                  -> max_tokens
//   stop_sequences                         -> stop
//   temperature, top_p, top_k, stream      -> the same (stream adds stream_options.include_usage: the
//                                             final usage is what message_delta reports)
//   tools[{name, description, input_schema}] -> tools[{type:function, function:{name, description,
//                                             parameters}}]
//   tool_choice {type auto|any|tool|none, name, disable_parallel_tool_use}
//                                          -> tool_choice "auto"|"required"|{type:function,function:{name}}|
//                                             "none", and parallel_tool_calls = !disable_parallel_tool_use
//   thinking {type enabled|adaptive|disabled} -> chat_template_kwargs.enable_thinking (budget_tokens is
//                                             checked, not enforced)
//   model                                  -> model; metadata and other fields are ignored.
// Field values (ranges, limits) are checked by the chat route, under the same
// names but stop. Throws HttpError(400, "<path>: <what>", path) for a field of
// the wrong shape, a missing max_tokens or messages, an unknown block type,
// an image or document block (no vision here), a block in the wrong role, or
// a server tool. Thread-safe.
nlohmann::ordered_json anthropic_to_chat(const nlohmann::ordered_json& body);

// POST /v1/messages/count_tokens's body (a Messages request without
// max_tokens) -> the chat body whose prompt has those tokens: the same
// translation, with max_tokens not required and stream left out. The server
// renders and tokenizes it and answers {"input_tokens": N}. Throws as
// anthropic_to_chat.
nlohmann::ordered_json anthropic_count_tokens_to_chat(const nlohmann::ordered_json& body);

// OpenAI's chat.completion object -> Anthropic's Message:
//   {id: "msg_" + id_suffix(chat id), type: "message", role: "assistant", model,
//    content: [{type:"thinking", thinking, signature:""}?, {type:"text", text}?,
//              {type:"tool_use", id, name, input}...],
//    stop_reason: end_turn | max_tokens | tool_use | stop_sequence, stop_sequence: string | null,
//    usage: {input_tokens, cache_creation_input_tokens: 0, cache_read_input_tokens, output_tokens}}
// from choices[0].message (content, reasoning_content, tool_calls), its
// finish_reason (stop, length, tool_calls) and usage. A reply with no thinking,
// text or tool call still has one empty text block. input_tokens counts the
// prompt tokens not read from the cache (Anthropic's input_tokens excludes
// cache reads). A tool call's arguments that are not a JSON object give
// input {}. `stop_sequence`: the stop string that ended the reply ("" none),
// which the chat reply does not carry. Throws nlohmann::json::exception for a
// chat reply without choices[0].message. Thread-safe.
nlohmann::json anthropic_from_chat(const nlohmann::json& chat_reply, const std::string& stop_sequence = {});

// A chat body's field (as the chat route names it in a 400) -> the Messages
// request's: stop -> stop_sequences, messages[i]... -> messages (chat
// messages do not map one to one onto Anthropic's), tools[i].function.
// parameters -> tools[i].input_schema, tools[i].function.X -> tools[i].X,
// chat_template_kwargs -> thinking; others unchanged. For renamed_error.
std::string anthropic_field(const std::string& chat_field);

// Anthropic's error body {"type":"error","error":{"type","message"}}, the
// type by status: 400 413 -> invalid_request_error / request_too_large,
// 401 authentication_error, 403 permission_error, 404 not_found_error,
// 429 rate_limit_error, 503 529 overloaded_error, else api_error.
nlohmann::json anthropic_error_body(int status, const std::string& message);

// One Messages stream, from the chat route's chunks (chat.completion.chunk
// objects in order: the first with the role, deltas of content,
// reasoning_content and tool_calls [{index, id, type, function:{name,
// arguments}}] (id and name with a call's first fragment), the chunk with
// finish_reason, then the usage chunk with empty choices) to Anthropic's
// events: message_start; per block content_block_start, content_block_delta
// (text_delta, thinking_delta, input_json_delta; a thinking block's
// signature_delta before it stops), content_block_stop, blocks one after
// another, numbered from 0; then message_delta (stop_reason, stop_sequence,
// usage) and message_stop. A chunk {"error": {...}} (the chat route's
// mid-stream failure) becomes Anthropic's "error" event and ends the stream.
// The blocks and usage add up to anthropic_from_chat's reply for the same
// generation (message_start's usage is zero: the prompt's count arrives with
// the usage chunk). Not thread-safe: one stream, one thread.
class AnthropicStream {
 public:
  // The events for one chat chunk (JSON object), in order.
  std::vector<ApiEvent> on_chunk(const nlohmann::json& chunk);
  // The closing events, after the last chunk; `stop_sequence` as in
  // anthropic_from_chat. Nothing after an error event.
  std::vector<ApiEvent> finish(const std::string& stop_sequence = {});

 private:
  enum class Block { none, thinking, text, tool_use };
  void start(const nlohmann::json& chunk, std::vector<ApiEvent>& out);
  void open(Block kind, const nlohmann::json& content_block, std::vector<ApiEvent>& out);
  void close(std::vector<ApiEvent>& out);

  bool started_ = false;
  bool failed_ = false;
  std::string id_, model_;
  Block current_ = Block::none;
  int index_ = -1;                     // the open block's index (-1: none open)
  int n_blocks_ = 0;                   // blocks started
  std::map<int64_t, int> tool_block_;  // the chat's tool_calls[].index -> its block
  std::string finish_reason_;
  nlohmann::json usage_;  // the chat usage, once its chunk came
};

}  // namespace synapse::server

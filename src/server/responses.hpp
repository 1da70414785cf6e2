// OpenAI's Responses API (POST /v1/responses, POST /v1/responses/input_tokens)
// as a translation onto the chat-completions route, stateless: a request
// becomes a chat body, the chat reply (or each chunk of its stream) becomes a
// Response object (or its streaming events). Shapes and names from OpenAI's
// API reference ("Responses", "Streaming events") and its Node SDK's stream
// accumulator (openai 6.49.0, lib/responses/ResponseAccumulator.ts: which
// fields an event must carry for the client to rebuild the response).
//
// Everything here is a pure function of its arguments, except ResponsesStream,
// which keeps the state of one stream.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/translation.hpp"

namespace synapse::server {

// A Responses request -> the chat-completions body that asks the same:
//   instructions (a string)                 -> a first {"role":"system"} message
//   input: a string                         -> one user message
//   input: items, in order:
//     {role user|system|developer|assistant, content: a string | [input_text/output_text/refusal parts]}
//     (with or without type "message")      -> a message with text parts
//     {type:"function_call", call_id, name, arguments}
//                                           -> tool_calls[{id: call_id, type:function, function:{name,
//                                              arguments}}] of the assistant turn it belongs to
//     {type:"function_call_output", call_id, output: a string | input_text parts}
//                                           -> {"role":"tool","tool_call_id","content"}
//     {type:"reasoning", content:[reasoning_text] | summary:[summary_text]}
//                                           -> reasoning_content of the assistant turn it opens
//     reasoning, an assistant message and function calls that follow each other are one assistant turn.
//   max_output_tokens                       -> max_tokens
//   temperature, top_p, parallel_tool_calls -> the same; stream also sets stream_options.include_usage
//   tools[{type:"function", name, description, parameters, strict}]
//                                           -> tools[{type:function, function:{name, description,
//                                              parameters, strict}}]
//   tool_choice "auto"|"none"|"required"|{type:"function", name}
//                                           -> the same in chat's spelling
//   text.format {type:"json_schema", name, schema, strict, description} | {type:"json_object"} | {type:"text"}
//                                           -> response_format
//   reasoning.effort                        -> chat_template_kwargs.reasoning_effort
//   model -> model; store, metadata, include, user and other fields are ignored.
// Throws HttpError(400, "<path>: <what>", path) for a field of the wrong shape,
// a missing input, previous_response_id or conversation (this server keeps no
// responses: the client sends the whole conversation in input), background,
// an item_reference or other item this server cannot carry, an image, file or
// audio part (no vision), or a tool other than a function (tools[i].type).
// Field values (ranges, limits) are checked by the chat route under the same
// names but max_tokens. Thread-safe.
nlohmann::ordered_json responses_to_chat(const nlohmann::ordered_json& body);

// A chat body's field (as the chat route names it in a 400) -> the Responses
// request's: max_tokens -> max_output_tokens, response_format.json_schema.X
// and response_format.X -> text.format.X, messages[i]... -> input (chat
// messages do not map one to one onto items), tools[i].function.X ->
// tools[i].X, chat_template_kwargs -> reasoning; others unchanged. For
// renamed_error.
std::string responses_field(const std::string& chat_field);

// OpenAI's chat.completion object -> a Response object:
//   {id: "resp_" + id_suffix(chat id), object: "response", created_at: the chat's created,
//    status: "completed" | "incomplete", error: null,
//    incomplete_details: null | {reason: "max_output_tokens"}, model,
//    output: [{type:"reasoning", id:"rs_…", summary:[], content:[{type:"reasoning_text", text}]}?,
//             {type:"message", id:"msg_…", status, role:"assistant",
//              content:[{type:"output_text", text, annotations:[]}]}?,
//             {type:"function_call", id:"fc_…_<i>", call_id, name, arguments, status:"completed"}...],
//    usage: {input_tokens, input_tokens_details:{cached_tokens}, output_tokens,
//            output_tokens_details:{reasoning_tokens: 0}, total_tokens},
//    and the request's settings echoed: instructions, max_output_tokens, metadata,
//    parallel_tool_calls, reasoning, store: false, temperature, text, tool_choice, tools, top_p,
//    previous_response_id: null, truncation: "disabled"}
// A reply with no reasoning, text or call still has one empty message.
// output_text is left to the SDKs, which compute it from output. `request`:
// the Responses request as sent (for the echo). Throws
// nlohmann::json::exception for a chat reply without choices[0].message.
// Thread-safe.
nlohmann::json responses_from_chat(const nlohmann::json& chat_reply, const nlohmann::ordered_json& request);

// One Responses stream, from the chat route's chunks (as AnthropicStream
// takes them: role chunk, deltas of content, reasoning_content and
// tool_calls, the finish_reason chunk, the usage chunk) to OpenAI's events,
// each with "type" and a "sequence_number" counting from 0:
//   response.created, response.in_progress (the response, status "in_progress", output []);
//   per output item, one after another: response.output_item.added,
//     reasoning: response.content_part.added, response.reasoning_text.delta..., .done,
//                response.content_part.done;
//     message:   response.content_part.added, response.output_text.delta..., .done,
//                response.content_part.done;
//     function call: response.function_call_arguments.delta..., .done;
//   then response.output_item.done;
//   last response.completed, or response.incomplete when cut by max_output_tokens, with the whole
//   response (equal to responses_from_chat's for the same generation).
// Deltas carry item_id, output_index and content_index (what the SDKs index
// by). A chunk {"error": {...}} (the chat route's mid-stream failure) becomes
// response.failed (status "failed", error {code: "server_error", message})
// and ends the stream. Not thread-safe: one stream, one thread.
class ResponsesStream {
 public:
  // `request`: the Responses request as sent (echoed in the response objects).
  explicit ResponsesStream(nlohmann::ordered_json request) : request_(std::move(request)) {}

  // The events for one chat chunk (JSON object), in order.
  std::vector<ApiEvent> on_chunk(const nlohmann::json& chunk);
  // The closing events, after the last chunk. Nothing after response.failed.
  std::vector<ApiEvent> finish();

 private:
  enum class Item { none, reasoning, message, function_call };
  void emit(std::vector<ApiEvent>& out, const char* name, nlohmann::json data);
  void start(const nlohmann::json& chunk, std::vector<ApiEvent>& out);
  void open(Item kind, nlohmann::json item, std::vector<ApiEvent>& out);
  void close(std::vector<ApiEvent>& out);
  nlohmann::json response(const char* status) const;

  nlohmann::ordered_json request_;
  int64_t seq_ = 0;
  bool started_ = false;
  bool failed_ = false;
  std::string suffix_, model_;
  int64_t created_ = 0;
  nlohmann::json output_ = nlohmann::json::array();  // the items closed so far
  Item current_ = Item::none;
  nlohmann::json item_;                    // the open item, its text or arguments so far
  std::map<int64_t, size_t> call_output_;  // the chat's tool_calls[].index -> its output_index
  std::string finish_reason_;
  nlohmann::json usage_;
};

}  // namespace synapse::server

// Ollama's REST API beside OpenAI's, for the clients that speak only Ollama
// (VS Code Copilot's local models, n8n, Home Assistant, Zed, Langflow, Open
// WebUI): POST /api/chat and /api/generate as translations onto the chat
// route (a raw /api/generate onto the completions route), so that sampling,
// the Jinja template, tools and the same-bytes-under-load contract are the
// chat route's; GET /api/tags, POST /api/show, GET /api/ps, GET /api/version
// and GET|HEAD / describe the one model served. Shapes and names from
// Ollama's docs/api.md and api/types.go.
//
// Ollama's conventions, kept: streams are NDJSON (one JSON object a line,
// application/x-ndjson) and `stream` defaults to true; durations are
// nanoseconds; every reply echoes the `model` the client sent; errors are
// {"error": "message"} (400 for a bad body or field, 404 "model 'x' not
// found" for another model than the one served).
//
// Everything here is a pure function of its arguments (the clock's readings,
// created_at and the durations, are arguments), except OllamaStream, which
// keeps the state of one stream, and describe_ollama_model /
// ollama_model_info, which read the model file's metadata and its mtime.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/request.hpp"
#include "synapse/generation.hpp"
#include "synapse/sampling.hpp"
#include "synapse/synapse.hpp"

namespace synapse::server {

// The version GET /api/version reports. Clients check it against a minimum:
// VS Code Copilot wants >= 0.6.4, Continue's Granite setup >= 0.6.5; 0.9.0
// is the first Ollama with `think` (message.thinking), which this server
// speaks too.
inline constexpr char kOllamaVersion[] = "0.9.0";

// What the server adds to the model file for the listing routes.
struct OllamaServing {
  std::string model_name;  // ServerParams::model_name: --alias, else the model path
  std::string model_path;  // -m
  int64_t n_ctx = 0;       // per sequence (-c)
  int n_parallel = 1;      // slots (-np)
  std::string chat_template;  // the Jinja source, or the built-in format's name
  bool tools = false;         // the Jinja template prints the request's tools (TemplateCaps::supports_tools)
  bool thinking = false;      // the template has a reasoning block (template_has_reasoning)
  bool embedding = false;     // /api/embed answers (--embeddings with a pooling other than none or rank)
  SamplerParams sampling;     // the server's defaults (--temp, --top-k, ...)
  int32_t n_predict = -1;     // -n
};

// The served model as Ollama's listing routes describe it.
struct OllamaModel {
  std::string name;                // listed name: --alias, else the file name less ".gguf"; ":latest" added when
                                   // it has no tag ("stories260K:latest")
  std::vector<std::string> names;  // what a request's `model` may say, lower-case (ollama_model_matches)
  std::string modified_at;         // the file's mtime, RFC 3339
  uint64_t size = 0;               // bytes of the file
  uint64_t size_loaded = 0;        // /api/ps: the weights and the KV cache of every slot
  std::string digest;              // 64 hex digits drawn from the path, size and mtime: not a content hash
                                   // (hashing a many-GB file at start-up is not worth what no client checks)
  nlohmann::json details;          // {parent_model "", format "gguf", family, families, parameter_size,
                                   //  quantization_level}
  std::vector<std::string> capabilities;  // "completion", "tools", "thinking"
  std::string template_source;     // /api/show's template
  std::string parameters;          // /api/show's parameters: the server's sampling defaults, one a line
  std::string model_path;
  int64_t n_ctx = 0;
};

// Reads what describe_ollama_model needs from the model and the file: the
// name forms, the file's size and mtime, general.architecture,
// general.file_type (else the weights' most common type), n_params.
OllamaModel describe_ollama_model(const Model& model, const OllamaServing& serving);

// /api/show's model_info: the file's metadata but general.name and
// tokenizer.chat_template (Ollama's rule), integers as numbers, arrays of
// more than 5 items as [] unless `verbose`, and general.parameter_count.
nlohmann::json ollama_model_info(const Model& model, bool verbose);

// Whether a template's source has a reasoning block the chat route parses
// into reasoning_content: <think>, enable_thinking, reasoning_content,
// Mistral's [THINK], gpt-oss's analysis channel.
bool template_has_reasoning(std::string_view source);

// "parameter_size" as Ollama writes it (format.HumanNumber): 7.6B, 137.50M,
// 260K, 999.
std::string ollama_human_number(uint64_t n);

// `t` as RFC 3339 in UTC with nanoseconds ("2024-06-04T14:38:31.837530000Z").
std::string rfc3339(std::chrono::system_clock::time_point t);

// Whether `requested` (a request's `model`) names the served model: its listed
// name, the alias or file name with or without ".gguf" and ":latest", or
// ServerParams::model_name (the path), compared without regard to case.
bool ollama_model_matches(const OllamaModel& m, std::string_view requested);

// A request's `model`: HttpError(400, "model is required") when absent or not
// a string, HttpError(404, "model 'x' not found") when it names another model.
std::string ollama_requested_model(const OllamaModel& m, const nlohmann::ordered_json& body);

// GET /api/tags: {"models": [{name, model, modified_at, size, digest, details}]}.
nlohmann::json ollama_tags(const OllamaModel& m);
// POST /api/show: {modelfile, parameters, template, details, model_info, capabilities, modified_at}.
nlohmann::json ollama_show(const OllamaModel& m, nlohmann::json model_info);
// GET /api/ps: {"models": [{name, model, size, digest, details, expires_at, size_vram: 0, context_length}]}.
nlohmann::json ollama_ps(const OllamaModel& m, const std::string& expires_at);

enum class OllamaEndpoint { chat, generate };

// An Ollama request translated for the chat (or completions) route.
struct OllamaRequest {
  Route route = Route::chat_completions;  // completions for a raw /api/generate
  nlohmann::ordered_json body;            // the route's body
  bool stream = true;                     // Ollama streams unless told "stream": false
  // "load" (no messages, or no prompt) or "unload" (that with keep_alive 0):
  // nothing to generate; the reply is one object with done: true and this
  // done_reason (the model stays loaded either way).
  std::optional<std::string> done_reason;
};

// POST /api/chat's body -> the chat-completions body that asks the same:
//   messages[i] {role (any case) system|user|assistant|tool, content (a string),
//                thinking, tool_calls, tool_name, tool_call_id, images}
//     -> {role, content}; assistant thinking -> reasoning_content;
//        tool_calls[{id?, function:{name, arguments: an object}}] -> tool_calls[{id, type:function,
//        function:{name, arguments}}] (a call without an id gets "c" + 4-digit message index + 4-digit
//        call index: nine letters and digits, as Mistral's templates want);
//        a tool message -> {role:"tool", tool_call_id, content}, tool_call_id when given, else the id of
//        the earliest unanswered call of the last assistant turn named tool_name (any, without a name),
//        else tool_name; non-empty images -> 400 (no vision here)
//   tools (OpenAI's function tools; type defaults to "function") -> tools
//   format "json" -> response_format {type: json_object}; a JSON Schema object -> response_format
//          {type: json_schema, json_schema: {name: "format", schema}}; "" -> none
//   think true|false -> chat_template_kwargs.enable_thinking; "low"|"medium"|"high"|"max" -> that and
//          reasoning_effort ("max" read as "high", as Ollama does for gpt-oss)
//   options: temperature top_k top_p min_p typical_p seed repeat_penalty repeat_last_n
//            presence_penalty frequency_penalty -> the same names; num_predict -> max_tokens (<= 0: no
//            limit, Ollama's rule; above n_ctx: n_ctx, which bounds a reply anyway); stop -> stop;
//            integers may come as floats (Go truncates them; so does this); num_ctx is checked (a
//            positive integer) and ignored: the server's -c is the context, and a prompt that does not
//            fit it is refused by the chat route naming n_ctx; mirostat other than 0 -> 400; the
//            runner's options (num_batch, num_gpu, num_thread, use_mmap, ...) and unknown ones are
//            ignored, as Ollama ignores what its runner does not know
//   logprobs, top_logprobs (0..20) -> the same; stream -> stream (default true)
//   keep_alive, truncate, shift -> ignored; model -> model.
// Throws HttpError(400, "<field>: <what>", field) for a field of the wrong
// shape. Thread-safe.
OllamaRequest ollama_chat_request(const nlohmann::ordered_json& body, int64_t n_ctx);

// POST /api/generate's body -> a chat body with [system?, {user: prompt}] (the
// model's template renders it, as Ollama's does), or with raw: true a
// completions body whose prompt is sent as is; format, think (not raw),
// options, logprobs, stream as ollama_chat_request. Refused (400): suffix (no
// fill-in-the-middle), template (a Go template; the model's Jinja template
// renders the prompt, or send raw), context (the deprecated token memory:
// send the conversation to /api/chat), images; raw with system (Ollama's own
// rule). An empty prompt is a load request.
OllamaRequest ollama_generate_request(const nlohmann::ordered_json& body, int64_t n_ctx);

// A chat (or completions) body's field, as the route names it in a 400 ->
// Ollama's: max_tokens -> options.num_predict; temperature, top_p, ..., stop
// -> options.X; response_format... -> format; chat_template_kwargs and
// reasoning_effort -> think; for generate, messages and prompt -> prompt.
// For renamed_error.
std::string ollama_chat_field(const std::string& chat_field);
std::string ollama_generate_field(const std::string& chat_field);

// The last line of a reply, from its generation.
struct OllamaStats {
  std::string done_reason = "stop";  // "length" when cut by num_predict, the context or --timeout
  int64_t total_duration = 0;        // ns: from the request's arrival to its end
  int64_t load_duration = 0;         // ns: always 0, the model is loaded before the server listens
  int64_t prompt_eval_count = 0;     // tokens of the prompt (cached ones included): the chat route's prompt_tokens
  int64_t prompt_eval_duration = 0;  // ns: the prefill (timings.prompt_ms)
  int64_t eval_count = 0;            // tokens of the reply: the chat route's completion_tokens
  int64_t eval_duration = 0;         // ns: the decode (timings.predicted_ms)
};

OllamaStats ollama_stats(const GenerationResult& r, int64_t total_ns);

// The reply to a load request: {model, created_at, message {role, content ""}
// (chat) | response "" (generate), done: true, done_reason}.
nlohmann::json ollama_load_reply(OllamaEndpoint ep, const std::string& model, const std::string& created_at,
                                 const std::string& done_reason);

// The route's whole reply (chat.completion or text_completion) -> Ollama's:
//   chat:     {model, created_at, message {role: "assistant", content, thinking?, tool_calls?
//              [{id, function {index, name, arguments: an object}}]}, done: true, done_reason, stats...,
//              logprobs?}
//   generate: {model, created_at, response, thinking?, done: true, done_reason, stats..., logprobs?}
// from choices[0] (message.content, reasoning_content, tool_calls; or text;
// logprobs as [{token, logprob, bytes, top_logprobs}]). A call's arguments
// that are not a JSON object give {}. Throws nlohmann::json::exception for a
// reply without choices[0]. Thread-safe.
nlohmann::json ollama_reply(OllamaEndpoint ep, const nlohmann::json& reply, const std::string& model,
                            const std::string& created_at, const OllamaStats& stats);

// {"error": message}: every error of /api/* (the server rewrites the chat
// route's error bodies to it).
nlohmann::json ollama_error_body(const std::string& message);

// One JSON object a line, each ending in '\n' (invalid UTF-8 written as U+FFFD).
std::string ndjson(const std::vector<nlohmann::json>& lines);

// One Ollama stream, from the route's chunks (chat.completion.chunk or
// text_completion objects, in order) to its NDJSON objects: a line per chunk
// with text (message.content / response), reasoning (message.thinking /
// thinking) or logprobs, done: false; a call's fragments are gathered and the
// calls sent whole, with arguments as objects, in one line when the chunk with
// finish_reason comes (Ollama's streams send calls whole); then finish()'s
// line, done: true with done_reason and the stats. A chunk {"error": {...}}
// (the route's mid-stream failure) becomes {"error": message} and ends the
// stream. The lines add up to ollama_reply's object for the same generation.
// Not thread-safe: one stream, one thread.
class OllamaStream {
 public:
  OllamaStream(OllamaEndpoint ep, std::string model) : ep_(ep), model_(std::move(model)) {}
  std::vector<nlohmann::json> on_chunk(const nlohmann::json& chunk, const std::string& created_at);
  std::vector<nlohmann::json> finish(const OllamaStats& stats, const std::string& created_at);

 private:
  struct Call {
    std::string id, name, arguments;
  };
  nlohmann::json line(const std::string& created_at) const;
  OllamaEndpoint ep_;
  std::string model_;
  bool failed_ = false;
  std::map<int64_t, Call> calls_;  // the chat's tool_calls[].index -> the call so far
};

}  // namespace synapse::server

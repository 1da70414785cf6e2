// HTTP request bodies -> validated generation parameters.
//
// Three routes share one parameter set: OpenAI's POST /v1/chat/completions
// and POST /v1/completions (field names and ranges from OpenAI's API
// reference), and llama-server's native POST /completion (n_predict, n_probs,
// cache_prompt, ... as tools/server/README.md of llama.cpp names them).
// Every field is checked for type, range and size before anything reaches the
// engine; a bad one throws HttpError(400) naming the field and the value.
// Unknown fields are ignored, as llama-server and OpenAI's own clients expect.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <memory>

#include <nlohmann/json.hpp>

#include "runtime/chat_output.hpp"
#include "synapse/chat.hpp"
#include "synapse/sampling.hpp"
#include "synapse/stop.hpp"
#include "synapse/tokenizer.hpp"

namespace synapse::server {

// An error answered in OpenAI's shape {"error":{"message","type","param","code"}}
// with HTTP status `status`. `param` names the request field ("" when none).
class HttpError : public std::runtime_error {
 public:
  // code: OpenAI's error code string (e.g. "context_length_exceeded"), or
  // empty for the status (llama-server's "code").
  HttpError(int status, std::string message, std::string param = {}, std::string code = {})
      : std::runtime_error(std::move(message)), status_(status), param_(std::move(param)), code_(std::move(code)) {}
  int status() const noexcept { return status_; }
  const std::string& param() const noexcept { return param_; }
  const std::string& code() const noexcept { return code_; }

 private:
  int status_;
  std::string param_;
  std::string code_;
};

// The limits on what one request may ask for (issue 27). Sizes are bytes.
struct RequestLimits {
  int max_json_depth = 64;          // nesting of arrays/objects in a body
  int max_choices = 16;             // prompts x n
  int max_stop = 16;                // entries of "stop"
  size_t max_stop_bytes = 1024;     // length of one stop string
  int max_top_logprobs = 20;        // OpenAI's bound on top_logprobs
  size_t max_logit_bias = 4096;     // entries of "logit_bias"
  size_t max_messages = 4096;       // entries of "messages"
  size_t max_tools = 512;           // entries of "tools"
};

struct JinjaChat;  // server/chat.hpp

// How a chat reply's text becomes OpenAI's message fields (content,
// reasoning_content, tool_calls): the template's family and the parser's
// options (runtime/chat_output.hpp). options.id_seed is the request's; choice
// i's calls take their ids from for_choice(i).
struct ChatOutput {
  runtime::ToolCallFormat format = runtime::ToolCallFormat::none;
  runtime::ParseOptions options;
  runtime::ParseOptions for_choice(size_t index) const;
};

// What the server fixes for every request: the model's vocabulary and chat
// template, the per-sequence context (-c), the sampling defaults from the
// command line (--temp, --top-k, ...), and -n (default and ceiling of the
// tokens one reply may generate; < 0: none).
struct RequestContext {
  const Tokenizer* tok = nullptr;
  synapse::ChatTemplate chat_template = synapse::ChatTemplate::chatml;  // the built-in format, when jinja is null
  std::shared_ptr<const JinjaChat> jinja;  // the model's Jinja template (--jinja); null: built-in formats
  int64_t n_ctx = 0;
  synapse::SamplerParams sampling;
  int32_t n_predict = -1;
  bool verbose = false;  // -v: "verbose"'s default
  RequestLimits limits;
};

enum class Route {
  chat_completions,  // POST /v1/chat/completions (and /chat/completions)
  completions,       // POST /v1/completions (and /completions)
  completion,        // POST /completion: llama-server's native shape
};

// One validated request. A reply has prompts.size() * n choices: choice
// i * n + j is prompt i's j-th sample, drawn with seed + j when a seed was given.
struct CompletionRequest {
  Route route = Route::completions;
  std::string model;                          // "model" as sent ("" when absent)
  std::vector<std::vector<token_id>> prompts; // tokenized, each 1..n_ctx tokens
  int n = 1;
  synapse::SamplerParams sampling;
  synapse::StopParams stop;                   // n_predict: the request's, else -n
  bool logprobs = false;                      // the chosen token's logprob per token
  int top_logprobs = 0;                       // alternatives per token (0..20)
  // llama-server's post_sampling_probs (every route): the probabilities of
  // the distribution each token was drawn from (GenerationParams::post_sampling_probs);
  // /completion's completion_probabilities then spell them "prob" / "top_probs".
  bool post_sampling_probs = false;
  // llama-server's return_progress (every route; a stream only): chunks with
  // "prompt_progress" while the prompt is prefilled (Request::on_progress).
  bool return_progress = false;
  bool stream = false;
  bool include_usage = false;                 // stream_options.include_usage
  bool timings_per_token = false;             // llama-server's: every streamed chunk with a token carries "timings"
  bool cache_prompt = true;                   // native: may reuse cached KV rows
  // llama-server's t_max_predict_ms (every route): generation time after
  // which the reply ends at its next newline (Request::t_max_predict_ms); <= 0: none.
  int64_t t_max_predict_ms = -1;
  bool return_tokens = false;                 // native: "tokens" in the reply
  // native: llama-server's response_fields, the paths ("generation_settings/n_predict")
  // the final result is cut down to, each a key of its own; empty: the whole result.
  std::vector<std::string> response_fields;
  bool echo = false;                          // completions: prompt text before the reply
  // llama-server's "verbose": an OpenAI-shaped reply also carries, as
  // "__verbose", the native /completion result of its first choice.
  bool verbose = false;
  // Chat with the model's Jinja template: how each choice's text is parsed
  // (server/chat.hpp); nullopt: the text is the content, as it came.
  std::optional<ChatOutput> chat_output;
  std::vector<token_id> preserved_tokens;     // GenerationParams::preserved_tokens of every choice
};

// Parses `body` (raw bytes) for `route`. Throws HttpError(400) for malformed
// JSON, a body nested deeper than limits.max_json_depth, a field of the wrong
// type or out of range (message and param name it and quote the value), an
// empty prompt, or a prompt longer than n_ctx (the message gives both counts).
// Thread-safe (the tokenizer is only read).
CompletionRequest parse_completion_request(Route route, std::string_view body, const RequestContext& rc);

// Parses a body into JSON after checking its nesting depth (nlohmann's parser
// recurses once per level, so a body of 100,000 '[' would exhaust the stack).
// Throws HttpError(400) when the body is not a JSON object or is too deep.
nlohmann::json parse_json_object(std::string_view body, int max_depth);

// Field readers for the small routes (/tokenize, /detokenize, /apply-template):
// `def` when the field is absent or null, else HttpError(400) naming `field`
// unless it has the asked type.
bool get_bool(const nlohmann::json& j, const char* field, bool def);
std::string get_string(const nlohmann::json& j, const char* field, const std::string& def);

// "prompt" (llama-server's tokenize_input_prompts; field: the body's name for
// it): a string, an array of token ids, or a non-empty array of strings,
// token id arrays and mixed arrays of strings and token ids, one prompt each;
// a prompt may also be llama-server's object {"prompt_string": <one of those>}
// (with "multimodal_data" a 400: this server reads text only).
// Strings are tokenized as llama-server does: BOS/EOS added per the
// vocabulary (in a mixed array only for a first string), special-token texts
// parsed. Throws HttpError(400) naming the element for any other shape or a
// token id outside the vocabulary.
std::vector<std::vector<token_id>> parse_prompts(const nlohmann::json& v, const Tokenizer& tok,
                                                 const std::string& field);

// A token id list from `v` (field name `field`): each an integer in [0, n_vocab).
std::vector<token_id> get_token_ids(const nlohmann::json& v, const std::string& field, int32_t n_vocab);

// "messages" -> chat messages for the built-in templates: role a string
// (system, user, assistant; "developer" is read as system), content a string
// or an array of {"type":"text","text":...} parts (joined). Throws
// HttpError(400) naming messages[i] (a "tool" message, or assistant
// tool_calls: they need the model's Jinja template; a part of another type:
// messages[i].content[j].type).
std::vector<synapse::ChatMessage> parse_messages(const nlohmann::json& body, const RequestLimits& limits);

// The prompt of a chat body in a built-in format, as llama-server renders it:
// a conversation that ends with an assistant message (or with
// "continue_final_message") is continued from that message's text (the
// format's closing of it left out), else the generation prompt is added unless
// "add_generation_prompt" is false. Call after check_continuation (server/chat.hpp).
std::vector<synapse::ChatSegment> builtin_chat_segments(synapse::ChatTemplate tmpl, const nlohmann::json& body,
                                                        std::span<const synapse::ChatMessage> msgs);

// A value quoted for an error message: its JSON text, cut to 64 bytes.
std::string quote_value(const nlohmann::json& v);

}  // namespace synapse::server

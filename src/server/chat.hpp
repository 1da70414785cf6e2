// Chat requests with the model's own Jinja chat template, as llama-server
// takes them with --jinja (tools/server/README.md, utils' oaicompat chat
// parsing, common/chat.cpp of llama.cpp v0.5.0):
//   - messages with roles system, developer, user, assistant and tool, kept
//     in the key order the client sent them; content a string, null (an
//     assistant message) or text parts; assistant tool_calls and tool
//     messages checked by runtime::validate_history;
//   - tools (runtime::validate_tools), tool_choice ("auto", "none",
//     "required", {"type": "function", "function": {"name": N}}),
//     parallel_tool_calls, chat_template_kwargs (over --chat-template-kwargs),
//     reasoning_format, and OpenAI's reasoning_effort (the template variable
//     of that name);
//   - the prompt rendered by runtime::ChatRenderer (a final assistant message
//     is continued: prefill), a tool-call grammar for "required" and named
//     choices, and how the reply's text is parsed (server/request.hpp's
//     ChatOutput).
// Every malformed field is an HttpError(400) naming it; the template's own
// errors (raise_exception) are 400s "chat template: <its message>" (a request
// the template refuses is the request's fault; llama-server answers 500).
//
// Thread-safety: a JinjaChat is immutable after make_jinja_chat; the
// functions here are pure and may run on many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/chat_jinja.hpp"
#include "server/http_server.hpp"
#include "server/request.hpp"
#include "synapse/tokenizer.hpp"

namespace synapse::server {

// What the server fixes for Jinja chat at startup.
struct JinjaChat {
  runtime::ChatRenderer renderer;
  nlohmann::ordered_json kwargs;  // --chat-template-kwargs: an object, or null
  runtime::ReasoningFormat reasoning_format = runtime::ReasoningFormat::automatic;  // --reasoning-format
  // The vocabulary's tokens spelling the format's markers
  // (runtime::marker_token_texts), end-of-generation tokens excepted.
  std::vector<token_id> preserved_tokens;
};

// The JinjaChat of a template `source`: BOS/EOS texts from `tok`,
// `architecture` (general.architecture) for the tool-call family,
// `kwargs_json` ("" or a JSON object: --chat-template-kwargs),
// `reasoning_format` ("none", "deepseek", "auto"). Throws
// Error(invalid_argument) with the template's syntax error ("template: line
// L: ..."), for kwargs that are not a JSON object, or an unknown reasoning format.
std::shared_ptr<const JinjaChat> make_jinja_chat(std::string source, const Tokenizer& tok,
                                                 std::string_view architecture, std::string_view kwargs_json,
                                                 std::string_view reasoning_format);

// A chat request rendered with the model's template.
struct JinjaPrompt {
  std::string prompt;   // the text to tokenize (add_special per the vocabulary, parse_special): /apply-template's reply
  std::string grammar;  // tool_choice "required" or named: the GBNF of the calls; else ""
  ChatOutput output;    // how the reply is parsed (options.id_seed: a hash of prompt and `seed`)
};

// Reads and checks the chat fields of `body` (the request as the client
// ordered it) and renders the prompt. `seed` (the request's sampling seed)
// goes into the call ids with the prompt's hash, so that ids are a function of
// the request. Throws HttpError(400) naming the field: messages[i].role,
// messages[i].content, messages[i].content[j].type (image and audio parts:
// no vision here), tool_calls and tool messages (validate_history's fields),
// tools[i] (validate_tools, or a parameters schema the grammar cannot take
// when a call is required), tool_choice, parallel_tool_calls,
// chat_template_kwargs, reasoning_format, reasoning_effort; the template's
// refusal as "chat template: <message>" (param messages).
JinjaPrompt render_jinja_chat(const nlohmann::ordered_json& body, const JinjaChat& chat, const RequestLimits& limits,
                              uint32_t seed);

// The fields only a Jinja template can serve (tools, tool_choice, ...): with
// the built-in formats a non-empty `tools` is refused with HttpError(400)
// "tools require the model's Jinja chat template"; reasoning_format and
// chat_template_kwargs are still checked for their type (and ignored, as
// llama-server without --jinja ignores them).
void check_builtin_chat_fields(const nlohmann::json& body);

// `continue_final_message` as llama-server reads it
// (common_chat_continuation_parse): true, "content" or "reasoning_content"
// ask to continue the last message; anything else, or none, does not.
bool asks_continuation(const nlohmann::json& body);

// `add_generation_prompt` as llama-server reads it: true unless it is the
// boolean false.
bool asks_generation_prompt(const nlohmann::json& body);

// llama-server's rules for a conversation that ends with an assistant message
// (continued from its text, "prefill"), on both the Jinja and the built-in
// path (its oaicompat_chat_params_parse): two assistant messages at the end
// are a 400 naming `messages`, and `continue_final_message` (true, "content"
// or "reasoning_content"; or implied by the last message) together with
// `add_generation_prompt` (default true) a 400 naming `add_generation_prompt`.
// Malformed messages are left to the path's own checks.
void check_continuation(const nlohmann::json& body);

// llama-server's /props "chat_template_caps" (common/jinja/caps.cpp's names).
nlohmann::json caps_json(const runtime::TemplateCaps& caps);

}  // namespace synapse::server

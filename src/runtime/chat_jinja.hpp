// A model's own chat template (the Jinja source under tokenizer.chat_template,
// or a --chat-template-file) rendered as llama-server renders it with --jinja:
// an OpenAI-shaped request (messages, tools, chat_template_kwargs) becomes the
// prompt text the model was tuned on.
//
// What the template sees is llama.cpp's context (common/chat.cpp, v0.5.0,
// common_chat_template_direct_apply): messages, tools (only when there are
// some), bos_token, eos_token, add_generation_prompt (only when true),
// enable_thinking, the extra context llama.cpp adds (date_string, datetime),
// and chat_template_kwargs' keys on top. Messages are adapted to what the
// template can read, as llama.cpp's workarounds adapt them, decided by
// rendering probe conversations once (TemplateCaps):
//   - "developer" is read as "system" (not for gpt-oss, whose harmony format
//     has a developer role);
//   - a template that drops system messages gets the system text prepended
//     to the first user message;
//   - a template that reads a call's arguments as an object gets the JSON
//     string OpenAI sends parsed into one;
//   - a template that prints only string content gets text parts joined, one
//     that reads only parts gets a string as one text part;
//   - null content beside tool_calls becomes "" for templates that print calls.
// An assistant message at the end is continued (assistant prefill, as
// llama-server does): the conversation before it is rendered with the
// generation prompt and its content appended, not closed.
//
// Errors: synapse::Error(invalid_argument): a syntax error from parse ("template:
// line L: ..."), a render error or the template's own raise_exception message
// from render, a request a template cannot take (an assistant prefill that has
// tool_calls). Thread-safety: a ChatRenderer is immutable after construction;
// render() may run on many threads at once.
#pragma once

#include <ctime>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/chat_output.hpp"
#include "template/jinja.hpp"

namespace synapse::runtime {

// What a template does with the probe conversations (llama.cpp's caps.cpp
// names). Each is found by rendering a conversation that holds a marker and
// looking for the marker in the output; a probe that throws counts as "no".
struct TemplateCaps {
  bool supports_system_role = true;       // a system message's text is printed
  bool supports_tools = false;            // a tool's name in `tools` is printed
  bool supports_tool_calls = false;       // an assistant tool call's name is printed
  bool supports_parallel_tool_calls = false;  // the second of two calls is printed
  bool requires_object_arguments = false;     // arguments are printed when an object, not when a string
  bool supports_string_content = true;    // content given as a string is printed
  bool supports_typed_content = false;    // content given as [{"type":"text","text":...}] is printed
};

struct ChatInputs {
  // OpenAI's messages, as sent (validated by the caller: roles, tool_calls;
  // validate_history). Kept in the key order the client sent.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // The request's tools (validate_tools), or null/empty for none.
  nlohmann::ordered_json tools;
  bool add_generation_prompt = true;
  // Keys set on the template's context last (--chat-template-kwargs, then the
  // request's chat_template_kwargs): an object, or null.
  nlohmann::ordered_json kwargs;
};

struct RenderedChat {
  std::string prompt;            // the text to tokenize with parse_special = true
  bool continues_final = false;  // the last message was an assistant prefill
  bool thinking_open = false;    // the prompt ends inside the format's reasoning block
};

class ChatRenderer {
 public:
  // Parses `source` and probes it. bos_token/eos_token: the vocabulary's BOS
  // and EOS texts ("" when it has none). `architecture`: general.architecture,
  // for detect_format. `now`: the clock of strftime_now, date_string and
  // datetime (tests fix it); empty: the local time at each render. Throws
  // Error(invalid_argument) on a syntax error.
  ChatRenderer(std::string source, std::string bos_token, std::string eos_token, std::string_view architecture = {},
               std::function<std::tm()> now = {});

  // The prompt for `in`. A leading bos_token is removed from the text (the
  // tokenizer adds BOS per the vocabulary's add_bos, as llama.cpp does).
  RenderedChat render(const ChatInputs& in) const;

  const std::string& source() const { return source_; }
  const TemplateCaps& caps() const { return caps_; }
  ToolCallFormat format() const { return format_; }

 private:
  std::string render_raw(const nlohmann::ordered_json& context) const;
  nlohmann::ordered_json adapt(const nlohmann::ordered_json& messages) const;

  std::string source_;
  std::string bos_;
  std::string eos_;
  std::function<std::tm()> now_;
  jinja::Template tmpl_;
  TemplateCaps caps_;
  ToolCallFormat format_ = ToolCallFormat::generic;
};

}  // namespace synapse::runtime

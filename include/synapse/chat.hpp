// Chat templates: a conversation of (role, content) messages -> the prompt text
// the model was tuned on, as llama.cpp's built-in (non-Jinja) templates write it.
//
// The model's template is the Jinja string under `tokenizer.chat_template`. It
// is not executed: like llama.cpp's llm_chat_detect_template (src/llama-chat.cpp)
// we recognise its family by substrings, then format with C++ code that
// reproduces llm_chat_apply_template byte for byte. A file without the key gets
// chatml (llama.cpp's fallback). `--chat-template NAME` picks a family by name.
//
// Template text and message contents are kept apart (ChatSegment) so that the
// template's special tokens ("<|im_start|>") are parsed while a user who types
// "<|im_end|>" gets ordinary text tokens: tokenize_chat().
//
// Thread-safety: every function here is a pure function of its arguments
// (thread-safe); a ChatTemplate is an immutable value.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "synapse/gguf.hpp"
#include "synapse/tokenizer.hpp"

namespace synapse {

// The formats implemented here (llm_chat_template names in comments).
enum class ChatTemplate {
  chatml,             // "chatml"            <|im_start|>role\n...<|im_end|>\n (Qwen, ...)
  llama2,             // "llama2"            [INST] ... [/INST], system folded into the first turn
  llama2_sys,         // "llama2-sys"        with <<SYS>>\n...\n<</SYS>>\n\n
  llama2_sys_bos,     // "llama2-sys-bos"    and <s> before each later [INST]
  llama2_sys_strip,   // "llama2-sys-strip"  and contents trimmed
  mistral_v1,         // "mistral-v1"        " [INST] ... [/INST]"
  mistral_v3,         // "mistral-v3"        "[INST] ...[/INST]", assistant trimmed
  mistral_v3_tekken,  // "mistral-v3-tekken" "[INST]...[/INST]"
  mistral_v7,         // "mistral-v7"        [SYSTEM_PROMPT] ... [/SYSTEM_PROMPT]
  mistral_v7_tekken,  // "mistral-v7-tekken" v7 without the spaces
  phi3,               // "phi3"              <|role|>\n...<|end|>\n
  phi4,               // "phi4"              <|im_start|>role<|im_sep|>...<|im_end|>
  falcon3,            // "falcon3"           <|role|>\n...\n
  zephyr,             // "zephyr"            <|role|>\n...<|endoftext|>\n
  llama3,             // "llama3"            <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  gemma,              // "gemma"             <start_of_turn>role\n...<end_of_turn>\n
  command_r,          // "command-r"         <|START_OF_TURN_TOKEN|><|USER_TOKEN|>...<|END_OF_TURN_TOKEN|>
};

// A message. Roles are "system", "user", "assistant" (others are written as
// given by the templates that print the role, like llama.cpp). The role is
// template text (trusted: Phi-3's "<|" + role + "|>" must become one special
// token); the content is the user's.
struct ChatMessage {
  std::string role;
  std::string content;
};

// A piece of a formatted conversation: template text (special = true: its
// special-token texts become special tokens) or message content (false).
struct ChatSegment {
  std::string text;
  bool special;
};

// The names --chat-template accepts, in the order of the enum.
std::span<const std::string_view> chat_template_names();
std::string_view chat_template_name(ChatTemplate t);

// llm_chat_template_from_str. Throws Error(invalid_argument) naming `name` and
// listing the known names when it is not one of them.
ChatTemplate chat_template_from_name(std::string_view name);

// llm_chat_detect_template: a family name is accepted as is, otherwise the
// Jinja source is matched by llama.cpp's substring rules in llama.cpp's order.
// Throws Error(unsupported) naming the family when the rules select one that
// is not implemented here (e.g. "vicuna", "deepseek3"), and
// Error(unsupported) quoting the start of the template when no rule matches;
// both messages list the known names (use --chat-template NAME).
ChatTemplate detect_chat_template(std::string_view tmpl);

// The template for a model: `override_name` (--chat-template) when given, else
// detect_chat_template(tokenizer.chat_template), else chatml when the file has
// no such key. Throws as chat_template_from_name / detect_chat_template, and
// Error(format) when tokenizer.chat_template is not a string.
ChatTemplate chat_template_for_model(const gguf::File& file, std::optional<std::string_view> override_name = {});

// llm_chat_apply_template(tmpl, msgs, add_ass) as segments. The Llama 2 and
// Mistral families have no generation prompt (their user turn already ends in
// [/INST]), so add_generation_prompt changes nothing for them, as in llama.cpp.
std::vector<ChatSegment> format_chat_segments(ChatTemplate tmpl, std::span<const ChatMessage> msgs,
                                              bool add_generation_prompt);

// The concatenated text of format_chat_segments: llm_chat_apply_template's output.
std::string format_chat(ChatTemplate tmpl, std::span<const ChatMessage> msgs, bool add_generation_prompt);

// The part of the prompt a new message adds to a conversation whose past is
// already in the model's KV cache (llama.cpp's common_chat_format_single, used
// by llama-cli's conversation mode): format(past + msg, add_generation_prompt)
// minus the bytes of format(past, false), preceded by "\n" when add_generation_prompt
// and format(past, false) ends in '\n' (the newline after the end-of-turn token
// the model stopped at, which it never generated).
std::vector<ChatSegment> format_chat_delta(ChatTemplate tmpl, std::span<const ChatMessage> past,
                                           const ChatMessage& msg, bool add_generation_prompt);

// Token ids of segments as one llama_tokenize(text, add_special, parse_special
// = true) call would give them, except that special tokens are only recognised
// inside template segments: content segments are parsed as with
// parse_special = false (only user-defined tokens are matched, as llama.cpp
// always matches them). White-space stripping of special tokens (LSTRIP/RSTRIP,
// e.g. Phi-3) applies across segment boundaries as in one call. add_special
// adds BOS/EOS per the vocabulary's add_bos/add_eos flags.
std::vector<token_id> tokenize_segments(const Tokenizer& tok, std::span<const ChatSegment> segments,
                                        bool add_special);

// format_chat_segments + tokenize_segments.
std::vector<token_id> tokenize_chat(const Tokenizer& tok, ChatTemplate tmpl, std::span<const ChatMessage> msgs,
                                    bool add_generation_prompt, bool add_special);

class ChatSyntax;

// A model's own Jinja chat template, rendered as llama-server renders it with
// --jinja (the template engine is synapse's, src/template/; what the template
// sees, and how messages are adapted to it, is described in
// src/runtime/chat_jinja.hpp). Messages, tools and extra template variables
// are JSON text in OpenAI's shapes, so that callers need no JSON library.
//
// Thread-safety: immutable after construction; apply() may run on many threads.
class JinjaChatTemplate {
 public:
  // `source`: the Jinja text; bos_token/eos_token: the vocabulary's BOS/EOS
  // texts; architecture: general.architecture (which tool-call syntax the
  // model writes, when the template does not say). Throws
  // Error(invalid_argument) "template: line L: ..." on a syntax error.
  JinjaChatTemplate(std::string source, std::string bos_token, std::string eos_token,
                    std::string_view architecture = {});

  // The model's template: `source_override` (--chat-template-file's text)
  // when given, else tokenizer.chat_template; nullopt when the file has none
  // (callers fall back to the built-in formats). BOS/EOS texts come from
  // `tok`. Throws Error(format) when the key is not a string, and as the
  // constructor.
  static std::optional<JinjaChatTemplate> for_model(const gguf::File& file, const Tokenizer& tok,
                                                    std::optional<std::string> source_override = {});

  // The prompt text for a conversation: `messages_json` an array of OpenAI
  // chat messages, `tools_json` "" or an array of OpenAI tools,
  // `kwargs_json` "" or an object of extra template variables
  // (chat_template_kwargs: enable_thinking, reasoning_effort, ...). A final
  // assistant message is continued (prefill). A leading BOS text is removed:
  // tokenize the result with add_special (BOS per the vocabulary) and
  // parse_special. Throws Error(invalid_argument) on JSON that does not
  // parse or has the wrong shape (validate_chat_tools,
  // validate_chat_messages: the message names the field), and with the
  // template's own message when it raises or fails.
  std::string apply(std::string_view messages_json, bool add_generation_prompt, std::string_view tools_json = {},
                    std::string_view kwargs_json = {}) const;

  const std::string& source() const;

  // How this template's family writes tool calls and reasoning (the
  // ChatSyntax of source() and the file's architecture).
  ChatSyntax syntax() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// What a reply parser needs to know of the request (llama-server's fields).
struct ChatReplyOptions {
  // llama-server's reasoning_format: "auto" or "deepseek" move a reasoning
  // block (<think>...</think>, [THINK]...[/THINK], gpt-oss's analysis
  // channel) to reasoning_content; "none" leaves it in content.
  std::string reasoning_format = "auto";
  // The prompt ended inside the reasoning block, so the reply starts in it
  // (ChatSyntax::prompt_opens_reasoning of the rendered prompt).
  bool thinking_open = false;
  // The request's `tools` (a JSON array of OpenAI tools; "" none) and
  // `tool_choice` ("\"auto\"", "\"none\"", "\"required\"" or
  // {"type": "function", "function": {"name": N}} as JSON text; "" is
  // auto). Calls are parsed only when there are tools and tool_choice is not
  // none; a call to a function not among them stays content.
  std::string tools_json;
  std::string tool_choice_json;
  // False: a call after the first is dropped (OpenAI's parallel_tool_calls).
  bool parallel_tool_calls = true;
  // Ids of calls the model wrote none for are drawn from (id_seed, index):
  // "call_" and 24 letters and digits (9 for the Mistral families).
  uint64_t id_seed = 0;
};

class ChatReplyStream;

// How a model family writes tool calls and reasoning in its replies
// (llama.cpp's chat format / common_chat_syntax; src/runtime/chat_output.hpp
// lists the families): the grammar that forces a call (tool_choice required
// or a named function, by constrained decoding), and the parser that splits
// a reply into OpenAI's content, reasoning_content and tool_calls. The
// parser never fails: text that does not parse as a call is content.
//
// Thread-safety: an immutable value; every method may run on many threads.
class ChatSyntax {
 public:
  // The family of the chat template `template_source` (recognized by its
  // markers, as llama.cpp does); `architecture` (general.architecture)
  // decides only when the template says nothing. No known syntax: "generic"
  // (llama.cpp's fallback: a reply that is {"tool_call": {...}}).
  explicit ChatSyntax(std::string_view template_source, std::string_view architecture = {});

  // "hermes", "llama3_json", "qwen3_coder_xml", "mistral", "gpt_oss_harmony",
  // "generic", ...
  std::string name() const;

  // Whether `prompt` (a rendered chat) ends inside the family's reasoning
  // block (e.g. after "<think>\n"): pass it as ChatReplyOptions::thinking_open.
  bool prompt_opens_reasoning(std::string_view prompt) const;

  // GBNF (root rule `root`) whose sentences are a call in the family's
  // syntax, or with `parallel_tool_calls` one or more, to a tool that
  // tool_choice allows, with arguments valid for its `parameters` schema;
  // "" when tool_choice is auto or none (nothing to force). thinking_open:
  // the reply first closes the reasoning block the prompt opened. Throws
  // Error(invalid_argument) naming the field: a bad tools array
  // ("tools[1].function.name: ..."), a schema the grammar cannot hold, a
  // tool_choice that is malformed or names no tool, required with no tools.
  std::string tool_call_grammar(std::string_view tools_json, std::string_view tool_choice_json,
                                bool parallel_tool_calls, bool thinking_open = false) const;

  // The whole reply `text` (special tokens rendered) as a JSON object
  // {"content": string, "reasoning_content": string, "tool_calls": [{"id",
  // "type": "function", "function": {"name", "arguments": JSON text of an
  // object}}]}, every key present. Throws Error(invalid_argument) naming the
  // option for a bad reasoning_format, tools_json or tool_choice_json.
  std::string parse_reply(std::string_view text, const ChatReplyOptions& options) const;

  // The reply parsed as parse_reply does, as OpenAI's assistant message (JSON
  // text): {"role": "assistant", "content" (null when empty beside calls),
  // "reasoning_content" (when there is some), "tool_calls" (when there are
  // some)}; the same object the server writes (synapse/reply_format.hpp).
  // Throws as parse_reply.
  std::string reply_message(std::string_view text, const ChatReplyOptions& options) const;

  // A parser fed the reply piece by piece (streaming); parse_reply's result
  // is its deltas put together, however the text was split. Throws as
  // parse_reply.
  ChatReplyStream stream(const ChatReplyOptions& options) const;

 private:
  int format_;  // runtime::ToolCallFormat
};

// One reply's streaming parser (ChatSyntax::stream). It holds back text that
// may begin a marker, and a tool call until it is complete. One thread at a
// time.
class ChatReplyStream {
 public:
  ChatReplyStream(ChatReplyStream&&) noexcept;
  ChatReplyStream& operator=(ChatReplyStream&&) noexcept;
  ~ChatReplyStream();

  // The OpenAI deltas that `piece` decides, as a JSON array (possibly
  // empty) of objects each holding one of: {"content": s};
  // {"reasoning_content": s}; a call's start {"tool_calls": [{"index": i,
  // "id", "type": "function", "function": {"name", "arguments": ""}}]}; or
  // an arguments fragment {"tool_calls": [{"index": i, "function":
  // {"arguments": s}}]}.
  std::string feed(std::string_view piece);
  // The end of the reply: the deltas of everything still held. Feeding or
  // finishing again after it is Error(invalid_argument).
  std::string finish();

 private:
  friend class ChatSyntax;
  struct State;
  explicit ChatReplyStream(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// OpenAI's `tools` (a JSON array) checked as the server checks it: each
// {"type": "function", "function": {"name": 1-64 of [A-Za-z0-9_.-], each
// once, "description"?: string, "parameters"?: object, "strict"?: bool}}.
// Throws Error(invalid_argument) naming the field ("tools[2].function.name:
// ..."), also for text that is not JSON.
void validate_chat_tools(std::string_view tools_json);

// The tool calls and tool results of a chat history (a JSON array of
// messages): each assistant tool_calls[j] has an id, type "function", a
// function name and arguments (an object, or a string holding one); each
// "tool" message a string tool_call_id and content. Throws
// Error(invalid_argument) naming the field ("messages[3].tool_calls[0].
// function.arguments: ..."). Other fields are not looked at.
void validate_chat_messages(std::string_view messages_json);

}  // namespace synapse


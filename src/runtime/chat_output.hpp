// A chat model's reply split into what the OpenAI API returns: content,
// reasoning_content and tool_calls; the grammars that force a tool call in a
// family's own syntax; and the checks of `tools` and of tool calls in a chat
// history that the server answers with a 400.
//
// Every family writes calls its own way (the markers below). The parser takes
// the text as the model wrote it (special tokens rendered) and never fails:
// what does not parse as a call (an unknown marker, JSON cut short, a call when
// no tools were offered, a name not among the tools) is returned as content.
// Facts (markers, layouts, which template writes what) are llama.cpp's,
// common/chat.cpp, common/parsers/*.cpp and tests/test-chat.cpp (v0.5.0).
//
// Streaming: OutputStream takes the reply piece by piece and returns OpenAI
// deltas; it holds back text that may begin a marker, and a tool call until
// it is complete and parses (a delta cannot be taken back, and a call that
// turns out broken is content), so a call's name and arguments arrive
// together when the call ends (a call being held is read again from its
// marker on each piece). parse_output(text) is exactly the deltas of the
// whole text put together, whichever way the text was split.
//
// Pure functions of their arguments; no model, no global state. Thread-safe
// (an OutputStream is one reply's state: one thread at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "synapse/grammar.hpp"

namespace synapse::runtime {

// How a family writes tool calls (and, for a few, reasoning).
enum class ToolCallFormat {
  none,             // no calls are parsed; <think> reasoning still is
  generic,          // llama.cpp's fallback: the reply is {"tool_call": {...}}, {"tool_calls": [...]} or {"response": ...}
  llama3_json,      // Llama 3.x: {"name": N, "parameters": {...}} at the start; <|python_tag|> JSON or N.call(k="v")
  hermes,           // <tool_call>{"name": N, "arguments": {...}}</tool_call>: Hermes 2 Pro/3, Qwen 2.5, Qwen3, QwQ, Granite 4
  qwen3_coder_xml,  // <tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call>: Qwen3-Coder, Qwen3.5, Nemotron 3
  mistral_nemo,     // [TOOL_CALLS][{"name": N, "arguments": {...}, "id": "abcDEF123"}]: Mistral Nemo, Mistral 7B v0.3
  mistral,          // [TOOL_CALLS]N[ARGS]{...}: Ministral 3, Magistral, Devstral (reasoning in [THINK]...[/THINK])
  mistral_call_id,  // [TOOL_CALLS]N[CALL_ID]abcDEF123[ARGS]{...}: Mistral Small 3.2
  gpt_oss_harmony,  // gpt-oss: <|channel|>commentary to=functions.N <|constrain|>json<|message|>{...}; analysis = reasoning
  deepseek_r1,      // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\n{...}\n```<｜tool▁call▁end｜>...
  deepseek_v3_1,    // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
  kimi_k2,          // <|tool_calls_section_begin|><|tool_call_begin|>functions.N:0<|tool_call_argument_begin|>{...}<|tool_call_end|>...
  glm_4_5,          // <tool_call>N\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>: GLM 4.5-4.7, Ling 3, Laguna
  minimax_m2,       // <minimax:tool_call>\n<invoke name="N">\n<parameter name="K">V</parameter>\n</invoke>\n</minimax:tool_call>
  functionary_v3_1, // <function=N>{...}</function>: Functionary v3.1 (Llama 3.1)
  firefunction_v2,  //  functools[{"name": N, "arguments": {...}}]
  nemotron_v2,      // <TOOLCALL>[{"name": N, "arguments": {...}}]</TOOLCALL>: Nemotron Nano v2
  apriel,           // <tool_calls>[{"name": N, "arguments": {...}}]</tool_calls>: Apriel 1.5/1.6
  granite,          // <|tool_call|>[{"name": N, "arguments": {...}}]: Granite 3.x
  command_r7b,      // <|START_ACTION|>[{"tool_call_id": "0", "tool_name": N, "parameters": {...}}]<|END_ACTION|>
};

// "hermes", "gpt_oss_harmony", ... (the enumerator's name).
const char* format_name(ToolCallFormat f);

// The texts of the tokens format f's markers are made of, which its models
// write as single tokens, often control tokens that detokenize to "" (gpt-oss's
// <|channel|>, Mistral's [TOOL_CALLS]): a server passes the vocabulary's
// tokens of these texts as GenerationParams::preserved_tokens, so that the
// parser and the tool-call grammars see them as text. Reasoning markers
// included. llama.cpp's preserved_tokens of each format (common/chat.cpp).
std::vector<std::string_view> marker_token_texts(ToolCallFormat f);

// The family of a chat template, recognized from markers in its source as
// llama.cpp does; `architecture` (GGUF general.architecture) decides only
// when the template says nothing (an empty template: gpt-oss -> harmony,
// qwen2/qwen3/qwen3moe -> hermes). A template with no known call syntax is
// `generic` (llama.cpp's fallback, which the server prompts for).
ToolCallFormat detect_format(std::string_view chat_template_source, std::string_view architecture = {});

// llama-server's reasoning_format: none keeps reasoning where the model wrote
// it (in content, markers and all); deepseek and auto move it to
// reasoning_content.
enum class ReasoningFormat { none, deepseek, automatic };
// "none", "deepseek", "auto" (also "deepseek-legacy", read as deepseek).
// Throws Error(invalid_argument) naming reasoning_format and the value.
ReasoningFormat parse_reasoning_format(std::string_view name);

struct ParseOptions {
  ReasoningFormat reasoning_format = ReasoningFormat::automatic;
  // The prompt ended inside a reasoning block (the template opened <think>,
  // [THINK] or gpt-oss's analysis message): the reply starts in it.
  // prompt_opens_reasoning() tells from the rendered prompt.
  bool thinking_open = false;
  // Tools were offered and tool_choice is not "none". False: no call is
  // parsed, every marker stays content.
  bool tools_offered = false;
  // False: a call after the first is dropped (the reply is one call).
  bool parallel_tool_calls = true;
  // The request's `tools` (validated by validate_tools), or null. When it
  // names functions, a call to another name is content; XML families read
  // each parameter's schema to type its value (a string parameter stays a
  // string, others are parsed as JSON).
  nlohmann::json tools;
  // Ids of calls the model wrote none for: make_tool_call_id(format, id_seed,
  // index). A seeded request passes its seed so that the reply is the same.
  uint64_t id_seed = 0;
};

// Whether `prompt` (the rendered chat) ends inside the format's reasoning
// block: it ends with <think> ([THINK] for Mistral, gpt-oss's
// <|channel|>analysis<|message|>), whitespace after it aside.
bool prompt_opens_reasoning(ToolCallFormat f, std::string_view prompt);

// A deterministic call id: "call_" and 24 letters and digits, or 9 letters and
// digits for the Mistral families (their templates refuse other ids), drawn
// from (seed, index) by splitmix64.
std::string make_tool_call_id(ToolCallFormat f, uint64_t seed, size_t index);

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object, compact, keys in the model's order
  bool operator==(const ToolCall&) const = default;
};

struct ParsedOutput {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  bool operator==(const ParsedOutput&) const = default;
};

// One OpenAI streaming delta. A call comes as `tool_call` (index, id, name)
// followed by `arguments` fragments of the same index.
struct Delta {
  enum class Kind { content, reasoning, tool_call, arguments };
  Kind kind = Kind::content;
  std::string text;   // content, reasoning or an arguments fragment
  size_t index = 0;   // tool_call, arguments: the call's position in tool_calls
  std::string id;     // tool_call
  std::string name;   // tool_call
  bool operator==(const Delta&) const = default;
};

// Adds a delta to a reply being put together.
void apply_delta(ParsedOutput& out, const Delta& d);

class OutputStream {
 public:
  OutputStream(ToolCallFormat format, ParseOptions options);
  ~OutputStream();
  OutputStream(OutputStream&&) noexcept;
  OutputStream& operator=(OutputStream&&) noexcept;

  // The deltas that `piece` decides (possibly none: text that may begin a
  // marker, or a call not yet complete, is held).
  std::vector<Delta> feed(std::string_view piece);
  // The end of the reply: everything held is decided. Feeding after finish
  // is an Error(invalid_argument).
  std::vector<Delta> finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// The whole reply at once: the deltas of OutputStream put together.
ParsedOutput parse_output(ToolCallFormat format, std::string_view text, const ParseOptions& options);

// tool_choice "required" (any tool) or a named function.
struct ToolChoice {
  enum class Kind { required, named };
  Kind kind = Kind::required;
  std::string name;  // named
};

struct ToolGrammarOptions {
  // An optional reasoning block may come before the calls (<think>...</think>,
  // [THINK]...[/THINK], gpt-oss's analysis message).
  bool allow_reasoning = false;
  // The prompt opened the reasoning block: the reply starts inside it and
  // must close it before the calls.
  bool thinking_open = false;
  GrammarLimits limits;
};

// GBNF (root rule `root`) whose sentences are one call (or, with `parallel`,
// one or more) in the family's syntax, to the tool `choice` allows, with
// arguments valid for that tool's `parameters` schema (json_schema_to_gbnf,
// its rules renamed per tool). `tools` is validated first (validate_tools).
// Throws Error(invalid_argument) naming tools[i] and the tool when a schema
// cannot be converted (or, for the XML families, is not an object with
// properties), naming tool_choice when it names no tool, or for format none.
// The markers are text in the grammar: the matcher's vocabulary must render
// the tokens that spell them ([TOOL_CALLS], <|channel|>, ... are control
// tokens in their models) as that text. Properties come in the order the
// client declared them (ordered JSON), as in llama.cpp.
std::string tool_call_grammar(ToolCallFormat format, const nlohmann::ordered_json& tools, const ToolChoice& choice,
                              bool parallel, const ToolGrammarOptions& options = {});

// `tools` as OpenAI takes it: an array of {"type": "function", "function":
// {"name": N, "description"?: string, "parameters"?: object, "strict"?: bool}}
// with N of 1-64 letters, digits, '_', '-' or '.', each name once. Throws
// Error(invalid_argument) naming the field ("tools[2].function.name: ...").
void validate_tools(const nlohmann::ordered_json& tools);

// The tool calls of a chat history: each assistant tool_calls[j] has an id,
// type "function", function.name (a string) and function.arguments (a JSON
// object, or a string holding one); each "tool" message has a tool_call_id
// (a string) and content (a string or an array of parts). Other messages are
// not looked at. Throws Error(invalid_argument) naming the field
// ("messages[3].tool_calls[0].function.arguments: ...").
void validate_history(const nlohmann::ordered_json& messages);

}  // namespace synapse::runtime

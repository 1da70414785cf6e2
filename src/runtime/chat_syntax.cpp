// The public face of the tool-call machinery (synapse/chat.hpp: ChatSyntax,
// ChatReplyStream, validate_chat_tools, validate_chat_messages): JSON text in
// and out over chat_output.hpp's parser, grammars and checks, so that the
// command line and the Python package need neither runtime:: types nor a
// JSON library.
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/chat_output.hpp"
#include "runtime/reply_format.hpp"
#include "synapse/chat.hpp"
#include "synapse/error.hpp"

namespace synapse {

namespace {

// Ordered: tools keep the order the caller declared their properties in (the
// forced calls write them in that order).
using json = nlohmann::ordered_json;
using ojson = nlohmann::ordered_json;
using runtime::Delta;
using runtime::ToolCallFormat;

[[noreturn]] void fail(const std::string& message) { throw Error(Errc::invalid_argument, message); }

// `text` as JSON ("" gives `empty`); `what` names the field in the error.
json parse_field(std::string_view text, const char* what, json empty = nullptr) {
  if (text.empty()) return empty;
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(std::string(what) + ": not valid JSON: " + e.what());
  }
}

// OpenAI's tool_choice: "auto" | "none" | "required" | {"type": "function",
// "function": {"name": N}} (llama-cpp-python passes the same shapes).
struct Choice {
  enum class Kind { automatic, none, required, named };
  Kind kind = Kind::automatic;
  std::string name;
};

Choice parse_choice(std::string_view text) {
  const json j = parse_field(text, "tool_choice");
  Choice c;
  if (j.is_null()) return c;
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "auto") return c;
    if (s == "none") c.kind = Choice::Kind::none;
    else if (s == "required") c.kind = Choice::Kind::required;
    else fail("tool_choice: \"" + s + "\" is not one of \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    return c;
  }
  if (!j.is_object()) fail("tool_choice: must be a string or an object, not " + std::string(j.type_name()));
  if (j.contains("type") && j["type"] != "function")
    fail("tool_choice.type: must be \"function\", not " + j["type"].dump());
  const auto fn = j.find("function");
  if (fn == j.end() || !fn->is_object()) fail("tool_choice.function: missing (an object with a \"name\")");
  const auto name = fn->find("name");
  if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
    fail("tool_choice.function.name: must be a non-empty string");
  c.kind = Choice::Kind::named;
  c.name = name->get<std::string>();
  return c;
}

json parse_tools(std::string_view text) {
  json tools = parse_field(text, "tools", json::array());
  if (tools.is_null()) tools = json::array();
  runtime::validate_tools(tools);
  return tools;
}

runtime::ParseOptions parse_options(const ChatReplyOptions& o) {
  runtime::ParseOptions p;
  p.reasoning_format = runtime::parse_reasoning_format(o.reasoning_format);
  p.thinking_open = o.thinking_open;
  p.tools = nlohmann::json(parse_tools(o.tools_json));
  const Choice choice = parse_choice(o.tool_choice_json);
  if (choice.kind == Choice::Kind::named) {
    bool found = false;
    for (const nlohmann::json& t : p.tools) found = found || t["function"]["name"] == choice.name;
    if (!found) fail("tool_choice: function '" + choice.name + "' is not among the tools");
  }
  p.tools_offered = !p.tools.empty() && choice.kind != Choice::Kind::none;
  p.parallel_tool_calls = o.parallel_tool_calls;
  p.id_seed = o.id_seed;
  return p;
}

std::string deltas_json(const std::vector<Delta>& deltas) {
  ojson a = ojson::array();
  for (const Delta& d : deltas) a.push_back(runtime::chat_delta<ojson>(d));
  return a.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

ChatSyntax::ChatSyntax(std::string_view template_source, std::string_view architecture)
    : format_(static_cast<int>(runtime::detect_format(template_source, architecture))) {}

std::string ChatSyntax::name() const { return runtime::format_name(static_cast<ToolCallFormat>(format_)); }

bool ChatSyntax::prompt_opens_reasoning(std::string_view prompt) const {
  return runtime::prompt_opens_reasoning(static_cast<ToolCallFormat>(format_), prompt);
}

std::string ChatSyntax::tool_call_grammar(std::string_view tools_json, std::string_view tool_choice_json,
                                          bool parallel_tool_calls, bool thinking_open) const {
  const Choice choice = parse_choice(tool_choice_json);
  const json tools = parse_tools(tools_json);
  if (choice.kind == Choice::Kind::automatic || choice.kind == Choice::Kind::none) return {};
  runtime::ToolChoice tc;
  tc.kind = choice.kind == Choice::Kind::named ? runtime::ToolChoice::Kind::named : runtime::ToolChoice::Kind::required;
  tc.name = choice.name;
  runtime::ToolGrammarOptions opt;
  opt.thinking_open = thinking_open;
  return runtime::tool_call_grammar(static_cast<ToolCallFormat>(format_), tools, tc, parallel_tool_calls, opt);
}

std::string ChatSyntax::parse_reply(std::string_view text, const ChatReplyOptions& options) const {
  const runtime::ParsedOutput out =
      runtime::parse_output(static_cast<ToolCallFormat>(format_), text, parse_options(options));
  const ojson j = {{"content", out.content},
                   {"reasoning_content", out.reasoning_content},
                   {"tool_calls", runtime::chat_tool_calls<ojson>(out.tool_calls)}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ChatSyntax::reply_message(std::string_view text, const ChatReplyOptions& options) const {
  const runtime::ParsedOutput out =
      runtime::parse_output(static_cast<ToolCallFormat>(format_), text, parse_options(options));
  return runtime::chat_message<ojson>(out).dump(-1, ' ', false, json::error_handler_t::replace);
}

struct ChatReplyStream::State {
  runtime::OutputStream stream;
  bool finished = false;
};

ChatReplyStream ChatSyntax::stream(const ChatReplyOptions& options) const {
  return ChatReplyStream(std::make_unique<ChatReplyStream::State>(
      ChatReplyStream::State{runtime::OutputStream(static_cast<ToolCallFormat>(format_), parse_options(options))}));
}

ChatReplyStream::ChatReplyStream(std::unique_ptr<State> s) : s_(std::move(s)) {}
ChatReplyStream::ChatReplyStream(ChatReplyStream&&) noexcept = default;
ChatReplyStream& ChatReplyStream::operator=(ChatReplyStream&&) noexcept = default;
ChatReplyStream::~ChatReplyStream() = default;

std::string ChatReplyStream::feed(std::string_view piece) {
  if (s_->finished) fail("ChatReplyStream: feed after finish");
  return deltas_json(s_->stream.feed(piece));
}

std::string ChatReplyStream::finish() {
  if (s_->finished) fail("ChatReplyStream: finish called twice");
  s_->finished = true;
  return deltas_json(s_->stream.finish());
}

void validate_chat_tools(std::string_view tools_json) {
  const json tools = parse_field(tools_json, "tools", json::array());
  runtime::validate_tools(tools);
}

void validate_chat_messages(std::string_view messages_json) {
  runtime::validate_history(parse_field(messages_json, "messages", json::array()));
}

}  // namespace synapse

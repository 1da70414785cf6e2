#include "runtime/chat_jinja.hpp"

#include <chrono>
#include <cstdio>
#include <functional>

#include "synapse/chat.hpp"
#include "synapse/error.hpp"

namespace synapse::runtime {

namespace {

using ojson = nlohmann::ordered_json;

bool contains(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

std::tm local_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

std::string format_tm(const std::tm& tm, const char* fmt) {
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, fmt, &tm);
  return std::string(buf, n);
}

// llama.cpp's concat_content_parts: text parts joined by `sep`, "\n" (other
// part types are refused before a request gets here); a continued message's
// prefill joins them as common_chat_msg::render_content does, by "\n\n".
std::string join_text_parts(const ojson& parts, std::string_view sep = "\n") {
  std::string text;
  for (const ojson& part : parts) {
    if (!part.is_object()) continue;
    const auto t = part.find("type");
    if (t == part.end() || *t != "text") continue;
    const auto x = part.find("text");
    if (!text.empty()) text += sep;
    if (x != part.end() && x->is_string()) text += x->get<std::string>();
  }
  return text;
}

std::string content_text(const ojson& content) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_array()) return join_text_parts(content);
  return {};
}

ojson call(const char* id, const char* name, ojson arguments) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", std::move(arguments)}}}};
}

ojson probe_tools() {
  ojson params = {{"type", "object"},
                  {"properties", {{"argument_needle", {{"type", "string"}, {"description", "an argument"}}}}},
                  {"required", ojson::array({"argument_needle"})}};
  return ojson::array(
      {{{"type", "function"},
        {"function", {{"name", "tool_name_needle"}, {"description", "a tool"}, {"parameters", std::move(params)}}}}});
}

// The probe conversation of a call: user, assistant calls, tool results,
// assistant, user (llama.cpp's caps.cpp and minja's shape; templates that
// require alternation or a final user turn accept it).
ojson probe_call_messages(ojson calls) {
  ojson msgs = ojson::array();
  msgs.push_back({{"role", "user"}, {"content", "User message"}});
  msgs.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}});
  for (const ojson& c : calls)
    msgs.push_back({{"role", "tool"}, {"tool_call_id", c["id"]}, {"content", "Tool response"}});
  msgs.push_back({{"role", "assistant"}, {"content", "The tool said so."}});
  msgs.push_back({{"role", "user"}, {"content", "User message"}});
  return msgs;
}

bool renders_arguments(std::string_view out) {
  return contains(out, "\"argument_needle\":") || contains(out, "'argument_needle':") ||
         contains(out, "<parameter=argument_needle>") || contains(out, "<arg_key>argument_needle</arg_key>") ||
         contains(out, "<parameter name=\"argument_needle\">");
}

}  // namespace

ChatRenderer::ChatRenderer(std::string source, std::string bos_token, std::string eos_token,
                           std::string_view architecture, std::function<std::tm()> now)
    : source_(std::move(source)),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)),
      now_(now ? std::move(now) : std::function<std::tm()>(local_now)),
      tmpl_([&] {
        jinja::Options o;
        o.now = now_;
        return jinja::Template::parse(source_, o);
      }()),
      format_(detect_format(source_, architecture)) {
  // Each probe renders a small conversation holding a marker and looks for
  // the marker; a template that raises on a probe does not have the ability.
  const auto try_render = [&](const ojson& messages, const ojson& tools) -> std::string {
    ojson ctx = {{"messages", messages}, {"bos_token", bos_}, {"eos_token", eos_}};
    if (!tools.is_null()) ctx["tools"] = tools;
    ctx["add_generation_prompt"] = true;
    try {
      return render_raw(ctx);
    } catch (const std::exception&) {
      return {};
    }
  };
  const ojson user_needle = ojson::array({{{"role", "user"}, {"content", "user_needle"}}});
  caps_.supports_string_content = contains(try_render(user_needle, nullptr), "user_needle");
  {
    const ojson typed = ojson::array(
        {{{"role", "user"}, {"content", ojson::array({{{"type", "text"}, {"text", "user_needle"}}})}}});
    const std::string out = try_render(typed, nullptr);
    // A template printing the list itself shows its repr, parts and all.
    caps_.supports_typed_content = contains(out, "user_needle") && !contains(out, "'type'") && !contains(out, "\"type\"");
  }
  // A template that renders no probe (one that needs variables of its own,
  // like firefunction's `functions`) gets its messages as sent.
  const bool renders = caps_.supports_string_content || caps_.supports_typed_content;
  caps_.supports_system_role = !renders || contains(
      try_render(ojson::array({{{"role", "system"}, {"content", "system_needle"}}, {{"role", "user"}, {"content", "Hi"}}}),
                 nullptr),
      "system_needle");
  caps_.supports_tools =
      contains(try_render(ojson::array({{{"role", "user"}, {"content", "Hi"}}}), probe_tools()), "tool_name_needle");
  const ojson args = {{"argument_needle", "print('Hello, World!')"}};
  const std::string out_obj =
      try_render(probe_call_messages(ojson::array({call("call_1___", "tool_name_needle", args)})), probe_tools());
  const std::string out_str =
      try_render(probe_call_messages(ojson::array({call("call_1___", "tool_name_needle", args.dump())})), probe_tools());
  caps_.supports_tool_calls = contains(out_obj, "tool_name_needle") || contains(out_str, "tool_name_needle");
  caps_.requires_object_arguments = !renders_arguments(out_str) && renders_arguments(out_obj);
  if (caps_.supports_tool_calls) {
    ojson two = ojson::array({call("call_1___", "tool_name_needle", caps_.requires_object_arguments ? args : ojson(args.dump())),
                              call("call_2___", "tool_name_needle_2", caps_.requires_object_arguments ? args : ojson(args.dump()))});
    caps_.supports_parallel_tool_calls = contains(try_render(probe_call_messages(std::move(two)), probe_tools()),
                                                  "tool_name_needle_2");
  }
}

std::string ChatRenderer::render_raw(const ojson& context) const { return tmpl_.render(context); }

ojson ChatRenderer::adapt(const ojson& messages) const {
  ojson out = ojson::array();
  const bool only_string = caps_.supports_string_content && !caps_.supports_typed_content;
  const bool only_typed = !caps_.supports_string_content && caps_.supports_typed_content;
  for (const ojson& m : messages) {
    ojson copy = m;
    if (format_ != ToolCallFormat::gpt_oss_harmony && copy.value("role", "") == "developer") copy["role"] = "system";
    if (auto c = copy.find("content"); c != copy.end()) {
      if (only_typed && c->is_string())
        *c = ojson::array({{{"type", "text"}, {"text", c->get<std::string>()}}});
      else if (only_string && c->is_array())
        *c = join_text_parts(*c);
    }
    if (auto calls = copy.find("tool_calls"); calls != copy.end() && calls->is_array()) {
      if (caps_.supports_tool_calls && (!copy.contains("content") || copy["content"].is_null())) copy["content"] = "";
      for (ojson& tc : *calls) {
        auto f = tc.find("function");
        if (f == tc.end() || !f->is_object()) continue;
        auto a = f->find("arguments");
        if (a == f->end()) continue;
        if (caps_.requires_object_arguments && a->is_string()) {
          // validate_history has checked that the string holds an object.
          *a = ojson::parse(a->get<std::string>());
        } else if (!caps_.requires_object_arguments && a->is_object() && caps_.supports_tool_calls) {
          *a = a->dump();
        }
      }
    }
    // gpt-oss's template reads an assistant turn's analysis from `thinking`
    // and refuses content beside it in a turn with calls: llama.cpp v0.5.0's
    // common_chat_params_init_gpt_oss (common/parsers/gpt-oss.cpp) copies
    // reasoning_content there and drops such a turn's content.
    if (format_ == ToolCallFormat::gpt_oss_harmony) {
      if (const auto rc = copy.find("reasoning_content"); rc != copy.end() && rc->is_string()) {
        copy["thinking"] = *rc;
        if (const auto tc = copy.find("tool_calls"); tc != copy.end() && tc->is_array() && !tc->empty())
          copy.erase("content");
      }
    }
    out.push_back(std::move(copy));
  }
  // A template that drops system messages gets the system text in front of
  // the first user message (llama.cpp's workaround).
  if (!caps_.supports_system_role && !out.empty() && out[0].value("role", "") == "system") {
    const std::string sys = content_text(out[0]["content"]);
    out.erase(out.begin());
    if (!out.empty()) {
      ojson& next = out[0];
      const ojson c = next.contains("content") ? next["content"] : ojson("");
      if (c.is_array() && only_typed) {
        ojson parts = ojson::array({{{"type", "text"}, {"text", sys}}});
        for (const ojson& p : c) parts.push_back(p);
        next["content"] = std::move(parts);
      } else {
        next["content"] = sys + "\n" + content_text(c);
      }
    }
  }
  return out;
}

RenderedChat ChatRenderer::render(const ChatInputs& in) const {
  if (!in.messages.is_array()) throw Error(Errc::invalid_argument, "messages: must be an array");
  ojson messages = in.messages;
  bool add_generation_prompt = in.add_generation_prompt;
  std::string prefill, prefill_reasoning;
  bool continues = false;
  if (!messages.empty() && messages.back().is_object() && messages.back().value("role", "") == "assistant" &&
      add_generation_prompt) {
    const ojson& last = messages.back();
    if (const auto tc = last.find("tool_calls"); tc != last.end() && !tc->is_null() && !tc->empty())
      throw Error(Errc::invalid_argument,
                  "messages[" + std::to_string(messages.size() - 1) +
                      "]: the conversation ends with an assistant message, which is continued (prefill); it cannot "
                      "have tool_calls");
    const ojson content = last.value("content", ojson());
    prefill = content.is_array() ? join_text_parts(content, "\n\n") : content_text(content);
    if (const auto rc = last.find("reasoning_content"); rc != last.end() && rc->is_string())
      prefill_reasoning = rc->get<std::string>();
    messages.erase(messages.end() - 1);
    continues = true;
  }
  // gpt-oss continues a final assistant message in its own form, after the
  // conversation rendered without a generation prompt (llama.cpp v0.5.0
  // common/chat.cpp:1252-1270 and common/parsers/gpt-oss.cpp:20-64): an
  // analysis message with the reasoning, then, unless only reasoning was
  // given, a final message with the content; a prompt rendered without a
  // generation prompt has its last <|return|> read as <|end|>.
  const bool harmony = format_ == ToolCallFormat::gpt_oss_harmony;
  if (harmony && continues) add_generation_prompt = false;
  ojson ctx = {{"messages", adapt(messages)}, {"bos_token", bos_}, {"eos_token", eos_}, {"enable_thinking", true}};
  if (in.tools.is_array() && !in.tools.empty()) ctx["tools"] = in.tools;
  const std::tm tm = now_();
  ctx["datetime"] = format_tm(tm, "%b %d %Y");
  ctx["date_string"] = format_tm(tm, "%d %b %Y");
  if (in.kwargs.is_object())
    for (const auto& [k, v] : in.kwargs.items()) ctx[k] = v;
  if (add_generation_prompt) ctx["add_generation_prompt"] = true;
  RenderedChat r;
  r.prompt = render_raw(ctx);
  if (!bos_.empty() && r.prompt.compare(0, bos_.size(), bos_) == 0) r.prompt.erase(0, bos_.size());
  if (harmony && !add_generation_prompt) {
    constexpr std::string_view kReturn = "<|return|>";
    if (const size_t at = r.prompt.rfind(kReturn); at != std::string::npos) r.prompt.replace(at, kReturn.size(), "<|end|>");
  }
  bool in_reasoning = false;
  if (harmony && continues) {
    r.prompt += "<|start|>assistant<|channel|>analysis<|message|>" + prefill_reasoning;
    in_reasoning = prefill.empty() && !prefill_reasoning.empty();
    if (!in_reasoning) r.prompt += "<|end|><|start|>assistant<|channel|>final<|message|>" + prefill;
  } else {
    r.prompt += prefill;
  }
  r.continues_final = continues;
  r.thinking_open = in_reasoning || prompt_opens_reasoning(format_, r.prompt);
  return r;
}

}  // namespace synapse::runtime

namespace synapse {

struct JinjaChatTemplate::Impl {
  runtime::ChatRenderer renderer;
  std::string architecture;
};

JinjaChatTemplate::JinjaChatTemplate(std::string source, std::string bos_token, std::string eos_token,
                                     std::string_view architecture)
    : impl_(std::make_shared<const Impl>(
          Impl{runtime::ChatRenderer(std::move(source), std::move(bos_token), std::move(eos_token), architecture),
               std::string(architecture)})) {}

std::optional<JinjaChatTemplate> JinjaChatTemplate::for_model(const gguf::File& file, const Tokenizer& tok,
                                                              std::optional<std::string> source_override) {
  std::string source;
  if (source_override) {
    source = std::move(*source_override);
  } else {
    if (file.find("tokenizer.chat_template") == nullptr) return std::nullopt;
    std::optional<std::string> s = file.get_string("tokenizer.chat_template");
    if (!s) throw Error(Errc::format, file.path() + ": tokenizer.chat_template is not a string");
    source = std::move(*s);
  }
  const auto text = [&](token_id id) { return id >= 0 ? tok.token_to_piece(id, true) : std::string(); };
  std::string arch;
  if (std::optional<std::string> a = file.get_string("general.architecture")) arch = std::move(*a);
  return JinjaChatTemplate(std::move(source), text(tok.bos()), text(tok.eos()), arch);
}

std::string JinjaChatTemplate::apply(std::string_view messages_json, bool add_generation_prompt,
                                     std::string_view tools_json, std::string_view kwargs_json) const {
  using ojson = nlohmann::ordered_json;
  const auto parse = [](std::string_view text, const char* what) {
    try {
      return ojson::parse(text);
    } catch (const ojson::exception& e) {
      throw Error(Errc::invalid_argument, std::string(what) + ": not valid JSON: " + e.what());
    }
  };
  runtime::ChatInputs in;
  in.messages = parse(messages_json, "messages");
  if (!in.messages.is_array()) throw Error(Errc::invalid_argument, "messages: must be a JSON array");
  runtime::validate_history(in.messages);  // adapt() parses string arguments of templates that read objects
  if (!tools_json.empty()) {
    in.tools = parse(tools_json, "tools");
    if (!in.tools.is_array()) throw Error(Errc::invalid_argument, "tools: must be a JSON array");
    runtime::validate_tools(in.tools);
  }
  if (!kwargs_json.empty()) {
    in.kwargs = parse(kwargs_json, "chat_template_kwargs");
    if (!in.kwargs.is_object()) throw Error(Errc::invalid_argument, "chat_template_kwargs: must be a JSON object");
  }
  in.add_generation_prompt = add_generation_prompt;
  return impl_->renderer.render(in).prompt;
}

const std::string& JinjaChatTemplate::source() const { return impl_->renderer.source(); }

ChatSyntax JinjaChatTemplate::syntax() const { return ChatSyntax(impl_->renderer.source(), impl_->architecture); }

}  // namespace synapse

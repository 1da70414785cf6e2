#include "server/chat.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "runtime/grammar_cache.hpp"
#include "synapse/error.hpp"

namespace synapse::server {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& what, const json& value) {
  throw HttpError(400, "'" + field + "' " + what + ", got " + quote_value(value), field);
}

const ojson* field_of(const ojson& j, const char* field) {
  const auto it = j.find(field);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

// The runtime's checks name the field first ("tools[2].function.name: ...",
// "tools[1] (function 'f'): ...", "messages[3].tool_calls[0].id: ..."): that
// name becomes the error's param.
HttpError runtime_error_400(const Error& e, const std::string& fallback) {
  const std::string msg = e.what();
  size_t n = 0;
  while (n < msg.size() && (std::isalnum(static_cast<unsigned char>(msg[n])) || std::strchr("_.[]", msg[n]) != nullptr))
    ++n;
  const bool named = n > 0 && n < msg.size() && (msg[n] == ':' || msg[n] == ' ') && msg.compare(0, fallback.size(), fallback) == 0;
  return HttpError(400, msg, named ? msg.substr(0, n) : fallback);
}

// FNV-1a over the bytes of `s`.
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (const char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool is_role(const std::string& r) {
  return r == "system" || r == "developer" || r == "user" || r == "assistant" || r == "tool";
}

// The message checks validate_history does not make: roles, and content a
// string, null (assistant) or text parts.
void check_messages(const ojson& body, const RequestLimits& lim) {
  const ojson* v = field_of(body, "messages");
  if (!v) throw HttpError(400, "'messages' is required", "messages");
  if (!v->is_array() || v->empty()) bad("messages", "must be a non-empty array of messages", *v);
  if (v->size() > lim.max_messages)
    bad("messages", "must have at most " + std::to_string(lim.max_messages) + " entries", json(v->size()));
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string field = "messages[" + std::to_string(i) + "]";
    const ojson& m = (*v)[i];
    if (!m.is_object()) bad(field, "must be an object with 'role' and 'content'", m);
    const ojson* role = field_of(m, "role");
    if (!role || !role->is_string()) bad(field + ".role", "must be a string", role ? json(*role) : json());
    const std::string r = role->get<std::string>();
    if (!is_role(r)) bad(field + ".role", "must be one of system, developer, user, assistant, tool", *role);
    const ojson* c = field_of(m, "content");
    if (!c) {
      if (r != "assistant") throw HttpError(400, "'" + field + ".content' is required", field + ".content");
      continue;
    }
    if (c->is_string()) continue;
    if (!c->is_array()) bad(field + ".content", "must be a string or an array of content parts", *c);
    for (size_t k = 0; k < c->size(); ++k) {
      const std::string pf = field + ".content[" + std::to_string(k) + "]";
      const ojson& part = (*c)[k];
      if (!part.is_object()) bad(pf, "must be a content part {\"type\": \"text\", \"text\": ...}", part);
      const ojson* type = field_of(part, "type");
      if (!type || !type->is_string()) bad(pf + ".type", "must be a string", type ? json(*type) : json());
      if (*type != "text")
        bad(pf + ".type", "is not supported: this server reads text parts only (no image or audio input)", *type);
      const ojson* t = field_of(part, "text");
      if (!t || !t->is_string()) bad(pf + ".text", "must be a string", t ? json(*t) : json());
    }
  }
}

// llama.cpp's generic format has no syntax of the model's own: the reply is
// one JSON object, and the model is told so in the system prompt (llama.cpp
// adds such an instruction, and describes the tools itself when the template
// does not print them). Our words; the shapes are those the generic parser
// and grammar read (runtime/chat_output*.cpp).
ojson with_generic_instruction(ojson messages, const ojson& tools, bool parallel, bool template_prints_tools) {
  std::string text;
  if (!template_prints_tools) text += "You can call these tools (OpenAI function definitions):\n" + tools.dump(2) + "\n\n";
  text += parallel
              ? "Reply with one JSON object: {\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<its "
                "arguments>}}, ...]} to call one or more tools, or {\"response\": \"<your answer>\"} to answer the "
                "user."
              : "Reply with one JSON object: {\"tool_call\": {\"name\": \"<tool name>\", \"arguments\": {<its "
                "arguments>}}} to call a tool, or {\"response\": \"<your answer>\"} to answer the user.";
  if (!messages.empty() && messages[0].is_object() && messages[0].value("role", "") == "system" &&
      messages[0].contains("content") && messages[0]["content"].is_string()) {
    messages[0]["content"] = messages[0]["content"].get<std::string>() + "\n\n" + text;
  } else {
    messages.insert(messages.begin(), ojson{{"role", "system"}, {"content", text}});
  }
  return messages;
}

}  // namespace

runtime::ParseOptions ChatOutput::for_choice(size_t index) const {
  runtime::ParseOptions o = options;
  o.id_seed = mix64(options.id_seed + index);
  return o;
}

void check_template_kwargs(std::string_view text) {
  if (text.empty()) return;
  const ojson k = ojson::parse(text, nullptr, false);
  if (k.is_discarded()) throw Error(Errc::invalid_argument, "--chat-template-kwargs: not valid JSON: " + std::string(text));
  if (!k.is_object())
    throw Error(Errc::invalid_argument, "--chat-template-kwargs: must be a JSON object, got " + std::string(text));
}

std::shared_ptr<const JinjaChat> make_jinja_chat(std::string source, const Tokenizer& tok,
                                                 std::string_view architecture, std::string_view kwargs_json,
                                                 std::string_view reasoning_format) {
  check_template_kwargs(kwargs_json);
  const auto text = [&](token_id id) { return id >= 0 ? tok.token_to_piece(id, true) : std::string(); };
  auto chat = std::make_shared<JinjaChat>(JinjaChat{
      runtime::ChatRenderer(std::move(source), text(tok.bos()), text(tok.eos()), architecture),
      kwargs_json.empty() ? ojson() : ojson::parse(kwargs_json), runtime::parse_reasoning_format(reasoning_format), {}});
  const std::vector<std::string_view> markers = runtime::marker_token_texts(chat->renderer.format());
  for (token_id id = 0; id < tok.n_vocab(); ++id)
    if (!tok.is_eog(id) && std::find(markers.begin(), markers.end(), tok.text(id)) != markers.end())
      chat->preserved_tokens.push_back(id);
  return chat;
}

JinjaPrompt render_jinja_chat(const ojson& body, const JinjaChat& chat, const RequestLimits& lim, uint32_t seed) {
  check_messages(body, lim);
  const ojson& messages = body["messages"];
  try {
    runtime::validate_history(messages);
  } catch (const Error& e) {
    throw runtime_error_400(e, "messages");
  }
  // A conversation that ends with an assistant message is continued from its
  // text (ChatRenderer): it cannot also hold calls.
  if (const ojson& last = messages.back(); last.value("role", "") == "assistant") {
    if (const ojson* tc = field_of(last, "tool_calls"); tc && !tc->empty())
      throw HttpError(400,
                      "'messages[" + std::to_string(messages.size() - 1) +
                          "].tool_calls': the conversation ends with an assistant message, which is continued "
                          "(prefill); it cannot have tool_calls",
                      "messages[" + std::to_string(messages.size() - 1) + "].tool_calls");
  }

  // tools, tool_choice, parallel_tool_calls.
  ojson tools = ojson::array();
  if (const ojson* t = field_of(body, "tools")) {
    if (!t->is_array()) bad("tools", "must be an array of tools", *t);
    if (t->size() > lim.max_tools) bad("tools", "must have at most " + std::to_string(lim.max_tools) + " entries", json(t->size()));
    try {
      runtime::validate_tools(*t);
    } catch (const Error& e) {
      throw runtime_error_400(e, "tools");
    }
    tools = *t;
  }
  if (const ojson* f = field_of(body, "functions"); f && !(f->is_array() && f->empty()))
    bad("functions", "is not supported (the deprecated form of tools; send 'tools')", *f);
  enum class Choice { automatic, none, required, named } choice = Choice::automatic;
  std::string named;
  if (const ojson* tc = field_of(body, "tool_choice")) {
    if (tc->is_string()) {
      const std::string s = tc->get<std::string>();
      if (s == "auto") choice = Choice::automatic;
      else if (s == "none") choice = Choice::none;
      else if (s == "required") choice = Choice::required;
      else bad("tool_choice", "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}", *tc);
    } else if (tc->is_object()) {
      const ojson* type = field_of(*tc, "type");
      const ojson* fn = field_of(*tc, "function");
      const ojson* name = fn && fn->is_object() ? field_of(*fn, "name") : nullptr;
      if (!type || *type != "function" || !name || !name->is_string())
        bad("tool_choice", "must be {\"type\": \"function\", \"function\": {\"name\": ...}}", *tc);
      named = name->get<std::string>();
      const bool known = std::any_of(tools.begin(), tools.end(), [&](const ojson& t) { return t["function"]["name"] == named; });
      if (!known) bad("tool_choice", "names a function that is not among the tools", *name);
      choice = Choice::named;
    } else {
      bad("tool_choice", "must be a string or an object", *tc);
    }
    if (choice == Choice::required && tools.empty()) bad("tool_choice", "\"required\" needs tools", *tc);
  }
  bool parallel = true;
  if (const ojson* p = field_of(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) bad("parallel_tool_calls", "must be a boolean", *p);
    parallel = p->get<bool>();
  }

  // The template's extra variables: --chat-template-kwargs, reasoning_effort,
  // then the request's chat_template_kwargs.
  ojson kwargs = chat.kwargs.is_object() ? chat.kwargs : ojson::object();
  if (const ojson* e = field_of(body, "reasoning_effort")) {
    if (!e->is_string()) bad("reasoning_effort", "must be a string (\"low\", \"medium\", \"high\", ...)", *e);
    kwargs["reasoning_effort"] = *e;
  }
  if (const ojson* k = field_of(body, "chat_template_kwargs")) {
    if (!k->is_object()) bad("chat_template_kwargs", "must be an object", *k);
    for (const auto& [key, value] : k->items()) kwargs[key] = value;
  }
  runtime::ReasoningFormat reasoning = chat.reasoning_format;
  if (const ojson* r = field_of(body, "reasoning_format")) {
    if (!r->is_string()) bad("reasoning_format", "must be one of \"none\", \"deepseek\", \"auto\"", *r);
    try {
      reasoning = runtime::parse_reasoning_format(r->get<std::string>());
    } catch (const Error& e) {
      bad("reasoning_format", "must be one of \"none\", \"deepseek\", \"auto\"", *r);
    }
  }

  const runtime::ToolCallFormat format = chat.renderer.format();
  const bool calls_wanted = !tools.empty() && choice != Choice::none;
  runtime::ChatInputs in;
  in.messages = calls_wanted && format == runtime::ToolCallFormat::generic
                    ? with_generic_instruction(messages, tools, parallel, chat.renderer.caps().supports_tools)
                    : messages;
  in.tools = tools;
  in.kwargs = std::move(kwargs);
  runtime::RenderedChat rendered;
  try {
    rendered = chat.renderer.render(in);
  } catch (const Error& e) {
    throw HttpError(400, std::string("chat template: ") + e.what(), "messages");
  }

  JinjaPrompt out;
  out.prompt = std::move(rendered.prompt);
  out.output.format = format;
  runtime::ParseOptions& o = out.output.options;
  o.reasoning_format = reasoning;
  o.thinking_open = rendered.thinking_open;
  o.tools_offered = calls_wanted;
  o.parallel_tool_calls = parallel;
  if (calls_wanted) o.tools = json(tools);
  o.id_seed = fnv1a(out.prompt) ^ mix64(seed);
  if (calls_wanted && (choice == Choice::required || choice == Choice::named)) {
    runtime::ToolChoice tc;
    tc.kind = choice == Choice::named ? runtime::ToolChoice::Kind::named : runtime::ToolChoice::Kind::required;
    tc.name = named;
    runtime::ToolGrammarOptions go;
    // The calls come at once; a reasoning block the prompt opened is closed first.
    go.thinking_open = rendered.thinking_open;
    try {
      out.grammar = runtime::tool_call_grammar(format, tools, tc, parallel, go);
      runtime::cached_grammar(out.grammar);
    } catch (const Error& e) {
      throw runtime_error_400(e, "tools");
    }
  }
  return out;
}

void check_builtin_chat_fields(const json& body) {
  const auto present = [&](const char* f) {
    const auto it = body.find(f);
    return it != body.end() && !it->is_null() && !(it->is_array() && it->empty());
  };
  // tool_choice "auto" or "none" asks for nothing a built-in format lacks.
  const bool choice_needs_tools =
      present("tool_choice") && !(body["tool_choice"] == "auto" || body["tool_choice"] == "none");
  for (const char* f : {"tools", "functions", "tool_choice"})
    if (std::string_view(f) == "tool_choice" ? choice_needs_tools : present(f))
      throw HttpError(400,
                      std::string("'") + f +
                          "': tools require the model's Jinja chat template (this server renders chat with a "
                          "built-in format: start it without --no-jinja or --chat-template NAME, on a model whose "
                          "file has a template, or with --chat-template-file FILE)",
                      f);
  if (present("chat_template_kwargs") && !body["chat_template_kwargs"].is_object())
    bad("chat_template_kwargs", "must be an object", body["chat_template_kwargs"]);
  if (present("reasoning_format")) {
    const json& r = body["reasoning_format"];
    bool ok = r.is_string();
    if (ok) {
      try {
        runtime::parse_reasoning_format(r.get<std::string>());
      } catch (const Error&) {
        ok = false;
      }
    }
    if (!ok) bad("reasoning_format", "must be one of \"none\", \"deepseek\", \"auto\"", r);
  }
}

bool asks_continuation(const json& body) {
  const auto c = body.find("continue_final_message");
  return c != body.end() && ((c->is_boolean() && c->get<bool>()) ||
                             (c->is_string() && (*c == "content" || *c == "reasoning_content")));
}

bool asks_generation_prompt(const json& body) {
  const auto a = body.find("add_generation_prompt");
  return a == body.end() || !a->is_boolean() || a->get<bool>();
}

void check_continuation(const json& body) {
  const auto role_of = [](const json& m) {
    const auto r = m.is_object() ? m.find("role") : m.end();
    return m.is_object() && r != m.end() && r->is_string() ? r->get<std::string>() : std::string();
  };
  const auto msgs = body.find("messages");
  const bool ends_with_assistant = msgs != body.end() && msgs->is_array() && !msgs->empty() &&
                                   role_of(msgs->back()) == "assistant";
  bool continues = asks_continuation(body);
  bool add_generation_prompt = asks_generation_prompt(body);
  if (!continues && ends_with_assistant) {
    if (msgs->size() >= 2 && role_of((*msgs)[msgs->size() - 2]) == "assistant")
      throw HttpError(400, "Cannot have 2 or more assistant messages at the end of the list.", "messages");
    continues = true;
    add_generation_prompt = false;
  }
  if (continues && add_generation_prompt)
    throw HttpError(400, "Cannot set both add_generation_prompt and continue_final_message to true.",
                    "add_generation_prompt");
}

json caps_json(const runtime::TemplateCaps& c) {
  return {{"supports_string_content", c.supports_string_content},
          {"supports_typed_content", c.supports_typed_content},
          {"supports_tools", c.supports_tools},
          {"supports_tool_calls", c.supports_tool_calls},
          {"supports_parallel_tool_calls", c.supports_parallel_tool_calls},
          {"supports_system_role", c.supports_system_role},
          {"supports_object_arguments", c.requires_object_arguments}};
}

}  // namespace synapse::server

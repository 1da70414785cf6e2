#include "server/anthropic.hpp"

#include "server/request.hpp"

namespace synapse::server {

using nlohmann::json;
using nlohmann::ordered_json;
using namespace translation;

namespace {

// Text blocks [{type:"text", text}] -> chat text parts (Anthropic's blocks
// are OpenAI's parts; how parts join is the chat route's rule).
ordered_json text_parts(const ordered_json& blocks, const std::string& path, const char* what) {
  ordered_json parts = ordered_json::array();
  for (size_t k = 0; k < blocks.size(); ++k) {
    const std::string bp = at_index(path, k);
    const ordered_json& b = object_at(blocks[k], bp);
    const std::string type = string_field(b, "type", bp, true);
    if (type == "image" || type == "document")
      bad(at_key(bp, "type"), "'" + type + "' blocks are not supported: this server has no vision");
    if (type != "text") bad(at_key(bp, "type"), std::string(what) + " takes only text blocks, got '" + type + "'");
    parts.push_back({{"type", "text"}, {"text", string_field(b, "text", bp, true)}});
  }
  return parts;
}

// Text blocks run together into one text, as llama-server's
// convert_anthropic_to_oai joins a system prompt's and a tool_result's blocks
// (not parts, which a chat template would join by "\n").
std::string concatenated_text(const ordered_json& blocks, const std::string& path, const char* what) {
  std::string text;
  for (const ordered_json& p : text_parts(blocks, path, what)) text += p["text"].get<std::string>();
  return text;
}

// A tool_result's content (a string, text blocks, or absent) -> the tool
// message's content string.
std::string tool_result_text(const ordered_json& block, const std::string& path) {
  const ordered_json* c = field(block, "content");
  if (!c) return "";
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) bad(at_key(path, "content"), "must be a string or an array of text blocks" + got(*c));
  return concatenated_text(*c, at_key(path, "content"), "a tool_result");
}

// The blocks Anthropic defines that this translation cannot carry, beside
// image and document: server tools' calls and results, and uploads.
bool is_server_block(const std::string& type) {
  return type == "server_tool_use" || type == "web_search_tool_result" || type == "web_fetch_tool_result" ||
         type == "code_execution_tool_result" || type == "bash_code_execution_tool_result" ||
         type == "text_editor_code_execution_tool_result" || type == "mcp_tool_use" || type == "mcp_tool_result" ||
         type == "container_upload" || type == "search_result";
}

// messages[i] -> one or more chat messages appended to `out`.
void translate_message(const ordered_json& m, const std::string& path, ordered_json& out) {
  object_at(m, path);
  const std::string role = string_field(m, "role", path, true);
  if (role != "user" && role != "assistant")
    bad(at_key(path, "role"), "must be 'user' or 'assistant', got '" + role + "'");
  const ordered_json* content = field(m, "content");
  if (!content) bad(at_key(path, "content"), "is required");
  if (content->is_string()) {
    out.push_back({{"role", role}, {"content", *content}});
    return;
  }
  const std::string cpath = at_key(path, "content");
  if (!content->is_array()) bad(cpath, "must be a string or an array of content blocks" + got(*content));

  ordered_json parts = ordered_json::array();       // text of the message being built
  ordered_json tool_calls = ordered_json::array();  // assistant
  std::string reasoning;                            // assistant
  bool has_reasoning = false, emitted = false;
  auto flush_user_text = [&] {
    if (parts.empty()) return;
    out.push_back({{"role", "user"}, {"content", parts}});
    parts = ordered_json::array();
    emitted = true;
  };
  for (size_t k = 0; k < content->size(); ++k) {
    const std::string bp = at_index(cpath, k);
    const ordered_json& b = object_at((*content)[k], bp);
    const std::string type = string_field(b, "type", bp, true);
    const std::string tpath = at_key(bp, "type");
    auto only_in = [&](const char* r) {
      if (role != r) bad(tpath, "'" + type + "' blocks belong to " + r + " messages");
    };
    if (type == "text") {
      parts.push_back({{"type", "text"}, {"text", string_field(b, "text", bp, true)}});
    } else if (type == "thinking") {
      only_in("assistant");
      reasoning += string_field(b, "thinking", bp, true);
      has_reasoning = true;
    } else if (type == "redacted_thinking") {
      only_in("assistant");  // encrypted by Anthropic: nothing another model can read
    } else if (type == "tool_use") {
      only_in("assistant");
      const ordered_json* input = field(b, "input");
      if (!input) bad(at_key(bp, "input"), "is required");
      object_at(*input, at_key(bp, "input"));
      tool_calls.push_back({{"id", string_field(b, "id", bp, true)},
                            {"type", "function"},
                            {"function", {{"name", string_field(b, "name", bp, true)}, {"arguments", input->dump()}}}});
    } else if (type == "tool_result") {
      only_in("user");
      if (const ordered_json* e = field(b, "is_error"); e && !e->is_boolean())
        bad(at_key(bp, "is_error"), "must be a boolean" + got(*e));
      const std::string id = string_field(b, "tool_use_id", bp, true);
      const std::string text = tool_result_text(b, bp);
      flush_user_text();
      out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", text}});
      emitted = true;
    } else if (type == "image" || type == "document") {
      bad(tpath, "'" + type + "' blocks are not supported: this server has no vision");
    } else if (is_server_block(type)) {
      bad(tpath, "'" + type + "' blocks are not supported: this server runs no server tools");
    } else {
      bad(tpath, "unknown block type '" + type + "'");
    }
  }
  if (role == "user") {
    flush_user_text();
    if (!emitted) out.push_back({{"role", "user"}, {"content", ""}});  // content: []
    return;
  }
  ordered_json msg = {{"role", "assistant"}};
  msg["content"] = parts.empty() ? (tool_calls.empty() && !has_reasoning ? ordered_json("") : ordered_json()) : parts;
  if (has_reasoning) msg["reasoning_content"] = reasoning;
  if (!tool_calls.empty()) msg["tool_calls"] = tool_calls;
  out.push_back(std::move(msg));
}

ordered_json translate_tools(const ordered_json& tools) {
  array_at(tools, "tools");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string tp = at_index("tools", i);
    const ordered_json& t = object_at(tools[i], tp);
    // Client tools have no type or "custom"; the others (bash_20250124,
    // web_search_20250305, ...) run on Anthropic's side.
    const std::string type = string_field(t, "type", tp, false, "custom");
    if (type != "custom") bad(at_key(tp, "type"), "'" + type + "' is a server tool, which this server does not run");
    ordered_json fn = {{"name", string_field(t, "name", tp, true)}};
    if (field(t, "description")) fn["description"] = string_field(t, "description", tp, false);
    const ordered_json* schema = field(t, "input_schema");
    if (!schema) bad(at_key(tp, "input_schema"), "is required");
    fn["parameters"] = object_at(*schema, at_key(tp, "input_schema"));
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// tool_choice -> the chat body's tool_choice and parallel_tool_calls.
void translate_tool_choice(const ordered_json& tc, ordered_json& chat) {
  object_at(tc, "tool_choice");
  const std::string type = string_field(tc, "type", "tool_choice", true);
  if (type == "auto")
    chat["tool_choice"] = "auto";
  else if (type == "any")
    chat["tool_choice"] = "required";
  else if (type == "none")
    chat["tool_choice"] = "none";
  else if (type == "tool")
    chat["tool_choice"] = {{"type", "function"},
                           {"function", {{"name", string_field(tc, "name", "tool_choice", true)}}}};
  else
    bad("tool_choice.type", "must be one of 'auto', 'any', 'tool', 'none', got '" + type + "'");
  if (const ordered_json* d = field(tc, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) bad("tool_choice.disable_parallel_tool_use", "must be a boolean" + got(*d));
    chat["parallel_tool_calls"] = !d->get<bool>();
  }
}

ordered_json translate(const ordered_json& body, bool count_only) {
  ordered_json chat = ordered_json::object();
  if (const ordered_json* m = field(body, "model"); m && m->is_string()) chat["model"] = *m;

  ordered_json messages = ordered_json::array();
  if (const ordered_json* s = field(body, "system")) {
    if (s->is_string()) {
      if (!s->get_ref<const std::string&>().empty()) messages.push_back({{"role", "system"}, {"content", *s}});
    } else if (s->is_array()) {
      std::string text = concatenated_text(*s, "system", "system");
      if (!text.empty()) messages.push_back({{"role", "system"}, {"content", std::move(text)}});
    } else {
      bad("system", "must be a string or an array of text blocks" + got(*s));
    }
  }
  const ordered_json* ms = field(body, "messages");
  if (!ms) bad("messages", "is required");
  array_at(*ms, "messages");
  for (size_t i = 0; i < ms->size(); ++i) translate_message((*ms)[i], at_index("messages", i), messages);
  chat["messages"] = std::move(messages);

  if (!count_only) {
    const ordered_json* mt = field(body, "max_tokens");
    if (!mt) bad("max_tokens", "is required");
    chat["max_tokens"] = *mt;
  }
  if (const ordered_json* ss = field(body, "stop_sequences")) {
    array_at(*ss, "stop_sequences");
    for (size_t i = 0; i < ss->size(); ++i)
      if (!(*ss)[i].is_string()) bad(at_index("stop_sequences", i), "must be a string" + got((*ss)[i]));
    chat["stop"] = *ss;
  }
  for (const char* key : {"temperature", "top_p", "top_k"})
    if (const ordered_json* v = field(body, key)) chat[key] = *v;
  if (!count_only)
    if (const ordered_json* st = field(body, "stream")) {
      chat["stream"] = *st;
      if (st->is_boolean() && st->get<bool>()) chat["stream_options"] = {{"include_usage", true}};
    }
  if (const ordered_json* t = field(body, "tools")) chat["tools"] = translate_tools(*t);
  if (const ordered_json* tc = field(body, "tool_choice")) translate_tool_choice(*tc, chat);
  if (const ordered_json* th = field(body, "thinking")) {
    object_at(*th, "thinking");
    const std::string type = string_field(*th, "type", "thinking", true);
    if (type != "enabled" && type != "adaptive" && type != "disabled")
      bad("thinking.type", "must be 'enabled', 'adaptive' or 'disabled', got '" + type + "'");
    if (const ordered_json* b = field(*th, "budget_tokens"); b && !b->is_number_integer())
      bad("thinking.budget_tokens", "must be an integer" + got(*b));
    chat["chat_template_kwargs"] = {{"enable_thinking", type != "disabled"}};
  }
  return chat;
}

// Anthropic's stop_reason for the chat's finish_reason.
const char* stop_reason_of(const std::string& finish_reason, const std::string& stop_sequence) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls") return "tool_use";
  if (finish_reason == "content_filter") return "refusal";
  return stop_sequence.empty() ? "end_turn" : "stop_sequence";
}

json usage_of(const json& chat_usage) {
  const int64_t prompt = chat_usage.value("prompt_tokens", int64_t{0});
  int64_t cached = 0;
  if (const auto d = chat_usage.find("prompt_tokens_details"); d != chat_usage.end() && d->is_object())
    cached = d->value("cached_tokens", int64_t{0});
  return {{"input_tokens", prompt - cached},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", cached},
          {"output_tokens", chat_usage.value("completion_tokens", int64_t{0})}};
}

json tool_input(const std::string& arguments) {
  json input = json::parse(arguments, nullptr, false);
  return input.is_object() ? input : json::object();
}

std::string string_or_empty(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

ordered_json anthropic_to_chat(const ordered_json& body) { return translate(body, false); }

ordered_json anthropic_count_tokens_to_chat(const ordered_json& body) { return translate(body, true); }

json anthropic_from_chat(const json& chat_reply, const std::string& stop_sequence) {
  const json& choice = chat_reply.at("choices").at(0);
  const json& msg = choice.at("message");
  json content = json::array();
  if (const std::string r = string_or_empty(msg, "reasoning_content"); !r.empty())
    content.push_back({{"type", "thinking"}, {"thinking", r}, {"signature", ""}});
  const std::string text = string_or_empty(msg, "content");
  if (!text.empty()) content.push_back({{"type", "text"}, {"text", text}});
  if (const auto tc = msg.find("tool_calls"); tc != msg.end() && tc->is_array())
    for (const json& call : *tc) {
      const json& fn = call.at("function");
      content.push_back({{"type", "tool_use"},
                         {"id", call.at("id")},
                         {"name", fn.at("name")},
                         {"input", tool_input(string_or_empty(fn, "arguments"))}});
    }
  if (content.empty()) content.push_back({{"type", "text"}, {"text", ""}});
  const std::string finish = string_or_empty(choice, "finish_reason");
  return {{"id", "msg_" + id_suffix(chat_reply.at("id").get<std::string>())},
          {"type", "message"},
          {"role", "assistant"},
          {"model", chat_reply.value("model", "")},
          {"content", std::move(content)},
          {"stop_reason", stop_reason_of(finish, stop_sequence)},
          {"stop_sequence", stop_sequence.empty() || finish != "stop" ? json() : json(stop_sequence)},
          {"usage", usage_of(chat_reply.value("usage", json::object()))}};
}

std::string anthropic_field(const std::string& chat_field) {
  if (auto f = replace_prefix(chat_field, "stop", "stop_sequences")) return *f;
  if (replace_prefix(chat_field, "messages", "")) return "messages";
  if (replace_prefix(chat_field, "chat_template_kwargs", "")) return "thinking";
  if (auto f = flat_tool_field(chat_field)) {
    const size_t close = f->find(']');
    if (auto p = replace_prefix(f->substr(close + 2), "parameters", "input_schema"))
      return f->substr(0, close + 2) + *p;
    return *f;
  }
  return chat_field;
}

json anthropic_error_body(int status, const std::string& message) {
  const char* type = status == 400 || status == 408 || status == 431 ? "invalid_request_error"
                     : status == 401                                 ? "authentication_error"
                     : status == 403                                 ? "permission_error"
                     : status == 404                                 ? "not_found_error"
                     : status == 413                                 ? "request_too_large"
                     : status == 429                                 ? "rate_limit_error"
                     : status == 503 || status == 529                ? "overloaded_error"
                                                                     : "api_error";
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

// --- AnthropicStream ---------------------------------------------------------

namespace {

ApiEvent event(const char* name, json data) {
  data["type"] = name;
  return {name, std::move(data)};
}

}  // namespace

void AnthropicStream::start(const json& chunk, std::vector<ApiEvent>& out) {
  if (started_) return;
  started_ = true;
  id_ = "msg_" + id_suffix(chunk.value("id", ""));
  model_ = chunk.value("model", "");
  out.push_back(event("message_start", {{"message",
                                         {{"id", id_},
                                          {"type", "message"},
                                          {"role", "assistant"},
                                          {"model", model_},
                                          {"content", json::array()},
                                          {"stop_reason", nullptr},
                                          {"stop_sequence", nullptr},
                                          {"usage", usage_of(json::object())}}}}));
}

void AnthropicStream::open(Block kind, const json& content_block, std::vector<ApiEvent>& out) {
  close(out);
  current_ = kind;
  index_ = n_blocks_++;
  out.push_back(event("content_block_start", {{"index", index_}, {"content_block", content_block}}));
}

void AnthropicStream::close(std::vector<ApiEvent>& out) {
  if (current_ == Block::none) return;
  // A thinking block ends with its signature (Anthropic's streams always send
  // one; a local model has none to give).
  if (current_ == Block::thinking)
    out.push_back(
        event("content_block_delta", {{"index", index_}, {"delta", {{"type", "signature_delta"}, {"signature", ""}}}}));
  out.push_back(event("content_block_stop", {{"index", index_}}));
  current_ = Block::none;
  index_ = -1;
}

std::vector<ApiEvent> AnthropicStream::on_chunk(const json& chunk) {
  std::vector<ApiEvent> out;
  if (failed_) return out;
  if (const auto e = chunk.find("error"); e != chunk.end()) {
    failed_ = true;
    const std::string message = e->is_object() ? e->value("message", "generation failed") : "generation failed";
    out.push_back(event("error", anthropic_error_body(500, message)));
    return out;
  }
  start(chunk, out);
  if (const auto u = chunk.find("usage"); u != chunk.end() && u->is_object()) usage_ = *u;
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return out;
  const json& choice = (*choices)[0];
  if (const auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
    if (const std::string r = string_or_empty(*d, "reasoning_content"); !r.empty()) {
      if (current_ != Block::thinking)
        open(Block::thinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, out);
      out.push_back(
          event("content_block_delta", {{"index", index_}, {"delta", {{"type", "thinking_delta"}, {"thinking", r}}}}));
    }
    if (const std::string t = string_or_empty(*d, "content"); !t.empty()) {
      if (current_ != Block::text) open(Block::text, {{"type", "text"}, {"text", ""}}, out);
      out.push_back(
          event("content_block_delta", {{"index", index_}, {"delta", {{"type", "text_delta"}, {"text", t}}}}));
    }
    if (const auto tcs = d->find("tool_calls"); tcs != d->end() && tcs->is_array())
      for (const json& tc : *tcs) {
        const int64_t k = tc.value("index", int64_t{0});
        const json fn = tc.value("function", json::object());
        if (!tool_block_.count(k)) {
          open(Block::tool_use,
               {{"type", "tool_use"},
                {"id", tc.value("id", "")},
                {"name", fn.value("name", "")},
                {"input", json::object()}},
               out);
          tool_block_[k] = index_;
        }
        if (const std::string a = string_or_empty(fn, "arguments"); !a.empty())
          out.push_back(event("content_block_delta", {{"index", tool_block_[k]},
                                                      {"delta", {{"type", "input_json_delta"}, {"partial_json", a}}}}));
      }
  }
  if (const auto f = choice.find("finish_reason"); f != choice.end() && f->is_string()) finish_reason_ = *f;
  return out;
}

std::vector<ApiEvent> AnthropicStream::finish(const std::string& stop_sequence) {
  std::vector<ApiEvent> out;
  if (failed_) return out;
  start(json::object(), out);
  if (n_blocks_ == 0) open(Block::text, {{"type", "text"}, {"text", ""}}, out);  // as anthropic_from_chat's reply
  close(out);
  out.push_back(
      event("message_delta",
            {{"delta",
              {{"stop_reason", stop_reason_of(finish_reason_, stop_sequence)},
               {"stop_sequence", stop_sequence.empty() || finish_reason_ != "stop" ? json() : json(stop_sequence)}}},
             {"usage", usage_of(usage_.is_object() ? usage_ : json::object())}}));
  out.push_back(event("message_stop", json::object()));
  return out;
}

}  // namespace synapse::server

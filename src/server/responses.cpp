#include "server/responses.hpp"

#include "server/request.hpp"

namespace synapse::server {

using nlohmann::json;
using nlohmann::ordered_json;
using namespace translation;

namespace {

[[noreturn]] void no_vision(const std::string& path, const std::string& type) {
  bad(path, "'" + type + "' parts are not supported: this server has no vision or audio");
}

// A message's content parts -> chat text parts. input_text and output_text
// are text in any role (a client replays output as input); refusal only in
// the assistant's.
ordered_json text_parts(const ordered_json& parts, const std::string& path, const std::string& role) {
  ordered_json out = ordered_json::array();
  for (size_t k = 0; k < parts.size(); ++k) {
    const std::string pp = at_index(path, k);
    const ordered_json& p = object_at(parts[k], pp);
    const std::string type = string_field(p, "type", pp, true);
    if (type == "input_text" || type == "output_text") {
      out.push_back({{"type", "text"}, {"text", string_field(p, "text", pp, true)}});
    } else if (type == "refusal" && role == "assistant") {
      out.push_back({{"type", "text"}, {"text", string_field(p, "refusal", pp, true)}});
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      no_vision(at_key(pp, "type"), type);
    } else {
      bad(at_key(pp, "type"), "unknown content part type '" + type + "' (input_text, output_text are text)");
    }
  }
  return out;
}

// The text of reasoning_text (or, without them, summary_text) parts.
std::string reasoning_text(const ordered_json& item, const std::string& path) {
  for (const char* key : {"content", "summary"}) {
    const ordered_json* parts = field(item, key);
    if (!parts) continue;
    const std::string kp = at_key(path, key);
    array_at(*parts, kp);
    std::string text;
    for (size_t k = 0; k < parts->size(); ++k) {
      const std::string pp = at_index(kp, k);
      text += string_field(object_at((*parts)[k], pp), "text", pp, true);
    }
    if (!text.empty()) return text;
  }
  return "";
}

// The last chat message when it is the assistant's, else nullptr.
ordered_json* last_assistant(ordered_json& messages) {
  if (messages.empty() || messages.back().value("role", "") != "assistant") return nullptr;
  return &messages.back();
}

void translate_item(const ordered_json& item, const std::string& path, ordered_json& messages) {
  object_at(item, path);
  const std::string type = string_field(item, "type", path, false, "message");
  if (type == "message") {
    const std::string role = string_field(item, "role", path, true);
    if (role != "user" && role != "system" && role != "developer" && role != "assistant")
      bad(at_key(path, "role"), "must be one of 'user', 'system', 'developer', 'assistant', got '" + role + "'");
    const ordered_json* c = field(item, "content");
    if (!c) bad(at_key(path, "content"), "is required");
    ordered_json content;
    if (c->is_string())
      content = *c;
    else if (c->is_array())
      content = text_parts(*c, at_key(path, "content"), role);
    else
      bad(at_key(path, "content"), "must be a string or an array of content parts" + got(*c));
    // The text of a turn that a reasoning item opened.
    if (ordered_json* last = last_assistant(messages);
        role == "assistant" && last && (*last)["content"].is_null() && !last->contains("tool_calls")) {
      (*last)["content"] = std::move(content);
      return;
    }
    messages.push_back({{"role", role}, {"content", std::move(content)}});
  } else if (type == "function_call") {
    ordered_json call = {{"id", string_field(item, "call_id", path, true)},
                         {"type", "function"},
                         {"function",
                          {{"name", string_field(item, "name", path, true)},
                           {"arguments", string_field(item, "arguments", path, true)}}}};
    if (ordered_json* last = last_assistant(messages)) {
      if (!last->contains("tool_calls")) (*last)["tool_calls"] = ordered_json::array();
      (*last)["tool_calls"].push_back(std::move(call));
    } else {
      messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", ordered_json::array({call})}});
    }
  } else if (type == "function_call_output") {
    const std::string id = string_field(item, "call_id", path, true);
    const ordered_json* o = field(item, "output");
    if (!o) bad(at_key(path, "output"), "is required");
    std::string text;
    if (o->is_string()) {
      text = o->get<std::string>();
    } else if (o->is_array()) {
      for (const ordered_json& p : text_parts(*o, at_key(path, "output"), "tool")) text += p["text"].get<std::string>();
    } else {
      bad(at_key(path, "output"), "must be a string or an array of input_text parts" + got(*o));
    }
    messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", text}});
  } else if (type == "reasoning") {
    const std::string text = reasoning_text(item, path);
    if (!text.empty())  // encrypted_content alone says nothing to another model
      messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"reasoning_content", text}});
  } else if (type == "item_reference") {
    bad(at_key(path, "type"),
        "'item_reference' needs stored items; this server is stateless: send the items themselves");
  } else {
    bad(at_key(path, "type"),
        "item type '" + type + "' is not supported (message, function_call, function_call_output, reasoning are)");
  }
}

ordered_json translate_tools(const ordered_json& tools) {
  array_at(tools, "tools");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string tp = at_index("tools", i);
    const ordered_json& t = object_at(tools[i], tp);
    const std::string type = string_field(t, "type", tp, true);
    if (type != "function")
      bad(at_key(tp, "type"), "'" + type + "' tools are not supported: this server runs function tools only");
    ordered_json fn = {{"name", string_field(t, "name", tp, true)}};
    if (field(t, "description")) fn["description"] = string_field(t, "description", tp, false);
    if (const ordered_json* p = field(t, "parameters")) fn["parameters"] = object_at(*p, at_key(tp, "parameters"));
    if (const ordered_json* s = field(t, "strict")) {
      if (!s->is_boolean()) bad(at_key(tp, "strict"), "must be a boolean" + got(*s));
      fn["strict"] = *s;
    }
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

ordered_json translate_tool_choice(const ordered_json& tc) {
  if (tc.is_string()) {
    const std::string s = tc.get<std::string>();
    if (s != "auto" && s != "none" && s != "required")
      bad("tool_choice",
          "must be 'auto', 'none', 'required' or {\"type\": \"function\", \"name\": ...}, got '" + s + "'");
    return tc;
  }
  object_at(tc, "tool_choice");
  const std::string type = string_field(tc, "type", "tool_choice", true);
  if (type != "function") bad("tool_choice.type", "only 'function' is supported, got '" + type + "'");
  return {{"type", "function"}, {"function", {{"name", string_field(tc, "name", "tool_choice", true)}}}};
}

// text.format -> response_format (absent for plain text).
void translate_text_format(const ordered_json& text, ordered_json& chat) {
  object_at(text, "text");
  const ordered_json* f = field(text, "format");
  if (!f) return;
  object_at(*f, "text.format");
  const std::string type = string_field(*f, "type", "text.format", true);
  if (type == "text") return;
  if (type == "json_object") {
    chat["response_format"] = {{"type", "json_object"}};
  } else if (type == "json_schema") {
    ordered_json js = ordered_json::object();
    if (field(*f, "name")) js["name"] = string_field(*f, "name", "text.format", false);
    if (field(*f, "description")) js["description"] = string_field(*f, "description", "text.format", false);
    const ordered_json* schema = field(*f, "schema");
    if (!schema) bad("text.format.schema", "is required");
    js["schema"] = *schema;  // checked by the chat route
    if (const ordered_json* s = field(*f, "strict")) js["strict"] = *s;
    chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
  } else {
    bad("text.format.type", "must be 'text', 'json_object' or 'json_schema', got '" + type + "'");
  }
}

json usage_of(const json& chat_usage) {
  const int64_t prompt = chat_usage.value("prompt_tokens", int64_t{0});
  const int64_t completion = chat_usage.value("completion_tokens", int64_t{0});
  int64_t cached = 0;
  if (const auto d = chat_usage.find("prompt_tokens_details"); d != chat_usage.end() && d->is_object())
    cached = d->value("cached_tokens", int64_t{0});
  return {{"input_tokens", prompt},
          {"input_tokens_details", {{"cached_tokens", cached}}},
          {"output_tokens", completion},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", prompt + completion}};
}

// The n-th item of a kind gets the reply's id, later ones a count after it.
std::string item_id(const char* prefix, const std::string& suffix, size_t n) {
  std::string id = prefix;
  id += suffix;
  if (n > 0) {
    id += '_';
    id += std::to_string(n);
  }
  return id;
}

json reasoning_item(const std::string& id, const std::string& text) {
  return {{"id", id},
          {"type", "reasoning"},
          {"summary", json::array()},
          {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

json output_text(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
}

json message_item(const std::string& id, const std::string& text, const char* status) {
  return {{"id", id},
          {"type", "message"},
          {"status", status},
          {"role", "assistant"},
          {"content", json::array({output_text(text)})}};
}

json function_call_item(const std::string& id, const std::string& call_id, const std::string& name,
                        const std::string& arguments, const char* status) {
  return {{"id", id},     {"type", "function_call"}, {"status", status}, {"call_id", call_id},
          {"name", name}, {"arguments", arguments}};
}

json echo(const ordered_json& request, const char* key, json def) {
  const ordered_json* v = field(request, key);
  return v ? json(*v) : def;
}

// The Response object around `output`, with the request's settings echoed.
json response_object(const std::string& suffix, int64_t created_at, const std::string& model, const char* status,
                     json output, json usage, const ordered_json& request) {
  const std::string st = status;
  const ordered_json* reasoning = field(request, "reasoning");
  const ordered_json* text = field(request, "text");
  json format = {{"type", "text"}};
  if (text && text->is_object())
    if (const ordered_json* f = field(*text, "format")) format = json(*f);
  return {{"id", "resp_" + suffix},
          {"object", "response"},
          {"created_at", created_at},
          {"status", status},
          {"error", nullptr},
          {"incomplete_details", st == "incomplete" ? json{{"reason", "max_output_tokens"}} : json()},
          {"instructions", echo(request, "instructions", nullptr)},
          {"max_output_tokens", echo(request, "max_output_tokens", nullptr)},
          {"metadata", echo(request, "metadata", json::object())},
          {"model", model},
          {"output", std::move(output)},
          {"parallel_tool_calls", echo(request, "parallel_tool_calls", true)},
          {"previous_response_id", nullptr},
          {"reasoning",
           {{"effort", reasoning && reasoning->is_object() ? echo(*reasoning, "effort", nullptr) : json()},
            {"summary", reasoning && reasoning->is_object() ? echo(*reasoning, "summary", nullptr) : json()}}},
          {"store", false},
          {"temperature", echo(request, "temperature", nullptr)},
          {"text", {{"format", std::move(format)}}},
          {"tool_choice", echo(request, "tool_choice", "auto")},
          {"tools", echo(request, "tools", json::array())},
          {"top_p", echo(request, "top_p", nullptr)},
          {"truncation", "disabled"},
          {"usage", std::move(usage)}};
}

std::string string_or_empty(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

ordered_json responses_to_chat(const ordered_json& body) {
  for (const char* key : {"previous_response_id", "conversation"})
    if (field(body, key))
      bad(key,
          "this server is stateless and keeps no responses or conversations: send the whole conversation in 'input'");
  if (const ordered_json* b = field(body, "background"); b && !(b->is_boolean() && !b->get<bool>()))
    bad("background", "is not supported: this server answers in the request that asks");

  ordered_json chat = ordered_json::object();
  if (const ordered_json* m = field(body, "model"); m && m->is_string()) chat["model"] = *m;
  ordered_json messages = ordered_json::array();
  if (field(body, "instructions"))
    messages.push_back({{"role", "system"}, {"content", string_field(body, "instructions", "", false)}});
  const ordered_json* input = field(body, "input");
  if (!input) bad("input", "is required");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    for (size_t i = 0; i < input->size(); ++i) translate_item((*input)[i], at_index("input", i), messages);
  } else {
    bad("input", "must be a string or an array of input items" + got(*input));
  }
  chat["messages"] = std::move(messages);

  if (const ordered_json* v = field(body, "max_output_tokens")) chat["max_tokens"] = *v;
  for (const char* key : {"temperature", "top_p"})
    if (const ordered_json* v = field(body, key)) chat[key] = *v;
  if (const ordered_json* st = field(body, "stream")) {
    chat["stream"] = *st;
    if (st->is_boolean() && st->get<bool>()) chat["stream_options"] = {{"include_usage", true}};
  }
  if (const ordered_json* t = field(body, "tools")) chat["tools"] = translate_tools(*t);
  if (const ordered_json* tc = field(body, "tool_choice")) chat["tool_choice"] = translate_tool_choice(*tc);
  if (const ordered_json* p = field(body, "parallel_tool_calls")) chat["parallel_tool_calls"] = *p;
  if (const ordered_json* t = field(body, "text")) translate_text_format(*t, chat);
  if (const ordered_json* r = field(body, "reasoning")) {
    object_at(*r, "reasoning");
    if (field(*r, "effort"))
      chat["chat_template_kwargs"] = {{"reasoning_effort", string_field(*r, "effort", "reasoning", false)}};
  }
  return chat;
}

std::string responses_field(const std::string& chat_field) {
  if (auto f = replace_prefix(chat_field, "max_tokens", "max_output_tokens")) return *f;
  if (auto f = replace_prefix(chat_field, "response_format.json_schema", "text.format")) return *f;
  if (auto f = replace_prefix(chat_field, "response_format", "text.format")) return *f;
  if (replace_prefix(chat_field, "messages", "")) return "input";
  if (replace_prefix(chat_field, "chat_template_kwargs", "")) return "reasoning";
  if (auto f = flat_tool_field(chat_field)) return *f;
  return chat_field;
}

json responses_from_chat(const json& chat_reply, const ordered_json& request) {
  const std::string suffix = id_suffix(chat_reply.at("id").get<std::string>());
  const json& choice = chat_reply.at("choices").at(0);
  const json& msg = choice.at("message");
  const bool cut = string_or_empty(choice, "finish_reason") == "length";
  json output = json::array();
  if (const std::string r = string_or_empty(msg, "reasoning_content"); !r.empty())
    output.push_back(reasoning_item(item_id("rs_", suffix, 0), r));
  const std::string text = string_or_empty(msg, "content");
  if (!text.empty()) output.push_back(message_item(item_id("msg_", suffix, 0), text, "completed"));
  if (const auto tc = msg.find("tool_calls"); tc != msg.end() && tc->is_array())
    for (size_t i = 0; i < tc->size(); ++i) {
      const json& fn = (*tc)[i].at("function");
      output.push_back(function_call_item("fc_" + suffix + "_" + std::to_string(i), (*tc)[i].at("id"), fn.at("name"),
                                          string_or_empty(fn, "arguments"), "completed"));
    }
  if (output.empty()) output.push_back(message_item(item_id("msg_", suffix, 0), "", "completed"));
  // The item the limit cut is the last one.
  if (cut && output.back().contains("status")) output.back()["status"] = "incomplete";
  return response_object(suffix, chat_reply.value("created", int64_t{0}), chat_reply.value("model", ""),
                         cut ? "incomplete" : "completed", std::move(output),
                         usage_of(chat_reply.value("usage", json::object())), request);
}

// --- ResponsesStream ---------------------------------------------------------

void ResponsesStream::emit(std::vector<ApiEvent>& out, const char* name, json data) {
  data["type"] = name;
  data["sequence_number"] = seq_++;
  out.push_back({name, std::move(data)});
}

json ResponsesStream::response(const char* status) const {
  const std::string st = status;
  const bool done = st == "completed" || st == "incomplete";
  return response_object(suffix_, created_, model_, status, output_,
                         done ? usage_of(usage_.is_object() ? usage_ : json::object()) : json(), request_);
}

void ResponsesStream::start(const json& chunk, std::vector<ApiEvent>& out) {
  if (started_) return;
  started_ = true;
  suffix_ = id_suffix(chunk.value("id", ""));
  created_ = chunk.value("created", int64_t{0});
  model_ = chunk.value("model", "");
  emit(out, "response.created", {{"response", response("in_progress")}});
  emit(out, "response.in_progress", {{"response", response("in_progress")}});
}

void ResponsesStream::open(Item kind, json item, std::vector<ApiEvent>& out) {
  close(out);
  current_ = kind;
  const size_t index = output_.size();
  emit(out, "response.output_item.added", {{"output_index", index}, {"item", item}});
  if (kind == Item::reasoning)
    emit(out, "response.content_part.added",
         {{"item_id", item["id"]},
          {"output_index", index},
          {"content_index", 0},
          {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
  else if (kind == Item::message)
    emit(out, "response.content_part.added",
         {{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}, {"part", output_text("")}});
  item_ = std::move(item);
}

void ResponsesStream::close(std::vector<ApiEvent>& out) {
  if (current_ == Item::none) return;
  const size_t index = output_.size();
  const json id = item_["id"];
  // Only the item open when max_output_tokens cut the reply is incomplete.
  const char* status = finish_reason_ == "length" ? "incomplete" : "completed";
  json done;
  if (current_ == Item::reasoning) {
    const std::string text = item_["text"];
    emit(out, "response.reasoning_text.done",
         {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", text}});
    emit(out, "response.content_part.done",
         {{"item_id", id},
          {"output_index", index},
          {"content_index", 0},
          {"part", {{"type", "reasoning_text"}, {"text", text}}}});
    done = reasoning_item(id, text);
  } else if (current_ == Item::message) {
    const std::string text = item_["text"];
    emit(out, "response.output_text.done",
         {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"text", text}, {"logprobs", json::array()}});
    emit(out, "response.content_part.done",
         {{"item_id", id}, {"output_index", index}, {"content_index", 0}, {"part", output_text(text)}});
    done = message_item(id, text, status);
  } else {
    const std::string arguments = item_["arguments"];
    emit(out, "response.function_call_arguments.done",
         {{"item_id", id}, {"output_index", index}, {"name", item_["name"]}, {"arguments", arguments}});
    done = function_call_item(id, item_["call_id"], item_["name"], arguments, status);
  }
  emit(out, "response.output_item.done", {{"output_index", index}, {"item", done}});
  output_.push_back(std::move(done));
  current_ = Item::none;
  item_ = json();
}

std::vector<ApiEvent> ResponsesStream::on_chunk(const json& chunk) {
  std::vector<ApiEvent> out;
  if (failed_) return out;
  if (const auto e = chunk.find("error"); e != chunk.end()) {
    start(json::object(), out);
    failed_ = true;
    json r = response("failed");
    r["error"] = {{"code", "server_error"},
                  {"message", e->is_object() ? e->value("message", "generation failed") : "generation failed"}};
    emit(out, "response.failed", {{"response", std::move(r)}});
    return out;
  }
  start(chunk, out);
  if (const auto u = chunk.find("usage"); u != chunk.end() && u->is_object()) usage_ = *u;
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return out;
  const json& choice = (*choices)[0];
  // The k-th item of a kind so far (its id's count).
  auto count = [&](const char* type) {
    size_t n = 0;
    for (const json& it : output_) n += it["type"] == type;
    return n;
  };
  if (const auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
    if (const std::string r = string_or_empty(*d, "reasoning_content"); !r.empty()) {
      if (current_ != Item::reasoning)
        open(Item::reasoning,
             {{"id", item_id("rs_", suffix_, count("reasoning"))},
              {"type", "reasoning"},
              {"summary", json::array()},
              {"content", json::array()}},
             out);
      item_["text"] = item_.value("text", "") + r;
      emit(out, "response.reasoning_text.delta",
           {{"item_id", item_["id"]}, {"output_index", output_.size()}, {"content_index", 0}, {"delta", r}});
    }
    if (const std::string t = string_or_empty(*d, "content"); !t.empty()) {
      if (current_ != Item::message)
        open(Item::message,
             {{"id", item_id("msg_", suffix_, count("message"))},
              {"type", "message"},
              {"status", "in_progress"},
              {"role", "assistant"},
              {"content", json::array()}},
             out);
      item_["text"] = item_.value("text", "") + t;
      emit(out, "response.output_text.delta",
           {{"item_id", item_["id"]},
            {"output_index", output_.size()},
            {"content_index", 0},
            {"delta", t},
            {"logprobs", json::array()}});
    }
    if (const auto tcs = d->find("tool_calls"); tcs != d->end() && tcs->is_array())
      for (const json& tc : *tcs) {
        const int64_t k = tc.value("index", int64_t{0});
        const json fn = tc.value("function", json::object());
        if (!call_output_.count(k)) {
          open(Item::function_call,
               {{"id", "fc_" + suffix_ + "_" + std::to_string(k)},
                {"type", "function_call"},
                {"status", "in_progress"},
                {"call_id", tc.value("id", "")},
                {"name", fn.value("name", "")},
                {"arguments", ""}},
               out);
          call_output_[k] = output_.size();
        }
        // A call's fragments come before the next call starts (the chat
        // route's order); a late one for a closed call has no item to extend.
        const std::string a = string_or_empty(fn, "arguments");
        if (a.empty() || current_ != Item::function_call || call_output_[k] != output_.size()) continue;
        item_["arguments"] = item_["arguments"].get<std::string>() + a;
        emit(out, "response.function_call_arguments.delta",
             {{"item_id", item_["id"]}, {"output_index", output_.size()}, {"delta", a}});
      }
  }
  if (const auto f = choice.find("finish_reason"); f != choice.end() && f->is_string()) finish_reason_ = *f;
  return out;
}

std::vector<ApiEvent> ResponsesStream::finish() {
  std::vector<ApiEvent> out;
  if (failed_) return out;
  start(json::object(), out);
  if (output_.empty() && current_ == Item::none)  // as responses_from_chat's reply
    open(Item::message,
         {{"id", item_id("msg_", suffix_, 0)},
          {"type", "message"},
          {"status", "in_progress"},
          {"role", "assistant"},
          {"content", json::array()}},
         out);
  close(out);
  const bool cut = finish_reason_ == "length";
  emit(out, cut ? "response.incomplete" : "response.completed",
       {{"response", response(cut ? "incomplete" : "completed")}});
  return out;
}

}  // namespace synapse::server

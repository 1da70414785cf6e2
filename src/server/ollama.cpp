#include "server/ollama.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "server/response.hpp"
#include "server/translation.hpp"

namespace synapse::server {

using nlohmann::json;
using nlohmann::ordered_json;
using namespace translation;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool non_empty(const ordered_json* v) {
  return v && !((v->is_array() || v->is_object() || v->is_string()) && v->empty());
}

// A number Ollama reads into an int: Go's json decodes it as a float64 and
// truncates it (int64(t)).
int64_t integer_option(const ordered_json& v, const std::string& path) {
  if (!v.is_number()) bad(path, "must be a number" + got(v));
  if (v.is_number_integer()) return v.get<int64_t>();
  const double d = v.get<double>();
  if (!std::isfinite(d) || std::fabs(d) > 9.2e18) bad(path, "must be a finite integer" + got(v));
  return static_cast<int64_t>(d);
}

// Ollama's keep_alive: a number of seconds or a Go duration ("5m", "0s");
// whether it says zero (an unload request, with nothing to generate).
bool zero_keep_alive(const ordered_json* v) {
  if (!v) return false;
  if (v->is_number()) return v->get<double>() == 0.0;
  if (!v->is_string()) return false;
  const std::string& s = v->get_ref<const std::string&>();
  if (s.empty()) return false;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return false;
  for (const char* p = end; *p; ++p)
    if (!std::isalpha(static_cast<unsigned char>(*p))) return false;  // "0s", "0m", "0h", "0ms"
  return d == 0.0;
}

// The sampling options that keep their names on the chat route; `integer`:
// Ollama declares them int (a float is truncated, as Go does).
struct SamplingOption {
  const char* name;
  bool integer;
};
constexpr SamplingOption kSampling[] = {
    {"temperature", false},      {"top_p", false},    {"min_p", false},         {"typical_p", false},
    {"repeat_penalty", false},   {"presence_penalty", false}, {"frequency_penalty", false},
    {"top_k", true},             {"repeat_last_n", true},     {"seed", true},
};

// options -> the route body's sampling and length fields.
void translate_options(const ordered_json& body, int64_t n_ctx, ordered_json& out) {
  const ordered_json* opts = field(body, "options");
  if (!opts) return;
  object_at(*opts, "options");
  for (const SamplingOption& o : kSampling) {
    const ordered_json* v = field(*opts, o.name);
    if (!v) continue;
    const std::string path = at_key("options", o.name);
    if (o.integer) {
      out[o.name] = integer_option(*v, path);
    } else {
      if (!v->is_number()) bad(path, "must be a number" + got(*v));
      out[o.name] = *v;
    }
  }
  if (const ordered_json* v = field(*opts, "num_predict")) {
    // Ollama: <= 0 generates until the model stops (-1 "infinite", -2 "fill
    // the context"); above the context it is the context, which ends a reply anyway.
    const int64_t n = integer_option(*v, "options.num_predict");
    if (n > 0) out["max_tokens"] = std::min<int64_t>(n, std::max<int64_t>(n_ctx, 1));
  }
  if (const ordered_json* v = field(*opts, "stop")) {
    if (v->is_string()) {
      out["stop"] = ordered_json::array({*v});
    } else {
      array_at(*v, "options.stop");
      for (size_t i = 0; i < v->size(); ++i)
        if (!(*v)[i].is_string()) bad(at_index("options.stop", i), "must be a string" + got((*v)[i]));
      out["stop"] = *v;
    }
  }
  // num_ctx sizes Ollama's runner at load; here the server's -c is the
  // context of every request, so it is checked and ignored (a prompt that
  // does not fit -c is refused by the chat route, naming n_ctx and -c).
  if (const ordered_json* v = field(*opts, "num_ctx"))
    if (integer_option(*v, "options.num_ctx") <= 0) bad("options.num_ctx", "must be a positive integer" + got(*v));
  if (const ordered_json* v = field(*opts, "mirostat"))
    if (integer_option(*v, "options.mirostat") != 0)
      bad("options.mirostat", "is not supported (only 0: the sampler has no Mirostat)" + got(*v));
}

// format -> response_format.
void translate_format(const ordered_json& body, ordered_json& out) {
  const ordered_json* f = field(body, "format");
  if (!f) return;
  if (f->is_string()) {
    const std::string& s = f->get_ref<const std::string&>();
    if (s.empty()) return;
    if (s != "json") bad("format", "must be \"json\" or a JSON Schema object" + got(*f));
    out["response_format"] = {{"type", "json_object"}};
  } else if (f->is_object()) {
    out["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", *f}}}};
  } else {
    bad("format", "must be \"json\" or a JSON Schema object" + got(*f));
  }
}

// think -> the template's enable_thinking (and reasoning_effort for a level).
void translate_think(const ordered_json& body, ordered_json& out) {
  const ordered_json* t = field(body, "think");
  if (!t) return;
  if (t->is_boolean()) {
    out["chat_template_kwargs"] = {{"enable_thinking", t->get<bool>()}};
    return;
  }
  const std::string level = t->is_string() ? t->get<std::string>() : "";
  if (level != "low" && level != "medium" && level != "high" && level != "max")
    bad("think", "must be a boolean or one of \"low\", \"medium\", \"high\", \"max\"" + got(*t));
  out["chat_template_kwargs"] = {{"enable_thinking", true}};
  out["reasoning_effort"] = level == "max" ? "high" : level;
}

// stream (default true), logprobs and top_logprobs; `completions`: the
// completions route, whose logprobs is the number of alternatives.
bool translate_common(const ordered_json& body, bool completions, ordered_json& out) {
  bool stream = true;
  if (const ordered_json* s = field(body, "stream")) {
    if (!s->is_boolean()) bad("stream", "must be a boolean" + got(*s));
    stream = s->get<bool>();
  }
  out["stream"] = stream;
  bool logprobs = false;
  if (const ordered_json* l = field(body, "logprobs")) {
    if (!l->is_boolean()) bad("logprobs", "must be a boolean" + got(*l));
    logprobs = l->get<bool>();
  }
  int64_t top = 0;
  if (const ordered_json* t = field(body, "top_logprobs")) {
    if (!t->is_number_integer() || t->get<int64_t>() < 0 || t->get<int64_t>() > 20)
      bad("top_logprobs", "must be an integer between 0 and 20" + got(*t));
    top = t->get<int64_t>();
  }
  if (logprobs && completions) {
    out["logprobs"] = top;
  } else if (logprobs) {
    out["logprobs"] = true;
    if (top > 0) out["top_logprobs"] = top;
  }
  return stream;
}

// A request's `images` (of a message or of /api/generate): refused unless empty.
void no_images(const ordered_json& j, const std::string& path) {
  if (non_empty(field(j, "images")))
    bad(at_key(path, "images"), "images are not supported: this server has no vision");
}

// An unanswered call of the last assistant turn.
struct PendingCall {
  std::string id, name;
};

// messages[i].tool_calls -> chat tool_calls; `pending` becomes this turn's calls.
ordered_json translate_calls(const ordered_json& calls, const std::string& path, size_t msg_index,
                             std::vector<PendingCall>& pending) {
  array_at(calls, path);
  ordered_json out = ordered_json::array();
  pending.clear();
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string cp = at_index(path, j);
    const ordered_json& c = object_at(calls[j], cp);
    const ordered_json* fn = field(c, "function");
    if (!fn) bad(at_key(cp, "function"), "is required");
    object_at(*fn, at_key(cp, "function"));
    const std::string fp = at_key(cp, "function");
    const std::string name = string_field(*fn, "name", fp, true);
    ordered_json args = ordered_json::object();
    if (const ordered_json* a = field(*fn, "arguments")) {
      if (!a->is_object() && !a->is_string()) bad(at_key(fp, "arguments"), "must be an object" + got(*a));
      args = *a;
    }
    std::string id = string_field(c, "id", cp, false);
    if (id.empty()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "c%04zu%04zu", msg_index % 10000, j % 10000);
      id = buf;
    }
    pending.push_back({id, name});
    out.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}});
  }
  return out;
}

// The id a tool message answers: its tool_call_id, else the earliest
// unanswered call named tool_name (any, without a name), else tool_name.
std::string answered_id(const ordered_json& m, const std::string& path, std::vector<PendingCall>& pending) {
  const std::string id = string_field(m, "tool_call_id", path, false);
  const std::string name = string_field(m, "tool_name", path, false);
  auto take = [&](auto pred) -> std::optional<std::string> {
    const auto it = std::find_if(pending.begin(), pending.end(), pred);
    if (it == pending.end()) return std::nullopt;
    std::string found = it->id;
    pending.erase(it);
    return found;
  };
  if (!id.empty()) {
    (void)take([&](const PendingCall& p) { return p.id == id; });
    return id;
  }
  if (auto found = take([&](const PendingCall& p) { return name.empty() || p.name == name; })) return *found;
  return name;
}

ordered_json translate_messages(const ordered_json& ms) {
  array_at(ms, "messages");
  ordered_json out = ordered_json::array();
  std::vector<PendingCall> pending;
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string path = at_index("messages", i);
    const ordered_json& m = object_at(ms[i], path);
    const std::string role = lower(string_field(m, "role", path, true));  // Ollama lower-cases roles
    const std::string content = string_field(m, "content", path, false);
    no_images(m, path);
    if (role == "system" || role == "user") {
      out.push_back({{"role", role}, {"content", content}});
    } else if (role == "assistant") {
      ordered_json msg = {{"role", "assistant"}, {"content", content}};
      if (const std::string thinking = string_field(m, "thinking", path, false); !thinking.empty())
        msg["reasoning_content"] = thinking;
      pending.clear();
      if (const ordered_json* tc = field(m, "tool_calls"); non_empty(tc))
        msg["tool_calls"] = translate_calls(*tc, at_key(path, "tool_calls"), i, pending);
      out.push_back(std::move(msg));
    } else if (role == "tool") {
      out.push_back({{"role", "tool"}, {"tool_call_id", answered_id(m, path, pending)}, {"content", content}});
    } else {
      bad(at_key(path, "role"), "must be one of 'system', 'user', 'assistant', 'tool', got '" + role + "'");
    }
  }
  return out;
}

ordered_json translate_tools(const ordered_json& tools) {
  array_at(tools, "tools");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& t = object_at(tools[i], at_index("tools", i));
    if (t.contains("type")) {
      out.push_back(t);
      continue;
    }
    ordered_json typed = {{"type", "function"}};  // Ollama's clients may leave it out
    for (const auto& [k, v] : t.items()) typed[k] = v;
    out.push_back(std::move(typed));
  }
  return out;
}

std::string string_or_empty(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Chat tool_calls (arguments as JSON text) -> Ollama's (arguments an object).
json ollama_calls(const json& calls) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const json& fn = c.at("function");
    json args = json::parse(string_or_empty(fn, "arguments"), nullptr, false);
    if (!args.is_object()) args = json::object();
    json call = {{"function", {{"index", i}, {"name", fn.value("name", "")}, {"arguments", std::move(args)}}}};
    if (const std::string id = string_or_empty(c, "id"); !id.empty()) call["id"] = id;
    out.push_back(std::move(call));
  }
  return out;
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (const unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// A choice's logprobs -> Ollama's [{token, logprob, bytes, top_logprobs:
// [{token, logprob, bytes}]}]: the chat route's content entries are that
// already; the completions route's columns are turned into entries (its
// alternatives, an object keyed by text, most likely first).
json ollama_logprobs(const json& lp) {
  if (!lp.is_object()) return json();
  if (const auto c = lp.find("content"); c != lp.end() && c->is_array()) {
    json out = json::array();
    for (const json& e : *c) {
      json entry = {{"token", e.value("token", "")}, {"logprob", e.value("logprob", 0.0)},
                    {"bytes", e.value("bytes", json::array())}, {"top_logprobs", json::array()}};
      if (const auto t = e.find("top_logprobs"); t != e.end() && t->is_array())
        for (const json& a : *t)
          entry["top_logprobs"].push_back(
              {{"token", a.value("token", "")}, {"logprob", a.value("logprob", 0.0)}, {"bytes", a.value("bytes", json::array())}});
      out.push_back(std::move(entry));
    }
    return out;
  }
  const auto toks = lp.find("tokens");
  if (toks == lp.end() || !toks->is_array()) return json();
  const json lps = lp.value("token_logprobs", json::array());
  const json tops = lp.value("top_logprobs", json::array());
  json out = json::array();
  for (size_t i = 0; i < toks->size(); ++i) {
    const std::string token = (*toks)[i].is_string() ? (*toks)[i].get<std::string>() : "";
    json entry = {{"token", token},
                  {"logprob", i < lps.size() ? lps[i] : json(0.0)},
                  {"bytes", bytes_of(token)},
                  {"top_logprobs", json::array()}};
    if (i < tops.size() && tops[i].is_object()) {
      std::vector<std::pair<std::string, double>> alts;
      for (const auto& [t, v] : tops[i].items()) alts.emplace_back(t, v.is_number() ? v.get<double>() : 0.0);
      std::stable_sort(alts.begin(), alts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
      for (const auto& [t, v] : alts) entry["top_logprobs"].push_back({{"token", t}, {"logprob", v}, {"bytes", bytes_of(t)}});
    }
    out.push_back(std::move(entry));
  }
  return out;
}

void add_stats(json& j, const OllamaStats& s) {
  j["done"] = true;
  j["done_reason"] = s.done_reason;
  j["total_duration"] = s.total_duration;
  j["load_duration"] = s.load_duration;
  j["prompt_eval_count"] = s.prompt_eval_count;
  j["prompt_eval_duration"] = s.prompt_eval_duration;
  j["eval_count"] = s.eval_count;
  j["eval_duration"] = s.eval_duration;
}

}  // namespace

// --- Requests ------------------------------------------------------------------

OllamaRequest ollama_chat_request(const ordered_json& body, int64_t n_ctx) {
  OllamaRequest r;
  ordered_json& chat = r.body;
  chat = ordered_json::object();
  if (const ordered_json* m = field(body, "model"); m && m->is_string()) chat["model"] = *m;
  const ordered_json* ms = field(body, "messages");
  if (ms && !ms->is_array()) bad("messages", "must be an array" + got(*ms));
  r.stream = translate_common(body, false, chat);
  if (!ms || ms->empty()) {
    r.done_reason = zero_keep_alive(field(body, "keep_alive")) ? "unload" : "load";
    return r;
  }
  chat["messages"] = translate_messages(*ms);
  if (const ordered_json* t = field(body, "tools"); non_empty(t)) chat["tools"] = translate_tools(*t);
  translate_options(body, n_ctx, chat);
  translate_format(body, chat);
  translate_think(body, chat);
  return r;
}

OllamaRequest ollama_generate_request(const ordered_json& body, int64_t n_ctx) {
  OllamaRequest r;
  ordered_json& out = r.body;
  out = ordered_json::object();
  if (const ordered_json* m = field(body, "model"); m && m->is_string()) out["model"] = *m;
  bool raw = false;
  if (const ordered_json* v = field(body, "raw")) {
    if (!v->is_boolean()) bad("raw", "must be a boolean" + got(*v));
    raw = v->get<bool>();
  }
  const std::string prompt = string_field(body, "prompt", "", false);
  const std::string system = string_field(body, "system", "", false);
  if (!string_field(body, "suffix", "", false).empty())
    bad("suffix", "is not supported: this server does no fill-in-the-middle");
  if (!string_field(body, "template", "", false).empty())
    bad("template", "is not supported: Go templates are Ollama's; the model's Jinja template renders the prompt "
                    "(or send raw: true with a prompt you formatted)");
  if (const ordered_json* c = field(body, "context"); non_empty(c))
    bad("context", "is not supported (Ollama's deprecated token memory): send the conversation to /api/chat");
  no_images(body, "");
  if (raw && !system.empty()) bad("raw", "raw mode does not support template, system, or context");
  r.route = raw ? Route::completions : Route::chat_completions;
  r.stream = translate_common(body, raw, out);
  if (prompt.empty()) {
    r.done_reason = zero_keep_alive(field(body, "keep_alive")) ? "unload" : "load";
    return r;
  }
  if (raw) {
    out["prompt"] = prompt;
  } else {
    ordered_json messages = ordered_json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    messages.push_back({{"role", "user"}, {"content", prompt}});
    out["messages"] = std::move(messages);
    translate_think(body, out);
  }
  translate_options(body, n_ctx, out);
  translate_format(body, out);
  return r;
}

std::string ollama_chat_field(const std::string& f) {
  if (f == "max_tokens" || f == "max_completion_tokens") return "options.num_predict";
  if (auto s = replace_prefix(f, "stop", "options.stop")) return *s;
  for (const SamplingOption& o : kSampling)
    if (f == o.name) return std::string("options.") + o.name;
  if (replace_prefix(f, "response_format", "")) return "format";
  if (replace_prefix(f, "chat_template_kwargs", "") || f == "reasoning_effort") return "think";
  return f;
}

std::string ollama_generate_field(const std::string& f) {
  if (replace_prefix(f, "messages", "")) return "prompt";
  return ollama_chat_field(f);
}

// --- Replies -------------------------------------------------------------------

OllamaStats ollama_stats(const GenerationResult& r, int64_t total_ns) {
  OllamaStats s;
  s.done_reason = r.finish_reason == FinishReason::length ? "length" : "stop";
  s.total_duration = total_ns;
  s.prompt_eval_count = r.n_prompt;
  s.prompt_eval_duration = static_cast<int64_t>(std::llround(r.timings.prompt_ms * 1e6));
  s.eval_count = static_cast<int64_t>(r.tokens.size());
  s.eval_duration = static_cast<int64_t>(std::llround(r.timings.predicted_ms * 1e6));
  return s;
}

json ollama_load_reply(OllamaEndpoint ep, const std::string& model, const std::string& created_at,
                       const std::string& done_reason) {
  json j = {{"model", model}, {"created_at", created_at}};
  if (ep == OllamaEndpoint::chat) j["message"] = {{"role", "assistant"}, {"content", ""}};
  else j["response"] = "";
  j["done"] = true;
  j["done_reason"] = done_reason;
  return j;
}

json ollama_reply(OllamaEndpoint ep, const json& reply, const std::string& model, const std::string& created_at,
                  const OllamaStats& stats) {
  const json& choice = reply.at("choices").at(0);
  std::string content, thinking;
  json calls;
  if (const auto m = choice.find("message"); m != choice.end()) {
    content = string_or_empty(*m, "content");
    thinking = string_or_empty(*m, "reasoning_content");
    if (const auto tc = m->find("tool_calls"); tc != m->end() && tc->is_array() && !tc->empty()) calls = ollama_calls(*tc);
  } else {
    content = string_or_empty(choice, "text");
  }
  json j = {{"model", model}, {"created_at", created_at}};
  if (ep == OllamaEndpoint::chat) {
    json msg = {{"role", "assistant"}, {"content", content}};
    if (!thinking.empty()) msg["thinking"] = thinking;
    if (!calls.is_null()) msg["tool_calls"] = calls;
    j["message"] = std::move(msg);
  } else {
    j["response"] = content;
    if (!thinking.empty()) j["thinking"] = thinking;
    if (!calls.is_null()) j["tool_calls"] = calls;
  }
  add_stats(j, stats);
  if (const auto lp = choice.find("logprobs"); lp != choice.end() && lp->is_object()) j["logprobs"] = ollama_logprobs(*lp);
  return j;
}

json ollama_error_body(const std::string& message) { return {{"error", message}}; }

std::string ndjson(const std::vector<json>& lines) {
  std::string s;
  for (const json& l : lines) s += dump_json(l) + "\n";
  return s;
}

// --- OllamaStream --------------------------------------------------------------

json OllamaStream::line(const std::string& created_at) const {
  json j = {{"model", model_}, {"created_at", created_at}};
  if (ep_ == OllamaEndpoint::chat) j["message"] = {{"role", "assistant"}, {"content", ""}};
  else j["response"] = "";
  j["done"] = false;
  return j;
}

std::vector<json> OllamaStream::on_chunk(const json& chunk, const std::string& created_at) {
  std::vector<json> out;
  if (failed_) return out;
  if (const auto e = chunk.find("error"); e != chunk.end()) {
    failed_ = true;
    out.push_back(ollama_error_body(e->is_object() ? e->value("message", "generation failed") : "generation failed"));
    return out;
  }
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return out;
  const json& choice = (*choices)[0];
  const bool chat = ep_ == OllamaEndpoint::chat;
  std::string text, thinking;
  if (const auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
    text = string_or_empty(*d, "content");
    thinking = string_or_empty(*d, "reasoning_content");
    if (const auto tcs = d->find("tool_calls"); tcs != d->end() && tcs->is_array())
      for (const json& tc : *tcs) {
        Call& c = calls_[tc.value("index", int64_t{0})];
        if (const std::string id = string_or_empty(tc, "id"); !id.empty()) c.id = id;
        if (const auto fn = tc.find("function"); fn != tc.end() && fn->is_object()) {
          if (const std::string name = string_or_empty(*fn, "name"); !name.empty()) c.name = name;
          c.arguments += string_or_empty(*fn, "arguments");
        }
      }
  } else {
    text = string_or_empty(choice, "text");
  }
  json lp;
  if (const auto l = choice.find("logprobs"); l != choice.end()) lp = ollama_logprobs(*l);
  const bool has_lp = lp.is_array() && !lp.empty();
  if (!text.empty() || !thinking.empty() || has_lp) {
    json j = line(created_at);
    json& at = chat ? j["message"] : j;
    at[chat ? "content" : "response"] = text;
    if (!thinking.empty()) at["thinking"] = thinking;
    if (has_lp) j["logprobs"] = std::move(lp);
    out.push_back(std::move(j));
  }
  if (const auto f = choice.find("finish_reason"); f != choice.end() && f->is_string() && !calls_.empty()) {
    json calls = json::array();
    for (const auto& [index, c] : calls_)
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    calls_.clear();
    json j = line(created_at);
    (chat ? j["message"] : j)["tool_calls"] = ollama_calls(calls);
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<json> OllamaStream::finish(const OllamaStats& stats, const std::string& created_at) {
  std::vector<json> out;
  if (failed_) return out;
  if (!calls_.empty()) {  // no chunk said finish_reason: the calls still go out whole
    json finish = {{"choices", json::array({{{"index", 0}, {"delta", json::object()}, {"finish_reason", "stop"}}})}};
    out = on_chunk(finish, created_at);
  }
  json j = line(created_at);
  add_stats(j, stats);
  out.push_back(std::move(j));
  return out;
}

}  // namespace synapse::server

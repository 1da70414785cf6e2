#include "server/request.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "runtime/grammar_cache.hpp"
#include "server/chat.hpp"
#include "synapse/grammar.hpp"

namespace synapse::server {

using nlohmann::json;

std::string quote_value(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 64) s = s.substr(0, 61) + "...";
  return s;
}

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& what, const json& value) {
  throw HttpError(400, "'" + field + "' " + what + ", got " + quote_value(value), field);
}

// The field's value, or nullptr when it is absent or null (OpenAI treats an
// explicit null as "use the default").
const json* field_of(const json& j, const char* field) {
  const auto it = j.find(field);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

int64_t int_in(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) bad(field, "must be an integer", v);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", v);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", v);
  return x;
}

// A finite number in [lo, hi] (integers accepted).
float number_in(const json& v, const std::string& field, double lo, double hi) {
  if (!v.is_number()) bad(field, "must be a number", v);
  const double x = v.get<double>();
  // Finite as the float it becomes (1e308 would be inf there).
  if (!std::isfinite(x) || std::fabs(x) > std::numeric_limits<float>::max()) bad(field, "must be finite", v);
  if (x < lo || x > hi) {
    auto fmt = [](double d) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", d);
      return std::string(buf);
    };
    if (std::isinf(hi)) bad(field, "must be >= " + fmt(lo), v);
    if (std::isinf(lo)) bad(field, "must be <= " + fmt(hi), v);
    bad(field, "must be in [" + fmt(lo) + ", " + fmt(hi) + "]", v);
  }
  return static_cast<float>(x);
}

void read_int(const json& j, const char* field, int64_t lo, int64_t hi, int32_t& out) {
  if (const json* v = field_of(j, field)) out = static_cast<int32_t>(int_in(*v, field, lo, hi));
}

void read_float(const json& j, const char* field, double lo, double hi, float& out) {
  if (const json* v = field_of(j, field)) out = number_in(*v, field, lo, hi);
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// logit_bias: OpenAI's {"token id": bias} or llama-server's [[id, bias], ...];
// as llama-server, a key or first element that is a string other than a token
// id is a text, whose every token (tokenized without BOS or special tokens)
// gets the bias; bias a number or false (false forbids the token: -inf).
std::vector<synapse::LogitBias> parse_logit_bias(const json& v, const Tokenizer& tok, size_t max_entries) {
  const int32_t n_vocab = tok.n_vocab();
  std::vector<synapse::LogitBias> out;
  if (v.size() > max_entries)
    throw HttpError(400, "'logit_bias' has " + std::to_string(v.size()) + " entries, more than " +
                             std::to_string(max_entries), "logit_bias");
  const auto bias_of = [](const std::string& field, const json& b) {
    if (!b.is_boolean()) return number_in(b, field, -kInf, kInf);
    if (b.get<bool>()) bad(field, "must be a number or false", b);
    return -std::numeric_limits<float>::infinity();
  };
  const auto add_text = [&](const std::string& text, float bias) {
    for (const token_id id : tok.tokenize(text, false, false)) out.push_back({id, bias});
  };
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string field = "logit_bias." + it.key();
      const std::string& k = it.key();
      const float bias = bias_of(field, it.value());
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(k, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (k.empty() || used != k.size()) {
        add_text(k, bias);
        continue;
      }
      if (id < 0 || id >= n_vocab)
        bad(field, "must be keyed by a token id in [0, " + std::to_string(n_vocab - 1) + "] or a text", json(k));
      out.push_back({static_cast<token_id>(id), bias});
    }
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string field = "logit_bias[" + std::to_string(i) + "]";
      const json& e = v[i];
      if (!e.is_array() || e.size() != 2) bad(field, "must be a pair [token id or text, bias]", e);
      const float bias = bias_of(field + "[1]", e[1]);
      if (e[0].is_string())
        add_text(e[0].get<std::string>(), bias);
      else
        out.push_back({static_cast<token_id>(int_in(e[0], field + "[0]", 0, n_vocab - 1)), bias});
    }
  } else {
    bad("logit_bias", "must be an object {\"token id\": bias} or an array of [token id, bias]", v);
  }
  return out;
}

std::vector<std::string> parse_stop(const json& v, const RequestLimits& lim) {
  std::vector<std::string> out;
  auto one = [&](const json& s, const std::string& field) {
    if (!s.is_string()) bad(field, "must be a string", s);
    const std::string& str = s.get_ref<const std::string&>();
    if (str.size() > lim.max_stop_bytes)
      bad(field, "must be at most " + std::to_string(lim.max_stop_bytes) + " bytes long", s);
    out.push_back(str);
  };
  if (v.is_string()) {
    one(v, "stop");
  } else if (v.is_array()) {
    if (v.size() > static_cast<size_t>(lim.max_stop))
      bad("stop", "must have at most " + std::to_string(lim.max_stop) + " entries", v);
    for (size_t i = 0; i < v.size(); ++i) one(v[i], "stop[" + std::to_string(i) + "]");
  } else {
    bad("stop", "must be a string or an array of strings", v);
  }
  return out;
}

}  // namespace

nlohmann::json parse_json_object(std::string_view body, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : body) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw HttpError(400, "the request body nests arrays/objects deeper than " + std::to_string(max_depth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  json j;
  try {
    j = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    throw HttpError(400, std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw HttpError(400, "the request body must be a JSON object, got " + quote_value(j));
  return j;
}

std::vector<std::vector<token_id>> parse_prompts(const json& v, const Tokenizer& tok, const std::string& field) {
  auto from_string = [&](const json& s, bool add_special) {
    return tok.tokenize(s.get_ref<const std::string&>(), add_special, true);
  };
  auto all_ints = [](const json& a) {
    for (const json& e : a)
      if (!e.is_number_integer()) return false;
    return true;
  };
  // json_is_array_of_mixed_numbers_strings: both kinds in one array.
  auto has_string = [&](const json& a) {
    return std::any_of(a.begin(), a.end(), [](const json& e) { return e.is_string(); }) &&
           std::any_of(a.begin(), a.end(), [](const json& e) { return e.is_number_integer(); });
  };
  // tokenize_mixed: strings and token ids in one prompt; BOS/EOS only for a
  // string that comes first.
  auto mixed = [&](const json& a, const std::string& f) {
    std::vector<token_id> ids;
    for (size_t k = 0; k < a.size(); ++k) {
      const std::string fk = f + "[" + std::to_string(k) + "]";
      if (a[k].is_string()) {
        const std::vector<token_id> part = from_string(a[k], k == 0);
        ids.insert(ids.end(), part.begin(), part.end());
      } else if (a[k].is_number_integer()) {
        ids.push_back(get_token_ids(json::array({a[k]}), fk, tok.n_vocab())[0]);
      } else {
        bad(fk, "must be a string or a token id", a[k]);
      }
    }
    return ids;
  };
  // tokenize_input_subprompt's JSON object: the text (or mixed array) under
  // "prompt_string"; images or audio under "multimodal_data" need a
  // multimodal model, which this server does not load.
  auto object = [&](const json& o, const std::string& f) {
    if (field_of(o, "multimodal_data"))
      throw HttpError(400, "'" + f + ".multimodal_data': Multimodal data provided, but model does not support "
                      "multimodal requests.", f + ".multimodal_data");
    const json* s = field_of(o, "prompt_string");
    if (!s)
      bad(f, "must be a string, an array of token ids, an array of strings and token ids, or an object "
             "{\"prompt_string\": ...}", o);
    if (s->is_string()) return from_string(*s, true);
    if (s->is_array() && !s->empty())
      return all_ints(*s) ? get_token_ids(*s, f + ".prompt_string", tok.n_vocab()) : mixed(*s, f + ".prompt_string");
    bad(f + ".prompt_string", "must be a string, or an array of strings and token ids", *s);
  };
  std::vector<std::vector<token_id>> out;
  if (v.is_string()) {
    out.push_back(from_string(v, true));
  } else if (v.is_object()) {
    out.push_back(object(v, field));
  } else if (v.is_array() && !v.empty() && all_ints(v)) {
    out.push_back(get_token_ids(v, field, tok.n_vocab()));
  } else if (v.is_array() && has_string(v)) {
    // json_is_array_and_contains_numbers: an array with a token id in it is one
    // prompt, strings and token ids in sequence (tokenize_mixed).
    out.push_back(mixed(v, field));
  } else if (v.is_array() && !v.empty()) {
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string fi = field + "[" + std::to_string(i) + "]";
      if (v[i].is_string()) out.push_back(from_string(v[i], true));
      else if (v[i].is_array() && all_ints(v[i])) out.push_back(get_token_ids(v[i], fi, tok.n_vocab()));
      else if (v[i].is_array() && has_string(v[i])) out.push_back(mixed(v[i], fi));
      else if (v[i].is_object()) out.push_back(object(v[i], fi));
      else bad(fi, "must be a string, an array of token ids, an array of strings and token ids, or an object "
                   "{\"prompt_string\": ...}", v[i]);
    }
  } else {
    bad(field, "must be a string, an array of token ids, an object {\"prompt_string\": ...}, or a non-empty "
               "array of those", v);
  }
  return out;
}

bool get_bool(const json& j, const char* field, bool def) {
  const json* v = field_of(j, field);
  if (!v) return def;
  if (!v->is_boolean()) bad(field, "must be a boolean", *v);
  return v->get<bool>();
}

std::string get_string(const json& j, const char* field, const std::string& def) {
  const json* v = field_of(j, field);
  if (!v) return def;
  if (!v->is_string()) bad(field, "must be a string", *v);
  return v->get<std::string>();
}

std::vector<token_id> get_token_ids(const json& v, const std::string& field, int32_t n_vocab) {
  if (!v.is_array()) bad(field, "must be an array of token ids", v);
  std::vector<token_id> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    ids.push_back(static_cast<token_id>(int_in(v[i], field + "[" + std::to_string(i) + "]", 0, n_vocab - 1)));
  return ids;
}

std::vector<synapse::ChatMessage> parse_messages(const json& body, const RequestLimits& lim) {
  const json* v = field_of(body, "messages");
  if (!v) throw HttpError(400, "'messages' is required", "messages");
  if (!v->is_array() || v->empty()) bad("messages", "must be a non-empty array of messages", *v);
  if (v->size() > lim.max_messages) bad("messages", "must have at most " + std::to_string(lim.max_messages) + " entries", json(v->size()));
  std::vector<synapse::ChatMessage> msgs;
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string field = "messages[" + std::to_string(i) + "]";
    const json& m = (*v)[i];
    if (!m.is_object()) bad(field, "must be an object with 'role' and 'content'", m);
    const json* role = field_of(m, "role");
    if (!role || !role->is_string()) bad(field + ".role", "must be a string", role ? *role : json());
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r == "tool")
      bad(field + ".role", "'tool' messages need the model's Jinja chat template (this server renders chat with a "
                           "built-in format)", *role);
    if (r != "system" && r != "user" && r != "assistant")
      bad(field + ".role", "must be one of system, developer, user, assistant, tool", *role);
    if (const json* tc = field_of(m, "tool_calls"); tc && !(tc->is_array() && tc->empty()))
      bad(field + ".tool_calls", "need the model's Jinja chat template (this server renders chat with a built-in "
                                 "format)", *tc);
    std::string content;
    const json* c = field_of(m, "content");
    if (!c) {
      if (r != "assistant") throw HttpError(400, "'" + field + ".content' is required", field + ".content");
    } else if (c->is_string()) {
      content = c->get<std::string>();
    } else if (c->is_array()) {
      for (size_t k = 0; k < c->size(); ++k) {
        const std::string pf = field + ".content[" + std::to_string(k) + "]";
        const json& part = (*c)[k];
        if (!part.is_object()) bad(pf, "must be a {\"type\": \"text\", \"text\": ...} part", part);
        const json* type = field_of(part, "type");
        if (!type || !type->is_string()) bad(pf + ".type", "must be a string", type ? *type : json());
        if (*type != "text")
          bad(pf + ".type", "is not supported: this server reads text parts only (no image or audio input)", *type);
        const json* t = field_of(part, "text");
        if (!t || !t->is_string()) bad(pf + ".text", "must be a string", t ? *t : json());
        // llama.cpp's concat_content_parts: the parts joined by "\n".
        if (!content.empty()) content += '\n';
        content += t->get<std::string>();
      }
    } else {
      bad(field + ".content", "must be a string or an array of text parts", *c);
    }
    msgs.push_back({std::move(r), std::move(content)});
  }
  return msgs;
}

std::vector<synapse::ChatSegment> builtin_chat_segments(synapse::ChatTemplate tmpl, const json& body,
                                                        std::span<const synapse::ChatMessage> msgs) {
  const bool continues = !msgs.empty() && msgs.back().role == "assistant" && !msgs.back().content.empty();
  if (!continues)
    return synapse::format_chat_segments(tmpl, msgs, asks_generation_prompt(body) && !asks_continuation(body));
  // The whole conversation without a generation prompt, cut after the last
  // message's text: what follows it is the format's end of the turn.
  std::vector<synapse::ChatSegment> segs = synapse::format_chat_segments(tmpl, msgs, false);
  while (!segs.empty() && segs.back().special) segs.pop_back();
  return segs;
}

// llama-server's structured output: `grammar` (GBNF), `json_schema`, or
// `response_format` ({"type": "json_object"} with an optional "schema", or
// {"type": "json_schema", "json_schema": {"schema": ..., "strict": ...}}; a
// schema is always enforced, strict or not). An absent or empty schema means
// any JSON object, as llama-server has it. Returns the GBNF to constrain the
// reply with ("" for none), compiled once here (token references resolved
// with tok) so that a bad grammar is a 400
// naming the field (with its line and column) before anything is queued.
namespace {
std::string parse_structured_output(const json& j, std::string_view body, const Tokenizer& tok) {
  const json* g = field_of(j, "grammar");
  if (g && !g->is_null() && !g->is_string()) bad("grammar", "must be a string (a GBNF grammar)", *g);
  std::string gbnf = g && g->is_string() ? g->get<std::string>() : "";
  const json* schema = nullptr;
  std::string field;
  if (const json* v = field_of(j, "json_schema"); v && !v->is_null()) {
    schema = v;
    field = "json_schema";
  }
  const json any_object = json::object();
  if (const json* rf = field_of(j, "response_format"); rf && !rf->is_null()) {
    if (!rf->is_object()) bad("response_format", "must be an object", *rf);
    const json* type = field_of(*rf, "type");
    if (type && !type->is_string()) bad("response_format.type", "must be a string", *type);
    const std::string t = type ? type->get<std::string>() : "text";
    if (t == "json_object") {
      field = "response_format.schema";
      schema = field_of(*rf, "schema");
      if (!schema) schema = &any_object;
    } else if (t == "json_schema") {
      const json* w = field_of(*rf, "json_schema");
      if (!w || !w->is_object()) bad("response_format.json_schema", "must be an object with a 'schema'", w ? *w : json());
      if (const json* st = field_of(*w, "strict"); st && !st->is_boolean())
        bad("response_format.json_schema.strict", "must be a boolean", *st);
      field = "response_format.json_schema.schema";
      schema = field_of(*w, "schema");
      if (!schema) schema = &any_object;
    } else if (t != "text") {
      bad("response_format.type", "must be one of \"text\", \"json_object\", \"json_schema\"", *type);
    }
  }
  if (schema && !gbnf.empty())
    throw HttpError(400, "'grammar' and '" + field + "' both constrain the reply; send one of them", field);
  if (schema) {
    if (!schema->is_object() && !schema->is_boolean()) bad(field, "must be a JSON Schema (an object)", *schema);
    // The schema's text in the order the client wrote its keys (properties
    // come out in declared order, as llama-server's ordered_json keeps them):
    // `j` is a sorted json, so the field is read again from the body.
    std::string text;
    if (schema == &any_object || (schema->is_object() && schema->empty())) {
      text = "{\"type\":\"object\"}";
    } else {
      const nlohmann::ordered_json o = nlohmann::ordered_json::parse(body);
      const nlohmann::ordered_json* at = &o;
      size_t from = 0;
      while (from <= field.size()) {
        const size_t dot = std::min(field.find('.', from), field.size());
        at = &at->at(field.substr(from, dot - from));
        from = dot + 1;
      }
      text = at->dump();
    }
    try {
      gbnf = synapse::json_schema_to_gbnf(text);
    } catch (const synapse::Error& e) {
      throw HttpError(400, "'" + field + "': " + e.what(), field);
    }
  } else {
    field = "grammar";
  }
  if (gbnf.empty()) return gbnf;
  try {
    synapse::runtime::resolve_grammar_tokens(*synapse::runtime::cached_grammar(gbnf), tok);
  } catch (const synapse::Error& e) {
    throw HttpError(400, "'" + field + "': " + e.what(), field);
  }
  return gbnf;
}

}  // namespace

CompletionRequest parse_completion_request(Route route, std::string_view body, const RequestContext& rc) {
  const json j = parse_json_object(body, rc.limits.max_json_depth);
  const Tokenizer& tok = *rc.tok;
  const RequestLimits& lim = rc.limits;
  CompletionRequest r;
  r.route = route;
  r.model = get_string(j, "model", "");
  r.sampling = rc.sampling;
  synapse::SamplerParams& sp = r.sampling;

  // How many tokens to generate: the request's count, else -n (llama-server
  // v0.5.0, server-context.cpp: n_predict_max is the task's n_predict unless
  // that is -1, then the server's). The context bounds it either way.
  int32_t n_predict = rc.n_predict;
  const char* len_field = route == Route::completion ? "n_predict" : "max_tokens";
  if (route == Route::chat_completions && field_of(j, "max_completion_tokens")) len_field = "max_completion_tokens";
  if (route == Route::completion && !field_of(j, "n_predict") && field_of(j, "max_tokens")) len_field = "max_tokens";
  if (const json* v = field_of(j, len_field)) {
    const int64_t lo = route == Route::completion ? -1 : 1;
    const int32_t asked = static_cast<int32_t>(int_in(*v, len_field, lo, rc.n_ctx));
    if (asked >= 0) n_predict = asked;
  }
  r.stop.n_predict = n_predict;
  if (const json* v = field_of(j, "stop")) r.stop.stops = parse_stop(*v, lim);
  r.stop.ignore_eos = get_bool(j, "ignore_eos", false);
  if (const json* v = field_of(j, "t_max_predict_ms"))
    r.t_max_predict_ms = int_in(*v, "t_max_predict_ms", std::numeric_limits<int64_t>::min(),
                                std::numeric_limits<int64_t>::max());
  // llama-server's context-shift settings: a reply here ends at n_ctx (no
  // context shift), so they change nothing, but a value that names no
  // position of the context is refused (400) rather than silently ignored.
  if (const json* v = field_of(j, "n_keep")) int_in(*v, "n_keep", -1, rc.n_ctx);
  if (const json* v = field_of(j, "n_discard")) int_in(*v, "n_discard", 0, rc.n_ctx);

  // Sampling.
  read_float(j, "temperature", 0.0, kInf, sp.temp);
  read_float(j, "top_p", 0.0, 1.0, sp.top_p);
  read_int(j, "top_k", 0, std::numeric_limits<int32_t>::max(), sp.top_k);
  read_float(j, "min_p", 0.0, 1.0, sp.min_p);
  read_float(j, "typical_p", 0.0, 1.0, sp.typical_p);
  read_float(j, "presence_penalty", -kInf, kInf, sp.penalty_present);
  read_float(j, "frequency_penalty", -kInf, kInf, sp.penalty_freq);
  if (const json* v = field_of(j, "repeat_penalty")) {
    sp.penalty_repeat = number_in(*v, "repeat_penalty", 0.0, kInf);
    if (sp.penalty_repeat <= 0.0f) bad("repeat_penalty", "must be greater than 0", *v);
  }
  read_int(j, "repeat_last_n", -1, rc.n_ctx, sp.penalty_last_n);
  if (const json* v = field_of(j, "seed")) {
    const int64_t s = int_in(*v, "seed", -1, 0xFFFFFFFFll);
    sp.seed = s < 0 ? synapse::kDefaultSeed : static_cast<uint32_t>(s);
  }
  if (const json* v = field_of(j, "logit_bias")) {
    std::vector<synapse::LogitBias> lb = parse_logit_bias(*v, tok, lim.max_logit_bias);
    sp.logit_bias.insert(sp.logit_bias.end(), lb.begin(), lb.end());
  }
  // llama.cpp's adaptive-p sampler (a target probability in [0, 1]; negative:
  // off, which generation_settings reports) is not here: asking for it is a 400.
  if (const json* v = field_of(j, "adaptive_target"); v && number_in(*v, "adaptive_target", -kInf, kInf) >= 0)
    bad("adaptive_target", "is not supported (llama.cpp's adaptive-p sampler; a negative value: off)", *v);

  // Choices.
  if (route != Route::completion) {
    if (const json* v = field_of(j, "n")) r.n = static_cast<int>(int_in(*v, "n", 1, lim.max_choices));
    if (const json* v = field_of(j, "best_of"); v && !(v->is_number_integer() && v->get<int64_t>() == r.n))
      bad("best_of", "is not supported (only best_of = n)", *v);
  }
  // Log probabilities.
  if (route == Route::chat_completions) {
    r.logprobs = get_bool(j, "logprobs", false);
    if (const json* v = field_of(j, "top_logprobs")) {
      r.top_logprobs = static_cast<int>(int_in(*v, "top_logprobs", 0, lim.max_top_logprobs));
      if (!r.logprobs) bad("top_logprobs", "needs 'logprobs': true", *v);
    }
  } else if (route == Route::completions) {
    if (const json* v = field_of(j, "logprobs")) {
      r.top_logprobs = static_cast<int>(int_in(*v, "logprobs", 0, lim.max_top_logprobs));
      r.logprobs = true;
    }
    if (const json* v = field_of(j, "echo"); v && !(v->is_boolean() && !v->get<bool>()))
      bad("echo", "is not supported (only false)", *v);
    if (const json* v = field_of(j, "suffix"); v && !(v->is_string() && v->get_ref<const std::string&>().empty()))
      bad("suffix", "is not supported", *v);
  } else {
    if (const json* v = field_of(j, "n_probs")) {
      r.top_logprobs = static_cast<int>(int_in(*v, "n_probs", 0, lim.max_top_logprobs));
      r.logprobs = r.top_logprobs > 0;
    }
    r.cache_prompt = get_bool(j, "cache_prompt", true);
    r.return_tokens = get_bool(j, "return_tokens", false);
    if (const json* v = field_of(j, "response_fields")) {
      if (!v->is_array()) bad("response_fields", "must be an array of strings", *v);
      for (size_t k = 0; k < v->size(); ++k) {
        if (!(*v)[k].is_string()) bad("response_fields[" + std::to_string(k) + "]", "must be a string", (*v)[k]);
        r.response_fields.push_back((*v)[k].get<std::string>());
      }
    }
  }

  r.post_sampling_probs = get_bool(j, "post_sampling_probs", false);
  r.return_progress = get_bool(j, "return_progress", false);
  // llama-server's backend_sampling (sampling on a GPU backend, with the same
  // draws): a CPU engine has no other backend, so only its type is checked.
  (void)get_bool(j, "backend_sampling", false);

  if (route != Route::completion) r.verbose = get_bool(j, "verbose", rc.verbose);
  // Streaming.
  r.stream = get_bool(j, "stream", false);
  r.timings_per_token = get_bool(j, "timings_per_token", false);
  if (const json* v = field_of(j, "stream_options")) {
    if (!v->is_object()) bad("stream_options", "must be an object", *v);
    r.include_usage = get_bool(*v, "include_usage", false);
  }

  // What synapse cannot do is refused, never silently dropped.
  if (route != Route::chat_completions) {
    for (const char* f : {"tools", "functions"})
      if (const json* v = field_of(j, f); v && !(v->is_array() && v->empty()))
        bad(f, "is not supported on this route (send tools to /v1/chat/completions)", *v);
  } else if (!rc.jinja) {
    check_builtin_chat_fields(j);
  }
  // The request's grammar or schema replaces the server's (--grammar); none keeps it.
  const std::string request_grammar = parse_structured_output(j, body, tok);
  if (!request_grammar.empty()) sp.grammar = request_grammar;

  if (route == Route::chat_completions) check_continuation(j);
  // The prompt(s) last: every cheap check has passed before text is tokenized.
  if (route == Route::chat_completions && rc.jinja) {
    // The model's template sees messages and tools in the client's key order.
    const JinjaPrompt jp = render_jinja_chat(nlohmann::ordered_json::parse(body), *rc.jinja, lim, sp.seed);
    if (!jp.grammar.empty()) {
      if (!request_grammar.empty())
        throw HttpError(400, "'tool_choice' requires a tool call, which is constrained by its own grammar: it cannot "
                             "be combined with 'grammar', 'json_schema' or 'response_format'", "tool_choice");
      sp.grammar = jp.grammar;
    }
    r.chat_output = jp.output;
    r.preserved_tokens = rc.jinja->preserved_tokens;
    // llama-server's way: one text, BOS per the vocabulary, special-token texts parsed.
    r.prompts.push_back(tok.tokenize(jp.prompt, true, true));
  } else if (route == Route::chat_completions) {
    const std::vector<synapse::ChatMessage> msgs = parse_messages(j, lim);
    r.prompts.push_back(synapse::tokenize_segments(tok, builtin_chat_segments(rc.chat_template, j, msgs), true));
  } else {
    const json* p = field_of(j, "prompt");
    if (!p) throw HttpError(400, "'prompt' is required", "prompt");
    r.prompts = parse_prompts(*p, tok, "prompt");
  }
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    const std::string field = route == Route::chat_completions ? "messages" : "prompt";
    const int64_t n = static_cast<int64_t>(r.prompts[i].size());
    if (n == 0) throw HttpError(400, "'" + field + "' tokenizes to no tokens (and the model adds no BOS)", field);
    // Every request may use all n_ctx positions of the shared KV pool, so
    // only a prompt longer than that can never run: OpenAI's code for it.
    if (n > rc.n_ctx)
      throw HttpError(400,
                      "'" + field + "' is " + std::to_string(n) + " tokens, more than the context size n_ctx = " +
                          std::to_string(rc.n_ctx) + " (start the server with a larger -c)",
                      field, "context_length_exceeded");
  }

  if (static_cast<int64_t>(r.prompts.size()) * r.n > lim.max_choices)
    throw HttpError(400, "the request asks for " + std::to_string(r.prompts.size() * r.n) +
                             " choices (prompts x n), more than " + std::to_string(lim.max_choices), "n");

  return r;
}

}  // namespace synapse::server

// The families' readers of a call section, and what each family writes.
// See chat_output_readers.hpp.
#include "runtime/chat_output_readers.hpp"

#include <algorithm>
#include <cctype>

namespace synapse::runtime::readers {

namespace {

constexpr size_t npos = std::string_view::npos;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}
constexpr size_t kMaxName = 128;
// Nesting past this is not a call (and would be deep work for the JSON parser).
constexpr size_t kMaxJsonDepth = 256;

// What a reader knows of the request.
struct Ctx {
  const Tools& tools;
};

enum class Scan { complete, incomplete, invalid };

// The end of the JSON object or array at s[p], found from its brackets and
// strings alone; the JSON parser checks the rest once it is whole.
Scan scan_json(std::string_view s, size_t p, size_t& end) {
  if (p >= s.size()) return Scan::incomplete;
  if (s[p] != '{' && s[p] != '[') return Scan::invalid;
  std::string stack;
  bool in_string = false, escape = false;
  for (size_t i = p; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '{': stack += '}'; break;
      case '[': stack += ']'; break;
      case '}':
      case ']':
        if (stack.back() != c) return Scan::invalid;
        stack.pop_back();
        if (stack.empty()) {
          end = i + 1;
          return Scan::complete;
        }
        break;
      default: break;
    }
    if (stack.size() > kMaxJsonDepth) return Scan::invalid;
  }
  return Scan::incomplete;
}

struct Cursor {
  std::string_view s;
  size_t p = 0;
  bool final = false;

  bool at_end() const { return p >= s.size(); }
  std::string_view rest() const { return s.substr(std::min(p, s.size())); }
  void ws() { p = skip_ws(s, p); }
  // The literal l next.
  M lit(std::string_view l) {
    const std::string_view r = rest();
    if (r.substr(0, l.size()) == l) {
      p += l.size();
      return M::ok;
    }
    if (!final && r.size() < l.size() && l.substr(0, r.size()) == r) return M::more;
    return M::no;
  }
  // A closing marker, which a reply that ends here may leave out.
  M close(std::string_view l) {
    if (final && at_end()) return M::ok;
    return lit(l);
  }
  // Which of the literals comes next (its index in *which); undecided while
  // one of them may still come (```json after ```).
  M one_of(std::initializer_list<std::string_view> ls, size_t* which) {
    size_t i = 0, found = ls.size();
    for (std::string_view l : ls) {
      const size_t q = p;
      const M m = lit(l);
      p = q;
      if (m == M::more) return M::more;
      if (m == M::ok && found == ls.size()) found = i;
      ++i;
    }
    if (found == ls.size()) return M::no;
    *which = found;
    p += ls.begin()[found].size();
    return M::ok;
  }
  // Text up to the marker `end`, which is consumed.
  M until(std::string_view end, std::string_view* out) {
    const size_t f = s.find(end, p);
    if (f == npos) return final ? M::no : M::more;
    *out = s.substr(p, f - p);
    p = f + end.size();
    return M::ok;
  }
  // A function name ([A-Za-z0-9_.-], at most kMaxName) ended by `end`
  // (consumed).
  M name(std::string_view end, std::string* out) {
    size_t i = p;
    while (i < s.size() && is_name_char(s[i]) && i - p <= kMaxName) ++i;
    if (i - p > kMaxName) return M::no;
    if (i == s.size()) return final ? M::no : M::more;
    if (i == p) return M::no;
    const size_t q = p;
    p = i;
    const M m = lit(end);
    if (m != M::ok) {
      p = q;
      return m;
    }
    *out = std::string(s.substr(q, i - q));
    return M::ok;
  }
  // An argument's name, ended by `end` (consumed): a line of at most
  // kMaxKey bytes.
  M key(std::string_view end, std::string_view* out) {
    constexpr size_t kMaxKey = 256;
    const size_t f = s.substr(0, std::min(s.size(), p + kMaxKey + end.size())).find(end, p);
    const size_t nl = s.find('\n', p);
    if (f == npos) return nl == npos && s.size() < p + kMaxKey && !final ? M::more : M::no;
    if (nl < f || f - p > kMaxKey) return M::no;
    *out = s.substr(p, f - p);
    p = f + end.size();
    return out->empty() ? M::no : M::ok;
  }
  M json(Json* out) {
    size_t end = 0;
    switch (scan_json(s, p, end)) {
      case Scan::incomplete: return final ? M::no : M::more;
      case Scan::invalid: return M::no;
      case Scan::complete: break;
    }
    auto j = parse_json(s.substr(p, end - p));
    if (!j) return M::no;
    *out = std::move(*j);
    p = end;
    return M::ok;
  }
  // The first key of the object starting here is one of `keys`: tells a
  // reply that is JSON but no call from one as soon as its first key shows.
  M first_key_in(std::initializer_list<std::string_view> keys) const {
    Cursor c = *this;
    if (c.lit("{") != M::ok) return c.at_end() && !final ? M::more : M::no;
    c.ws();
    if (c.at_end()) return final ? M::no : M::more;
    if (c.lit("\"") != M::ok) return M::no;
    const std::string_view r = c.rest();
    const size_t q = r.find('"');
    const std::string_view key = r.substr(0, q);
    for (std::string_view k : keys) {
      if (q != npos && key == k) return M::ok;
      if (q == npos && !final && k.substr(0, key.size()) == key) return M::more;
    }
    return M::no;
  }
};

#define SYNAPSE_TRY(expr)              \
  do {                                 \
    const M m_ = (expr);               \
    if (m_ != M::ok) return m_;        \
  } while (false)

bool json_has_type(const Json& v, const std::vector<std::string>& types) {
  for (const std::string& t : types) {
    if ((t == "object" && v.is_object()) || (t == "array" && v.is_array()) || (t == "boolean" && v.is_boolean()) ||
        (t == "null" && v.is_null()) || (t == "number" && v.is_number()) ||
        (t == "integer" && (v.is_number_integer() || v.is_number_unsigned())) || (t == "string" && v.is_string()))
      return true;
  }
  return false;
}

// An XML family's parameter value, typed by the parameter's schema: a string
// parameter keeps the text, another takes it as JSON when it parses as a
// value of an allowed type (any type when the schema is unknown).
Json typed_value(const Ctx& ctx, std::string_view fn, std::string_view param, std::string_view raw) {
  const auto types = ctx.tools.param_types(fn, param);
  const bool only_string = types.size() == 1 && types[0] == "string";
  if (!only_string) {
    if (auto v = parse_json(trim(raw)); v && (types.empty() || json_has_type(*v, types))) return *v;
  }
  return Json(std::string(raw));
}

// A call written as a JSON object: {"name": N, "arguments": {...}} with the
// families' variants ("parameters", Command R's "tool_name", an "id",
// arguments as a string holding the object, OpenAI's {"function": {...}}).
bool call_from_object(const Json& o, const Ctx& ctx, RawCall* out) {
  if (!o.is_object()) return false;
  if (o.contains("function") && o["function"].is_object() && !o.contains("name")) {
    RawCall c;
    if (!call_from_object(o["function"], ctx, &c)) return false;
    if (c.id.empty() && o.contains("id") && o["id"].is_string()) c.id = o["id"].get<std::string>();
    *out = std::move(c);
    return true;
  }
  const Json* name = nullptr;
  for (const char* k : {"name", "tool_name"})
    if (o.contains(k)) name = &o[k];
  if (name == nullptr || !name->is_string() || !ctx.tools.known(name->get<std::string>())) return false;
  Json args = Json::object();
  for (const char* k : {"arguments", "parameters"}) {
    if (!o.contains(k)) continue;
    const Json& a = o[k];
    if (a.is_string()) {
      auto parsed = parse_json(a.get<std::string>());
      if (!parsed || !parsed->is_object()) return false;
      args = std::move(*parsed);
    } else if (a.is_object()) {
      args = a;
    } else if (!a.is_null()) {  // null: no arguments
      return false;
    }
  }
  for (const char* k : {"id", "tool_call_id"}) {
    if (!o.contains(k)) continue;
    if (o[k].is_string()) out->id = o[k].get<std::string>();
    if (o[k].is_number_integer()) out->id = std::to_string(o[k].get<int64_t>());
  }
  out->name = name->get<std::string>();
  out->arguments = std::move(args);
  return true;
}

// One or more calls as JSON: an array of call objects, or call objects one
// after another (separated by whitespace, ',' or ';').
M json_calls(Cursor& c, const Ctx& ctx, Section* sec) {
  c.ws();
  if (c.at_end()) return c.final ? M::no : M::more;
  if (c.rest()[0] == '[') {
    Json arr;
    SYNAPSE_TRY(c.json(&arr));
    if (arr.empty()) return M::no;
    for (const Json& o : arr) {
      RawCall call;
      if (!call_from_object(o, ctx, &call)) return M::no;
      sec->calls.push_back(std::move(call));
    }
    return M::ok;
  }
  for (;;) {
    Json o;
    RawCall call;
    SYNAPSE_TRY(c.json(&o));
    if (!call_from_object(o, ctx, &call)) return M::no;
    sec->calls.push_back(std::move(call));
    // Another call may follow.
    Cursor next = c;
    next.ws();
    if (!next.at_end() && (next.rest()[0] == ',' || next.rest()[0] == ';')) {
      next.p++;
      next.ws();
    }
    if (next.at_end() && !next.final) return M::more;
    if (next.at_end() || next.rest()[0] != '{') return M::ok;
    c = next;
  }
}

// Readers, one per layout. Each starts right after its marker.

// Hermes: <tool_call> {JSON} </tool_call>; the XML body of Qwen3-Coder is
// taken too (<tool_call>\n<function=...), as Qwen3 models mix them.
M xml_function(Cursor& c, const Ctx& ctx, RawCall* call);
M tool_call_tag(Cursor& c, const Ctx& ctx, Section* sec) {
  c.ws();
  if (c.at_end()) return c.final ? M::no : M::more;
  RawCall call;
  if (c.rest()[0] == '{') {
    Json o;
    SYNAPSE_TRY(c.json(&o));
    if (!call_from_object(o, ctx, &call)) return M::no;
  } else {
    SYNAPSE_TRY(c.lit("<function="));
    SYNAPSE_TRY(xml_function(c, ctx, &call));
  }
  c.ws();
  SYNAPSE_TRY(c.close("</tool_call>"));
  sec->calls.push_back(std::move(call));
  return M::ok;
}

// Qwen3-Coder, after "<function=": N>\n(<parameter=K>\nV\n</parameter>\n)*</function>
M xml_function(Cursor& c, const Ctx& ctx, RawCall* call) {
  std::string name;
  SYNAPSE_TRY(c.name(">", &name));
  if (!ctx.tools.known(name)) return M::no;
  Json args = Json::object();
  for (;;) {
    c.ws();
    size_t which = 0;
    SYNAPSE_TRY(c.one_of({"<parameter=", "</function>"}, &which));
    if (which == 1) break;
    std::string_view key, value;
    SYNAPSE_TRY(c.key(">", &key));
    SYNAPSE_TRY(c.until("</parameter>", &value));
    // The template writes the value between newlines.
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    args[std::string(key)] = typed_value(ctx, name, key, value);
  }
  call->name = std::move(name);
  call->arguments = std::move(args);
  return M::ok;
}

// Qwen3-Coder's first call may leave out <tool_call>: <function=...>...</function></tool_call>
M function_tag_xml(Cursor& c, const Ctx& ctx, Section* sec) {
  RawCall call;
  SYNAPSE_TRY(xml_function(c, ctx, &call));
  c.ws();
  if (c.close("</tool_call>") == M::more) return M::more;
  sec->calls.push_back(std::move(call));
  return M::ok;
}

// GLM 4.5: <tool_call>N\n(<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n)*</tool_call>
M glm_tool_call(Cursor& c, const Ctx& ctx, Section* sec) {
  c.ws();
  size_t i = c.p;
  while (i < c.s.size() && is_name_char(c.s[i]) && i - c.p <= kMaxName) ++i;
  if (i == c.s.size()) return c.final ? M::no : M::more;
  if (i == c.p || i - c.p > kMaxName) return M::no;
  RawCall call;
  call.name = std::string(c.s.substr(c.p, i - c.p));
  if (!ctx.tools.known(call.name)) return M::no;
  c.p = i;
  call.arguments = Json::object();
  for (;;) {
    c.ws();
    size_t which = 0;
    SYNAPSE_TRY(c.one_of({"<arg_key>", "</tool_call>"}, &which));
    if (which == 1) break;
    std::string_view key, value;
    SYNAPSE_TRY(c.key("</arg_key>", &key));
    c.ws();
    SYNAPSE_TRY(c.lit("<arg_value>"));
    SYNAPSE_TRY(c.until("</arg_value>", &value));
    call.arguments[std::string(trim(key))] = typed_value(ctx, call.name, trim(key), value);
  }
  sec->calls.push_back(std::move(call));
  return M::ok;
}

// MiniMax-M2: <minimax:tool_call>\n(<invoke name="N">\n(<parameter name="K">V</parameter>\n)*</invoke>\n)*</minimax:tool_call>
M minimax_calls(Cursor& c, const Ctx& ctx, Section* sec) {
  for (;;) {
    c.ws();
    size_t which = 0;
    if (c.final && c.at_end() && !sec->calls.empty()) return M::ok;
    SYNAPSE_TRY(c.one_of({"<invoke name=\"", "</minimax:tool_call>"}, &which));
    if (which == 1) return sec->calls.empty() ? M::no : M::ok;
    RawCall call;
    SYNAPSE_TRY(c.name("\">", &call.name));
    if (!ctx.tools.known(call.name)) return M::no;
    call.arguments = Json::object();
    for (;;) {
      c.ws();
      SYNAPSE_TRY(c.one_of({"<parameter name=\"", "</invoke>"}, &which));
      if (which == 1) break;
      std::string_view key, value;
      SYNAPSE_TRY(c.key("\">", &key));
      SYNAPSE_TRY(c.until("</parameter>", &value));
      call.arguments[std::string(key)] = typed_value(ctx, call.name, key, value);
    }
    sec->calls.push_back(std::move(call));
  }
}

// Mistral, after [TOOL_CALLS]: a JSON array (Nemo), or N[ARGS]{...} (Ministral
// 3, Devstral), or N[CALL_ID]ID[ARGS]{...} (Mistral Small 3.2).
M mistral_call(Cursor& c, const Ctx& ctx, Section* sec) {
  c.ws();
  if (c.at_end()) return c.final ? M::no : M::more;
  if (c.rest()[0] == '[' || c.rest()[0] == '{') return json_calls(c, ctx, sec);
  RawCall call;
  SYNAPSE_TRY(c.name("[", &call.name));
  if (!ctx.tools.known(call.name)) return M::no;
  c.p--;  // the '[' begins the next marker
  size_t which = 0;
  SYNAPSE_TRY(c.one_of({"[CALL_ID]", "[ARGS]"}, &which));
  if (which == 0) {
    std::string_view id;
    SYNAPSE_TRY(c.until("[ARGS]", &id));
    if (id.size() > kMaxName) return M::no;
    call.id = std::string(trim(id));
  }
  c.ws();
  SYNAPSE_TRY(c.json(&call.arguments));
  if (!call.arguments.is_object()) return M::no;
  sec->calls.push_back(std::move(call));
  return M::ok;
}

// A JSON array (or objects) of calls closed by a marker: Nemotron's
// <TOOLCALL>, Apriel's <tool_calls>, Command R7B's <|START_ACTION|>, ...
template <const char* Close>
M json_calls_closed(Cursor& c, const Ctx& ctx, Section* sec) {
  SYNAPSE_TRY(json_calls(c, ctx, sec));
  c.ws();
  return c.close(Close);
}
constexpr char kEmpty[] = "";
constexpr char kToolCallClose[] = "</TOOLCALL>";
constexpr char kToolCallsClose[] = "</tool_calls>";
constexpr char kEndAction[] = "<|END_ACTION|>";

// Functionary v3.1, after "<function=": N>{...}</function>
M functionary_call(Cursor& c, const Ctx& ctx, Section* sec) {
  RawCall call;
  SYNAPSE_TRY(c.name(">", &call.name));
  if (!ctx.tools.known(call.name)) return M::no;
  c.ws();
  SYNAPSE_TRY(c.json(&call.arguments));
  if (!call.arguments.is_object()) return M::no;
  c.ws();
  SYNAPSE_TRY(c.close("</function>"));
  sec->calls.push_back(std::move(call));
  return M::ok;
}

// DeepSeek, after <｜tool▁calls▁begin｜>: calls, each
//   R1:   <｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\n{...}\n```<｜tool▁call▁end｜>
//   V3.1: <｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
// then <｜tool▁calls▁end｜>.
M deepseek_calls(Cursor& c, const Ctx& ctx, Section* sec) {
  for (;;) {
    c.ws();
    if (c.final && c.at_end() && !sec->calls.empty()) return M::ok;
    size_t which = 0;
    SYNAPSE_TRY(c.one_of({"<｜tool▁call▁begin｜>", "<｜tool▁calls▁end｜>"}, &which));
    if (which == 1) return sec->calls.empty() ? M::no : M::ok;
    std::string_view head;
    SYNAPSE_TRY(c.until("<｜tool▁sep｜>", &head));
    if (head.size() > kMaxName) return M::no;
    RawCall call;
    c.ws();
    if (c.at_end()) return c.final ? M::no : M::more;
    if (c.rest()[0] == '{') {  // V3.1: the head is the name
      call.name = std::string(trim(head));
    } else {  // R1: the head is the type ("function"); the name follows
      SYNAPSE_TRY(c.name("\n", &call.name));
      c.ws();
      size_t fence = 0;
      SYNAPSE_TRY(c.one_of({"```json", "```"}, &fence));
      c.ws();
    }
    if (!ctx.tools.known(call.name)) return M::no;
    SYNAPSE_TRY(c.json(&call.arguments));
    if (!call.arguments.is_object()) return M::no;
    c.ws();
    if (c.lit("```") == M::more) return M::more;
    c.ws();
    SYNAPSE_TRY(c.close("<｜tool▁call▁end｜>"));
    sec->calls.push_back(std::move(call));
  }
}

// Kimi K2, after <|tool_calls_section_begin|>: calls, each
// <|tool_call_begin|>functions.N:IDX<|tool_call_argument_begin|>{...}<|tool_call_end|>,
// then <|tool_calls_section_end|>. The id is the header (its template renders it).
M kimi_calls(Cursor& c, const Ctx& ctx, Section* sec) {
  for (;;) {
    c.ws();
    if (c.final && c.at_end() && !sec->calls.empty()) return M::ok;
    size_t which = 0;
    SYNAPSE_TRY(c.one_of({"<|tool_call_begin|>", "<|tool_calls_section_end|>"}, &which));
    if (which == 1) return sec->calls.empty() ? M::no : M::ok;
    std::string_view head;
    SYNAPSE_TRY(c.until("<|tool_call_argument_begin|>", &head));
    head = trim(head);
    if (head.size() > kMaxName) return M::no;
    RawCall call;
    call.id = std::string(head);
    std::string_view name = head;
    if (name.substr(0, 10) == "functions.") name.remove_prefix(10);
    if (const size_t colon = name.rfind(':'); colon != npos) name = name.substr(0, colon);
    call.name = std::string(name);
    if (!ctx.tools.known(call.name)) return M::no;
    c.ws();
    SYNAPSE_TRY(c.json(&call.arguments));
    if (!call.arguments.is_object()) return M::no;
    c.ws();
    SYNAPSE_TRY(c.close("<|tool_call_end|>"));
    sec->calls.push_back(std::move(call));
  }
}

// Llama 3.x at the start of the reply: {"name": N, "parameters": {...}}, more
// separated by ';' (Llama 3.2 writes them so).
M llama3_json(Cursor& c, const Ctx& ctx, Section* sec) {
  SYNAPSE_TRY(c.first_key_in({"name", "type", "function"}));
  return json_calls(c, ctx, sec);
}

// A Python literal of a builtin call's argument: a string, a number, True,
// False or None.
M python_literal(Cursor& c, Json* out) {
  if (c.at_end()) return c.final ? M::no : M::more;
  const char q = c.rest()[0];
  if (q == '"' || q == '\'') {
    std::string v;
    for (size_t i = c.p + 1; i < c.s.size(); ++i) {
      const char ch = c.s[i];
      if (ch == q) {
        *out = v;
        c.p = i + 1;
        return M::ok;
      }
      if (ch == '\\') {
        if (++i == c.s.size()) break;
        const char e = c.s[i];
        v += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        v += ch;
      }
    }
    return c.final ? M::no : M::more;
  }
  size_t i = c.p;
  while (i < c.s.size() && (is_name_char(c.s[i]) || c.s[i] == '+')) ++i;
  if (i == c.s.size()) return c.final ? M::no : M::more;
  const std::string_view word = c.s.substr(c.p, i - c.p);
  c.p = i;
  if (word == "True") {
    *out = true;
  } else if (word == "False") {
    *out = false;
  } else if (word == "None") {
    *out = nullptr;
  } else if (auto v = parse_json(word); v && v->is_number()) {
    *out = *v;
  } else {
    return M::no;
  }
  return M::ok;
}

// Llama 3.1 after <|python_tag|>: JSON calls, a builtin tool's
// N.call(k="v", ...), or code for a "python"/"code_interpreter" tool (the
// rest of the reply).
M python_tag(Cursor& c, const Ctx& ctx, Section* sec) {
  c.ws();
  if (c.at_end()) return c.final ? M::no : M::more;
  if (c.rest()[0] == '{') return json_calls(c, ctx, sec);
  Cursor b = c;
  RawCall call;
  size_t e = b.p;
  while (e < b.s.size() && e - b.p <= kMaxName && (std::isalnum(static_cast<unsigned char>(b.s[e])) || b.s[e] == '_')) ++e;
  M m = e == b.s.size() ? (b.final ? M::no : M::more) : e == b.p ? M::no : M::ok;
  if (m == M::ok) {
    call.name = std::string(b.s.substr(b.p, e - b.p));
    b.p = e;
    m = b.lit(".call(");
  }
  if (m == M::ok && ctx.tools.known(call.name)) {
    call.arguments = Json::object();
    for (;;) {
      b.ws();
      if (b.lit(")") == M::ok) break;
      std::string key;
      m = b.name("=", &key);
      if (m != M::ok) break;
      b.ws();
      Json v;
      m = python_literal(b, &v);
      if (m != M::ok) break;
      call.arguments[key] = std::move(v);
      b.ws();
      if (b.lit(",") == M::more) return M::more;
    }
    if (m == M::more) return M::more;
    if (m == M::ok) {
      c = b;
      sec->calls.push_back(std::move(call));
      return M::ok;
    }
  } else if (m == M::more) {
    return M::more;
  }
  if (!ctx.tools.has("python") && !ctx.tools.has("code_interpreter")) return M::no;
  if (!c.final) return M::more;  // the code runs to the end of the reply
  call = RawCall{};
  call.name = ctx.tools.has("python") ? "python" : "code_interpreter";
  call.arguments = Json::object({{"code", std::string(trim(c.rest()))}});
  c.p = c.s.size();
  sec->calls.push_back(std::move(call));
  return M::ok;
}

// llama.cpp's generic form, the whole reply: {"tool_call": {...}},
// {"tool_calls": [...]} or {"response": ...}.
M generic_reply(Cursor& c, const Ctx& ctx, Section* sec) {
  SYNAPSE_TRY(c.first_key_in({"tool_call", "tool_calls", "response"}));
  Json o;
  SYNAPSE_TRY(c.json(&o));
  if (!o.is_object()) return M::no;
  if (o.contains("tool_calls") && o["tool_calls"].is_array() && !o["tool_calls"].empty()) {
    for (const Json& e : o["tool_calls"]) {
      RawCall call;
      if (!call_from_object(e, ctx, &call)) return M::no;
      sec->calls.push_back(std::move(call));
    }
    return M::ok;
  }
  if (o.contains("tool_call")) {
    RawCall call;
    if (!call_from_object(o["tool_call"], ctx, &call)) return M::no;
    sec->calls.push_back(std::move(call));
    return M::ok;
  }
  if (o.contains("response")) {
    sec->content = o["response"].is_string() ? o["response"].get<std::string>() : dump(o["response"]);
    return M::ok;
  }
  return M::no;
}

M read(Reader r, Cursor& c, const Ctx& ctx, Section* sec) {
  switch (r) {
    case Reader::tool_call_tag: return tool_call_tag(c, ctx, sec);
    case Reader::function_tag_xml: return function_tag_xml(c, ctx, sec);
    case Reader::glm: return glm_tool_call(c, ctx, sec);
    case Reader::minimax: return minimax_calls(c, ctx, sec);
    case Reader::mistral: return mistral_call(c, ctx, sec);
    case Reader::nemotron: return json_calls_closed<kToolCallClose>(c, ctx, sec);
    case Reader::apriel: return json_calls_closed<kToolCallsClose>(c, ctx, sec);
    case Reader::granite: return json_calls_closed<kEmpty>(c, ctx, sec);
    case Reader::command_r7b: return json_calls_closed<kEndAction>(c, ctx, sec);
    case Reader::firefunction: return json_calls_closed<kEmpty>(c, ctx, sec);
    case Reader::functionary: return functionary_call(c, ctx, sec);
    case Reader::deepseek: return deepseek_calls(c, ctx, sec);
    case Reader::kimi: return kimi_calls(c, ctx, sec);
    case Reader::llama3_json: return llama3_json(c, ctx, sec);
    case Reader::python_tag: return python_tag(c, ctx, sec);
    case Reader::generic: return generic_reply(c, ctx, sec);
  }
  return M::no;
}

}  // namespace

std::optional<Json> parse_json(std::string_view s) {
  Json j = Json::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Tools::Tools(const nlohmann::json& tools) {
  if (!tools.is_array()) return;
  for (const auto& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
    const auto& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string()) continue;
    fns_.push_back({f["name"].get<std::string>(), f.contains("parameters") ? f["parameters"] : nlohmann::json()});
  }
}

bool Tools::has(std::string_view name) const {
  return std::any_of(fns_.begin(), fns_.end(), [&](const Fn& f) { return f.name == name; });
}

std::vector<std::string> Tools::param_types(std::string_view fn, std::string_view param) const {
  for (const Fn& f : fns_) {
    if (f.name != fn || !f.parameters.is_object()) continue;
    const auto& props = f.parameters.value("properties", nlohmann::json());
    if (!props.is_object() || !props.contains(std::string(param))) return {};
    const auto& schema = props[std::string(param)];
    if (!schema.is_object() || !schema.contains("type")) return {};
    const auto& type = schema["type"];
    std::vector<std::string> out;
    if (type.is_string()) out.push_back(type.get<std::string>());
    if (type.is_array())
      for (const auto& t : type)
        if (t.is_string()) out.push_back(t.get<std::string>());
    return out;
  }
  return {};
}

// ---------------------------------------------------------------------------
// What each family writes.

Spec spec_of(ToolCallFormat f, bool tools) {
  using F = ToolCallFormat;
  Spec s;
  s.reasoning_starts = {"<think>"};
  s.reasoning_ends = {{"</think>"}};
  std::vector<Trigger>& t = s.triggers;
  switch (f) {
    case F::none: break;
    case F::generic: t = {{"{", Reader::generic, true, true}}; break;
    case F::llama3_json:
      t = {{"{", Reader::llama3_json, true, true}, {"<|python_tag|>", Reader::python_tag}};
      break;
    case F::hermes: t = {{"<tool_call>", Reader::tool_call_tag}}; break;
    case F::qwen3_coder_xml:
      t = {{"<tool_call>", Reader::tool_call_tag}, {"<function=", Reader::function_tag_xml}};
      // Qwen3.5 and Nemotron 3 may go from thinking to a call without </think>.
      if (tools) s.reasoning_ends.push_back({"<tool_call>", false});
      break;
    case F::mistral_nemo:
    case F::mistral:
    case F::mistral_call_id:
      t = {{"[TOOL_CALLS]", Reader::mistral}};
      s.reasoning_starts = {"[THINK]"};
      s.reasoning_ends = {{"[/THINK]"}};
      break;
    case F::gpt_oss_harmony: break;  // its own reader (channels)
    case F::deepseek_r1:
    case F::deepseek_v3_1:
      t = {{"<｜tool▁calls▁begin｜>", Reader::deepseek}};
      if (tools) s.reasoning_ends.push_back({"<｜tool▁calls▁begin｜>", false});
      break;
    case F::kimi_k2: t = {{"<|tool_calls_section_begin|>", Reader::kimi}}; break;
    case F::glm_4_5: t = {{"<tool_call>", Reader::glm}}; break;
    case F::minimax_m2: t = {{"<minimax:tool_call>", Reader::minimax}}; break;
    case F::functionary_v3_1: t = {{"<function=", Reader::functionary}}; break;
    case F::firefunction_v2: t = {{"functools", Reader::firefunction}}; break;
    case F::nemotron_v2: t = {{"<TOOLCALL>", Reader::nemotron}}; break;
    case F::apriel: t = {{"<tool_calls>", Reader::apriel}}; break;
    case F::granite:
      t = {{"<|tool_call|>", Reader::granite}};
      s.dropped = {"<response>", "</response>"};
      break;
    case F::command_r7b:
      t = {{"<|START_ACTION|>", Reader::command_r7b}};
      s.reasoning_starts = {"<|START_THINKING|>"};
      s.reasoning_ends = {{"<|END_THINKING|>"}};
      // Command R7B wraps its answer in RESPONSE markers, Cohere2 MoE in TEXT.
      s.dropped = {"<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"};
      break;
  }
  if (!tools) t.clear();
  return s;
}

M read_section(Reader r, const Tools& tools, std::string_view text, size_t begin, bool final, Section* sec,
               size_t* end) {
  Cursor c{text, begin, final};
  const Ctx ctx{tools};
  const M m = read(r, c, ctx, sec);
  if (m == M::ok) *end = c.p;
  return m;
}

}  // namespace synapse::runtime::readers

// Grammars that force a tool call in a family's own syntax, and the checks of
// `tools` and of a history's tool calls. See chat_output.hpp.
#include <algorithm>
#include <cstdio>
#include <set>

#include "grammar/json_schema_text.hpp"
#include "runtime/chat_output.hpp"
#include "synapse/error.hpp"

namespace synapse::runtime {

namespace {

// Ordered: a tool's properties keep the order the client declared (llama.cpp
// forces them in that order too).
using json = nlohmann::ordered_json;
using F = ToolCallFormat;

[[noreturn]] void fail(const std::string& msg) { throw Error(Errc::invalid_argument, msg); }

// ---------------------------------------------------------------------------
// GBNF text

// A GBNF string literal of s (UTF-8 as is, quotes, backslashes and control
// characters escaped): the converter's writer, so both spell literals alike.
std::string lit(std::string_view s) { return grammar::schema::gbnf_literal(s); }

bool is_rule_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// Renames every rule of a GBNF grammar (definitions and references) by
// prefixing `prefix`: a lexer that copies comments, string literals,
// character classes and {m,n} counts as they are and prefixes every word
// outside them (in GBNF the only words are rule names).
std::string prefix_rules(std::string_view g, std::string_view prefix) {
  std::string out;
  out.reserve(g.size() * 5 / 4);
  size_t i = 0;
  const auto copy_quoted = [&](char close) {  // from the opening character to `close`, escapes included
    const size_t b = i++;
    while (i < g.size() && g[i] != close) i += g[i] == '\\' ? 2 : 1;
    i = std::min(i + 1, g.size());
    out.append(g.substr(b, i - b));
  };
  while (i < g.size()) {
    const char c = g[i];
    if (c == '#') {
      const size_t e = std::min(g.find('\n', i), g.size());
      out.append(g.substr(i, e - i));
      i = e;
    } else if (c == '"') {
      copy_quoted('"');
    } else if (c == '[') {
      copy_quoted(']');
    } else if (c == '{') {
      copy_quoted('}');
    } else if (is_rule_char(c)) {
      const size_t b = i;
      while (i < g.size() && is_rule_char(g[i])) ++i;
      out.append(prefix);
      out.append(g.substr(b, i - b));
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> cps;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    cps.push_back(cp);
    i += n;
  }
  return cps;
}

std::string class_char(uint32_t cp) {
  char b[16];
  std::snprintf(b, sizeof b, "\\U%08X", cp);
  return b;
}

std::string cp_literal(uint32_t cp) {
  std::string s;
  grammar::schema::append_utf8(s, cp);
  return lit(s);
}

// Rules `name` for any text that does not contain `stop`: the states of a
// KMP matcher of `stop` as rules (state k: the text read ends with the first
// k characters of stop), none of which may reach the whole of it.
std::string until_rules(const std::string& name, std::string_view stop) {
  const std::vector<uint32_t> t = code_points(stop);
  const size_t m = t.size();
  std::vector<size_t> fail(m, 0);  // KMP failure function
  for (size_t k = 1, j = 0; k < m; ++k) {
    while (j > 0 && t[k] != t[j]) j = fail[j - 1];
    if (t[k] == t[j]) ++j;
    fail[k] = j;
  }
  const auto next = [&](size_t k, uint32_t c) {
    while (k > 0 && t[k] != c) k = fail[k - 1];
    return t[k] == c ? k + 1 : 0;
  };
  const std::set<uint32_t> chars(t.begin(), t.end());
  std::string others = "[^";
  for (uint32_t c : chars) others += class_char(c);
  others += "]";
  std::string g = name + " ::= " + name + "-0\n";
  for (size_t k = 0; k < m; ++k) {
    g += name + "-" + std::to_string(k) + " ::= | " + others + " " + name + "-0";
    for (uint32_t c : chars) {
      const size_t n = next(k, c);
      if (n < m) g += " | " + cp_literal(c) + " " + name + "-" + std::to_string(n);
    }
    g += "\n";
  }
  return g;
}

// ---------------------------------------------------------------------------
// The families' calls

const json& function_of(const json& tool) { return tool.at("function"); }

// A tool's parameters schema ({"type": "object"} when it gives none).
json parameters_of(const json& tool) {
  const json& f = function_of(tool);
  if (!f.contains("parameters") || f["parameters"].empty()) return json{{"type", "object"}};
  return f["parameters"];
}

std::string where(size_t i, const json& tool) {
  return "tools[" + std::to_string(i) + "] (function '" + function_of(tool)["name"].get<std::string>() + "')";
}

// GBNF for a schema, its rules prefixed; its root is `prefix + "root"`.
std::string schema_rules(const json& schema, const std::string& prefix, size_t i, const json& tool,
                         const GrammarLimits& limits, const std::string& what) {
  try {
    return prefix_rules(json_schema_to_gbnf(schema.dump(), limits), prefix);
  } catch (const Error& e) {
    fail(where(i, tool) + ": " + what + ": " + e.what());
  }
}

bool is_string_only(const json& schema) {
  if (!schema.is_object() || !schema.contains("type")) return false;
  const json& t = schema["type"];
  return (t.is_string() && t == "string") || (t.is_array() && t.size() == 1 && t[0] == "string");
}

// How an XML family writes one parameter: its opening (the key in it), the
// closing that ends the value (never inside a string value), and the text
// after the closing.
struct XmlParam {
  std::string open_before, open_after, value_before, close, after;
};
XmlParam xml_param(F f) {
  switch (f) {
    case F::qwen3_coder_xml: return {"<parameter=", ">\n", "", "\n</parameter>", "\n"};
    case F::glm_4_5: return {"<arg_key>", "</arg_key>\n<arg_value>", "", "</arg_value>", "\n"};
    default: return {"<parameter name=\"", "\">", "", "</parameter>", "\n"};  // minimax_m2
  }
}

// The arguments of an XML family: each declared property once, in order,
// required ones always, others optional; a string property's value is text
// up to the closing marker, another's is JSON for its schema.
std::string xml_arguments(F f, const json& tool, size_t i, const std::string& rule, const GrammarLimits& limits,
                          std::string* rules) {
  const json params = parameters_of(tool);
  const json props = params.is_object() ? params.value("properties", json::object()) : json();
  if (!params.is_object() || (params.contains("type") && params["type"] != "object") || !props.is_object())
    fail(where(i, tool) + ": parameters: " + format_name(f) +
         " writes each argument as a parameter, so parameters must be an object schema with properties");
  std::set<std::string> required;
  if (params.contains("required") && params["required"].is_array())
    for (const json& r : params["required"])
      if (r.is_string()) required.insert(r.get<std::string>());
  const XmlParam x = xml_param(f);
  std::string seq;
  size_t j = 0;
  for (const auto& [key, schema] : props.items()) {
    const std::string p = rule + "-p" + std::to_string(j++);
    std::string value;
    std::vector<std::string> choices;  // a string enum or const: the values as written
    if (schema.is_object() && schema.contains("const") && schema["const"].is_string())
      choices.push_back(schema["const"].get<std::string>());
    if (schema.is_object() && schema.contains("enum") && schema["enum"].is_array() && is_string_only(schema))
      for (const json& e : schema["enum"])
        if (e.is_string()) choices.push_back(e.get<std::string>());
    if (!choices.empty()) {
      value = "(";
      for (const std::string& c : choices) value += (value.size() > 1 ? " | " : "") + lit(c);
      value += ")";
    } else if (is_string_only(schema)) {
      // A string value may not contain the closing marker; the text after
      // the value starts with a character the marker cannot continue with.
      std::string stop = x.close;
      if (!stop.empty() && stop[0] == '\n') stop.erase(0, 1);
      *rules += until_rules(p + "-text", stop);
      value = p + "-text";
    } else {
      json s = schema;
      for (const char* defs : {"$defs", "definitions"})
        if (s.is_object() && params.contains(defs) && !s.contains(defs)) s[defs] = params[defs];
      *rules += schema_rules(s, p + "-", i, tool, limits, "parameters.properties." + key);
      value = p + "-root";
    }
    *rules += p + " ::= " + lit(x.open_before + key + x.open_after + x.value_before) + " " + value + " " +
              lit(x.close + x.after) + "\n";
    seq += " " + p + (required.count(key) ? "" : "?");
  }
  return seq;
}

// The GBNF of one call to tool i (rule `rule`), and its helper rules.
std::string call_rule(F f, const json& tool, size_t i, const std::string& rule, const GrammarLimits& limits) {
  const std::string name = function_of(tool)["name"].get<std::string>();
  std::string rules;
  std::string body;
  if (f == F::qwen3_coder_xml || f == F::glm_4_5 || f == F::minimax_m2) {
    const std::string args = xml_arguments(f, tool, i, rule, limits, &rules);
    if (f == F::qwen3_coder_xml) {
      body = lit("<tool_call>\n<function=" + name + ">\n") + args + " " + lit("</function>\n</tool_call>");
    } else if (f == F::glm_4_5) {
      body = lit("<tool_call>" + name + "\n") + args + " " + lit("</tool_call>");
    } else {
      body = lit("<invoke name=\"" + name + "\">\n") + args + " " + lit("</invoke>\n");
    }
    return rules + rule + " ::= " + body + "\n";
  }
  rules = schema_rules(parameters_of(tool), rule + "-", i, tool, limits, "parameters");
  const std::string args = rule + "-root";
  const auto object = [&](std::string_view name_key, std::string_view args_key) {
    return lit("{\"" + std::string(name_key) + "\": \"" + name + "\", \"" + std::string(args_key) + "\": ") + " " +
           args + " " + lit("}");
  };
  switch (f) {
    case F::hermes:
      body = lit("<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": ") + " " + args + " " +
             lit("}\n</tool_call>");
      break;
    case F::llama3_json: body = object("name", "parameters"); break;
    case F::mistral_nemo:
      body = lit("{\"name\": \"" + name + "\", \"arguments\": ") + " " + args + " " + lit(", \"id\": \"") +
             " [a-zA-Z0-9]{9} " + lit("\"}");
      break;
    case F::mistral: body = lit("[TOOL_CALLS]" + name + "[ARGS]") + " " + args; break;
    case F::mistral_call_id:
      body = lit("[TOOL_CALLS]" + name + "[CALL_ID]") + " [a-zA-Z0-9]{9} " + lit("[ARGS]") + " " + args;
      break;
    case F::gpt_oss_harmony:
      body = lit("<|channel|>commentary to=functions." + name + " <|constrain|>json<|message|>") + " " + args;
      break;
    case F::deepseek_r1:
      body = lit("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + name + "\n```json\n") + " " + args + " " +
             lit("\n```<｜tool▁call▁end｜>");
      break;
    case F::deepseek_v3_1:
      body = lit("<｜tool▁call▁begin｜>" + name + "<｜tool▁sep｜>") + " " + args + " " + lit("<｜tool▁call▁end｜>");
      break;
    case F::kimi_k2:
      body = lit("<|tool_call_begin|>functions." + name + ":") + " [0-9]{1,2} " +
             lit("<|tool_call_argument_begin|>") + " " + args + " " + lit("<|tool_call_end|>");
      break;
    case F::functionary_v3_1: body = lit("<function=" + name + ">") + " " + args + " " + lit("</function>"); break;
    case F::command_r7b:
      body = lit("{\"tool_call_id\": \"") + " [0-9]{1,2} " + lit("\", \"tool_name\": \"" + name + "\", \"parameters\": ") +
             " " + args + " " + lit("}");
      break;
    case F::generic:
    case F::firefunction_v2:
    case F::nemotron_v2:
    case F::apriel:
    case F::granite:
    default: body = object("name", "arguments"); break;
  }
  return rules + rule + " ::= " + body + "\n";
}

// How calls are put together: each on its own (sep between them), or inside
// a section (open ... close) with sep between them.
struct Layout {
  std::string open, sep, close;
  bool single = false;  // one call per reply, whatever `parallel` says
};
Layout layout_of(F f, bool parallel) {
  switch (f) {
    case F::hermes:
    case F::qwen3_coder_xml:
    case F::glm_4_5:
    case F::llama3_json: return {"", "\n", ""};
    case F::mistral:
    case F::mistral_call_id:
    case F::functionary_v3_1: return {"", "", ""};
    case F::mistral_nemo: return {"[TOOL_CALLS][", ", ", "]"};
    case F::gpt_oss_harmony: return {"", "", "", true};  // a call ends the turn (<|call|>)
    case F::deepseek_r1:
    case F::deepseek_v3_1: return {"<｜tool▁calls▁begin｜>", "", "<｜tool▁calls▁end｜>"};
    case F::kimi_k2: return {"<|tool_calls_section_begin|>", "", "<|tool_calls_section_end|>"};
    case F::minimax_m2: return {"<minimax:tool_call>\n", "", "</minimax:tool_call>"};
    case F::firefunction_v2: return {" functools[", ", ", "]"};
    case F::nemotron_v2: return {"<TOOLCALL>[", ", ", "]</TOOLCALL>"};
    case F::apriel: return {"<tool_calls>[", ", ", "]</tool_calls>"};
    case F::granite: return {"<|tool_call|>[", ", ", "]"};
    case F::command_r7b: return {"<|START_ACTION|>[", ", ", "]<|END_ACTION|>"};
    case F::generic:
      return parallel ? Layout{"{\"tool_calls\": [", ", ", "]}"} : Layout{"{\"tool_call\": ", "", "}"};
    case F::none: break;
  }
  return {};
}

// The reasoning block a reply may open with: its start and end markers.
std::pair<std::string, std::string> reasoning_markers(F f) {
  switch (f) {
    case F::mistral_nemo:
    case F::mistral:
    case F::mistral_call_id: return {"[THINK]", "[/THINK]"};
    case F::command_r7b: return {"<|START_THINKING|>", "<|END_THINKING|>"};
    case F::gpt_oss_harmony: return {"<|channel|>analysis<|message|>", "<|end|>"};
    default: return {"<think>", "</think>"};
  }
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

std::string type_name(const json& v) { return v.type_name(); }

}  // namespace

std::string tool_call_grammar(ToolCallFormat f, const json& tools, const ToolChoice& choice, bool parallel,
                              const ToolGrammarOptions& options) {
  if (f == F::none) fail("tool_choice: the model's chat template has no tool call syntax (format none)");
  validate_tools(tools);
  if (tools.empty()) fail("tool_choice: no tools to call");
  std::vector<size_t> chosen;
  for (size_t i = 0; i < tools.size(); ++i)
    if (choice.kind == ToolChoice::Kind::required || function_of(tools[i])["name"] == choice.name) chosen.push_back(i);
  if (chosen.empty()) fail("tool_choice: function '" + choice.name + "' is not among the tools");

  std::string rules;
  std::string alts;
  for (size_t i : chosen) {
    const std::string rule = "call" + std::to_string(i);
    rules += call_rule(f, tools[i], i, rule, options.limits);
    alts += (alts.empty() ? "" : " | ") + rule;
  }
  const Layout l = layout_of(f, parallel);
  const bool many = parallel && !l.single;
  std::string g = "call ::= " + alts + "\n";
  g += "calls ::= " + (l.open.empty() ? "" : lit(l.open) + " ") + "call" +
       (many ? " (" + (l.sep.empty() ? "" : lit(l.sep) + " ") + "call)*" : "") +
       (l.close.empty() ? "" : " " + lit(l.close)) + "\n";
  // An optional (or, when the prompt opened it, a required) reasoning block
  // before the calls.
  std::string prefix;
  if (options.allow_reasoning || options.thinking_open) {
    const auto [start, end] = reasoning_markers(f);
    const std::string after = f == F::gpt_oss_harmony ? "<|start|>assistant" : "";
    g += until_rules("reasoning-text", end);
    g += "reasoning-ws ::= [ \\t\\n]{0,4}\n";
    const std::string tail = "reasoning-text " + lit(end + after) + (f == F::gpt_oss_harmony ? "" : " reasoning-ws");
    prefix = options.thinking_open ? tail + " " : "(" + lit(start) + " " + tail + ")? ";
  }
  return "root ::= " + prefix + "calls\n" + g + rules;
}

void validate_tools(const json& tools) {
  if (!tools.is_array()) fail("tools: must be an array, not " + type_name(tools));
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object()) fail(at + ": must be an object, not " + type_name(t));
    if (!t.contains("type")) fail(at + ".type: missing (must be \"function\")");
    if (t["type"] != "function") fail(at + ".type: must be \"function\", not " + t["type"].dump());
    if (!t.contains("function")) fail(at + ".function: missing");
    const json& fn = t["function"];
    if (!fn.is_object()) fail(at + ".function: must be an object, not " + type_name(fn));
    if (!fn.contains("name")) fail(at + ".function.name: missing");
    if (!fn["name"].is_string()) fail(at + ".function.name: must be a string, not " + type_name(fn["name"]));
    const std::string name = fn["name"].get<std::string>();
    if (!valid_name(name))
      fail(at + ".function.name: " + fn["name"].dump() +
           " is not 1-64 letters, digits, underscores, dashes or dots");
    if (!names.insert(name).second) fail(at + ".function.name: '" + name + "' names two tools");
    if (fn.contains("description") && !fn["description"].is_string() && !fn["description"].is_null())
      fail(at + ".function.description: must be a string, not " + type_name(fn["description"]));
    if (fn.contains("parameters") && !fn["parameters"].is_object() && !fn["parameters"].is_null())
      fail(at + ".function.parameters: must be a JSON Schema object, not " + type_name(fn["parameters"]));
    if (fn.contains("strict") && !fn["strict"].is_boolean() && !fn["strict"].is_null())
      fail(at + ".function.strict: must be a boolean, not " + type_name(fn["strict"]));
  }
}

void validate_history(const json& messages) {
  if (!messages.is_array()) fail("messages: must be an array, not " + type_name(messages));
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) continue;
    const std::string role = m["role"].get<std::string>();
    if (role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      const json& calls = m["tool_calls"];
      if (!calls.is_array()) fail(at + ".tool_calls: must be an array, not " + type_name(calls));
      for (size_t j = 0; j < calls.size(); ++j) {
        const std::string ct = at + ".tool_calls[" + std::to_string(j) + "]";
        const json& c = calls[j];
        if (!c.is_object()) fail(ct + ": must be an object, not " + type_name(c));
        if (!c.contains("id")) fail(ct + ".id: missing");
        if (!c["id"].is_string() || c["id"].get<std::string>().empty())
          fail(ct + ".id: must be a non-empty string, not " + c["id"].dump());
        if (c.contains("type") && c["type"] != "function")
          fail(ct + ".type: must be \"function\", not " + c["type"].dump());
        if (!c.contains("function")) fail(ct + ".function: missing");
        const json& fn = c["function"];
        if (!fn.is_object()) fail(ct + ".function: must be an object, not " + type_name(fn));
        if (!fn.contains("name")) fail(ct + ".function.name: missing");
        if (!fn["name"].is_string() || fn["name"].get<std::string>().empty())
          fail(ct + ".function.name: must be a non-empty string, not " + fn["name"].dump());
        if (!fn.contains("arguments")) fail(ct + ".function.arguments: missing");
        const json& a = fn["arguments"];
        if (a.is_string()) {
          const json parsed = json::parse(a.get<std::string>(), nullptr, false);
          if (parsed.is_discarded()) fail(ct + ".function.arguments: not valid JSON: " + a.dump());
          if (!parsed.is_object()) fail(ct + ".function.arguments: must hold a JSON object, not " + type_name(parsed));
        } else if (!a.is_object()) {
          fail(ct + ".function.arguments: must be a JSON object or a string holding one, not " + type_name(a));
        }
      }
    } else if (role == "tool") {
      if (!m.contains("tool_call_id")) fail(at + ".tool_call_id: missing");
      if (!m["tool_call_id"].is_string()) fail(at + ".tool_call_id: must be a string, not " + type_name(m["tool_call_id"]));
      if (!m.contains("content")) fail(at + ".content: missing");
      const json& content = m["content"];
      if (content.is_array()) {
        for (size_t k = 0; k < content.size(); ++k) {
          const json& part = content[k];
          const std::string pt = at + ".content[" + std::to_string(k) + "]";
          if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
            fail(pt + ": must be a content part with a type");
          if (part["type"] == "text" && (!part.contains("text") || !part["text"].is_string()))
            fail(pt + ".text: must be a string");
        }
      } else if (!content.is_string()) {
        fail(at + ".content: must be a string or an array of parts, not " + type_name(content));
      }
    }
  }
}

}  // namespace synapse::runtime

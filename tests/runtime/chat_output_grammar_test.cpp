// The grammars that force a tool call in each family's syntax, driven byte
// by byte through the matcher (what they accept the parser reads as the same
// call); the checks of tools and of a history's tool calls.
#include <gtest/gtest.h>

#include <functional>

#include "runtime/chat_output.hpp"
#include "runtime/chat_output_util.hpp"
#include "synapse/error.hpp"
#include "grammar_util.hpp"
#include "synapse/grammar.hpp"

namespace synapse::runtime {
namespace {

using test::accepts;
using test::byte_vocab;

using F = ToolCallFormat;



// Per family: one call to special_function({"arg1": 1}) as the grammar
// writes it, a second call for parallel grammars, and how they join.
struct GrammarCase {
  F format;
  std::string one;      // a whole reply with one call
  std::string two;      // a whole reply with two calls (empty: the family makes one)
  std::string foreign;  // a call in another family's syntax
};

std::vector<GrammarCase> grammar_cases() {
  const std::string hermes = "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>";
  const std::string hermes2 = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  const std::string xml =
      "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>";
  const std::string xml2 =
      "<tool_call>\n<function=get_weather>\n<parameter=location>\nSan Francisco, CA\n</parameter>\n<parameter=unit>\n"
      "celsius\n</parameter>\n</function>\n</tool_call>";
  const std::string mistral = "[TOOL_CALLS]special_function[ARGS]{\"arg1\": 1}";
  const std::string r1 =
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}\n```<｜tool▁call▁end｜>";
  const std::string r1b =
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"city\": \"Oslo\"}\n```<｜tool▁call▁end｜>";
  const std::string v31 = "<｜tool▁call▁begin｜>special_function<｜tool▁sep｜>{\"arg1\": 1}<｜tool▁call▁end｜>";
  const std::string kimi =
      "<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|>";
  const std::string kimi2 =
      "<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{\"city\": \"Oslo\"}<|tool_call_end|>";
  const std::string glm = "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>";
  const std::string glm2 = "<tool_call>get_time\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>";
  const std::string mm = "<invoke name=\"special_function\">\n<parameter name=\"arg1\">1</parameter>\n</invoke>\n";
  const std::string mm2 = "<invoke name=\"get_time\">\n<parameter name=\"city\">Oslo</parameter>\n</invoke>\n";
  const std::string obj = "{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}";
  const std::string obj2 = "{\"name\": \"get_time\", \"arguments\": {\"city\": \"Oslo\"}}";
  return {
      {F::hermes, hermes, hermes + "\n" + hermes2, mistral},
      {F::qwen3_coder_xml, xml, xml + "\n" + xml2, hermes},
      {F::llama3_json, R"({"name": "special_function", "parameters": {"arg1": 1}})",
       "{\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}\n{\"name\": \"get_time\", \"parameters\": "
       "{\"city\": \"Oslo\"}}",
       hermes},
      {F::mistral_nemo, R"([TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "abcDEF123"}])",
       R"([TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "abcDEF123"}, {"name": "get_time", "arguments": {"city": "Oslo"}, "id": "000000001"}])",
       mistral},
      {F::mistral, mistral, mistral + "[TOOL_CALLS]get_time[ARGS]{\"city\": \"Oslo\"}", hermes},
      {F::mistral_call_id, "[TOOL_CALLS]special_function[CALL_ID]abcDEF123[ARGS]{\"arg1\": 1}",
       "[TOOL_CALLS]special_function[CALL_ID]abcDEF123[ARGS]{\"arg1\": 1}[TOOL_CALLS]get_time[CALL_ID]000000001[ARGS]"
       "{\"city\": \"Oslo\"}",
       mistral},
      {F::gpt_oss_harmony, "<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}",
       "", hermes},
      {F::deepseek_r1, "<｜tool▁calls▁begin｜>" + r1 + "<｜tool▁calls▁end｜>",
       "<｜tool▁calls▁begin｜>" + r1 + r1b + "<｜tool▁calls▁end｜>", "<｜tool▁calls▁begin｜>" + v31 + "<｜tool▁calls▁end｜>"},
      {F::deepseek_v3_1, "<｜tool▁calls▁begin｜>" + v31 + "<｜tool▁calls▁end｜>",
       "<｜tool▁calls▁begin｜>" + v31 + v31 + "<｜tool▁calls▁end｜>", "<｜tool▁calls▁begin｜>" + r1 + "<｜tool▁calls▁end｜>"},
      {F::kimi_k2, "<|tool_calls_section_begin|>" + kimi + "<|tool_calls_section_end|>",
       "<|tool_calls_section_begin|>" + kimi + kimi2 + "<|tool_calls_section_end|>", hermes},
      {F::glm_4_5, glm, glm + "\n" + glm2, hermes},
      {F::minimax_m2, "<minimax:tool_call>\n" + mm + "</minimax:tool_call>",
       "<minimax:tool_call>\n" + mm + mm2 + "</minimax:tool_call>", glm},
      {F::functionary_v3_1, "<function=special_function>{\"arg1\": 1}</function>",
       "<function=special_function>{\"arg1\": 1}</function><function=get_time>{\"city\": \"Oslo\"}</function>", hermes},
      {F::firefunction_v2, " functools[" + obj + "]", " functools[" + obj + ", " + obj2 + "]", hermes},
      {F::nemotron_v2, "<TOOLCALL>[" + obj + "]</TOOLCALL>", "<TOOLCALL>[" + obj + ", " + obj2 + "]</TOOLCALL>", hermes},
      {F::apriel, "<tool_calls>[" + obj + "]</tool_calls>", "<tool_calls>[" + obj + ", " + obj2 + "]</tool_calls>", hermes},
      {F::granite, "<|tool_call|>[" + obj + "]", "<|tool_call|>[" + obj + ", " + obj2 + "]", hermes},
      {F::command_r7b,
       "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}]"
       "<|END_ACTION|>",
       "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}, "
       "{\"tool_call_id\": \"1\", \"tool_name\": \"get_time\", \"parameters\": {\"city\": \"Oslo\"}}]<|END_ACTION|>",
       hermes},
      {F::generic, "{\"tool_call\": " + obj + "}", "{\"tool_calls\": [" + obj + ", " + obj2 + "]}", hermes},
  };
}

// Replaces the first occurrence of `from` in s.
std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from << " in " << s;
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

TEST(ToolCallGrammar, EachFamilysSyntaxWithTheToolsSchemas) {
  for (const GrammarCase& gc : grammar_cases()) {
    SCOPED_TRACE(format_name(gc.format));
    const auto single = Grammar::parse(tool_call_grammar(gc.format, test_tools(), {}, false));
    const auto parallel = Grammar::parse(tool_call_grammar(gc.format, test_tools(), {}, true));
    EXPECT_TRUE(accepts(single, gc.one)) << gc.one;
    // (generic's parallel form is {"tool_calls": [...]}, as llama.cpp's.)
    if (gc.format != F::generic) {
      EXPECT_TRUE(accepts(parallel, gc.one)) << gc.one;
    }
    if (!gc.two.empty()) {
      EXPECT_TRUE(accepts(parallel, gc.two)) << gc.two;
      EXPECT_FALSE(accepts(single, gc.two)) << gc.two;
    }
    // What the grammar writes, the parser reads as the call.
    for (const std::string* text : {&gc.one, &gc.two}) {
      if (text->empty()) continue;
      const ParsedOutput p = parse_output(gc.format, *text, with_tools());
      ASSERT_FALSE(p.tool_calls.empty()) << *text;
      EXPECT_EQ(p.tool_calls[0].name, "special_function");
      EXPECT_EQ(p.tool_calls[0].arguments, kArg1);
      EXPECT_EQ(p.content, "");
    }
    // Not a call of this family, a wrong type, a missing argument, an
    // unknown tool, text before the call.
    EXPECT_FALSE(accepts(single, gc.foreign)) << gc.foreign;
    EXPECT_FALSE(accepts(single, "Sure. " + gc.one));
    EXPECT_FALSE(accepts(single, ""));
    const bool xml = gc.format == F::qwen3_coder_xml || gc.format == F::glm_4_5 || gc.format == F::minimax_m2;
    if (!xml) {
      EXPECT_FALSE(accepts(single, replaced(gc.one, "{\"arg1\": 1}", "{\"arg1\": \"one\"}")));
      EXPECT_FALSE(accepts(single, replaced(gc.one, "{\"arg1\": 1}", "{}")));
    } else {
      EXPECT_FALSE(accepts(single, replaced(gc.one, "1", "one")));
    }
    EXPECT_FALSE(accepts(single, replaced(gc.one, "special_function", "special_fnction")));
  }
}

TEST(ToolCallGrammar, NamedChoiceAllowsThatToolOnly) {
  ToolChoice named{ToolChoice::Kind::named, "get_time"};
  const auto g = Grammar::parse(tool_call_grammar(F::hermes, test_tools(), named, true));
  EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>"));
  try {
    tool_call_grammar(F::hermes, test_tools(), {ToolChoice::Kind::named, "nope"}, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("tool_choice: function 'nope'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tool_call_grammar(F::none, test_tools(), {}, false), Error);
}

TEST(ToolCallGrammar, PropertiesInTheDeclaredOrder) {
  // "zeta" before "alpha", both required: the call writes them in that
  // order (JSON and XML families alike), as llama.cpp's grammar does.
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {
    "name": "f", "parameters": {"type": "object", "properties": {"zeta": {"type": "integer"},
    "alpha": {"type": "integer"}}, "required": ["zeta", "alpha"]}}}])");
  const ToolChoice required{};
  const auto hermes = Grammar::parse(tool_call_grammar(F::hermes, tools, required, false));
  EXPECT_TRUE(accepts(hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"zeta\": 1, \"alpha\": 2}}\n</tool_call>"));
  EXPECT_FALSE(accepts(hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"alpha\": 2, \"zeta\": 1}}\n</tool_call>"));
  const auto xml = Grammar::parse(tool_call_grammar(F::qwen3_coder_xml, tools, required, false));
  EXPECT_TRUE(accepts(xml, "<tool_call>\n<function=f>\n<parameter=zeta>\n1\n</parameter>\n<parameter=alpha>\n2\n"
                           "</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(accepts(xml, "<tool_call>\n<function=f>\n<parameter=alpha>\n2\n</parameter>\n<parameter=zeta>\n1\n"
                            "</parameter>\n</function>\n</tool_call>"));
}

TEST(ToolCallGrammar, XmlValues) {
  const auto g = Grammar::parse(tool_call_grammar(F::qwen3_coder_xml, test_tools(), {}, false));
  const auto call = [](const std::string& name, const std::string& params) {
    return "<tool_call>\n<function=" + name + ">\n" + params + "</function>\n</tool_call>";
  };
  // A string value is any text without the closing marker, newlines and
  // markup included; an enum is one of its values; order is the schema's.
  EXPECT_TRUE(accepts(g, call("python", "<parameter=code>\nif a </b:\n  x = \"</param\"\n</parameter>\n")));
  EXPECT_FALSE(accepts(g, call("python", "<parameter=code>\na</parameter>b\n</parameter>\n")));
  EXPECT_TRUE(accepts(g, call("get_weather", "<parameter=location>\nParis\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n")));
  EXPECT_TRUE(accepts(g, call("get_weather", "<parameter=location>\nParis\n</parameter>\n")));
  EXPECT_FALSE(accepts(g, call("get_weather", "<parameter=location>\nParis\n</parameter>\n<parameter=unit>\nkelvin\n</parameter>\n")));
  EXPECT_FALSE(accepts(g, call("get_weather", "<parameter=unit>\ncelsius\n</parameter>\n<parameter=location>\nParis\n</parameter>\n")));
  EXPECT_FALSE(accepts(g, call("get_weather", "<parameter=unit>\ncelsius\n</parameter>\n")));  // location is required
  const ParsedOutput p = parse_output(
      F::qwen3_coder_xml, call("python", "<parameter=code>\nif a </b:\n  x = \"</param\"\n</parameter>\n"), with_tools());
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"code":"if a </b:\n  x = \"</param\""})");
}

TEST(ToolCallGrammar, ReasoningBeforeTheCall) {
  const std::string call = "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>";
  ToolGrammarOptions opt;
  opt.allow_reasoning = true;
  auto g = Grammar::parse(tool_call_grammar(F::hermes, test_tools(), {}, false, opt));
  EXPECT_TRUE(accepts(g, call));
  EXPECT_TRUE(accepts(g, "<think>\nI should call it </thin k> <</think>\n\n" + call));
  EXPECT_FALSE(accepts(g, "<think>a</think>b</think>\n" + call));
  EXPECT_FALSE(accepts(g, "<think>unclosed " + call));
  // A long reasoning walks the until rule's states without trouble.
  EXPECT_TRUE(accepts(g, "<think>" + std::string(20000, 'x') + "</think>" + call));

  opt.thinking_open = true;
  g = Grammar::parse(tool_call_grammar(F::hermes, test_tools(), {}, false, opt));
  EXPECT_TRUE(accepts(g, "I should call it\n</think>\n\n" + call));
  EXPECT_FALSE(accepts(g, call));

  opt.thinking_open = false;
  g = Grammar::parse(tool_call_grammar(F::gpt_oss_harmony, test_tools(), {}, false, opt));
  const std::string harmony_call =
      "<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{\"arg1\": 1}";
  EXPECT_TRUE(accepts(g, "<|channel|>analysis<|message|>Need to call.<|end|><|start|>assistant" + harmony_call));
  EXPECT_TRUE(accepts(g, harmony_call));
  const ParsedOutput p = parse_output(F::gpt_oss_harmony,
                                      "<|channel|>analysis<|message|>Need to call.<|end|><|start|>assistant" + harmony_call,
                                      with_tools());
  EXPECT_EQ(p.reasoning_content, "Need to call.");
  ASSERT_EQ(p.tool_calls.size(), 1u);

  g = Grammar::parse(tool_call_grammar(F::mistral, test_tools(), {}, false, opt));
  EXPECT_TRUE(accepts(g, "[THINK]hmm[/THINK][TOOL_CALLS]special_function[ARGS]{\"arg1\": 1}"));
}

// Schemas whose GBNF has every kind of token the renaming must step over:
// comments aside, literals with quotes and '#', classes with ']' and '-',
// counts {m,n}.
TEST(ToolCallGrammar, RenamesEveryRuleOfEachSchema) {
  const json tools = json::array({
      tool("a", {{"type", "object"},
                 {"properties",
                  {{"code", {{"type", "string"}, {"pattern", "^[a-z\\]\\-]{2,3}#x$"}}},
                   {"q", {{"enum", {"say \"hi\"", "x#y", "root ::= z"}}}},
                   {"n", {{"type", "integer"}, {"minimum", 3}, {"maximum", 12}}}}},
                 {"required", {"code", "q", "n"}}}),
      tool("b", {{"type", "object"},
                 {"properties", {{"items", {{"type", "array"}, {"items", {{"$ref", "#/$defs/item"}}}, {"maxItems", 2}}}}},
                 {"$defs", {{"item", {{"type", "object"}, {"properties", {{"id", {{"type", "integer"}}}}}}}}}}),
  });
  const std::string gbnf = tool_call_grammar(F::hermes, tools, {}, true);
  const auto g = Grammar::parse(gbnf);
  // (nlohmann::json orders keys by name: the grammar writes them so.)
  EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"code\": \"a]-#x\", \"n\": 12, "
                         "\"q\": \"say \\\"hi\\\"\"}}\n</tool_call>"))
      << gbnf;
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"code\": \"A#x\", \"n\": 3, \"q\": \"x#y\"}}\n"
                          "</tool_call>"));
  EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"code\": \"ab#x\", \"n\": 3, "
                         "\"q\": \"root ::= z\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"items\": "
                         "[{\"id\": 1}, {\"id\": 2}]}}\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"items\": [{\"id\": 1}, {\"id\": 2}, "
                          "{\"id\": 3}]}}\n</tool_call>"));
}

TEST(ToolCallGrammar, AToolWhoseSchemaCannotBeConvertedIsNamed) {
  json tools = test_tools();
  tools.push_back(tool("bad", {{"type", "object"}, {"properties", {{"x", {{"not", {{"format", "date"}}}}}}}}));
  try {
    tool_call_grammar(F::hermes, tools, {}, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("tools[8] (function 'bad')"), std::string::npos) << e.what();
  }
  // The XML families write each argument as a parameter: the schema must be
  // an object with properties.
  const json arr = json::array({tool("list", {{"type", "array"}})});
  try {
    tool_call_grammar(F::qwen3_coder_xml, arr, {}, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tools[0] (function 'list')"), std::string::npos) << e.what();
  }
  // A tool without parameters takes any object (JSON families) or none (XML).
  const json bare = json::array({{{"type", "function"}, {"function", {{"name", "ping"}}}}});
  auto g = Grammar::parse(tool_call_grammar(F::hermes, bare, {}, false));
  EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"ping\", \"arguments\": {\"any\": [1]}}\n</tool_call>"));
  g = Grammar::parse(tool_call_grammar(F::qwen3_coder_xml, bare, {}, false));
  EXPECT_TRUE(accepts(g, "<tool_call>\n<function=ping>\n</function>\n</tool_call>"));
}

// ---------------------------------------------------------------------------
// Validation

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    return e.what();
  }
  return "";
}

TEST(ValidateTools, NamesTheField) {
  EXPECT_EQ(error_of([] { validate_tools(test_tools()); }), "");
  const json ok = test_tools()[0];
  const std::vector<std::pair<json, std::string>> bad = {
      {json::object(), "tools: must be an array"},
      {json::array({1}), "tools[0]: must be an object"},
      {json::array({ok, json{{"function", ok["function"]}}}), "tools[1].type: missing"},
      {json::array({json{{"type", "retrieval"}, {"function", ok["function"]}}}), "tools[0].type: must be \"function\""},
      {json::array({json{{"type", "function"}}}), "tools[0].function: missing"},
      {json::array({json{{"type", "function"}, {"function", "f"}}}), "tools[0].function: must be an object"},
      {json::array({json{{"type", "function"}, {"function", {{"parameters", json::object()}}}}}),
       "tools[0].function.name: missing"},
      {json::array({json{{"type", "function"}, {"function", {{"name", 3}}}}}), "tools[0].function.name: must be a string"},
      {json::array({json{{"type", "function"}, {"function", {{"name", "two words"}}}}}), "tools[0].function.name: \"two words\""},
      {json::array({json{{"type", "function"}, {"function", {{"name", ""}}}}}), "tools[0].function.name: \"\""},
      {json::array({ok, ok}), "tools[1].function.name: 'special_function' names two tools"},
      {json::array({json{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "{}"}}}}}),
       "tools[0].function.parameters: must be a JSON Schema object"},
      {json::array({json{{"type", "function"}, {"function", {{"name", "f"}, {"description", 1}}}}}),
       "tools[0].function.description: must be a string"},
      {json::array({json{{"type", "function"}, {"function", {{"name", "f"}, {"strict", "yes"}}}}}),
       "tools[0].function.strict: must be a boolean"},
  };
  for (const auto& [tools, want] : bad) {
    const std::string got = error_of([&] { validate_tools(tools); });
    EXPECT_EQ(got.substr(0, want.size()), want) << tools.dump();
  }
}

TEST(ValidateHistory, NamesTheMessageAndField) {
  const json call = {{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "get_time"}, {"arguments", "{\"city\": \"Oslo\"}"}}}};
  const json good = json::array({
      {{"role", "user"}, {"content", "time?"}},
      {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "12:00"}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", {{{"type", "text"}, {"text", "12:00"}}}}},
      {{"role", "assistant"}, {"content", "It is noon."}},
  });
  EXPECT_EQ(error_of([&] { validate_history(good); }), "");
  json object_args = good;
  object_args[1]["tool_calls"][0]["function"]["arguments"] = {{"city", "Oslo"}};
  EXPECT_EQ(error_of([&] { validate_history(object_args); }), "");

  const auto with_call = [&](const std::function<void(json&)>& edit) {
    json m = good;
    edit(m[1]["tool_calls"][0]);
    return m;
  };
  const std::vector<std::pair<json, std::string>> bad = {
      {json::object(), "messages: must be an array"},
      {with_call([](json& c) { c.erase("id"); }), "messages[1].tool_calls[0].id: missing"},
      {with_call([](json& c) { c["id"] = 7; }), "messages[1].tool_calls[0].id: must be a non-empty string"},
      {with_call([](json& c) { c["type"] = "code"; }), "messages[1].tool_calls[0].type: must be \"function\""},
      {with_call([](json& c) { c.erase("function"); }), "messages[1].tool_calls[0].function: missing"},
      {with_call([](json& c) { c["function"].erase("name"); }), "messages[1].tool_calls[0].function.name: missing"},
      {with_call([](json& c) { c["function"].erase("arguments"); }), "messages[1].tool_calls[0].function.arguments: missing"},
      {with_call([](json& c) { c["function"]["arguments"] = "{city: Oslo}"; }),
       "messages[1].tool_calls[0].function.arguments: not valid JSON"},
      {with_call([](json& c) { c["function"]["arguments"] = "[1]"; }),
       "messages[1].tool_calls[0].function.arguments: must hold a JSON object"},
      {with_call([](json& c) { c["function"]["arguments"] = 5; }),
       "messages[1].tool_calls[0].function.arguments: must be a JSON object or a string"},
      {[&] {
         json m = good;
         m[1]["tool_calls"] = "x";
         return m;
       }(),
       "messages[1].tool_calls: must be an array"},
      {[&] {
         json m = good;
         m[2].erase("tool_call_id");
         return m;
       }(),
       "messages[2].tool_call_id: missing"},
      {[&] {
         json m = good;
         m[2]["tool_call_id"] = 1;
         return m;
       }(),
       "messages[2].tool_call_id: must be a string"},
      {[&] {
         json m = good;
         m[2].erase("content");
         return m;
       }(),
       "messages[2].content: missing"},
      {[&] {
         json m = good;
         m[3]["content"][0] = {{"type", "text"}};
         return m;
       }(),
       "messages[3].content[0].text: must be a string"},
  };
  for (const auto& [messages, want] : bad) {
    const std::string got = error_of([&] { validate_history(messages); });
    EXPECT_EQ(got.substr(0, want.size()), want) << messages.dump();
  }
}

}  // namespace
}  // namespace synapse::runtime

// The public tool-call API (synapse/chat.hpp: ChatSyntax, ChatReplyStream,
// validate_chat_tools, validate_chat_messages, JinjaChatTemplate::syntax):
// JSON text in and out over chat_output's parser and grammars, on Qwen3's
// template from llama.cpp's collection.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "grammar_util.hpp"
#include "synapse/chat.hpp"
#include "synapse/error.hpp"
#include "synapse/grammar.hpp"

namespace synapse {
namespace {

using json = nlohmann::ordered_json;

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(SYNAPSE_TEST_DATA "/templates/llama.cpp/") + name);
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const char* kTools = R"([{"type": "function", "function": {"name": "get_weather", "description": "the weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]},
  "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "days"],
  "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
  "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}])";

// What a field of `err` says, for EXPECT_THAT-free matching.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no synapse::Error thrown";
  return {};
}

bool has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

TEST(ChatSyntax, NamesTheFamilyOfATemplate) {
  EXPECT_EQ(ChatSyntax(read_template("Qwen-Qwen3-0.6B.jinja")).name(), "hermes");
  EXPECT_EQ(ChatSyntax(read_template("Qwen3-Coder.jinja")).name(), "qwen3_coder_xml");
  EXPECT_EQ(ChatSyntax("{{ messages[0].content }}").name(), "generic");
  EXPECT_EQ(ChatSyntax("", "gpt-oss").name(), "gpt_oss_harmony");  // the architecture decides an empty template
  const JinjaChatTemplate t(read_template("Qwen-Qwen3-0.6B.jinja"), "", "<|im_end|>", "qwen3");
  EXPECT_EQ(t.syntax().name(), "hermes");
}

TEST(ChatSyntax, ParsesReasoningAndCallsIntoOpenAIFields) {
  const ChatSyntax qwen3(read_template("Qwen-Qwen3-0.6B.jinja"));
  const std::string reply =
      "<think>\nThe user wants weather.\n</think>\n\nLet me look.\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Oslo\", \"days\": 2}}\n</tool_call>";
  ChatReplyOptions o;
  o.tools_json = kTools;
  o.id_seed = 7;
  const json j = json::parse(qwen3.parse_reply(reply, o));
  EXPECT_EQ(j["reasoning_content"], "The user wants weather.");
  EXPECT_EQ(j["content"], "Let me look.");
  ASSERT_EQ(j["tool_calls"].size(), 1u);
  const json& c = j["tool_calls"][0];
  EXPECT_EQ(c["type"], "function");
  EXPECT_EQ(c["function"]["name"], "get_weather");
  EXPECT_EQ(c["function"]["arguments"], R"({"city":"Oslo","days":2})");  // a JSON string, compact
  const std::string id = c["id"].get<std::string>();
  EXPECT_EQ(id.size(), 5u + 24u);
  EXPECT_EQ(id.substr(0, 5), "call_");
  EXPECT_EQ(json::parse(qwen3.parse_reply(reply, o))["tool_calls"][0]["id"], id);  // the same seed, the same id

  // reasoning_format none keeps the block in content; tool_choice none (or
  // no tools) leaves the call as text.
  o.reasoning_format = "none";
  EXPECT_TRUE(has(json::parse(qwen3.parse_reply(reply, o))["content"].get<std::string>(), "<think>"));
  o.reasoning_format = "auto";
  o.tool_choice_json = R"("none")";
  const json none = json::parse(qwen3.parse_reply(reply, o));
  EXPECT_TRUE(none["tool_calls"].empty());
  EXPECT_TRUE(has(none["content"].get<std::string>(), "<tool_call>"));
  // A reply that started inside the block the prompt opened.
  ChatReplyOptions open;
  open.thinking_open = true;
  EXPECT_TRUE(qwen3.prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(qwen3.prompt_opens_reasoning("<|im_start|>assistant\n"));
  const json r = json::parse(qwen3.parse_reply("hmm</think>\n\nHi", open));
  EXPECT_EQ(r["reasoning_content"], "hmm");
  EXPECT_EQ(r["content"], "Hi");
}

TEST(ChatSyntax, StreamedDeltasPutTogetherAreTheParsedReply) {
  const ChatSyntax qwen3(read_template("Qwen-Qwen3-0.6B.jinja"));
  const std::string reply =
      "<think>ok</think>Sure.<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>"
      "\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 1}}\n</tool_call>";
  ChatReplyOptions o;
  o.tools_json = kTools;
  const json whole = json::parse(qwen3.parse_reply(reply, o));
  ASSERT_EQ(whole["tool_calls"].size(), 2u);
  ChatReplyStream s = qwen3.stream(o);
  json got = {{"content", ""}, {"reasoning_content", ""}, {"tool_calls", json::array()}};
  bool name_before_arguments = true;
  const auto add = [&](const std::string& deltas) {
    for (const json& d : json::parse(deltas)) {
      ASSERT_EQ(d.size(), 1u) << d.dump();
      if (d.contains("content")) got["content"] = got["content"].get<std::string>() + d["content"].get<std::string>();
      if (d.contains("reasoning_content"))
        got["reasoning_content"] =
            got["reasoning_content"].get<std::string>() + d["reasoning_content"].get<std::string>();
      if (d.contains("tool_calls")) {
        const json& tc = d["tool_calls"][0];
        const size_t i = tc["index"];
        if (tc.contains("id")) {
          ASSERT_EQ(i, got["tool_calls"].size());
          EXPECT_EQ(tc["function"]["arguments"], "");
          got["tool_calls"].push_back({{"id", tc["id"]}, {"type", tc["type"]},
                                       {"function", {{"name", tc["function"]["name"]}, {"arguments", ""}}}});
        } else {
          name_before_arguments = name_before_arguments && i < got["tool_calls"].size();
          if (i >= got["tool_calls"].size()) continue;
          json& a = got["tool_calls"][i]["function"]["arguments"];
          a = a.get<std::string>() + tc["function"]["arguments"].get<std::string>();
        }
      }
    }
  };
  for (const char ch : reply) add(s.feed(std::string(1, ch)));  // the worst split: byte by byte
  add(s.finish());
  EXPECT_TRUE(name_before_arguments);
  EXPECT_EQ(got, whole);
  EXPECT_TRUE(has(error_of([&] { s.feed("x"); }), "after finish"));

  o.parallel_tool_calls = false;  // the second call is dropped
  EXPECT_EQ(json::parse(qwen3.parse_reply(reply, o))["tool_calls"].size(), 1u);
}

TEST(ChatSyntax, ToolCallGrammarForcesACallToTheChosenTool) {
  const ChatSyntax qwen3(read_template("Qwen-Qwen3-0.6B.jinja"));
  EXPECT_EQ(qwen3.tool_call_grammar(kTools, "", false), "");  // auto: nothing to force
  EXPECT_EQ(qwen3.tool_call_grammar(kTools, R"("auto")", false), "");
  EXPECT_EQ(qwen3.tool_call_grammar(kTools, R"("none")", false), "");
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 3}}\n</tool_call>";
  const std::string time = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>";
  const auto required = Grammar::parse(qwen3.tool_call_grammar(kTools, R"("required")", false));
  EXPECT_TRUE(test::accepts(required, weather));
  EXPECT_TRUE(test::accepts(required, time));
  EXPECT_FALSE(test::accepts(required, "Hello"));
  EXPECT_FALSE(test::accepts(required, weather + "\n" + time));  // one call without parallel_tool_calls
  // The arguments follow the tool's schema.
  EXPECT_FALSE(test::accepts(required, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", "
                                       "\"days\": 3}}\n</tool_call>"));
  EXPECT_FALSE(test::accepts(required, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", "
                                       "\"days\": 9}}\n</tool_call>"));
  const auto parallel = Grammar::parse(qwen3.tool_call_grammar(kTools, R"("required")", true));
  EXPECT_TRUE(test::accepts(parallel, weather + "\n" + time));
  const auto named = Grammar::parse(
      qwen3.tool_call_grammar(kTools, R"({"type": "function", "function": {"name": "get_time"}})", false));
  EXPECT_TRUE(test::accepts(named, time));
  EXPECT_FALSE(test::accepts(named, weather));
  // The prompt opened <think>: the reply closes it first.
  const auto open = Grammar::parse(qwen3.tool_call_grammar(kTools, R"("required")", false, true));
  EXPECT_TRUE(test::accepts(open, "plan</think>\n\n" + time));
}

TEST(ChatSyntax, BadRequestsNameTheField) {
  const ChatSyntax qwen3(read_template("Qwen-Qwen3-0.6B.jinja"));
  EXPECT_TRUE(has(error_of([&] { qwen3.tool_call_grammar(kTools, R"({"type": "function", "function": {"name": "nope"}})", false); }),
                  "tool_choice: function 'nope' is not among the tools"));
  EXPECT_TRUE(has(error_of([&] { qwen3.tool_call_grammar(kTools, R"("sometimes")", false); }), "tool_choice:"));
  EXPECT_TRUE(has(error_of([&] { qwen3.tool_call_grammar(kTools, R"({"function": {}})", false); }),
                  "tool_choice.function.name"));
  EXPECT_TRUE(has(error_of([&] { qwen3.tool_call_grammar("[]", R"("required")", false); }), "tool_choice: no tools"));
  EXPECT_TRUE(has(error_of([&] { qwen3.tool_call_grammar("[{", R"("required")", false); }), "tools: not valid JSON"));
  EXPECT_TRUE(has(error_of([] { validate_chat_tools(R"([{"type": "function", "function": {"name": "a b"}}])"); }),
                  "tools[0].function.name"));
  EXPECT_TRUE(has(error_of([] { validate_chat_tools(R"([{"type": "code"}])"); }), "tools[0].type"));
  ChatReplyOptions o;
  o.reasoning_format = "sometimes";
  EXPECT_TRUE(has(error_of([&] { qwen3.parse_reply("x", o); }), "reasoning_format"));
  o = {};
  o.tools_json = R"([{"type": "function", "function": {}}])";
  EXPECT_TRUE(has(error_of([&] { qwen3.stream(o); }), "tools[0].function.name: missing"));

  const std::string bad_args = R"([{"role": "user", "content": "Hi"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "get_time", "arguments": "{not json"}}]}])";
  EXPECT_TRUE(has(error_of([&] { validate_chat_messages(bad_args); }), "messages[1].tool_calls[0].function.arguments"));
  EXPECT_TRUE(has(error_of([] { validate_chat_messages(R"([{"role": "tool", "content": "42"}])"); }),
                  "messages[0].tool_call_id: missing"));
  validate_chat_messages(R"([{"role": "user", "content": "Hi"}])");  // no throw
  // JinjaChatTemplate::apply checks the history and the tools before the
  // template sees them.
  const JinjaChatTemplate t(read_template("Qwen-Qwen3-0.6B.jinja"), "", "<|im_end|>", "qwen3");
  EXPECT_TRUE(has(error_of([&] { t.apply(bad_args, true); }), "messages[1].tool_calls[0].function.arguments"));
  EXPECT_TRUE(has(error_of([&] { t.apply(R"([{"role": "user", "content": "Hi"}])", true, R"([{"type": "x"}])"); }),
                  "tools[0].type"));
}

}  // namespace
}  // namespace synapse

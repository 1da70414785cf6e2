// ChatRenderer: what a template is found to do with the probe conversations,
// and how a request is adapted to it (llama.cpp's workarounds), checked on
// templates of llama.cpp's collection. The expected prompts are Python
// Jinja2's renderings (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks) of the adapted messages, fixed here as text.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "runtime/chat_jinja.hpp"
#include "runtime/chat_output.hpp"
#include "synapse/chat.hpp"
#include "synapse/error.hpp"

namespace synapse::runtime {
namespace {

using ojson = nlohmann::ordered_json;

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(SYNAPSE_TEST_DATA "/templates/llama.cpp/") + name);
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::tm fixed_day() {
  std::tm tm{};
  tm.tm_year = 126;
  tm.tm_mon = 0;
  tm.tm_mday = 2;
  return tm;
}

ChatRenderer renderer(const std::string& name) {
  return ChatRenderer(read_template(name), "<s>", "</s>", {}, fixed_day);
}

ChatInputs inputs(ojson messages) {
  ChatInputs in;
  in.messages = std::move(messages);
  return in;
}

TEST(ChatJinja, CapsOfKnownTemplates) {
  const ChatRenderer gemma = renderer("google-gemma-2-2b-it.jinja");
  EXPECT_FALSE(gemma.caps().supports_system_role);  // it raises on a system message
  EXPECT_FALSE(gemma.caps().supports_tools);
  const ChatRenderer qwen3 = renderer("Qwen-Qwen3-0.6B.jinja");
  EXPECT_TRUE(qwen3.caps().supports_system_role);
  EXPECT_TRUE(qwen3.caps().supports_tools);
  EXPECT_TRUE(qwen3.caps().supports_tool_calls);
  EXPECT_TRUE(qwen3.caps().supports_parallel_tool_calls);
  EXPECT_FALSE(qwen3.caps().requires_object_arguments);  // it accepts a JSON string as is
  EXPECT_EQ(qwen3.format(), ToolCallFormat::hermes);
  // A Qwen3-MoE file (general.architecture qwen3moe) ships the same template.
  EXPECT_EQ(ChatRenderer(read_template("Qwen-Qwen3-0.6B.jinja"), "", "<|im_end|>", "qwen3moe", fixed_day).format(),
            ToolCallFormat::hermes);
  const ChatRenderer coder = renderer("Qwen3-Coder.jinja");
  EXPECT_TRUE(coder.caps().requires_object_arguments);  // it iterates arguments|items
  EXPECT_EQ(coder.format(), ToolCallFormat::qwen3_coder_xml);
  const ChatRenderer llama31 = renderer("meta-llama-Llama-3.1-8B-Instruct.jinja");
  EXPECT_FALSE(llama31.caps().supports_parallel_tool_calls);  // it raises on a second call
  EXPECT_TRUE(renderer("mistralai-Ministral-3-14B-Reasoning-2512.jinja").caps().supports_typed_content);
  // firefunction needs a `functions` variable and renders no probe: its
  // messages are left as sent, system role included.
  EXPECT_TRUE(renderer("fireworks-ai-llama-3-firefunction-v2.jinja").caps().supports_system_role);
}

// gpt-oss's own template (llama.cpp's openai-gpt-oss-120b.jinja) renders as
// llama.cpp v0.5.0's llama-server renders it: its /apply-template (--jinja
// --chat-template-file, tiny-gpt-oss-f32.gguf) gave these prompts for the
// same requests, with the date its clock read replaced by the fixed one.
// A past turn's reasoning_content reaches the template as `thinking`
// (common_chat_params_init_gpt_oss), and a turn with calls loses its content;
// reasoning_effort is a template variable. The reply parser puts the analysis
// channel into reasoning_content.
TEST(ChatJinja, GptOssRendersAsLlamaServer) {
  const ChatRenderer r(read_template("openai-gpt-oss-120b.jinja"), "<|startoftext|>", "<|return|>", "gpt-oss",
                       fixed_day);
  EXPECT_EQ(r.format(), ToolCallFormat::gpt_oss_harmony);
  EXPECT_TRUE(r.caps().supports_tools);
  EXPECT_TRUE(r.caps().supports_tool_calls);
  const RenderedChat a = r.render(inputs(ojson::parse(R"([{"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4", "reasoning_content": "Simple sum."},
    {"role": "user", "content": "And 3+3?"}])")));
  EXPECT_EQ(a.prompt, R"(<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: 2026-01-02

Reasoning: medium

# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|><|start|>developer<|message|># Instructions

You are terse.

<|end|><|start|>user<|message|>What is 2+2?<|end|><|start|>assistant<|channel|>final<|message|>4<|end|><|start|>user<|message|>And 3+3?<|end|><|start|>assistant)");
  ChatInputs in = inputs(ojson::parse(R"([{"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "Need the tool.", "tool_calls": [{"type": "function",
     "id": "c1", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21}"}])"));
  in.tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
    "required": ["city"]}}}])");
  in.kwargs = {{"reasoning_effort", "high"}};
  EXPECT_EQ(r.render(in).prompt, R"(<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: 2026-01-02

Reasoning: high

# Valid channels: analysis, commentary, final. Channel must be included for every message.
Calls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># Tools

## functions

namespace functions {

// Current weather
type get_weather = (_: {
// City name
city: string,
}) => any;

} // namespace functions<|end|><|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant<|channel|>analysis<|message|>Need the tool.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"{\"temp\": 21}"<|end|><|start|>assistant)");

  // A final assistant message is continued in harmony's form (llama-server's
  // prompts for the same three conversations): an analysis message, then a
  // final one with the content; reasoning alone leaves the analysis open.
  const std::string system = R"(<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: 2026-01-02

Reasoning: medium

# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>)";
  const auto continued = [&](const char* last) {
    return r.render(inputs(ojson::parse(std::string(R"([{"role": "user", "content": "Hi"}, )") + last + "]")));
  };
  const RenderedChat c1 = continued(R"({"role": "assistant", "content": "Sure,"})");
  EXPECT_EQ(c1.prompt, system + R"(<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>analysis<|message|><|end|><|start|>assistant<|channel|>final<|message|>Sure,)");
  EXPECT_TRUE(c1.continues_final);
  EXPECT_FALSE(c1.thinking_open);
  EXPECT_EQ(continued(R"({"role": "assistant", "content": "Sure,", "reasoning_content": "Greet."})").prompt,
            system + R"(<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>analysis<|message|>Greet.<|end|><|start|>assistant<|channel|>final<|message|>Sure,)");
  const RenderedChat c3 = continued(R"({"role": "assistant", "content": "", "reasoning_content": "Greet."})");
  EXPECT_EQ(c3.prompt, system + R"(<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>analysis<|message|>Greet.)");
  EXPECT_TRUE(c3.thinking_open);
  // Without a generation prompt the template ends the last final message with
  // <|return|>, which llama.cpp's gpt-oss path reads as <|end|> (its
  // common/parsers/gpt-oss.cpp:24-30).
  ChatInputs done = inputs(ojson::parse(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}])"));
  done.add_generation_prompt = false;
  EXPECT_EQ(r.render(done).prompt,
            system + "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|end|>");

  ParseOptions opt;
  const ParsedOutput out = parse_output(
      r.format(), "<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>final<|message|>6", opt);
  EXPECT_EQ(out.reasoning_content, "Add them.");
  EXPECT_EQ(out.content, "6");
  EXPECT_TRUE(out.tool_calls.empty());
}

// Gemma 3's template (tests/data/templates/models/google-gemma-3-it.jinja,
// the one Gemma 3 GGUFs carry) renders as llama.cpp v0.5.0's llama-server
// renders it: its /apply-template (--jinja --chat-template-file,
// tiny-gemma3-f32.gguf) gave these prompts for the same requests: the system
// message joins the first user turn, contents are trimmed, an assistant turn
// is "model", text parts are concatenated, the leading <bos> is left to the
// tokenizer.
TEST(ChatJinja, Gemma3RendersAsLlamaServer) {
  std::ifstream f(std::string(SYNAPSE_TEST_DATA "/templates/models/google-gemma-3-it.jinja"));
  ASSERT_TRUE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  const ChatRenderer r(ss.str(), "<bos>", "<eos>", "gemma3", fixed_day);
  EXPECT_EQ(r.render(inputs(ojson::parse(R"([{"role": "system", "content": "You are terse."},
    {"role": "user", "content": "  What is 2+2?  "}, {"role": "assistant", "content": "4"},
    {"role": "user", "content": "And 3+3?"}])"))).prompt,
            "<start_of_turn>user\nYou are terse.\n\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n"
            "<start_of_turn>user\nAnd 3+3?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(r.render(inputs(ojson::parse(
                         R"([{"role": "user", "content": [{"type": "text", "text": "Describe "},
                              {"type": "text", "text": " this."}]}])")))
                .prompt,
            "<start_of_turn>user\nDescribethis.<end_of_turn>\n<start_of_turn>model\n");
  ChatInputs in = inputs(ojson::parse(R"([{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
    {"role": "user", "content": "Hi"}])"));
  in.add_generation_prompt = false;
  EXPECT_EQ(r.render(in).prompt, "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n");
}

TEST(ChatJinja, SystemMessageMergedWhereTheTemplateRefusesIt) {
  const ChatRenderer gemma = renderer("google-gemma-2-2b-it.jinja");
  const RenderedChat r = gemma.render(inputs(ojson::parse(
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])")));
  // The leading BOS text is removed (the tokenizer adds BOS).
  EXPECT_EQ(r.prompt, "<start_of_turn>user\nBe brief.\nHi<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatJinja, StringArgumentsBecomeObjectsForTemplatesThatReadThem) {
  const ChatRenderer coder = renderer("Qwen3-Coder.jinja");
  const RenderedChat r = coder.render(inputs(ojson::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])")));
  EXPECT_EQ(r.prompt,
            "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n<function=get_weather>\n"
            "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call><|im_end|>\n<|im_start|>user\n"
            "<tool_response>\nsunny\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(r.continues_final);
}

TEST(ChatJinja, FinalAssistantMessageIsContinued) {
  const ChatRenderer qwen3 = renderer("Qwen-Qwen3-0.6B.jinja");
  const RenderedChat r = qwen3.render(inputs(ojson::parse(
      R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Sure,"}])")));
  EXPECT_EQ(r.prompt, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nSure,");
  EXPECT_TRUE(r.continues_final);
  // A prefill in text parts: joined by "\n\n" (common_chat_msg::render_content),
  // as llama-server v0.5.0 renders it (its test_chat_template_assistant_prefill).
  const RenderedChat parts = qwen3.render(inputs(ojson::parse(R"([{"role": "user", "content": "Hi"},
    {"role": "assistant", "content": [{"type": "text", "text": "Wh"}, {"type": "text", "text": "ill"}]}])")));
  EXPECT_EQ(parts.prompt, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nWh\n\nill");
  // A prefill cannot carry calls: the error names the message.
  try {
    qwen3.render(inputs(ojson::parse(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "",
      "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}])")));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("messages[1]"), std::string::npos) << e.what();
  }
}

TEST(ChatJinja, ReasoningOpenedByThePrompt) {
  const RenderedChat r1 = renderer("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")
                              .render(inputs(ojson::parse(R"([{"role": "user", "content": "Hi"}])")));
  EXPECT_EQ(r1.prompt, "<｜User｜>Hi<｜Assistant｜><think>\n");
  EXPECT_TRUE(r1.thinking_open);
  // Qwen3 with enable_thinking false writes an empty, closed block.
  ChatInputs in = inputs(ojson::parse(R"([{"role": "user", "content": "Hi"}])"));
  in.kwargs = {{"enable_thinking", false}};
  const RenderedChat r2 = renderer("Qwen-Qwen3-0.6B.jinja").render(in);
  EXPECT_EQ(r2.prompt, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_FALSE(r2.thinking_open);
}

TEST(ChatJinja, TemplateErrorsReachTheCaller) {
  // gemma-2 raises on a conversation that does not alternate.
  try {
    renderer("google-gemma-2-2b-it.jinja")
        .render(inputs(ojson::parse(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])")));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "Conversation roles must alternate user/assistant/user/assistant/...");
  }
  EXPECT_THROW(ChatRenderer("{% if %}", "", ""), Error);
}

TEST(ChatJinja, PublicWrapperTakesJsonText) {
  const JinjaChatTemplate t(read_template("Qwen-Qwen3-0.6B.jinja"), "", "<|im_end|>");
  EXPECT_EQ(t.apply(R"([{"role": "user", "content": "Hi"}])", true, "", R"({"enable_thinking": false})"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_THROW(t.apply("[{", true), Error);
  EXPECT_THROW(t.apply("{}", true), Error);
  EXPECT_THROW(t.apply("[]", true, "{}"), Error);
}

}  // namespace
}  // namespace synapse::runtime

// Replies parsed into content, reasoning and tool calls for every family
// (outputs written from llama.cpp's tests/test-chat.cpp and the families'
// templates, broken ones included), streamed in every split; the family of
// each of llama.cpp's templates.
#include "runtime/chat_output.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include "runtime/chat_output_readers.hpp"
#include "runtime/chat_output_util.hpp"
#include "synapse/error.hpp"

namespace synapse::runtime {
namespace {

using nlohmann::json;
using F = ToolCallFormat;

ParseOptions no_tools(ReasoningFormat r = ReasoningFormat::automatic) {
  ParseOptions o;
  o.reasoning_format = r;
  o.id_seed = 42;
  return o;
}
ParseOptions open_thinking(ParseOptions o) {
  o.thinking_open = true;
  return o;
}
ParseOptions single_call(ParseOptions o) {
  o.parallel_tool_calls = false;
  return o;
}

struct Call {
  Call(std::string n, std::string a, std::string i = "") : name(std::move(n)), arguments(std::move(a)), id(std::move(i)) {}
  std::string name, arguments, id;  // id "": the generated id of its index
};

ParsedOutput reply(F f, std::string content, std::string reasoning = {}, std::vector<Call> calls = {}) {
  ParsedOutput p;
  p.content = std::move(content);
  p.reasoning_content = std::move(reasoning);
  for (size_t i = 0; i < calls.size(); ++i)
    p.tool_calls.push_back(
        {calls[i].id.empty() ? make_tool_call_id(f, 42, i) : calls[i].id, calls[i].name, calls[i].arguments});
  return p;
}

struct Case {
  std::string what;
  F format;
  std::string text;
  ParseOptions options;
  ParsedOutput want;
};

const std::string kHello = "Hello, world!\nWhat's up?";

std::vector<Case> cases() {
  std::vector<Case> c;
  const auto add = [&](std::string what, F f, std::string text, ParseOptions o, ParsedOutput want) {
    c.push_back({std::move(what), f, std::move(text), std::move(o), std::move(want)});
  };
  const std::string hermes_call = "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>";
  const std::string hermes_opt =
      "<tool_call>\n{\"name\": \"special_function_with_opt\", \"arguments\": {\"arg1\": 1, \"arg2\": 2}}\n</tool_call>";

  // --- Hermes 2 Pro / Qwen 2.5 / Qwen3 ---
  add("hermes content", F::hermes, kHello, with_tools(), reply(F::hermes, kHello));
  add("hermes call", F::hermes, hermes_call, with_tools(), reply(F::hermes, "", "", {{"special_function", kArg1}}));
  add("hermes text before the call", F::hermes, kHello + "\n" + hermes_call, with_tools(),
      reply(F::hermes, kHello, "", {{"special_function", kArg1}}));
  add("hermes text after the call", F::hermes, hermes_call + "\nDone.", with_tools(),
      reply(F::hermes, "\nDone.", "", {{"special_function", kArg1}}));
  add("hermes two calls", F::hermes, hermes_call + "\n" + hermes_opt, with_tools(),
      reply(F::hermes, "", "", {{"special_function", kArg1}, {"special_function_with_opt", R"({"arg1":1,"arg2":2})"}}));
  add("hermes two calls, parallel off", F::hermes, hermes_call + "\n" + hermes_opt, single_call(with_tools()),
      reply(F::hermes, "", "", {{"special_function", kArg1}}));
  add("hermes closing tag left out at the end", F::hermes,
      "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}", with_tools(),
      reply(F::hermes, "", "", {{"special_function", kArg1}}));
  add("hermes arguments as a string", F::hermes,
      "<tool_call>{\"name\": \"special_function\", \"arguments\": \"{\\\"arg1\\\": 1}\"}</tool_call>", with_tools(),
      reply(F::hermes, "", "", {{"special_function", kArg1}}));
  add("hermes null arguments are none", F::hermes, "<tool_call>{\"name\": \"get_time\", \"arguments\": null}</tool_call>",
      with_tools(), reply(F::hermes, "", "", {{"get_time", "{}"}}));
  add("hermes key order and unicode kept", F::hermes,
      "<tool_call>\n{\"name\": \"edit\", \"arguments\": {\"oldString\": \"日本\", \"newString\": \"\\u00e9\", "
      "\"replaceAll\": false}}\n</tool_call>",
      with_tools(), reply(F::hermes, "", "", {{"edit", R"({"oldString":"日本","newString":"é","replaceAll":false})"}}));
  add("hermes truncated JSON is content", F::hermes,
      "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1", with_tools(),
      reply(F::hermes, "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1"));
  add("hermes invalid JSON is content", F::hermes,
      "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {arg1: 1}}\n</tool_call>", with_tools(),
      reply(F::hermes, "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {arg1: 1}}\n</tool_call>"));
  add("hermes unknown markup inside is content", F::hermes, "<tool_call>\n<invoke>x</invoke>\n</tool_call>",
      with_tools(), reply(F::hermes, "<tool_call>\n<invoke>x</invoke>\n</tool_call>"));
  add("hermes text after the JSON inside the tag is content", F::hermes,
      "<tool_call>{\"name\": \"special_function\", \"arguments\": {}} oops</tool_call>", with_tools(),
      reply(F::hermes, "<tool_call>{\"name\": \"special_function\", \"arguments\": {}} oops</tool_call>"));
  add("hermes unknown tool is content", F::hermes, "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>",
      with_tools(), reply(F::hermes, "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>"));
  add("hermes call without tools offered is content", F::hermes, hermes_call, no_tools(), reply(F::hermes, hermes_call));
  add("hermes a broken call, then a good one", F::hermes, "<tool_call>oops</tool_call>\n" + hermes_call, with_tools(),
      reply(F::hermes, "<tool_call>oops</tool_call>", "", {{"special_function", kArg1}}));
  add("hermes a marker that is not one", F::hermes, "Use <tool_calling> or <tool_ here", with_tools(),
      reply(F::hermes, "Use <tool_calling> or <tool_ here"));
  add("qwen3 reasoning then a call", F::hermes, "<think>\nI'm\nthinking\n</think>\n\n" + hermes_call, with_tools(),
      reply(F::hermes, "", "I'm\nthinking", {{"special_function", kArg1}}));
  add("qwen3 reasoning, reasoning_format none", F::hermes, "<think>\nI'm\nthinking\n</think>\n\n" + hermes_call,
      with_tools(ReasoningFormat::none),
      reply(F::hermes, "<think>\nI'm\nthinking\n</think>", "", {{"special_function", kArg1}}));
  add("qwen3 a call inside the reasoning is reasoning", F::hermes,
      "<think>maybe " + hermes_call + "</think>" + kHello, with_tools(), reply(F::hermes, kHello, "maybe " + hermes_call));
  add("qwq reasoning opened by the template", F::hermes, "Let me think about this...\n</think>\nThe answer is 42.",
      open_thinking(no_tools()), reply(F::hermes, "The answer is 42.", "Let me think about this..."));
  add("qwq empty reasoning", F::hermes, "</think>Hello, world!", open_thinking(no_tools()),
      reply(F::hermes, "Hello, world!"));
  add("reasoning never closed", F::hermes, "<think>\nstill thinking\n", with_tools(),
      reply(F::hermes, "", "still thinking"));
  add("reasoning opened, format none keeps it verbatim", F::hermes, "I think</think>Hello", open_thinking(no_tools(ReasoningFormat::none)),
      reply(F::hermes, "I think</think>Hello"));
  add("content with trailing newline kept", F::hermes, "Hi\n\n", with_tools(), reply(F::hermes, "Hi\n\n"));

  // --- Llama 3.x ---
  add("llama3 call", F::llama3_json, R"({"name": "special_function", "parameters": {"arg1": 1}})", with_tools(),
      reply(F::llama3_json, "", "", {{"special_function", kArg1}}));
  add("llama3 call with type", F::llama3_json,
      "\n{\"type\": \"function\", \"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}", with_tools(),
      reply(F::llama3_json, "", "", {{"special_function", kArg1}}));
  add("llama3 two calls", F::llama3_json,
      R"({"name": "special_function", "parameters": {"arg1": 1}}; {"name": "get_time", "parameters": {"city": "Paris"}})",
      with_tools(), reply(F::llama3_json, "", "", {{"special_function", kArg1}, {"get_time", R"({"city":"Paris"})"}}));
  add("llama3 builtin tool", F::llama3_json, "<|python_tag|>brave_search.call(query=\"today's weather\")", with_tools(),
      reply(F::llama3_json, "", "", {{"brave_search", R"({"query":"today's weather"})"}}));
  add("llama3 python tag with JSON", F::llama3_json,
      "<|python_tag|>{\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}", with_tools(),
      reply(F::llama3_json, "", "", {{"special_function", kArg1}}));
  add("llama3 python tag with code", F::llama3_json, "<|python_tag|>print('hi')\nprint(2)", with_tools(),
      reply(F::llama3_json, "", "", {{"python", R"j({"code":"print('hi')\nprint(2)"})j"}}));
  add("llama3 JSON that is no call is content", F::llama3_json, R"({"answer": 42})", with_tools(),
      reply(F::llama3_json, R"({"answer": 42})"));
  add("llama3 a call after text is content", F::llama3_json,
      R"(Sure: {"name": "special_function", "parameters": {"arg1": 1}})", with_tools(),
      reply(F::llama3_json, R"(Sure: {"name": "special_function", "parameters": {"arg1": 1}})"));
  add("llama3 text after the call", F::llama3_json, R"({"name": "special_function", "parameters": {"arg1": 1}} ok)",
      with_tools(), reply(F::llama3_json, " ok", "", {{"special_function", kArg1}}));
  add("llama3 unknown function is content", F::llama3_json, R"({"name": "nope", "parameters": {}})", with_tools(),
      reply(F::llama3_json, R"({"name": "nope", "parameters": {}})"));

  // --- Qwen3-Coder XML (Qwen3.5, Nemotron 3) ---
  const std::string xml_call =
      "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>";
  add("qwen3-coder call", F::qwen3_coder_xml, xml_call, with_tools(),
      reply(F::qwen3_coder_xml, "", "", {{"special_function", kArg1}}));
  add("qwen3-coder without <tool_call>", F::qwen3_coder_xml,
      "<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>", with_tools(),
      reply(F::qwen3_coder_xml, "", "", {{"special_function", kArg1}}));
  add("qwen3-coder text then a call without <tool_call>", F::qwen3_coder_xml,
      "Let me call it.\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>",
      with_tools(), reply(F::qwen3_coder_xml, "Let me call it.", "", {{"special_function", kArg1}}));
  add("qwen3-coder two calls", F::qwen3_coder_xml,
      xml_call +
          "\n<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n"
          "</parameter>\n</function>\n</tool_call>",
      with_tools(),
      reply(F::qwen3_coder_xml, "", "", {{"special_function", kArg1}, {"special_function_with_opt", R"({"arg1":1,"arg2":2})"}}));
  add("qwen3-coder multiline code", F::qwen3_coder_xml,
      "<tool_call>\n<function=python>\n<parameter=code>\ndef hello():\n    print(\"Hello, world!\")\n\nhello()\n"
      "</parameter>\n</function>\n</tool_call>",
      with_tools(),
      reply(F::qwen3_coder_xml, "", "", {{"python", R"j({"code":"def hello():\n    print(\"Hello, world!\")\n\nhello()"})j"}}));
  add("qwen3-coder markup in a value", F::qwen3_coder_xml,
      "<tool_call>\n<function=html>\n<parameter=markup>\n<html>\n <head>\n  <title>Hello!</title>\n </head>\n</html>\n"
      "</parameter>\n</function>\n</tool_call>",
      with_tools(),
      reply(F::qwen3_coder_xml, "", "",
            {{"html", R"({"markup":"<html>\n <head>\n  <title>Hello!</title>\n </head>\n</html>"})"}}));
  add("qwen3-coder a string parameter stays a string", F::qwen3_coder_xml,
      "<tool_call>\n<function=get_time>\n<parameter=city>\n12345\n</parameter>\n</function>\n</tool_call>", with_tools(),
      reply(F::qwen3_coder_xml, "", "", {{"get_time", R"({"city":"12345"})"}}));
  add("qwen3.5 reasoning ended by the call", F::qwen3_coder_xml, "I'll check.\n" + xml_call,
      open_thinking(with_tools()), reply(F::qwen3_coder_xml, "", "I'll check.", {{"special_function", kArg1}}));
  add("qwen3-coder cut short is content", F::qwen3_coder_xml,
      "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1", with_tools(),
      reply(F::qwen3_coder_xml, "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1"));
  add("qwen3-coder #include <functional> is content", F::qwen3_coder_xml, "#include <functional>\nint main();",
      with_tools(), reply(F::qwen3_coder_xml, "#include <functional>\nint main();"));

  // --- Mistral ---
  add("mistral nemo call", F::mistral_nemo,
      R"([TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}])", with_tools(),
      reply(F::mistral_nemo, "", "", {{"special_function", kArg1, "123456789"}}));
  add("mistral nemo content", F::mistral_nemo, kHello, with_tools(), reply(F::mistral_nemo, kHello));
  add("mistral nemo two calls, ids generated", F::mistral_nemo,
      R"([TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}}, {"name": "get_time", "arguments": {"city": "Rome"}}])",
      with_tools(),
      reply(F::mistral_nemo, "", "", {{"special_function", kArg1}, {"get_time", R"({"city":"Rome"})"}}));
  add("ministral reasoning and a call", F::mistral, "[THINK]I'm\nthinking[/THINK][TOOL_CALLS]special_function[ARGS]{\"arg1\":1}",
      with_tools(), reply(F::mistral, "", "I'm\nthinking", {{"special_function", kArg1}}));
  add("ministral reasoning, format none", F::mistral, "[THINK]I'm\nthinking[/THINK]" + kHello,
      with_tools(ReasoningFormat::none), reply(F::mistral, "[THINK]I'm\nthinking[/THINK]" + kHello));
  add("ministral two calls", F::mistral,
      R"([TOOL_CALLS]special_function[ARGS]{"arg1": 1}[TOOL_CALLS]special_function_with_opt[ARGS]{"arg1": 1, "arg2": 2})",
      with_tools(),
      reply(F::mistral, "", "", {{"special_function", kArg1}, {"special_function_with_opt", R"({"arg1":1,"arg2":2})"}}));
  add("ministral a marker in the reasoning is reasoning", F::mistral,
      "[THINK]Let me think about [TOOL_CALLS]special_function[ARGS]{\"arg1\":1} and more[/THINK]"
      "[TOOL_CALLS]special_function[ARGS]{\"arg1\": 1}",
      with_tools(),
      reply(F::mistral, "", "Let me think about [TOOL_CALLS]special_function[ARGS]{\"arg1\":1} and more",
            {{"special_function", kArg1}}));
  add("devstral text then a call", F::mistral, kHello + "[TOOL_CALLS]special_function[ARGS]{\"arg1\": 1}", with_tools(),
      reply(F::mistral, kHello, "", {{"special_function", kArg1}}));
  add("mistral small call id", F::mistral_call_id, "[TOOL_CALLS]special_function[CALL_ID]123456789[ARGS]{\"arg1\": 1}",
      with_tools(), reply(F::mistral_call_id, "", "", {{"special_function", kArg1, "123456789"}}));
  add("mistral arguments that are not an object are content", F::mistral, "[TOOL_CALLS]special_function[ARGS][1]",
      with_tools(), reply(F::mistral, "[TOOL_CALLS]special_function[ARGS][1]"));

  // --- gpt-oss (harmony) ---
  const std::string analysis = "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant";
  add("gpt-oss final", F::gpt_oss_harmony, "<|channel|>final<|message|>" + kHello, no_tools(),
      reply(F::gpt_oss_harmony, kHello));
  add("gpt-oss commentary", F::gpt_oss_harmony, "<|channel|>commentary<|message|>" + kHello, no_tools(),
      reply(F::gpt_oss_harmony, kHello));
  add("gpt-oss analysis then final", F::gpt_oss_harmony, analysis + "<|channel|>final<|message|>" + kHello, no_tools(),
      reply(F::gpt_oss_harmony, kHello, "I'm\nthinking"));
  add("gpt-oss analysis, reasoning_format none", F::gpt_oss_harmony, analysis + "<|channel|>final<|message|>" + kHello,
      no_tools(ReasoningFormat::none),
      reply(F::gpt_oss_harmony, "<|channel|>analysis<|message|>I'm\nthinking<|end|>" + kHello));
  add("gpt-oss recipient in the role", F::gpt_oss_harmony,
      " to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}", with_tools(),
      reply(F::gpt_oss_harmony, "", "", {{"special_function", kArg1}}));
  add("gpt-oss recipient in the channel", F::gpt_oss_harmony,
      "<|channel|>analysis to=functions.special_function<|message|>{\"arg1\": 1}", with_tools(),
      reply(F::gpt_oss_harmony, "", "", {{"special_function", kArg1}}));
  add("gpt-oss constrain", F::gpt_oss_harmony,
      " to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}<|call|>", with_tools(),
      reply(F::gpt_oss_harmony, "", "", {{"special_function", kArg1}}));
  add("gpt-oss reasoning then a call", F::gpt_oss_harmony,
      analysis + "<|channel|>commentary to=functions.edit <|constrain|>json<|message|>"
                 "{\"oldString\": \"if (part < railCount - 1) {\", \"newString\": \"if (part < 4) {\", \"replaceAll\": false}",
      with_tools(),
      reply(F::gpt_oss_harmony, "", "I'm\nthinking",
            {{"edit", R"({"oldString":"if (part < railCount - 1) {","newString":"if (part < 4) {","replaceAll":false})"}}));
  add("gpt-oss builtin tool is dropped", F::gpt_oss_harmony,
      "<|channel|>analysis<|message|>I will run python<|end|><|start|>assistant to=container.exec<|channel|>commentary"
      "<|message|>python3 -c 'print(1)'",
      with_tools(), reply(F::gpt_oss_harmony, "", "I will run python"));
  add("gpt-oss stray commentary to=assistant", F::gpt_oss_harmony,
      "<|channel|>commentary to=assistant<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant"
      "<|channel|>final<|message|>" + kHello,
      no_tools(), reply(F::gpt_oss_harmony, kHello, "I'm\nthinking"));
  add("gpt-oss a call without tools is content", F::gpt_oss_harmony,
      "<|channel|>commentary to=functions.special_function<|message|>{\"arg1\": 1}", no_tools(),
      reply(F::gpt_oss_harmony, "{\"arg1\": 1}"));
  add("gpt-oss invalid arguments are content", F::gpt_oss_harmony,
      "<|channel|>commentary to=functions.special_function<|message|>{\"arg1\": <|call|>", with_tools(),
      reply(F::gpt_oss_harmony, "{\"arg1\": "));
  add("gpt-oss whitespace before the first header", F::gpt_oss_harmony, "\n<|channel|>final<|message|>" + kHello,
      no_tools(), reply(F::gpt_oss_harmony, kHello));
  add("gpt-oss text outside the format is content", F::gpt_oss_harmony, kHello, no_tools(),
      reply(F::gpt_oss_harmony, kHello));
  add("gpt-oss analysis opened by the prompt", F::gpt_oss_harmony,
      "I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>" + kHello, open_thinking(no_tools()),
      reply(F::gpt_oss_harmony, kHello, "I'm\nthinking"));

  // --- DeepSeek ---
  const std::string r1_call =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}```"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  add("deepseek r1 reasoning", F::deepseek_r1, "I'm\nthinking</think>" + kHello, open_thinking(no_tools()),
      reply(F::deepseek_r1, kHello, "I'm\nthinking"));
  add("deepseek r1 call", F::deepseek_r1, "</think>" + r1_call, open_thinking(with_tools()),
      reply(F::deepseek_r1, "", "", {{"special_function", kArg1}}));
  add("deepseek r1 two calls", F::deepseek_r1,
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}\n```"
      "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"city\": \"Oslo\"}\n```"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
      with_tools(), reply(F::deepseek_r1, "", "", {{"special_function", kArg1}, {"get_time", R"({"city":"Oslo"})"}}));
  add("deepseek r1 cut short is content", F::deepseek_r1,
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_fun", with_tools(),
      reply(F::deepseek_r1, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_fun"));
  add("deepseek v3.1 call", F::deepseek_v3_1,
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"XYZCITY\"}<｜tool▁call▁end｜>"
      "<｜tool▁calls▁end｜>",
      with_tools(), reply(F::deepseek_v3_1, "", "", {{"get_time", R"({"city":"XYZCITY"})"}}));
  add("deepseek v3.1 reasoning, content and two calls", F::deepseek_v3_1,
      "REASONING</think>CONTENT<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": "
      "\"Paris\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\": "
      "\"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
      open_thinking(with_tools()),
      reply(F::deepseek_v3_1, "CONTENT", "REASONING",
            {{"get_time", R"({"city":"Paris"})"}, {"get_weather", R"({"location":"Paris"})"}}));

  // --- the other families ---
  add("kimi k2 call", F::kimi_k2,
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>"
      "{\"arg1\": 1}<|tool_call_end|><|tool_calls_section_end|>",
      with_tools(), reply(F::kimi_k2, "", "", {{"special_function", kArg1, "functions.special_function:0"}}));
  add("kimi k2 thinking and two calls", F::kimi_k2,
      "<think>hmm</think>Calling.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0"
      "<|tool_call_argument_begin|>{\"city\": \"Lima\"}<|tool_call_end|><|tool_call_begin|>functions.special_function:1"
      "<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_calls_section_end|>",
      with_tools(),
      reply(F::kimi_k2, "Calling.", "hmm",
            {{"get_time", R"({"city":"Lima"})", "functions.get_time:0"},
             {"special_function", kArg1, "functions.special_function:1"}}));
  add("glm call", F::glm_4_5,
      "<think>ok</think>\n<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
      with_tools(), reply(F::glm_4_5, "", "ok", {{"special_function", kArg1}}));
  add("glm string values", F::glm_4_5,
      "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>New York</arg_value>\n<arg_key>unit</arg_key>\n"
      "<arg_value>celsius</arg_value>\n</tool_call>",
      with_tools(), reply(F::glm_4_5, "", "", {{"get_weather", R"({"location":"New York","unit":"celsius"})"}}));
  add("minimax m2 call", F::minimax_m2,
      "<minimax:tool_call>\n<invoke name=\"special_function\">\n<parameter name=\"arg1\">1</parameter>\n</invoke>\n"
      "</minimax:tool_call>",
      with_tools(), reply(F::minimax_m2, "", "", {{"special_function", kArg1}}));
  add("functionary v3.1 call", F::functionary_v3_1, "<function=special_function>{\"arg1\": 1}</function>", with_tools(),
      reply(F::functionary_v3_1, "", "", {{"special_function", kArg1}}));
  add("firefunction v2 call", F::firefunction_v2,
      " functools[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]", with_tools(),
      reply(F::firefunction_v2, "", "", {{"special_function", kArg1}}));
  add("nemotron v2 reasoning and call", F::nemotron_v2,
      "I'm\nthinking\n</think>\n\n<TOOLCALL>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]</TOOLCALL>\n",
      open_thinking(with_tools()), reply(F::nemotron_v2, "", "I'm\nthinking", {{"special_function", kArg1}}));
  add("apriel call", F::apriel, "<tool_calls>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]</tool_calls>",
      with_tools(), reply(F::apriel, "", "", {{"special_function", kArg1}}));
  add("minimax m1 calls as lines (apriel reader)", F::apriel,
      "<tool_calls>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n{\"name\": \"get_time\", "
      "\"arguments\": {\"city\": \"Kyiv\"}}\n</tool_calls>",
      with_tools(), reply(F::apriel, "", "", {{"special_function", kArg1}, {"get_time", R"({"city":"Kyiv"})"}}));
  add("granite call", F::granite, "<|tool_call|>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]",
      with_tools(), reply(F::granite, "", "", {{"special_function", kArg1}}));
  add("granite reasoning and response", F::granite, "<think>I'm thinking</think><response>" + kHello + "</response>",
      no_tools(), reply(F::granite, kHello, "I'm thinking"));
  add("command r7b response", F::command_r7b, "<|START_RESPONSE|>" + kHello + "<|END_RESPONSE|>", with_tools(),
      reply(F::command_r7b, kHello));
  add("command r7b reasoning and call", F::command_r7b,
      "<|START_THINKING|>I'm\nthinking<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": "
      "\"special_function\", \"parameters\": {\"arg1\": 1}}\n]<|END_ACTION|>",
      with_tools(), reply(F::command_r7b, "", "I'm\nthinking", {{"special_function", kArg1, "0"}}));
  add("cohere2 moe reasoning opened by the prompt", F::command_r7b,
      "I'm\nthinking<|END_THINKING|><|START_TEXT|>" + kHello + "<|END_TEXT|>", open_thinking(no_tools()),
      reply(F::command_r7b, kHello, "I'm\nthinking"));

  // --- generic and none ---
  add("generic call", F::generic,
      R"({"tool_call": {"name": "special_function", "arguments": {"arg1": 1}}})", with_tools(),
      reply(F::generic, "", "", {{"special_function", kArg1}}));
  add("generic calls", F::generic,
      R"({"tool_calls": [{"name": "special_function", "arguments": {"arg1": 1}}, {"name": "get_time", "arguments": {"city": "Bern"}}]})",
      with_tools(), reply(F::generic, "", "", {{"special_function", kArg1}, {"get_time", R"({"city":"Bern"})"}}));
  add("generic response", F::generic, R"({"response": "Hello, world!\nWhat's up?"})", with_tools(),
      reply(F::generic, kHello));
  add("generic other JSON is content", F::generic, R"({"foo": [1, 2]})", with_tools(),
      reply(F::generic, R"({"foo": [1, 2]})"));
  add("generic plain text", F::generic, kHello, with_tools(), reply(F::generic, kHello));
  add("none: calls are never parsed", F::none, hermes_call, with_tools(), reply(F::none, hermes_call));
  add("none: reasoning is", F::none, "<think>a</think>b", with_tools(), reply(F::none, "b", "a"));
  add("utf-8 content", F::hermes, "h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80!", with_tools(),
      reply(F::hermes, "h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80!"));
  return c;
}

std::string describe(const ParsedOutput& p) {
  json j = {{"content", p.content}, {"reasoning_content", p.reasoning_content}, {"tool_calls", json::array()}};
  for (const ToolCall& c : p.tool_calls) j["tool_calls"].push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
  return j.dump(1, ' ', false, json::error_handler_t::replace);
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

// Feeds `pieces` and puts the deltas together, checking the order OpenAI
// clients rely on: a call's start before its arguments, indexes in order,
// no empty text, UTF-8 characters whole.
ParsedOutput stream(const Case& c, const std::vector<std::string_view>& pieces) {
  OutputStream s(c.format, c.options);
  ParsedOutput out;
  size_t started = 0;
  const bool utf8 = valid_utf8(c.text);
  const auto take = [&](const std::vector<Delta>& ds) {
    for (const Delta& d : ds) {
      if (d.kind == Delta::Kind::tool_call) {
        EXPECT_EQ(d.index, started);
        ++started;
      } else if (d.kind == Delta::Kind::arguments) {
        EXPECT_LT(d.index, started);
      } else {
        EXPECT_FALSE(d.text.empty());
        if (utf8) {
          EXPECT_TRUE(valid_utf8(d.text)) << d.text;
        }
      }
      apply_delta(out, d);
    }
  };
  for (std::string_view p : pieces) take(s.feed(p));
  take(s.finish());
  return out;
}

TEST(ChatOutput, RecordedReplies) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    const ParsedOutput got = parse_output(c.format, c.text, c.options);
    EXPECT_EQ(got, c.want) << "got " << describe(got) << "\nwant " << describe(c.want);
    for (const ToolCall& call : got.tool_calls) EXPECT_FALSE(json::parse(call.arguments, nullptr, false).is_discarded());
  }
}

// The deltas of any split of the text put together are parse_output's
// reply: pieces of every size 1..n, every cut in two, and random splits.
TEST(ChatOutput, StreamingEqualsWholeInEverySplit) {
  std::mt19937 rng(7);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    const ParsedOutput whole = parse_output(c.format, c.text, c.options);
    const std::string_view t = c.text;
    for (size_t k = 1; k <= t.size(); ++k) {
      std::vector<std::string_view> pieces;
      for (size_t i = 0; i < t.size(); i += k) pieces.push_back(t.substr(i, k));
      const ParsedOutput got = stream(c, pieces);
      ASSERT_EQ(got, whole) << "pieces of " << k << "\ngot " << describe(got);
    }
    for (size_t cut = 0; cut <= t.size(); ++cut) {
      const ParsedOutput got = stream(c, {t.substr(0, cut), t.substr(cut)});
      ASSERT_EQ(got, whole) << "cut at " << cut << "\ngot " << describe(got);
    }
    for (int r = 0; r < 20; ++r) {
      std::vector<std::string_view> pieces;
      for (size_t i = 0; i < t.size();) {
        const size_t n = std::uniform_int_distribution<size_t>(0, 6)(rng);
        pieces.push_back(t.substr(i, n));
        i += n;
      }
      ASSERT_EQ(stream(c, pieces), whole) << "random split " << r;
    }
  }
}

// Long replies: random token-sized splits only.
TEST(ChatOutput, StreamingLongReplies) {
  std::string code;
  for (int i = 0; i < 300; ++i) code += "line " + std::to_string(i) + " <tag> </param \"q\" {x}\n";
  const std::string reasoning(5000, 'r');
  std::vector<Case> long_cases = {
      {"long hermes", F::hermes,
       "<think>" + reasoning + "</think>Text " + code + "<tool_call>{\"name\": \"python\", \"arguments\": {\"code\": " +
           json(code).dump() + "}}</tool_call>",
       with_tools(), {}},
      {"long qwen3-coder", F::qwen3_coder_xml,
       "<tool_call>\n<function=python>\n<parameter=code>\n" + code + "\n</parameter>\n</function>\n</tool_call>",
       with_tools(), {}},
      {"long harmony", F::gpt_oss_harmony,
       "<|channel|>analysis<|message|>" + reasoning + "<|end|><|start|>assistant<|channel|>final<|message|>" + code,
       no_tools(), {}},
  };
  std::mt19937 rng(11);
  for (const Case& c : long_cases) {
    SCOPED_TRACE(c.what);
    const ParsedOutput whole = parse_output(c.format, c.text, c.options);
    if (c.format != F::gpt_oss_harmony) {
      ASSERT_EQ(whole.tool_calls.size(), 1u);
      EXPECT_EQ(json::parse(whole.tool_calls[0].arguments)["code"].get<std::string>().substr(0, 6), "line 0");
    } else {
      EXPECT_EQ(whole.reasoning_content, reasoning);
      EXPECT_EQ(whole.content, code);
    }
    for (int r = 0; r < 5; ++r) {
      std::vector<std::string_view> pieces;
      const std::string_view t = c.text;
      for (size_t i = 0; i < t.size();) {
        const size_t n = std::uniform_int_distribution<size_t>(1, 12)(rng);
        pieces.push_back(t.substr(i, n));
        i += n;
      }
      ASSERT_EQ(stream(c, pieces), whole);
    }
  }
}

// Mutated replies (bytes cut, doubled, changed, markers of every family
// spliced in): never an error, and streaming still equals the whole.
TEST(ChatOutput, MutatedRepliesNeverFail) {
  static const std::vector<std::string> markers = {
      "<tool_call>", "</tool_call>", "<think>", "</think>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<|channel|>",
      "<|message|>", "<|end|>", "<|start|>", " to=functions.", "<|call|>", "<｜tool▁calls▁begin｜>",
      "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<function=", "<parameter=", "</parameter>", "{", "}", "[", "]", "\"",
      "\\", "<|python_tag|>", ".call(", "<arg_key>", "<|tool_call_begin|>", "\xe6\x97", "\n"};
  std::mt19937 rng(1234);
  const auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    for (int k = 0; k < 30; ++k) {
      Case m = c;
      for (int edits = 1 + static_cast<int>(pick(4)); edits > 0; --edits) {
        const size_t at = m.text.empty() ? 0 : pick(m.text.size() + 1);
        switch (pick(4)) {
          case 0: m.text.erase(at, pick(8)); break;
          case 1: m.text.insert(at, m.text.substr(at, pick(8))); break;
          case 2:
            if (at < m.text.size()) m.text[at] = static_cast<char>(pick(256));
            break;
          default: m.text.insert(at, markers[pick(markers.size())]); break;
        }
      }
      ParsedOutput whole;
      ASSERT_NO_THROW(whole = parse_output(m.format, m.text, m.options)) << m.text;
      for (const ToolCall& call : whole.tool_calls) {
        const json args = json::parse(call.arguments, nullptr, false);
        EXPECT_TRUE(args.is_object()) << call.arguments;
      }
      std::vector<std::string_view> pieces;
      const std::string_view t = m.text;
      for (size_t i = 0; i < t.size();) {
        const size_t n = 1 + pick(5);
        pieces.push_back(t.substr(i, n));
        i += n;
      }
      ASSERT_EQ(stream(m, pieces), whole) << m.text;
    }
  }
}

TEST(ChatOutput, StreamReleasesContentAsSoonAsItIsDecided) {
  OutputStream s(F::hermes, with_tools());
  auto d = s.feed("Hello <tool_");  // may begin <tool_call>: held, with the space before it
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "Hello");
  d = s.feed("box> x");  // it did not
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, " <tool_box> x");
  d = s.feed(" <tool_call>{\"name\": \"special_function\", ");  // a call in progress: nothing yet
  EXPECT_TRUE(d.empty());
  d = s.feed("\"arguments\": {\"arg1\": 1}}</tool_call>");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, Delta::Kind::tool_call);
  EXPECT_EQ(d[0].name, "special_function");
  EXPECT_EQ(d[0].id, make_tool_call_id(F::hermes, 42, 0));
  EXPECT_EQ(d[1].kind, Delta::Kind::arguments);
  EXPECT_EQ(d[1].text, kArg1);
  EXPECT_TRUE(s.finish().empty());
  EXPECT_THROW(s.feed("x"), Error);

  OutputStream r(F::hermes, with_tools());
  d = r.feed("<think>\nab");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, Delta::Kind::reasoning);
  EXPECT_EQ(d[0].text, "ab");
  d = r.feed("c\n</th");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "c");
}

TEST(ChatOutput, CallIds) {
  const std::string a = make_tool_call_id(F::hermes, 1, 0);
  EXPECT_EQ(a.size(), 29u);
  EXPECT_EQ(a.substr(0, 5), "call_");
  EXPECT_EQ(a, make_tool_call_id(F::hermes, 1, 0));
  EXPECT_NE(a, make_tool_call_id(F::hermes, 1, 1));
  EXPECT_NE(a, make_tool_call_id(F::hermes, 2, 0));
  const std::string m = make_tool_call_id(F::mistral_nemo, 1, 0);
  EXPECT_EQ(m.size(), 9u);
  for (char ch : m + a.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << ch;
  // The same request (seed) gives the same reply, ids included.
  ParseOptions o = with_tools();
  o.id_seed = 1234;
  const std::string text = "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"city\": \"Ulm\"}}</tool_call>";
  EXPECT_EQ(parse_output(F::hermes, text, o), parse_output(F::hermes, text, o));
  EXPECT_EQ(parse_output(F::hermes, text, o).tool_calls[0].id, make_tool_call_id(F::hermes, 1234, 0));
}

TEST(ChatOutput, ReasoningOptions) {
  EXPECT_EQ(parse_reasoning_format("none"), ReasoningFormat::none);
  EXPECT_EQ(parse_reasoning_format("deepseek"), ReasoningFormat::deepseek);
  EXPECT_EQ(parse_reasoning_format("auto"), ReasoningFormat::automatic);
  try {
    parse_reasoning_format("sometimes");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("reasoning_format"), std::string::npos);
  }
  EXPECT_TRUE(prompt_opens_reasoning(F::hermes, "<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning(F::hermes, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_TRUE(prompt_opens_reasoning(F::deepseek_r1, "<｜Assistant｜><think>\n"));
  EXPECT_TRUE(prompt_opens_reasoning(F::mistral, "[INST]hi[/INST][THINK]"));
  EXPECT_TRUE(prompt_opens_reasoning(F::gpt_oss_harmony, "<|start|>assistant<|channel|>analysis<|message|>"));
  EXPECT_FALSE(prompt_opens_reasoning(F::gpt_oss_harmony, "<|start|>assistant"));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ChatOutput, DetectsTheFamilyOfEachLlamaCppTemplate) {
  // llama.cpp v0.5.0's models/templates/, each with the family whose calls it
  // writes; generic where synapse reads no native syntax (yet).
  const std::map<std::string, F> want = {
      {"Apertus-8B-Instruct", F::generic},
      {"Apriel-1.6-15b-Thinker-fixed", F::apriel},
      {"Bielik-11B-v3.0-Instruct", F::hermes},
      {"ByteDance-Seed-OSS", F::generic},
      {"Cohere2MoE", F::command_r7b},
      {"CohereForAI-c4ai-command-r-plus-tool_use", F::generic},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", F::command_r7b},
      {"GLM-4.6", F::glm_4_5},
      {"GLM-4.7-Flash", F::glm_4_5},
      {"GigaChat3-10B-A1.8B", F::generic},
      {"GigaChat3.1-10B-A1.8B", F::generic},
      {"HuggingFaceTB-SmolLM3-3B", F::generic},
      {"Kimi-K2-Instruct", F::kimi_k2},
      {"Kimi-K2-Thinking", F::kimi_k2},
      {"Kimi-K3", F::generic},
      {"LFM2-8B-A1B", F::generic},
      {"LFM2.5-8B-A1B", F::generic},
      {"LFM2.5-Instruct", F::generic},
      {"MiMo-VL", F::hermes},
      {"MiniMax-M1", F::apriel},
      {"MiniMax-M2", F::minimax_m2},
      {"MiniMax-M3", F::generic},
      {"Mistral-Small-3.2-24B-Instruct-2506", F::mistral_call_id},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", F::qwen3_coder_xml},
      {"NVIDIA-Nemotron-Nano-v2", F::nemotron_v2},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", F::hermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", F::hermes},
      {"Qwen-QwQ-32B", F::hermes},
      {"Qwen-Qwen2.5-7B-Instruct", F::hermes},
      {"Qwen-Qwen3-0.6B", F::hermes},
      {"Qwen3-Coder", F::qwen3_coder_xml},
      {"Qwen3.5-4B", F::qwen3_coder_xml},
      {"Reka-Edge", F::hermes},
      {"Spark2.5", F::glm_4_5},
      {"StepFun3.5-Flash", F::qwen3_coder_xml},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", F::deepseek_r1},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", F::deepseek_r1},
      {"deepseek-ai-DeepSeek-V3.1", F::deepseek_v3_1},
      {"deepseek-ai-DeepSeek-V3.2", F::generic},
      {"deepseek-ai-DeepSeek-V4-Flash-0731", F::generic},
      {"deepseek-ai-DeepSeek-V4", F::generic},
      {"fireworks-ai-llama-3-firefunction-v2", F::firefunction_v2},
      {"google-gemma-2-2b-it", F::generic},
      {"google-gemma-4-31B-it-interleaved", F::generic},
      {"google-gemma-4-31B-it", F::generic},
      {"ibm-granite-granite-3.3-2B-Instruct", F::granite},
      {"ibm-granite-granite-4.0", F::hermes},
      {"ibm-granite-granite-4.1", F::hermes},
      {"inclusionai-ling-3.0-flash", F::glm_4_5},
      {"llama-cpp-deepseek-r1", F::deepseek_r1},
      {"llama-cpp-rwkv-world", F::generic},
      {"meetkai-functionary-medium-v3.1", F::functionary_v3_1},
      {"meetkai-functionary-medium-v3.2", F::generic},
      {"meta-llama-Llama-3.1-8B-Instruct", F::llama3_json},
      {"meta-llama-Llama-3.2-3B-Instruct", F::llama3_json},
      {"meta-llama-Llama-3.3-70B-Instruct", F::llama3_json},
      {"microsoft-Phi-3.5-mini-instruct", F::generic},
      {"mistralai-Ministral-3-14B-Reasoning-2512", F::mistral},
      {"mistralai-Mistral-Nemo-Instruct-2407", F::mistral_nemo},
      {"moonshotai-Kimi-K2", F::kimi_k2},
      {"muse-glimmer", F::generic},
      {"openai-gpt-oss-120b", F::gpt_oss_harmony},
      {"openbmb-MiniCPM5-1B", F::generic},
      {"poolside-Laguna-S-2.1", F::glm_4_5},
      {"poolside-Laguna-XS-2.1", F::glm_4_5},
      {"poolside-Laguna-XS.2", F::glm_4_5},
      {"tencent-Hy3", F::generic},
      {"unsloth-Apriel-1.5", F::apriel},
      {"unsloth-mistral-Devstral-Small-2507", F::mistral},
      {"upstage-Solar-Open-100B", F::generic},
  };
  size_t seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(SYNAPSE_TEST_DATA) + "/templates/llama.cpp")) {
    if (e.path().extension() != ".jinja") continue;
    const std::string name = e.path().stem().string();
    SCOPED_TRACE(name);
    ASSERT_TRUE(want.count(name));
    EXPECT_STREQ(format_name(detect_format(read_file(e.path().string()))), format_name(want.at(name)));
    ++seen;
  }
  EXPECT_EQ(seen, want.size());
  // No template: the architecture decides where it can.
  EXPECT_EQ(detect_format("", "gpt-oss"), F::gpt_oss_harmony);
  EXPECT_EQ(detect_format("", "qwen3"), F::hermes);
  EXPECT_EQ(detect_format("", "qwen3moe"), F::hermes);  // Qwen3-30B-A3B and the other Qwen3-MoE
  EXPECT_EQ(detect_format("  ", "llama"), F::generic);
}

TEST(ChatOutput, MarkerTokenTextsCoverTheFamilysMarkers) {
  // Every marker the parser looks for that a model writes as one token
  // ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", ...: no spaces, in <...>
  // or [...]) is among the texts whose tokens a server preserves.
  const auto looks_like_a_token = [](std::string_view m) {
    return m.size() > 2 && m.find(' ') == std::string_view::npos && m.find('=') == std::string_view::npos &&
           ((m.front() == '<' && m.back() == '>') || (m.front() == '[' && m.back() == ']'));
  };
  for (int f = static_cast<int>(F::none); f <= static_cast<int>(F::command_r7b); ++f) {
    const F format = static_cast<F>(f);
    const std::vector<std::string_view> texts = marker_token_texts(format);
    const readers::Spec spec = readers::spec_of(format, true);
    std::vector<std::string_view> markers(spec.reasoning_starts.begin(), spec.reasoning_starts.end());
    for (const readers::Trigger& t : spec.triggers) markers.push_back(t.marker);
    for (const readers::EndMarker& e : spec.reasoning_ends) markers.push_back(e.text);
    for (std::string_view d : spec.dropped) markers.push_back(d);
    for (std::string_view m : markers) {
      if (looks_like_a_token(m)) {
        EXPECT_TRUE(std::find(texts.begin(), texts.end(), m) != texts.end()) << format_name(format) << ": " << m;
      }
    }
  }
  const std::vector<std::string_view> harmony = marker_token_texts(F::gpt_oss_harmony);
  EXPECT_NE(std::find(harmony.begin(), harmony.end(), "<|channel|>"), harmony.end());
  EXPECT_NE(std::find(harmony.begin(), harmony.end(), "<|message|>"), harmony.end());
}

}  // namespace
}  // namespace synapse::runtime

// Ollama's API as a translation onto the chat and completions routes
// (src/server/ollama.cpp, ollama_model.cpp), without a socket: requests ->
// the exact route body, replies -> the exact Ollama object, a chunk sequence
// -> the exact NDJSON lines (which add up to the whole reply), bad fields ->
// 400s naming them, and the listing routes' description of a real file.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "server/ollama.hpp"
#include "server/request.hpp"
#include "server/translation.hpp"

namespace synapse::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

ordered_json oj(const char* text) { return ordered_json::parse(text); }

// The 400 a translation gives `body`: its param and message.
std::pair<std::string, std::string> error_of(OllamaRequest (*translate)(const ordered_json&, int64_t),
                                             const std::string& body) {
  try {
    translate(ordered_json::parse(body), 4096);
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status(), 400);
    return {e.param(), e.what()};
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

// --- Requests ------------------------------------------------------------------

TEST(OllamaChatRequest, EveryFieldBecomesTheChatBody) {
  const OllamaRequest r = ollama_chat_request(oj(R"({
    "model": "qwen3:latest",
    "messages": [
      {"role": "system", "content": "Be terse."},
      {"role": "User", "content": "Weather in Paris and Rome?"},
      {"role": "assistant", "content": "", "thinking": "Two cities.",
       "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                      {"id": "call_b", "function": {"index": 1, "name": "get_weather", "arguments": {"city": "Rome"}}}]},
      {"role": "tool", "content": "21 C", "tool_name": "get_weather"},
      {"role": "tool", "content": "18 C", "tool_call_id": "call_b"},
      {"role": "user", "content": "Which is warmer?", "images": []}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
              {"function": {"name": "get_time"}}],
    "format": "json",
    "think": true,
    "options": {"temperature": 0, "top_k": 20.0, "top_p": 0.9, "min_p": 0.05, "typical_p": 1, "seed": 42,
                "repeat_penalty": 1.1, "repeat_last_n": 64, "presence_penalty": 0.5, "frequency_penalty": 0.25,
                "num_predict": 100, "stop": ["\n\n"], "num_ctx": 8192, "num_gpu": 99, "num_thread": 8,
                "use_mmap": true, "mirostat": 0, "penalize_newline": true, "not_an_option": 1},
    "keep_alive": "5m", "logprobs": true, "top_logprobs": 3})"),
                                              4096);
  EXPECT_EQ(r.route, Route::chat_completions);
  EXPECT_TRUE(r.stream);  // Ollama's default
  EXPECT_FALSE(r.done_reason);
  const ordered_json want = oj(R"({
    "model": "qwen3:latest", "stream": true, "logprobs": true, "top_logprobs": 3,
    "messages": [
      {"role": "system", "content": "Be terse."},
      {"role": "user", "content": "Weather in Paris and Rome?"},
      {"role": "assistant", "content": "", "reasoning_content": "Two cities.",
       "tool_calls": [
         {"id": "c00020000", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
         {"id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
      {"role": "tool", "tool_call_id": "c00020000", "content": "21 C"},
      {"role": "tool", "tool_call_id": "call_b", "content": "18 C"},
      {"role": "user", "content": "Which is warmer?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
              {"type": "function", "function": {"name": "get_time"}}],
    "temperature": 0, "top_p": 0.9, "min_p": 0.05, "typical_p": 1, "repeat_penalty": 1.1,
    "presence_penalty": 0.5, "frequency_penalty": 0.25, "top_k": 20, "repeat_last_n": 64, "seed": 42,
    "max_tokens": 100, "stop": ["\n\n"],
    "response_format": {"type": "json_object"},
    "chat_template_kwargs": {"enable_thinking": true}})");
  EXPECT_EQ(r.body.dump(1), want.dump(1));  // keys in order too
}

TEST(OllamaChatRequest, ToolNamesFindTheirCallsInOrder) {
  // Two calls of one tool answered by name: the first answer goes to the
  // first call; an answer with neither id nor name takes the next call.
  const OllamaRequest r = ollama_chat_request(oj(R"({"model": "m", "messages": [
      {"role": "user", "content": "x"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "function": {"name": "f", "arguments": {}}},
        {"id": "b", "function": {"name": "g", "arguments": {}}},
        {"id": "c", "function": {"name": "f", "arguments": {}}}]},
      {"role": "tool", "content": "1", "tool_name": "f"},
      {"role": "tool", "content": "2", "tool_name": "f"},
      {"role": "tool", "content": "3"},
      {"role": "tool", "content": "4", "tool_name": "h"}]})"),
                                              4096);
  const ordered_json& m = r.body["messages"];
  EXPECT_EQ(m[2]["tool_call_id"], "a");
  EXPECT_EQ(m[3]["tool_call_id"], "c");
  EXPECT_EQ(m[4]["tool_call_id"], "b");
  EXPECT_EQ(m[5]["tool_call_id"], "h");  // no call left: the name stands for the id
}

TEST(OllamaChatRequest, ThinkLevelsFormatSchemaAndLengths) {
  auto chat = [](const std::string& fields) {
    return ollama_chat_request(
               ordered_json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "x"}])" + fields + "}"),
               2048)
        .body;
  };
  EXPECT_EQ(chat(R"(, "think": false)")["chat_template_kwargs"].dump(), R"({"enable_thinking":false})");
  const ordered_json high = chat(R"(, "think": "max")");
  EXPECT_EQ(high["chat_template_kwargs"].dump(), R"({"enable_thinking":true})");
  EXPECT_EQ(high["reasoning_effort"], "high");  // Ollama reads "max" as "high" for gpt-oss
  EXPECT_EQ(chat(R"(, "think": "low")")["reasoning_effort"], "low");
  EXPECT_EQ(chat(R"(, "format": {"type": "object", "properties": {"b": {}, "a": {}}})")["response_format"].dump(),
            R"({"type":"json_schema","json_schema":{"name":"format","schema":{"type":"object","properties":{"b":{},"a":{}}}}})");
  EXPECT_FALSE(chat(R"(, "format": "")").contains("response_format"));
  // num_predict <= 0: no limit (Ollama's -1 and -2); above the context: the context.
  EXPECT_FALSE(chat(R"(, "options": {"num_predict": -1})").contains("max_tokens"));
  EXPECT_FALSE(chat(R"(, "options": {"num_predict": 0})").contains("max_tokens"));
  EXPECT_EQ(chat(R"(, "options": {"num_predict": 100000})")["max_tokens"], 2048);
  EXPECT_EQ(chat(R"(, "options": {"stop": "END"})")["stop"].dump(), R"(["END"])");
  EXPECT_EQ(chat(R"(, "stream": false)")["stream"], false);
  EXPECT_FALSE(chat(R"(, "logprobs": false, "top_logprobs": 5)").contains("logprobs"));
  EXPECT_FALSE(chat("").contains("logprobs"));
}

TEST(OllamaChatRequest, NoMessagesIsALoadAndKeepAliveZeroAnUnload) {
  EXPECT_EQ(ollama_chat_request(oj(R"({"model": "m"})"), 64).done_reason, "load");
  EXPECT_EQ(ollama_chat_request(oj(R"({"model": "m", "messages": []})"), 64).done_reason, "load");
  EXPECT_EQ(ollama_chat_request(oj(R"({"model": "m", "messages": [], "keep_alive": 0})"), 64).done_reason, "unload");
  EXPECT_EQ(ollama_chat_request(oj(R"({"model": "m", "keep_alive": "0s"})"), 64).done_reason, "unload");
  EXPECT_EQ(ollama_chat_request(oj(R"({"model": "m", "keep_alive": "5m"})"), 64).done_reason, "load");
  EXPECT_EQ(ollama_chat_request(oj(R"({"model": "m", "keep_alive": -1})"), 64).done_reason, "load");
}

TEST(OllamaChatRequest, BadFieldsAreNamed) {
  auto expect = [](const std::string& fields, const std::string& param, const std::string& message) {
    const std::string body = R"({"model": "m", "messages": [{"role": "user", "content": "x"}])" + fields + "}";
    const auto [p, msg] = error_of(ollama_chat_request, body);
    EXPECT_EQ(p, param) << body;
    EXPECT_EQ(msg, message) << body;
  };
  expect(R"(, "stream": "yes")", "stream", R"(stream: must be a boolean, got "yes")");
  expect(R"(, "format": "xml")", "format", R"(format: must be "json" or a JSON Schema object, got "xml")");
  expect(R"(, "format": 3)", "format", R"(format: must be "json" or a JSON Schema object, got 3)");
  expect(R"(, "think": "hard")", "think",
         R"(think: must be a boolean or one of "low", "medium", "high", "max", got "hard")");
  expect(R"(, "options": [1])", "options", "options: must be an object, got [1]");
  expect(R"(, "options": {"temperature": "hot"})", "options.temperature",
         R"(options.temperature: must be a number, got "hot")");
  expect(R"(, "options": {"top_k": "40"})", "options.top_k", R"(options.top_k: must be a number, got "40")");
  expect(R"(, "options": {"stop": [1]})", "options.stop[0]", "options.stop[0]: must be a string, got 1");
  expect(R"(, "options": {"num_ctx": 0})", "options.num_ctx", "options.num_ctx: must be a positive integer, got 0");
  expect(R"(, "options": {"mirostat": 2})", "options.mirostat",
         "options.mirostat: is not supported (only 0: the sampler has no Mirostat), got 2");
  expect(R"(, "top_logprobs": 21)", "top_logprobs", "top_logprobs: must be an integer between 0 and 20, got 21");
  expect(R"(, "tools": "x")", "tools", R"(tools: must be an array, got "x")");
  expect(R"(, "tools": [1])", "tools[0]", "tools[0]: must be an object, got 1");
  auto expect_msgs = [](const std::string& messages, const std::string& param, const std::string& message) {
    const std::string body = R"({"model": "m", "messages": )" + messages + "}";
    const auto [p, msg] = error_of(ollama_chat_request, body);
    EXPECT_EQ(p, param) << body;
    EXPECT_EQ(msg, message) << body;
  };
  expect_msgs(R"("hi")", "messages", R"(messages: must be an array, got "hi")");
  expect_msgs(R"([{"content": "x"}])", "messages[0].role", "messages[0].role: is required");
  expect_msgs(R"([{"role": "robot", "content": "x"}])", "messages[0].role",
              "messages[0].role: must be one of 'system', 'user', 'assistant', 'tool', got 'robot'");
  expect_msgs(R"([{"role": "user", "content": 5}])", "messages[0].content",
              "messages[0].content: must be a string, got 5");
  expect_msgs(R"([{"role": "user", "content": "x", "images": ["iVBOR"]}])", "messages[0].images",
              "messages[0].images: images are not supported: this server has no vision");
  expect_msgs(R"([{"role": "assistant", "content": "", "tool_calls": [{"name": "f"}]}])",
              "messages[0].tool_calls[0].function", "messages[0].tool_calls[0].function: is required");
  expect_msgs(R"([{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}])",
              "messages[0].tool_calls[0].function.arguments",
              "messages[0].tool_calls[0].function.arguments: must be an object, got 3");
}

TEST(OllamaGenerateRequest, TemplatedRawAndRefusedFields) {
  const OllamaRequest t = ollama_generate_request(
      oj(R"({"model": "m", "prompt": "Why?", "system": "Be brief.", "think": false, "stream": false,
             "options": {"seed": 7, "num_predict": 16}, "format": "json", "keep_alive": "1h"})"),
      4096);
  EXPECT_EQ(t.route, Route::chat_completions);
  EXPECT_FALSE(t.stream);
  EXPECT_EQ(t.body.dump(), R"({"model":"m","stream":false,"messages":[{"role":"system","content":"Be brief."},)"
                           R"({"role":"user","content":"Why?"}],"chat_template_kwargs":{"enable_thinking":false},)"
                           R"("seed":7,"max_tokens":16,"response_format":{"type":"json_object"}})");
  const OllamaRequest raw = ollama_generate_request(
      oj(R"({"model": "m", "prompt": "[INST] hi [/INST]", "raw": true, "think": true, "logprobs": true,
             "top_logprobs": 2, "options": {"temperature": 0}})"),
      4096);
  EXPECT_EQ(raw.route, Route::completions);
  EXPECT_TRUE(raw.stream);
  EXPECT_EQ(raw.body.dump(), R"({"model":"m","stream":true,"logprobs":2,"prompt":"[INST] hi [/INST]","temperature":0})");
  EXPECT_EQ(ollama_generate_request(oj(R"({"model": "m"})"), 64).done_reason, "load");
  EXPECT_EQ(ollama_generate_request(oj(R"({"model": "m", "prompt": "", "keep_alive": 0})"), 64).done_reason, "unload");

  auto expect = [](const std::string& body, const std::string& param, const std::string& message) {
    const auto [p, msg] = error_of(ollama_generate_request, body);
    EXPECT_EQ(p, param) << body;
    EXPECT_EQ(msg, message) << body;
  };
  expect(R"({"model": "m", "prompt": "def f(", "suffix": "return x"})", "suffix",
         "suffix: is not supported: this server does no fill-in-the-middle");
  expect(R"({"model": "m", "prompt": "x", "template": "{{ .Prompt }}"})", "template",
         "template: is not supported: Go templates are Ollama's; the model's Jinja template renders the prompt (or "
         "send raw: true with a prompt you formatted)");
  expect(R"({"model": "m", "prompt": "x", "context": [1, 2, 3]})", "context",
         "context: is not supported (Ollama's deprecated token memory): send the conversation to /api/chat");
  expect(R"({"model": "m", "prompt": "x", "images": ["AA=="]})", "images",
         "images: images are not supported: this server has no vision");
  expect(R"({"model": "m", "prompt": "x", "raw": true, "system": "S"})", "raw",
         "raw: raw mode does not support template, system, or context");
  expect(R"({"model": "m", "prompt": 5})", "prompt", "prompt: must be a string, got 5");
  // An empty context (what a client sends back when it got none) is no context.
  EXPECT_NO_THROW(ollama_generate_request(oj(R"({"model": "m", "prompt": "x", "context": []})"), 64));
}

TEST(OllamaFields, ChatRouteNamesBecomeOllamas) {
  EXPECT_EQ(ollama_chat_field("max_tokens"), "options.num_predict");
  EXPECT_EQ(ollama_chat_field("temperature"), "options.temperature");
  EXPECT_EQ(ollama_chat_field("top_k"), "options.top_k");
  EXPECT_EQ(ollama_chat_field("stop[3]"), "options.stop[3]");
  EXPECT_EQ(ollama_chat_field("response_format.json_schema.schema"), "format");
  EXPECT_EQ(ollama_chat_field("chat_template_kwargs"), "think");
  EXPECT_EQ(ollama_chat_field("messages[2].tool_calls[0].id"), "messages[2].tool_calls[0].id");
  EXPECT_EQ(ollama_chat_field("tools[0].function.name"), "tools[0].function.name");
  EXPECT_EQ(ollama_generate_field("messages"), "prompt");
  EXPECT_EQ(ollama_generate_field("prompt"), "prompt");
  EXPECT_EQ(ollama_generate_field("seed"), "options.seed");
  const HttpError e = renamed_error(HttpError(400, "'max_tokens' must be in [1, 4096], got 0", "max_tokens"),
                                    ollama_chat_field);
  EXPECT_STREQ(e.what(), "'options.num_predict' must be in [1, 4096], got 0");
}

// --- Replies -------------------------------------------------------------------

const OllamaStats kStats = {"stop", 5000000, 0, 50, 2000000, 20, 3000000};

const json kChatReply = json::parse(R"({
  "id": "chatcmpl-abc", "object": "chat.completion", "created": 1700000000, "model": "tiny",
  "choices": [{"index": 0, "finish_reason": "tool_calls",
               "logprobs": {"content": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105],
                                         "top_logprobs": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105]}]}],
                            "refusal": null},
               "message": {"role": "assistant", "content": "Checking.", "reasoning_content": "Need weather.",
                           "tool_calls": [
                             {"id": "call_1", "type": "function",
                              "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                             {"id": "call_2", "type": "function",
                              "function": {"name": "get_weather", "arguments": "not json"}}]}}],
  "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}})");

TEST(OllamaReply, ChatReplyBecomesOllamasMessage) {
  const json r = ollama_reply(OllamaEndpoint::chat, kChatReply, "qwen3", "2025-01-01T00:00:00.000000000Z", kStats);
  const json want = json::parse(R"({
    "model": "qwen3", "created_at": "2025-01-01T00:00:00.000000000Z",
    "message": {"role": "assistant", "content": "Checking.", "thinking": "Need weather.",
                "tool_calls": [{"id": "call_1", "function": {"index": 0, "name": "get_weather",
                                                             "arguments": {"city": "Paris"}}},
                               {"id": "call_2", "function": {"index": 1, "name": "get_weather", "arguments": {}}}]},
    "done": true, "done_reason": "stop", "total_duration": 5000000, "load_duration": 0,
    "prompt_eval_count": 50, "prompt_eval_duration": 2000000, "eval_count": 20, "eval_duration": 3000000,
    "logprobs": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105],
                  "top_logprobs": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105]}]}]})");
  EXPECT_EQ(r, want) << r.dump(1);
  // The same reply on /api/generate: response and thinking at the top.
  const json g = ollama_reply(OllamaEndpoint::generate, kChatReply, "qwen3", "t", kStats);
  EXPECT_EQ(g["response"], "Checking.");
  EXPECT_EQ(g["thinking"], "Need weather.");
  EXPECT_FALSE(g.contains("message"));
}

TEST(OllamaReply, CompletionsReplyBecomesAGenerateResponse) {
  const json completion = json::parse(R"({
    "id": "cmpl-x", "object": "text_completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "text": "Once upon", "finish_reason": "length",
                 "logprobs": {"tokens": ["Once", " upon"], "token_logprobs": [-1.0, -2.0],
                              "top_logprobs": [{"Once": -1.0, "A": -1.5}, {" upon": -2.0, " a": -0.5}],
                              "text_offset": [0, 4]}}]})");
  OllamaStats s = kStats;
  s.done_reason = "length";
  const json g = ollama_reply(OllamaEndpoint::generate, completion, "m", "t", s);
  EXPECT_EQ(g["response"], "Once upon");
  EXPECT_EQ(g["done_reason"], "length");
  EXPECT_EQ(g["done"], true);
  EXPECT_FALSE(g.contains("thinking"));
  EXPECT_EQ(g["logprobs"].dump(),
            R"([{"bytes":[79,110,99,101],"logprob":-1.0,"token":"Once","top_logprobs":[)"
            R"({"bytes":[79,110,99,101],"logprob":-1.0,"token":"Once"},{"bytes":[65],"logprob":-1.5,"token":"A"}]},)"
            R"({"bytes":[32,117,112,111,110],"logprob":-2.0,"token":" upon","top_logprobs":[)"
            R"({"bytes":[32,97],"logprob":-0.5,"token":" a"},{"bytes":[32,117,112,111,110],"logprob":-2.0,"token":" upon"}]}])");
}

TEST(OllamaReply, LoadReplyStatsAndErrors) {
  EXPECT_EQ(ollama_load_reply(OllamaEndpoint::chat, "m", "t", "load").dump(),
            R"({"created_at":"t","done":true,"done_reason":"load","message":{"content":"","role":"assistant"},"model":"m"})");
  EXPECT_EQ(ollama_load_reply(OllamaEndpoint::generate, "m", "t", "unload").dump(),
            R"({"created_at":"t","done":true,"done_reason":"unload","model":"m","response":""})");
  GenerationResult g;
  g.tokens = {1, 2, 3};
  g.n_prompt = 11;
  g.finish_reason = FinishReason::length;
  g.timings.prompt_ms = 1.5;
  g.timings.predicted_ms = 2.25;
  const OllamaStats s = ollama_stats(g, 9000000);
  EXPECT_EQ(s.done_reason, "length");
  EXPECT_EQ(s.total_duration, 9000000);
  EXPECT_EQ(s.load_duration, 0);
  EXPECT_EQ(s.prompt_eval_count, 11);
  EXPECT_EQ(s.prompt_eval_duration, 1500000);
  EXPECT_EQ(s.eval_count, 3);
  EXPECT_EQ(s.eval_duration, 2250000);
  g.finish_reason = FinishReason::stop;
  EXPECT_EQ(ollama_stats(g, 0).done_reason, "stop");
  EXPECT_EQ(ollama_error_body("model 'x' not found").dump(), R"({"error":"model 'x' not found"})");
  EXPECT_EQ(ndjson({json{{"a", 1}}, json{{"b", "\xff"}}}), "{\"a\":1}\n{\"b\":\"\xef\xbf\xbd\"}\n");
}

// The chat route's stream of kChatReply's generation: the role chunk,
// reasoning, text (with a step's logprobs), call 0 in three fragments, call 1
// in two, the finish chunk, the usage chunk.
std::vector<json> chat_chunks() {
  auto chunk = [](json delta, json finish = nullptr, json logprobs = nullptr) {
    return json{{"id", "chatcmpl-abc"}, {"object", "chat.completion.chunk"}, {"model", "tiny"},
                {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish},
                                          {"logprobs", logprobs}}})}};
  };
  auto call = [](int index, const char* id, const char* name, const char* args) {
    json c = {{"index", index}, {"function", {{"arguments", args}}}};
    if (id) {
      c["id"] = id;
      c["type"] = "function";
      c["function"]["name"] = name;
    }
    return json{{"tool_calls", json::array({c})}};
  };
  json usage = chunk(json::object());
  usage["choices"] = json::array();
  return {chunk({{"role", "assistant"}, {"content", ""}}),
          chunk({{"reasoning_content", "Need "}}),
          chunk({{"reasoning_content", "weather."}}),
          chunk({{"content", "Check"}}, nullptr, kChatReply["choices"][0]["logprobs"]),
          chunk({{"content", "ing."}}),
          chunk(call(0, "call_1", "get_weather", "")),
          chunk(call(0, nullptr, nullptr, "{\"city\":")),
          chunk(call(0, nullptr, nullptr, "\"Paris\"}")),
          chunk(call(1, "call_2", "get_weather", "not ")),
          chunk(call(1, nullptr, nullptr, "json")),
          chunk(json::object(), "tool_calls"),
          usage};
}

TEST(OllamaStream, ChatChunksBecomeNdjsonLinesThatAddUpToTheReply) {
  OllamaStream s(OllamaEndpoint::chat, "qwen3");
  std::vector<json> lines;
  for (const json& c : chat_chunks())
    for (json& l : s.on_chunk(c, "t")) lines.push_back(std::move(l));
  for (json& l : s.finish(kStats, "t")) lines.push_back(std::move(l));
  std::vector<std::string> got;
  for (const json& l : lines) got.push_back(l.dump());
  const std::vector<std::string> want = {
      R"({"created_at":"t","done":false,"message":{"content":"","role":"assistant","thinking":"Need "},"model":"qwen3"})",
      R"({"created_at":"t","done":false,"message":{"content":"","role":"assistant","thinking":"weather."},"model":"qwen3"})",
      R"({"created_at":"t","done":false,"logprobs":[{"bytes":[72,105],"logprob":-0.5,"token":"Hi","top_logprobs":[{"bytes":[72,105],"logprob":-0.5,"token":"Hi"}]}],"message":{"content":"Check","role":"assistant"},"model":"qwen3"})",
      R"({"created_at":"t","done":false,"message":{"content":"ing.","role":"assistant"},"model":"qwen3"})",
      R"({"created_at":"t","done":false,"message":{"content":"","role":"assistant","tool_calls":[{"function":{"arguments":{"city":"Paris"},"index":0,"name":"get_weather"},"id":"call_1"},{"function":{"arguments":{},"index":1,"name":"get_weather"},"id":"call_2"}]},"model":"qwen3"})",
      R"({"created_at":"t","done":true,"done_reason":"stop","eval_count":20,"eval_duration":3000000,"load_duration":0,"message":{"content":"","role":"assistant"},"model":"qwen3","prompt_eval_count":50,"prompt_eval_duration":2000000,"total_duration":5000000})",
  };
  EXPECT_EQ(got, want);

  // What a client gathers from the lines is the whole reply.
  json gathered = lines.back();
  std::string content, thinking;
  json calls = json::array(), logprobs = json::array();
  for (const json& l : lines) {
    content += l["message"]["content"].get<std::string>();
    thinking += l["message"].value("thinking", "");
    for (const json& c : l["message"].value("tool_calls", json::array())) calls.push_back(c);
    for (const json& p : l.value("logprobs", json::array())) logprobs.push_back(p);
  }
  gathered["message"] = {{"role", "assistant"}, {"content", content}, {"thinking", thinking}, {"tool_calls", calls}};
  gathered["logprobs"] = logprobs;
  EXPECT_EQ(gathered, ollama_reply(OllamaEndpoint::chat, kChatReply, "qwen3", "t", kStats));
}

TEST(OllamaStream, GenerateChunksAndAMidStreamError) {
  OllamaStream s(OllamaEndpoint::generate, "m");
  auto text = [](const char* t, json finish = nullptr) {
    return json{{"object", "text_completion"},
                {"choices", json::array({{{"index", 0}, {"text", t}, {"finish_reason", finish}, {"logprobs", nullptr}}})}};
  };
  std::string got;
  for (const json& c : {text("Once"), text(""), text(" upon"), text("", "length")}) got += ndjson(s.on_chunk(c, "t"));
  OllamaStats st = kStats;
  st.done_reason = "length";
  got += ndjson(s.finish(st, "t"));
  EXPECT_EQ(got,
            "{\"created_at\":\"t\",\"done\":false,\"model\":\"m\",\"response\":\"Once\"}\n"
            "{\"created_at\":\"t\",\"done\":false,\"model\":\"m\",\"response\":\" upon\"}\n"
            "{\"created_at\":\"t\",\"done\":true,\"done_reason\":\"length\",\"eval_count\":20,\"eval_duration\":3000000,"
            "\"load_duration\":0,\"model\":\"m\",\"prompt_eval_count\":50,\"prompt_eval_duration\":2000000,"
            "\"response\":\"\",\"total_duration\":5000000}\n");

  OllamaStream e(OllamaEndpoint::chat, "m");
  const std::vector<json> failed = e.on_chunk(json{{"error", {{"message", "generation failed: boom"}, {"code", 500}}}}, "t");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0], json({{"error", "generation failed: boom"}}));
  EXPECT_TRUE(e.on_chunk(chat_chunks()[3], "t").empty());  // nothing after an error
  EXPECT_TRUE(e.finish(kStats, "t").empty());
}

TEST(OllamaStream, CallsWithoutAFinishChunkStillGoOutWhole) {
  OllamaStream s(OllamaEndpoint::chat, "m");
  const std::vector<json> chunks = chat_chunks();
  for (size_t i = 5; i < 8; ++i) EXPECT_TRUE(s.on_chunk(chunks[i], "t").empty());
  const std::vector<json> end = s.finish(kStats, "t");
  ASSERT_EQ(end.size(), 2u);
  EXPECT_EQ(end[0]["message"]["tool_calls"][0]["function"]["arguments"], json({{"city", "Paris"}}));
  EXPECT_EQ(end[1]["done"], true);
}

// --- The model -----------------------------------------------------------------

TEST(OllamaModel, NamesNumbersTimesAndReasoning) {
  EXPECT_EQ(ollama_human_number(999), "999");
  EXPECT_EQ(ollama_human_number(260000), "260K");
  EXPECT_EQ(ollama_human_number(292032), "292K");
  EXPECT_EQ(ollama_human_number(137500000), "137.50M");
  EXPECT_EQ(ollama_human_number(8000000000), "8B");
  EXPECT_EQ(ollama_human_number(7615616512), "7.6B");
  EXPECT_EQ(rfc3339(std::chrono::system_clock::time_point(std::chrono::seconds(1700000000)) +
                    std::chrono::microseconds(123456)),
            "2023-11-14T22:13:20.123456000Z");
  EXPECT_TRUE(template_has_reasoning("{% if enable_thinking %}<think>{% endif %}"));
  EXPECT_TRUE(template_has_reasoning("{{ message.reasoning_content }}"));
  EXPECT_FALSE(template_has_reasoning("{% for m in messages %}{{ m.content }}{% endfor %}"));
}

TEST(OllamaModel, DescribesTheServedFile) {
  const Model model = Model::load(SYNAPSE_TEST_DATA "/models/stories260K.gguf");
  OllamaServing s;
  s.model_path = SYNAPSE_TEST_DATA "/models/stories260K.gguf";
  s.model_name = s.model_path;  // no --alias
  s.n_ctx = 512;
  s.n_parallel = 2;
  s.chat_template = "chatml";
  const OllamaModel m = describe_ollama_model(model, s);
  EXPECT_EQ(m.name, "stories260K:latest");
  for (const char* name : {"stories260K:latest", "stories260k", "STORIES260K.gguf", "stories260K.gguf:latest",
                           SYNAPSE_TEST_DATA "/models/stories260K.gguf"})
    EXPECT_TRUE(ollama_model_matches(m, name)) << name;
  for (const char* name : {"stories", "llama3.2", "stories260K:7b", ""}) EXPECT_FALSE(ollama_model_matches(m, name)) << name;
  EXPECT_EQ(m.details["format"], "gguf");
  EXPECT_EQ(m.details["family"], "llama");
  EXPECT_EQ(m.details["families"], json::array({"llama"}));
  EXPECT_EQ(m.details["parameter_size"], ollama_human_number(model.n_params()));
  EXPECT_EQ(m.details["quantization_level"], "F32");
  EXPECT_EQ(m.size, model.gguf().file_size());
  EXPECT_EQ(m.size_loaded, model.weight_bytes() + 2 * 512 * model.kv_bytes_per_position());
  EXPECT_EQ(m.digest.size(), 64u);
  EXPECT_EQ(m.capabilities, std::vector<std::string>{"completion"});
  EXPECT_EQ(m.parameters.substr(0, 35), "num_ctx                        512\n");

  const json tags = ollama_tags(m);
  ASSERT_EQ(tags["models"].size(), 1u);
  const json& t = tags["models"][0];
  EXPECT_EQ(t["name"], "stories260K:latest");
  EXPECT_EQ(t["model"], "stories260K:latest");
  EXPECT_EQ(t["modified_at"], m.modified_at);
  EXPECT_EQ(t["digest"], m.digest);

  const json info = ollama_model_info(model, false);
  EXPECT_EQ(info["general.architecture"], "llama");
  EXPECT_EQ(info["llama.context_length"], model.n_ctx_train());
  EXPECT_EQ(info["general.parameter_count"], model.n_params());
  EXPECT_EQ(info["tokenizer.ggml.tokens"], json::array());  // long arrays only when verbose
  EXPECT_FALSE(info.contains("general.name"));
  EXPECT_EQ(ollama_model_info(model, true)["tokenizer.ggml.tokens"].size(), static_cast<size_t>(model.n_vocab()));
  const json show = ollama_show(m, info);
  EXPECT_EQ(show["capabilities"], json::array({"completion"}));
  EXPECT_EQ(show["template"], "chatml");
  EXPECT_EQ(show["model_info"], info);
  EXPECT_NE(show["modelfile"].get<std::string>().find("PARAMETER num_ctx 512\n"), std::string::npos);

  const json ps = ollama_ps(m, "2125-01-01T00:00:00.000000000Z");
  EXPECT_EQ(ps["models"][0]["size"], m.size_loaded);
  EXPECT_EQ(ps["models"][0]["size_vram"], 0);
  EXPECT_EQ(ps["models"][0]["context_length"], 512);
  EXPECT_EQ(ps["models"][0]["expires_at"], "2125-01-01T00:00:00.000000000Z");

  // An alias names the model; the file name still does too.
  s.model_name = "storyteller";
  s.tools = s.thinking = true;
  const OllamaModel a = describe_ollama_model(model, s);
  EXPECT_EQ(a.name, "storyteller:latest");
  EXPECT_EQ(a.capabilities, (std::vector<std::string>{"completion", "tools", "thinking"}));
  for (const char* name : {"storyteller", "storyteller:latest", "stories260K", "stories260K.gguf"})
    EXPECT_TRUE(ollama_model_matches(a, name)) << name;
  s.model_name = "qwen3:0.6b";
  EXPECT_EQ(describe_ollama_model(model, s).name, "qwen3:0.6b");
}

TEST(OllamaModel, RequestedModelIsRequiredAndMustBeTheServedOne) {
  OllamaModel m;
  m.names = {"stories260k:latest", "stories260k"};
  EXPECT_EQ(ollama_requested_model(m, oj(R"({"model": "Stories260K"})")), "Stories260K");
  auto status_of = [&](const char* body) {
    try {
      ollama_requested_model(m, oj(body));
    } catch (const HttpError& e) {
      return std::to_string(e.status()) + " " + e.what();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(status_of(R"({"model": "llama3.2"})"), "404 model 'llama3.2' not found");
  EXPECT_EQ(status_of(R"({"prompt": "x"})"), "400 model is required");
  EXPECT_EQ(status_of(R"({"model": 3})"), "400 model is required");
}

}  // namespace
}  // namespace synapse::server

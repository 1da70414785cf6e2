// Anthropic's Messages and OpenAI's Responses APIs as translations onto the
// chat route (src/server/anthropic.cpp, responses.cpp), without a socket:
// requests -> the exact chat body, chat replies -> the exact reply, a chunk
// sequence -> the exact event list, and bad fields -> 400s naming them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/anthropic.hpp"
#include "server/request.hpp"
#include "server/responses.hpp"
#include "server/translation.hpp"

namespace synapse::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

ordered_json oj(const char* text) { return ordered_json::parse(text); }

// The 400 a translation gives `body`: its param and message.
template <class F>
std::pair<std::string, std::string> error_of(F translate, const char* body) {
  try {
    translate(oj(body));
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status(), 400);
    return {e.param(), e.what()};
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

// A reply with every part: reasoning, text, two tool calls; 30 of the 50
// prompt tokens read from the cache.
const json kChatReply = json::parse(R"({
  "id": "chatcmpl-abc123", "object": "chat.completion", "created": 1700000000, "model": "tiny",
  "system_fingerprint": "b1",
  "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null,
               "message": {"role": "assistant", "content": "Checking.", "reasoning_content": "Need weather.",
                           "tool_calls": [
                             {"id": "call_1", "type": "function",
                              "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                             {"id": "call_2", "type": "function",
                              "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}]}}],
  "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70,
            "prompt_tokens_details": {"cached_tokens": 30}}})");

// The same generation as the chat route streams it: the role chunk, two
// reasoning deltas, two text deltas, call 0 (name first, then its arguments
// in two fragments), call 1 (name with its first fragment), the finish chunk
// and the usage chunk.
std::vector<json> chat_chunks() {
  auto chunk = [](json delta, json finish = nullptr) {
    return json{{"id", "chatcmpl-abc123"}, {"object", "chat.completion.chunk"}, {"created", 1700000000},
                {"model", "tiny"}, {"system_fingerprint", "b1"},
                {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
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
  usage["usage"] = kChatReply["usage"];
  return {chunk({{"role", "assistant"}, {"content", ""}}),
          chunk({{"reasoning_content", "Need "}}),
          chunk({{"reasoning_content", "weather."}}),
          chunk({{"content", "Check"}}),
          chunk({{"content", "ing."}}),
          chunk(call(0, "call_1", "get_weather", "")),
          chunk(call(0, nullptr, nullptr, "{\"city\":")),
          chunk(call(0, nullptr, nullptr, "\"Paris\"}")),
          chunk(call(1, "call_2", "get_weather", "{\"city\"")),
          chunk(call(1, nullptr, nullptr, ":\"Rome\"}")),
          chunk(json::object(), "tool_calls"),
          usage};
}

// Events as "name data" lines, for readable failures.
std::vector<std::string> lines(const std::vector<ApiEvent>& events) {
  std::vector<std::string> out;
  for (const ApiEvent& e : events) out.push_back(e.event + " " + e.data.dump());
  return out;
}

// --- Anthropic: requests ----------------------------------------------------

TEST(AnthropicRequest, EveryBlockTypeBecomesTheChatBody) {
  const ordered_json chat = anthropic_to_chat(oj(R"({
    "model": "claude-x", "max_tokens": 256,
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
      {"role": "user", "content": "What is the weather in Paris and Rome?"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Two cities: two calls.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "unit": "c"}},
        {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": false,
         "content": [{"type": "text", "text": "21"}, {"type": "text", "text": " C"}]},
        {"type": "text", "text": "Which is warmer?"}]}],
    "stop_sequences": ["\n\nHuman:"], "temperature": 0.5, "top_p": 0.9, "top_k": 40, "stream": true,
    "tools": [{"name": "get_weather", "description": "Weather now",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"},
                                "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": false},
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "metadata": {"user_id": "u1"}})"));
  const ordered_json want = oj(R"({
    "model": "claude-x",
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "What is the weather in Paris and Rome?"},
      {"role": "assistant", "content": [{"type": "text", "text": "Checking both."}],
       "reasoning_content": "Two cities: two calls.",
       "tool_calls": [
         {"id": "toolu_1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"c\"}"}},
         {"id": "toolu_2", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}]},
      {"role": "tool", "tool_call_id": "toolu_1", "content": "18 C"},
      {"role": "tool", "tool_call_id": "toolu_2", "content": "21 C"},
      {"role": "user", "content": [{"type": "text", "text": "Which is warmer?"}]}],
    "max_tokens": 256, "stop": ["\n\nHuman:"], "temperature": 0.5, "top_p": 0.9, "top_k": 40,
    "stream": true, "stream_options": {"include_usage": true},
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                              "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}}],
    "tool_choice": "auto", "parallel_tool_calls": true,
    "chat_template_kwargs": {"enable_thinking": true}})");
  EXPECT_EQ(chat.dump(1), want.dump(1));  // keys in order too
}

TEST(AnthropicRequest, ToolChoicesThinkingOffAndCallOnlyTurns) {
  const ordered_json chat = anthropic_to_chat(oj(R"({
    "max_tokens": 8, "system": "Be brief.",
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "Go"}]},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "run", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": true,
                                    "content": "exit 1"}]},
      {"role": "user", "content": []}],
    "tool_choice": {"type": "tool", "name": "run", "disable_parallel_tool_use": true},
    "thinking": {"type": "disabled"}})"));
  const ordered_json want = oj(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Go"}]},
      {"role": "assistant", "content": null,
       "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "t1", "content": "exit 1"},
      {"role": "user", "content": ""}],
    "max_tokens": 8,
    "tool_choice": {"type": "function", "function": {"name": "run"}}, "parallel_tool_calls": false,
    "chat_template_kwargs": {"enable_thinking": false}})");
  EXPECT_EQ(chat.dump(1), want.dump(1));
  auto choice = [](const char* type) {
    return anthropic_to_chat(ordered_json{{"max_tokens", 1},
                                          {"messages", {{{"role", "user"}, {"content", "x"}}}},
                                          {"tool_choice", {{"type", type}}}})["tool_choice"];
  };
  EXPECT_EQ(choice("any"), "required");
  EXPECT_EQ(choice("none"), "none");
}

TEST(AnthropicRequest, CountTokensNeedsNoMaxTokensAndNeverStreams) {
  const ordered_json chat = anthropic_count_tokens_to_chat(oj(R"({
    "model": "m", "system": "S", "stream": true, "messages": [{"role": "user", "content": "Hi"}],
    "thinking": {"type": "enabled", "budget_tokens": 1024}})"));
  EXPECT_EQ(chat.dump(), R"({"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":"Hi"}],)"
                         R"("chat_template_kwargs":{"enable_thinking":true}})");
}

TEST(AnthropicRequest, BadFieldsAreNamed) {
  auto expect = [](const char* body, const std::string& param, const std::string& message) {
    const auto [p, msg] = error_of(anthropic_to_chat, body);
    EXPECT_EQ(p, param) << body;
    EXPECT_EQ(msg, message) << body;
  };
  const std::string user = R"("max_tokens": 5, "messages": [{"role": "user", "content": )";
  expect(R"({"messages": [{"role": "user", "content": "hi"}]})", "max_tokens", "max_tokens: is required");
  expect(R"({"max_tokens": 5})", "messages", "messages: is required");
  expect(R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})", "messages[0].role",
         "messages[0].role: must be 'user' or 'assistant', got 'system'");
  expect(("{" + user + R"([{"type": "text", "text": "a"}, {"type": "foo"}]}]})").c_str(), "messages[0].content[1].type",
         "messages[0].content[1].type: unknown block type 'foo'");
  expect(("{" + user + R"([{"type": "image", "source": {"type": "base64", "data": ""}}]}]})").c_str(),
         "messages[0].content[0].type",
         "messages[0].content[0].type: 'image' blocks are not supported: this server has no vision");
  expect(("{" + user + R"([{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "document"}]}]}]})").c_str(),
         "messages[0].content[0].content[0].type",
         "messages[0].content[0].content[0].type: 'document' blocks are not supported: this server has no vision");
  expect(("{" + user + R"([{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}]})").c_str(),
         "messages[0].content[0].type", "messages[0].content[0].type: 'tool_use' blocks belong to assistant messages");
  expect(R"({"max_tokens": 5, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n"}]}]})",
         "messages[0].content[0].input", "messages[0].content[0].input: is required");
  expect(("{" + user + R"([{"type": "tool_result", "content": "x"}]}]})").c_str(), "messages[0].content[0].tool_use_id",
         "messages[0].content[0].tool_use_id: is required");
  expect(("{" + user + R"("hi"}], "stop_sequences": ["a", 1]})").c_str(), "stop_sequences[1]",
         "stop_sequences[1]: must be a string, got 1");
  expect(("{" + user + R"("hi"}], "tools": [{"type": "web_search_20250305", "name": "web_search"}]})").c_str(),
         "tools[0].type", "tools[0].type: 'web_search_20250305' is a server tool, which this server does not run");
  expect(("{" + user + R"("hi"}], "tools": [{"name": "f"}]})").c_str(), "tools[0].input_schema",
         "tools[0].input_schema: is required");
  expect(("{" + user + R"("hi"}], "tool_choice": {"type": "sometimes"}})").c_str(), "tool_choice.type",
         "tool_choice.type: must be one of 'auto', 'any', 'tool', 'none', got 'sometimes'");
  expect(("{" + user + R"("hi"}], "thinking": {"type": "on"}})").c_str(), "thinking.type",
         "thinking.type: must be 'enabled', 'adaptive' or 'disabled', got 'on'");
  expect(("{" + user + R"(42}]})").c_str(), "messages[0].content",
         "messages[0].content: must be a string or an array of content blocks, got 42");
}

// --- Anthropic: replies -----------------------------------------------------

TEST(AnthropicReply, ChatReplyBecomesAMessage) {
  EXPECT_EQ(anthropic_from_chat(kChatReply).dump(1), json::parse(R"({
    "id": "msg_abc123", "type": "message", "role": "assistant", "model": "tiny",
    "content": [{"type": "thinking", "thinking": "Need weather.", "signature": ""},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Rome"}}],
    "stop_reason": "tool_use", "stop_sequence": null,
    "usage": {"input_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 30,
              "output_tokens": 20}})").dump(1));
}

TEST(AnthropicReply, StopReasons) {
  json r = json::parse(R"({"id": "chatcmpl-x", "model": "m", "choices": [{"index": 0, "finish_reason": "stop",
    "message": {"role": "assistant", "content": "The end"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5,
              "prompt_tokens_details": {"cached_tokens": 0}}})");
  const json a = anthropic_from_chat(r, "THE END");
  EXPECT_EQ(a["stop_reason"], "stop_sequence");
  EXPECT_EQ(a["stop_sequence"], "THE END");
  EXPECT_EQ(anthropic_from_chat(r)["stop_reason"], "end_turn");
  r["choices"][0]["finish_reason"] = "length";
  r["choices"][0]["message"]["content"] = "";
  const json cut = anthropic_from_chat(r);
  EXPECT_EQ(cut["stop_reason"], "max_tokens");
  EXPECT_EQ(cut["stop_sequence"], nullptr);
  EXPECT_EQ(cut["content"].dump(), R"([{"text":"","type":"text"}])");  // never an empty content list
}

TEST(AnthropicReply, ErrorBody) {
  EXPECT_EQ(anthropic_error_body(400, "max_tokens: is required").dump(),
            R"({"error":{"message":"max_tokens: is required","type":"invalid_request_error"},"type":"error"})");
  EXPECT_EQ(anthropic_error_body(401, "k")["error"]["type"], "authentication_error");
  EXPECT_EQ(anthropic_error_body(404, "k")["error"]["type"], "not_found_error");
  EXPECT_EQ(anthropic_error_body(413, "k")["error"]["type"], "request_too_large");
  EXPECT_EQ(anthropic_error_body(503, "k")["error"]["type"], "overloaded_error");
  EXPECT_EQ(anthropic_error_body(500, "k")["error"]["type"], "api_error");
}

// --- Anthropic: streams -----------------------------------------------------

TEST(AnthropicStreaming, ChunksBecomeTheEventList) {
  AnthropicStream s;
  std::vector<ApiEvent> events;
  for (const json& c : chat_chunks())
    for (ApiEvent& e : s.on_chunk(c)) events.push_back(std::move(e));
  for (ApiEvent& e : s.finish()) events.push_back(std::move(e));
  const std::vector<std::string> want = {
      R"(message_start {"message":{"content":[],"id":"msg_abc123","model":"tiny","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"input_tokens":0,"output_tokens":0}},"type":"message_start"})",
      R"(content_block_start {"content_block":{"signature":"","thinking":"","type":"thinking"},"index":0,"type":"content_block_start"})",
      R"(content_block_delta {"delta":{"thinking":"Need ","type":"thinking_delta"},"index":0,"type":"content_block_delta"})",
      R"(content_block_delta {"delta":{"thinking":"weather.","type":"thinking_delta"},"index":0,"type":"content_block_delta"})",
      R"(content_block_delta {"delta":{"signature":"","type":"signature_delta"},"index":0,"type":"content_block_delta"})",
      R"(content_block_stop {"index":0,"type":"content_block_stop"})",
      R"(content_block_start {"content_block":{"text":"","type":"text"},"index":1,"type":"content_block_start"})",
      R"(content_block_delta {"delta":{"text":"Check","type":"text_delta"},"index":1,"type":"content_block_delta"})",
      R"(content_block_delta {"delta":{"text":"ing.","type":"text_delta"},"index":1,"type":"content_block_delta"})",
      R"(content_block_stop {"index":1,"type":"content_block_stop"})",
      R"(content_block_start {"content_block":{"id":"call_1","input":{},"name":"get_weather","type":"tool_use"},"index":2,"type":"content_block_start"})",
      R"(content_block_delta {"delta":{"partial_json":"{\"city\":","type":"input_json_delta"},"index":2,"type":"content_block_delta"})",
      R"(content_block_delta {"delta":{"partial_json":"\"Paris\"}","type":"input_json_delta"},"index":2,"type":"content_block_delta"})",
      R"(content_block_stop {"index":2,"type":"content_block_stop"})",
      R"(content_block_start {"content_block":{"id":"call_2","input":{},"name":"get_weather","type":"tool_use"},"index":3,"type":"content_block_start"})",
      R"(content_block_delta {"delta":{"partial_json":"{\"city\"","type":"input_json_delta"},"index":3,"type":"content_block_delta"})",
      R"(content_block_delta {"delta":{"partial_json":":\"Rome\"}","type":"input_json_delta"},"index":3,"type":"content_block_delta"})",
      R"(content_block_stop {"index":3,"type":"content_block_stop"})",
      R"(message_delta {"delta":{"stop_reason":"tool_use","stop_sequence":null},"type":"message_delta","usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":30,"input_tokens":20,"output_tokens":20}})",
      R"(message_stop {"type":"message_stop"})",
  };
  EXPECT_EQ(lines(events), want);

  // Folded as Anthropic's SDK folds them, the events are the non-streamed reply.
  json msg;
  std::vector<std::string> partial(8);
  for (const ApiEvent& e : events) {
    const json& d = e.data;
    if (e.event == "message_start") msg = d["message"];
    if (e.event == "content_block_start") msg["content"].push_back(d["content_block"]);
    if (e.event == "content_block_delta") {
      json& b = msg["content"][d["index"].get<size_t>()];
      const json& dl = d["delta"];
      if (dl["type"] == "text_delta") b["text"] = b["text"].get<std::string>() + dl["text"].get<std::string>();
      if (dl["type"] == "thinking_delta") b["thinking"] = b["thinking"].get<std::string>() + dl["thinking"].get<std::string>();
      if (dl["type"] == "signature_delta") b["signature"] = dl["signature"];
      if (dl["type"] == "input_json_delta") partial[d["index"].get<size_t>()] += dl["partial_json"].get<std::string>();
    }
    if (e.event == "content_block_stop" && !partial[d["index"].get<size_t>()].empty())
      msg["content"][d["index"].get<size_t>()]["input"] = json::parse(partial[d["index"].get<size_t>()]);
    if (e.event == "message_delta") {
      msg["stop_reason"] = d["delta"]["stop_reason"];
      msg["stop_sequence"] = d["delta"]["stop_sequence"];
      msg["usage"] = d["usage"];
    }
  }
  EXPECT_EQ(msg.dump(1), anthropic_from_chat(kChatReply).dump(1));
}

TEST(AnthropicStreaming, EmptyReplyStopSequenceAndSseText) {
  AnthropicStream s;
  std::vector<json> chunks = chat_chunks();
  chunks[10]["choices"][0]["finish_reason"] = "stop";
  std::vector<ApiEvent> events = s.on_chunk(chunks[0]);
  for (ApiEvent& e : s.on_chunk(chunks[10])) events.push_back(std::move(e));
  for (ApiEvent& e : s.finish("STOP")) events.push_back(std::move(e));
  ASSERT_EQ(events.size(), 5u);  // message_start, an empty text block, message_delta, message_stop
  EXPECT_EQ(events[1].data["content_block"]["type"], "text");
  EXPECT_EQ(events[3].data["delta"].dump(), R"({"stop_reason":"stop_sequence","stop_sequence":"STOP"})");
  EXPECT_EQ(sse_events({events[4]}), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
}

TEST(AnthropicStreaming, AMidStreamFailureIsAnErrorEvent) {
  AnthropicStream s;
  std::vector<ApiEvent> events = s.on_chunk(chat_chunks()[3]);
  ASSERT_EQ(events.size(), 3u);
  events = s.on_chunk(json::parse(R"({"error": {"message": "generation failed: boom", "type": "server_error"}})"));
  EXPECT_EQ(lines(events), std::vector<std::string>{
                               R"(error {"error":{"message":"generation failed: boom","type":"api_error"},"type":"error"})"});
  EXPECT_TRUE(s.finish().empty());
}

// --- Responses: requests ----------------------------------------------------

TEST(ResponsesRequest, EveryItemTypeBecomesTheChatBody) {
  const ordered_json chat = responses_to_chat(oj(R"({
    "model": "gpt-x", "instructions": "You are terse.",
    "input": [
      {"role": "user", "content": "Weather in Paris?"},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Call the tool."}]},
      {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
       "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
      {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
       "arguments": "{\"city\":\"Paris\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
      {"role": "developer", "content": [{"type": "input_text", "text": "Answer in one word."}]},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Warm?"}]},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Yes."}]},
      {"type": "function_call", "call_id": "call_2", "name": "log", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_2",
       "output": [{"type": "input_text", "text": "ok"}]}],
    "max_output_tokens": 100, "temperature": 0.2, "top_p": 0.8, "stream": true,
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather now",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
               "strict": true}],
    "tool_choice": {"type": "function", "name": "get_weather"}, "parallel_tool_calls": false,
    "text": {"format": {"type": "json_schema", "name": "answer",
                        "schema": {"type": "object", "properties": {"warm": {"type": "boolean"}}}, "strict": true}},
    "reasoning": {"effort": "low"}, "store": false, "metadata": {"k": "v"}})"));
  const ordered_json want = oj(R"({
    "model": "gpt-x",
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [{"type": "text", "text": "Checking."}], "reasoning_content": "Call the tool.",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
      {"role": "developer", "content": [{"type": "text", "text": "Answer in one word."}]},
      {"role": "user", "content": [{"type": "text", "text": "Warm?"}]},
      {"role": "assistant", "content": null, "reasoning_content": "Yes.",
       "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "log", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "call_2", "content": "ok"}],
    "max_tokens": 100, "temperature": 0.2, "top_p": 0.8, "stream": true, "stream_options": {"include_usage": true},
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
               "strict": true}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": false,
    "response_format": {"type": "json_schema", "json_schema": {"name": "answer",
                        "schema": {"type": "object", "properties": {"warm": {"type": "boolean"}}}, "strict": true}},
    "chat_template_kwargs": {"reasoning_effort": "low"}})");
  EXPECT_EQ(chat.dump(1), want.dump(1));
}

TEST(ResponsesRequest, StringInputAndOtherFormats) {
  EXPECT_EQ(responses_to_chat(oj(R"({"input": "Hi", "text": {"format": {"type": "json_object"}}, "tool_choice": "required"})")).dump(),
            R"({"messages":[{"role":"user","content":"Hi"}],"tool_choice":"required","response_format":{"type":"json_object"}})");
  EXPECT_EQ(responses_to_chat(oj(R"({"input": [], "instructions": "S", "text": {"format": {"type": "text"}}})")).dump(),
            R"({"messages":[{"role":"system","content":"S"}]})");
}

TEST(ResponsesRequest, BadFieldsAreNamed) {
  auto expect = [](const char* body, const std::string& param, const std::string& message) {
    const auto [p, msg] = error_of(responses_to_chat, body);
    EXPECT_EQ(p, param) << body;
    EXPECT_EQ(msg, message) << body;
  };
  expect(R"({"input": "hi", "previous_response_id": "resp_1"})", "previous_response_id",
         "previous_response_id: this server is stateless and keeps no responses or conversations: send the whole "
         "conversation in 'input'");
  expect(R"({"model": "m"})", "input", "input: is required");
  expect(R"({"input": 7})", "input", "input: must be a string or an array of input items, got 7");
  expect(R"({"input": [{"type": "web_search_call", "id": "ws_1"}]})", "input[0].type",
         "input[0].type: item type 'web_search_call' is not supported (message, function_call, "
         "function_call_output, reasoning are)");
  expect(R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0].type",
         "input[0].type: 'item_reference' needs stored items; this server is stateless: send the items themselves");
  expect(R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]})",
         "input[0].content[0].type",
         "input[0].content[0].type: 'input_image' parts are not supported: this server has no vision or audio");
  expect(R"({"input": [{"role": "tool", "content": "x"}]})", "input[0].role",
         "input[0].role: must be one of 'user', 'system', 'developer', 'assistant', got 'tool'");
  expect(R"({"input": [{"type": "function_call", "call_id": "c", "name": "n"}]})", "input[0].arguments",
         "input[0].arguments: is required");
  expect(R"({"input": "hi", "tools": [{"type": "web_search"}]})", "tools[0].type",
         "tools[0].type: 'web_search' tools are not supported: this server runs function tools only");
  expect(R"({"input": "hi", "tool_choice": "sometimes"})", "tool_choice",
         "tool_choice: must be 'auto', 'none', 'required' or {\"type\": \"function\", \"name\": ...}, got 'sometimes'");
  expect(R"({"input": "hi", "text": {"format": {"type": "xml"}}})", "text.format.type",
         "text.format.type: must be 'text', 'json_object' or 'json_schema', got 'xml'");
  expect(R"({"input": "hi", "text": {"format": {"type": "json_schema", "name": "a"}}})", "text.format.schema",
         "text.format.schema: is required");
  expect(R"({"input": "hi", "background": true})", "background",
         "background: is not supported: this server answers in the request that asks");
}

// --- Responses: replies -----------------------------------------------------

const char* kResponsesRequest = R"({"input": "Weather?", "instructions": "Be brief.", "max_output_tokens": 64,
                                    "temperature": 0.5})";

TEST(ResponsesReply, ChatReplyBecomesAResponse) {
  EXPECT_EQ(responses_from_chat(kChatReply, oj(kResponsesRequest)).dump(1), json::parse(R"({
    "id": "resp_abc123", "object": "response", "created_at": 1700000000, "status": "completed",
    "error": null, "incomplete_details": null, "instructions": "Be brief.", "max_output_tokens": 64,
    "metadata": {}, "model": "tiny",
    "output": [
      {"id": "rs_abc123", "type": "reasoning", "summary": [],
       "content": [{"type": "reasoning_text", "text": "Need weather."}]},
      {"id": "msg_abc123", "type": "message", "status": "completed", "role": "assistant",
       "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
      {"id": "fc_abc123_0", "type": "function_call", "status": "completed", "call_id": "call_1",
       "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
      {"id": "fc_abc123_1", "type": "function_call", "status": "completed", "call_id": "call_2",
       "name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}],
    "parallel_tool_calls": true, "previous_response_id": null, "reasoning": {"effort": null, "summary": null},
    "store": false, "temperature": 0.5, "text": {"format": {"type": "text"}}, "tool_choice": "auto",
    "tools": [], "top_p": null, "truncation": "disabled",
    "usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 30}, "output_tokens": 20,
              "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 70}})").dump(1));
}

TEST(ResponsesReply, CutByMaxOutputTokensIsIncomplete) {
  const json r = responses_from_chat(json::parse(R"({"id": "chatcmpl-z", "created": 5, "model": "m",
    "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "Once upon"}}],
    "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}})"), oj(R"({"input": "x"})"));
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"].dump(), R"({"reason":"max_output_tokens"})");
  EXPECT_EQ(r["output"].dump(),
            R"([{"content":[{"annotations":[],"text":"Once upon","type":"output_text"}],"id":"msg_z","role":"assistant","status":"incomplete","type":"message"}])");
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 0);
}

// --- Responses: streams -----------------------------------------------------

TEST(ResponsesStreaming, ChunksBecomeTheEventList) {
  ResponsesStream s(oj(kResponsesRequest));
  std::vector<ApiEvent> events;
  for (const json& c : chat_chunks())
    for (ApiEvent& e : s.on_chunk(c)) events.push_back(std::move(e));
  for (ApiEvent& e : s.finish()) events.push_back(std::move(e));

  const json done = responses_from_chat(kChatReply, oj(kResponsesRequest));
  json started = done;
  started["status"] = "in_progress";
  started["output"] = json::array();
  started["usage"] = nullptr;
  // The response objects, checked apart: created and in_progress carry the
  // settings and no output; completed is the non-streamed reply.
  ASSERT_EQ(events.size(), 27u);
  EXPECT_EQ(events[0].data["response"].dump(1), started.dump(1));
  EXPECT_EQ(events[1].data["response"].dump(1), started.dump(1));
  EXPECT_EQ(events[26].data["response"].dump(1), done.dump(1));
  for (size_t i : {0u, 1u, 26u}) events[i].data["response"] = "R";
  const std::vector<std::string> want = {
      R"(response.created {"response":"R","sequence_number":0,"type":"response.created"})",
      R"(response.in_progress {"response":"R","sequence_number":1,"type":"response.in_progress"})",
      R"(response.output_item.added {"item":{"content":[],"id":"rs_abc123","summary":[],"type":"reasoning"},"output_index":0,"sequence_number":2,"type":"response.output_item.added"})",
      R"(response.content_part.added {"content_index":0,"item_id":"rs_abc123","output_index":0,"part":{"text":"","type":"reasoning_text"},"sequence_number":3,"type":"response.content_part.added"})",
      R"(response.reasoning_text.delta {"content_index":0,"delta":"Need ","item_id":"rs_abc123","output_index":0,"sequence_number":4,"type":"response.reasoning_text.delta"})",
      R"(response.reasoning_text.delta {"content_index":0,"delta":"weather.","item_id":"rs_abc123","output_index":0,"sequence_number":5,"type":"response.reasoning_text.delta"})",
      R"(response.reasoning_text.done {"content_index":0,"item_id":"rs_abc123","output_index":0,"sequence_number":6,"text":"Need weather.","type":"response.reasoning_text.done"})",
      R"(response.content_part.done {"content_index":0,"item_id":"rs_abc123","output_index":0,"part":{"text":"Need weather.","type":"reasoning_text"},"sequence_number":7,"type":"response.content_part.done"})",
      R"(response.output_item.done {"item":{"content":[{"text":"Need weather.","type":"reasoning_text"}],"id":"rs_abc123","summary":[],"type":"reasoning"},"output_index":0,"sequence_number":8,"type":"response.output_item.done"})",
      R"(response.output_item.added {"item":{"content":[],"id":"msg_abc123","role":"assistant","status":"in_progress","type":"message"},"output_index":1,"sequence_number":9,"type":"response.output_item.added"})",
      R"(response.content_part.added {"content_index":0,"item_id":"msg_abc123","output_index":1,"part":{"annotations":[],"text":"","type":"output_text"},"sequence_number":10,"type":"response.content_part.added"})",
      R"(response.output_text.delta {"content_index":0,"delta":"Check","item_id":"msg_abc123","logprobs":[],"output_index":1,"sequence_number":11,"type":"response.output_text.delta"})",
      R"(response.output_text.delta {"content_index":0,"delta":"ing.","item_id":"msg_abc123","logprobs":[],"output_index":1,"sequence_number":12,"type":"response.output_text.delta"})",
      R"(response.output_text.done {"content_index":0,"item_id":"msg_abc123","logprobs":[],"output_index":1,"sequence_number":13,"text":"Checking.","type":"response.output_text.done"})",
      R"(response.content_part.done {"content_index":0,"item_id":"msg_abc123","output_index":1,"part":{"annotations":[],"text":"Checking.","type":"output_text"},"sequence_number":14,"type":"response.content_part.done"})",
      R"(response.output_item.done {"item":{"content":[{"annotations":[],"text":"Checking.","type":"output_text"}],"id":"msg_abc123","role":"assistant","status":"completed","type":"message"},"output_index":1,"sequence_number":15,"type":"response.output_item.done"})",
      R"(response.output_item.added {"item":{"arguments":"","call_id":"call_1","id":"fc_abc123_0","name":"get_weather","status":"in_progress","type":"function_call"},"output_index":2,"sequence_number":16,"type":"response.output_item.added"})",
      R"(response.function_call_arguments.delta {"delta":"{\"city\":","item_id":"fc_abc123_0","output_index":2,"sequence_number":17,"type":"response.function_call_arguments.delta"})",
      R"(response.function_call_arguments.delta {"delta":"\"Paris\"}","item_id":"fc_abc123_0","output_index":2,"sequence_number":18,"type":"response.function_call_arguments.delta"})",
      R"(response.function_call_arguments.done {"arguments":"{\"city\":\"Paris\"}","item_id":"fc_abc123_0","name":"get_weather","output_index":2,"sequence_number":19,"type":"response.function_call_arguments.done"})",
      R"(response.output_item.done {"item":{"arguments":"{\"city\":\"Paris\"}","call_id":"call_1","id":"fc_abc123_0","name":"get_weather","status":"completed","type":"function_call"},"output_index":2,"sequence_number":20,"type":"response.output_item.done"})",
      R"(response.output_item.added {"item":{"arguments":"","call_id":"call_2","id":"fc_abc123_1","name":"get_weather","status":"in_progress","type":"function_call"},"output_index":3,"sequence_number":21,"type":"response.output_item.added"})",
      R"(response.function_call_arguments.delta {"delta":"{\"city\"","item_id":"fc_abc123_1","output_index":3,"sequence_number":22,"type":"response.function_call_arguments.delta"})",
      R"(response.function_call_arguments.delta {"delta":":\"Rome\"}","item_id":"fc_abc123_1","output_index":3,"sequence_number":23,"type":"response.function_call_arguments.delta"})",
      R"(response.function_call_arguments.done {"arguments":"{\"city\":\"Rome\"}","item_id":"fc_abc123_1","name":"get_weather","output_index":3,"sequence_number":24,"type":"response.function_call_arguments.done"})",
      R"(response.output_item.done {"item":{"arguments":"{\"city\":\"Rome\"}","call_id":"call_2","id":"fc_abc123_1","name":"get_weather","status":"completed","type":"function_call"},"output_index":3,"sequence_number":25,"type":"response.output_item.done"})",
      R"(response.completed {"response":"R","sequence_number":26,"type":"response.completed"})",
  };
  EXPECT_EQ(lines(events), want);
}

TEST(ResponsesStreaming, CutReplyEndsIncompleteAndFailureEndsFailed) {
  std::vector<json> chunks = chat_chunks();
  chunks[10]["choices"][0]["finish_reason"] = "length";
  ResponsesStream s(oj(R"({"input": "x"})"));
  std::vector<ApiEvent> events;
  for (const json* c : {&chunks[0], &chunks[3], &chunks[10], &chunks[11]})
    for (ApiEvent& e : s.on_chunk(*c)) events.push_back(std::move(e));
  for (ApiEvent& e : s.finish()) events.push_back(std::move(e));
  const ApiEvent& last = events.back();
  EXPECT_EQ(last.event, "response.incomplete");
  EXPECT_EQ(last.data["response"]["status"], "incomplete");
  EXPECT_EQ(last.data["response"]["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(last.data["response"]["output"][0]["status"], "incomplete");
  EXPECT_EQ(last.data["response"]["output"][0]["content"][0]["text"], "Check");

  ResponsesStream f(oj(R"({"input": "x"})"));
  EXPECT_EQ(f.on_chunk(chunks[0]).size(), 2u);  // created, in_progress
  const std::vector<ApiEvent> failed =
      f.on_chunk(json::parse(R"({"error": {"message": "generation failed: boom", "type": "server_error"}})"));
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].event, "response.failed");
  EXPECT_EQ(failed[0].data["sequence_number"], 2);
  EXPECT_EQ(failed[0].data["response"]["status"], "failed");
  EXPECT_EQ(failed[0].data["response"]["error"].dump(), R"({"code":"server_error","message":"generation failed: boom"})");
  EXPECT_TRUE(f.finish().empty());
}

TEST(Translation, TheChatRoutesErrorsNameTheClientsFields) {
  EXPECT_EQ(anthropic_field("stop"), "stop_sequences");
  EXPECT_EQ(anthropic_field("stop[3]"), "stop_sequences[3]");
  EXPECT_EQ(anthropic_field("stopper"), "stopper");
  EXPECT_EQ(anthropic_field("messages[4].content"), "messages");
  EXPECT_EQ(anthropic_field("tools[1].function.parameters.properties"), "tools[1].input_schema.properties");
  EXPECT_EQ(anthropic_field("tools[1].function.name"), "tools[1].name");
  EXPECT_EQ(anthropic_field("chat_template_kwargs.enable_thinking"), "thinking");
  EXPECT_EQ(anthropic_field("temperature"), "temperature");
  EXPECT_EQ(responses_field("max_tokens"), "max_output_tokens");
  EXPECT_EQ(responses_field("response_format.json_schema.schema"), "text.format.schema");
  EXPECT_EQ(responses_field("response_format.type"), "text.format.type");
  EXPECT_EQ(responses_field("messages"), "input");
  EXPECT_EQ(responses_field("tools[0].function.parameters"), "tools[0].parameters");
  EXPECT_EQ(responses_field("top_p"), "top_p");

  const HttpError chat(400, "'max_tokens' must be in [1, 2048], got 0", "max_tokens");
  const HttpError e = renamed_error(chat, responses_field);
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "max_output_tokens");
  EXPECT_STREQ(e.what(), "'max_output_tokens' must be in [1, 2048], got 0");
  const HttpError none(503, "busy");
  EXPECT_EQ(renamed_error(none, responses_field).param(), "");
  EXPECT_STREQ(renamed_error(none, responses_field).what(), "busy");
}

TEST(Translation, IdsAndBodies) {
  EXPECT_EQ(id_suffix("chatcmpl-XYZ"), "XYZ");
  EXPECT_EQ(id_suffix("other"), "other");
  // Key order kept; the chat route's depth bound and JSON errors apply.
  EXPECT_EQ(parse_ordered_object(R"({"b": 1, "a": 2})", 8).dump(), R"({"b":1,"a":2})");
  EXPECT_THROW(parse_ordered_object("[1]", 8), HttpError);
  EXPECT_THROW(parse_ordered_object(R"({"a": [[[[[[[[[[1]]]]]]]]]]})", 8), HttpError);
}

}  // namespace
}  // namespace synapse::server

// Request parsing and reply shapes of src/server, without a socket: the
// fields a body sets, the 400s a bad one gets, and the JSON a result becomes.
#include <gtest/gtest.h>

#include <cmath>

#include <fstream>
#include <iterator>

#include "runtime/chat_output.hpp"
#include "server/chat.hpp"
#include "server/limits.hpp"
#include "server/request.hpp"
#include "server/response.hpp"
#include "synapse/synapse.hpp"

namespace synapse::server {
namespace {

using nlohmann::json;

class RequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new Model(Model::load(SYNAPSE_TEST_DATA "/models/stories260K.gguf")); }
  static void TearDownTestSuite() { delete model_; }

  RequestContext rc() const {
    RequestContext c;
    c.tok = &model_->tokenizer();
    c.n_ctx = 128;
    c.n_predict = 100;
    return c;
  }
  CompletionRequest parse(Route r, const json& body) const { return parse_completion_request(r, body.dump(), rc()); }

  // The 400 a body gets: its param and message.
  std::pair<std::string, std::string> error_of(Route r, const std::string& body) const {
    try {
      parse_completion_request(r, body, rc());
    } catch (const HttpError& e) {
      EXPECT_EQ(e.status(), 400);
      return {e.param(), e.what()};
    }
    ADD_FAILURE() << "accepted: " << body;
    return {};
  }

  static Model* model_;
};
Model* RequestTest::model_ = nullptr;

TEST_F(RequestTest, FieldsReachTheParameters) {
  const CompletionRequest r = parse(Route::completions, {{"prompt", "Once upon a time"},
                                                         {"max_tokens", 12},
                                                         {"temperature", 0.5},
                                                         {"top_p", 0.25},
                                                         {"top_k", 7},
                                                         {"min_p", 0.125},
                                                         {"seed", 4000000000u},
                                                         {"stop", "\n"},
                                                         {"presence_penalty", 0.5},
                                                         {"frequency_penalty", -0.5},
                                                         {"repeat_penalty", 1.25},
                                                         {"logit_bias", {{"13", -2.5}}},
                                                         {"logprobs", 3},
                                                         {"stream", true},
                                                         {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0], model_->tokenizer().tokenize("Once upon a time", true, true));
  EXPECT_EQ(r.stop.n_predict, 12);
  EXPECT_EQ(r.sampling.temp, 0.5f);
  EXPECT_EQ(r.sampling.top_p, 0.25f);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_EQ(r.sampling.min_p, 0.125f);
  EXPECT_EQ(r.sampling.seed, 4000000000u);
  EXPECT_EQ(r.stop.stops, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.sampling.penalty_present, 0.5f);
  EXPECT_EQ(r.sampling.penalty_freq, -0.5f);
  EXPECT_EQ(r.sampling.penalty_repeat, 1.25f);
  ASSERT_EQ(r.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(r.sampling.logit_bias[0].token, 13);
  EXPECT_EQ(r.sampling.logit_bias[0].bias, -2.5f);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

// -n (100 here) is the count of a request that gives none, as llama-server
// v0.5.0's n_predict_max; a request's own count wins, above -n too.
TEST_F(RequestTest, TheServersNIsTheDefaultMaxTokens) {
  EXPECT_EQ(parse(Route::completions, {{"prompt", "a"}}).stop.n_predict, 100);
  EXPECT_EQ(parse(Route::completions, {{"prompt", "a"}, {"max_tokens", 128}}).stop.n_predict, 128);
  EXPECT_EQ(parse(Route::chat_completions, {{"messages", {{{"role", "user"}, {"content", "a"}}}},
                                            {"max_completion_tokens", 5}})
                .stop.n_predict,
            5);
  EXPECT_EQ(parse(Route::completion, {{"prompt", "a"}, {"n_predict", -1}}).stop.n_predict, 100);
}

TEST_F(RequestTest, PromptForms) {
  const CompletionRequest r = parse(Route::completions, {{"prompt", {"a", {1, 2, 3}}}, {"n", 2}});
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1], (std::vector<token_id>{1, 2, 3}));
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(parse(Route::completion, {{"prompt", {5, 6}}}).prompts[0], (std::vector<token_id>{5, 6}));
}

// llama-server's {"prompt_string": ...} object, alone or among the prompts;
// the ids are llama-server v0.5.0's /tokenize of "Once upon" (BOS added), and
// its multimodal_data is llama-server's 400 on a model without a projector.
TEST_F(RequestTest, PromptObjects) {
  const std::vector<token_id> once_upon = {1, 403, 407};
  EXPECT_EQ(parse(Route::completion, {{"prompt", {{"prompt_string", "Once upon"}}}}).prompts,
            (std::vector<std::vector<token_id>>{once_upon}));
  const json both = json::array({json{{"prompt_string", "Once upon"}}, json::array({1, 403, 407})});
  EXPECT_EQ(parse(Route::completion, {{"prompt", both}}).prompts,
            (std::vector<std::vector<token_id>>{once_upon, once_upon}));
  const auto [param, msg] =
      error_of(Route::completion, R"({"prompt":{"prompt_string":"Once upon","multimodal_data":["aa"]}})");
  EXPECT_EQ(param, "prompt.multimodal_data");
  EXPECT_NE(msg.find("Multimodal data provided, but model does not support multimodal requests."), std::string::npos);
  EXPECT_EQ(error_of(Route::completion, R"({"prompt":[{"prompt_string":5}]})").first, "prompt[0].prompt_string");
  // Token ids and strings in one array are one prompt (llama-server: 5 tokens
  // evaluated for [1, 5, "Once upon", 7]; a later string gets no BOS).
  EXPECT_EQ(parse(Route::completion, {{"prompt", {1, 5, "Once upon", 7}}}).prompts,
            (std::vector<std::vector<token_id>>{{1, 5, 403, 407, 7}}));
}

TEST_F(RequestTest, LlamaServerLogitBiasPairs) {
  const CompletionRequest r = parse(Route::completion, {{"prompt", "a"}, {"logit_bias", {{13, false}, {14, 1.5}}}});
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
  EXPECT_TRUE(std::isinf(r.sampling.logit_bias[0].bias) && r.sampling.logit_bias[0].bias < 0);
  EXPECT_EQ(r.sampling.logit_bias[1].bias, 1.5f);
}

// llama-server takes a text where a token id goes (a key, or a pair's first
// element) and biases each of its tokens (tokenized without BOS); the ids are
// llama-server v0.5.0's /tokenize of " book " with add_special false.
TEST_F(RequestTest, LogitBiasTextsBiasTheirTokens) {
  const std::vector<token_id> book = {410, 268, 347, 433, 410};
  for (const json& lb : {json{{" book ", -100}}, json::array({json::array({" book ", -100})})}) {
    const CompletionRequest r = parse(Route::completion, {{"prompt", "a"}, {"logit_bias", lb}});
    ASSERT_EQ(r.sampling.logit_bias.size(), book.size()) << lb;
    for (size_t i = 0; i < book.size(); ++i) {
      EXPECT_EQ(r.sampling.logit_bias[i].token, book[i]) << lb;
      EXPECT_EQ(r.sampling.logit_bias[i].bias, -100.0f) << lb;
    }
  }
  const CompletionRequest r = parse(Route::completion, {{"prompt", "a"}, {"logit_bias", {{"book", false}}}});
  ASSERT_FALSE(r.sampling.logit_bias.empty());
  EXPECT_TRUE(std::isinf(r.sampling.logit_bias[0].bias) && r.sampling.logit_bias[0].bias < 0);
}

TEST_F(RequestTest, ChatMessageContentIsNeverParsedAsSpecialTokens) {
  // stories260K has no <|im_start|>, but its </s> (2) is a control token: typed
  // by a user it must stay text.
  const CompletionRequest r =
      parse(Route::chat_completions, {{"messages", {{{"role", "user"}, {"content", "hello </s> world"}}}}});
  int n_eos = 0;
  for (token_id t : r.prompts[0]) n_eos += t == model_->tokenizer().eos();
  EXPECT_EQ(n_eos, 0);
}

TEST_F(RequestTest, BadFieldsAreNamed) {
  auto expect = [&](Route r, const std::string& body, const std::string& param, const std::string& needle) {
    const auto [p, msg] = error_of(r, body);
    EXPECT_EQ(p, param) << body;
    EXPECT_NE(msg.find(needle), std::string::npos) << body << " -> " << msg;
  };
  const Route c = Route::completions;
  expect(c, R"({"prompt":"a","temperature":-0.5})", "temperature", "got -0.5");
  expect(c, R"({"prompt":"a","top_p":2})", "top_p", "[0, 1]");
  expect(c, R"({"prompt":"a","top_k":-3})", "top_k", "-3");
  expect(c, R"({"prompt":"a","max_tokens":129})", "max_tokens", "[1, 128]");
  expect(c, R"({"prompt":"a","max_tokens":1.5})", "max_tokens", "integer");
  expect(c, R"({"prompt":"a","seed":-2})", "seed", "-2");
  expect(c, R"({"prompt":"a","logit_bias":{"x":true}})", "logit_bias.x", "number or false");
  expect(c, R"({"prompt":"a","logit_bias":{"512":1}})", "logit_bias.512", "token id");
  expect(c, R"({"prompt":"a","stop":[1]})", "stop[0]", "string");
  expect(c, R"({"prompt":[0,512]})", "prompt[1]", "512");
  expect(c, R"({"prompt":[]})", "prompt", "non-empty");
  expect(c, R"({"prompt":"a","n":17})", "n", "17");
  expect(c, R"({"prompt":["a","b"],"n":9})", "n", "18 choices");
  expect(c, R"({"prompt":"a","echo":true})", "echo", "not supported");
  expect(c, R"({"prompt":"a","stream_options":1})", "stream_options", "object");
  expect(Route::chat_completions, R"({"messages":[{"role":"user","content":"a"}],"top_logprobs":2})",
         "top_logprobs", "logprobs");
  expect(Route::chat_completions, R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})",
         "messages[0].content[0].type", "text parts only");
  // The built-in formats take no tools and no tool messages.
  expect(Route::chat_completions, R"({"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function"}]})",
         "tools", "Jinja chat template");
  expect(Route::chat_completions, R"({"messages":[{"role":"user","content":"a"}],"tool_choice":"required"})",
         "tool_choice", "Jinja chat template");
  expect(Route::chat_completions, R"({"messages":[{"role":"tool","tool_call_id":"x","content":"a"}]})",
         "messages[0].role", "Jinja chat template");
  expect(Route::chat_completions, R"({"messages":[{"role":"user","content":"a"}],"reasoning_format":"x"})",
         "reasoning_format", "\"x\"");
  expect(Route::chat_completions, R"({"messages":[{"role":"user","content":"a"}],"chat_template_kwargs":[1]})",
         "chat_template_kwargs", "object");
  expect(c, R"({"prompt":"a","tools":[{"type":"function"}]})", "tools", "/v1/chat/completions");
  expect(Route::completion, R"({"prompt":"a","n_predict":-2})", "n_predict", "-2");
  std::string long_prompt(2000, 'x');
  expect(c, R"({"prompt":")" + long_prompt + R"("})", "prompt", "n_ctx = 128");
  // Longer than the pool any request may fill: OpenAI's context_length_exceeded
  // (error_body writes it as "code"); other 400s carry the status.
  try {
    parse_completion_request(c, R"({"prompt":")" + long_prompt + R"("})", rc());
    ADD_FAILURE() << "accepted";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.code(), "context_length_exceeded");
    const nlohmann::json body = error_body(e.status(), e.what(), e.param(), e.code());
    EXPECT_EQ(body["error"]["code"], "context_length_exceeded");
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
    EXPECT_EQ(body["error"]["param"], "prompt");
  }
  EXPECT_EQ(error_body(400, "x")["error"]["code"], 400);
  expect(c, "not json", "", "not valid JSON");
  expect(c, "[1]", "", "JSON object");
  expect(c, std::string(100000, '['), "", "deeper than 64");
}

TEST_F(RequestTest, RepliesHaveOpenAIsShape) {
  const CompletionRequest req = parse(Route::chat_completions, {{"messages", {{{"role", "user"}, {"content", "a"}}}},
                                                                {"logprobs", true},
                                                                {"top_logprobs", 1}});
  GenerationResult g;
  g.text = "hi";
  g.tokens = {300};
  g.logprobs = {-0.25f};
  g.top_logprobs = {{{300, -0.25f}}};
  g.finish_reason = FinishReason::length;
  g.n_prompt = 10;
  g.n_cached = 9;
  const ReplyMeta meta{"chatcmpl-x", 1, "m", "fp"};
  const json j = completion_reply(req, meta, std::span<const GenerationResult>(&g, 1), model_->tokenizer());
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const json& lp = j["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(lp["token"], model_->tokenizer().token_to_piece(300, true));
  EXPECT_EQ(lp["logprob"].get<double>(), -0.25);
  EXPECT_EQ(lp["top_logprobs"][0]["logprob"].get<double>(), -0.25);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(j["usage"]["completion_tokens"], 1);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 9);
  EXPECT_EQ(error_body(401, "no", "")["error"]["type"], "authentication_error");
  EXPECT_TRUE(error_body(400, "bad", "")["error"]["param"].is_null());
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(dump_json(json(std::string("\xff"))), "\"\xEF\xBF\xBD\"");  // U+FFFD, no throw
}

// /completion's timings carry llama-server's nine fields (server-common.cpp
// server_slot_stats::to_json: per-token milliseconds and rates, 0 for no
// tokens; draft_n only with a draft model, which synapse has not).
TEST_F(RequestTest, NativeTimingsAreLlamaServers) {
  const CompletionRequest req = parse(Route::completion, {{"prompt", "a"}});
  GenerationResult g;
  g.text = "hi";
  g.tokens = {300, 301};
  g.n_prompt = 4;
  g.n_cached = 1;
  g.timings.prompt_n = 3;
  g.timings.prompt_ms = 1.5;
  g.timings.predicted_n = 3;  // two decode steps: the first token is the prompt's
  g.timings.predicted_ms = 5.0;
  const ReplyMeta meta{"x", 1, "m", "fp"};
  const json t = completion_reply(req, meta, std::span<const GenerationResult>(&g, 1), model_->tokenizer())["timings"];
  EXPECT_EQ(t, json::parse(R"({"cache_n": 1, "prompt_n": 3, "prompt_ms": 1.5, "prompt_per_token_ms": 0.5,
                               "prompt_per_second": 2000.0, "predicted_n": 3, "predicted_ms": 5.0,
                               "predicted_per_token_ms": 2.5, "predicted_per_second": 400.0})"));
  g.timings = {};
  const json none = completion_reply(req, meta, std::span<const GenerationResult>(&g, 1), model_->tokenizer())["timings"];
  EXPECT_EQ(none["prompt_per_token_ms"], 0.0);
  EXPECT_EQ(none["predicted_per_token_ms"], 0.0);
  // One token took no decode step: no rate (llama-server's 0, not a division by ~0).
  g.timings.predicted_n = 1;
  g.timings.predicted_ms = 0.01;
  const json one = completion_reply(req, meta, std::span<const GenerationResult>(&g, 1), model_->tokenizer())["timings"];
  EXPECT_EQ(one["predicted_per_second"], 0.0);
  EXPECT_EQ(one["predicted_per_token_ms"], 0.0);
}

// --- Chat with the model's Jinja template (issue 43) ---------------------------

json with(json base, const json& extra) {
  base.update(extra);
  return base;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

const json kWeather = {{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"description", "The weather in a city"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}}}, {"unit", {{"enum", {"c", "f"}}}}}},
                           {"required", {"city"}}}}}}};
const json kTime = {{"type", "function"},
                    {"function",
                     {{"name", "get_time"},
                      {"parameters", {{"type", "object"}, {"properties", {{"zone", {{"type", "string"}}}}}}}}}};

// tiny-qwen3 (its vocabulary has <tool_call>, <think>, <|im_end|>) with
// Qwen3-0.6B's template from llama.cpp's collection: the hermes family.
class JinjaRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new Model(Model::load(SYNAPSE_TEST_DATA "/models/tiny-qwen3-q4_k_m.gguf"));
    source_ = new std::string(read_file(SYNAPSE_TEST_DATA "/templates/llama.cpp/Qwen-Qwen3-0.6B.jinja"));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete source_;
  }

  RequestContext rc(std::string source = {}, std::string kwargs = {}) const {
    RequestContext c;
    c.tok = &model_->tokenizer();
    c.n_ctx = 2048;
    c.jinja = make_jinja_chat(source.empty() ? *source_ : source, model_->tokenizer(), "qwen3", kwargs, "auto");
    return c;
  }
  CompletionRequest parse(const json& body, const RequestContext& c) const {
    return parse_completion_request(Route::chat_completions, body.dump(), c);
  }
  CompletionRequest parse(const json& body) const { return parse(body, rc()); }

  std::pair<std::string, std::string> error_of(const std::string& body) const {
    try {
      parse_completion_request(Route::chat_completions, body, rc());
    } catch (const HttpError& e) {
      EXPECT_EQ(e.status(), 400);
      return {e.param(), e.what()};
    }
    ADD_FAILURE() << "accepted: " << body;
    return {};
  }

  static json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

  static Model* model_;
  static std::string* source_;
};
Model* JinjaRequestTest::model_ = nullptr;
std::string* JinjaRequestTest::source_ = nullptr;

TEST_F(JinjaRequestTest, PromptIsTheTemplatesRenderingTokenizedWithSpecialTokens) {
  const Tokenizer& tok = model_->tokenizer();
  const CompletionRequest r = parse({{"messages", {{{"role", "system"}, {"content", "Be brief."}}, user("Hi")}}});
  const std::string text = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0], tok.tokenize(text, true, true));
  // <|im_start|> is one token here (parse_special), as llama-server tokenizes a Jinja prompt.
  EXPECT_EQ(tok.tokenize("<|im_start|>", false, true).size(), 1u);
  ASSERT_TRUE(r.chat_output.has_value());
  EXPECT_EQ(r.chat_output->format, runtime::ToolCallFormat::hermes);
  EXPECT_FALSE(r.chat_output->options.tools_offered);
  EXPECT_EQ(r.chat_output->options.reasoning_format, runtime::ReasoningFormat::automatic);
  EXPECT_TRUE(r.sampling.grammar.empty());
  // The markers the parser reads are preserved: <tool_call>, </tool_call>, <think>, </think>.
  std::vector<std::string> preserved;
  for (token_id t : r.preserved_tokens) preserved.push_back(tok.text(t));
  std::sort(preserved.begin(), preserved.end());
  EXPECT_EQ(preserved, (std::vector<std::string>{"</think>", "</tool_call>", "<think>", "<tool_call>"}));
}

TEST_F(JinjaRequestTest, ToolsAreRenderedInTheClientsKeyOrder) {
  // "zeta" before "alpha": a sorted JSON would swap them.
  const std::string body =
      R"({"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f",)"
      R"("parameters":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}}}}]})";
  const CompletionRequest r = parse_completion_request(Route::chat_completions, body, rc());
  const std::string prompt = model_->tokenizer().detokenize(r.prompts[0], false, true);
  EXPECT_NE(prompt.find(R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object", )"
                        R"("properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}})"),
            std::string::npos)
      << prompt;
  EXPECT_TRUE(r.chat_output->options.tools_offered);
  EXPECT_TRUE(r.sampling.grammar.empty());  // auto: unconstrained, parsed
}

TEST_F(JinjaRequestTest, ToolChoiceSetsTheGrammarAndTheParser) {
  const json base = {{"messages", {user("Weather in Paris?")}}, {"tools", {kWeather, kTime}}};
  const CompletionRequest required = parse(with(base, {{"tool_choice", "required"}}));
  EXPECT_NE(required.sampling.grammar.find("<tool_call>"), std::string::npos);
  EXPECT_NE(required.sampling.grammar.find("get_weather"), std::string::npos);
  EXPECT_NE(required.sampling.grammar.find("get_time"), std::string::npos);
  EXPECT_TRUE(required.chat_output->options.tools_offered);
  EXPECT_TRUE(required.chat_output->options.parallel_tool_calls);

  const CompletionRequest named = parse(with(base, 
      {{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}, {"parallel_tool_calls", false}}));
  EXPECT_EQ(named.sampling.grammar.find("get_weather"), std::string::npos);
  EXPECT_NE(named.sampling.grammar.find("get_time"), std::string::npos);
  EXPECT_FALSE(named.chat_output->options.parallel_tool_calls);

  // none: the tools are still in the prompt (llama-server renders them), but no call is parsed.
  const CompletionRequest none = parse(with(base, {{"tool_choice", "none"}}));
  EXPECT_TRUE(none.sampling.grammar.empty());
  EXPECT_FALSE(none.chat_output->options.tools_offered);
  EXPECT_EQ(none.prompts[0], parse(base).prompts[0]);

  // A request's own grammar cannot go with a required call.
  const auto [p, msg] = error_of(with(base, {{"tool_choice", "required"}, {"grammar", "root ::= \"x\""}}).dump());
  EXPECT_EQ(p, "tool_choice");
}

TEST_F(JinjaRequestTest, GenericFormatIsToldHowToCall) {
  // A template with no call syntax of its own (the generic family) that does
  // not print tools: the system prompt gets the tools and the JSON reply form.
  const RequestContext c = rc("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}[assistant]");
  const auto prompt = [&](const CompletionRequest& r) { return model_->tokenizer().detokenize(r.prompts[0], false, true); };
  const CompletionRequest r = parse({{"messages", {{{"role", "system"}, {"content", "Be brief."}}, user("Hi")}},
                                     {"tools", {kWeather}}, {"parallel_tool_calls", false}},
                                    c);
  EXPECT_EQ(r.chat_output->format, runtime::ToolCallFormat::generic);
  const std::string p = prompt(r);
  EXPECT_TRUE(p.starts_with("[system]Be brief.\n\nYou can call these tools")) << p;
  EXPECT_NE(p.find("\"name\": \"get_weather\""), std::string::npos) << p;
  EXPECT_NE(p.find("{\"tool_call\": {\"name\": \"<tool name>\""), std::string::npos) << p;
  EXPECT_TRUE(p.ends_with("[user]Hi[assistant]")) << p;
  // Parallel calls are asked for as a list; without a system message one is added.
  const std::string q = prompt(parse({{"messages", {user("Hi")}}, {"tools", {kWeather}}}, c));
  EXPECT_TRUE(q.starts_with("[system]You can call these tools")) << q;
  EXPECT_NE(q.find("{\"tool_calls\": ["), std::string::npos) << q;
  // tool_choice none: no instruction.
  EXPECT_EQ(prompt(parse({{"messages", {user("Hi")}}, {"tools", {kWeather}}, {"tool_choice", "none"}}, c)),
            "[user]Hi[assistant]");
  const CompletionRequest req = parse({{"messages", {user("Hi")}}, {"tools", {kWeather}}, {"tool_choice", "required"}}, c);
  EXPECT_NE(req.sampling.grammar.find("tool_calls"), std::string::npos) << req.sampling.grammar;
}

TEST_F(JinjaRequestTest, RequiredCallAfterAnOpenedReasoningBlock) {
  // The prompt ends inside <think> (prefill): the grammar lets the model close
  // it before the call.
  const CompletionRequest r = parse({{"messages", {user("Hi"), {{"role", "assistant"}, {"content", "<think>\n"}}}},
                                     {"tools", {kWeather}}, {"tool_choice", "required"}});
  EXPECT_TRUE(r.chat_output->options.thinking_open);
  EXPECT_TRUE(r.sampling.grammar.starts_with("root ::= reasoning-text \"</think>\"")) << r.sampling.grammar;
  const CompletionRequest plain = parse({{"messages", {user("Hi")}}, {"tools", {kWeather}}, {"tool_choice", "required"}});
  EXPECT_TRUE(plain.sampling.grammar.starts_with("root ::= calls")) << plain.sampling.grammar;
}

TEST_F(JinjaRequestTest, CallIdsAreAFunctionOfTheRequest) {
  const json body = {{"messages", {user("a")}}, {"tools", {kWeather}}, {"seed", 7}};
  const CompletionRequest a = parse(body), b = parse(body);
  EXPECT_EQ(a.chat_output->options.id_seed, b.chat_output->options.id_seed);
  EXPECT_NE(a.chat_output->for_choice(0).id_seed, a.chat_output->for_choice(1).id_seed);
  EXPECT_NE(parse(with(body, {{"seed", 8}})).chat_output->options.id_seed, a.chat_output->options.id_seed);
  EXPECT_NE(parse(with(body, {{"messages", {user("b")}}})).chat_output->options.id_seed,
            a.chat_output->options.id_seed);
}

TEST_F(JinjaRequestTest, HistoryWithCallsAndPrefill) {
  const json history = {
      user("Weather?"),
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"}, {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}},
      {{"role", "assistant"}, {"content", "<think>\n"}}};
  const CompletionRequest r = parse({{"messages", history}, {"tools", {kWeather}}});
  const std::string prompt = model_->tokenizer().detokenize(r.prompts[0], false, true);
  EXPECT_NE(prompt.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("<tool_response>\nsunny\n</tool_response>"), std::string::npos) << prompt;
  // The final assistant message is continued, not closed: the reply starts inside <think>.
  EXPECT_TRUE(prompt.ends_with("<|im_start|>assistant\n<think>\n")) << prompt;
  EXPECT_TRUE(r.chat_output->options.thinking_open);
}

TEST_F(JinjaRequestTest, TemplateVariablesAndReasoningFields) {
  const std::string probe =
      "{{ reasoning_effort | default('-') }}|{{ enable_thinking }}|{{ flavour | default('-') }}|"
      "{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}";
  const RequestContext c = rc(probe, R"({"flavour": "server", "enable_thinking": false})");
  auto prompt = [&](const json& body) {
    return model_->tokenizer().detokenize(parse(body, c).prompts[0], false, true);
  };
  EXPECT_EQ(prompt({{"messages", {user("a")}}}), "-|False|server|user=a;");
  EXPECT_EQ(prompt({{"messages", {user("a")}}, {"reasoning_effort", "low"},
                    {"chat_template_kwargs", {{"flavour", "request"}}}}),
            "low|False|request|user=a;");
  EXPECT_EQ(prompt({{"messages", {{{"role", "developer"}, {"content", "d"}}, user("a")}}}), "-|False|server|system=d;user=a;");
  const CompletionRequest none = parse({{"messages", {user("a")}}, {"reasoning_format", "none"}}, c);
  EXPECT_EQ(none.chat_output->options.reasoning_format, runtime::ReasoningFormat::none);
}

TEST_F(JinjaRequestTest, TheTemplatesOwnErrorIsA400) {
  const RequestContext c = rc("{{ raise_exception('Only user turns, please.') }}");
  try {
    parse({{"messages", {user("a")}}}, c);
    ADD_FAILURE() << "accepted";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(std::string(e.what()), "chat template: Only user turns, please.");
    EXPECT_EQ(e.param(), "messages");
  }
}

TEST_F(JinjaRequestTest, BadChatFieldsAreNamed) {
  auto expect = [&](const json& extra, const std::string& param, const std::string& needle) {
    json body = {{"messages", {user("a")}}, {"tools", {kWeather}}};
    body.update(extra);
    const auto [p, msg] = error_of(body.dump());
    EXPECT_EQ(p, param) << body;
    EXPECT_NE(msg.find(needle), std::string::npos) << body << " -> " << msg;
  };
  expect({{"tools", {{{"type", "function"}, {"function", {{"name", "bad name"}}}}}}}, "tools[0].function.name", "bad name");
  expect({{"tools", {kWeather, {{"type", "retrieval"}}}}}, "tools[1].type", "function");
  expect({{"tools", {kWeather, kWeather}}}, "tools[1].function.name", "names two tools");
  expect({{"tools", "all"}}, "tools", "array");
  expect({{"tool_choice", "sometimes"}}, "tool_choice", "sometimes");
  expect({{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}, "tool_choice", "get_time");
  expect({{"tools", json::array()}, {"tool_choice", "required"}}, "tool_choice", "needs tools");
  expect({{"parallel_tool_calls", "yes"}}, "parallel_tool_calls", "boolean");
  expect({{"chat_template_kwargs", "x"}}, "chat_template_kwargs", "object");
  expect({{"reasoning_format", "verbose"}}, "reasoning_format", "verbose");
  expect({{"reasoning_effort", 3}}, "reasoning_effort", "string");
  expect({{"functions", {{{"name", "f"}}}}}, "functions", "tools");
  expect({{"messages", {{{"role", "wizard"}, {"content", "a"}}}}}, "messages[0].role", "wizard");
  expect({{"messages", {{{"role", "user"}, {"content", {{{"type", "input_audio"}}}}}}}}, "messages[0].content[0].type",
         "input_audio");
  expect({{"messages", {user("a"), {{"role", "assistant"}, {"tool_calls", {{{"id", "c"}, {"type", "function"},
                                                                           {"function", {{"name", "f"}, {"arguments", "{oops"}}}}}}},
                        user("b")}}},
         "messages[1].tool_calls[0].function.arguments", "not valid JSON");
  expect({{"messages", {user("a"), {{"role", "tool"}, {"content", "x"}}}}}, "messages[1].tool_call_id", "missing");
  expect({{"messages", {user("a"), {{"role", "assistant"}, {"tool_calls", {{{"id", "c"}, {"type", "function"},
                                                                           {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}}}}},
         "messages[1].tool_calls", "prefill");
  // A parameters schema the tool-call grammar cannot take is the tool's 400 when a call is required.
  expect({{"tools", {kWeather, {{"type", "function"}, {"function", {{"name", "g"}, {"parameters",
          {{"type", "object"}, {"properties", {{"x", {{"not", {{"format", "date"}}}}}}}}}}}}}},
          {"tool_choice", "required"}},
         "tools[1]", "not");
}

TEST_F(JinjaRequestTest, RepliesWithToolCallsAndReasoning) {
  const Tokenizer& tok = model_->tokenizer();
  const CompletionRequest req = parse({{"messages", {user("Weather?")}}, {"tools", {kWeather}}, {"n", 2}});
  GenerationResult call, think;
  call.text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  call.finish_reason = FinishReason::stop;
  think.text = "<think>\nhm\n</think>\n\nIt is sunny.";
  think.finish_reason = FinishReason::stop;
  const std::vector<GenerationResult> both = {call, think};
  const ReplyMeta meta{"chatcmpl-x", 1, "m", "fp"};
  const json j = completion_reply(req, meta, both, tok);
  const json& m0 = j["choices"][0]["message"];
  EXPECT_TRUE(m0["content"].is_null()) << m0;
  ASSERT_EQ(m0["tool_calls"].size(), 1u);
  const json& tc = m0["tool_calls"][0];
  EXPECT_EQ(tc["id"], runtime::make_tool_call_id(runtime::ToolCallFormat::hermes, req.chat_output->for_choice(0).id_seed, 0));
  EXPECT_EQ(tc["id"].get<std::string>().substr(0, 5), "call_");
  EXPECT_EQ(tc["type"], "function");
  EXPECT_EQ(tc["function"]["name"], "get_weather");
  EXPECT_EQ(tc["function"]["arguments"], "{\"city\":\"Paris\"}");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  const json& m1 = j["choices"][1]["message"];
  EXPECT_EQ(m1["content"], "It is sunny.");
  EXPECT_EQ(m1["reasoning_content"], "hm");
  EXPECT_FALSE(m1.contains("tool_calls"));
  EXPECT_EQ(j["choices"][1]["finish_reason"], "stop");
  // Cut by max_tokens: "length", whatever was parsed.
  GenerationResult cut = call;
  cut.finish_reason = FinishReason::length;
  EXPECT_EQ(completion_reply(req, meta, std::span<const GenerationResult>(&cut, 1), tok)["choices"][0]["finish_reason"],
            "length");
  // reasoning_format none: the reasoning stays in the content, markers and all.
  const CompletionRequest raw = parse({{"messages", {user("a")}}, {"reasoning_format", "none"}});
  const json r = completion_reply(raw, meta, std::span<const GenerationResult>(&think, 1), tok);
  EXPECT_EQ(r["choices"][0]["message"]["content"], think.text);
  EXPECT_FALSE(r["choices"][0]["message"].contains("reasoning_content"));
}

TEST_F(JinjaRequestTest, StreamedChunksAreOpenAIsDeltas) {
  const Tokenizer& tok = model_->tokenizer();
  const CompletionRequest req =
      parse({{"messages", {user("Weather?")}}, {"tools", {kWeather}}, {"stream", true}, {"logprobs", true}});
  const ReplyMeta meta{"chatcmpl-x", 1, "m", "fp"};
  runtime::OutputStream s(req.chat_output->format, req.chat_output->for_choice(0));
  std::vector<runtime::Delta> deltas = s.feed("<think>ok</think>Let me look.<tool_call>\n{\"name\": \"get_weather\", ");
  for (runtime::Delta& d : s.feed("\"arguments\": {\"city\": \"Rome\"}}\n</tool_call>")) deltas.push_back(d);
  for (runtime::Delta& d : s.finish()) deltas.push_back(d);
  GeneratedToken step;
  step.id = 300;
  step.logprob = -0.5f;
  const std::vector<json> chunks = delta_chunks(req, meta, 0, deltas, std::span<const GeneratedToken>(&step, 1), tok);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], json({{"reasoning_content", "ok"}}));
  EXPECT_EQ(chunks[0]["choices"][0]["logprobs"]["content"][0]["logprob"].get<double>(), -0.5);
  EXPECT_TRUE(chunks[1]["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(chunks[1]["choices"][0]["delta"], json({{"content", "Let me look."}}));
  const json header = chunks[2]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(header["index"], 0);
  EXPECT_EQ(header["id"], runtime::make_tool_call_id(runtime::ToolCallFormat::hermes, req.chat_output->for_choice(0).id_seed, 0));
  EXPECT_EQ(header["type"], "function");
  EXPECT_EQ(header["function"], json({{"name", "get_weather"}, {"arguments", ""}}));
  EXPECT_EQ(chunks[3]["choices"][0]["delta"]["tool_calls"][0],
            json({{"index", 0}, {"function", {{"arguments", "{\"city\":\"Rome\"}"}}}}));
  EXPECT_EQ(chunks[3]["object"], "chat.completion.chunk");
  // A held step still carries its logprobs, on an empty delta.
  const std::vector<json> held = delta_chunks(req, meta, 0, {}, std::span<const GeneratedToken>(&step, 1), tok);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0]["choices"][0]["delta"], json::object());
  // The last chunk says tool_calls.
  GenerationResult fin;
  fin.finish_reason = FinishReason::stop;
  EXPECT_EQ(stream_chunk(req, meta, 0, "", {}, 0, tok, false, &fin, true)["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(stream_chunk(req, meta, 0, "", {}, 0, tok, false, &fin, false)["choices"][0]["finish_reason"], "stop");
}

// --cors-origins localhost: llama-server's special value, an origin whose host
// is localhost, 127.0.0.1 or ::1, any port (llama.cpp's
// test_cors_origins_localhost_reflects / _rejects, which need its router mode).
TEST(Cors, LocalhostAllowsLocalOriginsOnly) {
  const std::vector<std::string> local = {"localhost"};
  for (const char* o : {"http://localhost", "http://localhost:8080", "http://127.0.0.1", "http://127.0.0.1:3000",
                        "http://[::1]", "http://[::1]:3000", "https://localhost/"})
    EXPECT_TRUE(cors_origin_allowed(local, o)) << o;
  for (const char* o : {"http://web.mydomain.fr", "http://evil.com", "http://notlocalhost", "http://localhost.evil.com",
                        "localhost", "file://localhost", "http://localhost:x", "http://[::1", "http://127.0.0.2", ""})
    EXPECT_FALSE(cors_origin_allowed(local, o)) << o;
  // Other entries stay exact.
  EXPECT_TRUE(cors_origin_allowed({"http://app.example", "localhost"}, "http://app.example"));
  EXPECT_FALSE(cors_origin_allowed({"http://app.example"}, "http://localhost"));
}

}  // namespace
}  // namespace synapse::server

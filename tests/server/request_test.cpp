// Request parsing and reply shapes of src/server, without a socket: the
// fields a body sets, the 400s a bad one gets, and the JSON a result becomes.
#include <gtest/gtest.h>

#include <cmath>

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

TEST_F(RequestTest, MaxTokensIsCappedByTheServersN) {
  EXPECT_EQ(parse(Route::completions, {{"prompt", "a"}}).stop.n_predict, 100);
  EXPECT_EQ(parse(Route::completions, {{"prompt", "a"}, {"max_tokens", 128}}).stop.n_predict, 100);
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

TEST_F(RequestTest, LlamaServerLogitBiasPairs) {
  const CompletionRequest r = parse(Route::completion, {{"prompt", "a"}, {"logit_bias", {{13, false}, {14, 1.5}}}});
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
  EXPECT_TRUE(std::isinf(r.sampling.logit_bias[0].bias) && r.sampling.logit_bias[0].bias < 0);
  EXPECT_EQ(r.sampling.logit_bias[1].bias, 1.5f);
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
  expect(c, R"({"prompt":"a","logit_bias":{"x":1}})", "logit_bias.x", "token id");
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
         "messages[0].content[0]", "text");
  expect(Route::completion, R"({"prompt":"a","n_predict":-2})", "n_predict", "-2");
  std::string long_prompt(2000, 'x');
  expect(c, R"({"prompt":")" + long_prompt + R"("})", "prompt", "n_ctx = 128");
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

}  // namespace
}  // namespace synapse::server

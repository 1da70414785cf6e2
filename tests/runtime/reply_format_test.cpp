// The shared reply formatter (synapse/reply_format.hpp) on one real
// generation, in both dialects. The generation (tiny-qwen2-q4_k_m, prompt
// "Ünï ☃", seed 2, temperature 2, 6 tokens, 2 candidates) has a control token
// (<|object_ref_end|>: its text in llama_server, "" in llama_cpp_python),
// pieces that are lone UTF-8 bytes (0xA9, 0xC0, 0xBB: U+FFFD or dropped) and
// a candidate whose text equals the chosen token's (step 5: both "").
//
// The expected texts were written by the two formatters this one replaced,
// at commit b9ef112: kServerCompletion and kServerChatLogprobs by `synapse
// serve` (its own src/server/response.cpp; /v1/completions with the same
// request, and /completion's completion_probabilities without their "id"s;
// id, created, model and system_fingerprint set to the values below), and
// kPythonCompletion / kPythonChatLogprobs by the Python package's own Python
// code (Llama.create_completion and Llama._chat_logprobs on the same reply,
// json.dumps with separators (",", ":") and ensure_ascii=False).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "golden_util.hpp"
#include "runtime/reply_format.hpp"
#include "synapse/synapse.hpp"

namespace synapse {
namespace {

using test::data_path;

constexpr const char* kServerCompletion =
    R"({"choices":[{"finish_reason":"length","index":0,"logprobs":{"text_offset":[0,1,3,21,23,24],)"
    R"("token_logprobs":[-3.3622889518737793,-6.508027076721191,-5.313553333282471,-4.847900867462158,)"
    R"(-3.0014007091522217,-3.6112723350524902],"tokens":["e","a9","<|object_ref_end|>"," o","�","1"],)"
    R"("top_logprobs":[{"\u0014":-2.368447780609131,"ey":-2.535134792327881},)"
    R"({"\u001b":-1.9502735137939453,"�":-2.2134876251220703},{" H":-1.695389986038208,"ae":-2.6659553050994873},)"
    R"({" e":-1.4977223873138428," g":-1.9653189182281494},{"af":-2.746751546859741,"�":-1.738251805305481},)"
    R"({",":-2.850809097290039,"-":-1.7754015922546387}]},"text":"ea9 o�1"}],"created":1,"id":"cmpl-x",)"
    R"("model":"m","object":"text_completion","system_fingerprint":"fp","usage":{"completion_tokens":6,)"
    R"("prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":15}})";

constexpr const char* kServerChatLogprobs =
    R"({"content":[{"bytes":[101],"logprob":-3.3622889518737793,"token":"e","top_logprobs":[{"bytes":[20],)"
    R"("logprob":-2.368447780609131,"token":"\u0014"},{"bytes":[101,121],"logprob":-2.535134792327881,"token":"ey"}]},)"
    R"({"bytes":[97,57],"logprob":-6.508027076721191,"token":"a9","top_logprobs":[{"bytes":[27],)"
    R"("logprob":-1.9502735137939453,"token":"\u001b"},{"bytes":[192],"logprob":-2.2134876251220703,"token":"�"}]},)"
    R"({"bytes":[60,124,111,98,106,101,99,116,95,114,101,102,95,101,110,100,124,62],"logprob":-5.313553333282471,)"
    R"("token":"<|object_ref_end|>","top_logprobs":[{"bytes":[32,72],"logprob":-1.695389986038208,"token":" H"},)"
    R"({"bytes":[97,101],"logprob":-2.6659553050994873,"token":"ae"}]},{"bytes":[32,111],)"
    R"("logprob":-4.847900867462158,"token":" o","top_logprobs":[{"bytes":[32,101],"logprob":-1.4977223873138428,)"
    R"("token":" e"},{"bytes":[32,103],"logprob":-1.9653189182281494,"token":" g"}]},{"bytes":[169],)"
    R"("logprob":-3.0014007091522217,"token":"�","top_logprobs":[{"bytes":[187],"logprob":-1.738251805305481,)"
    R"("token":"�"},{"bytes":[97,102],"logprob":-2.746751546859741,"token":"af"}]},{"bytes":[49],)"
    R"("logprob":-3.6112723350524902,"token":"1","top_logprobs":[{"bytes":[45],"logprob":-1.7754015922546387,)"
    R"("token":"-"},{"bytes":[44],"logprob":-2.850809097290039,"token":","}]}],"refusal":null})";

constexpr const char* kPythonCompletion =
    R"({"id":"cmpl-x","object":"text_completion","created":1,"model":"m","choices":[{"text":"ea9 o1","index":0,)"
    R"("logprobs":{"tokens":["e","a9",""," o","","1"],"text_offset":[5,6,8,8,10,10],)"
    R"("token_logprobs":[-3.3622889518737793,-6.508027076721191,-5.313553333282471,-4.847900867462158,)"
    R"(-3.0014007091522217,-3.6112723350524902],"top_logprobs":[{"\u0014":-2.368447780609131,)"
    R"("ey":-2.535134792327881,"e":-3.3622889518737793},{"\u001b":-1.9502735137939453,"":-2.2134876251220703,)"
    R"("a9":-6.508027076721191},{" H":-1.695389986038208,"ae":-2.6659553050994873,"":-5.313553333282471},)"
    R"({" e":-1.4977223873138428," g":-1.9653189182281494," o":-4.847900867462158},)"
    R"({"":-1.738251805305481,"af":-2.746751546859741},{"-":-1.7754015922546387,",":-2.850809097290039,)"
    R"("1":-3.6112723350524902}]},"finish_reason":"length"}],)"
    R"("usage":{"prompt_tokens":9,"completion_tokens":6,"total_tokens":15}})";

constexpr const char* kPythonChatLogprobs =
    R"({"content":[{"token":"e","logprob":-3.3622889518737793,"bytes":[101],"top_logprobs":[{"token":"\u0014",)"
    R"("logprob":-2.368447780609131,"bytes":[20]},{"token":"ey","logprob":-2.535134792327881,"bytes":[101,121]}]},)"
    R"({"token":"a9","logprob":-6.508027076721191,"bytes":[97,57],"top_logprobs":[{"token":"\u001b",)"
    R"("logprob":-1.9502735137939453,"bytes":[27]},{"token":"","logprob":-2.2134876251220703,"bytes":[192]}]},)"
    R"({"token":"","logprob":-5.313553333282471,"bytes":[],"top_logprobs":[{"token":" H","logprob":-1.695389986038208,)"
    R"("bytes":[32,72]},{"token":"ae","logprob":-2.6659553050994873,"bytes":[97,101]}]},{"token":" o",)"
    R"("logprob":-4.847900867462158,"bytes":[32,111],"top_logprobs":[{"token":" e","logprob":-1.4977223873138428,)"
    R"("bytes":[32,101]},{"token":" g","logprob":-1.9653189182281494,"bytes":[32,103]}]},{"token":"",)"
    R"("logprob":-3.0014007091522217,"bytes":[169],"top_logprobs":[{"token":"","logprob":-1.738251805305481,)"
    R"("bytes":[187]},{"token":"af","logprob":-2.746751546859741,"bytes":[97,102]}]},{"token":"1",)"
    R"("logprob":-3.6112723350524902,"bytes":[49],"top_logprobs":[{"token":"-","logprob":-1.7754015922546387,)"
    R"("bytes":[45]},{"token":",","logprob":-2.850809097290039,"bytes":[44]}]}]})";

struct OneGeneration {
  Model model = Model::load(data_path("models/tiny-qwen2-q4_k_m.gguf"));
  GenerationResult r;
  OneGeneration() {
    Context ctx(model, 1);
    Sequence seq = ctx.new_sequence(256);
    GenerationParams p;
    p.sampling.seed = 2;
    p.sampling.temp = 2.0f;
    p.sampling.top_k = 0;
    p.sampling.top_p = 1.0f;
    p.sampling.min_p = 0.0f;
    p.max_tokens = 6;
    p.logprobs = true;
    p.n_probs = 2;
    r = generate(ctx, seq, model.tokenizer().tokenize("Ünï ☃", true, true), p);
  }
  ReplyChoice choice(ReplyDialect d) const {
    ReplyChoice c;
    c.text = r.text;
    c.logprobs = true;
    c.tokens = token_probs(r);
    c.text_offset = d == ReplyDialect::llama_server ? 0 : 5;  // llama-cpp-python: after the prompt's 5 characters
    c.finish_reason = finish_reason_name(r.finish_reason);
    return c;
  }
};

const OneGeneration& generation() {
  static const OneGeneration g;
  return g;
}

const ReplyHead kHead{"cmpl-x", 1, "m", "fp"};

TEST(ReplyFormat, TheGenerationIsTheOneThePinsWereWrittenFrom) {
  const GenerationResult& r = generation().r;
  EXPECT_EQ(r.tokens, (std::vector<token_id>{101, 470, 494, 260, 169, 49}));
  EXPECT_EQ(r.n_prompt, 9);
}

TEST(ReplyFormat, ServerDialectWritesWhatTheServerWrote) {
  const OneGeneration& g = generation();
  const ReplyChoice c = g.choice(ReplyDialect::llama_server);
  const ReplyUsage u{g.r.n_prompt, static_cast<int64_t>(g.r.tokens.size()), g.r.n_cached};
  EXPECT_EQ(completion_json(ReplyDialect::llama_server, kHead, c, u, g.model.tokenizer(), false), kServerCompletion);

  ReplyChoice chat = c;
  chat.text = R"({"role":"assistant","content":"x"})";
  const nlohmann::json j =
      nlohmann::json::parse(chat_json(ReplyDialect::llama_server, kHead, chat, u, g.model.tokenizer(), false));
  EXPECT_EQ(j["choices"][0]["logprobs"].dump(), kServerChatLogprobs);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "x");
}

TEST(ReplyFormat, PythonDialectWritesWhatThePythonPackageWrote) {
  const OneGeneration& g = generation();
  const ReplyChoice c = g.choice(ReplyDialect::llama_cpp_python);
  const ReplyUsage u{g.r.n_prompt, static_cast<int64_t>(g.r.tokens.size()), g.r.n_cached};
  EXPECT_EQ(completion_json(ReplyDialect::llama_cpp_python, kHead, c, u, g.model.tokenizer(), false),
            kPythonCompletion);

  ReplyChoice chat = c;
  chat.text = R"({"role":"assistant","content":"x"})";
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(
      chat_json(ReplyDialect::llama_cpp_python, kHead, chat, u, g.model.tokenizer(), false));
  EXPECT_EQ(j["choices"][0]["logprobs"].dump(), kPythonChatLogprobs);
  const std::string head = R"({"id":"cmpl-x","object":"chat.completion","created":1,"model":"m","choices":)";
  EXPECT_EQ(j.dump().substr(0, head.size()), head);  // llama-cpp-python's key order, no system_fingerprint
}

TEST(ReplyFormat, ChunksCarryNoUsageAndNullsWhileGenerating) {
  const OneGeneration& g = generation();
  ReplyChoice c = g.choice(ReplyDialect::llama_cpp_python);
  c.tokens.resize(1);
  c.text = "e";
  c.finish_reason.clear();
  EXPECT_EQ(completion_json(ReplyDialect::llama_cpp_python, kHead, c, {}, g.model.tokenizer(), true),
            R"({"id":"cmpl-x","object":"text_completion","created":1,"model":"m","choices":[{"text":"e","index":0,)"
            R"("logprobs":{"tokens":["e"],"text_offset":[5],"token_logprobs":[-3.3622889518737793],)"
            R"("top_logprobs":[{"\u0014":-2.368447780609131,"ey":-2.535134792327881,"e":-3.3622889518737793}]},)"
            R"("finish_reason":null}]})");
  c.logprobs = false;
  c.text = R"({"content":"e"})";
  EXPECT_EQ(chat_json(ReplyDialect::llama_cpp_python, kHead, c, {}, g.model.tokenizer(), true),
            R"({"id":"cmpl-x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,)"
            R"("delta":{"content":"e"},"logprobs":null,"finish_reason":null}]})");
  c.text = "[1]";
  EXPECT_THROW(chat_json(ReplyDialect::llama_cpp_python, kHead, c, {}, g.model.tokenizer(), true), Error);
}

TEST(ReplyFormat, DropInvalidUtf8AsPythonsIgnoreDecoder) {
  // bytes.decode("utf-8", "ignore") of the same bytes, from Python 3.11: a cut
  // sequence, a surrogate, a code point above U+10FFFF, overlong forms, a
  // stray continuation byte and 0xFF go; whole sequences stay.
  const std::string in =
      "a\xe2\x82"
      "b\xed\xa0\x80"
      "c\xf4\x90\x80\x80"
      "d\xc0\xaf"
      "e\xe2\x82\xac\xe0\x80\x80"
      "f\xf0\x9f\x98\x80\xe2\xe2\x82\xac\x80\xff";
  EXPECT_EQ(drop_invalid_utf8(in), "abcde\xe2\x82\xac"
                                   "f\xf0\x9f\x98\x80\xe2\x82\xac");
  EXPECT_EQ(runtime::reply_text(ReplyDialect::llama_server, in), in);
}

}  // namespace
}  // namespace synapse

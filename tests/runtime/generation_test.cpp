// The library's generation loop (synapse/generation.hpp): llama.cpp's greedy
// continuation through generate(), what the callback sees, stop strings,
// logprobs against a log-softmax computed here, cancellation, and the
// end-of-turn token written after a reply cut short (close_turn).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "golden_util.hpp"
#include "synapse/generation.hpp"

namespace synapse {
namespace {

using test::data_path;

struct Fixture {
  Model model = Model::load(data_path("models/stories260K.gguf"));
  Context ctx{model, 1};
  std::vector<token_id> ids(std::string_view text) const { return model.tokenizer().tokenize(text, true, false); }
};

GenerationParams greedy(int32_t max_tokens) {
  GenerationParams p;
  p.sampling.temp = 0;
  p.max_tokens = max_tokens;
  return p;
}

TEST(Generate, GreedyEqualsLlamaCppsContinuation) {
  const nlohmann::json j = test::read_json(data_path("golden/stories260K.once-upon-a-time.json"));
  Fixture f;
  Sequence seq = f.ctx.new_sequence(256);
  const std::vector<token_id> prompt = test::as_array(j["input_ids"]).get<std::vector<token_id>>();
  const std::vector<token_id> want = test::as_array(j["greedy_ids"]).get<std::vector<token_id>>();
  std::string streamed;
  int steps = 0;
  const GenerationResult r = generate(f.ctx, seq, prompt, greedy(static_cast<int32_t>(want.size())),
                                      [&](const GeneratedToken& t) {
                                        streamed += t.text;
                                        ++steps;
                                        return true;
                                      });
  EXPECT_EQ(r.tokens, want);
  EXPECT_EQ(r.text, j["greedy_text"].get<std::string>());
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(steps, static_cast<int>(want.size()));
  EXPECT_EQ(r.finish_reason, FinishReason::length);
  EXPECT_EQ(r.stop_reason, StopReason::n_predict);
  EXPECT_EQ(r.n_prompt, 5);
  EXPECT_EQ(r.n_cached, 0);
  EXPECT_EQ(r.timings.prompt_n, 5);
  EXPECT_EQ(r.timings.predicted_n, static_cast<int64_t>(want.size()));
  EXPECT_TRUE(r.logprobs.empty());
  // The last sampled token is not fed (nothing asked for it).
  EXPECT_EQ(seq.n_past(), static_cast<int64_t>(5 + want.size() - 1));
  EXPECT_STREQ(finish_reason_name(r.finish_reason), "length");
}

TEST(Generate, PromptChunksDoNotChangeTheResult) {
  Fixture f;
  GenerationParams p = greedy(24);
  p.sampling.temp = 1.0f;
  p.sampling.seed = 7;
  p.n_probs = 3;
  const std::vector<token_id> prompt = f.ids("Once upon a time there was a dog named Max. He liked to run");
  Sequence a = f.ctx.new_sequence(128), b = f.ctx.new_sequence(128);
  const GenerationResult ra = generate(f.ctx, a, prompt, p);
  p.n_ubatch = 3;
  const GenerationResult rb = generate(f.ctx, b, prompt, p);
  EXPECT_EQ(ra.tokens, rb.tokens);
  EXPECT_EQ(ra.text, rb.text);
  ASSERT_EQ(ra.logprobs.size(), ra.tokens.size());
  EXPECT_EQ(0, std::memcmp(ra.logprobs.data(), rb.logprobs.data(), ra.logprobs.size() * sizeof(float)));
  EXPECT_EQ(ra.seed, 7u);
}

TEST(Generate, LogprobsAreTheLogSoftmaxOfTheRawRow) {
  Fixture f;
  const std::vector<token_id> prompt = f.ids("Once upon a time");
  Sequence seq = f.ctx.new_sequence(64);
  const std::span<const float> row = f.ctx.decode(seq, prompt);
  const std::vector<float> logits(row.begin(), row.end());
  GenerationParams p;
  p.sampling.seed = 3;
  p.sampling.temp = 2.0f;  // temperature and top-k change the draw, not the reported distribution
  p.n_probs = 5;
  Generation gen(f.model.tokenizer(), p);
  const GeneratedToken t = gen.next(logits);
  double mx = logits[0];
  for (float l : logits) mx = std::max<double>(mx, l);
  double sum = 0;
  for (float l : logits) sum += std::exp(l - mx);
  const double lse = mx + std::log(sum);
  EXPECT_NEAR(t.logprob, logits[static_cast<size_t>(t.id)] - lse, 1e-5);
  ASSERT_EQ(t.top_logprobs.size(), 5u);
  std::vector<token_id> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<token_id>(i);
  std::stable_sort(order.begin(), order.end(), [&](token_id a, token_id b) { return logits[a] > logits[b]; });
  double total = 0;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(t.top_logprobs[i].id, order[i]);
    EXPECT_NEAR(t.top_logprobs[i].logprob, logits[static_cast<size_t>(order[i])] - lse, 1e-5);
    total += std::exp(t.top_logprobs[i].logprob);
  }
  EXPECT_LT(total, 1.0);
}

TEST(Generate, StopStringIsHeldBackAndCut) {
  const nlohmann::json j = test::read_json(data_path("golden/stories260K.once-upon-a-time.json"));
  Fixture f;
  Sequence seq = f.ctx.new_sequence(256);
  GenerationParams p = greedy(64);
  p.stop = {"little girl"};
  std::vector<std::string> pieces;
  const GenerationResult r = generate(f.ctx, seq, f.ids("Once upon a time"), p, [&](const GeneratedToken& t) {
    pieces.push_back(t.text);
    return true;
  });
  EXPECT_EQ(r.text, ", there was a ");
  EXPECT_EQ(r.finish_reason, FinishReason::stop);
  EXPECT_EQ(r.stop_reason, StopReason::stop_string);
  EXPECT_EQ(r.stopping_word, "little girl");
  // " little" is held back while it may start the stop string.
  EXPECT_EQ(pieces.back(), "");
}

TEST(Generate, CallbackAndFlagCancel) {
  Fixture f;
  GenerationParams p = greedy(-1);
  p.ignore_eos = true;
  Sequence seq = f.ctx.new_sequence(256);
  int n = 0;
  FinishReason last = FinishReason::none;
  const GenerationResult r = generate(f.ctx, seq, f.ids("Once upon a time"), p, [&](const GeneratedToken& t) {
    last = t.finish;
    return ++n < 5;
  });
  EXPECT_EQ(r.finish_reason, FinishReason::cancelled);
  EXPECT_EQ(r.tokens.size(), 5u);
  EXPECT_EQ(n, 6);  // five tokens and the closing step
  EXPECT_EQ(last, FinishReason::cancelled);

  std::atomic<bool> stop{true};
  Sequence seq2 = f.ctx.new_sequence(256);
  const GenerationResult r2 = generate(f.ctx, seq2, f.ids("Once upon a time"), p, {}, &stop);
  EXPECT_EQ(r2.finish_reason, FinishReason::cancelled);
  EXPECT_TRUE(r2.tokens.empty());
  EXPECT_EQ(seq2.n_past(), 5);
}

TEST(Generate, ContextFullEndsWithLength) {
  Fixture f;
  GenerationParams p = greedy(-1);
  p.ignore_eos = true;
  Sequence seq = f.ctx.new_sequence(12);
  const GenerationResult r = generate(f.ctx, seq, f.ids("Once upon a time"), p);
  EXPECT_EQ(r.finish_reason, FinishReason::length);
  EXPECT_TRUE(r.context_full);
  EXPECT_EQ(r.tokens.size(), 8u);  // 12 positions: 5 prompt + 7 fed + the last one sampled
  EXPECT_EQ(seq.n_past(), 12);
}

TEST(Generate, RefusesBadPrompts) {
  Fixture f;
  Sequence seq = f.ctx.new_sequence(4);
  try {
    generate(f.ctx, seq, f.ids("Once upon a time there"), greedy(1));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("n_ctx 4"), std::string::npos) << e.what();
  }
  const std::vector<token_id> bad{1, 512};
  EXPECT_THROW(generate(f.ctx, seq, bad, greedy(1)), Error);
  EXPECT_THROW(generate(f.ctx, seq, std::vector<token_id>{}, greedy(1)), Error);
  EXPECT_EQ(seq.n_past(), 0);
  GenerationParams p = greedy(1);
  p.n_ubatch = 0;
  EXPECT_THROW(generate(f.ctx, seq, f.ids("Once"), p), Error);
}

// The logits a sequence ends with after `ids`, for comparing cache contents.
std::vector<float> next_row(Context& ctx, Sequence& seq, const std::vector<token_id>& ids) {
  const std::span<const float> row = ctx.decode(seq, ids);
  return {row.begin(), row.end()};
}

// issue 25: a reply cut by max_tokens or a cancel leaves `prompt + reply +
// end-of-turn` in the cache, as one that ended by its EOG token does.
TEST(Generate, CloseTurnWritesTheEndOfTurnToken) {
  Fixture f;
  const token_id eot = end_of_turn_token(f.model.tokenizer());
  ASSERT_EQ(eot, f.model.tokenizer().eos());  // stories260K has no eot: eos (</s>) stands in, as in llama-cli
  const std::vector<token_id> prompt = f.ids("Once upon a time");
  const std::vector<token_id> next_turn{13, 1};
  for (const bool cancel : {false, true}) {
    GenerationParams p = greedy(cancel ? -1 : 6);
    p.close_turn = true;
    Sequence seq = f.ctx.new_sequence(64);
    int n = 0;
    const GenerationResult r =
        generate(f.ctx, seq, prompt, p, [&](const GeneratedToken&) { return !cancel || ++n < 6; });
    ASSERT_EQ(r.tokens.size(), 6u);
    EXPECT_EQ(r.finish_reason, cancel ? FinishReason::cancelled : FinishReason::length);
    EXPECT_EQ(seq.n_past(), 5 + 6 + 1);
    std::vector<token_id> all = prompt;
    all.insert(all.end(), r.tokens.begin(), r.tokens.end());
    all.push_back(eot);
    Sequence ref = f.ctx.new_sequence(64);
    f.ctx.decode(ref, all);
    const std::vector<float> got = next_row(f.ctx, seq, next_turn), want = next_row(f.ctx, ref, next_turn);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "cancel " << cancel;
  }
}

TEST(Generate, ASessionSamplerCarriesOverTurns) {
  Fixture f;
  GenerationParams p = greedy(4);
  p.sampling.temp = 1.0f;
  p.sampling.seed = 11;
  Sampler shared(p.sampling);
  Sequence s1 = f.ctx.new_sequence(64);
  Generation g1(f.model.tokenizer(), p, shared);
  const std::vector<token_id> first = f.ids("Once");
  const GenerationResult a = generate(f.ctx, s1, first, g1);
  Generation g2(f.model.tokenizer(), p, shared);
  const GenerationResult b = generate(f.ctx, s1, f.ids("Then"), g2);
  // The second turn continues the sequence: everything fed so far is cached.
  EXPECT_EQ(b.n_cached, static_cast<int64_t>(first.size() + a.tokens.size() - 1));
  EXPECT_EQ(b.seed, 11u);
  EXPECT_EQ(a.tokens.size(), 4u);
  EXPECT_EQ(b.tokens.size(), 4u);
}

}  // namespace
}  // namespace synapse

// The sampler chain on fixed logits: each stage's survivors and values, the
// full chain with llama.cpp's defaults, greedy ties, seeds.
#include "synapse/sampling.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "synapse/error.hpp"

namespace synapse {
namespace {

std::vector<token_id> ids(const Candidates& c) {
  std::vector<token_id> out;
  for (const TokenData& t : c.data) out.push_back(t.id);
  return out;
}

// Logits whose softmax is `probs` (up to float rounding).
std::vector<float> log_probs(std::initializer_list<double> probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

SamplerParams plain() {  // every truncation stage off, temperature 1
  SamplerParams p;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.temp = 1.0f;
  p.seed = 1234;
  return p;
}

TEST(Sampler, GreedyTiesGoToTheLowestId) {
  const std::vector<float> l = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(sample_greedy(l), 1);
  EXPECT_THROW(sample_greedy(std::vector<float>{}), Error);
  SamplerParams p = plain();
  p.temp = 0.0f;
  Sampler s(p);
  EXPECT_EQ(s.sample(l), 1);
  p.temp = -1.0f;
  Sampler s2(p);
  EXPECT_EQ(s2.sample(std::vector<float>{5.0f, 7.0f, 7.0f, 7.0f}), 1);
}

TEST(Sampler, TopKKeepsTheKHighestSorted) {
  Candidates c = Candidates::from_logits(std::vector<float>{1, 5, 3, 4, 2});
  apply_top_k(c, 3);
  EXPECT_EQ(ids(c), (std::vector<token_id>{1, 3, 2}));
  EXPECT_TRUE(c.sorted);
  EXPECT_EQ(c.data[0].logit, 5.0f);
  Candidates off = Candidates::from_logits(std::vector<float>{1, 5, 3});
  apply_top_k(off, 0);
  EXPECT_EQ(ids(off), (std::vector<token_id>{0, 1, 2}));
  EXPECT_FALSE(off.sorted);
  Candidates big = Candidates::from_logits(std::vector<float>{1, 5, 3});
  apply_top_k(big, 10);
  EXPECT_EQ(ids(big), (std::vector<token_id>{1, 2, 0}));
  // Equal logits: the lower id first.
  Candidates tie = Candidates::from_logits(std::vector<float>{2, 2, 2, 1});
  apply_top_k(tie, 2);
  EXPECT_EQ(ids(tie), (std::vector<token_id>{0, 1}));
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // Probabilities 0.5, 0.25, 0.15, 0.1, given out of order.
  const std::vector<float> l = log_probs({0.15, 0.5, 0.1, 0.25});
  Candidates a = Candidates::from_logits(l);
  apply_top_p(a, 0.74f, 0);  // 0.5 + 0.25 reaches 0.74
  EXPECT_EQ(ids(a), (std::vector<token_id>{1, 3}));
  EXPECT_NEAR(a.data[0].p, 0.5f, 1e-6f);
  EXPECT_NEAR(a.data[1].p, 0.25f, 1e-6f);
  Candidates b = Candidates::from_logits(l);
  apply_top_p(b, 0.76f, 0);  // needs the 0.15 too
  EXPECT_EQ(ids(b), (std::vector<token_id>{1, 3, 0}));
  Candidates c = Candidates::from_logits(l);
  apply_top_p(c, 0.1f, 0);  // the top token alone already reaches p
  EXPECT_EQ(ids(c), (std::vector<token_id>{1}));
  Candidates d = Candidates::from_logits(l);
  apply_top_p(d, 0.1f, 3);  // min_keep
  EXPECT_EQ(ids(d), (std::vector<token_id>{1, 3, 0}));
  Candidates off = Candidates::from_logits(l);
  apply_top_p(off, 1.0f, 0);
  EXPECT_EQ(off.data.size(), 4u);
  EXPECT_FALSE(off.sorted);
}

TEST(Sampler, MinPIsRelativeToTheMaximum) {
  const std::vector<float> l = log_probs({0.1, 0.5, 0.15, 0.25});
  Candidates a = Candidates::from_logits(l);
  apply_min_p(a, 0.25f, 0);  // keep p >= 0.125: 0.5, 0.15, 0.25, in their order
  EXPECT_EQ(ids(a), (std::vector<token_id>{1, 2, 3}));
  EXPECT_FALSE(a.sorted);
  Candidates b = Candidates::from_logits(l);
  apply_min_p(b, 0.35f, 0);  // keep p >= 0.175
  EXPECT_EQ(ids(b), (std::vector<token_id>{1, 3}));
  Candidates c = Candidates::from_logits(l);
  apply_top_k(c, 4);  // sorted input takes the cut-the-prefix path
  apply_min_p(c, 0.35f, 0);
  EXPECT_EQ(ids(c), (std::vector<token_id>{1, 3}));
  Candidates d = Candidates::from_logits(l);
  apply_min_p(d, 0.9f, 3);  // min_keep: falls back to the sorted prefix of 3
  EXPECT_EQ(ids(d), (std::vector<token_id>{1, 3, 2}));
}

TEST(Sampler, TypicalKeepsTokensNearTheEntropy) {
  // p = 0.5, 0.25, 0.15, 0.1: H = 1.2080 nats; |-ln p - H| = 0.515, 0.178,
  // 0.689, 1.095, so the typical order is ids 1, 0, 2, 3.
  const std::vector<float> l = log_probs({0.5, 0.25, 0.15, 0.1});
  Candidates a = Candidates::from_logits(l);
  apply_typical(a, 0.5f, 0);  // 0.25, then 0.75 > 0.5
  EXPECT_EQ(ids(a), (std::vector<token_id>{1, 0}));
  EXPECT_FALSE(a.sorted);
  Candidates b = Candidates::from_logits(l);
  apply_typical(b, 0.8f, 0);  // 0.25, 0.75, 0.9 > 0.8
  EXPECT_EQ(ids(b), (std::vector<token_id>{1, 0, 2}));
  Candidates c = Candidates::from_logits(l);
  apply_typical(c, 0.1f, 3);
  EXPECT_EQ(ids(c), (std::vector<token_id>{1, 0, 2}));
  Candidates off = Candidates::from_logits(l);
  apply_typical(off, 1.0f, 0);
  EXPECT_EQ(ids(off), (std::vector<token_id>{0, 1, 2, 3}));
}

TEST(Sampler, TemperatureScalesLogits) {
  Candidates a = Candidates::from_logits(std::vector<float>{1, 2, -3});
  apply_temperature(a, 0.5f);
  EXPECT_EQ(a.data[0].logit, 2.0f);
  EXPECT_EQ(a.data[1].logit, 4.0f);
  EXPECT_EQ(a.data[2].logit, -6.0f);
  Candidates g = Candidates::from_logits(std::vector<float>{1, 4, 4, 2});
  apply_temperature(g, 0.0f);
  EXPECT_EQ(g.data[1].logit, 4.0f);
  EXPECT_EQ(g.data[0].logit, -INFINITY);
  EXPECT_EQ(g.data[2].logit, -INFINITY);
  EXPECT_EQ(g.data[3].logit, -INFINITY);
}

TEST(Sampler, PenaltiesChangeExactlyTheRepeatedTokens) {
  // window: id 0 once, id 1 twice, id 3 once; id 2 absent.
  const std::vector<token_id> window = {0, 1, 1, 3};
  Candidates a = Candidates::from_logits(std::vector<float>{2.0f, -2.0f, 1.0f, 0.5f, 0.0f});
  apply_penalties(a, window, 2.0f, 0.0f, 0.0f);
  EXPECT_EQ(a.data[0].logit, 1.0f);   // positive: divided
  EXPECT_EQ(a.data[1].logit, -4.0f);  // negative: multiplied
  EXPECT_EQ(a.data[2].logit, 1.0f);   // not in the window
  EXPECT_EQ(a.data[3].logit, 0.25f);
  EXPECT_EQ(a.data[4].logit, 0.0f);
  Candidates b = Candidates::from_logits(std::vector<float>{2.0f, -2.0f, 1.0f, 0.5f});
  apply_penalties(b, window, 2.0f, 0.5f, 0.25f);
  EXPECT_EQ(b.data[0].logit, 1.0f - 0.5f - 0.25f);
  EXPECT_EQ(b.data[1].logit, -4.0f - 2 * 0.5f - 0.25f);
  EXPECT_EQ(b.data[2].logit, 1.0f);
  EXPECT_EQ(b.data[3].logit, 0.25f - 0.5f - 0.25f);
  Candidates zero = Candidates::from_logits(std::vector<float>{0.0f, 1.0f});
  apply_penalties(zero, std::vector<token_id>{0}, 1.5f, 0.0f, 0.0f);
  EXPECT_EQ(zero.data[0].logit, 0.0f);  // 0 <= 0: multiplied, stays 0
  Candidates off = Candidates::from_logits(std::vector<float>{2.0f, 1.0f});
  apply_penalties(off, window, 1.0f, 0.0f, 0.0f);
  EXPECT_EQ(off.data[0].logit, 2.0f);
}

TEST(Sampler, PenaltyWindowHoldsTheLastNAcceptedTokens) {
  SamplerParams p = plain();
  p.penalty_last_n = 2;
  p.penalty_repeat = 2.0f;
  Sampler s(p);
  for (token_id t : {5, 6, 7}) s.accept(t);  // 5 falls out of the window
  std::vector<float> l(8, 1.0f);
  s.sample(l);
  const Candidates& c = s.last_candidates();
  ASSERT_EQ(c.data.size(), 8u);
  for (const TokenData& t : c.data) EXPECT_EQ(t.logit, (t.id == 6 || t.id == 7) ? 0.5f : 1.0f) << t.id;
  s.reset();  // empties the window
  s.sample(l);
  for (const TokenData& t : s.last_candidates().data) EXPECT_EQ(t.logit, 1.0f);

  SamplerParams whole = plain();
  whole.penalty_last_n = -1;
  EXPECT_THROW(Sampler{whole}, Error);
  Sampler ctx(whole, 3);
  for (token_id t : {1, 2, 3, 4}) ctx.accept(t);
  ctx.sample(std::vector<float>(5, 1.0f));
  // The default repeat penalty is 1 (off): nothing changes.
  for (const TokenData& t : ctx.last_candidates().data) EXPECT_EQ(t.logit, 1.0f);
}

TEST(Sampler, LogitBias) {
  Candidates a = Candidates::from_logits(std::vector<float>{0, 0, 0});
  const std::vector<LogitBias> b = {{1, 2.0f}, {2, -INFINITY}, {1, 0.5f}};
  apply_logit_bias(a, b);
  EXPECT_EQ(a.data[0].logit, 0.0f);
  EXPECT_EQ(a.data[1].logit, 2.5f);
  EXPECT_EQ(a.data[2].logit, -INFINITY);
  Candidates c = Candidates::from_logits(std::vector<float>{0, 0, 0});
  const std::vector<LogitBias> out = {{3, 1.0f}};
  EXPECT_THROW(apply_logit_bias(c, out), Error);

  // Through the chain: a -inf bias removes the greedy choice.
  SamplerParams p = plain();
  p.temp = 0.0f;
  p.logit_bias = {{2, -INFINITY}};
  Sampler s(p);
  EXPECT_EQ(s.sample(std::vector<float>{1, 2, 9, 3}), 3);
}

// A temperature so small that logit / temp overflows (1e-40 is a float
// denormal) is the limit temp -> 0: the argmax, for every seed, never a NaN
// draw that falls through to the last candidate.
TEST(Sampler, TinyTemperatureIsGreedy) {
  Candidates g = Candidates::from_logits(std::vector<float>{1, 4, -2, 2});
  apply_temperature(g, 1e-40f);
  EXPECT_EQ(g.data[1].logit, 4.0f);
  EXPECT_EQ(g.data[0].logit, -INFINITY);
  EXPECT_EQ(g.data[3].logit, -INFINITY);
  for (uint32_t seed = 0; seed < 20; ++seed) {
    SamplerParams p = plain();
    p.temp = 1e-40f;
    p.seed = seed;
    Sampler s(p);
    EXPECT_EQ(s.sample(std::vector<float>{1, 4, -2, 2}), 1) << "seed " << seed;
    for (const TokenData& t : s.last_candidates().data) EXPECT_FALSE(std::isnan(t.p)) << "seed " << seed;
  }
  // A small temperature that does not overflow still divides.
  Candidates a = Candidates::from_logits(std::vector<float>{1, 4});
  apply_temperature(a, 1e-3f);
  EXPECT_EQ(a.data[0].logit, 1.0f / 1e-3f);
}

// Two +inf biases: both tokens are forced, each drawn about half the time,
// nothing else ever (a NaN sum used to pick the last candidate always).
// Greedy takes the lower id; one +inf bias always wins.
TEST(Sampler, TwoInfiniteBiasesShareTheDraw) {
  const std::vector<float> l = {3, 1, 0, 2, 1};
  int count[5] = {};
  for (uint32_t seed = 0; seed < 200; ++seed) {
    SamplerParams p = plain();
    p.seed = seed;
    p.logit_bias = {{1, INFINITY}, {2, INFINITY}};
    Sampler s(p);
    ++count[s.sample(l)];
  }
  EXPECT_EQ(count[0] + count[3] + count[4], 0);
  EXPECT_GT(count[1], 60);
  EXPECT_GT(count[2], 60);
  Candidates c = Candidates::from_logits(std::vector<float>{0, INFINITY, 5, INFINITY});
  softmax(c, false);
  EXPECT_EQ(c.data[0].p, 0.0f);
  EXPECT_EQ(c.data[1].p, 0.5f);
  EXPECT_EQ(c.data[2].p, 0.0f);
  EXPECT_EQ(c.data[3].p, 0.5f);
  SamplerParams g = plain();
  g.temp = 0.0f;
  g.logit_bias = {{3, INFINITY}, {1, INFINITY}};
  EXPECT_EQ(Sampler(g).sample(l), 1);
  SamplerParams one = plain();
  one.logit_bias = {{4, INFINITY}};
  for (uint32_t seed = 0; seed < 20; ++seed) {
    one.seed = seed;
    EXPECT_EQ(Sampler(one).sample(l), 4);
  }
}

TEST(Sampler, ParseLogitBias) {
  LogitBias b = parse_logit_bias("15043+1");
  EXPECT_EQ(b.token, 15043);
  EXPECT_EQ(b.bias, 1.0f);
  b = parse_logit_bias("15043-0.5");
  EXPECT_EQ(b.bias, -0.5f);
  b = parse_logit_bias("2-inf");
  EXPECT_EQ(b.token, 2);
  EXPECT_EQ(b.bias, -INFINITY);
  for (const char* bad : {"", "abc", "15043", "15043*1", "+1", "1+", "1+x", "1+2x", "-1+2", "1+-2", "1+nan"})
    EXPECT_THROW(parse_logit_bias(bad), Error) << bad;
}

TEST(Sampler, DefaultChainSurvivors) {
  // llama.cpp defaults: top-k 40, top-p 0.95, min-p 0.05, temp 0.8.
  std::vector<float> l(100, 0.0f);
  l[0] = 10.0f;
  l[1] = 9.0f;
  l[2] = 8.0f;
  l[3] = 5.0f;  // survives top-k, cut by top-p
  SamplerParams p;
  p.seed = 7;
  Sampler s(p);
  s.sample(l);
  const Candidates& c = s.last_candidates();
  // After top-k: 40 sorted; top-p: 0.662 + 0.243 + 0.090 = 0.9945 >= 0.95 at 3;
  // min-p 0.05 keeps all three (e^-2 = 0.135 of the max).
  ASSERT_EQ(ids(c), (std::vector<token_id>{0, 1, 2}));
  EXPECT_EQ(c.data[0].logit, 10.0f / 0.8f);
  EXPECT_EQ(c.data[2].logit, 8.0f / 0.8f);
  float sum = 0;
  for (const TokenData& t : c.data) sum += t.p;
  EXPECT_NEAR(sum, 1.0f, 1e-6f);
  EXPECT_NEAR(c.data[0].p, 1.0 / (1.0 + std::exp(-1.25) + std::exp(-2.5)), 1e-6);

  // min-p alone cuts where top-p would not.
  SamplerParams q = p;
  q.top_p = 1.0f;
  q.min_p = 0.2f;  // keeps p >= 0.2 * p_max: logits 10, 9 (e^-1 = 0.37) but not 8 (0.135)
  Sampler s2(q);
  s2.sample(l);
  EXPECT_EQ(ids(s2.last_candidates()), (std::vector<token_id>{0, 1}));
}

TEST(Sampler, DrawFollowsTheDistribution) {
  const std::vector<float> l = log_probs({0.5, 0.3, 0.2});
  Sampler s(plain());
  int count[3] = {0, 0, 0};
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++count[s.sample(l)];
  EXPECT_NEAR(count[0] / double(n), 0.5, 0.015);
  EXPECT_NEAR(count[1] / double(n), 0.3, 0.015);
  EXPECT_NEAR(count[2] / double(n), 0.2, 0.015);
  // Temperature 0.5 squares the odds: 25 : 9 : 4.
  SamplerParams p = plain();
  p.temp = 0.5f;
  Sampler cold(p);
  int c0 = 0;
  for (int i = 0; i < n; ++i) c0 += cold.sample(l) == 0;
  EXPECT_NEAR(c0 / double(n), 25.0 / 38.0, 0.015);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferent) {
  std::vector<float> l(50);
  for (size_t i = 0; i < l.size(); ++i) l[i] = 0.05f * static_cast<float>(i % 7);
  auto run = [&](uint32_t seed) {
    SamplerParams p = plain();
    p.seed = seed;
    Sampler s(p);
    EXPECT_EQ(s.seed(), seed);
    std::vector<token_id> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(l));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  // reset() restarts the same stream.
  SamplerParams p = plain();
  p.seed = 99;
  Sampler s(p);
  std::vector<token_id> first, second;
  for (int i = 0; i < 16; ++i) first.push_back(s.sample(l));
  s.reset();
  for (int i = 0; i < 16; ++i) second.push_back(s.sample(l));
  EXPECT_EQ(first, second);
  // The default seed draws one and reports it.
  SamplerParams r = plain();
  r.seed = kDefaultSeed;
  Sampler rs(r);
  SamplerParams again = plain();
  again.seed = rs.seed();
  Sampler replay(again);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(rs.sample(l), replay.sample(l));
}

TEST(Sampler, RejectsBadParameters) {
  SamplerParams p;
  p.temp = NAN;
  EXPECT_THROW(Sampler{p}, Error);
  SamplerParams q;
  q.penalty_last_n = -2;
  EXPECT_THROW(Sampler{q}, Error);
  SamplerParams r;
  r.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(Sampler{r}, Error);
  SamplerParams ok;
  ok.seed = 1;
  ok.logit_bias = {{10, 1.0f}};
  Sampler s(ok);
  EXPECT_THROW(s.sample(std::vector<float>(5, 0.0f)), Error);  // token 10 >= n_vocab 5
  EXPECT_THROW(s.sample(std::vector<float>{}), Error);
}

// sample(logits, allowed): the tokens outside the mask leave before the
// first stage; the logit bias is applied to the row first (a bias can lift an
// allowed token above another allowed one, and its ids are still checked).
TEST(Sampler, MaskedSampleDrawsOnlyAllowedTokens) {
  const std::vector<float> logits = {5.0f, 1.0f, 4.0f, 2.0f, 3.0f};
  const std::vector<uint64_t> mask = {(1u << 1) | (1u << 3)};  // tokens 1 and 3
  SamplerParams g;
  g.temp = 0;
  Sampler greedy(g);
  EXPECT_EQ(greedy.sample(logits), 0);
  EXPECT_EQ(greedy.sample(logits, mask), 3);
  SamplerParams b = g;
  b.logit_bias = {{1, 1.5f}, {0, 100.0f}};
  Sampler biased(b);
  EXPECT_EQ(biased.sample(logits, mask), 1);  // 1 + 1.5 > 2; token 0 is not allowed whatever its bias
  // A draw at temperature 1 over {1, 3}: p(3) = e^2 / (e^1 + e^2) = 0.731.
  SamplerParams d;
  d.seed = 3;
  d.top_k = 0;
  d.top_p = 1.0f;
  d.min_p = 0.0f;
  d.temp = 1.0f;
  Sampler draw(d);
  int threes = 0;
  for (int i = 0; i < 4000; ++i) {
    const token_id t = draw.sample(logits, mask);
    ASSERT_TRUE(t == 1 || t == 3) << t;
    threes += t == 3;
  }
  EXPECT_NEAR(threes / 4000.0, 0.7311, 0.03);
  EXPECT_THROW(greedy.sample(logits, std::vector<uint64_t>{0}), Error);   // nothing allowed
  EXPECT_THROW(greedy.sample(logits, std::vector<uint64_t>{}), Error);    // a mask shorter than the row
  SamplerParams far = g;
  far.logit_bias = {{9, 1.0f}};
  Sampler out_of_range(far);
  EXPECT_THROW(out_of_range.sample(logits, mask), Error);  // token 9 >= n_vocab 5
}

}  // namespace
}  // namespace synapse

// Many sequences in one forward_batch (continuous batching): each
// sequence's logits and greedy ids are memcmp-equal to running it alone
// (DESIGN.md contract 2), for B = 2, 8 and 32 sequences of different lengths
// mixing prefill chunks and decode steps; embedding rows equal token rows.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "golden_util.hpp"
#include "model/forward.hpp"

namespace synapse {
namespace {

using test::data_path;

std::vector<token_id> prompt_for(int b, int64_t n_vocab) {
  std::vector<token_id> ids{1};
  uint64_t x = 1000 + static_cast<uint64_t>(b);
  const int len = 3 + (b * 7) % 23;  // 3 .. 25 tokens
  for (int i = 1; i < len; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<token_id>(3 + (x >> 33) % static_cast<uint64_t>(n_vocab - 3)));
  }
  return ids;
}

struct Stream {
  std::vector<token_id> ids;    // prompt then greedy tokens
  std::vector<float> logits;    // logits of every generated step, concatenated
};

constexpr int kSteps = 12;

// Alone: the prompt in one call, then kSteps greedy decode steps.
Stream run_alone(const model::Model& m, const std::vector<token_id>& prompt, base::ThreadPool& pool,
                 int64_t n_ctx = 64) {
  model::KvCache kv = model::make_kv_cache(m, n_ctx);
  Stream s{prompt, {}};
  std::vector<float> logits;
  model::forward(m, kv, prompt, false, logits, pool);
  for (int k = 0; k < kSteps; ++k) {
    s.logits.insert(s.logits.end(), logits.begin(), logits.end());
    const token_id next = test::argmax(logits);
    s.ids.push_back(next);
    const token_id one[1] = {next};
    model::forward(m, kv, one, false, logits, pool);
  }
  return s;
}

// Together: every step, each sequence contributes either a prefill chunk of
// up to 5 prompt tokens or one decode token, all in one forward_batch.
// n_ctx: each sequence's context size (empty: 64 for all).
std::vector<Stream> run_together(const model::Model& m, const std::vector<std::vector<token_id>>& prompts,
                                 base::ThreadPool& pool, const std::vector<int64_t>& n_ctx = {}) {
  const size_t B = prompts.size();
  std::vector<model::KvCache> caches;
  for (size_t b = 0; b < B; ++b) caches.push_back(model::make_kv_cache(m, n_ctx.empty() ? 64 : n_ctx[b]));
  std::vector<model::KvCache*> seqs;
  for (auto& c : caches) seqs.push_back(&c);
  std::vector<Stream> out(B);
  std::vector<size_t> fed(B, 0);
  std::vector<int> steps(B, 0);
  for (size_t b = 0; b < B; ++b) out[b].ids = prompts[b];
  std::vector<float> logits;
  for (;;) {
    std::vector<model::BatchRow> rows;
    std::vector<size_t> owner;  // sequence of each wanted row
    for (size_t b = 0; b < B; ++b) {
      if (steps[b] == kSteps) continue;
      const size_t have = out[b].ids.size();
      const size_t chunk = fed[b] < prompts[b].size() ? std::min<size_t>(5, prompts[b].size() - fed[b]) : 1;
      for (size_t i = 0; i < chunk; ++i) {
        const bool last = fed[b] + i + 1 == have;
        rows.push_back({out[b].ids[fed[b] + i], nullptr, static_cast<int32_t>(b), last});
        if (last) owner.push_back(b);
      }
      fed[b] += chunk;
    }
    if (rows.empty()) break;
    model::forward_batch(m, seqs, rows, logits, pool);
    const int64_t V = m.hp.n_vocab;
    for (size_t w = 0; w < owner.size(); ++w) {
      const size_t b = owner[w];
      std::span<const float> row(logits.data() + w * V, V);
      out[b].logits.insert(out[b].logits.end(), row.begin(), row.end());
      out[b].ids.push_back(test::argmax(row));
      ++steps[b];
    }
  }
  return out;
}

class MultiSequence : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(MultiSequence, EachSequenceEqualsRunningItAlone) {
  const auto [file, B] = GetParam();
  auto m = model::load_model(data_path(std::string("models/") + file));
  std::vector<std::vector<token_id>> prompts;
  for (int b = 0; b < B; ++b) prompts.push_back(prompt_for(b, m->hp.n_vocab));
  base::ThreadPool pool(2);
  const std::vector<Stream> together = run_together(*m, prompts, pool);
  for (int b = 0; b < B; ++b) {
    SCOPED_TRACE(::testing::Message() << "sequence " << b << " of " << B);
    const Stream alone = run_alone(*m, prompts[b], pool);
    ASSERT_EQ(together[b].ids, alone.ids);
    ASSERT_EQ(together[b].logits.size(), alone.logits.size());
    EXPECT_EQ(0, std::memcmp(together[b].logits.data(), alone.logits.data(), alone.logits.size() * sizeof(float)));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, MultiSequence,
                         ::testing::Values(std::make_tuple("stories260K.gguf", 2),
                                           std::make_tuple("stories260K.gguf", 8),
                                           std::make_tuple("stories260K.gguf", 32),
                                           std::make_tuple("tiny-llama-q4_k_m.gguf", 8),
                                           std::make_tuple("tiny-mixtral-q4_k_m.gguf", 8),
                                           std::make_tuple("tiny-mistral-swa-f32.gguf", 8),
                                           std::make_tuple("tiny-qwen3-q4_k_m.gguf", 8),
                                           std::make_tuple("tiny-mistral3-f32.gguf", 8),
                                           std::make_tuple("tiny-phi3-longrope-f32.gguf", 8),
                                           std::make_tuple("tiny-mixtral-mxfp4_moe.gguf", 8),
                                           std::make_tuple("tiny-qwen3moe-f32.gguf", 8),
                                           std::make_tuple("tiny-qwen3moe-q4_k_m.gguf", 8),
                                           std::make_tuple("tiny-gpt-oss-f32.gguf", 8),
                                           std::make_tuple("tiny-gpt-oss-mxfp4_moe.gguf", 8),
                                           std::make_tuple("tiny-gemma3-q4_0.gguf", 8),
                                           std::make_tuple("tiny-qwen35-q8_0.gguf", 8),
                                           std::make_tuple("tiny-qwen35moe-q8_0.gguf", 8),
                                           std::make_tuple("tiny-llama-iq2_xs.gguf", 8),
                                           std::make_tuple("tiny-llama-iq1_m.gguf", 8)));

// Phi-3 LongRoPE picks its factor set from each sequence's own n_ctx
// (Model::rope_factors): sequences at n_ctx 256 (short factors) and 1024
// (long) batched together each equal running alone at their n_ctx, and the
// two sets really differ.
TEST(MultiSequence, LongRopeFactorsFollowEachSequencesContext) {
  auto m = model::load_model(data_path("models/tiny-phi3-longrope-f32.gguf"));
  ASSERT_FALSE(m->rope_factors_long.empty());
  ASSERT_NE(m->rope_factors(256), m->rope_factors(1024));
  EXPECT_EQ(m->rope_factors(256), m->rope_factors_short.data());
  EXPECT_EQ(m->rope_factors(257), m->rope_factors_long.data());  // n_ctx_seq 512 > 256
  std::vector<std::vector<token_id>> prompts;
  std::vector<int64_t> n_ctx;
  for (int b = 0; b < 6; ++b) {
    prompts.push_back(prompt_for(b, m->hp.n_vocab));
    n_ctx.push_back(b % 2 ? 1024 : 256);
  }
  base::ThreadPool pool(2);
  const std::vector<Stream> together = run_together(*m, prompts, pool, n_ctx);
  for (size_t b = 0; b < prompts.size(); ++b) {
    SCOPED_TRACE(::testing::Message() << "sequence " << b << ", n_ctx " << n_ctx[b]);
    const Stream alone = run_alone(*m, prompts[b], pool, n_ctx[b]);
    ASSERT_EQ(together[b].ids, alone.ids);
    ASSERT_EQ(together[b].logits.size(), alone.logits.size());
    EXPECT_EQ(0, std::memcmp(together[b].logits.data(), alone.logits.data(), alone.logits.size() * sizeof(float)));
    const Stream other = run_alone(*m, prompts[b], pool, n_ctx[b] == 256 ? 1024 : 256);
    EXPECT_NE(0, std::memcmp(other.logits.data(), alone.logits.data(), alone.logits.size() * sizeof(float)));
  }
}

// A batch longer than model::kMaxPassRows runs in several passes of the
// layers, and the sequences whose rows straddle a pass boundary find their
// earlier rows in their caches: every row's logits are memcmp-equal to
// running its sequence alone, in one call, with the rows of three sequences
// interleaved and every row's logits wanted. The same ForwardScratch then
// serves a small batch (one decode row each), whose logits equal the
// sequences' own next steps alone (nothing of the larger call is read). On a
// sliding-window model too (a 32-position window: the long prompts wrap its
// circular buffer inside a pass and across passes).
class LongBatch : public ::testing::TestWithParam<const char*> {};

TEST_P(LongBatch, PassesOfTheLayersEqualRunningEachSequenceAlone) {
  auto m = model::load_model(data_path(std::string("models/") + GetParam()));
  const int64_t V = m->hp.n_vocab;
  const size_t lens[3] = {static_cast<size_t>(model::kMaxPassRows) - 40, 150, 90};  // 456 rows together
  std::vector<std::vector<token_id>> prompts;
  for (int b = 0; b < 3; ++b) {
    std::vector<token_id> ids{1};
    uint64_t x = 77 + static_cast<uint64_t>(b);
    while (ids.size() < lens[b]) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      ids.push_back(static_cast<token_id>(3 + (x >> 33) % static_cast<uint64_t>(V - 3)));
    }
    prompts.push_back(ids);
  }
  base::ThreadPool pool(2);
  std::vector<model::KvCache> caches;
  for (int b = 0; b < 3; ++b) caches.push_back(model::make_kv_cache(*m, 512));
  model::KvCache* seqs[3] = {&caches[0], &caches[1], &caches[2]};
  // Sequence 0's first 120 rows, then the rest of all three interleaved.
  std::vector<model::BatchRow> rows;
  std::vector<int> owner;
  size_t fed[3] = {0, 0, 0};
  auto take = [&](int b) {
    rows.push_back({prompts[b][fed[b]++], nullptr, b, true});
    owner.push_back(b);
  };
  while (fed[0] < 120) take(0);
  for (bool more = true; more;) {
    more = false;
    for (int b = 0; b < 3; ++b)
      if (fed[b] < prompts[b].size()) {
        take(b);
        more = true;
      }
  }
  ASSERT_GT(static_cast<int64_t>(rows.size()), model::kMaxPassRows);
  model::ForwardScratch scratch;
  std::vector<float> together;
  model::forward_batch(*m, seqs, rows, together, pool, &scratch);
  ASSERT_EQ(together.size(), rows.size() * static_cast<size_t>(V));
  // A decode row for each, through the same scratch.
  const token_id next[3] = {5, 6, 7};
  const model::BatchRow step[3] = {{next[0], nullptr, 0, true}, {next[1], nullptr, 1, true}, {next[2], nullptr, 2, true}};
  std::vector<float> stepped;
  model::forward_batch(*m, seqs, step, stepped, pool, &scratch);
  for (int b = 0; b < 3; ++b) {
    SCOPED_TRACE(::testing::Message() << "sequence " << b);
    model::KvCache kv = model::make_kv_cache(*m, 512);
    std::vector<float> alone, alone_step;
    model::forward(*m, kv, prompts[b], true, alone, pool);
    size_t k = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      if (owner[r] != b) continue;
      ASSERT_EQ(0, std::memcmp(together.data() + r * V, alone.data() + k * V, V * sizeof(float))) << "prompt row " << k;
      ++k;
    }
    ASSERT_EQ(k, prompts[b].size());
    const token_id one[1] = {next[b]};
    model::forward(*m, kv, one, false, alone_step, pool);
    EXPECT_EQ(0, std::memcmp(stepped.data() + b * V, alone_step.data(), V * sizeof(float)));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, LongBatch,
                         ::testing::Values("stories260K.gguf", "tiny-llama3-q4_k_m.gguf", "tiny-mistral-swa-f32.gguf"));

TEST(MultiSequence, EmbeddingRowEqualsTokenRow) {
  auto m = model::load_model(data_path("models/stories260K.gguf"));
  base::ThreadPool pool(1);
  const std::vector<token_id> ids{1, 403, 407, 261, 378};
  model::KvCache a = model::make_kv_cache(*m, 8), b = model::make_kv_cache(*m, 8);
  std::vector<float> la, lb;
  model::forward(*m, a, ids, true, la, pool);
  // Row 2 carries the embedding of token 407 instead of the id.
  std::vector<float> embd(static_cast<size_t>(m->hp.n_embd));
  kernels::get_row(m->tok_embd, 407, embd.data());
  std::vector<model::BatchRow> rows;
  for (size_t i = 0; i < ids.size(); ++i) rows.push_back({ids[i], i == 2 ? embd.data() : nullptr, 0, true});
  model::KvCache* seqs[1] = {&b};
  model::forward_batch(*m, seqs, rows, lb, pool);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
}

TEST(MultiSequence, RejectsUnknownSequenceWithoutTouchingCaches) {
  auto m = model::load_model(data_path("models/stories260K.gguf"));
  base::ThreadPool pool(1);
  model::KvCache a = model::make_kv_cache(*m, 8);
  model::KvCache* seqs[1] = {&a};
  const model::BatchRow rows[2] = {{1, nullptr, 0, true}, {1, nullptr, 3, true}};
  std::vector<float> logits;
  try {
    model::forward_batch(*m, seqs, rows, logits, pool);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::out_of_range);
    EXPECT_NE(std::string(e.what()).find("sequence 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.n_past(), 0);
}

}  // namespace
}  // namespace synapse

namespace synapse {
namespace {

TEST(SequenceLifecycle, ForkContinuesLikeAFreshRunAndClearRestarts) {
  auto m = model::load_model(test::data_path("models/stories260K.gguf"));
  base::ThreadPool pool(1);
  const std::vector<token_id> prompt{1, 403, 407, 261, 378};
  const std::vector<token_id> tail_a{286, 261}, tail_b{432, 383, 286};
  model::KvCache base = model::make_kv_cache(*m, 16);
  std::vector<float> scratch, la, lb, ref;
  model::forward(*m, base, prompt, false, scratch, pool);
  model::KvCache fork = base.fork(base.n_past());
  model::forward(*m, base, tail_a, true, la, pool);
  model::forward(*m, fork, tail_b, true, lb, pool);
  // The fork equals a fresh sequence fed prompt + tail_b.
  std::vector<token_id> full = prompt;
  full.insert(full.end(), tail_b.begin(), tail_b.end());
  model::KvCache fresh = model::make_kv_cache(*m, 16);
  model::forward(*m, fresh, full, true, ref, pool);
  ASSERT_EQ(ref.size(), (prompt.size() + tail_b.size()) * 512);
  EXPECT_EQ(0, std::memcmp(lb.data(), ref.data() + prompt.size() * 512, lb.size() * sizeof(float)));
  // A fork of a shorter prefix, and clear().
  model::KvCache head = fresh.fork(2);
  EXPECT_EQ(head.n_past(), 2);
  EXPECT_THROW(fresh.fork(99), Error);
  fresh.clear();
  EXPECT_EQ(fresh.n_past(), 0);
  model::forward(*m, fresh, full, true, la, pool);
  EXPECT_EQ(0, std::memcmp(la.data(), ref.data(), ref.size() * sizeof(float)));
}

}  // namespace
}  // namespace synapse

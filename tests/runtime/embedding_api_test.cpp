// Embeddings through the public API: Context::embed (pooling resolved from
// the file, names of the pooling types) and the Scheduler's embedding queue,
// whose vectors are memcmp-equal to Context::embed of each input alone while
// a generation runs beside them and the requests are cut into calls of
// n_batch tokens.
#include <gtest/gtest.h>

#include <cstring>
#include <future>

#include "golden_util.hpp"
#include "synapse/scheduler.hpp"

namespace synapse {
namespace {

using test::data_path;

bool same(const Embedding& a, const Embedding& b) {
  if (a.n_tokens != b.n_tokens || a.rows.size() != b.rows.size()) return false;
  for (size_t r = 0; r < a.rows.size(); ++r)
    if (a.rows[r].size() != b.rows[r].size() ||
        std::memcmp(a.rows[r].data(), b.rows[r].data(), a.rows[r].size() * sizeof(float)) != 0)
      return false;
  return true;
}

TEST(EmbeddingApi, PoolingNamesAndTheModelsOwn) {
  EXPECT_EQ(pooling_from_name("last"), Pooling::last);
  EXPECT_STREQ(pooling_name(Pooling::mean), "mean");
  EXPECT_STREQ(pooling_name(Pooling::unspecified), "unspecified");
  EXPECT_THROW(pooling_from_name("max"), Error);
  const Model reranker = Model::load(data_path("models/tiny-qwen3-reranker-f32.gguf"));
  EXPECT_EQ(reranker.pooling_type(), Pooling::rank);
  EXPECT_NO_THROW(reranker.check_rank_head());
  const Model plain = Model::load(data_path("models/stories260K.gguf"));
  EXPECT_EQ(plain.pooling_type(), Pooling::unspecified);
  EXPECT_THROW(plain.check_rank_head(), Error);
  // Unspecified: the file's rank pooling, one score pair per input.
  Context ctx(reranker, 1);
  const std::vector<std::vector<token_id>> in = {{5, 6, 7}};
  const auto out = ctx.embed(in, {});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].rows.size(), 1u);
  EXPECT_EQ(out[0].rows[0].size(), 2u);
  EXPECT_EQ(out[0].n_tokens, 3);
}

TEST(EmbeddingApi, SchedulerQueueGivesEachInputsVectorUnderLoad) {
  const Model model = Model::load(data_path("models/tiny-qwen3-f32.gguf"));
  SchedulerParams sp;
  sp.n_parallel = 2;
  sp.n_ctx = 128;
  sp.n_threads = 2;
  sp.n_batch = 8;  // embedding calls of at most 8 tokens: the requests below are cut into several
  Scheduler sched(model, sp);
  const std::vector<std::vector<token_id>> inputs = {{10, 11, 12}, {20, 21, 22, 23, 24, 25, 26}, {30}};
  const EmbeddingParams ep{Pooling::last, 2};
  Context alone(model, 1);
  std::vector<Embedding> want;
  for (const auto& in : inputs) want.push_back(alone.embed(std::span(&in, 1), ep, 128)[0]);

  // A generation beside the embeddings.
  Request gen;
  gen.prompt = {1, 2, 3};
  gen.params.max_tokens = 24;
  gen.params.ignore_eos = true;
  std::promise<void> gen_done;
  gen.on_done = [&](const GenerationResult&) { gen_done.set_value(); };
  ASSERT_TRUE(sched.try_submit(std::move(gen)));

  std::vector<std::promise<std::vector<Embedding>>> done(3);
  for (size_t k = 0; k < 3; ++k) {
    EmbeddingRequest r;
    // Request k: inputs k.. in a different mix each.
    for (size_t j = 0; j <= k; ++j) r.inputs.push_back(inputs[(k + j) % 3]);
    r.params = ep;
    r.on_done = [&done, k](std::vector<Embedding> out, const std::string& error) {
      EXPECT_EQ(error, "");
      done[k].set_value(std::move(out));
    };
    ASSERT_TRUE(sched.try_submit_embedding(std::move(r)));
  }
  for (size_t k = 0; k < 3; ++k) {
    const std::vector<Embedding> got = done[k].get_future().get();
    ASSERT_EQ(got.size(), k + 1);
    for (size_t j = 0; j <= k; ++j) EXPECT_TRUE(same(got[j], want[(k + j) % 3])) << "request " << k << " input " << j;
  }
  gen_done.get_future().get();
  sched.wait_idle();
  EXPECT_GE(sched.metrics().requests_total, 4u);

  // Refused at submission, nothing queued.
  EmbeddingRequest bad;
  bad.params = ep;
  EXPECT_THROW(sched.try_submit_embedding(bad), Error);  // no inputs
  bad.inputs = {{1, 2}, {}};
  EXPECT_THROW(sched.try_submit_embedding(bad), Error);  // an empty input
  bad.inputs = {std::vector<token_id>(129, 5)};
  EXPECT_THROW(sched.try_submit_embedding(bad), Error);  // longer than n_ctx
  bad.inputs = {{1, 100000}};
  EXPECT_THROW(sched.try_submit_embedding(bad), Error);  // outside the vocabulary
  bad.inputs = {{1, 2}};
  bad.params.pooling = Pooling::rank;
  EXPECT_THROW(sched.try_submit_embedding(bad), Error);  // no rank head
}

}  // namespace
}  // namespace synapse

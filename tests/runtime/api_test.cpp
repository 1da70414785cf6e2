// The public API (include/synapse/synapse.hpp) end to end on the bundled
// model: golden logits through Context::decode, batches of several
// sequences, forks, embedding rows, and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "golden_util.hpp"
#include "synapse/synapse.hpp"

namespace synapse {
namespace {

using test::data_path;

TEST(Api, DecodeGivesGoldenLogitsAndGreedyText) {
  const nlohmann::json j = test::read_json(data_path("golden/stories260K.once-upon-a-time.json"));
  const Model model = Model::load(data_path("models/stories260K.gguf"));
  EXPECT_EQ(model.architecture(), "llama");
  EXPECT_EQ(model.n_vocab(), 512);
  EXPECT_EQ(model.n_embd(), 64);
  Context ctx(model, 1);
  Sequence seq = ctx.new_sequence(128);
  const std::vector<token_id> ids = model.tokenizer().tokenize(j["prompt"].get<std::string>(), true, false);
  ASSERT_EQ(ids, test::as_array(j["input_ids"]).get<std::vector<token_id>>());
  std::span<const float> logits = ctx.decode(seq, ids);
  const std::vector<float> gold = test::read_f32(data_path("golden/stories260K.once-upon-a-time.logits.f32"));
  EXPECT_LE(test::rel_rms(logits.data(), gold.data() + (ids.size() - 1) * 512, 512), 1e-3);
  std::vector<token_id> out;
  for (int k = 0; k < 64; ++k) {
    const token_id next = static_cast<token_id>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    const token_id one[1] = {next};
    logits = ctx.decode(seq, one);
  }
  EXPECT_EQ(out, test::as_array(j["greedy_ids"]).get<std::vector<token_id>>());
  EXPECT_EQ(model.tokenizer().detokenize(out, false, false), j["greedy_text"].get<std::string>());
  EXPECT_EQ(seq.n_past(), 5 + 64);
}

TEST(Api, BatchOfSequencesEqualsEachAlone) {
  const Model model = Model::load(data_path("models/stories260K.gguf"));
  Context ctx(model, 2);
  const std::vector<std::vector<token_id>> prompts{{1, 403, 407}, {1, 261, 378, 432, 383}, {1}};
  std::vector<Sequence> seqs;
  for (size_t i = 0; i < prompts.size(); ++i) seqs.push_back(ctx.new_sequence(32));
  Batch batch;
  for (size_t s = 0; s < prompts.size(); ++s)
    for (size_t i = 0; i < prompts[s].size(); ++i) batch.add(seqs[s], prompts[s][i], i + 1 == prompts[s].size());
  EXPECT_EQ(batch.n_logits(), 3u);
  const std::span<const float> got = ctx.decode(batch);
  const std::vector<float> together(got.begin(), got.end());
  ASSERT_EQ(together.size(), 3u * 512);
  for (size_t s = 0; s < prompts.size(); ++s) {
    Sequence alone = ctx.new_sequence(32);
    const std::span<const float> want = ctx.decode(alone, prompts[s]);
    EXPECT_EQ(0, std::memcmp(want.data(), together.data() + s * 512, 512 * sizeof(float))) << "sequence " << s;
    EXPECT_EQ(seqs[s].n_past(), static_cast<int64_t>(prompts[s].size()));
  }
}

TEST(Api, ForkAndEmbeddingRows) {
  const Model model = Model::load(data_path("models/stories260K.gguf"));
  Context ctx(model, 1);
  Sequence a = ctx.new_sequence(16);
  const std::vector<token_id> prompt{1, 403, 407};
  ctx.decode(a, prompt);
  const token_id next[1] = {261};
  // Two forks continued with the same token give the same logits.
  Sequence c = a.fork(3), d = a.fork(3);
  const std::span<const float> lc = ctx.decode(c, next);
  const std::vector<float> vc(lc.begin(), lc.end());
  const std::span<const float> ld = ctx.decode(d, next);
  EXPECT_EQ(0, std::memcmp(vc.data(), ld.data(), vc.size() * sizeof(float)));
  // A wrong-sized embedding row is refused, naming n_embd.
  Sequence e = ctx.new_sequence(16);
  Batch bad;
  const std::vector<float> short_row(10, 0.0f);
  bad.add_embedding(e, short_row, true);
  try {
    ctx.decode(bad);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(err.what()).find("n_embd is 64"), std::string::npos) << err.what();
  }
  EXPECT_EQ(e.n_past(), 0);
}

// Sequence::tokens follows the cache through decode (single and batched,
// embedding rows as -1), fork, truncate and clear; keep_common_prefix keeps
// the longest common prefix but the prompt's last token, and clears a
// recurrent model's sequence it cannot cut back (Qwen3.5).
TEST(Api, SequenceKeepsItsTokensAndReusesTheCommonPrefix) {
  const Model model = Model::load(data_path("models/stories260K.gguf"));
  Context ctx(model, 1);
  Sequence a = ctx.new_sequence(16);
  const auto tokens = [](const Sequence& s) { return std::vector<token_id>(s.tokens().begin(), s.tokens().end()); };
  ctx.decode(a, std::vector<token_id>{1, 403, 407});
  Batch b;
  b.add(a, 261, true);
  b.add_embedding(a, std::vector<float>(64, 0.0f), true);
  ctx.decode(b);
  EXPECT_EQ(tokens(a), (std::vector<token_id>{1, 403, 407, 261, -1}));
  EXPECT_EQ(tokens(a.fork(2)), (std::vector<token_id>{1, 403}));
  // Prompt {1, 403, 407, 300}: the first three are kept, the last is computed again.
  EXPECT_EQ(a.keep_common_prefix(std::vector<token_id>{1, 403, 407, 300}), 3);
  EXPECT_EQ(a.n_past(), 3);
  // The whole cache is the prompt: its last token is still recomputed.
  EXPECT_EQ(a.keep_common_prefix(std::vector<token_id>{1, 403, 407}), 2);
  EXPECT_EQ(tokens(a), (std::vector<token_id>{1, 403}));
  EXPECT_EQ(a.keep_common_prefix(std::vector<token_id>{2}), 0);
  EXPECT_EQ(a.n_past(), 0);
  EXPECT_TRUE(a.tokens().empty());

  const Model hybrid = Model::load(data_path("models/tiny-qwen35-q8_0.gguf"));
  Context hctx(hybrid, 1);
  Sequence h = hctx.new_sequence(16);
  hctx.decode(h, std::vector<token_id>{1, 2, 3, 4});
  EXPECT_EQ(h.keep_common_prefix(std::vector<token_id>{1, 2, 3, 4, 5}), 4);  // extends the whole sequence
  EXPECT_EQ(h.keep_common_prefix(std::vector<token_id>{1, 2, 9}), 0);        // a state cannot be cut back to 2
  EXPECT_EQ(h.n_past(), 0);
}

// A Sequence made for one model, decoded by another model's Context (whose
// layers and heads differ): a clear Error, nothing written (it used to write
// past the smaller model's KV cache). Even two loads of one file are two
// models.
// Context::share_kv: sequences share one pool of pages; a decode that needs
// more pages than are free is Error(out_of_range) and changes no sequence
// (the same decode succeeds once pages come back, with the logits of a
// sequence of its own); forks share whole pages.
TEST(Api, SharedKvPoolRunsOutCleanly) {
  const Model model = Model::load(data_path("models/stories260K.gguf"));
  Context ctx(model, 1);
  EXPECT_EQ(ctx.kv_pool().n_pages, 0);  // none until share_kv
  EXPECT_THROW(ctx.share_kv(0), Error);
  ctx.share_kv(128);  // 2 pages of 64
  EXPECT_EQ(ctx.kv_pool().page_size, 64);
  EXPECT_EQ(ctx.kv_pool().n_pages, 2);
  Sequence a = ctx.new_sequence(128), b = ctx.new_sequence(128);
  const std::vector<token_id> ids = model.tokenizer().tokenize(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her dog. "
      "One day, she saw a big red ball in the park and ran to get it.",
      true, false);
  ASSERT_GT(ids.size(), 20u);
  ASSERT_LT(ids.size(), 64u);
  ctx.decode(a, ids);  // page 1 of 2
  EXPECT_EQ(a.kv_pages(), 1);
  Sequence c = a.fork(a.n_past());  // a partial page: copied (page 2 of 2)
  EXPECT_EQ(ctx.kv_pool().n_used, 2);
  EXPECT_EQ(b.kv_pages_needed(1), 1);
  try {
    ctx.decode(b, ids);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::out_of_range);
    EXPECT_NE(std::string(e.what()).find("KV pool full"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.n_past(), 0);  // unchanged
  c.clear();
  const std::span<const float> l = ctx.decode(b, ids);
  const std::vector<float> got(l.begin(), l.end());
  EXPECT_EQ(b.n_past(), static_cast<int64_t>(ids.size()));
  Context alone(model, 1);
  Sequence own = alone.new_sequence(128);
  const std::span<const float> want = alone.decode(own, ids);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
}

TEST(Api, SequenceOfAnotherModelIsRefused) {
  const Model small = Model::load(data_path("models/stories260K.gguf"));
  const Model other = Model::load(data_path("models/tiny-llama-f32.gguf"));
  Context ctx_small(small, 1), ctx_other(other, 1);
  Sequence seq = ctx_small.new_sequence(64);
  const std::vector<token_id> ids = {1, 2, 3};
  auto expect_refused = [&](auto&& f) {
    try {
      f();
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("stories260K.gguf"), std::string::npos) << e.what();
    }
  };
  expect_refused([&] { ctx_other.decode(seq, ids); });
  Batch batch;
  batch.add(seq, 1, true);
  expect_refused([&] { ctx_other.decode(batch); });
  Sequence fork = seq.fork(0);
  expect_refused([&] { ctx_other.decode(fork, ids); });
  EXPECT_EQ(seq.n_past(), 0);
  ctx_small.decode(seq, ids);  // its own model's Context still works
  EXPECT_EQ(seq.n_past(), 3);
}

TEST(Api, ParallelForCoversEachIndexOnceAndRethrows) {
  const Model model = Model::load(data_path("models/stories260K.gguf"));
  Context ctx(model, 2);
  std::vector<int> hits(1000, 0);
  ctx.parallel_for(1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[i];
  });
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 1000);
  EXPECT_THROW(ctx.parallel_for(10, 1, [](int64_t, int64_t) { throw Error(Errc::invalid_argument, "from fn"); }), Error);
}

TEST(Api, SupportedArchitecturesAndThreadLimits) {
  const std::vector<std::string> archs = supported_architectures();
  const std::vector<std::string> want = {"llama", "mistral", "qwen2", "qwen3", "qwen3moe", "mistral3", "phi3", "gpt-oss", "gemma3", "qwen35", "qwen35moe"};
  EXPECT_EQ(archs, want);
  EXPECT_EQ(max_threads, 512);  // ggml's GGML_MAX_N_THREADS
  EXPECT_GE(default_thread_count(), 1);
  const Model model = Model::load(data_path("models/stories260K.gguf"));
  EXPECT_THROW(Context(model, max_threads + 1), Error);
}

TEST(Api, LoadErrorsNameTheFile) {
  try {
    Model::load("/nonexistent.gguf");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent.gguf"), std::string::npos);
  }
}

}  // namespace
}  // namespace synapse

// Embeddings (model/embedding.hpp): llama.cpp v0.5.0's llama-embedding vectors
// (tests/data/embedding/embedding.*.json, scripts/golden/make_embedding_golden.py)
// within a stated bound, and each input's vector memcmp-equal alone and
// batched with others, at 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "golden_util.hpp"
#include "model/embedding.hpp"

namespace synapse {
namespace {

using test::data_path;

// llama-embedding prints each component with %1.7f (rounded to 5e-8); the F32
// models then differ from llama.cpp (flash attention off, the path synapse
// rounds as) by float rounding of other reduction orders. Bound on every
// component of the unit vectors: 2e-7 absolute (measured: 1.1e-7 at most; the
// largest components are ~0.1-0.2, so ~1e-6 relative there).
constexpr double kGoldenAbs = 2e-7;

model::Pooling pooling_named(const std::string& s) {
  if (s == "mean") return model::Pooling::mean;
  if (s == "last") return model::Pooling::last;
  if (s == "cls") return model::Pooling::cls;
  if (s == "none") return model::Pooling::none;
  throw std::runtime_error("unknown pooling " + s);
}

class EmbeddingGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(EmbeddingGolden, MatchesLlamaEmbedding) {
  const nlohmann::json g = test::read_json(data_path(std::string("embedding/embedding.") + GetParam() + ".json"));
  auto m = model::load_model(data_path("models/" + g["model"].get<std::string>()));
  std::vector<std::vector<token_id>> inputs;
  for (size_t i = 0; i < g["prompts"].size(); ++i) {
    // Our tokenizer gives llama.cpp's ids (add_special, parse_special as llama-embedding).
    inputs.push_back(m->tokenizer->tokenize(g["prompts"][i].get<std::string>(), true, true));
    EXPECT_EQ(inputs.back(), g["tokens"][i].get<std::vector<token_id>>()) << "prompt " << i;
  }
  base::ThreadPool pool(2);
  const auto out = model::embed(*m, inputs, pooling_named(g["pooling"]), g["embd_normalize"], 256, pool);
  ASSERT_EQ(out.size(), inputs.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const std::vector<float> want = g["embeddings"][i].get<std::vector<float>>();
    ASSERT_EQ(out[i].rows.size(), 1u);
    const std::vector<float>& got = out[i].rows[0];
    ASSERT_EQ(got.size(), want.size());
    double worst = 0, norm = 0;
    for (size_t d = 0; d < got.size(); ++d) {
      worst = std::max(worst, std::abs(static_cast<double>(got[d]) - want[d]));
      norm += static_cast<double>(got[d]) * got[d];
    }
    EXPECT_LE(worst, kGoldenAbs) << GetParam() << " prompt " << i;
    EXPECT_NEAR(norm, 1.0, 1e-6);
    EXPECT_EQ(out[i].n_tokens, static_cast<int64_t>(inputs[i].size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, EmbeddingGolden,
                         ::testing::Values("tiny-qwen3-f32.last", "tiny-qwen3-f32.mean", "stories260K.mean"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

std::vector<token_id> ids(uint64_t seed, int n, int64_t n_vocab) {
  std::vector<token_id> v;
  uint64_t x = seed;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v.push_back(static_cast<token_id>(3 + (x >> 33) % static_cast<uint64_t>(n_vocab - 3)));
  }
  return v;
}

bool same_bits(const model::EmbeddingRows& a, const model::EmbeddingRows& b) {
  if (a.rows.size() != b.rows.size() || a.n_tokens != b.n_tokens) return false;
  for (size_t r = 0; r < a.rows.size(); ++r)
    if (a.rows[r].size() != b.rows[r].size() ||
        std::memcmp(a.rows[r].data(), b.rows[r].data(), a.rows[r].size() * sizeof(float)) != 0)
      return false;
  return true;
}

// Each input alone (1 thread) equals the same input in a batch of several,
// one of them longer than a pass (kMaxPassRows), at 2 threads: every pooling.
TEST(Embedding, BatchInvariant) {
  auto m = model::load_model(data_path("models/tiny-qwen3-f32.gguf"));
  const int64_t nv = m->hp.n_vocab;
  const std::vector<std::vector<token_id>> inputs = {ids(1, 5, nv), ids(2, 300, nv), ids(3, 1, nv), ids(4, 17, nv)};
  base::ThreadPool one(1), two(2);
  for (model::Pooling p : {model::Pooling::none, model::Pooling::mean, model::Pooling::cls, model::Pooling::last}) {
    const auto together = model::embed(*m, inputs, p, 2, 512, two);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto alone = model::embed(*m, std::span(&inputs[i], 1), p, 2, 512, one);
      EXPECT_TRUE(same_bits(alone[0], together[i])) << "pooling " << static_cast<int>(p) << " input " << i;
    }
    ASSERT_EQ(together[1].rows.size(), p == model::Pooling::none ? 300u : 1u);
  }
}

// Pooling of the hidden states forward_batch returns: last = the last row,
// cls = the first, none = each (normalised each), mean = their mean.
TEST(Embedding, PoolsTheFinalNormedRows) {
  auto m = model::load_model(data_path("models/tiny-qwen3-f32.gguf"));
  const std::vector<token_id> in = ids(9, 6, m->hp.n_vocab);
  base::ThreadPool pool(1);
  model::KvCache kv = model::make_kv_cache(*m, 6);
  std::vector<model::BatchRow> rows;
  for (token_id t : in) rows.push_back({t, nullptr, 0, true});
  model::KvCache* seqs[1] = {&kv};
  std::vector<float> hidden;
  model::forward_batch(*m, seqs, rows, hidden, pool, nullptr, model::ForwardOutput::hidden);
  const int64_t n_embd = m->hp.n_embd;
  ASSERT_EQ(hidden.size(), static_cast<size_t>(6 * n_embd));
  const auto raw = model::embed(*m, std::span(&in, 1), model::Pooling::none, -1, 64, pool)[0];
  for (int t = 0; t < 6; ++t)
    EXPECT_EQ(0, std::memcmp(raw.rows[t].data(), &hidden[t * n_embd], n_embd * sizeof(float))) << t;
  const auto last = model::embed(*m, std::span(&in, 1), model::Pooling::last, -1, 64, pool)[0];
  EXPECT_EQ(0, std::memcmp(last.rows[0].data(), &hidden[5 * n_embd], n_embd * sizeof(float)));
  const auto cls = model::embed(*m, std::span(&in, 1), model::Pooling::cls, -1, 64, pool)[0];
  EXPECT_EQ(0, std::memcmp(cls.rows[0].data(), &hidden[0], n_embd * sizeof(float)));
  const auto mean = model::embed(*m, std::span(&in, 1), model::Pooling::mean, -1, 64, pool)[0];
  for (int64_t d = 0; d < n_embd; ++d) {
    double s = 0;
    for (int t = 0; t < 6; ++t) s += hidden[t * n_embd + d];
    EXPECT_NEAR(mean.rows[0][d], s / 6, 1e-6);
  }
}

TEST(Embedding, NormalizeAsCommonEmbdNormalize) {
  const float x[4] = {3.0f, -4.0f, 0.0f, 0.0f};
  float y[4];
  model::normalize_embedding(x, y, 4, 2);  // Euclidean: 5
  EXPECT_FLOAT_EQ(y[0], 0.6f);
  EXPECT_FLOAT_EQ(y[1], -0.8f);
  model::normalize_embedding(x, y, 4, 1);  // taxicab: 7
  EXPECT_FLOAT_EQ(y[0], 3.0f / 7.0f);
  model::normalize_embedding(x, y, 4, 0);  // max-abs to int16: 4 -> 32760
  EXPECT_FLOAT_EQ(y[1], -32760.0f);
  model::normalize_embedding(x, y, 4, -1);  // none
  EXPECT_EQ(y[0], 3.0f);
  const float zero[2] = {0, 0};
  model::normalize_embedding(zero, y, 2, 2);  // a zero vector stays zero
  EXPECT_EQ(y[0], 0.0f);
}

TEST(Embedding, BadInputsAreRefused) {
  auto m = model::load_model(data_path("models/tiny-qwen3-f32.gguf"));
  base::ThreadPool pool(1);
  const std::vector<std::vector<token_id>> empty_one = {{5, 6}, {}};
  EXPECT_THROW(model::embed(*m, empty_one, model::Pooling::mean, 2, 64, pool), Error);
  const std::vector<std::vector<token_id>> too_long = {ids(1, 10, m->hp.n_vocab)};
  EXPECT_THROW(model::embed(*m, too_long, model::Pooling::mean, 2, 8, pool), Error);
  const std::vector<std::vector<token_id>> bad_id = {{5, 100000}};
  EXPECT_THROW(model::embed(*m, bad_id, model::Pooling::mean, 2, 64, pool), Error);
  // tiny-qwen3 has no classifier and no "yes"/"no" tokens: no rank pooling.
  EXPECT_THROW(model::check_rank_head(*m), Error);
  // No pooling_type key: unspecified resolves to none, as llama_context does.
  EXPECT_EQ(m->hp.pooling_type, -1);
  EXPECT_EQ(model::resolve_pooling(*m, model::Pooling::unspecified), model::Pooling::none);
  EXPECT_EQ(model::resolve_pooling(*m, model::Pooling::last), model::Pooling::last);
}

// Rank pooling on a Qwen3-Reranker layout (tiny-qwen3-reranker-f32: cls.output
// rows "yes", "no"; scripts/golden/make_tiny_qwen3_reranker.py): the
// relevance scores (softmax over the head's two outputs, the first) of
// llama-server v0.5.0's /v1/rerank replies (flash attention off)
// (embedding/rerank.tiny-qwen3-reranker-f32.json), within 1e-6 of a
// probability (measured: 1.8e-7 at most).
TEST(Embedding, RankMatchesLlamaServer) {
  const nlohmann::json g = test::read_json(data_path("embedding/rerank.tiny-qwen3-reranker-f32.json"));
  auto m = model::load_model(data_path("models/" + g["model"].get<std::string>()));
  EXPECT_EQ(m->hp.pooling_type, 4);
  EXPECT_EQ(m->hp.n_cls_labels, 2);
  EXPECT_EQ(model::resolve_pooling(*m, model::Pooling::unspecified), model::Pooling::rank);
  const std::string tmpl = *m->file.get_string("tokenizer.chat_template.rerank");
  auto fill = [&](const std::string& q, const std::string& d) {
    std::string s = tmpl;
    s.replace(s.find("{query}"), 7, q);
    s.replace(s.find("{document}"), 10, d);
    return m->tokenizer->tokenize(s, false, true);
  };
  base::ThreadPool pool(2);
  int checked = 0;
  for (const auto& c : g["cases"]) {
    const auto& req = c["request"];
    const auto& docs = req.contains("documents") ? req["documents"] : req["texts"];
    std::vector<std::vector<token_id>> inputs;
    for (const auto& d : docs) inputs.push_back(fill(req["query"], d));
    const auto out = model::embed(*m, inputs, model::Pooling::rank, -1, 1024, pool);
    const auto& results = c["reply"].is_array() ? c["reply"] : c["reply"]["results"];
    for (const auto& r : results) {
      const size_t i = r["index"];
      const double want = r.contains("score") ? r["score"].get<double>() : r["relevance_score"].get<double>();
      ASSERT_EQ(out[i].rows.size(), 1u);
      ASSERT_EQ(out[i].rows[0].size(), 2u);
      EXPECT_NEAR(out[i].rows[0][0], want, 1e-6) << "document " << i;
      EXPECT_NEAR(out[i].rows[0][0] + out[i].rows[0][1], 1.0, 1e-6);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 7);
}

// Without cls.output, a qwen3 reranker's head is the output matrix's "yes" and
// "no" rows: the same scores, bit for bit, as the converted head made of those
// rows (each output is one vec_dot of its own row).
TEST(Embedding, RankWithoutHeadUsesTheYesNoOutputRows) {
  auto with_head = model::load_model(data_path("models/tiny-qwen3-reranker-f32.gguf"));
  auto without = model::load_model(data_path("models/tiny-qwen3-reranker-f32.gguf"));
  EXPECT_EQ(without->rank_yes, -1);  // it has a head: no fallback
  without->cls_out = {};
  EXPECT_THROW(model::check_rank_head(*without), Error);
  without->rank_yes = 274;  // the rows make_tiny_qwen3_reranker.py copied ("Ġy", "Ġn")
  without->rank_no = 262;
  const std::vector<std::vector<token_id>> inputs = {ids(5, 40, 480), ids(6, 7, 480)};
  base::ThreadPool pool(2);
  const auto a = model::embed(*with_head, inputs, model::Pooling::rank, -1, 64, pool);
  const auto b = model::embed(*without, inputs, model::Pooling::rank, -1, 64, pool);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_TRUE(same_bits(a[i], b[i])) << i;
}

}  // namespace
}  // namespace synapse

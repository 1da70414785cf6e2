// Batch invariance (DESIGN.md contract 2): a prompt run as one batch, in
// chunks of 7, or token by token gives memcmp-equal logits and KV cache
// contents, at 1, 2 and 3 threads. Plus the sliding-window cache bound and the
// load/forward errors.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "golden_util.hpp"
#include "model/forward.hpp"

namespace synapse {
namespace {

using test::data_path;

// The golden files' id rule (tests/data/golden/README.md "Input ids").
std::vector<token_id> lcg_ids(int64_t n_vocab, token_id bos, size_t n) {
  std::vector<token_id> ids{bos};
  uint64_t x = 20250220;
  while (ids.size() < n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<token_id>(3 + (x >> 33) % static_cast<uint64_t>(n_vocab - 3)));
  }
  return ids;
}

// Floats of one DeltaNet layer's conv and delta-rule state.
struct StateSizes {
  int64_t conv, ssm;
};

struct ChunkedRun {
  std::vector<float> logits;  // [n][n_vocab]
  std::vector<uint16_t> k, v; // every cached row of every layer
  std::vector<float> rec;     // hybrid models: every DeltaNet layer's conv and delta-rule state
};

// n_ctx 0: the number of ids.
ChunkedRun run_chunked(const model::Model& m, const std::vector<token_id>& ids, size_t chunk, int threads,
                       int64_t n_ctx = 0) {
  base::ThreadPool pool(threads);
  model::KvCache kv = model::make_kv_cache(m, n_ctx > 0 ? n_ctx : static_cast<int64_t>(ids.size()));
  ChunkedRun r;
  std::vector<float> part;
  for (size_t i = 0; i < ids.size(); i += chunk) {
    const size_t n = std::min(chunk, ids.size() - i);
    model::forward(m, kv, std::span<const token_id>(ids.data() + i, n), true, part, pool);
    r.logits.insert(r.logits.end(), part.begin(), part.end());
  }
  const int64_t first = static_cast<int64_t>(ids.size()) - kv.capacity();
  for (int64_t il = 0; il < m.hp.n_layer_kv(); ++il)
    for (int64_t p = std::max<int64_t>(0, first); p < static_cast<int64_t>(ids.size()); ++p) {
      r.k.insert(r.k.end(), kv.k(il, p), kv.k(il, p) + m.hp.n_embd_k_gqa());
      r.v.insert(r.v.end(), kv.v(il, p), kv.v(il, p) + m.hp.n_embd_v_gqa());
    }
  const StateSizes sz{(m.hp.ssm_d_conv - 1) * m.hp.ssm_conv_channels(),
                         m.hp.ssm_dt_rank * m.hp.ssm_d_state * m.hp.ssm_d_state};
  for (int64_t il = 0; il < m.hp.n_layer; ++il)
    if (m.hp.is_recurrent(il)) {
      r.rec.insert(r.rec.end(), kv.recurrent().conv(il), kv.recurrent().conv(il) + sz.conv);
      r.rec.insert(r.rec.end(), kv.recurrent().ssm(il), kv.recurrent().ssm(il) + sz.ssm);
    }
  return r;
}

// A model file, and the sequence's n_ctx (0: the number of ids; 1024 puts
// tiny-phi3-longrope past its original context 256: the long factors).
class BatchInvariance : public ::testing::TestWithParam<std::tuple<const char*, int64_t>> {};

TEST_P(BatchInvariance, PrefillChunksAndDecodeAreBitIdentical) {
  const auto [file, n_ctx] = GetParam();
  auto m = model::load_model(data_path(std::string("models/") + file));
  const std::vector<token_id> ids = lcg_ids(m->hp.n_vocab, std::max(0, m->tokenizer->bos()), 64);
  const ChunkedRun ref = run_chunked(*m, ids, ids.size(), 1, n_ctx);
  ASSERT_EQ(ref.logits.size(), ids.size() * static_cast<size_t>(m->hp.n_vocab));
  for (int threads : {1, 2, 3}) {
    for (size_t chunk : {ids.size(), size_t{7}, size_t{1}}) {
      if (threads == 1 && chunk == ids.size()) continue;
      SCOPED_TRACE(::testing::Message() << "threads " << threads << ", chunk " << chunk);
      const ChunkedRun r = run_chunked(*m, ids, chunk, threads, n_ctx);
      ASSERT_EQ(r.logits.size(), ref.logits.size());
      EXPECT_EQ(0, std::memcmp(r.logits.data(), ref.logits.data(), ref.logits.size() * sizeof(float)));
      ASSERT_EQ(r.k.size(), ref.k.size());
      EXPECT_EQ(0, std::memcmp(r.k.data(), ref.k.data(), ref.k.size() * sizeof(uint16_t)));
      EXPECT_EQ(0, std::memcmp(r.v.data(), ref.v.data(), ref.v.size() * sizeof(uint16_t)));
      ASSERT_EQ(r.rec.size(), ref.rec.size());
      EXPECT_EQ(0, std::memcmp(r.rec.data(), ref.rec.data(), ref.rec.size() * sizeof(float)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, BatchInvariance,
    ::testing::Values(std::make_tuple("stories260K.gguf", 0), std::make_tuple("stories260K-q4_0.gguf", 0),
                      std::make_tuple("stories260K-q8_0.gguf", 0), std::make_tuple("llama-2-tiny-random.gguf", 0),
                      std::make_tuple("tiny-llama-q4_k_m.gguf", 0), std::make_tuple("tiny-llama-bf16.gguf", 0),
                      std::make_tuple("tiny-llama3-q4_k_m.gguf", 0), std::make_tuple("tiny-qwen2-q4_k_m.gguf", 0),
                      std::make_tuple("tiny-mixtral-q4_k_m.gguf", 0), std::make_tuple("tiny-phi3-q4_k_m.gguf", 0),
                      std::make_tuple("tiny-mistral-swa-f32.gguf", 0),
                      // qwen3: q/k norms; mistral3: YaRN and the temperature, which
                      // steps at position 32 inside the 64 ids; LongRoPE both sets.
                      std::make_tuple("tiny-qwen3-f32.gguf", 0), std::make_tuple("tiny-qwen3-q4_k_m.gguf", 0),
                      std::make_tuple("tiny-mistral3-f32.gguf", 0),
                      std::make_tuple("tiny-phi3-longrope-f32.gguf", 0),
                      std::make_tuple("tiny-phi3-longrope-f32.gguf", 1024),
                      // MXFP4 experts: prefill runs their GEMMs, decode their dots.
                      std::make_tuple("tiny-mixtral-mxfp4_moe.gguf", 0),
                      // qwen3moe: 8 experts, top 4.
                      std::make_tuple("tiny-qwen3moe-f32.gguf", 0), std::make_tuple("tiny-qwen3moe-q4_k_m.gguf", 0),
                      // gpt-oss: sinks, a window of 48 on layer 0 (the 64 ids pass it), MXFP4 experts.
                      std::make_tuple("tiny-gpt-oss-f32.gguf", 0), std::make_tuple("tiny-gpt-oss-mxfp4_moe.gguf", 0),
                      // gemma3: five layers with a window of 48 and RoPE base 1e4 to one global
                      // layer (1e6, linear 1/8), post-norms, GELU FFN, softcapped logits.
                      std::make_tuple("tiny-gemma3-f32.gguf", 0), std::make_tuple("tiny-gemma3-q4_0.gguf", 0),
                      // qwen35: Gated DeltaNet layers (the conv and delta-rule states compared
                      // too) between gated attention layers with IMROPE.
                      std::make_tuple("tiny-qwen35-q8_0.gguf", 0),
                      // qwen35moe: the same layers with 8 experts (top 2) and the gated shared expert.
                      std::make_tuple("tiny-qwen35moe-q8_0.gguf", 0),
                      // The lattice formats, every matrix (token_embd Q2_K or the type).
                      std::make_tuple("tiny-llama-iq2_xxs.gguf", 0), std::make_tuple("tiny-llama-iq2_xs.gguf", 0),
                      std::make_tuple("tiny-llama-iq2_s.gguf", 0), std::make_tuple("tiny-llama-iq3_xxs.gguf", 0),
                      std::make_tuple("tiny-llama-iq3_s.gguf", 0), std::make_tuple("tiny-llama-iq1_s.gguf", 0),
                      std::make_tuple("tiny-llama-iq1_m.gguf", 0)),
    [](const auto& info) {
      std::string s = std::get<0>(info.param);
      for (char& c : s)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      const int64_t n_ctx = std::get<1>(info.param);
      return n_ctx > 0 ? s + "_nctx" + std::to_string(n_ctx) : s;
    });

TEST(SlidingWindow, CacheHoldsWindowRowsForALongSequence) {
  auto m = model::load_model(data_path("models/tiny-mistral-swa-f32.gguf"));
  ASSERT_EQ(m->hp.n_swa, 32);
  model::KvCache kv = model::make_kv_cache(*m, 4096);
  EXPECT_EQ(kv.capacity(), 32);
  EXPECT_EQ(kv.bytes(), 0u);  // pages are taken on first write
  // A page: 64 positions x 2 layers x (64 K + 64 V values) x 2 bytes.
  const size_t page = size_t{64} * 2 * (64 + 64) * 2;
  const std::vector<token_id> ids = lcg_ids(m->hp.n_vocab, 1, 4096);
  base::ThreadPool pool(2);
  std::vector<float> logits;
  for (size_t i = 0; i < ids.size(); i += 512)
    model::forward(*m, kv, std::span<const token_id>(ids.data() + i, 512), false, logits, pool);
  EXPECT_EQ(kv.n_past(), 4096);
  EXPECT_EQ(kv.capacity(), 32);
  // The next position reads 4065 .. 4096: the last page, and one page for
  // each periodic snapshot's window (3297 .. 3327 and so on) are held, and
  // the pool never held more than a pass of 512 rows, its window and the
  // snapshots' pages. Without the snapshots only the last page is.
  EXPECT_EQ(kv.snapshot_positions(), (std::vector<int64_t>{3328, 3584, 3840, 4096}));
  EXPECT_EQ(kv.bytes(), 4 * page);
  EXPECT_LE(kv.pool().n_allocated(), (512 + 32) / 64 + 2 + static_cast<int64_t>(model::kMaxSnapshots));
  EXPECT_TRUE(kv.drop_snapshots());
  EXPECT_EQ(kv.bytes(), page);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  // The last position sees only the window: the same 32 tokens at the same
  // positions, decoded in a fresh cache after a different history, give the
  // same logits bit for bit.
  model::KvCache fresh = model::make_kv_cache(*m, 4096);
  std::vector<token_id> other = lcg_ids(m->hp.n_vocab, 2, 4096 - 64);
  for (auto& t : other) t = (t * 7 + 1) % static_cast<token_id>(m->hp.n_vocab);
  std::vector<float> scratch, last;
  for (size_t i = 0; i < other.size(); i += 504)
    model::forward(*m, fresh, std::span<const token_id>(other.data() + i, std::min<size_t>(504, other.size() - i)),
                   false, scratch, pool);
  // Layer inputs past the first layer depend on the whole window of the
  // previous layer, so only n_layer * window positions back matter: feed the
  // last 2 * 32 tokens at the same positions.
  model::forward(*m, fresh, std::span<const token_id>(ids.data() + 4096 - 64, 64), false, last, pool);
  EXPECT_EQ(0, std::memcmp(last.data(), logits.data(), logits.size() * sizeof(float)));
}

// Hostile weights: every IQ tensor of the seven lattice-format models
// replaced by random bytes (any grid index, sign and scale, F16 infinities
// and NaN included). The model loads and runs (the kernels mask every index
// to its table: no read outside the tables, which the sanitizer build would
// report), and stays batch-invariant whatever the values.
TEST(Forward, LatticeTypesWithRandomBlocksRun) {
  for (const char* file : {"tiny-llama-iq2_xxs.gguf", "tiny-llama-iq2_xs.gguf", "tiny-llama-iq2_s.gguf",
                           "tiny-llama-iq3_xxs.gguf", "tiny-llama-iq3_s.gguf", "tiny-llama-iq1_s.gguf",
                           "tiny-llama-iq1_m.gguf"}) {
    SCOPED_TRACE(file);
    const gguf::File src = gguf::File::open(data_path(std::string("models/") + file));
    gguf::Writer w(src.alignment());
    for (const auto& kv : src.metadata()) w.set_value(kv.key, kv.value);
    std::mt19937 rng(7);
    int randomized = 0;
    for (const auto& t : src.tensors()) {
      std::vector<uint8_t> d(t.data, t.data + t.n_bytes);
      if (t.type != GgmlType::F32 && t.type != GgmlType::Q2_K) {
        for (auto& b : d) b = static_cast<uint8_t>(rng());
        ++randomized;
      }
      w.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne.data(), t.n_dims), d);
    }
    EXPECT_GE(randomized, 15);
    const std::vector<uint8_t> bytes = w.bytes();
    auto m = model::load_model(gguf::File::from_bytes(bytes, "random-blocks.gguf"));
    const std::vector<token_id> ids = lcg_ids(m->hp.n_vocab, 1, 12);
    const ChunkedRun one = run_chunked(*m, ids, ids.size(), 1);
    const ChunkedRun tokens = run_chunked(*m, ids, 1, 2);
    ASSERT_EQ(one.logits.size(), ids.size() * static_cast<size_t>(m->hp.n_vocab));
    EXPECT_EQ(0, std::memcmp(one.logits.data(), tokens.logits.data(), one.logits.size() * sizeof(float)));
  }
}

TEST(Forward, RejectsBadTokensAndFullContext) {
  auto m = model::load_model(data_path("models/stories260K.gguf"));
  base::ThreadPool pool(1);
  model::KvCache kv = model::make_kv_cache(*m, 4);
  std::vector<float> logits;
  const std::vector<token_id> bad{1, 512};
  try {
    model::forward(*m, kv, bad, false, logits, pool);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::out_of_range);
    EXPECT_NE(std::string(e.what()).find("512"), std::string::npos) << e.what();
  }
  EXPECT_EQ(kv.n_past(), 0);
  const std::vector<token_id> five{1, 2, 3, 4, 5};
  try {
    model::forward(*m, kv, five, false, logits, pool);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos) << e.what();
  }
  EXPECT_EQ(kv.n_past(), 0);
}

}  // namespace
}  // namespace synapse

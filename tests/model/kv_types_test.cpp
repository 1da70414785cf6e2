// KV cache types (model::KvTypes, -ctk/-ctv): for every type, and for mixed
// K/V types, a sequence's logits are memcmp-equal whether its prompt runs in
// one pass or token by token, batched beside other sequences or alone, on
// 1 or 2 threads (DESIGN.md contract 2); the rows are stored in the type's
// bytes; a quantized cache stays close to F16's (it is really used, and not
// broken); a type the head size cannot take is refused, naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "golden_util.hpp"
#include "model/lcg_prompt.hpp"
#include "kernels/ops.hpp"
#include "model/forward.hpp"
#include "quant/quant.hpp"
#include "synapse/error.hpp"

namespace synapse {
namespace {

using test::data_path;
using model::KvTypes;

// Every position's logits of `ids`, fed in chunks of `chunk` tokens.
std::vector<float> run_chunks(const model::Model& m, KvTypes t, const std::vector<token_id>& ids, int64_t chunk,
                              base::ThreadPool& pool) {
  model::KvCache kv = model::make_kv_cache(m, 128, nullptr, t);
  std::vector<float> all, logits;
  for (size_t i = 0; i < ids.size(); i += static_cast<size_t>(chunk)) {
    const size_t n = std::min(ids.size() - i, static_cast<size_t>(chunk));
    model::forward(m, kv, std::span(ids).subspan(i, n), true, logits, pool);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

// Sequence 0 runs `ids` in chunks of 7 beside sequence 1's other prompt in
// chunks of 3, both in one forward_batch per step; returns sequence 0's
// logits of every position.
std::vector<float> run_batched(const model::Model& m, KvTypes t, const std::vector<token_id>& ids,
                               const std::vector<token_id>& other, base::ThreadPool& pool) {
  auto shared = model::make_kv_pool(m, 0, t);
  model::KvCache a = model::make_kv_cache(m, 128, shared), b = model::make_kv_cache(m, 128, shared);
  model::KvCache* seqs[2] = {&a, &b};
  std::vector<float> all, logits;
  size_t fa = 0, fb = 0;
  const int64_t V = m.hp.n_vocab;
  while (fa < ids.size()) {
    std::vector<model::BatchRow> rows;
    const size_t na = std::min<size_t>(7, ids.size() - fa);
    // The other sequence first, so sequence 0's rows are not at the batch's start.
    for (size_t i = 0; i < 3 && fb < other.size(); ++i, ++fb) rows.push_back({other[fb], nullptr, 1, true});
    const size_t n_other = rows.size();
    for (size_t i = 0; i < na; ++i) rows.push_back({ids[fa + i], nullptr, 0, true});
    fa += na;
    model::forward_batch(m, seqs, rows, logits, pool);
    all.insert(all.end(), logits.begin() + static_cast<std::ptrdiff_t>(n_other * V), logits.end());
  }
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  const char* file;
  GgmlType k, v;
};

class KvTypesInvariance : public ::testing::TestWithParam<Case> {};

TEST_P(KvTypesInvariance, SameBitsInEveryBatchingAndThreadCount) {
  const Case c = GetParam();
  auto m = model::load_model(data_path(std::string("models/") + c.file));
  const KvTypes t{c.k, c.v};
  // 80 positions: two pages, past tiny-mistral-swa's window of 32.
  const std::vector<token_id> ids = test::lcg_prompt(80, 7, m->hp.n_vocab), other = test::lcg_prompt(40, 11, m->hp.n_vocab);
  base::ThreadPool one(1), two(2);
  const std::vector<float> prefill = run_chunks(*m, t, ids, 80, two);
  ASSERT_EQ(prefill.size(), ids.size() * static_cast<size_t>(m->hp.n_vocab));
  EXPECT_TRUE(same_bits(prefill, run_chunks(*m, t, ids, 1, two))) << "token by token";
  EXPECT_TRUE(same_bits(prefill, run_chunks(*m, t, ids, 80, one))) << "1 thread";
  EXPECT_TRUE(same_bits(prefill, run_chunks(*m, t, ids, 13, one))) << "chunks of 13, 1 thread";
  EXPECT_TRUE(same_bits(prefill, run_batched(*m, t, ids, other, two))) << "batched beside another sequence";

  // The type is used, and a quantized cache stays near F16's: the mean
  // logit difference against the F16 cache is above 0 and below a bound a
  // broken kernel (wrong rows, scale, block or rotation) would exceed by far.
  const std::vector<float> f16 = run_chunks(*m, KvTypes{}, ids, 80, two);
  double sum_diff = 0, sum_abs = 0;
  for (size_t i = 0; i < f16.size(); ++i) {
    ASSERT_TRUE(std::isfinite(prefill[i])) << i;
    sum_diff += std::fabs(f16[i] - prefill[i]);
    sum_abs += std::fabs(f16[i]);
  }
  // Logits of a broken cache would be off by about their own size; 4- and
  // 5-bit types move these random-weight models' logits by up to a fifth.
  const auto bits = [](GgmlType x) { return x == GgmlType::Q8_0 || x == GgmlType::BF16 || x == GgmlType::F16 ? 8 : 4; };
  const double bound = std::min(bits(c.k), bits(c.v)) == 8 ? 0.05 : 0.35;
  EXPECT_GT(sum_diff, 0.0);
  EXPECT_LT(sum_diff, bound * sum_abs) << "mean |logit| " << sum_abs / static_cast<double>(f16.size());
  std::printf("%s: mean |logit - F16's| / mean |logit| = %.4f\n", c.file, sum_diff / sum_abs);
}

INSTANTIATE_TEST_SUITE_P(
    Types, KvTypesInvariance,
    ::testing::Values(Case{"tiny-llama-f32.gguf", GgmlType::Q8_0, GgmlType::Q8_0},
                      Case{"tiny-llama-f32.gguf", GgmlType::Q4_0, GgmlType::Q4_0},
                      Case{"tiny-llama-f32.gguf", GgmlType::Q5_0, GgmlType::Q5_0},
                      Case{"tiny-llama-f32.gguf", GgmlType::IQ4_NL, GgmlType::IQ4_NL},
                      Case{"tiny-llama-f32.gguf", GgmlType::BF16, GgmlType::BF16},
                      Case{"tiny-llama-f32.gguf", GgmlType::Q8_0, GgmlType::F16},
                      Case{"tiny-llama-f32.gguf", GgmlType::F16, GgmlType::Q4_0},
                      // a sliding window (masked positions), attention sinks
                      Case{"tiny-mistral-swa-f32.gguf", GgmlType::Q8_0, GgmlType::Q4_0},
                      Case{"tiny-gpt-oss-f32.gguf", GgmlType::Q4_0, GgmlType::Q8_0},
                      // attention beside DeltaNet layers, its output gated after the rotation back
                      Case{"tiny-qwen35-q8_0.gguf", GgmlType::Q5_0, GgmlType::Q8_0}),
    [](const ::testing::TestParamInfo<Case>& i) {
      std::string name = std::string(type_name(i.param.k)) + "_" + std::string(type_name(i.param.v)) + "_" +
                         std::to_string(i.index);
      return name;
    });

// The cache holds each row in its type's own bytes: position p's K row of
// layer il is quantize_row(type_k, k) (ggml's from_float, as llama.cpp's
// set_rows stores it), so the page is row_size(type, n) bytes a row.
TEST(KvTypes, RowsAreStoredInTheTypesBytes) {
  const KvTypes t{GgmlType::Q8_0, GgmlType::Q4_0};
  model::KvCache kv(2, 128, 64, 64, 0, t);
  kv.reserve(3);
  const model::KvPool& pool = kv.pool();
  EXPECT_EQ(pool.k_row_words() * 2, static_cast<int64_t>(row_size(GgmlType::Q8_0, 128)));  // 4 blocks x 34
  EXPECT_EQ(pool.v_row_words() * 2, static_cast<int64_t>(row_size(GgmlType::Q4_0, 64)));   // 2 blocks x 18
  EXPECT_EQ(pool.page_bytes(), static_cast<size_t>(2 * model::kPageSize * (4 * 34 + 2 * 18)));
  EXPECT_EQ(pool.bytes_per_position(), static_cast<size_t>(2 * (4 * 34 + 2 * 18)));
  // Rows of consecutive positions and layers do not overlap.
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(kv.k(0, 1)) - reinterpret_cast<const uint8_t*>(kv.k(0, 0)), 136);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(kv.v(0, 0)) - reinterpret_cast<const uint8_t*>(kv.k(0, 0)),
            136 * model::kPageSize);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(kv.k(1, 0)) - reinterpret_cast<const uint8_t*>(kv.k(0, 0)),
            (136 + 36) * model::kPageSize);
}

// A forward pass stores quantize_row's bytes of the rotated row: the cached
// K row of the last position equals re-quantizing its dequantized value (a
// fixed point of Q8_0's quantizer), and its floats are near the F16 cache's
// row rotated as llama.cpp rotates it (kernels::fwht in chunks of 64).
TEST(KvTypes, ForwardStoresQuantizedRows) {
  auto m = model::load_model(data_path("models/tiny-llama-f32.gguf"));
  base::ThreadPool pool(2);
  const std::vector<token_id> ids = test::lcg_prompt(5, 3, m->hp.n_vocab);
  model::KvCache q8 = model::make_kv_cache(*m, 16, nullptr, {GgmlType::Q8_0, GgmlType::Q8_0});
  model::KvCache f16 = model::make_kv_cache(*m, 16);
  std::vector<float> logits;
  model::forward(*m, q8, ids, false, logits, pool);
  model::forward(*m, f16, ids, false, logits, pool);
  const int64_t n = m->hp.n_embd_k_gqa();
  std::vector<float> from_q8(static_cast<size_t>(n)), from_f16(static_cast<size_t>(n));
  quant::dequantize_row(GgmlType::Q8_0, q8.k(1, 4), from_q8.data(), n);
  quant::dequantize_row(GgmlType::F16, f16.k(1, 4), from_f16.data(), n);
  // Head size 64: the Q8_0 cache holds the K rows rotated in chunks of 64
  // (model::kv_rotation_k), so the F16 row is rotated to compare.
  ASSERT_EQ(model::kv_rotation_k(GgmlType::Q8_0, m->hp.n_embd_head_k), 64);
  EXPECT_EQ(model::kv_rotation_k(GgmlType::BF16, m->hp.n_embd_head_k), 0);
  kernels::fwht(from_f16.data(), n / 64, 64);
  float max_abs = 0, max_diff = 0;
  for (int64_t d = 0; d < n; ++d) {
    max_abs = std::max(max_abs, std::fabs(from_f16[d]));
    max_diff = std::max(max_diff, std::fabs(from_f16[d] - from_q8[d]));
  }
  EXPECT_GT(max_abs, 0.0f);
  // Within two Q8_0 steps of the largest block (one for the rounding, one
  // for the F16 row's own rounding spread by the rotation).
  EXPECT_LE(max_diff, max_abs / 64.0f);
  std::vector<uint8_t> again(row_size(GgmlType::Q8_0, n));
  quant::quantize_row(GgmlType::Q8_0, from_q8.data(), again.data(), n);
  EXPECT_EQ(0, std::memcmp(again.data(), q8.k(1, 4), again.size()));
}

TEST(KvTypes, RefusesTypesTheHeadCannotTake) {
  // stories260K: head size 8, not a multiple of a 32-value block.
  auto m = model::load_model(data_path("models/stories260K.gguf"));
  try {
    model::make_kv_pool(*m, 0, {GgmlType::Q8_0, GgmlType::F16});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("type_k Q8_0: the head size 8"), std::string::npos) << e.what();
  }
  // BF16 has blocks of one value: any head size.
  EXPECT_NO_THROW(model::make_kv_pool(*m, 0, {GgmlType::BF16, GgmlType::BF16}));
  try {
    model::KvPool(1, 64, 64, 0, {GgmlType::F16, GgmlType::Q4_1});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("type_v: Q4_1 is not a KV cache type"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace synapse

// ImatrixAccumulator: llama-imatrix's rules for what is counted, and its
// order of the sums (tools/imatrix/imatrix.cpp of llama.cpp v0.5.0,
// IMatrixCollector::collect_imatrix), on hand-made product inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/imatrix.hpp"
#include "synapse/error.hpp"

namespace synapse::runtime {
namespace {

model::ProductInput plain(std::string_view tensor, const std::vector<float>& x, int64_t n_in) {
  model::ProductInput in;
  in.tensor = tensor;
  in.x = x.data();
  in.n_in = n_in;
  in.n_rows = static_cast<int64_t>(x.size()) / n_in;
  return in;
}

TEST(ImatrixAccumulator, PlainProductsFollowLlamaImatrixsRules) {
  ImatrixAccumulator acc(/*process_output=*/false);
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};  // 3 rows of 2
  acc.observe(plain("blk.0.attn_q.weight", x, 2));
  acc.observe(plain("blk.0.attn_q.weight", x, 2));
  acc.observe(plain("output.weight", x, 2));      // only with --process-output
  acc.observe(plain("token_embd.weight", x, 2));  // a tied output: never
  acc.set_ubatch_tokens(15);                      // under 16 tokens: plain products skipped
  acc.observe(plain("blk.1.ffn_down.weight", x, 2));
  acc.set_ubatch_tokens(16);
  acc.observe(plain("blk.1.attn_k.weight", x, 2));
  const Imatrix m = acc.result({"text.txt"}, 4);
  ASSERT_EQ(m.entries.size(), 2u);
  EXPECT_EQ(m.entries.at("blk.0.attn_q.weight").sums, (std::vector<float>{2 * (1 + 9 + 25), 2 * (4 + 16 + 36)}));
  EXPECT_EQ(m.entries.at("blk.0.attn_q.weight").counts, std::vector<int64_t>{6});
  EXPECT_EQ(m.entries.at("blk.1.attn_k.weight").counts, std::vector<int64_t>{3});
  EXPECT_EQ(m.chunk_count, 1);  // the largest count, 6, over chunk_size 4
  EXPECT_EQ(m.chunk_size, 4);
  EXPECT_EQ(m.datasets, std::vector<std::string>{"text.txt"});

  ImatrixAccumulator with_output(/*process_output=*/true);
  with_output.observe(plain("output.weight", x, 2));
  with_output.observe(plain("token_embd.weight", x, 2));
  EXPECT_EQ(with_output.result({}, 1).entries.size(), 1u);
}

// Experts: counted whatever the ubatch, per expert, each slot's rows in
// token order before the next slot's (llama's loop order, which decides the
// float sums' rounding).
TEST(ImatrixAccumulator, ExpertsPerExpertInLlamasOrder) {
  ImatrixAccumulator acc(false);
  acc.set_ubatch_tokens(1);
  // Expert 1 of 3 (n_used 2) got rows (token 0, slot 0), (token 1, slot 1),
  // (token 2, slot 0); one column, squares 1, 2^24, 1.
  const std::vector<float> x = {1, 4096, 1};
  const int64_t slots[] = {0 * 2 + 0, 1 * 2 + 1, 2 * 2 + 0};
  model::ProductInput in = plain("blk.0.ffn_up_exps.weight", x, 1);
  in.expert = 1;
  in.n_expert = 3;
  in.n_used = 2;
  in.slots = slots;
  acc.observe(in);
  const Imatrix m = acc.result({}, 1);
  const ImatrixEntry& e = m.entries.at("blk.0.ffn_up_exps.weight");
  EXPECT_EQ(e.counts, (std::vector<int64_t>{0, 3, 0}));
  // Slot 0's rows first (1 + 1), then slot 1's: 2^24 + 2, exact in float;
  // token order would lose both ones (2^24 + 1 rounds to 2^24).
  EXPECT_EQ(e.sums, (std::vector<float>{0, 16777218.0f, 0}));

  in.expert = 3;  // outside the tensor
  EXPECT_THROW(acc.observe(in), Error);
}

TEST(ImatrixAccumulator, NonFiniteAndChangingWidthsAreErrors) {
  ImatrixAccumulator acc(false);
  const std::vector<float> inf = {std::numeric_limits<float>::infinity(), 1};
  EXPECT_THROW(acc.observe(plain("blk.0.attn_q.weight", inf, 2)), Error);
  const std::vector<float> x = {1, 2};
  acc.observe(plain("blk.0.attn_k.weight", x, 2));
  EXPECT_THROW(acc.observe(plain("blk.0.attn_k.weight", x, 1)), Error);
}

}  // namespace
}  // namespace synapse::runtime

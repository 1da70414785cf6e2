// Contract G1 at depth (issue 46, decode at depth): a sequence whose context
// spans several attention chunks (kernels::kAttendChunk) gives memcmp-equal
// logits when its prompt runs as one prefill, when its later positions are
// decoded token by token (single-row blocks: attention split into (group,
// chunk) items across threads) at 1, 2, 3 and 4 threads, and when each
// decode step shares a batch with other sequences at depth and a short
// prefill; with an F16 cache, a quantized one, sinks and a sliding window.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "golden_util.hpp"
#include "model/lcg_prompt.hpp"
#include "kernels/attention.hpp"
#include "model/forward.hpp"

namespace synapse {
namespace {

using test::data_path;

// Positions [kDecodeFrom, kPositions) are compared: their rows attend 2
// chunks (the last ones exactly 2 full chunks), then 3 (the first of them
// one position in the third). Under sanitizers (a hundred times slower)
// fewer steps across the same chunk end.
constexpr int64_t kSteps = SYNAPSE_TEST_SANITIZED ? 8 : 100;
constexpr int64_t kDecodeFrom = 2 * kernels::kAttendChunk - kSteps / 2;
constexpr int64_t kPositions = kDecodeFrom + kSteps;

struct DepthCase {
  const char* file;
  GgmlType k, v;
};

class DecodeAtDepth : public ::testing::TestWithParam<DepthCase> {
 protected:
  // The logits of positions [kDecodeFrom, kPositions) of ids, one token per
  // call, after `prompt` (a fork of a cache holding [0, kDecodeFrom)).
  static std::vector<float> decode(const model::Model& m, const model::KvCache& prompt,
                                   const std::vector<token_id>& ids, int threads) {
    base::ThreadPool pool(threads);
    model::KvCache kv = prompt.fork(kDecodeFrom);
    std::vector<float> out, logits;
    model::ForwardScratch scratch;
    for (int64_t p = kDecodeFrom; p < kPositions; ++p) {
      model::forward(m, kv, std::span(ids).subspan(static_cast<size_t>(p), 1), true, logits, pool, &scratch);
      out.insert(out.end(), logits.begin(), logits.end());
    }
    return out;
  }
  model::KvTypes types() const { return {GetParam().k, GetParam().v}; }
};

TEST_P(DecodeAtDepth, PrefillDecodeBatchAndThreadsAreBitIdentical) {
  auto m = model::load_model(data_path(std::string("models/") + GetParam().file));
  const int64_t V = m->hp.n_vocab;
  const std::vector<token_id> ids = test::lcg_prompt(kPositions, 5, V), other = test::lcg_prompt(kPositions + 40, 9, V);
  // The reference: the whole prompt as one prefill (blocks of many rows), in
  // a pool the runs below share: each decodes on a fork of its first
  // kDecodeFrom positions (one prefill of the depth in all: under sanitizers
  // it is most of the test's time).
  auto shared = model::make_kv_pool(*m, 0, types());
  model::KvCache prompt = model::make_kv_cache(*m, kPositions + 40, shared);
  std::vector<float> want;
  {
    base::ThreadPool pool(2);
    model::forward(*m, prompt, ids, true, want, pool);
    want.erase(want.begin(), want.begin() + kDecodeFrom * V);
    ASSERT_EQ(want.size(), static_cast<size_t>((kPositions - kDecodeFrom) * V));
  }
  for (int threads : {1, 2, 3, 4}) {
    const std::vector<float> got = decode(*m, prompt, ids, threads);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float))) << threads << " threads";
  }
  // Batched: each step decodes this sequence's next token beside another
  // sequence decoding at depth (so a pass splits two rows) and a third one's
  // short prefill (3 rows a step, a block attended whole), on 3 threads.
  base::ThreadPool pool(3);
  // The other sequence at depth: the same first kDecodeFrom positions, then
  // 40 of its own, so its rows cross the chunk ends at other steps.
  model::KvCache a = prompt.fork(kDecodeFrom), b = prompt.fork(kDecodeFrom),
                 c = model::make_kv_cache(*m, kPositions, shared);
  model::KvCache* seqs[3] = {&c, &b, &a};
  std::vector<float> logits, got;
  model::forward(*m, b, std::span(other).subspan(static_cast<size_t>(kDecodeFrom), 40), false, logits, pool);
  size_t next_c = 0;
  for (int64_t p = kDecodeFrom; p < kPositions; ++p) {
    std::vector<model::BatchRow> rows;
    rows.push_back({other[static_cast<size_t>(p + 40)], nullptr, 1, true});
    for (int i = 0; i < 3; ++i, ++next_c) rows.push_back({other[next_c], nullptr, 0, true});
    rows.push_back({ids[static_cast<size_t>(p)], nullptr, 2, true});
    model::forward_batch(*m, seqs, rows, logits, pool);
    got.insert(got.end(), logits.end() - V, logits.end());
  }
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float))) << "batched";
}

INSTANTIATE_TEST_SUITE_P(
    Models, DecodeAtDepth,
    ::testing::Values(
        // head size 8 (q.k and V off the 16-lane grid), 4 KV groups
        DepthCase{"stories260K.gguf", GgmlType::F16, GgmlType::F16},
        // head size 64, 2 heads per group (AVX-512's 16-lane tiles)
        DepthCase{"tiny-llama-f32.gguf", GgmlType::F16, GgmlType::F16},
        DepthCase{"tiny-llama-f32.gguf", GgmlType::Q8_0, GgmlType::Q4_0},
        // attention sinks, a window of 48 on layer 0 beside global layers
        DepthCase{"tiny-gpt-oss-f32.gguf", GgmlType::F16, GgmlType::F16}),
    [](const ::testing::TestParamInfo<DepthCase>& i) {
      std::string s = std::string(i.param.file) + "_" + std::string(type_name(i.param.k)) + "_" +
                      std::string(type_name(i.param.v));
      for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

}  // namespace
}  // namespace synapse

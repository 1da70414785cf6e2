// model::moe_ffn (and Qwen3.5-MoE's shared expert) over one layer of the tiny
// MoE models: a row's output is memcmp-equal whether it is alone in the call
// or shares it with rows routed to the same and to other experts, in any
// order, on 1 or 2 threads (contract 2), with the scratch and conversion
// buffers of earlier, larger calls reused; and a call like an earlier one
// allocates nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <set>

#include "golden_util.hpp"
#include "model/forward.hpp"
#include "model/moe.hpp"

namespace {

// Allocations while g_counting is set, on any thread: this binary's
// operator new counts them (the replacement is the standard one otherwise:
// malloc, std::bad_alloc when it fails).
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};

}  // namespace

// GCC sees the replaced delete's free() inlined where this file deletes
// what operator new returned and warns of a mismatch; the pair is malloc/free.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t bytes) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace synapse {
namespace {

using test::data_path;

// Rows like the FFN's input (RMS-normed): unit-variance floats.
std::vector<float> input_rows(int64_t n, int64_t n_embd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> h(static_cast<size_t>(n * n_embd));
  for (float& v : h) v = dist(rng);
  return h;
}

// The layer's MoE block over n rows of h: the routed experts, and the shared
// one where the model has it (as forward_pass runs them).
std::vector<float> ffn(const model::Model& m, int64_t il, const float* h, int64_t n, base::ThreadPool& pool,
                       model::MoeScratch& sc, kernels::ActivationBuffers& act) {
  const model::Layer& L = m.layers[static_cast<size_t>(il)];
  std::vector<float> out(static_cast<size_t>(n * m.hp.n_embd), -1.f);
  model::moe_ffn(m.hp, L, h, out.data(), n, pool, sc, &act, nullptr);
  if (m.hp.n_ff_shexp > 0) model::shared_expert_ffn(m.hp, L, h, out.data(), n, pool, sc, &act, nullptr);
  return out;
}

class Moe : public ::testing::TestWithParam<const char*> {};

TEST_P(Moe, AnExpertsRowsDoNotDependOnTheRowsBesideThem) {
  auto m = model::load_model(data_path(std::string("models/") + GetParam()));
  const int64_t n_embd = m->hp.n_embd, n = 37;
  ASSERT_GT(m->hp.n_expert, 0);
  const std::vector<float> h = input_rows(n, n_embd, 5);
  base::ThreadPool two(2), one(1);
  model::MoeScratch sc;
  kernels::ActivationBuffers act;
  for (const int64_t il : {int64_t{0}, m->hp.n_layer - 1}) {
    SCOPED_TRACE(::testing::Message() << "layer " << il);
    const std::vector<float> all = ffn(*m, il, h.data(), n, two, sc, act);
    // The step is a real mix: several experts, some of them with several rows.
    std::set<int64_t> experts;
    int64_t shared_rows = 0;
    for (int64_t e = 0; e < m->hp.n_expert; ++e) {
      const int64_t rows = sc.begin[e + 1] - sc.begin[e];
      if (rows > 0) experts.insert(e);
      shared_rows += rows > 1 ? rows : 0;
    }
    ASSERT_GE(experts.size(), 2u);
    ASSERT_GE(shared_rows, 2 * n);
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<float> alone = ffn(*m, il, &h[i * n_embd], 1, one, sc, act);
      ASSERT_EQ(0, std::memcmp(alone.data(), &all[i * n_embd], n_embd * sizeof(float))) << "row " << i;
    }
    // The rows reversed (other neighbours, other positions in each expert's group).
    std::vector<float> reversed;
    for (int64_t i = n - 1; i >= 0; --i) reversed.insert(reversed.end(), &h[i * n_embd], &h[(i + 1) * n_embd]);
    const std::vector<float> back = ffn(*m, il, reversed.data(), n, two, sc, act);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(0, std::memcmp(&back[(n - 1 - i) * n_embd], &all[i * n_embd], n_embd * sizeof(float))) << "row " << i;
  }
}

// The steady state: a call like earlier ones takes every buffer from the
// scratch and the conversion buffers (moe_ffn's own, the gathered rows',
// the conversions') and allocates nothing else either (the conversions'
// records, the thread pool's jobs), in prefill and in decode; on one thread
// (see the next test).
TEST_P(Moe, AStepLikeAnEarlierOneAllocatesNothing) {
  auto m = model::load_model(data_path(std::string("models/") + GetParam()));
  base::ThreadPool pool(1);  // as below: which worker draws which chunk is timing
  model::MoeScratch sc;
  kernels::ActivationBuffers act;
  for (const int64_t n : {int64_t{64}, int64_t{3}}) {
    SCOPED_TRACE(::testing::Message() << n << " rows");
    const std::vector<float> h = input_rows(n, m->hp.n_embd, 9);
    std::vector<float> out(static_cast<size_t>(n * m->hp.n_embd));
    const model::Layer& L = m->layers[0];
    g_allocations = 0;
    g_counting = true;  // the first call of a size sizes the scratch: the count sees it
    model::moe_ffn(m->hp, L, h.data(), out.data(), n, pool, sc, &act, nullptr);
    g_counting = false;
    if (n == 64) {
      EXPECT_GT(g_allocations.load(), 0);
    }
    for (int warm = 0; warm < 3; ++warm) model::moe_ffn(m->hp, L, h.data(), out.data(), n, pool, sc, &act, nullptr);
    g_allocations = 0;
    g_counting = true;
    model::moe_ffn(m->hp, L, h.data(), out.data(), n, pool, sc, &act, nullptr);
    g_counting = false;
    EXPECT_EQ(g_allocations.load(), 0);
  }
}

// The whole forward pass in the steady state: a decode step of four
// sequences together, once the scratch has seen such steps, allocates
// nothing (no page of the KV pool is taken in these steps). On one thread:
// with more, a worker sizes its thread-local buffers (attention's, a cut
// group's) the first time it draws such a chunk, which timing decides.
TEST_P(Moe, ADecodeStepOfSeveralSequencesAllocatesNothing) {
  auto m = model::load_model(data_path(std::string("models/") + GetParam()));
  base::ThreadPool pool(1);
  model::ForwardScratch sc;
  std::vector<model::KvCache> caches;
  for (int b = 0; b < 4; ++b) caches.push_back(model::make_kv_cache(*m, 64));
  std::vector<model::KvCache*> seqs;
  for (auto& c : caches) seqs.push_back(&c);
  std::vector<model::BatchRow> rows;
  for (int32_t b = 0; b < 4; ++b)
    for (int i = 0; i < 20; ++i) rows.push_back({static_cast<token_id>(3 + 7 * b + i), nullptr, b, i == 19});
  std::vector<float> logits;
  model::forward_batch(*m, seqs, rows, logits, pool, &sc);
  rows.clear();
  for (int32_t b = 0; b < 4; ++b) rows.push_back({static_cast<token_id>(11 + b), nullptr, b, true});
  for (int step = 0; step < 6; ++step) {
    g_allocations = 0;
    g_counting = step >= 3;
    model::forward_batch(*m, seqs, rows, logits, pool, &sc);
    g_counting = false;
    EXPECT_EQ(g_allocations.load(), 0) << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Moe,
                         ::testing::Values("tiny-mixtral-q4_k_m.gguf", "tiny-mixtral-mxfp4_moe.gguf",
                                           "tiny-mixtral-split-f32.gguf", "tiny-qwen3moe-q4_k_m.gguf",
                                           "tiny-gpt-oss-mxfp4_moe.gguf", "tiny-qwen35moe-q8_0.gguf"));

}  // namespace
}  // namespace synapse

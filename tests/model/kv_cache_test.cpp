// model::KvCache storage: large caches start on a 2 MiB boundary (the
// huge-page allocator), every slot reads zero before it is written, rows of
// different layers and positions do not overlap, and a fork copies them.
#include <gtest/gtest.h>

#include <cstdint>

#include "model/kv_cache.hpp"

namespace synapse::model {
namespace {

void fill_and_check(int64_t n_layer, int64_t n_k, int64_t n_v, int64_t n_ctx) {
  KvCache kv(n_layer, n_k, n_v, n_ctx, 0);
  EXPECT_EQ(kv.bytes(), static_cast<size_t>(n_layer * n_ctx * (n_k + n_v)) * 2);
  for (int64_t il = 0; il < n_layer; ++il)
    for (int64_t p = 0; p < n_ctx; ++p) {
      for (int64_t d = 0; d < n_k; ++d) ASSERT_EQ(kv.k(il, p)[d], 0) << il << " " << p;
      for (int64_t d = 0; d < n_v; ++d) ASSERT_EQ(kv.v(il, p)[d], 0);
      kv.k(il, p)[0] = static_cast<quant::ggml_fp16_t>(il * 1000 + p);
      kv.v(il, p)[n_v - 1] = static_cast<quant::ggml_fp16_t>(il * 1000 + p + 7);
    }
  kv.set_n_past(n_ctx);
  const KvCache copy = kv.fork(n_ctx);
  for (int64_t il = 0; il < n_layer; ++il)
    for (int64_t p = 0; p < n_ctx; ++p) {
      ASSERT_EQ(copy.k(il, p)[0], static_cast<quant::ggml_fp16_t>(il * 1000 + p));
      ASSERT_EQ(copy.v(il, p)[n_v - 1], static_cast<quant::ggml_fp16_t>(il * 1000 + p + 7));
    }
}

TEST(KvCache, LargeCachesStartOnAHugePage) {
  KvCache kv(16, 512, 512, 4096, 0);  // llama-3.2-1b at n_ctx 4096: 64 MiB each for K and V
  EXPECT_EQ(reinterpret_cast<uintptr_t>(kv.k(0, 0)) % (uintptr_t{2} << 20), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(kv.v(0, 0)) % (uintptr_t{2} << 20), 0u);
}

TEST(KvCache, SlotsStartZeroAndKeepTheirRows) {
  fill_and_check(2, 64, 32, 5);        // bytes below 2 MiB: plain allocation
  fill_and_check(3, 512, 256, 1024);   // above: the huge-page allocation
}

}  // namespace
}  // namespace synapse::model

// model::KvPool and model::KvCache: pages taken on first write, zero until
// written, rows of different layers and positions apart, pages of
// llama-3.2-1b's shapes on a 2 MiB boundary; reference counts of forks
// (full pages shared, the partial last one copied, a shared page copied
// before it is written); sliding windows giving pages back; a full pool an
// Error, every page back in the pool when the sequences end.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "model/kv_cache.hpp"
#include "synapse/error.hpp"

namespace synapse::model {
namespace {

void fill_and_check(int64_t n_layer, int64_t n_k, int64_t n_v, int64_t n_ctx) {
  KvCache kv(n_layer, n_k, n_v, n_ctx, 0);
  EXPECT_EQ(kv.bytes(), 0u);
  kv.reserve(n_ctx);
  const int64_t n_pages = (n_ctx + kPageSize - 1) / kPageSize;
  EXPECT_EQ(kv.bytes(), static_cast<size_t>(n_pages * kPageSize * n_layer * (n_k + n_v)) * 2);
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

TEST(KvCache, PagesOfTwoMiBStartOnAHugePage) {
  KvCache kv(16, 512, 512, 4096, 0);  // llama-3.2-1b: 64 positions x 16 layers x 1024 values x 2 bytes
  EXPECT_EQ(kv.pool().page_bytes(), size_t{2} << 20);
  kv.reserve(200);
  for (int64_t p : {0, 64, 128, 199})
    EXPECT_EQ(reinterpret_cast<uintptr_t>(kv.k(0, p) - (p % kPageSize) * 512) % (uintptr_t{2} << 20), 0u);
}

TEST(KvCache, SlotsStartZeroAndKeepTheirRows) {
  fill_and_check(2, 64, 32, 5);        // one page, below 2 MiB: plain allocation
  fill_and_check(3, 512, 256, 1024);   // 16 pages of 4.5 MiB: the huge-page allocation
}

TEST(KvPool, ForkSharesFullPagesAndCopiesThePartialOne) {
  auto pool = std::make_shared<KvPool>(2, 8, 8, 10);
  {
    KvCache a(pool, 640, 0);
    a.reserve(150);  // pages 0, 1, 2
    for (int64_t p = 0; p < 150; ++p) a.k(1, p)[3] = static_cast<quant::ggml_fp16_t>(p + 1);
    a.set_n_past(150);
    EXPECT_EQ(pool->n_used(), 3);
    KvCache b = a.fork(130);  // pages 0 and 1 shared, page 2 (positions 128, 129) copied
    EXPECT_EQ(pool->n_used(), 4);
    EXPECT_EQ(pool->refs(a.pages()[0]), 2);
    EXPECT_EQ(pool->refs(a.pages()[1]), 2);
    EXPECT_EQ(a.pages()[0], b.pages()[0]);
    EXPECT_NE(a.pages()[2], b.pages()[2]);
    EXPECT_EQ(b.k(1, 129)[3], 130);
    // b writes position 130 onwards in its own page; a's rows stay.
    EXPECT_EQ(b.pages_needed(10), 0);
    b.reserve(10);
    b.k(1, 130)[3] = 9999;
    EXPECT_EQ(a.k(1, 130)[3], 131);
    // a truncated into a shared page: its next write copies the page first.
    a.truncate(100);
    EXPECT_EQ(pool->n_used(), 3);  // a's page 2 given back
    EXPECT_EQ(a.pages_needed(1), 1);
    a.reserve(1);
    EXPECT_EQ(pool->n_used(), 4);
    EXPECT_EQ(pool->refs(a.pages()[1]), 1);
    EXPECT_EQ(pool->refs(b.pages()[1]), 1);
    a.k(1, 100)[3] = 7;
    EXPECT_EQ(b.k(1, 100)[3], 101);
    EXPECT_EQ(a.k(1, 99)[3], 100);  // the copy kept the rows before
  }
  EXPECT_EQ(pool->n_used(), 0);  // every page back when the sequences end
  EXPECT_EQ(pool->n_allocated(), 4);  // and kept for reuse
}

TEST(KvPool, FullPoolIsAnErrorAndChangesNothing) {
  auto pool = std::make_shared<KvPool>(1, 4, 4, 3);
  KvCache a(pool, 1000, 0), b(pool, 1000, 0);
  a.reserve(130);  // 3 pages
  EXPECT_EQ(pool->n_free(), 0);
  EXPECT_EQ(b.pages_needed(1), 1);
  try {
    b.reserve(1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::out_of_range);
    EXPECT_NE(std::string(e.what()).find("KV pool full"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.n_pages(), 0);
  a.clear();
  EXPECT_EQ(pool->n_free(), 3);
  b.reserve(1);
  EXPECT_EQ(pool->n_used(), 1);
}

TEST(KvPool, SlidingWindowGivesPagesBack) {
  auto pool = std::make_shared<KvPool>(1, 4, 4, 0);
  KvCache kv(pool, 100000, 100);
  for (int64_t n = 0; n < 5000; n += 50) {
    kv.reserve(50);
    kv.set_n_past(n + 50);
    // The next position reads from n_past - 99: at most 100 + 63 positions
    // of pages before it, plus its own page.
    ASSERT_LE(kv.n_pages(), 4) << n;
  }
  EXPECT_EQ(kv.n_past(), 5000);
  EXPECT_NO_THROW(kv.truncate(4990));  // its window is still held
  EXPECT_THROW(kv.truncate(1000), Error);  // long given back
  EXPECT_LE(pool->n_allocated(), 5);  // pages reused, not piled up
}

}  // namespace
}  // namespace synapse::model

// The prefix cache's radix tree (src/runtime/prefix_tree.hpp): nodes own
// runs of whole pages, hold them in the pool by reference (no page taken),
// split where a prompt parts from a cached one, and give back the least
// recently used unheld leaf.
#include "runtime/prefix_tree.hpp"

#include <gtest/gtest.h>

#include "golden_util.hpp"

namespace synapse {
namespace {

using runtime::PrefixTree;

std::vector<token_id> tokens_from(int first, size_t n) {
  std::vector<token_id> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<token_id>(1 + (first + static_cast<int>(i) * 7) % 500);
  return t;
}

TEST(PrefixTree, SharesWholePagesSplitsAndEvictsTheLeastRecentlyUsedLeaf) {
  const Model m = Model::load(test::data_path("models/stories260K.gguf"));
  Context ctx(m, 1);
  ctx.share_kv(1024);
  ASSERT_EQ(ctx.kv_pool().page_size, 64);
  const std::vector<token_id> a = tokens_from(0, 200);  // 3 whole pages and a part
  std::vector<token_id> b(a.begin(), a.begin() + 150);  // parts from a in its third page
  b.push_back(501);
  for (token_id t : tokens_from(3, 100)) b.push_back(t);  // 251 tokens: 3 whole pages

  PrefixTree tree(64);
  Sequence sa = ctx.new_sequence(1024);
  ctx.decode(sa, a);
  EXPECT_EQ(ctx.kv_pool().n_used, 4);
  PrefixTree::Node* na = tree.insert(a, sa, 1);
  ASSERT_NE(na, nullptr);
  EXPECT_EQ(na->end, 192);
  EXPECT_EQ(tree.n_pages(), 3);
  EXPECT_EQ(ctx.kv_pool().n_used, 4);  // referenced, not copied
  sa.clear();
  EXPECT_EQ(ctx.kv_pool().n_used, 3);  // the tree holds a's whole pages alone
  EXPECT_EQ(tree.match(std::span(a).first(63), 2).n, 0);  // less than a page: nothing

  // b shares a's first two pages: the node splits there.
  const PrefixTree::Match mb = tree.match(b, 3);
  ASSERT_NE(mb.node, nullptr);
  EXPECT_EQ(mb.n, 128);
  EXPECT_EQ(tree.n_nodes(), 2);
  EXPECT_EQ(tree.n_pages(), 3);
  Sequence sb = mb.node->seq->fork(mb.n);
  EXPECT_EQ(ctx.kv_pool().n_used, 3);
  ctx.decode(sb, std::span(b).subspan(128));
  EXPECT_EQ(ctx.kv_pool().n_used, 5);  // b's pages 2 and 3
  PrefixTree::Node* nb = tree.insert(b, sb, 4);
  ASSERT_NE(nb, nullptr);
  EXPECT_EQ(nb->end, 192);
  EXPECT_EQ(nb->parent, mb.node);
  EXPECT_EQ(tree.n_nodes(), 3);
  EXPECT_EQ(tree.n_pages(), 4);
  EXPECT_EQ(tree.insert(b, sb, 5), nb);  // already there: nothing new
  EXPECT_EQ(tree.n_pages(), 4);

  // b's leaf is held (a running request reads it): a's leaf goes, then nothing.
  PrefixTree::lock(nb);
  EXPECT_TRUE(tree.evict_one());
  EXPECT_EQ(tree.n_pages(), 3);
  EXPECT_EQ(ctx.kv_pool().n_used, 4);  // a's third page back
  EXPECT_EQ(tree.match(a, 6).n, 128);
  EXPECT_FALSE(tree.evict_one());
  PrefixTree::unlock(nb);
  EXPECT_TRUE(tree.evict_one());  // b's leaf (sb still holds its pages)
  EXPECT_TRUE(tree.evict_one());  // the shared two pages
  EXPECT_FALSE(tree.evict_one());
  EXPECT_EQ(tree.n_pages(), 0);
  EXPECT_EQ(ctx.kv_pool().n_used, 4);  // sb's alone
  sb.clear();
  EXPECT_EQ(ctx.kv_pool().n_used, 0);
}

}  // namespace
}  // namespace synapse

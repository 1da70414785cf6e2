// Sequence snapshots (issue 50 item 4): a hybrid model's recurrent state
// (tiny-qwen35, F32 and Q8_0) and a sliding window's pages (tiny-mistral-swa,
// window 32) are kept at requested positions and every 256 positions, so
// truncate, fork and keep_common_prefix go back to them; decoding on from a
// snapshot gives the logits of a cold sequence fed the same tokens, bit for
// bit (contract G1).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "golden_util.hpp"
#include "synapse/synapse.hpp"

namespace synapse {
namespace {

using test::data_path;

std::vector<token_id> some_ids(size_t n, size_t salt = 0) {
  std::vector<token_id> ids{1};
  for (size_t i = 1; i < n; ++i) ids.push_back(static_cast<token_id>(3 + (i * 37 + salt * 11) % 500));
  return ids;
}

std::vector<token_id> slice(const std::vector<token_id>& v, size_t a, size_t b) {
  return {v.begin() + static_cast<std::ptrdiff_t>(a), v.begin() + static_cast<std::ptrdiff_t>(b)};
}

// The last row's logits of `tokens` decoded from position 0 in a fresh sequence.
std::vector<float> cold(Context& ctx, const std::vector<token_id>& tokens) {
  Sequence s = ctx.new_sequence(2048);
  const std::span<const float> l = ctx.decode(s, tokens);
  return {l.begin(), l.end()};
}

void expect_bits(std::span<const float> got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float))) << what;
}

class HybridSnapshots : public ::testing::TestWithParam<const char*> {};

TEST_P(HybridSnapshots, TruncateForkAndKeepGoBackToSnapshotsBitExact) {
  const Model model = Model::load(data_path(std::string("models/") + GetParam()));
  ASSERT_TRUE(model.has_recurrent_layers());
  Context ctx(model, 2);
  const std::vector<token_id> ids = some_ids(300);
  // 4 DeltaNet layers x (3 x 256 conv inputs + 4 heads x 32 x 32) floats.
  const size_t state_bytes = size_t{4} * (3 * 256 + 4 * 32 * 32) * sizeof(float);

  Sequence seq = ctx.new_sequence(2048);
  seq.request_snapshot(99);
  ctx.decode(seq, slice(ids, 0, 300));  // cut at 99 (requested) and 256 (periodic)
  EXPECT_EQ(seq.snapshot_positions(), (std::vector<int64_t>{99, 256}));
  EXPECT_EQ(seq.snapshot_bytes(), 2 * state_bytes);
  EXPECT_EQ(seq.rewind_point(300), 300);
  EXPECT_EQ(seq.rewind_point(255), 99);
  EXPECT_EQ(seq.rewind_point(256), 256);
  EXPECT_EQ(seq.rewind_point(98), 0);
  EXPECT_THROW(seq.truncate(150), Error);  // no snapshot there: refused, nothing changed
  EXPECT_EQ(seq.n_past(), 300);

  // A fork at a snapshot carries it (and the earlier one), and decodes on as cold.
  Sequence f = seq.fork(256);
  EXPECT_EQ(f.n_past(), 256);
  EXPECT_EQ(f.snapshot_positions(), (std::vector<int64_t>{99, 256}));
  const std::vector<token_id> other = some_ids(40, 7);
  std::vector<token_id> want_tokens = slice(ids, 0, 256);
  want_tokens.insert(want_tokens.end(), other.begin() + 1, other.end());
  expect_bits(ctx.decode(f, slice(other, 1, other.size())), cold(ctx, want_tokens), "fork(256) then 39 tokens");

  // truncate to the earlier snapshot forgets the later one; decoding on one
  // token at a time gives the cold chunked prefill's bits.
  seq.truncate(99);
  EXPECT_EQ(seq.n_past(), 99);
  EXPECT_EQ(seq.snapshot_positions(), (std::vector<int64_t>{99}));
  EXPECT_EQ(seq.tokens().size(), 99u);
  std::span<const float> last;
  for (size_t i = 99; i < 130; ++i) last = ctx.decode(seq, std::vector<token_id>{ids[i]});
  expect_bits(last, cold(ctx, slice(ids, 0, 130)), "truncate(99) then 31 single tokens");
  // The fork still holds its own state: unaffected by the original's truncate.
  const std::vector<token_id> one{77};
  want_tokens.push_back(77);
  expect_bits(ctx.decode(f, one), cold(ctx, want_tokens), "fork after the original's truncate");

  // The oldest periodic snapshot goes first, then the oldest: 4 kept.
  Sequence longer = ctx.new_sequence(2048);
  longer.request_snapshot(99);
  const std::vector<token_id> many = some_ids(1300, 3);
  ctx.decode(longer, many);
  EXPECT_EQ(longer.snapshot_positions(), (std::vector<int64_t>{99, 768, 1024, 1280}));
  EXPECT_EQ(longer.snapshot_bytes(), 4 * state_bytes);
  longer.truncate(768);
  expect_bits(ctx.decode(longer, slice(many, 768, 800)), cold(ctx, slice(many, 0, 800)), "truncate(768)");
  EXPECT_TRUE(longer.drop_snapshots());
  EXPECT_EQ(longer.snapshot_bytes(), 0u);
  EXPECT_EQ(longer.rewind_point(500), 0);
}

// A chat as the Python binding runs it: keep_common_prefix before each turn,
// the reply decoded token by token, the next prompt re-rendering the reply
// differently (so only the end of the previous prompt is shared).
TEST_P(HybridSnapshots, KeepCommonPrefixReusesTheEndOfTheLastPrompt) {
  const Model model = Model::load(data_path(std::string("models/") + GetParam()));
  Context ctx(model, 2);
  Sequence seq = ctx.new_sequence(2048);
  std::vector<token_id> prompt = some_ids(40), last;
  int64_t want_kept = 0;
  for (int turn = 0; turn < 3; ++turn) {
    SCOPED_TRACE(turn);
    EXPECT_EQ(seq.keep_common_prefix(prompt), want_kept);
    const std::span<const float> first = ctx.decode(seq, slice(prompt, static_cast<size_t>(want_kept), prompt.size()));
    expect_bits(first, cold(ctx, prompt), "the turn's first logits");
    EXPECT_EQ(seq.snapshot_positions().back(), static_cast<int64_t>(prompt.size() - 1));
    for (token_id t : some_ids(12, 5 + static_cast<size_t>(turn))) ctx.decode(seq, std::vector<token_id>{t});
    // The next prompt: this one, a reply unlike the generated one, a new turn.
    last = prompt;
    want_kept = static_cast<int64_t>(prompt.size() - 1);
    const std::vector<token_id> more = some_ids(30, 20 + static_cast<size_t>(turn));
    prompt.insert(prompt.end(), more.begin() + 1, more.end());
  }
  // The last prompt again (a regenerate): its end-of-prompt snapshot.
  EXPECT_EQ(seq.keep_common_prefix(last), static_cast<int64_t>(last.size() - 1));
  expect_bits(ctx.decode(seq, slice(last, last.size() - 1, last.size())), cold(ctx, last), "regenerate");
  EXPECT_EQ(seq.snapshot_positions(), (std::vector<int64_t>{39, 68, 97}));
}

INSTANTIATE_TEST_SUITE_P(Qwen35, HybridSnapshots, ::testing::Values("tiny-qwen35-f32.gguf", "tiny-qwen35-q8_0.gguf"));

// Sliding window of 32: a snapshot keeps the pages the window of its
// position reads, which the window would otherwise give back.
TEST(SlidingWindowSnapshots, KeepTheWindowsPagesAndGoBackBitExact) {
  const Model model = Model::load(data_path("models/tiny-mistral-swa-f32.gguf"));
  ASSERT_FALSE(model.has_recurrent_layers());
  Context ctx(model, 2);
  const std::vector<token_id> ids = some_ids(300);
  Sequence plain = ctx.new_sequence(512);
  ASSERT_EQ(plain.capacity(), 32);
  ctx.decode(plain, slice(ids, 0, 200));
  // Positions 136 and on are read from now on: pages 2 and 3 (128..255).
  EXPECT_EQ(plain.kv_pages(), 2);
  EXPECT_EQ(plain.rewind_point(99), 0);  // page 1 (64..127) is gone
  EXPECT_THROW(plain.truncate(99), Error);

  Sequence seq = ctx.new_sequence(512);
  seq.request_snapshot(99);
  ctx.decode(seq, slice(ids, 0, 200));
  EXPECT_EQ(seq.snapshot_positions(), (std::vector<int64_t>{99}));
  EXPECT_EQ(seq.snapshot_bytes(), 0u);  // no recurrent state: pages only
  EXPECT_EQ(seq.kv_pages(), 3);         // page 1 kept for position 99's window (68..98)
  EXPECT_EQ(seq.rewind_point(150), 150);  // pages still held: any position whose window they hold
  EXPECT_EQ(seq.rewind_point(98), 98);    // reads 67..97, page 1
  EXPECT_EQ(seq.rewind_point(90), 0);     // reads 59..89: page 0 is gone, no snapshot before
  EXPECT_THROW(seq.truncate(80), Error);  // reads 49..79: page 0 is gone

  Sequence f = seq.fork(99);
  EXPECT_EQ(f.snapshot_positions(), (std::vector<int64_t>{99}));
  expect_bits(ctx.decode(f, slice(ids, 99, 180)), cold(ctx, slice(ids, 0, 180)), "fork(99)");
  seq.truncate(99);
  expect_bits(ctx.decode(seq, slice(ids, 99, 140)), cold(ctx, slice(ids, 0, 140)), "truncate(99)");
  // Past 99 + 32 + a page the snapshot alone keeps page 1; dropped, it goes back.
  ctx.decode(seq, slice(ids, 140, 260));
  EXPECT_EQ(seq.snapshot_positions(), (std::vector<int64_t>{99, 256}));
  const int64_t held = seq.kv_pages();
  EXPECT_TRUE(seq.drop_snapshots());
  EXPECT_EQ(seq.kv_pages(), held - 1);
  EXPECT_FALSE(seq.drop_snapshots());
}

// A model whose cache can be cut anywhere keeps no snapshot and needs none.
TEST(SlidingWindowSnapshots, DenseModelsKeepNone) {
  const Model model = Model::load(data_path("models/stories260K.gguf"));
  Context ctx(model, 1);
  Sequence seq = ctx.new_sequence(512);
  seq.request_snapshot(10);
  ctx.decode(seq, some_ids(300));
  EXPECT_TRUE(seq.snapshot_positions().empty());
  EXPECT_EQ(seq.rewind_point(123), 123);
  EXPECT_FALSE(seq.drop_snapshots());
}

}  // namespace
}  // namespace synapse

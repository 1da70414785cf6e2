// model::RecurrentState and the sequence rules it brings to a hybrid model's
// KV cache (Qwen3.5's DeltaNet layers): the state starts zeroed, each
// recurrent layer has its own, clear() resets it (the same prompt then gives
// the same bits again), a fork of the whole sequence continues exactly as the
// original, and a truncate or fork to any other length than n_past or 0 is
// refused with a clear error, the cache unchanged.
#include <gtest/gtest.h>

#include <cstring>

#include "golden_util.hpp"
#include "model/forward.hpp"
#include "model/recurrent_state.hpp"

namespace synapse::model {
namespace {

using test::data_path;

TEST(RecurrentState, SlotsPerRecurrentLayerStartZeroAndClear) {
  const std::vector<uint8_t> layers = {1, 0, 1};
  RecurrentState st(layers, 6, 10);
  EXPECT_FALSE(st.empty());
  EXPECT_EQ(st.bytes(), size_t{2} * (6 + 10) * sizeof(float));
  for (int64_t il : {0, 2}) {
    for (int i = 0; i < 6; ++i) EXPECT_EQ(st.conv(il)[i], 0.0f);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(st.ssm(il)[i], 0.0f);
  }
  EXPECT_NE(st.conv(0), st.conv(2));
  EXPECT_EQ(st.conv(2) - st.conv(0), 6);  // one layer's state after the other, no overlap
  EXPECT_EQ(st.ssm(2) - st.ssm(0), 10);
  st.conv(2)[5] = 1.5f;
  st.ssm(0)[9] = -2.0f;
  st.clear();
  EXPECT_EQ(st.conv(2)[5], 0.0f);
  EXPECT_EQ(st.ssm(0)[9], 0.0f);

  EXPECT_NO_THROW(st.check_keep("truncate", 7, 7));
  EXPECT_NO_THROW(st.check_keep("truncate", 0, 7));
  try {
    st.check_keep("truncate", 3, 7);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("truncate: cannot keep 3 of 7 positions"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("recurrent"), std::string::npos) << e.what();
  }
  const RecurrentState none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.bytes(), 0u);
  EXPECT_NO_THROW(none.check_keep("fork", 3, 7));  // a model without recurrent layers keeps any prefix
}

std::vector<token_id> some_ids(size_t n) {
  std::vector<token_id> ids{1};
  for (size_t i = 1; i < n; ++i) ids.push_back(static_cast<token_id>(3 + (i * 37) % 500));
  return ids;
}

TEST(RecurrentState, HybridSequenceRules) {
  auto m = load_model(data_path("models/tiny-qwen35-f32.gguf"));
  base::ThreadPool pool(2);
  const std::vector<token_id> ids = some_ids(20);
  const token_id next[1] = {42};
  KvCache kv = make_kv_cache(*m, 64);
  EXPECT_EQ(kv.recurrent().bytes(), recurrent_state_bytes(m->hp));
  // 4 DeltaNet layers x (3 x 256 conv inputs + 4 heads x 32 x 32) floats.
  EXPECT_EQ(kv.recurrent().bytes(), size_t{4} * (3 * 256 + 4 * 32 * 32) * sizeof(float));
  // K/V rows for the 2 attention layers only: the pool's pages hold 2 layers,
  // and the 20 positions take one page of 64 positions x (128 K + 128 V) F16
  // values per layer.
  EXPECT_EQ(m->hp.n_layer_kv(), 2);
  EXPECT_EQ(m->hp.kv_layer(5), 1);
  EXPECT_EQ(kv.pool().n_layer(), 2);
  EXPECT_EQ(kv.bytes(), 0u);  // no page before the first row
  std::vector<float> first, again, a, b;
  forward(*m, kv, ids, false, first, pool);
  EXPECT_EQ(kv.bytes(), size_t{2} * 64 * (128 + 128) * 2);
  EXPECT_NE(kv.recurrent().ssm(0)[0], 0.0f);

  // Cut back: refused, nothing changed (the next step equals a fork's).
  EXPECT_THROW(kv.truncate(10), Error);
  EXPECT_THROW((void)kv.fork(19), Error);
  EXPECT_EQ(kv.n_past(), 20);
  EXPECT_NO_THROW(kv.truncate(20));
  KvCache copy = kv.fork(20);
  forward(*m, kv, next, false, a, pool);
  forward(*m, copy, next, false, b, pool);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));

  // Back to 0 (clear, truncate(0), fork(0)): the state is zeroed, and the
  // prompt gives its first logits again, bit for bit.
  for (int how = 0; how < 3; ++how) {
    SCOPED_TRACE(how);
    KvCache fresh = make_kv_cache(*m, 64);
    forward(*m, fresh, ids, false, again, pool);  // some state to forget
    KvCache reset = how == 2 ? fresh.fork(0) : std::move(fresh);
    if (how == 0) reset.clear();
    if (how == 1) reset.truncate(0);
    EXPECT_EQ(reset.n_past(), 0);
    EXPECT_EQ(reset.recurrent().conv(0)[0], 0.0f);
    EXPECT_EQ(reset.recurrent().ssm(4)[5], 0.0f);
    forward(*m, reset, ids, false, again, pool);
    ASSERT_EQ(again.size(), first.size());
    EXPECT_EQ(0, std::memcmp(again.data(), first.data(), first.size() * sizeof(float)));
  }

  // A cache made without the model's recurrent state: the batch is refused
  // before anything runs.
  KvCache bare(m->hp.n_layer_kv(), m->hp.n_embd_k_gqa(), m->hp.n_embd_v_gqa(), 64, 0);
  try {
    forward(*m, bare, ids, false, a, pool);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("recurrent state"), std::string::npos) << e.what();
  }
  EXPECT_EQ(bare.n_past(), 0);
}

}  // namespace
}  // namespace synapse::model

// Loading refuses what synapse cannot run, naming the tensor or key: a weight
// type without kernels (Q8_K, ggml's activation type), a missing tensor, a Mixtral file with
// neither expert layout, a misshapen tensor, an unknown architecture, a
// Qwen3 file without its q/k norms, a LongRoPE file with one factor set, a
// Qwen3-MoE file without experts or its router, a gpt-oss file without its
// window, biases or sinks, a Gemma 3 file without its norms. Plus the hyperparameters the
// newer architectures derive from their keys.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include "golden_util.hpp"
#include "model/model.hpp"

namespace synapse {
namespace {

using test::data_path;

// Copies `src` through gguf::Writer, letting `edit` change each tensor (return
// false to drop it) and each metadata value.
gguf::File rewrite(const std::string& src,
                   const std::function<bool(const gguf::TensorInfo&, GgmlType&, std::vector<int64_t>&)>& edit,
                   const std::function<void(gguf::Writer&, const gguf::KeyValue&)>& edit_kv = {}) {
  const gguf::File f = gguf::File::open(src);
  gguf::Writer w(f.alignment());
  for (const auto& kv : f.metadata()) {
    if (edit_kv) edit_kv(w, kv);
    else w.set_value(kv.key, kv.value);
  }
  for (const auto& t : f.tensors()) {
    GgmlType type = t.type;
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (!edit(t, type, ne)) continue;
    if (type == t.type && ne == std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)) {
      w.add_tensor(t.name, type, ne, std::span<const uint8_t>(t.data, t.n_bytes));
    } else {
      int64_t rows = 1;
      for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
      std::vector<uint8_t> zeros(row_size(type, ne[0]) * static_cast<size_t>(rows), 0);
      w.add_tensor(t.name, type, ne, zeros);
    }
  }
  const std::vector<uint8_t> bytes = w.bytes();
  return gguf::File::from_bytes(bytes, "edited.gguf");
}

// rewrite()'s edits: every tensor kept; all but tensor `name`; every key but
// `key`; every key, and (key, value) added after `anchor`.
bool keep_tensor(const gguf::TensorInfo&, GgmlType&, std::vector<int64_t>&) { return true; }
auto drop_tensor(const char* name) {
  return [name](const gguf::TensorInfo& t, GgmlType&, std::vector<int64_t>&) { return t.name != name; };
}
auto drop_key(const char* key) {
  return [key](gguf::Writer& w, const gguf::KeyValue& kv) {
    if (kv.key != key) w.set_value(kv.key, kv.value);
  };
}
auto add_key_after(const char* anchor, const char* key, gguf::Value value) {
  return [anchor, key, value](gguf::Writer& w, const gguf::KeyValue& kv) {
    w.set_value(kv.key, kv.value);
    if (kv.key == anchor) w.set_value(key, value);
  };
}

void expect_load_error(gguf::File f, Errc code, std::initializer_list<const char*> needles) {
  try {
    model::load_model(std::move(f));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const char* n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(LoadErrors, UnsupportedTensorTypeNamesTensorAndType) {
  auto f = rewrite(data_path("models/tiny-llama-f32.gguf"), [](const gguf::TensorInfo& t, GgmlType& type, auto&) {
    if (t.name == "blk.1.attn_q.weight") type = GgmlType::Q8_K;
    return true;
  });
  expect_load_error(std::move(f), Errc::unsupported, {"blk.1.attn_q.weight", "Q8_K"});
}

// A required tensor dropped: a plain FFN matrix, a Qwen3 k norm, one of
// Phi-3 LongRoPE's two factor sets (both are needed: n_ctx picks one).
TEST(LoadErrors, MissingTensor) {
  const std::pair<const char*, std::string> cases[] = {{"tiny-llama-f32.gguf", "blk.0.ffn_up.weight"},
                                                       {"tiny-qwen3-f32.gguf", "blk.1.attn_k_norm.weight"},
                                                       {"tiny-phi3-longrope-f32.gguf", "rope_factors_short.weight"}};
  for (const auto& [file, tensor] : cases) {
    SCOPED_TRACE(file);
    auto f = rewrite(data_path(std::string("models/") + file),
                     [&](const gguf::TensorInfo& t, auto&, auto&) { return t.name != tensor; });
    expect_load_error(std::move(f), Errc::format, {tensor.c_str(), "missing"});
  }
}

TEST(LoadErrors, MixtralWithNeitherExpertLayout) {
  auto f = rewrite(data_path("models/tiny-mixtral-f32.gguf"),
                   [](const gguf::TensorInfo& t, auto&, auto&) { return t.name != "blk.0.ffn_gate_exps.weight"; });
  expect_load_error(std::move(f), Errc::format, {"blk.0.ffn_gate_exps.weight"});
}

TEST(LoadErrors, MisshapenTensor) {
  auto f = rewrite(data_path("models/tiny-llama-f32.gguf"), [](const gguf::TensorInfo& t, auto&, auto& ne) {
    if (t.name == "blk.0.attn_k.weight") ne[1] = 64;  // [256, 128] expected
    return true;
  });
  expect_load_error(std::move(f), Errc::format, {"blk.0.attn_k.weight", "[256, 64]", "expected [256, 128]"});
}

// token_embd.weight and output.weight with 300 rows for a 512-token
// vocabulary: refused at load naming the file and both numbers (it used to
// load and fail at the first token id >= 300).
TEST(LoadErrors, VocabularyLargerThanTheEmbeddingRows) {
  auto f = rewrite(data_path("models/stories260K.gguf"), [](const gguf::TensorInfo& t, auto&, auto& ne) {
    if (t.name == "token_embd.weight" || t.name == "output.weight") ne[1] = 300;
    return true;
  });
  expect_load_error(std::move(f), Errc::format,
                    {"edited.gguf", "vocabulary has 512 tokens", "token_embd.weight has 300 rows"});
}

TEST(LoadErrors, UnknownArchitectureListsSupported) {
  auto f = rewrite(
      data_path("models/stories260K.gguf"), [](auto&, auto&, auto&) { return true; },
      [](gguf::Writer& w, const gguf::KeyValue& kv) {
        if (kv.key == "general.architecture") w.set_string(kv.key, "gemma");
        else w.set_value(kv.key, kv.value);
      });
  expect_load_error(std::move(f), Errc::unsupported,
                    {"'gemma'", "supported: llama, mistral, qwen2, qwen3, qwen3moe, mistral3, phi3, gpt-oss, gemma3, qwen35, qwen35moe"});
}

// What the newer architectures read (values: tests/data/models/MANIFEST.md).
TEST(Hparams, Qwen3Mistral3AndLongRope) {
  auto qwen3 = model::load_model(data_path("models/tiny-qwen3-f32.gguf"));
  EXPECT_EQ(qwen3->hp.arch, model::Arch::qwen3);
  EXPECT_TRUE(qwen3->hp.qk_norm);
  EXPECT_EQ(qwen3->hp.rope_type, model::RopeType::neox);
  EXPECT_EQ(qwen3->hp.n_embd_head_k, 128);  // key_length, not n_embd / n_head = 64
  EXPECT_EQ(qwen3->layers[0].attn_q_norm.size(), 128u);

  auto m3 = model::load_model(data_path("models/tiny-mistral3-f32.gguf"));
  const model::HParams& hp = m3->hp;
  EXPECT_EQ(hp.arch, model::Arch::mistral3);
  EXPECT_FALSE(hp.qk_norm);
  EXPECT_EQ(hp.rope_type, model::RopeType::normal);
  EXPECT_EQ(hp.n_embd_head_k, 64);
  EXPECT_FLOAT_EQ(hp.rope_freq_scale, 0.25f);
  EXPECT_EQ(hp.yarn_ext_factor, 1.0f);
  // yarn_log_multiplier 1: RoPE's attn_factor cancels ggml's 1 + 0.1 ln 4.
  EXPECT_FLOAT_EQ(hp.yarn_attn_factor * (1.0f + 0.1f * std::log(4.0f)), 1.0f);
  EXPECT_FLOAT_EQ(hp.attn_temp_scale, 0.1f);
  EXPECT_EQ(hp.n_attn_temp_floor_scale, 32);
  // 1 + 0.1 ln(floor(p / 32) + 1): the README's 1, 1.0693, 1.1099, 1.1386.
  EXPECT_EQ(model::attn_temperature(hp, 0), 1.0f);
  EXPECT_EQ(model::attn_temperature(hp, 31), 1.0f);
  EXPECT_FLOAT_EQ(model::attn_temperature(hp, 32), 1.0f + 0.1f * std::log(2.0f));
  EXPECT_FLOAT_EQ(model::attn_temperature(hp, 95), 1.0f + 0.1f * std::log(3.0f));
  EXPECT_FLOAT_EQ(model::attn_temperature(hp, 96), 1.0f + 0.1f * std::log(4.0f));
  EXPECT_EQ(model::attn_temperature(qwen3->hp, 1000), 1.0f);  // no temperature elsewhere

  auto phi = model::load_model(data_path("models/tiny-phi3-longrope-f32.gguf"));
  EXPECT_EQ(phi->hp.n_ctx_orig_yarn, 256);
  EXPECT_FLOAT_EQ(phi->hp.yarn_attn_factor, 1.1180340f);
  EXPECT_EQ(phi->hp.yarn_ext_factor, 0.0f);
  ASSERT_EQ(phi->rope_factors_short.size(), 32u);
  // n_ctx_seq = n_ctx rounded up to 256; long factors when it passes 256.
  EXPECT_EQ(phi->rope_factors(1), phi->rope_factors_short.data());
  EXPECT_EQ(phi->rope_factors(256), phi->rope_factors_short.data());
  EXPECT_EQ(phi->rope_factors(257), phi->rope_factors_long.data());
  EXPECT_EQ(phi->rope_factors(1024), phi->rope_factors_long.data());
  EXPECT_EQ(qwen3->rope_factors(100000), nullptr);
}

// Qwen3-MoE (llama.cpp v0.5.0 src/models/qwen3moe.cpp): an expert's width is
// expert_feed_forward_length (256 here), not feed_forward_length (768, the
// dense width); without the key, feed_forward_length / expert_used_count.
TEST(Hparams, Qwen3Moe) {
  auto m = model::load_model(data_path("models/tiny-qwen3moe-f32.gguf"));
  const model::HParams& hp = m->hp;
  EXPECT_EQ(hp.arch, model::Arch::qwen3moe);
  EXPECT_TRUE(hp.qk_norm);
  EXPECT_EQ(hp.rope_type, model::RopeType::neox);
  EXPECT_EQ(hp.n_embd_head_k, 128);
  EXPECT_EQ(hp.n_ff, 256);
  EXPECT_EQ(hp.n_expert, 8);
  EXPECT_EQ(hp.n_expert_used, 4);
  ASSERT_EQ(m->layers[1].down_exps.size(), 8u);
  EXPECT_EQ(m->layers[1].down_exps[7].n_in, 256);
  EXPECT_EQ(m->layers[1].attn_k_norm.size(), 128u);
  EXPECT_NE(m->output.data, m->tok_embd.data);  // untied, as Qwen3-30B-A3B

  // Without expert_feed_forward_length: 768 / 4 = 192 wide experts, which the
  // 256-wide tensors do not have.
  expect_load_error(rewrite(data_path("models/tiny-qwen3moe-f32.gguf"), keep_tensor,
                            drop_key("qwen3moe.expert_feed_forward_length")),
                    Errc::format, {"blk.0.ffn_gate_exps.weight", "expected [256, 192, 8]"});
  expect_load_error(
      rewrite(data_path("models/tiny-qwen3moe-f32.gguf"), keep_tensor, drop_key("qwen3moe.expert_count")), Errc::format,
      {"qwen3moe.expert_count", "needs experts"});
  expect_load_error(rewrite(data_path("models/tiny-qwen3moe-f32.gguf"), drop_tensor("blk.1.ffn_gate_inp.weight")),
                    Errc::format, {"blk.1.ffn_gate_inp.weight", "missing"});
}

// gpt-oss (llama.cpp v0.5.0 src/models/openai-moe.cpp): sliding_window and
// expert_feed_forward_length are required, the window slides on the even
// layers (sliding_window_pattern 2 by default, or the key: an integer or a
// bool per layer), and every bias, the sinks, post_attention_norm and the
// output are required tensors.
TEST(Hparams, GptOss) {
  const std::string path = data_path("models/tiny-gpt-oss-f32.gguf");
  auto m = model::load_model(path);
  const model::HParams& hp = m->hp;
  EXPECT_EQ(hp.arch, model::Arch::gpt_oss);
  EXPECT_EQ(hp.arch_name, "gpt-oss");
  EXPECT_EQ(hp.rope_type, model::RopeType::neox);
  EXPECT_EQ(hp.n_embd_head_k, 64);
  EXPECT_EQ(hp.n_ff, 128);
  EXPECT_EQ(hp.n_expert, 8);
  EXPECT_EQ(hp.n_expert_used, 4);
  EXPECT_EQ(hp.n_swa, 48);
  EXPECT_TRUE(hp.is_swa(0));
  EXPECT_FALSE(hp.is_swa(1));
  EXPECT_EQ(hp.kv_window(), 0);  // layer 1 needs every position
  EXPECT_TRUE(hp.attn_sinks);
  EXPECT_TRUE(hp.swiglu_oai);
  EXPECT_EQ(hp.expert_gating, model::ExpertGating::softmax_weight);
  EXPECT_EQ(hp.yarn_ext_factor, 1.0f);
  EXPECT_EQ(hp.rope_freq_scale, 1.0f / 32.0f);
  EXPECT_EQ(hp.n_ctx_orig_yarn, 4096);
  const model::Layer& L = m->layers[1];
  EXPECT_EQ(L.attn_sinks.size(), 4u);
  EXPECT_EQ(L.bq.size(), 256u);
  EXPECT_EQ(L.bo.size(), 128u);
  EXPECT_EQ(L.ffn_gate_inp_b.size(), 8u);
  EXPECT_EQ(L.gate_exps_b.size(), 8u * 128u);
  EXPECT_EQ(L.down_exps_b.size(), 8u * 128u);
  EXPECT_NE(m->output.data, m->tok_embd.data);

  expect_load_error(rewrite(path, keep_tensor, drop_key("gpt-oss.attention.sliding_window")), Errc::format,
                    {"gpt-oss.attention.sliding_window", "missing"});
  expect_load_error(rewrite(path, keep_tensor, drop_key("gpt-oss.expert_feed_forward_length")), Errc::format,
                    {"gpt-oss.expert_feed_forward_length", "missing"});
  expect_load_error(rewrite(path, keep_tensor, drop_key("gpt-oss.expert_count")), Errc::format,
                    {"gpt-oss.expert_count", "needs experts"});
  for (const char* t : {"blk.1.attn_sinks.weight", "blk.0.post_attention_norm.weight", "blk.0.attn_output.bias",
                        "blk.1.ffn_gate_inp.bias", "blk.0.ffn_gate_exps.bias", "blk.1.ffn_up_exps.bias",
                        "blk.1.ffn_down_exps.bias", "output.weight"})
    expect_load_error(rewrite(path, drop_tensor(t)), Errc::format, {t, "missing"});
  // A bias of the wrong shape is named with both shapes.
  expect_load_error(rewrite(path,
                            [](const gguf::TensorInfo& t, auto&, auto& ne) {
                              if (t.name == "blk.0.ffn_down_exps.bias") ne = {128, 4};
                              return true;
                            }),
                    Errc::format, {"blk.0.ffn_down_exps.bias", "expected [128, 8]"});

  // sliding_window_pattern as an integer (3: layers 0 and 1 slide) or as a
  // bool per layer; a sliding-window base of its own is refused by name.
  const auto with = [&](const char* key, gguf::Value v) {
    return rewrite(path, keep_tensor, add_key_after("gpt-oss.attention.sliding_window", key, v));
  };
  gguf::Value three;
  three.type = gguf::ValueType::UINT32;
  three.u = 3;
  auto m3 = model::load_model(with("gpt-oss.attention.sliding_window_pattern", three));
  EXPECT_TRUE(m3->hp.is_swa(0));
  EXPECT_TRUE(m3->hp.is_swa(1));
  EXPECT_EQ(m3->hp.kv_window(), 48);
  gguf::Value flags;
  flags.type = gguf::ValueType::ARRAY;
  flags.elem_type = gguf::ValueType::BOOL;
  flags.items.resize(2);
  flags.items[0].type = flags.items[1].type = gguf::ValueType::BOOL;
  flags.items[1].b = true;
  auto mf = model::load_model(with("gpt-oss.attention.sliding_window_pattern", flags));
  EXPECT_FALSE(mf->hp.is_swa(0));
  EXPECT_TRUE(mf->hp.is_swa(1));
  flags.items.resize(3, flags.items[0]);
  expect_load_error(with("gpt-oss.attention.sliding_window_pattern", flags), Errc::format,
                    {"gpt-oss.attention.sliding_window_pattern", "one bool per layer (2)"});
  gguf::Value base;
  base.type = gguf::ValueType::FLOAT32;
  base.f = 10000.0;
  expect_load_error(with("gpt-oss.rope.freq_base_swa", base), Errc::unsupported, {"gpt-oss.rope.freq_base_swa"});
}

// gemma3 (llama.cpp v0.5.0 src/models/gemma3.cpp): with a window, five
// sliding layers (RoPE base rope.freq_base_swa, default 10000, unscaled) to
// one global (rope.freq_base and the file's linear scaling) unless
// sliding_window_pattern says otherwise; without one every layer is global.
// layer_norm_rms_epsilon is required, and each layer's q/k norms and
// post-attention and post-FFN norms; the output is tied when absent.
TEST(Hparams, Gemma3) {
  const std::string path = data_path("models/tiny-gemma3-f32.gguf");
  auto m = model::load_model(path);
  const model::HParams& hp = m->hp;
  EXPECT_EQ(hp.arch, model::Arch::gemma3);
  EXPECT_EQ(hp.arch_name, "gemma3");
  EXPECT_EQ(hp.rope_type, model::RopeType::neox);
  EXPECT_EQ(hp.n_layer, 6);
  EXPECT_EQ(hp.n_embd_head_k, 64);
  EXPECT_EQ(hp.n_ff, 256);
  EXPECT_EQ(hp.n_swa, 48);
  for (int il = 0; il < 5; ++il) EXPECT_TRUE(hp.is_swa(il)) << il;
  EXPECT_FALSE(hp.is_swa(5));
  EXPECT_EQ(hp.kv_window(), 0);
  EXPECT_TRUE(hp.swa_rope);
  EXPECT_EQ(hp.rope_freq_base, 1000000.0f);
  EXPECT_EQ(hp.rope_freq_scale, 1.0f / 8.0f);
  EXPECT_EQ(hp.rope_freq_base_swa, 10000.0f);
  EXPECT_EQ(hp.rope_freq_scale_swa, 1.0f);
  EXPECT_EQ(hp.yarn_ext_factor, 0.0f);
  EXPECT_TRUE(hp.scale_q_before_kq);
  EXPECT_EQ(hp.f_attention_scale, 0.125f);
  EXPECT_EQ(hp.embd_scale, std::sqrt(128.0f));
  EXPECT_EQ(hp.f_final_logit_softcapping, 15.0f);
  EXPECT_EQ(hp.f_norm_rms_eps, 1e-6f);
  EXPECT_TRUE(hp.qk_norm);
  EXPECT_TRUE(hp.post_norms);
  EXPECT_TRUE(hp.gelu_ffn);
  const model::Layer& L = m->layers[5];
  EXPECT_EQ(L.attn_q_norm.size(), 64u);
  EXPECT_EQ(L.attn_post_norm.size(), 128u);
  EXPECT_EQ(L.ffn_post_norm.size(), 128u);
  EXPECT_EQ(m->file.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(m->output.name, "token_embd.weight");

  for (const char* key : {"gemma3.attention.layer_norm_rms_epsilon", "gemma3.embedding_length",
                          "gemma3.block_count", "gemma3.feed_forward_length", "gemma3.attention.head_count"})
    expect_load_error(rewrite(path, keep_tensor, drop_key(key)), Errc::format, {key, "missing"});
  for (const char* t : {"blk.0.post_attention_norm.weight", "blk.5.post_ffw_norm.weight",
                        "blk.2.attn_q_norm.weight", "blk.3.attn_k_norm.weight", "blk.4.ffn_gate.weight",
                        "output_norm.weight", "token_embd.weight"})
    expect_load_error(rewrite(path, drop_tensor(t)), Errc::format, {t, "missing"});

  // No window: every layer global, one RoPE. A pattern of 3 and a base of
  // the sliding layers' own are read from their keys.
  auto full = model::load_model(rewrite(path, keep_tensor, drop_key("gemma3.attention.sliding_window")));
  EXPECT_EQ(full->hp.n_swa, 0);
  EXPECT_FALSE(full->hp.swa_rope);
  for (int il = 0; il < 6; ++il) EXPECT_FALSE(full->hp.is_swa(il)) << il;
  const auto with = [&](const char* key, gguf::Value v) {
    return rewrite(path, keep_tensor, add_key_after("gemma3.attention.sliding_window", key, v));
  };
  gguf::Value three;
  three.type = gguf::ValueType::UINT32;
  three.u = 3;
  auto m3 = model::load_model(with("gemma3.attention.sliding_window_pattern", three));
  for (int il = 0; il < 6; ++il) EXPECT_EQ(m3->hp.is_swa(il), il % 3 != 2) << il;
  gguf::Value base;
  base.type = gguf::ValueType::FLOAT32;
  base.f = 20000.0;
  EXPECT_EQ(model::load_model(with("gemma3.rope.freq_base_swa", base))->hp.rope_freq_base_swa, 20000.0f);
}

// qwen35 (llama.cpp v0.5.0 src/models/qwen35.cpp): full_attention_interval
// 3: layers 2 and 5 attend, the others are Gated DeltaNet layers; IMROPE over rope.dimension_sections;
// the ssm.* sizes required and consistent; post_attention_norm is the FFN's
// norm; the DeltaNet tensors required per recurrent layer.
TEST(Hparams, Qwen35) {
  const std::string path = data_path("models/tiny-qwen35-f32.gguf");
  auto m = model::load_model(path);
  const model::HParams& hp = m->hp;
  EXPECT_EQ(hp.arch, model::Arch::qwen35);
  EXPECT_EQ(hp.rope_type, model::RopeType::neox);
  EXPECT_TRUE(hp.imrope);
  EXPECT_TRUE(hp.attn_output_gate);
  EXPECT_TRUE(hp.qk_norm);
  EXPECT_EQ(hp.n_rot, 16);
  EXPECT_EQ(hp.n_embd_head_k, 64);
  const int32_t sections[4] = {3, 3, 2, 0};
  for (int s = 0; s < 4; ++s) EXPECT_EQ(hp.rope_sections[s], sections[s]);
  // IMROPE sectors (ggml_mrope_cache_init): [3, 3, 2, 0] over 8 pairs and
  // Qwen3.5's [11, 11, 10, 0] over 32 give every pair a t, h or w position;
  // [1, 1, 1, 1] gives sector 3 (3 % 3 == 0 but not below 3 x 1) the 4th,
  // which is 0 for text.
  for (int64_t i = 0; i < 8; ++i) EXPECT_FALSE(hp.imrope_pos0(i)) << i;
  model::HParams real = hp;
  real.rope_sections[0] = 11, real.rope_sections[1] = 11, real.rope_sections[2] = 10;
  for (int64_t i = 0; i < 32; ++i) EXPECT_FALSE(real.imrope_pos0(i)) << i;
  model::HParams four = hp;
  four.rope_sections[0] = four.rope_sections[1] = four.rope_sections[2] = four.rope_sections[3] = 1;
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(four.imrope_pos0(i), i % 4 == 3) << i;
  for (int il = 0; il < 6; ++il) EXPECT_EQ(hp.is_recurrent(il), il != 2 && il != 5) << il;
  EXPECT_EQ(hp.ssm_d_conv, 4);
  EXPECT_EQ(hp.ssm_d_state, 32);
  EXPECT_EQ(hp.ssm_n_group, 2);
  EXPECT_EQ(hp.ssm_dt_rank, 4);
  EXPECT_EQ(hp.ssm_d_inner, 128);
  EXPECT_EQ(hp.ssm_conv_channels(), 256);
  EXPECT_EQ(m->layers[0].ssm_conv1d.size(), 256u * 4);
  EXPECT_EQ(m->layers[2].wq.n_out, 2 * 4 * 64);
  EXPECT_EQ(m->layers[1].ffn_norm.size(), 128u);

  for (const char* key : {"qwen35.ssm.conv_kernel", "qwen35.ssm.state_size", "qwen35.ssm.group_count",
                          "qwen35.ssm.time_step_rank", "qwen35.ssm.inner_size", "qwen35.rope.dimension_sections",
                          "qwen35.attention.layer_norm_rms_epsilon"})
    expect_load_error(rewrite(path, keep_tensor, drop_key(key)), Errc::format, {key, "missing"});
  for (const char* t : {"blk.0.ssm_conv1d.weight", "blk.1.ssm_a", "blk.3.ssm_dt.bias", "blk.4.attn_gate.weight",
                        "blk.0.attn_qkv.weight", "blk.1.ssm_out.weight", "blk.3.ssm_norm.weight",
                        "blk.4.ssm_beta.weight", "blk.0.ssm_alpha.weight", "blk.2.attn_q.weight",
                        "blk.5.attn_k_norm.weight", "blk.2.post_attention_norm.weight"})
    expect_load_error(rewrite(path, drop_tensor(t)), Errc::format, {t, "missing"});
  // Sizes that do not fit: inner_size != time_step_rank x state_size; v heads
  // not a multiple of the q/k heads.
  const auto with_u32 = [&](const char* key, uint32_t v) {
    gguf::Value value;
    value.type = gguf::ValueType::UINT32;
    value.u = v;
    return rewrite(path, keep_tensor, [key, value](gguf::Writer& w, const gguf::KeyValue& kv) {
      w.set_value(kv.key, kv.key == key ? value : kv.value);
    });
  };
  expect_load_error(with_u32("qwen35.ssm.inner_size", 96), Errc::format, {"qwen35.ssm.inner_size", "96"});
  expect_load_error(with_u32("qwen35.ssm.group_count", 3), Errc::format, {"qwen35.ssm.time_step_rank"});
  // full_attention_interval absent: llama.cpp's default 4 (layer 3 attends);
  // the attention layer 2 then lacks the DeltaNet tensors.
  expect_load_error(rewrite(path, keep_tensor, drop_key("qwen35.full_attention_interval")), Errc::format,
                    {"blk.2.attn_qkv.weight", "missing"});
  // The DeltaNet's conv taps must be F32 (ggml_ssm_conv reads nothing else).
  expect_load_error(rewrite(path,
                            [](const gguf::TensorInfo& t, GgmlType& type, std::vector<int64_t>&) {
                              if (t.name == "blk.0.ssm_conv1d.weight") type = GgmlType::F16;
                              return true;
                            }),
                    Errc::unsupported, {"blk.0.ssm_conv1d.weight", "F32"});
}

// qwen35moe (llama.cpp v0.5.0 src/models/qwen35moe.cpp): qwen35's layers and
// keys; every FFN routed (expert_count, expert_used_count, expert width
// expert_feed_forward_length) plus a shared expert of
// expert_shared_feed_forward_length (default feed_forward_length) with its
// gate ffn_gate_inp_shexp.
TEST(Hparams, Qwen35Moe) {
  const std::string path = data_path("models/tiny-qwen35moe-f32.gguf");
  auto m = model::load_model(path);
  const model::HParams& hp = m->hp;
  EXPECT_EQ(hp.arch, model::Arch::qwen35moe);
  EXPECT_TRUE(hp.imrope);
  EXPECT_TRUE(hp.attn_output_gate);
  EXPECT_EQ(hp.n_layer, 3);
  for (int il = 0; il < 3; ++il) EXPECT_EQ(hp.is_recurrent(il), il != 2) << il;
  EXPECT_EQ(hp.n_expert, 8);
  EXPECT_EQ(hp.n_expert_used, 2);
  EXPECT_EQ(hp.n_ff, 64);
  EXPECT_EQ(hp.n_ff_shexp, 128);
  EXPECT_EQ(m->layers[0].gate_exps.size(), 8u);
  EXPECT_EQ(m->layers[2].ffn_gate_inp_shexp.n_out, 1);
  EXPECT_EQ(m->layers[1].ffn_down_shexp.n_in, 128);
  for (const char* t : {"blk.0.ffn_gate_inp_shexp.weight", "blk.1.ffn_up_shexp.weight", "blk.2.ffn_down_exps.weight",
                        "blk.0.ssm_conv1d.weight", "blk.2.attn_q.weight"})
    expect_load_error(rewrite(path, drop_tensor(t)), Errc::format, {t, "missing"});
  // Without expert_shared_feed_forward_length the shared expert is feed_forward_length wide (here the same 128).
  EXPECT_EQ(model::load_model(rewrite(path, keep_tensor, drop_key("qwen35moe.expert_shared_feed_forward_length")))
                ->hp.n_ff_shexp,
            128);
  expect_load_error(rewrite(path, keep_tensor, drop_key("qwen35moe.expert_count")), Errc::format,
                    {"qwen35moe.expert_count", "qwen35moe needs experts"});
}

TEST(LoadErrors, SplitExpertsLoadLikeMerged) {
  auto merged = model::load_model(data_path("models/tiny-mixtral-f32.gguf"));
  auto split = model::load_model(data_path("models/tiny-mixtral-split-f32.gguf"));
  ASSERT_EQ(split->layers[0].gate_exps.size(), 4u);
  ASSERT_EQ(merged->layers[0].gate_exps.size(), 4u);
  // The merged tensor is sliced into views of the mapping, without copies.
  const gguf::TensorInfo* t = merged->file.find_tensor("blk.0.ffn_gate_exps.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(merged->layers[0].gate_exps[0].data, t->data);
  EXPECT_EQ(merged->layers[0].gate_exps[3].data, t->data + 3 * t->n_bytes / 4);
  for (int e = 0; e < 4; ++e)
    EXPECT_EQ(0, std::memcmp(merged->layers[0].gate_exps[e].data, split->layers[0].gate_exps[e].data,
                             merged->layers[0].gate_exps[e].row_bytes * merged->layers[0].gate_exps[e].n_out));
}

}  // namespace
}  // namespace synapse

// Synthetic benchmark models (src/model/synth.hpp): the plans reproduce the
// real models' parameter counts and llama.cpp's tensor byte totals
// (../shared/docs/BASELINE.md, measured on llama-quantize's files; for
// Qwen3-30B-A3B llama-quantize --dry-run's), and the
// written files load, carry the preset's shapes and types, and run a forward
// pass with finite logits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "model/forward.hpp"
#include "model/synth.hpp"
#include "synapse/error.hpp"

namespace synapse::model {
namespace {

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "synapse_synth_" + std::to_string(::getpid()) + "_" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

struct Totals {
  uint64_t params = 0, bytes = 0;
};

Totals totals(const std::vector<SynthTensor>& plan) {
  Totals t;
  for (const SynthTensor& s : plan) {
    t.params += static_cast<uint64_t>(s.n_elements());
    t.bytes += s.n_bytes;
  }
  return t;
}

const SynthTensor& find(const std::vector<SynthTensor>& plan, const std::string& name) {
  for (const SynthTensor& s : plan)
    if (s.name == name) return s;
  throw std::runtime_error("no tensor " + name);
}

// Parameter counts of the real models (BASELINE.md "Shapes").
TEST(Synth, PresetsHaveTheRealModelsParameterCounts) {
  EXPECT_EQ(totals(synth_plan(synth_preset("smollm2-135m"), "F32")).params, 134515008u);
  EXPECT_EQ(totals(synth_plan(synth_preset("llama-3.2-1b"), "F32")).params, 1235814432u);
  EXPECT_EQ(totals(synth_plan(synth_preset("qwen2.5-0.5b"), "F32")).params, 494032768u);
  // Llama-3.1-8B: 8,030,261,248 parameters (its config; untied output), plus
  // the 64 rope frequency factors the GGUF conversion adds.
  EXPECT_EQ(totals(synth_plan(synth_preset("llama-3.1-8b"), "F32")).params, 8030261248u + 64u);
  // Qwen3-30B-A3B: its config's shapes add up to 30,532,122,624 ("30.5B").
  EXPECT_EQ(totals(synth_plan(synth_preset("qwen3-30b-a3b"), "F32")).params, 30532122624u);
}

// Tensor bytes of llama-quantize's files, in MB as BASELINE.md gives them.
TEST(Synth, TensorBytesMatchLlamaQuantizesFiles) {
  const auto mb = [](const char* preset, const char* type) {
    return static_cast<double>(totals(synth_plan(synth_preset(preset), type)).bytes) / 1e6;
  };
  EXPECT_NEAR(mb("llama-3.2-1b", "Q4_K_M"), 799.9, 0.05);
  EXPECT_NEAR(mb("llama-3.2-1b", "Q8_0"), 1313.3, 0.05);
  EXPECT_NEAR(mb("llama-3.2-1b", "Q4_0"), 763.1, 0.05);
  EXPECT_NEAR(mb("smollm2-135m", "Q8_0"), 143.0, 0.05);
  EXPECT_NEAR(mb("qwen2.5-0.5b", "Q4_K_M"), 391.9, 0.05);
  // llama-bench prints Llama-3.2-1B Q4_K_M as 762.81 MiB: the exact total.
  EXPECT_EQ(totals(synth_plan(synth_preset("llama-3.2-1b"), "Q4_K_M")).bytes, 799862912u);
  // Qwen3-30B-A3B: llama-quantize --dry-run (v0.5.0) of a BF16 file of its
  // shapes prints 17691.34 MiB for Q4_K_M, 30973.40 MiB for Q8_0 and
  // 16285.40 MiB for MXFP4_MOE, and gives every one of the 579 tensors the
  // type the plan gives it.
  EXPECT_EQ(totals(synth_plan(synth_preset("qwen3-30b-a3b"), "Q4_K_M")).bytes, 18550716416u);
  EXPECT_EQ(totals(synth_plan(synth_preset("qwen3-30b-a3b"), "Q8_0")).bytes, 32477962240u);
  EXPECT_EQ(totals(synth_plan(synth_preset("qwen3-30b-a3b"), "MXFP4_MOE")).bytes, 17076477952u);
}

// llama-quantize's Q4_K_M mixture: Q6_K for the tied embedding and for
// attn_v / ffn_down in the use_more_bits layers (16 layers: 0, 1, 4, 7, 10,
// 13, 14, 15), Q4_K elsewhere.
TEST(Synth, Q4KMMixtureFollowsLlamaQuantize) {
  const auto plan = synth_plan(synth_preset("llama-3.2-1b"), "q4_k_m");
  EXPECT_EQ(find(plan, "token_embd.weight").type, GgmlType::Q6_K);
  EXPECT_EQ(find(plan, "rope_freqs.weight").type, GgmlType::F32);
  const std::set<int> more_bits = {0, 1, 4, 7, 10, 13, 14, 15};
  for (int il = 0; il < 16; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    const GgmlType hi = more_bits.count(il) ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(find(plan, b + "attn_v.weight").type, hi) << il;
    EXPECT_EQ(find(plan, b + "ffn_down.weight").type, hi) << il;
    EXPECT_EQ(find(plan, b + "attn_q.weight").type, GgmlType::Q4_K) << il;
    EXPECT_EQ(find(plan, b + "ffn_up.weight").type, GgmlType::Q4_K) << il;
    EXPECT_EQ(find(plan, b + "attn_norm.weight").type, GgmlType::F32) << il;
  }
  // Llama-3.1-8B is untied: token_embd keeps Q4_K, output becomes Q6_K.
  const auto p8 = synth_plan(synth_preset("llama-3.1-8b"), "Q4_K_M");
  EXPECT_EQ(find(p8, "token_embd.weight").type, GgmlType::Q4_K);
  EXPECT_EQ(find(p8, "output.weight").type, GgmlType::Q6_K);
}

// Qwen3-MoE as llama-quantize v0.5.0 quantizes it (128 experts: none of its
// 8-expert rules): ffn_down_exps takes use_more_bits from the layer in its
// name (48 layers: 0-5, 42-47 and every third from 8), attn_v from its own
// count (the same layers here), the router and the q/k norms stay F32, the
// untied token_embd Q4_K, output Q6_K; the expert tensors are 3-D.
TEST(Synth, Qwen3MoeMixtureFollowsLlamaQuantize) {
  const auto plan = synth_plan(synth_preset("qwen3-30b-a3b"), "Q4_K_M");
  EXPECT_EQ(plan.size(), 579u);
  EXPECT_EQ(find(plan, "token_embd.weight").type, GgmlType::Q4_K);
  EXPECT_EQ(find(plan, "output.weight").type, GgmlType::Q6_K);
  int n_more = 0;
  for (int il = 0; il < 48; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    const bool more = il < 6 || il >= 42 || (il - 6) % 3 == 2;
    n_more += more;
    const GgmlType hi = more ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(find(plan, b + "ffn_down_exps.weight").type, hi) << il;
    EXPECT_EQ(find(plan, b + "attn_v.weight").type, hi) << il;
    for (const char* n : {"attn_q", "attn_k", "attn_output", "ffn_gate_exps", "ffn_up_exps"})
      EXPECT_EQ(find(plan, b + n + ".weight").type, GgmlType::Q4_K) << il << " " << n;
    for (const char* n : {"ffn_gate_inp", "attn_q_norm", "attn_k_norm", "attn_norm", "ffn_norm"})
      EXPECT_EQ(find(plan, b + n + ".weight").type, GgmlType::F32) << il << " " << n;
  }
  EXPECT_EQ(n_more, 24);
  EXPECT_EQ(find(plan, "blk.0.ffn_down_exps.weight").ne, (std::vector<int64_t>{768, 2048, 128}));
  EXPECT_EQ(find(plan, "blk.0.ffn_gate_exps.weight").ne, (std::vector<int64_t>{2048, 768, 128}));
  EXPECT_EQ(find(plan, "blk.0.ffn_gate_inp.weight").ne, (std::vector<int64_t>{2048, 128}));
  EXPECT_EQ(find(plan, "blk.0.attn_q.weight").ne, (std::vector<int64_t>{2048, 4096}));  // 32 heads of 128
  EXPECT_EQ(find(plan, "blk.0.attn_output.weight").ne, (std::vector<int64_t>{4096, 2048}));
  EXPECT_EQ(find(plan, "blk.0.attn_k_norm.weight").ne, std::vector<int64_t>{128});
  // Q8_0: every matrix Q8_0 (the output too), the router F32. MXFP4_MOE:
  // the same but the 3-D experts MXFP4.
  for (const SynthTensor& t : synth_plan(synth_preset("qwen3-30b-a3b"), "Q8_0")) {
    const bool f32 = t.ne.size() == 1 || t.name.find("ffn_gate_inp") != std::string::npos;
    EXPECT_EQ(t.type, f32 ? GgmlType::F32 : GgmlType::Q8_0) << t.name;
  }
  for (const SynthTensor& t : synth_plan(synth_preset("qwen3-30b-a3b"), "MXFP4_MOE")) {
    const bool f32 = t.ne.size() == 1 || t.name.find("ffn_gate_inp") != std::string::npos;
    EXPECT_EQ(t.type, f32 ? GgmlType::F32 : t.ne.size() == 3 ? GgmlType::MXFP4 : GgmlType::Q8_0) << t.name;
  }
}

// gpt-oss-20b as the published ggml-org/gpt-oss-20b-GGUF (gpt-oss-20b-mxfp4.gguf)
// is, by llama.cpp v0.5.0's load log of it: 20.91 B parameters, 11.27 GiB,
// 289 F32 tensors (norms, biases, sinks, the routers and the experts'
// 2-D biases), 98 Q8_0 (token_embd, output, attn_q/k/v/output) and 72 MXFP4
// (the 3-D experts); file type 38.
TEST(Synth, GptOss20bAsThePublishedFile) {
  const auto plan = synth_plan(synth_preset("gpt-oss-20b"), "MXFP4_MOE");
  EXPECT_EQ(totals(plan).params, 20914757184u);
  EXPECT_NEAR(static_cast<double>(totals(plan).bytes) / (1ull << 30), 11.27, 0.005);
  std::map<GgmlType, int> count;
  for (const SynthTensor& t : plan) ++count[t.type];
  EXPECT_EQ(count[GgmlType::F32], 289);
  EXPECT_EQ(count[GgmlType::Q8_0], 98);
  EXPECT_EQ(count[GgmlType::MXFP4], 72);
  EXPECT_EQ(find(plan, "blk.0.ffn_down_exps.weight").ne, (std::vector<int64_t>{2880, 2880, 32}));
  EXPECT_EQ(find(plan, "blk.0.ffn_down_exps.bias").ne, (std::vector<int64_t>{2880, 32}));
  EXPECT_EQ(find(plan, "blk.0.attn_q.weight").ne, (std::vector<int64_t>{2880, 4096}));  // 64 heads of 64
  EXPECT_EQ(find(plan, "blk.23.attn_sinks.weight").ne, std::vector<int64_t>{64});
  EXPECT_EQ(find(plan, "output.weight").type, GgmlType::Q8_0);
}

// gemma-3-4b: Gemma 3 4B's text model, 3.88 B parameters (262144 x 2560
// tied embedding, 34 layers of q 2048 / k, v 1024 wide attention, FFN 10240,
// six norms). Q4_0 as llama-quantize makes it: every matrix Q4_0 but the tied
// embedding, which is the output: Q6_K; Q4_K_M: attn_v and ffn_down Q6_K on
// the use_more_bits layers.
TEST(Synth, Gemma3_4bPlan) {
  const SynthPreset p = synth_preset("gemma-3-4b");
  const auto q4 = synth_plan(p, "Q4_0");
  EXPECT_EQ(totals(q4).params, 3880099328u);
  EXPECT_EQ(q4.size(), 1u + 34u * 13u + 1u);  // per layer 7 matrices and 6 norms
  for (const SynthTensor& t : q4)
    EXPECT_EQ(t.type, t.ne.size() == 1 ? GgmlType::F32 : t.name == "token_embd.weight" ? GgmlType::Q6_K : GgmlType::Q4_0)
        << t.name;
  EXPECT_EQ(find(q4, "blk.0.attn_q.weight").ne, (std::vector<int64_t>{2560, 2048}));
  EXPECT_EQ(find(q4, "blk.33.post_ffw_norm.weight").ne, std::vector<int64_t>{2560});
  EXPECT_EQ(find(q4, "blk.5.attn_k_norm.weight").ne, std::vector<int64_t>{256});
  const auto km = synth_plan(p, "Q4_K_M");
  EXPECT_EQ(find(km, "token_embd.weight").type, GgmlType::Q6_K);
  EXPECT_EQ(find(km, "blk.0.attn_v.weight").type, GgmlType::Q6_K);
  EXPECT_EQ(find(km, "blk.4.attn_v.weight").type, GgmlType::Q4_K);
  EXPECT_EQ(find(km, "blk.0.ffn_down.weight").type, GgmlType::Q6_K);
  EXPECT_EQ(find(km, "blk.0.attn_q.weight").type, GgmlType::Q4_K);
}

// qwen3.5-4b: Qwen3.5-4B's text model without its MTP layer, 24 Gated
// DeltaNet layers (0-2, 4-6, ...) and 8 gated-attention layers (3, 7, ...,
// 31). Parameters: the tied 248320 x 2560 embedding 635,699,200; a DeltaNet
// layer 112,923,840 (attn_qkv 2560 x 8192, attn_gate 2560 x 4096, ssm_out
// 4096 x 2560, ssm_beta/alpha 2560 x 32 each, ssm_conv1d 4 x 8192, 64 + 128
// vector values, two norms, FFN 3 x 2560 x 9216); an attention layer
// 107,484,672 (attn_q 2560 x 8192: q and its gate, k and v 2560 x 1024 each,
// attn_output 4096 x 2560, q/k norms 2 x 256, two norms, the FFN); the
// output norm 2560. Q4_K_M as llama-quantize v0.5.0 makes it: attn_qkv is an
// attn_v (category_is_attn_v), so the use_more_bits layers (0-3, 28-31,
// every third from 6) take Q6_K for attn_qkv / attn_v and ffn_down;
// ssm_conv1d and the vectors stay F32, the tied embedding (the output) Q6_K.
// The byte totals (here and below) were summed from the row sizes by a
// script of their own, not by synth_plan; llama-quantize v0.5.0 --dry-run of
// width-shrunk files of both presets (8 layers) gave every tensor the type
// the plan gives it.
TEST(Synth, Qwen35_4bPlan) {
  const SynthPreset p = synth_preset("qwen3.5-4b");
  EXPECT_EQ(totals(synth_plan(p, "F32")).params, 635699200ull + 24ull * 112923840ull + 8ull * 107484672ull + 2560ull);
  const auto km = synth_plan(p, "Q4_K_M");
  EXPECT_EQ(km.size(), 2u + 24u * 14u + 8u * 11u);
  EXPECT_EQ(totals(km).bytes, 2697836544u);
  EXPECT_EQ(find(km, "token_embd.weight").type, GgmlType::Q6_K);
  EXPECT_THROW(find(km, "output.weight"), std::runtime_error);
  int n_attention = 0;
  for (int il = 0; il < 32; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    const bool more = il < 4 || il >= 28 || (il - 4) % 3 == 2;
    const GgmlType hi = more ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(find(km, b + "ffn_down.weight").type, hi) << il;
    EXPECT_EQ(find(km, b + "ffn_up.weight").type, GgmlType::Q4_K) << il;
    EXPECT_EQ(find(km, b + "post_attention_norm.weight").type, GgmlType::F32) << il;
    if (il % 4 == 3) {
      ++n_attention;
      EXPECT_EQ(find(km, b + "attn_v.weight").type, hi) << il;
      EXPECT_EQ(find(km, b + "attn_q.weight").ne, (std::vector<int64_t>{2560, 8192})) << il;
      EXPECT_EQ(find(km, b + "attn_k.weight").ne, (std::vector<int64_t>{2560, 1024})) << il;
      EXPECT_EQ(find(km, b + "attn_output.weight").ne, (std::vector<int64_t>{4096, 2560})) << il;
      EXPECT_EQ(find(km, b + "attn_q_norm.weight").ne, std::vector<int64_t>{256}) << il;
      EXPECT_THROW(find(km, b + "attn_qkv.weight"), std::runtime_error) << il;
    } else {
      EXPECT_EQ(find(km, b + "attn_qkv.weight").type, hi) << il;
      EXPECT_EQ(find(km, b + "attn_qkv.weight").ne, (std::vector<int64_t>{2560, 8192})) << il;
      EXPECT_EQ(find(km, b + "attn_gate.weight").ne, (std::vector<int64_t>{2560, 4096})) << il;
      EXPECT_EQ(find(km, b + "ssm_conv1d.weight").ne, (std::vector<int64_t>{4, 8192})) << il;
      EXPECT_EQ(find(km, b + "ssm_conv1d.weight").type, GgmlType::F32) << il;
      EXPECT_EQ(find(km, b + "ssm_out.weight").ne, (std::vector<int64_t>{4096, 2560})) << il;
      EXPECT_EQ(find(km, b + "ssm_a").ne, std::vector<int64_t>{32}) << il;
      EXPECT_EQ(find(km, b + "ssm_norm.weight").ne, std::vector<int64_t>{128}) << il;
      for (const char* n : {"attn_gate", "ssm_out", "ssm_beta", "ssm_alpha"})
        EXPECT_EQ(find(km, b + n + ".weight").type, GgmlType::Q4_K) << il << " " << n;
      EXPECT_THROW(find(km, b + "attn_q.weight"), std::runtime_error) << il;
    }
  }
  EXPECT_EQ(n_attention, 8);
}

// qwen3.5-35b-a3b: Qwen3.5-35B-A3B's text model without its MTP layer, 30
// DeltaNet and 10 attention layers at n_embd 2048, every FFN 256 experts of
// 512 (8 used) and a shared expert of 512. Parameters: the untied 248320 x
// 2048 embedding and output 1,017,118,720; a DeltaNet layer 33,718,464
// (attn_qkv 2048 x 8192, attn_gate 2048 x 4096, ssm_out 4096 x 2048,
// ssm_beta/alpha 2048 x 32 each, ssm_conv1d 4 x 8192, 64 + 128 vector
// values); an attention layer 27,263,488 (attn_q 2048 x 8192, k and v 2048 x
// 512 each, attn_output 4096 x 2048, q/k norms); every layer's FFN 808,982,528
// (the experts 256 x 3 x 2048 x 512, the router 2048 x 256, the shared
// expert 3 x 2048 x 512 and its gate 2048, two norms); the output norm.
// IQ4_XS as llama-quantize v0.5.0 makes it with an importance matrix: every
// matrix IQ4_XS but attn_qkv and attn_v (Q5_K: n_gqa 8 >= 4) and the output
// (Q6_K); the routers, ssm_conv1d and the vectors F32. About 18 GiB: it fits
// a 23 GB machine.
TEST(Synth, Qwen35_35bA3bPlan) {
  const SynthPreset p = synth_preset("qwen3.5-35b-a3b");
  EXPECT_EQ(totals(synth_plan(p, "F32")).params,
            1017118720ull + 30ull * (33718464ull + 808982528ull) + 10ull * (27263488ull + 808982528ull) + 2048ull);
  const auto xs = synth_plan(p, "IQ4_XS");
  // token_embd, output_norm, output; a DeltaNet layer 11 tensors and an
  // attention layer 8 before the FFN: the router, 3 experts, the shared
  // expert's gate and 3 matrices.
  EXPECT_EQ(xs.size(), 3u + 30u * (11u + 8u) + 10u * (8u + 8u));
  EXPECT_EQ(totals(xs).bytes, 18717788672u);
  EXPECT_LT(totals(xs).bytes, 20ull << 30);
  EXPECT_EQ(find(xs, "token_embd.weight").type, GgmlType::IQ4_XS);
  EXPECT_EQ(find(xs, "output.weight").type, GgmlType::Q6_K);
  std::map<GgmlType, int> count;
  for (const SynthTensor& t : xs) ++count[t.type];
  EXPECT_EQ(count[GgmlType::Q5_K], 40);  // 30 attn_qkv, 10 attn_v
  EXPECT_EQ(count[GgmlType::Q6_K], 1);
  // IQ4_XS: token_embd, 30 x (attn_gate, ssm_beta, ssm_alpha, ssm_out), 10 x
  // (attn_q, attn_k, attn_output), 40 x 3 experts and 3 shared-expert matrices.
  EXPECT_EQ(count[GgmlType::IQ4_XS], 1 + 30 * 4 + 10 * 3 + 40 * 6);
  // F32: output_norm; a DeltaNet layer's two norms, ssm_conv1d, ssm_dt.bias,
  // ssm_a, ssm_norm; an attention layer's two norms and q/k norms; every
  // layer's router and shared-expert gate.
  EXPECT_EQ(count[GgmlType::F32], 1 + 30 * 8 + 10 * 6);
  for (const char* n : {"blk.0.ffn_gate_inp.weight", "blk.0.ssm_conv1d.weight", "blk.3.ffn_gate_inp_shexp.weight",
                        "blk.3.attn_k_norm.weight", "blk.0.ssm_dt.bias"})
    EXPECT_EQ(find(xs, n).type, GgmlType::F32) << n;
  EXPECT_EQ(find(xs, "blk.0.attn_qkv.weight").type, GgmlType::Q5_K);
  EXPECT_EQ(find(xs, "blk.3.attn_v.weight").type, GgmlType::Q5_K);
  EXPECT_EQ(find(xs, "blk.0.ffn_down_exps.weight").type, GgmlType::IQ4_XS);  // with an imatrix: no Q5_K
  EXPECT_EQ(find(xs, "blk.0.ffn_down_exps.weight").ne, (std::vector<int64_t>{512, 2048, 256}));
  EXPECT_EQ(find(xs, "blk.0.ffn_gate_exps.weight").ne, (std::vector<int64_t>{2048, 512, 256}));
  EXPECT_EQ(find(xs, "blk.0.ffn_gate_inp.weight").ne, (std::vector<int64_t>{2048, 256}));
  EXPECT_EQ(find(xs, "blk.3.ffn_gate_inp_shexp.weight").ne, std::vector<int64_t>{2048});
  EXPECT_EQ(find(xs, "blk.3.ffn_down_shexp.weight").ne, (std::vector<int64_t>{512, 2048}));
  EXPECT_EQ(find(xs, "blk.39.attn_q.weight").ne, (std::vector<int64_t>{2048, 8192}));
  EXPECT_EQ(find(xs, "blk.39.attn_v.weight").ne, (std::vector<int64_t>{2048, 512}));
  // Q4_K_M: ffn_down_exps and ffn_down_shexp share their layer's
  // use_more_bits (the layer read from the name, as for any MoE model).
  const auto km = synth_plan(p, "Q4_K_M");
  EXPECT_EQ(totals(km).bytes, 21155768832u);
  // use_more_bits(il, 40): il < 5, il >= 35, (il - 5) % 3 == 2.
  for (const auto& [il, more] : std::map<int, bool>{{0, true}, {4, true}, {6, false}, {7, true}, {20, false}, {39, true}}) {
    const std::string b = "blk." + std::to_string(il) + ".";
    const GgmlType hi = more ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(find(km, b + "ffn_down_exps.weight").type, hi) << il;
    EXPECT_EQ(find(km, b + "ffn_down_shexp.weight").type, hi) << il;
    EXPECT_EQ(find(km, b + "ffn_up_shexp.weight").type, GgmlType::Q4_K) << il;
  }
}

// IQ4_NL and IQ4_XS on a dense model with n_gqa 4 (Llama-3.1-8B): attn_v
// Q5_K, the output Q6_K, everything else the file type's own.
TEST(Synth, Iq4MixesFollowLlamaQuantize) {
  for (const char* type : {"IQ4_NL", "IQ4_XS"}) {
    const GgmlType t = std::string(type) == "IQ4_NL" ? GgmlType::IQ4_NL : GgmlType::IQ4_XS;
    for (const SynthTensor& s : synth_plan(synth_preset("llama-3.1-8b"), type)) {
      const GgmlType want = s.ne.size() == 1 ? GgmlType::F32
                            : s.name == "output.weight" ? GgmlType::Q6_K
                            : s.name.find("attn_v") != std::string::npos ? GgmlType::Q5_K
                                                                          : t;
      EXPECT_EQ(s.type, want) << type << " " << s.name;
    }
  }
  // n_gqa 3 (SmolLM2, 9/3 heads): attn_v keeps IQ4_XS, which rows of 576
  // cannot hold: IQ4_NL (llama-quantize's fallback).
  const auto smol = synth_plan(synth_preset("smollm2-135m"), "IQ4_XS");
  EXPECT_EQ(find(smol, "blk.0.attn_v.weight").type, GgmlType::IQ4_NL);
  EXPECT_EQ(find(smol, "blk.0.attn_q.weight").type, GgmlType::IQ4_NL);
  EXPECT_EQ(find(smol, "blk.0.ffn_down.weight").type, GgmlType::IQ4_XS);  // rows of 1536
  EXPECT_EQ(find(smol, "token_embd.weight").type, GgmlType::Q8_0);        // the tied output, rows of 576
}

// Rows of 896 (Qwen2.5-0.5B) are no multiple of 256: llama-quantize falls
// back Q4_K -> Q5_0 and Q6_K -> Q8_0 and writes the output as Q8_0.
TEST(Synth, RowsThatNoKQuantBlockFitsFallBackAsLlamaQuantizeDoes) {
  const auto plan = synth_plan(synth_preset("qwen2.5-0.5b"), "Q4_K_M");
  EXPECT_EQ(find(plan, "token_embd.weight").type, GgmlType::Q8_0);
  EXPECT_EQ(find(plan, "blk.0.attn_q.weight").type, GgmlType::Q5_0);
  EXPECT_EQ(find(plan, "blk.0.attn_v.weight").type, GgmlType::Q8_0);   // Q6_K -> Q8_0
  EXPECT_EQ(find(plan, "blk.4.attn_v.weight").type, GgmlType::Q5_0);   // Q4_K -> Q5_0 (24 layers: 4 is no use_more_bits layer)
  EXPECT_EQ(find(plan, "blk.0.ffn_down.weight").type, GgmlType::Q6_K);  // rows of 4864 = 19 x 256
  EXPECT_EQ(find(plan, "blk.4.ffn_down.weight").type, GgmlType::Q4_K);
  EXPECT_EQ(find(plan, "blk.5.ffn_down.weight").type, GgmlType::Q6_K);  // (5 - 3) % 3 == 2
  EXPECT_EQ(find(plan, "blk.0.attn_q.bias").type, GgmlType::F32);
  EXPECT_EQ(find(plan, "blk.0.attn_k.bias").ne, std::vector<int64_t>{128});
  // Q4_0 and Q8_0 files: output Q6_K (Q8_0 stays Q8_0), except on rows of 576.
  EXPECT_EQ(find(synth_plan(synth_preset("llama-3.2-1b"), "Q4_0"), "token_embd.weight").type, GgmlType::Q6_K);
  EXPECT_EQ(find(synth_plan(synth_preset("llama-3.2-1b"), "Q8_0"), "token_embd.weight").type, GgmlType::Q8_0);
  EXPECT_EQ(find(synth_plan(synth_preset("smollm2-135m"), "Q4_0"), "token_embd.weight").type, GgmlType::Q8_0);
}

// llama-quantize's IQ mixtures (with an importance matrix), on Llama-3.1-8B
// (32 layers, 8 KV heads of 32: n_gqa 4, untied). synth_plan's IQ rules were
// checked against llama-quantize v0.5.0 itself: files of 16 layers (n_embd
// 256 untied with 1 and 2 KV heads, n_embd 320 tied: the fallbacks) quantized
// with an imatrix to each of the ten IQ file types got exactly the types the
// plan gives, tensor by tensor.
TEST(Synth, IqMixturesFollowLlamaQuantize) {
  const SynthPreset p = synth_preset("llama-3.1-8b");
  const auto type_of = [&](const char* ftype, const std::string& name) { return find(synth_plan(p, ftype), name).type; };
  // IQ2_XXS: token_embd Q2_K, output Q5_K, attn_v Q4_K (n_gqa >= 4),
  // ffn_down Q2_K in the first eighth of the layers.
  EXPECT_EQ(type_of("IQ2_XXS", "token_embd.weight"), GgmlType::Q2_K);
  EXPECT_EQ(type_of("IQ2_XXS", "output.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type_of("IQ2_XXS", "blk.0.attn_v.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of("IQ2_XXS", "blk.3.ffn_down.weight"), GgmlType::Q2_K);
  EXPECT_EQ(type_of("IQ2_XXS", "blk.4.ffn_down.weight"), GgmlType::IQ2_XXS);
  EXPECT_EQ(type_of("IQ2_XXS", "blk.9.attn_output.weight"), GgmlType::IQ2_XXS);
  EXPECT_EQ(type_of("IQ2_XXS", "blk.9.ffn_up.weight"), GgmlType::IQ2_XXS);
  // IQ3_XXS: token_embd IQ3_S, attn_q/attn_k IQ2_S, attn_output IQ3_S.
  EXPECT_EQ(type_of("IQ3_XXS", "token_embd.weight"), GgmlType::IQ3_S);
  EXPECT_EQ(type_of("IQ3_XXS", "output.weight"), GgmlType::Q5_K);
  EXPECT_EQ(type_of("IQ3_XXS", "blk.5.attn_q.weight"), GgmlType::IQ2_S);
  EXPECT_EQ(type_of("IQ3_XXS", "blk.5.attn_k.weight"), GgmlType::IQ2_S);
  EXPECT_EQ(type_of("IQ3_XXS", "blk.5.attn_v.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of("IQ3_XXS", "blk.5.attn_output.weight"), GgmlType::IQ3_S);
  EXPECT_EQ(type_of("IQ3_XXS", "blk.0.ffn_down.weight"), GgmlType::IQ3_XXS);
  EXPECT_EQ(type_of("IQ3_XXS", "blk.5.ffn_gate.weight"), GgmlType::IQ3_XXS);
  // IQ3_S: output Q6_K, attn_v Q4_K, the rest IQ3_S.
  EXPECT_EQ(type_of("IQ3_S", "output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of("IQ3_S", "token_embd.weight"), GgmlType::IQ3_S);
  EXPECT_EQ(type_of("IQ3_S", "blk.7.attn_v.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of("IQ3_S", "blk.7.ffn_down.weight"), GgmlType::IQ3_S);
  // IQ2_S / IQ2_M: IQ2_XS / IQ2_S tensors; IQ1_S / IQ1_M: attn_output IQ2_XXS.
  EXPECT_EQ(type_of("IQ2_S", "blk.7.ffn_up.weight"), GgmlType::IQ2_XS);
  EXPECT_EQ(type_of("IQ2_M", "blk.7.ffn_up.weight"), GgmlType::IQ2_S);
  EXPECT_EQ(type_of("IQ2_M", "blk.0.ffn_down.weight"), GgmlType::IQ3_S);
  EXPECT_EQ(type_of("IQ1_M", "blk.7.attn_output.weight"), GgmlType::IQ2_XXS);
  EXPECT_EQ(type_of("IQ1_S", "blk.7.ffn_gate.weight"), GgmlType::IQ1_S);
  // Rows of 896 (Qwen2.5-0.5B): the lattice formats fall back to IQ4_NL.
  EXPECT_EQ(find(synth_plan(synth_preset("qwen2.5-0.5b"), "IQ2_XXS"), "blk.3.attn_q.weight").type, GgmlType::IQ4_NL);
}

TEST(Synth, BadNamesAreRejectedWithTheKnownOnes) {
  try {
    synth_preset("llama-7b");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("llama-3.2-1b"), std::string::npos) << e.what();
  }
  try {
    synth_plan(synth_preset("smollm2-135m"), "Q3_XL");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("Q4_K_M"), std::string::npos) << e.what();
  }
  SynthPreset p = synth_preset("smollm2-135m");
  p.n_vocab = 100;  // no room for the specials and the 256 byte tokens
  EXPECT_THROW(synth_plan(p, "Q8_0"), Error);
}

TEST(Synth, UnwritablePathThrowsIoAndLeavesNothing) {
  SynthPreset p = synth_preset("smollm2-135m");
  p.n_layer = 1, p.n_vocab = 300;
  base::ThreadPool pool(1);
  const std::string path = ::testing::TempDir() + "no_such_dir_synapse/x.gguf";
  try {
    synth_write(p, "Q8_0", 1, path, pool);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
  }
  EXPECT_FALSE(std::ifstream(path).good());
}

// Writes `p` as `type`, loads it, checks the file against the plan and the
// hyperparameters, and runs 5 tokens through forward(): finite logits.
std::unique_ptr<Model> write_and_load(const SynthPreset& p, const char* type, const std::string& path) {
  base::ThreadPool pool(2);
  const SynthResult r = synth_write(p, type, 7, path, pool);
  auto m = load_model(path);
  const auto plan = synth_plan(p, type);
  EXPECT_EQ(m->file.tensors().size(), plan.size());
  EXPECT_EQ(r.tensor_bytes, totals(plan).bytes);
  EXPECT_EQ(r.file_bytes, m->file.file_size());
  EXPECT_EQ(m->weight_bytes(), totals(plan).bytes);
  for (const SynthTensor& s : plan) {
    const gguf::TensorInfo* t = m->file.find_tensor(s.name);
    if (!t) {
      ADD_FAILURE() << "missing " << s.name;
      continue;
    }
    EXPECT_EQ(t->type, s.type) << s.name;
    EXPECT_EQ(t->n_bytes, s.n_bytes) << s.name;
    EXPECT_EQ(t->n_dims, s.ne.size()) << s.name;
    for (size_t d = 0; d < s.ne.size(); ++d) EXPECT_EQ(t->ne[d], s.ne[d]) << s.name;
  }
  EXPECT_EQ(m->hp.n_layer, p.n_layer);
  EXPECT_EQ(m->hp.n_embd, p.n_embd);
  EXPECT_EQ(m->hp.n_head, p.n_head);
  EXPECT_EQ(m->hp.n_head_kv, p.n_head_kv);
  EXPECT_EQ(m->hp.n_ff, p.n_expert > 0 ? p.n_ff_exp : p.n_ff);  // MoE: an expert's width
  EXPECT_EQ(m->hp.n_expert, p.n_expert);
  EXPECT_EQ(m->hp.n_embd_head_k, p.head_size());
  EXPECT_EQ(m->hp.n_vocab, p.n_vocab);
  EXPECT_EQ(m->hp.n_ctx_train, p.n_ctx_train);
  EXPECT_EQ(m->hp.rope_freq_base, p.rope_theta);
  EXPECT_EQ(m->hp.f_norm_rms_eps, p.rms_eps);
  EXPECT_EQ(m->tokenizer->n_vocab(), p.n_vocab);
  EXPECT_EQ(m->tokenizer->bos(), 1);
  EXPECT_EQ(m->tokenizer->text(3 + 0x41), "<0x41>");

  model::KvCache kv = make_kv_cache(*m, 16);
  std::vector<float> logits;
  const std::vector<token_id> toks = {1, 300, 7, static_cast<token_id>(p.n_vocab - 1), 42};
  forward(*m, kv, toks, true, logits, pool);
  EXPECT_EQ(logits.size(), toks.size() * static_cast<size_t>(p.n_vocab));
  float lo = logits[0], hi = logits[0];
  for (float x : logits) {
    EXPECT_TRUE(std::isfinite(x));
    lo = std::min(lo, x), hi = std::max(hi, x);
  }
  EXPECT_GT(hi - lo, 0.1f);   // not constant: the weights are random
  EXPECT_LT(hi - lo, 100.0f);  // and of a sensible scale
  return m;
}

// A prefill of n_tokens (a 512-token vocabulary) leaves finite logits.
void expect_prefill_finite(const Model& m, size_t n_tokens) {
  base::ThreadPool pool(2);
  KvCache kv = make_kv_cache(m, static_cast<int64_t>(n_tokens) + 28);
  std::vector<token_id> ids(n_tokens);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<token_id>(3 + i * 7 % 500);
  std::vector<float> logits;
  forward(m, kv, ids, false, logits, pool);
  ASSERT_EQ(logits.size(), 512u);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(Synth, SmolLM2ShapeLoadsAndRuns) {
  SynthPreset p = synth_preset("smollm2-135m");
  p.n_layer = 2, p.n_vocab = 1024;
  const std::string path = tmp_path("smollm2.gguf");
  const auto m = write_and_load(p, "Q4_K_M", path);
  EXPECT_EQ(m->file.get_string("general.architecture"), "llama");
  EXPECT_EQ(m->file.get_u32("general.file_type"), 15u);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(m->rope_freqs.size(), 0u);
  std::remove(path.c_str());
}

TEST(Synth, Qwen2ShapeHasBiasesAndRuns) {
  SynthPreset p = synth_preset("qwen2.5-0.5b");
  p.n_layer = 2, p.n_vocab = 512;
  const std::string path = tmp_path("qwen2.gguf");
  const auto m = write_and_load(p, "Q4_K_M", path);
  EXPECT_EQ(m->hp.arch, Arch::qwen2);
  EXPECT_EQ(m->layers[0].bq.size(), 896u);
  EXPECT_EQ(m->layers[1].bk.size(), 128u);
  std::remove(path.c_str());
}

// qwen3-30b-a3b shrunk to 2 layers of 16 experts (of 256, 4 used) at n_embd
// 256 keeps every feature: head size 128 from key_length, q/k norms, the
// router and the 3-D experts.
TEST(Synth, Qwen3MoeShapeLoadsAndRuns) {
  SynthPreset p = synth_preset("qwen3-30b-a3b");
  p.n_layer = 2, p.n_vocab = 512, p.n_embd = 256, p.n_head = 4, p.n_head_kv = 2;
  p.n_expert = 16, p.n_expert_used = 4, p.n_ff_exp = 256, p.n_ff = 1024;
  const std::string path = tmp_path("qwen3moe.gguf");
  const auto m = write_and_load(p, "Q4_K_M", path);
  EXPECT_EQ(m->hp.arch, Arch::qwen3moe);
  EXPECT_EQ(m->hp.n_expert_used, 4);
  EXPECT_TRUE(m->hp.qk_norm);
  ASSERT_EQ(m->layers[1].up_exps.size(), 16u);
  EXPECT_EQ(m->layers[1].up_exps[15].type, GgmlType::Q4_K);
  EXPECT_EQ(m->layers[1].down_exps[0].type, GgmlType::Q6_K);  // use_more_bits(1, 2)
  EXPECT_EQ(m->file.get_u32("qwen3moe.feed_forward_length"), 1024u);
  std::remove(path.c_str());
}

// gpt-oss-20b at 2 layers and n_embd 256 loads with every gpt-oss feature and runs.
TEST(Synth, GptOssShapeLoadsAndRuns) {
  SynthPreset p = synth_preset("gpt-oss-20b");
  p.n_layer = 2, p.n_vocab = 512, p.n_embd = 256, p.n_head = 8, p.n_head_kv = 2;
  p.n_expert = 8, p.n_ff_exp = 256, p.n_ff = 256;
  const std::string path = tmp_path("gpt-oss.gguf");
  const auto m = write_and_load(p, "MXFP4_MOE", path);
  EXPECT_EQ(m->hp.arch, Arch::gpt_oss);
  EXPECT_EQ(m->hp.n_swa, 128);
  EXPECT_TRUE(m->hp.is_swa(0));
  EXPECT_FALSE(m->hp.is_swa(1));
  EXPECT_EQ(m->hp.yarn_ext_factor, 1.0f);
  EXPECT_EQ(m->hp.n_ctx_orig_yarn, 4096);
  EXPECT_EQ(m->layers[1].attn_sinks.size(), 8u);
  EXPECT_EQ(m->layers[1].up_exps[7].type, GgmlType::MXFP4);
  EXPECT_EQ(m->layers[0].wq.type, GgmlType::Q8_0);
  EXPECT_EQ(m->file.get_u32("general.file_type"), 38u);
  std::remove(path.c_str());
}

// gemma-3-4b at 6 layers and n_embd 256 loads with every gemma3 feature and runs.
TEST(Synth, Gemma3ShapeLoadsAndRuns) {
  SynthPreset p = synth_preset("gemma-3-4b");
  p.n_layer = 6, p.n_vocab = 512, p.n_embd = 256, p.n_head = 4, p.n_head_kv = 2, p.head_dim = 64, p.n_ff = 512;
  p.sliding_window = 16;
  const std::string path = tmp_path("gemma3.gguf");
  const auto m = write_and_load(p, "Q4_0", path);
  EXPECT_EQ(m->hp.arch, Arch::gemma3);
  EXPECT_EQ(m->hp.n_swa, 16);
  for (int il = 0; il < 6; ++il) EXPECT_EQ(m->hp.is_swa(il), il != 5) << il;
  EXPECT_EQ(m->hp.rope_freq_scale, 1.0f / 8.0f);
  EXPECT_EQ(m->hp.rope_freq_base_swa, 10000.0f);
  EXPECT_EQ(m->layers[5].ffn_post_norm.size(), 256u);
  EXPECT_EQ(m->layers[0].attn_q_norm.size(), 64u);
  expect_prefill_finite(*m, 40);
  std::remove(path.c_str());
}

// qwen3.5-4b and qwen3.5-35b-a3b at 4 layers (three DeltaNet, one attention)
// and n_embd 256 load with every Qwen3.5 feature and run a prefill.
TEST(Synth, Qwen35ShapesLoadAndRun) {
  for (const char* name : {"qwen3.5-4b", "qwen3.5-35b-a3b"}) {
    SCOPED_TRACE(name);
    SynthPreset p = synth_preset(name);
    p.n_layer = 4, p.n_vocab = 512, p.n_embd = 256, p.n_head = 4, p.n_head_kv = 1, p.head_dim = 64, p.n_rot = 16;
    p.rope_sections = {3, 3, 2, 0};
    p.ssm_state = 32, p.ssm_groups = 2, p.ssm_v_heads = 4;
    const bool moe = p.n_expert > 0;
    if (moe) p.n_expert = 16, p.n_ff_exp = 256, p.n_ff_shexp = 256;
    else p.n_ff = 512;
    const std::string path = tmp_path(std::string(name) + ".gguf");
    const char* type = moe ? "IQ4_XS" : "Q4_K_M";
    const auto m = write_and_load(p, type, path);
    EXPECT_EQ(m->hp.arch, moe ? Arch::qwen35moe : Arch::qwen35);
    EXPECT_EQ(m->file.get_u32("general.file_type"), moe ? 30u : 15u);
    EXPECT_EQ(m->hp.recurrent_layers, (std::vector<uint8_t>{1, 1, 1, 0}));
    EXPECT_EQ(m->hp.ssm_d_conv, 4);
    EXPECT_EQ(m->hp.ssm_d_state, 32);
    EXPECT_EQ(m->hp.ssm_n_group, 2);
    EXPECT_EQ(m->hp.ssm_dt_rank, 4);
    EXPECT_EQ(m->hp.ssm_d_inner, 128);
    EXPECT_EQ(m->hp.n_rot, 16);
    EXPECT_EQ(m->hp.rope_sections[0], 3);
    EXPECT_EQ(m->hp.rope_sections[2], 2);
    EXPECT_TRUE(m->hp.attn_output_gate);
    EXPECT_EQ(m->layers[0].wqkv.n_out, 2 * 2 * 32 + 128);
    EXPECT_EQ(m->layers[2].ssm_conv1d.size(), 4u * 256u);
    EXPECT_EQ(m->layers[2].ssm_a, std::vector<float>(4, -1.0f));
    EXPECT_EQ(m->layers[3].wq.n_out, 2 * 4 * 64);
    if (moe) {
      EXPECT_FALSE(m->file.find("qwen35moe.feed_forward_length"));
      EXPECT_EQ(m->hp.n_ff_shexp, 256);
      EXPECT_EQ(m->layers[1].down_exps[15].type, GgmlType::IQ4_XS);
      EXPECT_EQ(m->layers[1].ffn_down_shexp.type, GgmlType::IQ4_XS);
      EXPECT_EQ(m->layers[0].wqkv.type, GgmlType::Q5_K);  // n_gqa 4
      EXPECT_EQ(m->layers[3].wv.type, GgmlType::Q5_K);
      EXPECT_EQ(m->layers[3].wk.type, GgmlType::IQ4_XS);
    } else {
      // use_more_bits(il, 4): layers 2 ((2 - 0) % 3 == 2) and 3 (>= 7 * 4 / 8).
      EXPECT_EQ(m->layers[0].wqkv.type, GgmlType::Q4_K);
      EXPECT_EQ(m->layers[2].wqkv.type, GgmlType::Q6_K);
      EXPECT_EQ(m->layers[1].ssm_out.type, GgmlType::Q5_0);  // rows of 128: Q4_K falls back
      EXPECT_EQ(m->layers[1].ffn_down.type, GgmlType::Q4_K);
      EXPECT_EQ(m->layers[2].ffn_down.type, GgmlType::Q6_K);
      EXPECT_EQ(m->layers[3].wv.type, GgmlType::Q6_K);
    }
    expect_prefill_finite(*m, 100);  // past the conv kernel and a DeltaNet chunk
    std::remove(path.c_str());
  }
  // Fewer layers than the attention interval: no attention layer, refused.
  SynthPreset p = synth_preset("qwen3.5-4b");
  p.n_layer = 2;
  try {
    synth_plan(p, "Q8_0");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("at least 4 layers"), std::string::npos) << e.what();
  }
}

// At the real models' DeltaNet head size (128, which the AVX2 and AVX-512
// delta-rule steps take; the golden tiny models' 32 runs the scalar one), a
// prefill of 70 tokens and the same tokens decoded one at a time leave
// bit-identical logits and recurrent states (G1): with 1 key head and 2
// value heads (the norms' scalar forms) and with 8 and 16 (Qwen3.5-4B's
// 16 value heads: the norms' SIMD forms, 8 / 16 heads in the lanes; the
// convolution's over 4096 channels).
TEST(Synth, Qwen35Head128PrefillEqualsDecode) {
  for (const auto& [groups, v_heads] : {std::pair<int64_t, int64_t>{1, 2}, std::pair<int64_t, int64_t>{8, 16}}) {
    SCOPED_TRACE(testing::Message() << groups << " key heads, " << v_heads << " value heads");
    SynthPreset p = synth_preset("qwen3.5-4b");
    p.n_layer = 4, p.n_vocab = 512, p.n_embd = 256, p.n_head = 2, p.n_head_kv = 1, p.head_dim = 64, p.n_rot = 16;
    p.rope_sections = {3, 3, 2, 0};
    p.ssm_state = 128, p.ssm_groups = groups, p.ssm_v_heads = v_heads, p.n_ff = 512;
    const std::string path = tmp_path("qwen35_d128.gguf");
    base::ThreadPool pool(2);
    synth_write(p, "Q8_0", 3, path, pool);
    const auto m = load_model(path);
    ASSERT_EQ(m->hp.ssm_d_state, 128);
    std::vector<token_id> ids(70);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<token_id>(3 + i * 11 % 500);
    KvCache a = make_kv_cache(*m, 128), b = make_kv_cache(*m, 128);
    std::vector<float> la, lb;
    forward(*m, a, ids, false, la, pool);
    for (token_id t : ids) forward(*m, b, std::vector<token_id>{t}, false, lb, pool);
    ASSERT_EQ(la.size(), 512u);
    ASSERT_EQ(la.size(), lb.size());
    EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
    for (int il = 0; il < 3; ++il) {
      const size_t n = static_cast<size_t>(v_heads * 128 * 128);
      EXPECT_EQ(std::memcmp(a.recurrent().ssm(il), b.recurrent().ssm(il), n * sizeof(float)), 0) << il;
      const size_t n_conv = static_cast<size_t>(3 * (2 * groups * 128 + v_heads * 128));
      EXPECT_EQ(std::memcmp(a.recurrent().conv(il), b.recurrent().conv(il), n_conv * sizeof(float)), 0) << il;
    }
    std::remove(path.c_str());
  }
}

// Llama 3 frequency factors (convert_hf_to_gguf.py, factor 32, low 1, high 4,
// original context 8192, head 64, theta 5e5): wavelengths below 2048 keep
// factor 1, above 8192 get 32, in between the smooth blend.
TEST(Synth, Llama3RopeFreqsAsTheConverterComputesThem) {
  SynthPreset p = synth_preset("llama-3.2-1b");
  p.n_layer = 1, p.n_vocab = 512;
  const std::string path = tmp_path("llama3.gguf");
  const auto m = write_and_load(p, "Q4_0", path);
  ASSERT_EQ(m->rope_freqs.size(), 32u);
  for (int i = 0; i < 32; ++i) {
    const double freq = 1.0 / std::pow(500000.0, 2.0 * i / 64.0);
    const double wavelen = 2 * 3.14159265358979 / freq;
    double want;
    if (wavelen < 2048) want = 1;
    else if (wavelen > 8192) want = 32;
    else {
      const double smooth = (8192 / wavelen - 1) / 3;
      want = 1 / ((1 - smooth) / 32 + smooth);
    }
    EXPECT_NEAR(m->rope_freqs[i], want, 1e-4 * want) << i;
  }
  EXPECT_EQ(m->rope_freqs[0], 1.0f);
  EXPECT_EQ(m->rope_freqs[31], 32.0f);
  std::remove(path.c_str());
}

TEST(Synth, ContentDependsOnTheSeedNotTheThreadCount) {
  SynthPreset p = synth_preset("smollm2-135m");
  p.n_layer = 1, p.n_vocab = 300;
  const std::string a = tmp_path("t1.gguf"), b = tmp_path("t2.gguf"), c = tmp_path("s2.gguf");
  base::ThreadPool one(1), two(2);
  synth_write(p, "Q4_K_M", 5, a, one);
  synth_write(p, "Q4_K_M", 5, b, two);
  synth_write(p, "Q4_K_M", 6, c, two);
  const std::string fa = slurp(a), fb = slurp(b), fc = slurp(c);
  EXPECT_GT(fa.size(), 1000000u);
  EXPECT_TRUE(fa == fb);
  EXPECT_EQ(fa.size(), fc.size());
  EXPECT_FALSE(fa == fc);
  for (const auto& s : {a, b, c}) std::remove(s.c_str());
}

// Lattice-format files (random blocks, scale for an RMS of about 0.02) load
// and run with logits of the other types' scale.
TEST(Synth, IqFilesLoadAndRun) {
  SynthPreset p = synth_preset("llama-3.2-1b");
  p.n_layer = 1, p.n_vocab = 512;
  for (const char* type : {"IQ2_XXS", "IQ2_M", "IQ3_XXS", "IQ1_M"}) {
    SCOPED_TRACE(type);
    const std::string path = tmp_path(std::string(type) + ".gguf");
    const auto m = write_and_load(p, type, path);
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace synapse::model

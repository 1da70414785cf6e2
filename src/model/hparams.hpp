// Hyperparameters of a Llama-family model, read once from GGUF metadata.
//
// The architectures differ only by fields of this struct (seed 000 "Architecture
// Differences", seed 003 §6); the forward pass tests flags, it is not copied.
// Keys are `<prefix>.<name>` where prefix is general.architecture, except that
// "mistral" files keep the llama.* keys. Which keys each architecture reads
// follows llama.cpp v0.5.0 (de3ff81): llama_model_loader keys in
// src/llama-model.cpp and the per-architecture load_arch_hparams in
// src/models/<arch>.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include "synapse/gguf.hpp"

namespace synapse::model {

enum class Arch { llama, mistral, qwen2, qwen3, qwen3moe, mistral3, phi3, gpt_oss, gemma3, qwen35, qwen35moe };
// How a MoE router's logits become the chosen experts' weights (llama.cpp's
// llama_expert_gating_func_type with build_moe_ffn's norm_w):
// softmax_norm: softmax over all experts, top k, the k weights divided by
//   their sum (Mixtral, Qwen3-MoE: LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX, norm_w);
// softmax_weight: top k of the logits, the weights the softmax of those k
//   (gpt-oss: LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT, no norm_w).
enum class ExpertGating { softmax_norm, softmax_weight };
enum class RopeType { normal, neox };  // pairs (x[2i], x[2i+1]) or (x[i], x[i + n_rot/2])

struct HParams {
  Arch arch = Arch::llama;
  std::string arch_name;    // general.architecture as written
  std::string key_prefix;   // "llama", "qwen2", "phi3"
  int64_t n_vocab = 0;      // rows of token_embd.weight
  int64_t n_ctx_train = 0;  // <prefix>.context_length
  int64_t n_embd = 0;       // <prefix>.embedding_length
  int64_t n_layer = 0;      // <prefix>.block_count
  // FFN width: <prefix>.feed_forward_length; for MoE the width of one
  // expert: qwen3moe's expert_feed_forward_length (else feed_forward_length /
  // expert_used_count, llama.cpp's n_ff_exp fallback), Mixtral's
  // feed_forward_length.
  int64_t n_ff = 0;
  int64_t n_head = 0;       // <prefix>.attention.head_count
  int64_t n_head_kv = 0;    // <prefix>.attention.head_count_kv (default n_head)
  int64_t n_embd_head_k = 0;  // attention.key_length (default n_embd / n_head)
  int64_t n_embd_head_v = 0;  // attention.value_length (default n_embd_head_k)
  int64_t n_rot = 0;        // rope.dimension_count (default n_embd_head_k)
  float f_norm_rms_eps = 1e-5f;  // attention.layer_norm_rms_epsilon
  RopeType rope_type = RopeType::normal;
  float rope_freq_base = 10000.0f;  // rope.freq_base (rope_theta)
  float rope_freq_scale = 1.0f;     // 1 / rope.scaling.factor
  // The sliding layers' own RoPE (llama.cpp's rope_freq_base_train_swa and
  // rope_freq_scale_train_swa, which llama_model::get_rope_freq_base/scale
  // give a layer where is_swa(il)): gemma3 reads rope.freq_base_swa (default
  // 10000) and never scales them; the global layers keep rope_freq_base and
  // rope_freq_scale. swa_rope false: every layer uses the one RoPE above.
  bool swa_rope = false;
  float rope_freq_base_swa = 10000.0f;
  float rope_freq_scale_swa = 1.0f;
  // YaRN (Peng et al. 2023) as llama.cpp's llama_context derives it:
  // ext_factor 1 for scaling type "yarn", else 0; beta_fast 32, beta_slow 1.
  float yarn_ext_factor = 0.0f;
  float yarn_attn_factor = 1.0f;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  int64_t n_ctx_orig_yarn = 0;  // rope.scaling.original_context_length (default n_ctx_train)
  // Ministral 3 attention temperature (llama.cpp v0.5.0 src/models/mistral3.cpp:
  // f_attn_temp_scale, n_attn_temp_floor_scale): after RoPE, q at position p is
  // multiplied by 1 + attn_temp_scale * ln(floor(p / n_attn_temp_floor_scale) + 1).
  // attention.temperature_scale (mistral3 only; 0 = off); the length is
  // n_ctx_orig_yarn, not a key of its own.
  float attn_temp_scale = 0.0f;
  int64_t n_attn_temp_floor_scale = 0;
  int64_t n_swa = 0;            // attention.sliding_window; 0 = full attention
  // Which layers use the window (llama.cpp's hparams.is_swa): empty = every
  // layer when n_swa > 0; gpt-oss: attention.sliding_window_pattern (an
  // integer n: layer il slides when il % n < n - 1, default 2, so the even
  // layers; or one bool per layer), as load_swa_pattern reads it; gemma3:
  // the same with default 6 (five sliding layers, then a global one).
  std::vector<uint8_t> swa_layers;
  int64_t n_expert = 0;         // expert_count (Mixtral, Qwen3-MoE)
  int64_t n_expert_used = 0;    // expert_used_count
  bool fused_qkv = false;       // Phi-3: attn_qkv [q|k|v] and ffn_up [gate|up]
  // Phi-3 and Gemma 3 scale q (after RoPE) before q.k, which then runs with
  // scale 1: by f_attention_scale (llama.cpp's hparams.f_attention_scale:
  // gemma3 1/sqrt(n_embd_head_k), its 27B, 62 layers, 1/sqrt(n_embd / n_head)),
  // or by 1/sqrt(n_embd_head_k) when that is 0 (Phi-3).
  bool scale_q_before_kq = false;
  float f_attention_scale = 0.0f;
  bool qk_norm = false;         // Qwen3, Qwen3-MoE: per-head RMSNorm of q and k (attn_q_norm/attn_k_norm) before RoPE
  // <prefix>.pooling_type (llama.cpp's LLM_KV_POOLING_TYPE, llama_pooling_type
  // values: 0 none, 1 mean, 2 cls, 3 last, 4 rank); -1 (unspecified) when
  // absent. What an embedding request pools with by default.
  int32_t pooling_type = -1;
  // Entries of <prefix>.classifier.output_labels (llama.cpp's n_cls_out;
  // Qwen3-Reranker: ["yes", "no"]), 0 when absent.
  int64_t n_cls_labels = 0;
  // gpt-oss (llama.cpp v0.5.0 src/models/openai-moe.cpp): a learned sink per
  // query head in the attention softmax (blk.N.attn_sinks.weight), the FFN
  // norm named post_attention_norm, router and expert biases, ggml_swiglu_oai as
  // the experts' activation.
  bool attn_sinks = false;
  bool swiglu_oai = false;
  ExpertGating expert_gating = ExpertGating::softmax_norm;
  // Gemma 3 (llama.cpp v0.5.0 src/models/gemma3.cpp): the token embeddings
  // times embd_scale = sqrtf(n_embd) (1: none; not rows given as embeddings);
  // RMSNorms of the attention output and of the FFN output (post_attention_norm,
  // post_ffw_norm) before their residual adds; the FFN's gate through GELU
  // (ggml_geglu_split) instead of SiLU; logits softcapped as
  // tanh(l / cap) * cap when final_logit_softcapping > 0.
  float embd_scale = 1.0f;
  bool post_norms = false;
  bool gelu_ffn = false;
  float f_final_logit_softcapping = 0.0f;
  // Qwen3.5 (llama.cpp v0.5.0 src/models/qwen35.cpp, delta-net-base.cpp):
  // recurrent_layers[il] != 0 marks a Gated DeltaNet layer (attention.recurrent_layers,
  // else every layer but each full_attention_interval-th, default 4); empty:
  // none. The DeltaNet's sizes: ssm.conv_kernel (d_conv), ssm.inner_size
  // (d_inner = v heads x head dim), ssm.state_size (head dim of q, k and v),
  // ssm.time_step_rank (v heads), ssm.group_count (q/k heads). Its attention
  // layers' q projection is 2 x n_embd_head_k per head (q, then the output's
  // sigmoid gate: attn_output_gate), their RoPE is IMROPE over
  // rope.dimension_sections (rope_sections; text positions).
  std::vector<uint8_t> recurrent_layers;
  int64_t ssm_d_conv = 0, ssm_d_inner = 0, ssm_d_state = 0, ssm_dt_rank = 0, ssm_n_group = 0;
  bool attn_output_gate = false;
  // qwen35moe: the shared expert's FFN width (expert_shared_feed_forward_length,
  // default feed_forward_length), gated per row by sigmoid(ffn_gate_inp_shexp x);
  // 0: no shared expert.
  int64_t n_ff_shexp = 0;
  bool imrope = false;
  int32_t rope_sections[4] = {0, 0, 0, 0};

  int64_t n_gqa() const { return n_head / n_head_kv; }
  bool is_recurrent(int64_t il) const {
    return !recurrent_layers.empty() && recurrent_layers[static_cast<size_t>(il)] != 0;
  }
  bool has_recurrent() const { return !recurrent_layers.empty(); }
  // Layers that keep K/V rows (all but the recurrent ones), and layer il's
  // index among them (il an attention layer): a hybrid model's KvCache
  // holds only those.
  int64_t n_layer_kv() const { return kv_layer(n_layer); }
  int64_t kv_layer(int64_t il) const {
    int64_t n_recurrent = 0;
    for (int64_t j = 0; j < il; ++j) n_recurrent += is_recurrent(j) ? 1 : 0;
    return il - n_recurrent;
  }
  // Channels of a DeltaNet layer's short convolution: q, k (n_group heads
  // each) and v (d_inner), as attn_qkv produces them.
  int64_t ssm_conv_channels() const { return ssm_d_inner + 2 * ssm_n_group * ssm_d_state; }
  // Whether RoPE pair i (0 <= i < n_rot/2) of an IMROPE model rotates by the
  // 4th position component, which is 0 for text (ggml_mrope_cache_init with
  // is_imrope: sector = i % sum(sections); t, h, w take the sectors
  // s % 3 == 0, 1, 2 below 3 x their section, e the rest; llama.cpp gives
  // text tokens positions (p, p, p, 0)).
  bool imrope_pos0(int64_t i) const {
    const int64_t n = int64_t{rope_sections[0]} + rope_sections[1] + rope_sections[2] + rope_sections[3];
    const int64_t s = i % n;
    const bool t = s % 3 == 0 && s < 3 * int64_t{rope_sections[0]};
    const bool h = s % 3 == 1 && s < 3 * int64_t{rope_sections[1]};
    const bool w = s % 3 == 2 && s < 3 * int64_t{rope_sections[2]};
    return !(t || h || w);
  }
  // Whether layer il attends through the sliding window.
  bool is_swa(int64_t il) const {
    return n_swa > 0 && (swa_layers.empty() || swa_layers[static_cast<size_t>(il)] != 0);
  }
  // The window a sequence's KV cache may keep (KvCache's `window`): n_swa
  // when every layer slides, else 0 (a full layer needs every position).
  int64_t kv_window() const {
    for (int64_t il = 0; il < n_layer; ++il)
      if (!is_swa(il)) return 0;
    return n_swa;
  }
  int64_t n_embd_k_gqa() const { return n_embd_head_k * n_head_kv; }
  int64_t n_embd_v_gqa() const { return n_embd_head_v * n_head_kv; }
};

// Reads and validates the hyperparameters. n_vocab is taken from the
// token_embd.weight tensor. Throws Error(unsupported) for an unknown
// general.architecture (the message lists the supported ones) and
// Error(format) naming the key for a missing or inconsistent value.
HParams read_hparams(const gguf::File& file);

const char* arch_name(Arch arch);

// The architecture a general.architecture value names, if synapse runs it.
std::optional<Arch> arch_from_name(std::string_view name);

// The general.architecture values synapse runs, comma-separated
// ("llama, mistral, ..."), as error messages and `synapse info` list them.
std::string supported_architectures();
// The same names, one per item (synapse::supported_architectures).
std::vector<std::string> architecture_names();

// Ministral 3's attention temperature at position `pos` (1 when
// hp.attn_temp_scale is 0): float(ln(floor(float(pos) / L) + 1) * beta + 1),
// the division in float, the rest in double, as llama.cpp v0.5.0's
// llm_graph_input_attn_temp::set_input (src/llama-graph.cpp:157-173) fills
// inp_attn_scale. Thread-safe (pure).
float attn_temperature(const HParams& hp, int64_t pos);

}  // namespace synapse::model

// Synthetic models for benchmarking: random weights at the real shapes of
// known Llama-family models, written as a GGUF file that `synapse` (and
// llama.cpp) load like the real thing. Decode and prefill speed depend only on
// the shapes and tensor types, never on the values, so no download is needed
// to benchmark (issue 6 "Synthetic models").
//
// What a file holds:
//   - the architecture's hyperparameters as GGUF metadata (llama.* / qwen2.* /
//     qwen3moe.* / gpt-oss.* / gemma3.* / qwen35.* / qwen35moe.*), with the
//     real model's context length, rope theta (and YaRN) and RMSNorm epsilon;
//   - a synthetic SentencePiece-style vocabulary at the real size: <unk>, <s>,
//     </s>, the 256 byte tokens <0x00>..<0xFF>, then generated unique pieces;
//   - every tensor the real model has, at its shape: token_embd, output (when
//     untied), output_norm, per layer attn_norm, attn_q/k/v (+ biases for
//     Qwen2, q/k norms for Qwen3), attn_output, ffn_norm, ffn_gate/up/down
//     (or, for an MoE model, the router ffn_gate_inp and the merged 3-D
//     ffn_gate/up/down_exps), and rope_freqs for Llama 3 (frequency factors
//     computed as convert_hf_to_gguf.py does); Qwen3.5's Gated DeltaNet
//     layers (attn_qkv, attn_gate, ssm_*) and shared expert (SynthPreset);
//   - weights drawn from an approximately normal distribution (Irwin-Hall sum
//     of four uniforms, sd 0.02), norms 1, DeltaNet's ssm_a -1, so
//     activations stay finite;
//   - tensor types chosen as llama-quantize chooses them for the file type
//     (e.g. Q4_K_M: Q6_K for the output / tied embedding and for attn_v
//     (and DeltaNet's attn_qkv) and ffn_down (ffn_down_exps, ffn_down_shexp)
//     in the use_more_bits layers, Q4_K elsewhere, ssm_conv1d and
//     the router F32, with the block-size fallbacks Q4_K -> Q5_0, Q6_K ->
//     Q8_0 for rows not a multiple of 256; llama.cpp src/llama-quant.cpp,
//     llama_tensor_get_type).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/thread_pool.hpp"
#include "synapse/types.hpp"

namespace synapse::model {

// The hyperparameters of one real model (from its config.json / GGUF).
struct SynthPreset {
  std::string name;           // "llama-3.2-1b"
  std::string arch;           // general.architecture: "llama", "qwen2", "qwen3moe", "gpt-oss", "gemma3", "qwen35" or "qwen35moe"
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ff = 0;           // feed_forward_length; 0 (MoE only): no such key
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  bool tied = true;           // output shares token_embd
  bool qkv_bias = false;      // Qwen2: attn_q/k/v.bias
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  // Llama 3 rope scaling (rope_freqs tensor); factor 0 = none.
  float rope_factor = 0.0f;
  float rope_low_freq_factor = 1.0f;
  float rope_high_freq_factor = 4.0f;
  int64_t rope_orig_ctx = 8192;
  // Head size written as attention.key_length / value_length when it is not
  // n_embd / n_head (Qwen3); 0 = n_embd / n_head, no keys.
  int64_t head_dim = 0;
  bool qk_norm = false;       // Qwen3: attn_q_norm / attn_k_norm [head_dim]
  // Mixture of experts (qwen3moe): every layer's FFN is n_expert experts of
  // width n_ff_exp (expert_feed_forward_length; n_ff is then the dense width,
  // written as feed_forward_length and unused), merged in ffn_{gate,up,down}_exps
  // [.., .., n_expert], routed by ffn_gate_inp (F32, as llama-quantize leaves it).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  // gpt-oss (as the ggml-org gpt-oss-20b GGUF has it): attention.sliding_window
  // (on the even layers), YaRN (rope.scaling.type yarn, factor,
  // original_context_length), and per layer attn_output.bias, attn_sinks
  // [n_head], post_attention_norm (instead of ffn_norm), ffn_gate_inp.bias
  // and the experts' biases ffn_{gate,up,down}_exps.bias (all F32).
  int64_t sliding_window = 0;
  float yarn_factor = 0.0f;
  int64_t yarn_orig_ctx = 0;
  // Linear RoPE scaling (rope.scaling.type linear, rope.scaling.factor; 0 =
  // none): Gemma 3 4B and up, factor 8, on the global layers. gemma3 files
  // also get per layer post_attention_norm and post_ffw_norm, and their
  // sliding window slides on five layers of six (llama.cpp's default pattern).
  float linear_factor = 0.0f;
  // Qwen3.5 (qwen35, qwen35moe; llama.cpp v0.5.0 src/models/qwen35.cpp,
  // qwen35moe.cpp): Gated DeltaNet layers, with gated full attention on every
  // full_attention_interval-th layer ((il + 1) % interval == 0; 0 = no
  // DeltaNet layer). A DeltaNet layer has attn_qkv [n_embd -> 2 * key_dim +
  // value_dim] (key_dim = ssm_state * ssm_groups, value_dim = ssm_state *
  // ssm_v_heads), attn_gate [n_embd -> value_dim], ssm_conv1d [ssm_conv,
  // channels] (F32: llama-quantize never quantizes it), ssm_dt.bias and
  // ssm_a [ssm_v_heads], ssm_beta / ssm_alpha [n_embd -> ssm_v_heads],
  // ssm_norm [ssm_state] and ssm_out [value_dim -> n_embd]; an attention
  // layer's attn_q is twice n_head * head_dim wide (each head's q, then its
  // output gate). Both name their FFN norm post_attention_norm.
  int64_t full_attention_interval = 0;
  int64_t ssm_conv = 0;       // ssm.conv_kernel (linear_conv_kernel_dim)
  int64_t ssm_state = 0;      // ssm.state_size (linear_key_head_dim = linear_value_head_dim)
  int64_t ssm_groups = 0;     // ssm.group_count (linear_num_key_heads)
  int64_t ssm_v_heads = 0;    // ssm.time_step_rank (linear_num_value_heads)
  // Partial RoPE: rope.dimension_count when not the head size (0 = the head
  // size); rope.dimension_sections of the interleaved M-RoPE (written when
  // any is non-zero).
  int64_t n_rot = 0;
  std::array<int32_t, 4> rope_sections = {0, 0, 0, 0};
  // qwen35moe's shared expert (expert_shared_feed_forward_length; 0 = none):
  // per layer ffn_gate_inp_shexp [n_embd] (F32, 1-D) and
  // ffn_{gate,up}_shexp [n_embd -> n_ff_shexp], ffn_down_shexp back.
  int64_t n_ff_shexp = 0;

  int64_t head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
  int64_t rope_dims() const { return n_rot > 0 ? n_rot : head_size(); }
  // A Gated DeltaNet layer (qwen35 / qwen35moe), else attention.
  bool is_recurrent(int64_t il) const {
    return full_attention_interval > 0 && (il + 1) % full_attention_interval != 0;
  }
};

// The preset called `name` (smollm2-135m, qwen2.5-0.5b, llama-3.2-1b,
// llama-3.1-8b, qwen3-30b-a3b, gpt-oss-20b, gemma-3-4b, qwen3.5-4b,
// qwen3.5-35b-a3b). Throws Error(invalid_argument) naming the known presets for
// any other name.
SynthPreset synth_preset(std::string_view name);
std::vector<std::string> synth_preset_names();

// File types `synth` writes: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q6_K, Q4_K_M, Q5_K_M, IQ4_NL, IQ4_XS, MXFP4_MOE, and the IQ file types IQ2_XXS, IQ2_XS,
// IQ2_S, IQ2_M, IQ3_XXS, IQ3_XS, IQ3_S, IQ3_M, IQ1_S, IQ1_M with
// llama-quantize's per-tensor mixes as it makes them with an importance
// matrix (llama-quantize's names, case-insensitive). The lattice formats
// (IQ1/IQ2/IQ3) have no quantizer: their blocks are random (any index, sign
// and sub-block scale) with one F16 scale per type for an RMS of about 0.02,
// which is all a benchmark needs (speed depends on the layout, not the
// values); the mixes' other types are quantized from the random weights.
std::vector<std::string> synth_type_names();

// One tensor of the plan: name, ggml shape (ne[0] = row length), type and
// exact data bytes.
struct SynthTensor {
  std::string name;
  std::vector<int64_t> ne;
  GgmlType type = GgmlType::F32;
  uint64_t n_bytes = 0;
  int64_t n_elements() const;
};

// Every tensor of `preset` in file order, with the type llama-quantize gives
// it for file type `ftype` (see the header comment). Throws
// Error(invalid_argument) for an unknown ftype or a shape the type cannot
// hold (a row length not a multiple of 32 for a quantized type).
std::vector<SynthTensor> synth_plan(const SynthPreset& preset, std::string_view ftype);

struct SynthResult {
  uint64_t n_params = 0;      // elements of all tensors
  uint64_t tensor_bytes = 0;  // sum of tensor data bytes (llama-bench's "size")
  uint64_t file_bytes = 0;
  double seconds = 0;
};

// Writes the synthetic model to `path`, streaming tensor by tensor (memory:
// the largest tensor once). Values depend only on `seed`, the tensor name and
// the row, never on the thread count. Rows are generated and quantized in
// parallel on `pool`. Throws Error(io) when the file cannot be written,
// Error(invalid_argument) as synth_plan does.
SynthResult synth_write(const SynthPreset& preset, std::string_view ftype, uint64_t seed, const std::string& path,
                        base::ThreadPool& pool);

}  // namespace synapse::model

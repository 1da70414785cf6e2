// A loaded model: the mapped GGUF file, its hyperparameters, weight views
// bound by tensor name (zero-copy: quantized weights stay in the mapping;
// only norms, biases and rope factors become float; the one exception is
// Q4_0, Q5_0, Q8_0, Q4_K and Q6_K under AVX2, copied once as 8 interleaved
// rows, see kernels::interleave_weight), and its tokenizer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/matmul.hpp"
#include "model/hparams.hpp"
#include "synapse/gguf.hpp"
#include "synapse/tokenizer.hpp"

namespace synapse::model {

using kernels::WeightView;

struct Layer {
  std::vector<float> attn_norm;         // blk.N.attn_norm.weight [n_embd]
  WeightView wq, wk, wv, wo;            // attn_q/k/v/output (Phi-3: views of attn_qkv)
  std::vector<float> bq, bk, bv, bo;    // Qwen2 biases (empty when absent)
  std::vector<float> attn_q_norm, attn_k_norm;  // Qwen3, Gemma 3 per-head norms [n_embd_head_k] (else empty)
  // Gemma 3 (else empty): post_attention_norm.weight and post_ffw_norm.weight
  // [n_embd], the norms of the attention and FFN outputs.
  std::vector<float> attn_post_norm, ffn_post_norm;
  std::vector<float> ffn_norm;          // blk.N.ffn_norm.weight
  WeightView ffn_gate, ffn_up, ffn_down;  // dense FFN (Phi-3: views of fused ffn_up)
  WeightView ffn_gate_inp;              // MoE router [n_embd -> n_expert]
  std::vector<WeightView> gate_exps, up_exps, down_exps;  // per-expert views
  // gpt-oss (else empty): attn_sinks [n_head]; the router's bias
  // ffn_gate_inp.bias [n_expert]; the experts' biases ffn_{gate,up}_exps.bias
  // [n_expert][n_ff] and ffn_down_exps.bias [n_expert][n_embd].
  std::vector<float> attn_sinks;
  std::vector<float> ffn_gate_inp_b, gate_exps_b, up_exps_b, down_exps_b;
  // Qwen3.5's Gated DeltaNet layers (else empty): attn_qkv [n_embd -> conv
  // channels: q, k, v] and attn_gate [n_embd -> d_inner] (the output norm's
  // gate z, llama.cpp's wqkv and wqkv_gate), ssm_beta and ssm_alpha [n_embd ->
  // v heads], ssm_out [d_inner -> n_embd]; ssm_conv1d [conv channels][d_conv]
  // (F32 as ggml_ssm_conv reads it), ssm_dt (.bias) and ssm_a [v heads],
  // ssm_norm [state size]. The attention layers' wq is [n_embd -> 2 x n_q].
  WeightView wqkv, wqkv_gate, ssm_beta, ssm_alpha, ssm_out;
  // Qwen3.5-MoE's shared expert (else empty): ffn_gate_inp_shexp [n_embd -> 1]
  // (its gate's logit), ffn_gate/up_shexp [n_embd -> n_ff_shexp], ffn_down_shexp.
  WeightView ffn_gate_inp_shexp, ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;
  std::vector<float> ssm_conv1d, ssm_dt, ssm_a, ssm_norm;
};

struct Model {
  gguf::File file;
  HParams hp;
  WeightView tok_embd;                  // token_embd.weight [n_embd -> n_vocab rows]
  WeightView output;                    // output.weight, or token_embd when tied
  std::vector<float> output_norm;
  std::vector<float> rope_freqs;        // Llama 3 frequency factors [n_rot/2], or empty
  // Phi-3 LongRoPE frequency factors [n_rot/2] (rope_factors_long/short.weight,
  // one pair for all layers; both or neither), or empty.
  std::vector<float> rope_factors_long, rope_factors_short;
  std::vector<Layer> layers;
  std::unique_ptr<Tokenizer> tokenizer;
  // Interleaved copies of the matrices the active kernels read that way
  // (kernels::interleave_weight; the views above then point here).
  kernels::WeightStore interleaved;
  // The rank pooling's classifier, cls.output.weight [n_embd -> n_cls_out]
  // and cls.output.bias [n_cls_out] (llama.cpp's cls_out, cls_out_b; a
  // Qwen3-Reranker conversion writes the output rows of "yes" and "no"
  // there), or empty (data null, no bias) when the file has none.
  WeightView cls_out;
  std::vector<float> cls_out_b;
  // A qwen3 file without cls.output whose vocabulary has the tokens "yes"
  // and "no" (a Qwen3-Reranker converted before llama.cpp wrote the head):
  // their ids, whose output rows are then the rank head (model/embedding.hpp);
  // else -1.
  token_id rank_yes = -1, rank_no = -1;

  // The frequency factors RoPE divides each pair's frequency by, for a
  // sequence whose context size is n_ctx (null: none). rope_freqs when the
  // file has them; else, for Phi-3 LongRoPE, llama.cpp v0.5.0's
  // llama_model::get_rope_factors (src/llama-model.cpp:2259-2272): the long
  // factors when n_ctx_seq > n_ctx_orig_yarn (rope.scaling.original_context_length),
  // else the short ones, where n_ctx_seq is the context per sequence rounded
  // UP to a multiple of 256 as llama_context does (src/llama-context.cpp:289-295;
  // so synapse's -c N picks the set llama.cpp's -c N picks). synapse's n_ctx
  // is per sequence (KvCache::n_ctx), so the choice is per sequence and a row's
  // result never depends on the other sequences of its batch. [n_rot/2] floats.
  const float* rope_factors(int64_t n_ctx) const;

  // Bytes of every tensor's data (what a decode step streams, roughly).
  uint64_t weight_bytes() const;
  uint64_t n_params() const;
};

// Opens `path` and binds every tensor the architecture needs. Throws
// Error(io) when the file cannot be read, Error(format) naming a missing or
// misshapen tensor, Error(unsupported) naming a tensor of a type synapse
// cannot compute with (e.g. Q8_K, an activation type) or an unknown
// architecture.
std::unique_ptr<Model> load_model(const std::string& path);

// Same, from an already opened file (tests build models in memory).
std::unique_ptr<Model> load_model(gguf::File file);

}  // namespace synapse::model

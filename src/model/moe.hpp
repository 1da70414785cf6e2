// The sparse feed-forward block of Mixtral, Qwen3-MoE, Qwen3.5-MoE and
// gpt-oss (llama.cpp v0.5.0 build_moe_ffn), and Qwen3.5-MoE's shared expert.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.hpp"
#include "kernels/matmul.hpp"
#include "model/model.hpp"

namespace synapse::model {

class ProductObserver;  // forward.hpp

// Buffers moe_ffn and shared_expert_ffn reuse from call to call
// (ForwardScratch holds one): each keeps the largest size it was used at, so
// a step of no more rows than an earlier one allocates none of them. Nothing
// in them survives a call that matters. Not thread-safe.
struct MoeScratch {
  std::vector<float> probs;    // [n][n_expert]: router logits, then probabilities
  std::vector<float> weight;   // [n][n_used]: the chosen experts' weights
  std::vector<int64_t> chosen; // [n][n_used]: the chosen experts, in selection order
  // The routed rows ("slots" j = i * n_used + s: row i's s-th expert) grouped
  // by expert: expert e's are slots[begin[e] .. begin[e + 1]), ascending;
  // src_rows[k] = slots[k] / n_used, where[j] the k of slot j.
  std::vector<int64_t> begin, fill, slots, src_rows, where;
  std::vector<float> gate, up;  // [n * n_used][n_ff] in grouped order
  std::vector<float> y;         // [n * n_used][n_embd]: each slot's expert output, grouped order
  std::vector<float> x_obs;     // [n * n_used][n_embd]: gathered inputs, for an observer only
  std::vector<kernels::MatmulOut> products;
  std::vector<float> sh_gate, sh_up, sh_logit, sh_y;  // the shared expert's
};

// The routed experts over n rows, out = sum over each row's chosen experts of
// weight x expert(h) (llama.cpp build_moe_ffn). Routing per row, by
// hp.expert_gating: softmax_norm (Mixtral, Qwen3-MoE): router logits ->
// softmax -> top n_expert_used (largest first, ties to the lower id) ->
// weights / their sum; softmax_weight (gpt-oss): router logits +
// ffn_gate_inp.bias -> top n_expert_used of the logits -> the weights the
// softmax of those. Each expert SwiGLU (or gpt-oss's swiglu_oai over gate +
// its bias and up + its bias), then down (+ its bias); the weighted sum in
// selection order.
// h, out: [n][n_embd]. h is converted to the experts' vec_dot types once for
// the layer; the rows routed to each expert are gathered from that
// conversion (kernels::Activations' gathered view) and every expert's gate
// and up, then every expert's down, run as one job each (kernels::
// matmul_many over per-expert row ranges): each expert's weights are read
// once per call, whatever the number of rows routed to it. Each output
// element is still one vec_dot of its own row, so a row's bits do not depend
// on which other rows share the call, nor on the thread count (contract 2).
// Experts sum in the dense products' order, not ggml_mul_mat_id's (issue 41:
// the fastest order that keeps contract 2). buffers: the activation
// conversions' storage (the ForwardScratch's), or null. obs: shown the
// router's input, then each expert's gate and up input (expert id order),
// then each expert's down input, or null. Throws Error as kernels::matmul_many.
void moe_ffn(const HParams& hp, const Layer& L, const float* h, float* out, int64_t n, base::ThreadPool& pool,
             MoeScratch& sc, kernels::ActivationBuffers* buffers, ProductObserver* obs);

// Qwen3.5-MoE's shared expert over n rows (llama.cpp v0.5.0
// src/models/qwen35moe.cpp build_layer_ffn): out += down(silu(gate h) * up h)
// * sigmoid(ffn_gate_inp_shexp h), the routed experts' sum first (ggml_add of
// the MoE output and the gated shared one). h, out: [n][n_embd]. obs: shown
// up's, gate's and the gate logit's input, then down's, or null.
void shared_expert_ffn(const HParams& hp, const Layer& L, const float* h, float* out, int64_t n,
                       base::ThreadPool& pool, MoeScratch& sc, kernels::ActivationBuffers* buffers,
                       ProductObserver* obs);

}  // namespace synapse::model

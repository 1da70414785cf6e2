// Qwen3.5's Gated DeltaNet layer (Yang et al. 2024, "Gated Delta Networks"),
// as llama.cpp v0.5.0 computes it on the CPU: src/models/qwen35.cpp
// build_layer_attn_linear and delta-net-base.cpp with its fused
// ggml_gated_delta_net op (cparams.fused_gdn_ar/_ch, on by default), which
// runs the delta rule token by token in prefill and decode alike.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.hpp"
#include "kernels/matmul.hpp"
#include "model/kv_cache.hpp"
#include "model/model.hpp"

namespace synapse::model {

struct BatchRow;         // forward.hpp
class ProductObserver;   // forward.hpp

// Buffers delta_net_layer reuses from call to call (ForwardScratch holds
// one); nothing in them survives a call that matters. Not thread-safe.
struct DeltaNetScratch {
  std::vector<float> qkv, z, beta, alpha, core;
  std::vector<float*> conv_states;  // per row: its sequence's conv state of the layer
};

// One Gated DeltaNet layer (layer il of m, hp.is_recurrent(il)) over the
// pass's n rows: x [n][n_embd] the attention-normed input, out [n][n_embd]
// what the layer adds to the residual (ssm_out's product). Per row, as
// llama.cpp's graph: qkv = attn_qkv x, z = attn_gate x, beta =
// sigmoid(ssm_beta x), g = softplus(ssm_alpha x + ssm_dt) * ssm_a; qkv through
// the causal depthwise convolution (ssm_conv1d, d_conv taps over the row's
// sequence's previous d_conv - 1 inputs: its conv state) and SiLU; q and k
// L2-normed per head (ggml_rms_norm with eps / d, times 1/sqrt(d)); then per v
// head h (q/k head h % n_group, ggml's broadcast) the delta rule on the
// sequence's state S [d][d]: S *= exp(g); S += k (beta (v - S^T k))^T;
// o = S^T q / sqrt(d); o RMSNormed (ssm_norm) times silu(z); out = ssm_out o.
// The rows of one sequence are taken in batch order, each after the one
// before: a row's bits do not depend on the rows beside it or the thread
// count (contract 2). Updates each row's sequence's RecurrentState (it must
// not be empty; forward_batch checks). seqs/rows as forward_batch's. act:
// the activation conversions' storage, or null. obs: shown the inputs of
// attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_out (in that order), or null.
void delta_net_layer(const Model& m, int64_t il, std::span<KvCache* const> seqs, const BatchRow* rows, int64_t n,
                     const float* x, float* out, base::ThreadPool& pool, DeltaNetScratch& sc,
                     kernels::ActivationBuffers* act, ProductObserver* obs);

// The recurrent state a sequence of model m needs (empty when m has no
// recurrent layer): per DeltaNet layer d_conv - 1 inputs of every conv
// channel and a [state][state] matrix per v head, zeroed.
RecurrentState make_recurrent_state(const HParams& hp);
// Its size in bytes (RecurrentState::bytes), without making one.
size_t recurrent_state_bytes(const HParams& hp);

}  // namespace synapse::model

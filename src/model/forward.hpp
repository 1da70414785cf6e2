// The forward pass of every supported architecture (one function, flags from
// HParams). Reading order: embed, the layer loop (attention then FFN), output.
#pragma once

#include <initializer_list>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "model/model.hpp"
#include "model/delta_net.hpp"
#include "model/moe.hpp"
#include "kernels/matmul.hpp"
#include "model/kv_cache.hpp"
#include "base/thread_pool.hpp"

namespace synapse::model {

// One row of a batch: a token id (or an embedding row of n_embd floats in
// place of the token's embedding, e.g. an image-token position), the
// sequence it belongs to (an index into the `seqs` span of forward_batch) and
// whether its logits are wanted. A row's position is its sequence's n_past
// plus the number of earlier rows of the same sequence in the batch.
struct BatchRow {
  token_id token = 0;
  const float* embd = nullptr;  // [n_embd] or null (then `token` is used)
  int32_t seq = 0;
  bool logits = false;
};

// The most rows one pass of the layers takes: forward_batch cuts a larger
// batch into passes of this many rows, in batch order (llama.cpp's n_ubatch
// plays this part there), so that a pass's activations and their quantized
// copies stay in the caches while every weight tile is run over them. Measured:
// docs/PERFORMANCE.md, "Serving throughput".
inline constexpr int64_t kMaxPassRows = 256;

// Buffers forward_batch reuses from one call to the next (a Context holds
// one), so that a step allocates nothing: a fresh vector of megabytes is a
// fresh mmap, and every page of it a page fault and a page of zeroes, on each
// call. Holds no state between calls besides the capacity; not thread-safe
// (one call at a time per scratch).
// The buffers of the decode rows whose attention a pass splits along the
// positions (forward's attend; kernels::attend_chunk_scores), kept between
// passes so a decode step allocates nothing.
struct SplitAttention {
  // One split row: its batch row, chunks, positions (n_kv), the offsets of
  // its group 0 buffers in scores, chunk_max/chunk_sum and partial (group
  // g's follow at g times their size), and its first work item.
  struct Job {
    int64_t row, n_chunks, n_kv, scores, stats, partial, first_item;
  };
  std::vector<Job> jobs;
  std::vector<int64_t> blocks;  // the query blocks attended whole
  std::vector<float> scores, chunk_max, partial;
  std::vector<double> chunk_sum;
};

struct ForwardScratch {
  std::vector<int64_t> pos, n_new, batched_rows, block_rows, block_begin;
  std::vector<int64_t> snapshot_at, snapshot_pos;  // per sequence: its next snapshot position, its position
  std::vector<float> x, cur, q, k, v, att, tmp, gate, up, rope_cos, rope_sin, rope_cos_swa, rope_sin_swa, q_temp;
  std::vector<float> normed;  // [n_wanted][n_embd]: the final-normed rows whose logits are wanted
  std::vector<BatchRow> one_seq;  // forward's rows
  std::vector<std::pair<const KvPool*, int64_t>> pool_pages;  // the KV pages a batch needs of each pool
  // Qwen3.5: the attention layers' q projection [n][2 x n_q] (per head q,
  // then its output gate), RoPE at position 0 (IMROPE's 4th section), the
  // DeltaNet layers' buffers.
  std::vector<float> attn_gate, rope_cos0, rope_sin0;
  DeltaNetScratch delta_net;
  MoeScratch moe;  // the MoE layers' (moe_ffn, shared_expert_ffn)
  SplitAttention split;  // decode rows at depth (forward's attention)
  kernels::ActivationBuffers act;  // the quantized and packed activation rows of every product
};

// What forward_batch returns for the rows whose `logits` flag is set.
enum class ForwardOutput {
  logits,  // [n_wanted][n_vocab]: the vocabulary projection
  hidden,  // [n_wanted][n_embd]: the final-normed hidden state (llama.cpp's
           // result_norm, t_embd: what its embeddings pool), no projection
};

// The input of one weight product, as an observer of the forward pass sees
// it: what ggml's eval callback shows llama-imatrix of a MUL_MAT or
// MUL_MAT_ID node (its src1 and src0's name).
struct ProductInput {
  // The weight's GGUF tensor: "blk.0.attn_q.weight", "blk.0.attn_qkv.weight"
  // (Phi-3's fused q/k/v: one product, reported once), "blk.0.ffn_up_exps.weight",
  // "output.weight" (or "token_embd.weight" when the output is tied to it).
  std::string_view tensor;
  // [n_rows][n_in] F32: the rows the product reads, before any conversion of
  // activations to the weight's vec_dot type (ggml's src1).
  const float* x = nullptr;
  int64_t n_rows = 0, n_in = 0;
  // An expert's product (expert >= 0: one slice of a merged 3-D expert
  // tensor of n_expert slices, ggml_mul_mat_id): row r is the pass's row
  // slots[r] / n_used in its (slots[r] % n_used)-th selected expert, slots
  // ascending. expert = -1 (and slots null) for a plain product.
  int64_t expert = -1, n_expert = 0, n_used = 0;
  const int64_t* slots = nullptr;
};

// Receives the input of every weight product of forward_batch, on the
// calling thread, in the forward pass's order (per pass of at most
// kMaxPassRows rows: each layer's q/k/v, attn_output (a Gated DeltaNet
// layer's instead: attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_out), the
// FFN's products (MoE: the router, then per expert in id order gate and
// up, then per expert in id order down; Qwen3.5-MoE's shared expert then up,
// gate and its gate's logit, down), then, once for the batch, the output
// over the rows whose logits are wanted). The pointers are valid during the
// call only. An exception thrown by observe leaves the caches of that
// batch's sequences in an unspecified state.
class ProductObserver {
 public:
  virtual void observe(const ProductInput& in) = 0;

 protected:
  ~ProductObserver() = default;
};

// y [n_rows][bias.size()] += bias, row by row (a product's bias, ggml_add
// broadcasting it); nothing for an empty bias (a tensor the file lacks).
void add_bias(std::vector<float>& y, int64_t n_rows, const std::vector<float>& bias);

// The GGUF tensor a view reads: its name without the "[part]" suffix of a
// slice (Phi-3's fused q/k/v and gate/up, the experts of a merged tensor).
std::string_view product_tensor(const kernels::WeightView& w);

// Shows obs (if not null) the input x [n][n_in] of the products of ws, once
// per distinct tensor (views of one fused tensor are one product in
// llama.cpp), as plain products (ProductInput::expert -1).
void observe_products(ProductObserver* obs, std::initializer_list<const kernels::WeightView*> ws, const float* x,
                      int64_t n, int64_t n_in);

// Runs a batch whose rows may belong to different sequences, each with its
// own KV cache, mixing prefill chunks and decode steps (continuous batching).
// Each sequence's new rows are appended to its cache and its n_past advanced.
//
// logits: resized to [n_wanted][n_vocab], the wanted rows in batch order
// (with `what` hidden: [n_wanted][n_embd], their final-normed hidden states).
// Row b's logits and cache contents are bit-identical to running its
// sequence alone, in one call or token by token, at any thread count
// (DESIGN.md contract 2: every op is per row, reduced in a fixed order).
// What a row's result depends on besides its sequence's tokens: its position
// and its own sequence's n_ctx (Phi-3 LongRoPE's factor set, Model::rope_factors).
//
// scratch: buffers kept for the next call, or null (then the call allocates
// its own). observer: shown every product's input, or null (the cost then
// is one pointer test per product).
//
// Throws Error(out_of_range) for a token id outside [0, n_vocab) or a
// sequence index outside `seqs`, Error(invalid_argument) for an empty batch
// or when a sequence would pass its n_ctx (naming the numbers), or when the
// model has recurrent layers and a sequence's cache holds no recurrent state
// of its size (a cache not from make_kv_cache); no cache is changed then.
void forward_batch(const Model& m, std::span<model::KvCache* const> seqs, std::span<const BatchRow> rows,
                   std::vector<float>& logits, base::ThreadPool& pool, ForwardScratch* scratch = nullptr,
                   ForwardOutput what = ForwardOutput::logits, ProductObserver* observer = nullptr);

// One sequence: runs `tokens` at positions kv.n_past() .. kv.n_past() + n - 1.
// logits: [n][n_vocab] when all_logits, else [1][n_vocab] (the last row).
// Same guarantees and errors as forward_batch.
void forward(const Model& m, model::KvCache& kv, std::span<const token_id> tokens, bool all_logits,
             std::vector<float>& logits, base::ThreadPool& pool, ForwardScratch* scratch = nullptr,
             ProductObserver* observer = nullptr);

// A KV cache sized for model `m` and `n_ctx` positions (the sliding window,
// if the model has one, bounds the rows actually stored); a hybrid model's
// holds K/V rows for its attention layers only (HParams::kv_layer) and the
// recurrent state of its DeltaNet layers (make_recurrent_state). Its pages
// come from `pool` (one of make_kv_pool's for this model, shared with other
// sequences; its types are the cache's), or from a pool of its own of
// `types` when null.
model::KvCache make_kv_cache(const Model& m, int64_t n_ctx, std::shared_ptr<model::KvPool> pool = nullptr,
                             model::KvTypes types = {});

// A pool of at most max_pages pages (0: no limit) of model `m`'s K/V shapes
// (its attention layers only, as make_kv_cache's), rows stored as `types`.
// Throws Error(invalid_argument) (model::check_kv_type) when a type is no
// cache type or its block does not divide the model's head size, else as
// KvPool's constructor.
std::shared_ptr<model::KvPool> make_kv_pool(const Model& m, int64_t max_pages, model::KvTypes types = {});

}  // namespace synapse::model

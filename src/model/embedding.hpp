// Embeddings and rerank scores: the final-normed hidden states of a batch of
// inputs, pooled per input and normalised, as llama.cpp v0.5.0 computes them
// (build_pooling in src/llama-graph.cpp, the extraction in
// llama_context::decode, common_embd_normalize in common/common.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.hpp"
#include "model/forward.hpp"
#include "model/model.hpp"

namespace synapse::model {

// llama.cpp's llama_pooling_type, with its values.
enum class Pooling : int32_t {
  unspecified = -1,  // the model's <arch>.pooling_type, else none
  none = 0,          // every token's hidden state
  mean = 1,          // the mean of the input's hidden states
  cls = 2,           // the first token's
  last = 3,          // the last token's (Qwen3-Embedding)
  rank = 4,          // a relevance score from a classifier head (rerankers)
};

// The pooling an embedding runs with: `requested` unless unspecified, else
// the file's <arch>.pooling_type, else none (llama_context's rule,
// src/llama-context.cpp:216-221). Thread-safe (pure).
Pooling resolve_pooling(const Model& m, Pooling requested);

// Throws Error(unsupported) naming the file unless the model can score with
// rank pooling: it has cls.output.weight, or it is a qwen3 model whose
// vocabulary has the tokens "yes" and "no" (a Qwen3-Reranker file converted
// without the classifier: the head is then those two rows of the output
// matrix, the rows convert_hf_to_gguf.py would have copied into cls.output).
void check_rank_head(const Model& m);

// common_embd_normalize(in, out, n, embd_normalize): -1 none, 0 max-abs
// scaled to int16 range (x * 32760 / max|x|), 2 Euclidean, any other p the
// p-norm; the norm summed in double over float terms, then out = in * (float)(1 / norm)
// (0 when the norm is 0). in, out: [n], may alias.
void normalize_embedding(const float* in, float* out, int64_t n, int embd_normalize);

// What one input gives.
struct EmbeddingRows {
  // pooling none: one row per token, [n_tokens][n_embd]; mean, cls, last:
  // one row [n_embd]; rank: one row of the classifier's outputs [n_cls_out]
  // (Qwen3: softmax over (yes, no), so rows[0][0] is P(yes)).
  std::vector<std::vector<float>> rows;
  int64_t n_tokens = 0;
};

// Runs every input as a sequence of its own, from position 0, in ONE
// forward_batch call (passes of kMaxPassRows rows) with the final-normed
// hidden states as output (no vocabulary projection; the final norm only for
// the rows the pooling reads), then pools each input and, except
// for rank, normalises every row with `embd_normalize` (-1: as is).
//
// Each input's result is bit-identical whatever else is in the call (the
// forward pass's contract 2; pooling and normalisation read the input's own
// rows only, in a fixed order). Mean pooling sums the rows in token order in
// double, each product x * (float)(1 / n) in float (llama.cpp: ggml_mul_mat of
// the transposed rows by inp_mean, whose reduction order varies with the
// ubatch; the two agree to float rounding).
//
// n_ctx: the longest input accepted. Each input runs in a cache of its own
// length, dropped at the end; a Phi-3 LongRoPE file thus picks its factor set
// from the input's length (llama.cpp: from the context's n_ctx).
//
// Throws Error(invalid_argument) for an empty input list, an empty input or
// one longer than n_ctx (naming its index), Error(out_of_range) for a token id
// outside the vocabulary, Error(unsupported) for rank pooling without a head
// (check_rank_head). `pooling` must be resolved (not unspecified).
// Thread-safety: as forward_batch (the pool and scratch are the caller's).
std::vector<EmbeddingRows> embed(const Model& m, std::span<const std::vector<token_id>> inputs, Pooling pooling,
                                 int embd_normalize, int64_t n_ctx, base::ThreadPool& pool,
                                 ForwardScratch* scratch = nullptr);

}  // namespace synapse::model

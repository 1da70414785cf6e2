// The forward pass of every supported architecture (one function, flags from
// HParams). Reading order: embed, the layer loop (attention then FFN), output.
#pragma once

#include <span>
#include <vector>

#include "model/model.hpp"
#include "runtime/kv_cache.hpp"
#include "runtime/thread_pool.hpp"

namespace synapse::model {

// Runs `tokens` as the next rows of one sequence, at positions kv.n_past() ..
// kv.n_past() + n - 1, appends their K/V to `kv` and advances it.
//
// logits: resized to [n][n_vocab] when all_logits, else [1][n_vocab] (the
// last row), row-major float. Each row's logits are bit-identical whether the
// tokens come in one call or one at a time (every op is per row, reduced in a
// fixed order) and for any thread count.
//
// Throws Error(out_of_range) for a token id outside [0, n_vocab) and
// Error(invalid_argument) when the positions would pass kv.n_ctx() (the
// message gives both numbers); the cache is unchanged then.
void forward(const Model& m, runtime::KvCache& kv, std::span<const token_id> tokens, bool all_logits,
             std::vector<float>& logits, runtime::ThreadPool& pool);

// A KV cache sized for model `m` and `n_ctx` positions (the sliding window,
// if the model has one, bounds the rows actually stored).
runtime::KvCache make_kv_cache(const Model& m, int64_t n_ctx);

}  // namespace synapse::model

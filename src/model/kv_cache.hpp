// The KV cache of one sequence: per layer, K and V rows stored as F16 (as
// llama.cpp's default type_k = type_v = f16), one row of n_embd_k_gqa /
// n_embd_v_gqa values per cached position.
//
// Sliding-window models keep a circular buffer of min(n_swa, n_ctx) rows:
// position p lives in slot p % capacity, and memory stays bounded however long
// the sequence runs (seed 000 "Sliding Window"). A model whose layers mix
// windowed and full attention (gpt-oss, Gemma 3; HParams::kv_window) keeps every
// position in every layer: its windowed layers read only their window, but
// their rows are not stored apart (llama.cpp's llama_kv_cache_iswa does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "base/huge_pages.hpp"
#include "model/recurrent_state.hpp"
#include "quant/fp16.hpp"

namespace synapse::model {

class KvCache {
 public:
  // n_ctx: the most positions this sequence may reach. window: 0 for full
  // attention, else the sliding window in positions. Throws
  // Error(invalid_argument) for n_ctx < 1.
  KvCache(int64_t n_layer, int64_t n_embd_k, int64_t n_embd_v, int64_t n_ctx, int64_t window);

  int64_t n_ctx() const { return n_ctx_; }
  int64_t capacity() const { return capacity_; }  // rows per layer actually stored
  int64_t n_past() const { return n_past_; }      // positions 0 .. n_past-1 are cached
  void set_n_past(int64_t n) { n_past_ = n; }
  void clear() {
    n_past_ = 0;
    recurrent_.clear();
  }

  // A copy holding positions [0, n_prefix) of this sequence (a fork shares
  // the prompt, then the two continue apart). Throws Error(invalid_argument)
  // if n_prefix > n_past(), or if a circular buffer no longer holds every
  // position the copy would need to read, or if the sequence has a recurrent
  // state and n_prefix is neither n_past() nor 0 (RecurrentState::check_keep:
  // such a state cannot be cut back).
  KvCache fork(int64_t n_prefix) const;
  // Keeps positions [0, n_keep) in place (the next row is position n_keep).
  // Throws as fork().
  void truncate(int64_t n_keep);

  int64_t slot(int64_t pos) const { return pos % capacity_; }
  quant::ggml_fp16_t* k(int64_t layer, int64_t pos) { return &k_[index(layer, pos, n_embd_k_)]; }
  quant::ggml_fp16_t* v(int64_t layer, int64_t pos) { return &v_[index(layer, pos, n_embd_v_)]; }
  const quant::ggml_fp16_t* k(int64_t layer, int64_t pos) const { return &k_[index(layer, pos, n_embd_k_)]; }
  const quant::ggml_fp16_t* v(int64_t layer, int64_t pos) const { return &v_[index(layer, pos, n_embd_v_)]; }

  // Bytes held by K and V together.
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(quant::ggml_fp16_t); }

  // The sequence's recurrent state beside its K/V rows (hybrid models, e.g.
  // Qwen3.5's DeltaNet layers; empty otherwise): cleared, forked and
  // truncated with the cache, under RecurrentState's rules.
  RecurrentState& recurrent() { return recurrent_; }
  const RecurrentState& recurrent() const { return recurrent_; }

 private:
  // Error(invalid_argument) unless positions [0, n_prefix) can be kept.
  void check_prefix(const char* what, int64_t n_prefix) const;
  size_t index(int64_t layer, int64_t pos, int64_t width) const {
    return (static_cast<size_t>(layer) * capacity_ + static_cast<size_t>(slot(pos))) * width;
  }
  int64_t n_layer_, n_embd_k_, n_embd_v_, n_ctx_, capacity_;
  int64_t n_past_ = 0;
  std::vector<quant::ggml_fp16_t, base::HugePageAllocator<quant::ggml_fp16_t>> k_, v_;
  RecurrentState recurrent_;
};

}  // namespace synapse::model

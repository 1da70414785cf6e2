// The recurrent state of one sequence for a hybrid model's Gated DeltaNet
// layers (Qwen3.5: llama.cpp v0.5.0's llama_memory_recurrent, its r and s
// tensors, F32): per recurrent layer the short convolution's last d_conv - 1
// inputs and the delta rule's state matrix per v head. A model without
// recurrent layers has an empty one (no memory, every call a no-op).
//
// Unlike K/V rows a recurrent state cannot be cut back to an earlier position:
// it holds the whole prefix folded into a fixed size. So a sequence holding one
// keeps everything (n_keep == n_past), nothing (n_keep == 0, the state
// zeroed), or goes back to a snapshot (a copy of this state taken at that
// position: KvCache's snapshots, issue 50 item 4); any other truncate or fork
// is refused with Error(invalid_argument) (check_keep).
//
// Not thread-safe; one sequence's state is written by one forward call at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace synapse::model {

class RecurrentState {
 public:
  RecurrentState() = default;  // none: the model has no recurrent layer
  // recurrent[il] != 0 for each layer that holds a state (HParams::recurrent_layers);
  // conv_size / ssm_size: floats of one layer's convolution and delta-rule
  // state. Starts zeroed, as llama.cpp's cells start.
  RecurrentState(const std::vector<uint8_t>& recurrent, int64_t conv_size, int64_t ssm_size);

  bool empty() const { return conv_.empty() && ssm_.empty(); }
  // Layer il's convolution state [channels][d_conv - 1] and delta-rule state
  // [v heads][state][state] (il must be a recurrent layer).
  float* conv(int64_t il) { return &conv_[slot(il) * conv_size_]; }
  float* ssm(int64_t il) { return &ssm_[slot(il) * ssm_size_]; }
  // Zeroes every state (a sequence back at position 0).
  void clear();
  // Throws Error(invalid_argument) naming `what` ("truncate", "fork") unless
  // the state itself can follow the sequence to n_keep positions: n_keep ==
  // n_past or 0, or the state is empty (KvCache accepts its snapshots'
  // positions before asking).
  void check_keep(const char* what, int64_t n_keep, int64_t n_past) const;
  // The same test without the error: whether check_keep would pass.
  bool can_keep(int64_t n_keep, int64_t n_past) const { return empty() || n_keep == n_past || n_keep == 0; }
  size_t bytes() const { return (conv_.size() + ssm_.size()) * sizeof(float); }

 private:
  size_t slot(int64_t il) const { return static_cast<size_t>(slots_[static_cast<size_t>(il)]); }
  std::vector<int64_t> slots_;  // per layer: its index among the recurrent layers, or -1
  size_t conv_size_ = 0, ssm_size_ = 0;
  std::vector<float> conv_, ssm_;
};

}  // namespace synapse::model

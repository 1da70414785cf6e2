#include "model/recurrent_state.hpp"

#include <algorithm>
#include <string>

#include "synapse/error.hpp"

namespace synapse::model {

RecurrentState::RecurrentState(const std::vector<uint8_t>& recurrent, int64_t conv_size, int64_t ssm_size)
    : conv_size_(static_cast<size_t>(conv_size)), ssm_size_(static_cast<size_t>(ssm_size)) {
  int64_t n = 0;
  slots_.reserve(recurrent.size());
  for (uint8_t r : recurrent) slots_.push_back(r ? n++ : -1);
  conv_.assign(static_cast<size_t>(n) * conv_size_, 0.0f);
  ssm_.assign(static_cast<size_t>(n) * ssm_size_, 0.0f);
}

void RecurrentState::clear() {
  std::fill(conv_.begin(), conv_.end(), 0.0f);
  std::fill(ssm_.begin(), ssm_.end(), 0.0f);
}

void RecurrentState::check_keep(const char* what, int64_t n_keep, int64_t n_past) const {
  if (can_keep(n_keep, n_past)) return;
  throw Error(Errc::invalid_argument,
              std::string(what) + ": cannot keep " + std::to_string(n_keep) + " of " + std::to_string(n_past) +
                  " positions: the model's recurrent (DeltaNet) state holds the whole prefix and cannot be cut "
                  "back; keep all positions, none (0) or a snapshot's position, and process the rest again");
}

}  // namespace synapse::model

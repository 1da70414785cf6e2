#include "model/kv_cache.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "synapse/error.hpp"

namespace synapse::model {

KvCache::KvCache(int64_t n_layer, int64_t n_embd_k, int64_t n_embd_v, int64_t n_ctx, int64_t window)
    : n_layer_(n_layer), n_embd_k_(n_embd_k), n_embd_v_(n_embd_v), n_ctx_(n_ctx) {
  if (n_ctx < 1) throw Error(Errc::invalid_argument, "context size must be at least 1, got " + std::to_string(n_ctx));
  capacity_ = window > 0 ? std::min(window, n_ctx) : n_ctx;
  k_.assign(static_cast<size_t>(n_layer_ * capacity_ * n_embd_k_), 0);
  v_.assign(static_cast<size_t>(n_layer_ * capacity_ * n_embd_v_), 0);
}

void KvCache::check_prefix(const char* what, int64_t n_prefix) const {
  if (n_prefix < 0 || n_prefix > n_past_)
    throw Error(Errc::invalid_argument, std::string(what) + ": prefix of " + std::to_string(n_prefix) +
                                            " positions, the sequence has " + std::to_string(n_past_));
  if (n_prefix < n_past_ && n_past_ > capacity_)
    throw Error(Errc::invalid_argument, std::string(what) + ": positions before " +
                                            std::to_string(n_past_ - capacity_) +
                                            " have left the sliding-window cache; cannot keep a prefix of " +
                                            std::to_string(n_prefix));
  recurrent_.check_keep(what, n_prefix, n_past_);
}

KvCache KvCache::fork(int64_t n_prefix) const {
  check_prefix("fork", n_prefix);
  KvCache copy = *this;
  copy.n_past_ = n_prefix;
  if (n_prefix == 0) copy.recurrent_.clear();
  return copy;
}

void KvCache::truncate(int64_t n_keep) {
  check_prefix("truncate", n_keep);
  n_past_ = n_keep;
  if (n_keep == 0) recurrent_.clear();
}

}  // namespace synapse::model

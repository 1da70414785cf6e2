// Collecting an importance matrix (imatrix.hpp, ImatrixAccumulator; the
// public ImatrixCollector): llama.cpp v0.5.0 tools/imatrix/imatrix.cpp,
// IMatrixCollector::collect_imatrix and save_imatrix.
#include <algorithm>
#include <cmath>
#include <utility>

#include "runtime/imatrix.hpp"
#include "synapse/error.hpp"

namespace synapse::runtime {
namespace {

bool all_finite(const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i])) return false;
  return true;
}

// acc[j] += x[j] * x[j]: the product rounded to float, then the add (the
// build's -ffp-contract=off keeps them apart, as ggml's build does here).
void add_squares(float* acc, const float* x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) acc[j] += x[j] * x[j];
}

[[noreturn]] void non_finite(std::string_view tensor) {
  throw Error(Errc::format, "imatrix: non-finite values in the activations of " + std::string(tensor) +
                                " (the model's weights or the text give inf or nan)");
}

}  // namespace

ImatrixAccumulator::Stats& ImatrixAccumulator::entry(std::string_view tensor, int64_t n_in, int64_t n_mat) {
  auto it = stats_.find(tensor);
  if (it == stats_.end()) {
    Stats& e = stats_[std::string(tensor)];
    e.values.assign(static_cast<size_t>(n_in * n_mat), 0.0f);
    e.counts.assign(static_cast<size_t>(n_mat), 0);
    return e;
  }
  Stats& e = it->second;
  if (e.values.size() != static_cast<size_t>(n_in * n_mat) || e.counts.size() != static_cast<size_t>(n_mat))
    throw Error(Errc::format, "imatrix: inconsistent size for " + std::string(tensor) + " (" +
                                  std::to_string(e.values.size()) + " sums in " + std::to_string(e.counts.size()) +
                                  " matrices, now " + std::to_string(n_in * n_mat) + " in " + std::to_string(n_mat) + ")");
  return e;
}

void ImatrixAccumulator::observe(const model::ProductInput& in) {
  if (in.expert >= 0) {
    if (in.expert >= in.n_expert || in.n_used <= 0)
      throw Error(Errc::invalid_argument, "imatrix: expert " + std::to_string(in.expert) + " of " +
                                              std::string(in.tensor) + ", which has " + std::to_string(in.n_expert));
    Stats& e = entry(in.tensor, in.n_in, in.n_expert);
    // llama visits (slot, token) with the slot outside: this expert's rows
    // sorted by slot, each slot's in token order (slots[] is token-major).
    order_.resize(static_cast<size_t>(in.n_rows));
    for (int64_t r = 0; r < in.n_rows; ++r) order_[r] = r;
    std::stable_sort(order_.begin(), order_.end(),
                     [&](int64_t a, int64_t b) { return in.slots[a] % in.n_used < in.slots[b] % in.n_used; });
    float* acc = e.values.data() + in.expert * in.n_in;
    for (int64_t r : order_) add_squares(acc, in.x + r * in.n_in, in.n_in);
    e.counts[in.expert] += in.n_rows;
    if (in.n_rows > 0 && !all_finite(acc, in.n_in)) non_finite(in.tensor);
    return;
  }
  if (!dense_) return;
  if (!(in.tensor.starts_with("blk.") || (process_output_ && in.tensor == "output.weight"))) return;
  Stats& e = entry(in.tensor, in.n_in, 1);
  for (int64_t r = 0; r < in.n_rows; ++r) add_squares(e.values.data(), in.x + r * in.n_in, in.n_in);
  if (!all_finite(e.values.data(), in.n_in)) non_finite(in.tensor);
  e.counts[0] += in.n_rows;
}

int32_t ImatrixAccumulator::chunk_count(int32_t chunk_size) const {
  int64_t most = 0;
  for (const auto& [name, e] : stats_)
    for (int64_t c : e.counts) most = std::max(most, c);
  return static_cast<int32_t>(most / chunk_size);
}

Imatrix ImatrixAccumulator::result(std::vector<std::string> datasets, int32_t chunk_size) const {
  Imatrix m;
  for (const auto& [name, e] : stats_) m.entries[name] = {e.values, e.counts};
  m.datasets = std::move(datasets);
  m.chunk_count = chunk_count(chunk_size);
  m.chunk_size = chunk_size;
  m.has_metadata = true;
  return m;
}

}  // namespace synapse::runtime

namespace synapse {

ImatrixCollector::ImatrixCollector(bool process_output) : impl_(std::make_unique<Impl>(process_output)) {}
ImatrixCollector::ImatrixCollector(ImatrixCollector&&) noexcept = default;
ImatrixCollector& ImatrixCollector::operator=(ImatrixCollector&&) noexcept = default;
ImatrixCollector::~ImatrixCollector() = default;

void ImatrixCollector::set_ubatch_tokens(int64_t n_tokens) { impl_->acc.set_ubatch_tokens(n_tokens); }

int32_t ImatrixCollector::chunk_count(int32_t chunk_size) const {
  if (chunk_size <= 0) throw Error(Errc::invalid_argument, "imatrix: chunk size " + std::to_string(chunk_size) + " (must be > 0)");
  return impl_->acc.chunk_count(chunk_size);
}

size_t ImatrixCollector::save(const std::string& path, const std::vector<std::string>& datasets,
                              int32_t chunk_size) const {
  if (chunk_size <= 0) throw Error(Errc::invalid_argument, "imatrix: chunk size " + std::to_string(chunk_size) + " (must be > 0)");
  const runtime::Imatrix m = impl_->acc.result(datasets, chunk_size);
  runtime::write_imatrix(m, path);
  return m.entries.size();
}

}  // namespace synapse

// Collecting an importance matrix (imatrix.hpp, ImatrixAccumulator; the
// public ImatrixCollector): llama.cpp v0.5.0 tools/imatrix/imatrix.cpp,
// IMatrixCollector::collect_imatrix and save_imatrix.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

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
  // One count over several experts' sums: a loaded legacy file's, broadcast
  // to each expert (llama-imatrix's collect_imatrix).
  if (e.counts.size() == 1 && n_mat > 1) e.counts.resize(static_cast<size_t>(n_mat), e.counts[0]);
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

void ImatrixAccumulator::add(const Imatrix& file, int32_t chunk_size) {
  for (const auto& [name, in] : file.entries) {
    Stats& e = stats_[name];
    if (e.values.empty()) {
      e.values.assign(in.sums.size(), 0.0f);
    } else if (e.values.size() != in.sums.size()) {
      throw Error(Errc::format, "imatrix: " + name + " has " + std::to_string(in.sums.size()) + " sums, " +
                                    std::to_string(e.values.size()) + " before");
    }
    if (file.is_legacy) {
      // Legacy values are (sums / count) * ncall and its count ncall:
      // times chunk_size, sums and counts again (approximately).
      if (e.counts.empty()) e.counts.assign(1, 0);
      for (size_t j = 0; j < in.sums.size(); ++j) e.values[j] += in.sums[j] * static_cast<float>(chunk_size);
      for (int64_t& c : e.counts) c += in.counts[0] * chunk_size;
      continue;
    }
    if (e.counts.empty()) {
      e.counts.assign(in.counts.size(), 0);
    } else if (e.counts.size() == 1 && in.counts.size() > 1) {
      e.counts.resize(in.counts.size(), e.counts[0]);
    } else if (e.counts.size() != in.counts.size()) {
      throw Error(Errc::format, "imatrix: " + name + " has " + std::to_string(in.counts.size()) + " counts, " +
                                    std::to_string(e.counts.size()) + " before");
    }
    for (size_t j = 0; j < in.sums.size(); ++j) e.values[j] += in.sums[j];
    for (size_t j = 0; j < in.counts.size(); ++j) e.counts[j] += in.counts[j];
  }
}

namespace {

// llama-imatrix's process_tensor_name: the part after "blk" (or "-") and the
// part before "weight" (or the whole name).
void split_tensor_name(const std::string& tensor, std::string& layer, std::string& name) {
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t dot = tensor.find('.', at);
    parts.push_back(tensor.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  layer.clear();
  name.clear();
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    if (parts[i] == "blk") {
      layer = parts[i + 1];
      break;
    }
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i] == "weight") {
      name = parts[i - 1];
      break;
    }
  if (name.empty()) name = tensor;
  if (layer.empty()) layer = "-";
}

// std::inner_product's order in floats: a running sum of the products.
float dot(const std::vector<float>& a, const std::vector<float>& b) {
  float s = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) s = s + a[i] * b[i];
  return s;
}

// The decimal layer number of "blk.N." in `tensor` and where N starts, or -1.
int block_of(const std::string& tensor, size_t& at, size_t& len) {
  for (size_t p = tensor.find("blk."); p != std::string::npos; p = tensor.find("blk.", p + 1)) {
    size_t q = p + 4;
    while (q < tensor.size() && tensor[q] >= '0' && tensor[q] <= '9') ++q;
    if (q > p + 4 && q < tensor.size() && tensor[q] == '.' && q - (p + 4) < 9) {
      at = p + 4;
      len = q - at;
      return std::stoi(tensor.substr(at, len));
    }
  }
  return -1;
}

}  // namespace

// llama-imatrix's compute_statistics, compute_cossim and show_statistics'
// per-layer sums, each float operation in its order.
ImatrixStatistics ImatrixAccumulator::statistics() const {
  ImatrixStatistics out;
  std::vector<const std::vector<float>*> sums;  // per row of out.tensors, its raw sums
  for (const auto& [tensor, e] : stats_) {
    if (e.counts.empty() || e.values.size() % e.counts.size() != 0) continue;
    const size_t n_mat = e.counts.size(), row = e.values.size() / n_mat;
    std::vector<float> act;
    act.reserve(e.values.size());
    for (size_t i = 0; i < n_mat; ++i) {
      if (e.counts[i] == 0) continue;
      for (size_t j = 0; j < row; ++j) act.push_back(e.values[i * row + j] / static_cast<float>(e.counts[i]));
    }
    if (act.empty()) continue;
    ImatrixTensorStatistics t;
    t.tensor = tensor;
    split_tensor_name(tensor, t.layer, t.name);
    float total = 0.0f;
    for (float v : act) total = total + v;
    const auto n = static_cast<float>(act.size());
    t.total_sqract = total;
    t.max_sqract = *std::max_element(act.begin(), act.end());
    t.min_sqract = *std::min_element(act.begin(), act.end());
    t.mean_sqract = total / n;
    const float var = dot(act, act) / n - t.mean_sqract * t.mean_sqract;
    t.stddev = std::sqrt(std::max(0.0f, var));
    const auto inactive = std::count_if(act.begin(), act.end(), [](float v) { return std::fabs(v) <= 1e-5f; });
    t.active = 1 - static_cast<float>(inactive) / n;
    if (total > 0) {
      for (float v : act)
        if (const float p = v / total; p > 0) t.entropy -= p * std::log2(p);
    }
    int above = 0;
    if (t.stddev > 0.0f)
      for (float v : act)
        if ((v - t.mean_sqract) / t.stddev > 1) ++above;
    t.elements = static_cast<int>(act.size());
    t.zd = static_cast<float>(above) / static_cast<float>(t.elements);
    out.tensors.push_back(std::move(t));
    sums.push_back(&e.values);
  }
  // The cosine similarity with the same matrix one layer down.
  for (size_t i = 0; i < out.tensors.size(); ++i) {
    size_t at = 0, len = 0;
    const int blk = block_of(out.tensors[i].tensor, at, len);
    if (blk < 0) continue;
    std::string below = out.tensors[i].tensor;
    below.replace(at, len, std::to_string(blk - 1));
    for (size_t k = 0; k < out.tensors.size(); ++k) {
      if (out.tensors[k].tensor != below) continue;
      const std::vector<float>& a = *sums[i];
      const std::vector<float>& b = *sums[k];
      if (a.size() == b.size())
        out.tensors[i].cossim = dot(a, b) / (std::sqrt(dot(a, a)) * std::sqrt(dot(b, b)));
      break;
    }
  }
  std::stable_sort(out.tensors.begin(), out.tensors.end(),
                   [](const ImatrixTensorStatistics& a, const ImatrixTensorStatistics& b) {
                     return a.name < b.name || (a.name == b.name && a.total_sqract > b.total_sqract);
                   });
  struct Weighted {
    float total = 0, zd = 0, cossim = 0;
    int elements = 0;
  };
  std::map<int, Weighted> layers;
  for (const ImatrixTensorStatistics& t : out.tensors) {
    int blk = -1;
    if (!t.layer.empty() && t.layer.find_first_not_of("0123456789") == std::string::npos && t.layer.size() < 9)
      blk = std::stoi(t.layer);
    Weighted& w = layers[blk];
    w.total += static_cast<float>(t.elements) * t.total_sqract;
    w.zd += static_cast<float>(t.elements) * t.zd;
    w.cossim += static_cast<float>(t.elements) * t.cossim;
    w.elements += t.elements;
  }
  for (const auto& [blk, w] : layers) {
    if (blk < 0 || w.elements == 0) continue;
    const auto n = static_cast<float>(w.elements);
    out.layers.push_back({blk, w.total / n, w.zd / n, w.cossim / n});
  }
  return out;
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

size_t ImatrixCollector::save(const std::string& path, const std::vector<std::string>& datasets, int32_t chunk_size,
                              ImatrixFormat format) const {
  if (chunk_size <= 0) throw Error(Errc::invalid_argument, "imatrix: chunk size " + std::to_string(chunk_size) + " (must be > 0)");
  std::vector<std::string> all = impl_->loaded_datasets;
  all.insert(all.end(), datasets.begin(), datasets.end());
  const runtime::Imatrix m = impl_->acc.result(std::move(all), chunk_size);
  if (format == ImatrixFormat::dat) return runtime::write_imatrix_legacy(m, path);
  runtime::write_imatrix(m, path);
  return m.entries.size();
}

void ImatrixCollector::load(const std::string& path, int32_t chunk_size) {
  if (chunk_size <= 0) throw Error(Errc::invalid_argument, "imatrix: chunk size " + std::to_string(chunk_size) + " (must be > 0)");
  const runtime::Imatrix file = runtime::load_imatrix(path);
  impl_->acc.add(file, chunk_size);
  impl_->loaded_datasets.insert(impl_->loaded_datasets.end(), file.datasets.begin(), file.datasets.end());
}

ImatrixStatistics ImatrixCollector::statistics() const { return impl_->acc.statistics(); }

}  // namespace synapse

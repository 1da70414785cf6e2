// Reading importance matrices (imatrix.hpp): llama.cpp v0.5.0
// common/imatrix-loader.cpp (common_imatrix_load and its legacy reader) and
// tools/quantize/quantize.cpp (load_imatrix's normalisation).
#include "runtime/imatrix.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>

#include "synapse/error.hpp"
#include "synapse/gguf.hpp"

namespace synapse::runtime {
namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(Errc::format, "imatrix " + path + ": " + what);
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, "imatrix " + path + ": cannot open");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// common_imatrix_load_legacy.
Imatrix load_legacy(const std::string& path, const std::vector<uint8_t>& bytes) {
  size_t at = 0;
  const auto read_i32 = [&](const char* what) {
    if (bytes.size() - at < 4) bad(path, std::string("truncated at ") + what);
    int32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    at += 4;
    return v;
  };
  Imatrix m;
  m.is_legacy = true;
  const int32_t n_entries = read_i32("the entry count");
  if (n_entries < 1) bad(path, "no entries (neither GGUF nor a legacy imatrix with data)");
  for (int32_t i = 0; i < n_entries; ++i) {
    const int32_t len = read_i32("a name length");
    if (len < 0 || bytes.size() - at < static_cast<size_t>(len)) bad(path, "truncated name of entry " + std::to_string(i + 1));
    std::string name(reinterpret_cast<const char*>(bytes.data() + at), static_cast<size_t>(len));
    name.resize(std::strlen(name.c_str()));  // ggml reads it as a C string
    at += static_cast<size_t>(len);
    const int32_t ncall = read_i32("ncall");
    const int32_t nval = read_i32("nval");
    if (nval < 1) bad(path, "entry " + name + " has " + std::to_string(nval) + " values");
    if ((bytes.size() - at) / 4 < static_cast<size_t>(nval)) bad(path, "truncated values of entry " + name);
    ImatrixEntry& e = m.entries[name];
    e.sums.resize(static_cast<size_t>(nval));
    std::memcpy(e.sums.data(), bytes.data() + at, static_cast<size_t>(nval) * 4);
    at += static_cast<size_t>(nval) * 4;
    e.counts = {ncall};
  }
  // The optional tail: the chunk count and the dataset's name.
  if (bytes.size() - at >= 4) {
    m.chunk_count = read_i32("the chunk count");
    if (bytes.size() - at >= 4) {
      const int32_t len = read_i32("the dataset length");
      if (len > 0 && bytes.size() - at >= static_cast<size_t>(len)) {
        std::string ds(reinterpret_cast<const char*>(bytes.data() + at), static_cast<size_t>(len));
        ds.resize(std::strlen(ds.c_str()));
        m.datasets.push_back(std::move(ds));
      }
    }
  }
  return m;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Imatrix load_gguf(const std::string& path) {
  const gguf::File f = gguf::File::open(path);
  if (f.tensors().empty()) bad(path, "no data (no tensors)");
  Imatrix m;
  if (const auto ds = f.get_string_array("imatrix.datasets")) m.datasets = *ds;
  const auto chunk_count = f.get_u32("imatrix.chunk_count");
  const auto chunk_size = f.get_u32("imatrix.chunk_size");
  m.has_metadata = f.find("imatrix.datasets") != nullptr && chunk_count && chunk_size;
  m.chunk_count = static_cast<int32_t>(chunk_count.value_or(0));
  m.chunk_size = static_cast<int32_t>(chunk_size.value_or(0));

  std::map<std::string, std::pair<const gguf::TensorInfo*, const gguf::TensorInfo*>> pairs;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (ends_with(t.name, ".in_sum2")) pairs[t.name.substr(0, t.name.size() - 8)].first = &t;
    else if (ends_with(t.name, ".counts")) pairs[t.name.substr(0, t.name.size() - 7)].second = &t;
  }
  for (const auto& [name, p] : pairs) {
    if (p.first == nullptr || p.second == nullptr) bad(path, "mismatched sums and counts for " + name);
    if (p.first->type != GgmlType::F32 || p.second->type != GgmlType::F32)
      bad(path, "sums and counts for " + name + " must be F32");
    const int64_t nval = p.first->n_elements(), ncounts = p.second->n_elements();
    if (ncounts < 1 || nval % ncounts != 0)
      bad(path, name + ": " + std::to_string(nval) + " sums do not split into " + std::to_string(ncounts) + " matrices");
    ImatrixEntry& e = m.entries[name];
    e.sums.resize(static_cast<size_t>(nval));
    std::memcpy(e.sums.data(), p.first->data, static_cast<size_t>(nval) * 4);
    e.counts.resize(static_cast<size_t>(ncounts));
    for (int64_t j = 0; j < ncounts; ++j) {
      float c;
      std::memcpy(&c, p.second->data + 4 * j, 4);
      e.counts[static_cast<size_t>(j)] = std::lround(c);
    }
  }
  if (m.entries.empty()) bad(path, "no NAME.in_sum2 / NAME.counts tensors (is it an importance matrix?)");
  return m;
}

}  // namespace

Imatrix load_imatrix(const std::string& path) {
  const std::vector<uint8_t> bytes = read_all(path);
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) return load_gguf(path);
  return load_legacy(path, bytes);
}

void write_imatrix(const Imatrix& m, const std::string& path) {
  gguf::Writer w;
  w.set_string("general.type", "imatrix");
  gguf::Value datasets;
  datasets.type = gguf::ValueType::ARRAY;
  datasets.elem_type = gguf::ValueType::STRING;
  for (const std::string& d : m.datasets) {
    gguf::Value v;
    v.type = gguf::ValueType::STRING;
    v.str = d;
    datasets.items.push_back(std::move(v));
  }
  w.set_value("imatrix.datasets", std::move(datasets));
  w.set_u32("imatrix.chunk_count", static_cast<uint32_t>(m.chunk_count));
  w.set_u32("imatrix.chunk_size", static_cast<uint32_t>(m.chunk_size));
  // std::map iterates in name order: llama-imatrix sorts the names.
  for (const auto& [name, e] : m.entries) {
    const auto nval = static_cast<int64_t>(e.sums.size()), nmat = static_cast<int64_t>(e.counts.size());
    if (nval == 0 || nmat == 0) continue;
    if (nval % nmat != 0)
      throw Error(Errc::invalid_argument, "imatrix entry " + name + ": " + std::to_string(nval) +
                                              " sums do not split into " + std::to_string(nmat) + " matrices");
    std::vector<float> counts(e.counts.begin(), e.counts.end());
    // ggml_n_dims: a trailing dimension of 1 is not written.
    const int64_t ne_sums[] = {nval / nmat, nmat}, ne_counts[] = {1, nmat};
    const size_t dims = nmat > 1 ? 2 : 1;
    w.add_tensor(name + ".in_sum2", GgmlType::F32, std::span(ne_sums, dims),
                 std::span(reinterpret_cast<const uint8_t*>(e.sums.data()), e.sums.size() * 4));
    w.add_tensor(name + ".counts", GgmlType::F32, std::span(ne_counts, dims),
                 std::span(reinterpret_cast<const uint8_t*>(counts.data()), counts.size() * 4));
  }
  w.write(path);
}

size_t write_imatrix_legacy(const Imatrix& m, const std::string& path) {
  if (m.chunk_size <= 0)
    throw Error(Errc::invalid_argument, "imatrix: chunk size " + std::to_string(m.chunk_size) + " (must be > 0)");
  std::string out;
  const auto put_i32 = [&out](int32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  put_i32(0);  // the entry count, set once they are counted
  int32_t n_entries = 0;
  // std::map iterates in name order, the order llama-imatrix sorts them in.
  for (const auto& [name, e] : m.entries) {
    const auto nval = static_cast<int64_t>(e.sums.size()), nmat = static_cast<int64_t>(e.counts.size());
    // Counts are never negative: an entry whose largest is 0 saw no token.
    const int64_t most = nmat == 0 ? 0 : *std::max_element(e.counts.begin(), e.counts.end());
    if (most == 0) continue;
    if (nval % nmat != 0)
      throw Error(Errc::invalid_argument, "imatrix entry " + name + ": " + std::to_string(nval) +
                                              " sums do not split into " + std::to_string(nmat) + " matrices");
    ++n_entries;
    put_i32(static_cast<int32_t>(name.size()));
    out += name;
    // The ceiling keeps a matrix seen in less than a chunk from ncall 0.
    const auto ncall = static_cast<int32_t>((most + (m.chunk_size - 1)) / m.chunk_size);
    put_i32(ncall);
    put_i32(static_cast<int32_t>(nval));
    const int64_t ne0 = nval / nmat;
    for (int64_t i = 0; i < nval; ++i) {
      float count = static_cast<float>(e.counts[static_cast<size_t>(i / ne0)]);
      float value = e.sums[static_cast<size_t>(i)];
      if (count == 0.0f) value = count = 1.0f;  // an expert no token reached
      const float v = (value / count) * static_cast<float>(ncall);
      out.append(reinterpret_cast<const char*>(&v), 4);
    }
  }
  put_i32(m.chunk_count);
  const std::string dataset = m.datasets.empty() ? std::string() : m.datasets.back();
  put_i32(static_cast<int32_t>(dataset.size()));
  out += dataset;
  std::memcpy(out.data(), &n_entries, 4);
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(out.data(), static_cast<std::streamsize>(out.size())) || !f.flush())
    throw Error(Errc::io, "imatrix " + path + ": cannot write");
  return static_cast<size_t>(n_entries);
}

std::vector<float> imatrix_importance(const ImatrixEntry& e, bool is_legacy) {
  std::vector<float> out(e.sums.size());
  if (!is_legacy) {
    const size_t ncounts = e.counts.size();
    const size_t ne0 = ncounts ? e.sums.size() / ncounts : 0;
    for (size_t j = 0; j < ncounts; ++j) {
      const auto count = static_cast<float>(e.counts[j]);
      for (size_t i = 0; i < ne0; ++i) out[j * ne0 + i] = count > 0.0f ? e.sums[j * ne0 + i] / count : 1.0f;
    }
  } else {
    const int64_t ncall = e.counts.empty() ? 0 : e.counts[0];
    for (size_t i = 0; i < e.sums.size(); ++i)
      out[i] = ncall > 0 ? e.sums[i] / static_cast<float>(ncall) : e.sums[i];
  }
  return out;
}

}  // namespace synapse::runtime

// Helpers for tests that compare with the golden files in tests/data/golden
// (format: tests/data/golden/README.md).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace synapse::test {

inline std::string data_path(const std::string& rel) { return std::string(SYNAPSE_TEST_DATA) + "/" + rel; }

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(f);
}

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

// JSON fields that the golden files store either as arrays or as strings
// holding a JSON array.
inline nlohmann::json as_array(const nlohmann::json& v) {
  return v.is_string() ? nlohmann::json::parse(v.get<std::string>()) : v;
}

// RMS(a - b) / RMS(b) over n floats (the golden README's per-position measure).
inline double rel_rms(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The greedy token of a row of logits: argmax, ties to the lowest id (as
// synapse::sample_greedy, which tests/model cannot link: it is the runtime
// layer's). The row must not be empty.
inline int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace synapse::test

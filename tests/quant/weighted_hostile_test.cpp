// The weighted quantizers (quantize_weights with an importance matrix: the
// lattice search of IQ2_XXS ... IQ1_M, the weighted K-quant, legacy and
// IQ4 searches) on rows no trained model has but a hostile or broken file
// can: all zeros, zero or denormal importances, values near FLT_MAX, a lone
// outlier, importances near FLT_MAX. llama-quantize has no defined output
// for these either; what is required here is that the search ends, reads
// nothing outside its grids and maps (AddressSanitizer checks that in the
// sanitizer build of the suite), gives the same bytes every time, and that
// a row whose values and importances are in the ordinary range dequantizes
// to finite values.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "quant/quant.hpp"
#include "synapse/error.hpp"
#include "synapse/types.hpp"

namespace synapse::quant {
namespace {

constexpr GgmlType kWeightedTypes[] = {
    GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ1_S,
    GgmlType::IQ1_M,   GgmlType::Q2_K,   GgmlType::Q3_K,  GgmlType::Q4_K,    GgmlType::Q5_K,  GgmlType::Q6_K,
    GgmlType::Q4_0,    GgmlType::Q4_1,   GgmlType::Q5_0,  GgmlType::Q5_1,    GgmlType::IQ4_NL, GgmlType::IQ4_XS};

constexpr int64_t kN = 512;  // two 256-value super-blocks

struct HostileRow {
  const char* what;
  std::vector<float> x, imatrix;
  bool ordinary;  // values and importances in the ordinary range: finite output required
};

std::vector<HostileRow> hostile_rows() {
  std::vector<HostileRow> rows;
  const auto ramp = [](float scale) {
    std::vector<float> v(kN);
    for (int64_t i = 0; i < kN; ++i) v[i] = scale * static_cast<float>((i * 37) % 101 - 50) / 50.0f;
    return v;
  };
  const std::vector<float> ones(kN, 1.0f), zeros(kN, 0.0f);
  rows.push_back({"all zeros", zeros, ones, true});
  rows.push_back({"zero importance everywhere", ramp(1.0f), zeros, true});
  std::vector<float> some_zero = ones;
  for (int64_t i = 0; i < kN; i += 3) some_zero[i] = 0.0f;
  rows.push_back({"zero importance on every third column", ramp(1.0f), some_zero, true});
  rows.push_back({"denormal importances", ramp(1.0f), std::vector<float>(kN, 1e-42f), true});
  rows.push_back({"denormal values", ramp(1e-40f), ones, true});
  rows.push_back({"one value", [] {
                     std::vector<float> v(kN, 0.0f);
                     v[77] = -3.0f;
                     return v;
                   }(),
                   ones, true});
  rows.push_back({"a lone outlier", [&] {
                     std::vector<float> v = ramp(1e-3f);
                     v[300] = 6e4f;
                     return v;
                   }(),
                   ones, true});
  rows.push_back({"negative importances", ramp(1.0f), std::vector<float>(kN, -1.0f), false});
  rows.push_back({"values near FLT_MAX", ramp(FLT_MAX), ones, false});
  rows.push_back({"importances near FLT_MAX", ramp(1.0f), std::vector<float>(kN, FLT_MAX), false});
  rows.push_back({"values and importances near FLT_MAX", ramp(FLT_MAX / 2), std::vector<float>(kN, FLT_MAX), false});
  return rows;
}

TEST(WeightedQuantizers, HostileRowsEndInBoundsAndAreDeterministic) {
  const std::vector<HostileRow> rows = hostile_rows();
  for (GgmlType t : kWeightedTypes) {
    const size_t bytes = row_size(t, kN);
    for (const HostileRow& r : rows) {
      const std::string label = std::string(type_name(t)) + ", " + r.what;
      std::vector<uint8_t> a(bytes), b(bytes, 0xa5);
      if (!r.ordinary) {
        // Sums of squares past FLT_MAX: a defined result or synapse's error
        // (the lattice search's "a point not on the grid", ggml's abort),
        // the same both times.
        std::string first, second;
        try {
          quantize_weights(t, r.x.data(), a.data(), kN, r.imatrix.data());
        } catch (const Error& e) {
          first = e.what();
        }
        try {
          quantize_weights(t, r.x.data(), b.data(), kN, r.imatrix.data());
        } catch (const Error& e) {
          second = e.what();
        }
        EXPECT_EQ(first, second) << label;
        if (!first.empty()) {
          std::printf("[ hostile ] %-48s %s\n", label.c_str(), first.c_str());
          continue;
        }
      } else {
        ASSERT_NO_THROW(quantize_weights(t, r.x.data(), a.data(), kN, r.imatrix.data())) << label;
        quantize_weights(t, r.x.data(), b.data(), kN, r.imatrix.data());
      }
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), bytes)) << label << ": two runs differ";
      std::vector<float> y(kN);
      dequantize_row(t, a.data(), y.data(), kN);
      if (!r.ordinary) continue;
      int64_t non_finite = 0;
      for (float v : y) non_finite += std::isfinite(v) ? 0 : 1;
      EXPECT_EQ(non_finite, 0) << label;
      if (r.x == std::vector<float>(kN, 0.0f)) {
        for (float v : y) ASSERT_EQ(v, 0.0f) << label << ": zeros come back as " << v;
      }
    }
  }
}

}  // namespace
}  // namespace synapse::quant

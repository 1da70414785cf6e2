// The parameterized suites over the kernels layer's tables
// (kernels/ops_table.hpp) this binary carries (quant::compiled_isas):
// OpsTables (one table per test) and, for the attention shapes, a table
// combined with a shape. Every entry is checked against the scalar
// reference with memcmp; a table whose instructions this CPU lacks is
// skipped (GTEST_SKIP), never passed.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernels/ops_table.hpp"
#include "quant/kernel_table.hpp"
#include "quant/simd.hpp"

namespace synapse::kernels {

inline std::vector<quant::Isa> compiled_ops_isas() {
  size_t n = 0;
  const quant::Isa* p = quant::compiled_isas(&n);
  return {p, p + n};
}

inline void skip_unless_runs(quant::Isa isa) {
  if (!quant::cpu_runs(isa)) GTEST_SKIP() << "this CPU cannot run the " << quant::isa_name(isa) << " table";
}

class OpsTables : public ::testing::TestWithParam<quant::Isa> {
 protected:
  void SetUp() override { skip_unless_runs(GetParam()); }
  static const OpsTable& table() { return ops_table(GetParam()); }
};

// A table and a shape of type P.
template <typename P>
class OpsTablesWith : public ::testing::TestWithParam<std::tuple<quant::Isa, P>> {
 protected:
  void SetUp() override { skip_unless_runs(std::get<0>(this->GetParam())); }
  const OpsTable& table() const { return ops_table(std::get<0>(this->GetParam())); }
  const P& shape() const { return std::get<1>(this->GetParam()); }
};

// Test names: the level, then the shape's index.
template <typename P>
std::string table_and_index(const ::testing::TestParamInfo<std::tuple<quant::Isa, P>>& info) {
  return std::string(quant::isa_name(std::get<0>(info.param))) + "_" + std::to_string(info.index);
}

}  // namespace synapse::kernels

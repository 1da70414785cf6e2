// The one parameterized suite over the kernel tables this binary carries
// (quant/kernel_table.hpp: scalar, and avx2 + avx512 on x86-64 or neon on
// ARM64): TEST_P(KernelTables, ...) in simd_test.cpp, gemm_test.cpp and
// interleave_test.cpp check every entry of the table GetParam() names
// against the scalar reference with memcmp; kernel_table_test.cpp
// instantiates it once for all of them. A table whose instructions this CPU
// lacks is skipped (GTEST_SKIP, reported as skipped), never passed.
#pragma once

#include <gtest/gtest.h>

#include <ostream>

#include "quant/kernel_table.hpp"
#include "quant/simd.hpp"

namespace synapse::quant {

// Parameter values print as their level's name.
inline void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

class KernelTables : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!cpu_runs(GetParam())) GTEST_SKIP() << "this CPU cannot run the " << isa_name(GetParam()) << " table";
  }
  static Isa isa() { return GetParam(); }
  static const KernelTable& table() { return kernel_table(GetParam()); }
  static const KernelTable& reference() { return kernel_table(Isa::scalar); }
};

}  // namespace synapse::quant

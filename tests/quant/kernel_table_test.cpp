// Instantiates the KernelTables suite (kernel_tables.hpp) once over every
// table this binary carries, named by level (Tables/KernelTables.X/avx2).
#include <gtest/gtest.h>

#include "quant/kernel_tables.hpp"

namespace synapse::quant {
namespace {

const Isa* compiled_begin() {
  size_t n = 0;
  return compiled_isas(&n);
}
const Isa* compiled_end() {
  size_t n = 0;
  return compiled_isas(&n) + n;
}

INSTANTIATE_TEST_SUITE_P(Tables, KernelTables, ::testing::ValuesIn(compiled_begin(), compiled_end()),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace synapse::quant

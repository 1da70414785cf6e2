// The lattice formats' quantizers (iq_quantize.cpp): internal to quant;
// quant.hpp's quantize_weights is the entry point.
#pragma once

#include <cstdint>

#include "synapse/types.hpp"

namespace synapse::quant {

// ggml's quantize_<t> for one row of `n` floats (a multiple of 256) of a
// lattice type t: x [n] -> y row_size(t, n) bytes. imatrix: [n] importance
// of each column, or nullptr (IQ3_XXS and IQ3_S only). Throws
// Error(unsupported) for another type.
void quantize_iq_row(GgmlType t, const float* x, void* y, int64_t n, const float* imatrix);

}  // namespace synapse::quant

// STUB: not yet implemented; every function throws. Replaced by the real kernels.
#include "quant/formats.hpp"
#include <string>

#include "synapse/error.hpp"

namespace synapse::quant {
namespace { [[noreturn]] void todo(const char* f) { throw Error(Errc::unsupported, std::string(f) + " is not implemented yet"); } }
void quantize_row_tq1_0(const float*, void*, int64_t) { todo("quantize_row_tq1_0"); }
void dequantize_row_tq1_0(const void*, float*, int64_t) { todo("dequantize_row_tq1_0"); }
void quantize_row_tq2_0(const float*, void*, int64_t) { todo("quantize_row_tq2_0"); }
void dequantize_row_tq2_0(const void*, float*, int64_t) { todo("dequantize_row_tq2_0"); }
float vec_dot_tq1_0_q8_K(int64_t, const void*, const void*) { todo("vec_dot_tq1_0_q8_K"); }
float vec_dot_tq2_0_q8_K(int64_t, const void*, const void*) { todo("vec_dot_tq2_0_q8_K"); }
}  // namespace synapse::quant

// STUB: not yet implemented; every function throws. Replaced by the real kernels.
#include "quant/formats.hpp"
#include <string>

#include "synapse/error.hpp"

namespace synapse::quant {
namespace { [[noreturn]] void todo(const char* f) { throw Error(Errc::unsupported, std::string(f) + " is not implemented yet"); } }
void quantize_row_q4_0(const float*, void*, int64_t) { todo("quantize_row_q4_0"); }
void dequantize_row_q4_0(const void*, float*, int64_t) { todo("dequantize_row_q4_0"); }
void quantize_row_q4_1(const float*, void*, int64_t) { todo("quantize_row_q4_1"); }
void dequantize_row_q4_1(const void*, float*, int64_t) { todo("dequantize_row_q4_1"); }
void quantize_row_q5_0(const float*, void*, int64_t) { todo("quantize_row_q5_0"); }
void dequantize_row_q5_0(const void*, float*, int64_t) { todo("dequantize_row_q5_0"); }
void quantize_row_q5_1(const float*, void*, int64_t) { todo("quantize_row_q5_1"); }
void dequantize_row_q5_1(const void*, float*, int64_t) { todo("dequantize_row_q5_1"); }
void quantize_row_q8_0(const float*, void*, int64_t) { todo("quantize_row_q8_0"); }
void dequantize_row_q8_0(const void*, float*, int64_t) { todo("dequantize_row_q8_0"); }
void quantize_row_q8_1(const float*, void*, int64_t) { todo("quantize_row_q8_1"); }
void dequantize_row_q8_1(const void*, float*, int64_t) { todo("dequantize_row_q8_1"); }
void quantize_row_iq4_nl(const float*, void*, int64_t) { todo("quantize_row_iq4_nl"); }
void dequantize_row_iq4_nl(const void*, float*, int64_t) { todo("dequantize_row_iq4_nl"); }
float vec_dot_q4_0_q8_0(int64_t, const void*, const void*) { todo("vec_dot_q4_0_q8_0"); }
float vec_dot_q4_1_q8_1(int64_t, const void*, const void*) { todo("vec_dot_q4_1_q8_1"); }
float vec_dot_q5_0_q8_0(int64_t, const void*, const void*) { todo("vec_dot_q5_0_q8_0"); }
float vec_dot_q5_1_q8_1(int64_t, const void*, const void*) { todo("vec_dot_q5_1_q8_1"); }
float vec_dot_q8_0_q8_0(int64_t, const void*, const void*) { todo("vec_dot_q8_0_q8_0"); }
float vec_dot_iq4_nl_q8_0(int64_t, const void*, const void*) { todo("vec_dot_iq4_nl_q8_0"); }
}  // namespace synapse::quant

// STUB: not yet implemented; every function throws. Replaced by the real kernels.
#include "quant/formats.hpp"
#include <string>

#include "synapse/error.hpp"

namespace synapse::quant {
namespace { [[noreturn]] void todo(const char* f) { throw Error(Errc::unsupported, std::string(f) + " is not implemented yet"); } }
void quantize_row_q2_K(const float*, void*, int64_t) { todo("quantize_row_q2_K"); }
void dequantize_row_q2_K(const void*, float*, int64_t) { todo("dequantize_row_q2_K"); }
void quantize_row_q3_K(const float*, void*, int64_t) { todo("quantize_row_q3_K"); }
void dequantize_row_q3_K(const void*, float*, int64_t) { todo("dequantize_row_q3_K"); }
void quantize_row_q4_K(const float*, void*, int64_t) { todo("quantize_row_q4_K"); }
void dequantize_row_q4_K(const void*, float*, int64_t) { todo("dequantize_row_q4_K"); }
void quantize_row_q5_K(const float*, void*, int64_t) { todo("quantize_row_q5_K"); }
void dequantize_row_q5_K(const void*, float*, int64_t) { todo("dequantize_row_q5_K"); }
void quantize_row_q6_K(const float*, void*, int64_t) { todo("quantize_row_q6_K"); }
void dequantize_row_q6_K(const void*, float*, int64_t) { todo("dequantize_row_q6_K"); }
void quantize_row_q8_K(const float*, void*, int64_t) { todo("quantize_row_q8_K"); }
void dequantize_row_q8_K(const void*, float*, int64_t) { todo("dequantize_row_q8_K"); }
void quantize_row_iq4_xs(const float*, void*, int64_t) { todo("quantize_row_iq4_xs"); }
void dequantize_row_iq4_xs(const void*, float*, int64_t) { todo("dequantize_row_iq4_xs"); }
float vec_dot_q2_K_q8_K(int64_t, const void*, const void*) { todo("vec_dot_q2_K_q8_K"); }
float vec_dot_q3_K_q8_K(int64_t, const void*, const void*) { todo("vec_dot_q3_K_q8_K"); }
float vec_dot_q4_K_q8_K(int64_t, const void*, const void*) { todo("vec_dot_q4_K_q8_K"); }
float vec_dot_q5_K_q8_K(int64_t, const void*, const void*) { todo("vec_dot_q5_K_q8_K"); }
float vec_dot_q6_K_q8_K(int64_t, const void*, const void*) { todo("vec_dot_q6_K_q8_K"); }
float vec_dot_iq4_xs_q8_K(int64_t, const void*, const void*) { todo("vec_dot_iq4_xs_q8_K"); }
}  // namespace synapse::quant

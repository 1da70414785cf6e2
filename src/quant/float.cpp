// STUB: not yet implemented; every function throws. Replaced by the real kernels.
#include "quant/formats.hpp"
#include <string>

#include "synapse/error.hpp"

namespace synapse::quant {
namespace { [[noreturn]] void todo(const char* f) { throw Error(Errc::unsupported, std::string(f) + " is not implemented yet"); } }
void quantize_row_f32(const float*, void*, int64_t) { todo("quantize_row_f32"); }
void dequantize_row_f32(const void*, float*, int64_t) { todo("dequantize_row_f32"); }
void quantize_row_f16(const float*, void*, int64_t) { todo("quantize_row_f16"); }
void dequantize_row_f16(const void*, float*, int64_t) { todo("dequantize_row_f16"); }
void quantize_row_bf16(const float*, void*, int64_t) { todo("quantize_row_bf16"); }
void dequantize_row_bf16(const void*, float*, int64_t) { todo("dequantize_row_bf16"); }
float vec_dot_f32_f32(int64_t, const void*, const void*) { todo("vec_dot_f32_f32"); }
float vec_dot_f16_f16(int64_t, const void*, const void*) { todo("vec_dot_f16_f16"); }
float vec_dot_bf16_bf16(int64_t, const void*, const void*) { todo("vec_dot_bf16_bf16"); }
}  // namespace synapse::quant

// ggml block formats: dequantize, quantize and dot products, per weight type.
//
// Every weight type is paired with the activation type ggml's CPU backend
// converts the other operand to before the dot (ggml-cpu's type_traits_cpu
// `vec_dot_type`): Q8_0 for the 32-element legacy blocks, Q8_1 for Q4_1/Q5_1,
// Q8_K for the K-quants, IQ4_XS and the ternary types, F16 for F16, BF16 for
// BF16, F32 for F32. The pairing is a field of each type's row of the
// kernel tables (kernel_table.hpp), set in quant.cpp's kScalarRows.
//
// Rows: a row of `n` elements of type t occupies row_size(t, n) bytes; n must
// be a multiple of the type's block size.
//
// Thread-safety: every function here is thread-safe (constant tables; each
// call writes only its output).
#pragma once

#include <cstddef>
#include <cstdint>

#include "synapse/types.hpp"

namespace synapse::quant {

struct KernelTable;  // kernel_table.hpp

// Type the activation row is converted to before a dot with weight type `t`
// (ggml's vec_dot_type). Throws Error(unsupported) for types synapse cannot
// compute with.
GgmlType vec_dot_type(GgmlType t);

// Converts `n` floats to one row of type `t` (activations and `synapse
// quantize`) with the quantizer of table k (kernel_table.hpp); every
// table's gives the same bytes. For the activation types (Q8_0, Q8_1, Q8_K,
// F16, BF16, F32) the result is bit-identical to what ggml's x86 AVX2 CPU
// build produces, since those bits decide the logits. For weight types it
// is ggml's reference quantizer (quantize_row_*_ref) without importance
// matrix. x: [n] floats; y: row_size(t, n) bytes.
// Throws Error(invalid_argument) if n is not a multiple of the block size,
// Error(unsupported) for types without a quantizer.
void quantize_row(const KernelTable& k, GgmlType t, const float* x, void* y, int64_t n);
// The same with active_kernels()'s quantizer.
void quantize_row(GgmlType t, const float* x, void* y, int64_t n);

// One row of weights as llama-quantize converts it: ggml_quantize_chunk(t,
// x, y, 0, 1, n, imatrix) of llama.cpp v0.5.0. imatrix: [n] floats, the
// importance of each column (llama-imatrix's mean squared activation), or
// nullptr. Without one every type is quantize_row's reference quantizer
// (for Q8_0 ggml's quantize_row_q8_0_ref, not the activation quantizer);
// with one the lattice types (IQ2_XXS ... IQ1_M) run ggml's weighted
// search (iq_quantize.cpp), Q2_K ... Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL
// and IQ4_XS ggml's quantize_row_<t>_impl (k_quants.cpp,
// k_quants_imatrix.cpp, legacy.cpp), and the types whose ggml quantizer
// ignores it (Q8_0, TQ1_0, TQ2_0, MXFP4, F16, BF16) their reference one.
// x: [n]; y: row_size(t, n) bytes. Throws Error(invalid_argument) for n not
// a multiple of the block, or no imatrix for IQ2_XXS, IQ2_XS or IQ1_S
// (ggml_quantize_requires_imatrix); Error(unsupported) for a type with no
// quantizer, or an imatrix for a type that is no weight type (Q8_1, Q8_K).
void quantize_weights(GgmlType t, const float* x, void* y, int64_t n, const float* imatrix);

// ggml_quantize_requires_imatrix: IQ2_XXS, IQ2_XS, IQ1_S.
bool requires_imatrix(GgmlType t) noexcept;

// Converts one row of `n` elements of type `t` to floats (ggml's
// dequantize_row_* / to_float). Same errors as quantize_row.
void dequantize_row(GgmlType t, const void* x, float* y, int64_t n);

// Dot product of one weight row (type `t`) with one activation row already
// converted to vec_dot_type(t), `n` elements, by active_kernels()'s kernel:
// ggml's ggml_vec_dot_<t>_<vt>.
// Quantized types: integer products summed per block, then scaled by the two
// block scales and accumulated in float. No bounds checks (hot path): callers
// guarantee n is a multiple of the block size.
float vec_dot(GgmlType t, int64_t n, const void* w, const void* act);

// True when synapse can run matrix products with weight type `t`.
bool is_supported_weight(GgmlType t) noexcept;

}  // namespace synapse::quant

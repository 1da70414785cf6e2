// Requantizing a whole GGUF model: `synapse quantize IN OUT TYPE [--pure]`.
//
// Reproduces llama-quantize (llama.cpp c392e509, src/llama-quant.cpp,
// llama_model_quantize_impl and llama_tensor_get_type): the file types it
// accepts for the formats synapse supports, its per-tensor choice of type for
// the mixed presets (Q4_K_M, Q5_K_M, Q3_K_S/M/L, Q2_K, ...), its fallbacks for
// rows that are not a multiple of the block size, its tensor order and its
// metadata (every key copied; general.quantization_version = 2 and
// general.file_type = the LLAMA_FTYPE value, both moved to the end, then
// the quantize.imatrix.* keys with an importance matrix). The weights are
// converted with quant::quantize_weights, ggml_quantize_chunk with the
// imatrix entry of each matrix (llama-quantize v0.5.0's lookup by tensor
// name, one slice of ne[0] per expert of a 3-D tensor), so the tensor data
// is byte-identical too. The per-tensor types follow v0.5.0's
// llama_tensor_get_type_impl for every file type (the IQ ones through
// model/iq_mix.hpp): a fused attn_qkv (Phi-3, the Qwen3.5 DeltaNet layers)
// and attn_kv_b are typed as attn_v, where c392e509 gave attn_qkv a rule of
// its own (Q5_K under Q4_K_M).
//
// Where llama-quantize aborts, synapse does something useful instead (both
// noted at the code): a row length that fits no block of the chosen type
// and that has no fallback in llama.cpp's table (Q4_0..Q8_0, IQ4_NL with
// ne[0] % 32 != 0) falls back to F16 instead of "Unsupported tensor size
// encountered", and --pure applies the same fallbacks instead of failing
// row validation.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "synapse/gguf.hpp"
#include "synapse/quantize.hpp"
#include "synapse/types.hpp"

namespace synapse::runtime {

// FileType (llama_ftype), its names and TensorPlan are public
// (synapse/quantize.hpp); runtime names them as its own.
using synapse::FileType;
using synapse::TensorPlan;
using synapse::file_type_name;
using synapse::file_type_names;
using synapse::parse_file_type;

// The tensor type a file type quantizes to before the per-tensor rules
// (llama_model_quantize_impl's default_type): Q4_K for Q4_K_S/M, Q3_K for
// Q3_K_S/M/L, F32 for ALL_F32, ...
GgmlType default_tensor_type(FileType ft) noexcept;

struct QuantizeOptions {
  FileType ftype = FileType::MOSTLY_Q4_K_M;
  bool pure = false;              // one type for every quantizable tensor (llama-quantize --pure)
  bool allow_requantize = false;  // accept quantized input tensors (llama-quantize --allow-requantize)
  int n_threads = 1;              // threads converting the rows of one tensor (>= 1)
  bool quantize_output_tensor = true;        // false: llama-quantize --leave-output-tensor
  std::optional<GgmlType> output_tensor_type;    // --output-tensor-type
  std::optional<GgmlType> token_embedding_type;  // --token-embedding-type
  std::string imatrix_file;  // --imatrix: an importance matrix (runtime/imatrix.hpp); empty: none
};

// Chooses the output type of every tensor of `in`, in llama-quantize's output
// order (tensors outside blk.N first, then by layer number, by name within a
// layer: llama_model_loader's weight_name_comparer). Reads the architecture,
// block_count, attention.head_count(_kv) and expert_count keys that the
// rules use. Throws Error(format) when general.architecture or block_count is
// missing, or a per-expert tensor name carries no valid layer number.
std::vector<TensorPlan> plan_quantization(const gguf::File& in, const QuantizeOptions& opt);

// Converts `in` following plan_quantization and returns the output file in a
// Writer (metadata first, then the tensors in plan order). `on_tensor`, when
// set, is called after each tensor with its plan (progress output).
// Throws Error(unsupported) naming a tensor whose input type synapse cannot
// convert, Error(invalid_argument) for a quantized input tensor without
// allow_requantize, Error(format) naming a tensor with a NaN or infinity,
// an imatrix with a non-finite or negative importance (naming the file and
// entry), or a row the weighted search has no defined result for (values or
// importances whose squares pass FLT_MAX; naming the tensor, row and type).
gguf::Writer quantize_model(const gguf::File& in, const QuantizeOptions& opt,
                            const std::function<void(const TensorPlan&)>& on_tensor = {});

// quantize_model from the file `in_path` to the file `out_path`; the errors of
// gguf::File::open, quantize_model and gguf::Writer::write. Returns the plan.
std::vector<TensorPlan> quantize_file(const std::string& in_path, const std::string& out_path,
                                      const QuantizeOptions& opt,
                                      const std::function<void(const TensorPlan&)>& on_tensor = {});

}  // namespace synapse::runtime

// Requantizing a GGUF model file, as llama.cpp's llama_model_quantize
// (include/llama.h) and the llama-quantize tool do: the same per-tensor
// choice of types for the mixed presets (Q4_K_M, Q3_K_M, ...), the same
// fallbacks, tensor order and metadata, byte-identical tensor data (ggml's
// quantizers, with llama-imatrix's importance matrix where one is given).
// `synapse quantize` is this call.
//
//   synapse::QuantizeParams p;
//   p.ftype = synapse::parse_file_type("Q4_K_M");
//   synapse::quantize_model("model-f16.gguf", "model-q4_k_m.gguf", p);
//
// Thread-safety: every function here is thread-safe; quantize_model reads its
// input and writes its output file only (two calls must not write one file).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "synapse/types.hpp"

namespace synapse {

// llama.cpp's enum llama_ftype (include/llama.h): the values stored in
// general.file_type. Only those of formats synapse can write are listed.
enum class FileType : uint32_t {
  ALL_F32 = 0,
  MOSTLY_F16 = 1,
  MOSTLY_Q4_0 = 2,
  MOSTLY_Q4_1 = 3,
  MOSTLY_Q8_0 = 7,
  MOSTLY_Q5_0 = 8,
  MOSTLY_Q5_1 = 9,
  MOSTLY_Q2_K = 10,
  MOSTLY_Q3_K_S = 11,
  MOSTLY_Q3_K_M = 12,
  MOSTLY_Q3_K_L = 13,
  MOSTLY_Q4_K_S = 14,
  MOSTLY_Q4_K_M = 15,
  MOSTLY_Q5_K_S = 16,
  MOSTLY_Q5_K_M = 17,
  MOSTLY_Q6_K = 18,
  MOSTLY_IQ2_XXS = 19,
  MOSTLY_IQ2_XS = 20,
  MOSTLY_IQ3_XS = 22,
  MOSTLY_IQ3_XXS = 23,
  MOSTLY_IQ1_S = 24,
  MOSTLY_IQ4_NL = 25,
  MOSTLY_IQ3_S = 26,
  MOSTLY_IQ3_M = 27,
  MOSTLY_IQ2_S = 28,
  MOSTLY_IQ2_M = 29,
  MOSTLY_IQ4_XS = 30,
  MOSTLY_IQ1_M = 31,
  MOSTLY_BF16 = 32,
  MOSTLY_TQ1_0 = 36,
  MOSTLY_TQ2_0 = 37,
  MOSTLY_MXFP4_MOE = 38,  // the MoE experts MXFP4, the other matrices Q8_0
};

// Parses a file type name as llama-quantize spells it, case-insensitive:
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L,
// Q3_K (= Q3_K_M), Q4_K_S, Q4_K_M, Q4_K (= Q4_K_M), Q5_K_S, Q5_K_M, Q5_K
// (= Q5_K_M), Q6_K, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ1_S, IQ1_M, IQ3_XXS,
// IQ3_XS, IQ3_S, IQ3_M, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4_MOE. Throws
// Error(invalid_argument) naming `name` and listing the valid names.
FileType parse_file_type(std::string_view name);

// The canonical name ("Q4_K_M") of a file type ("unknown" for another value).
std::string_view file_type_name(FileType ft) noexcept;

// The valid names, comma-separated, for messages and --help.
std::string file_type_names();

// The decision for one tensor of the input, in output order.
struct TensorPlan {
  std::string name;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  uint32_t n_dims = 0;
  GgmlType from = GgmlType::F32;  // type in the input file
  GgmlType to = GgmlType::F32;    // type written (== from: copied verbatim)
  bool quantizable = false;       // a 2-D+ weight llama-quantize converts (norms, routers etc. are not)
  bool fallback = false;          // `to` is a fallback: ne[0] not a multiple of the chosen type's block
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
};

// llama.cpp's llama_model_quantize_params, the fields synapse implements
// (same names and meaning).
struct QuantizeParams {
  int nthread = 0;                         // threads converting rows; <= 0: the physical cores
  FileType ftype = FileType::MOSTLY_Q4_K_M;
  bool allow_requantize = false;           // accept quantized input tensors
  bool pure = false;                       // one type for every quantizable tensor (no preset mix)
  bool quantize_output_tensor = true;      // false: output.weight is copied as is (--leave-output-tensor)
  // Types for output.weight (and a tied token_embd.weight, unless
  // token_embedding_type is set) and for token_embd.weight /
  // per_layer_token_embd.weight, instead of the mix's choice
  // (--output-tensor-type, --token-embedding-type; ggml_type_count = unset
  // in llama.cpp). Used as given, with no row-length fallback, as llama.cpp
  // does.
  std::optional<GgmlType> output_tensor_type;
  std::optional<GgmlType> token_embedding_type;
  // An importance matrix file (llama-imatrix's GGUF or legacy .dat;
  // llama-quantize --imatrix; llama.cpp passes the loaded data): each
  // matrix with an entry is quantized weighted by it, and the path, the
  // dataset and the counts are recorded under quantize.imatrix.* as
  // llama-quantize records them. Empty: none. The lattice types IQ2_XXS,
  // IQ2_XS, IQ2_S, IQ3_XXS, IQ1_S and IQ1_M need one for every matrix but
  // token_embd and output.
  std::string imatrix;
};

// Writes `fname_inp`'s weights requantized per `params` to `fname_out`
// (llama_model_quantize). `on_tensor`, when set, is called after each tensor
// with its plan (progress output), on the calling thread. Returns the plan of
// every tensor, in output order. Throws Error(io) for a file that cannot be
// read or written, Error(format) for a malformed input, a missing
// general.architecture or block_count, or a tensor with a NaN or infinity
// (named), Error(unsupported) naming a tensor whose type synapse cannot
// convert, Error(invalid_argument) for a quantized input tensor without
// allow_requantize or nthread > synapse::max_threads, or a low-bit type
// without an importance matrix ("this quantization requires an importance
// matrix", naming the tensor and type), Error(format) for an imatrix file
// that cannot be read, whose entry does not fit its tensor, or that holds a
// non-finite value, Error(unsupported) for an imatrix with a type whose
// weighted quantizer synapse lacks.
std::vector<TensorPlan> quantize_model(const std::string& fname_inp, const std::string& fname_out,
                                       const QuantizeParams& params,
                                       const std::function<void(const TensorPlan&)>& on_tensor = {});

}  // namespace synapse

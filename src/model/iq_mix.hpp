// llama-quantize's per-tensor types for the IQ file types (IQ2_XXS ...
// IQ1_M): llama.cpp v0.5.0 src/llama-quant.cpp, the IQ branches of
// llama_tensor_get_type_impl and llama_ftype_get_default_type. One copy of
// the rules, used by `synapse synth` (model/synth.cpp) and `synapse
// quantize` (runtime/quantize_model.cpp).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "synapse/types.hpp"

namespace synapse::model {

// llama.cpp's llama_ftype ids of the IQ file types (include/llama.h).
enum IqFtype : uint32_t {
  kIQ2_XXS = 19, kIQ2_XS = 20, kIQ3_XS = 22, kIQ3_XXS = 23, kIQ1_S = 24, kIQ3_S = 26, kIQ3_M = 27,
  kIQ2_S = 28, kIQ2_M = 29, kIQ1_M = 31,
};

// True for the ten ids above.
bool is_iq_ftype(uint32_t llama_ftype) noexcept;

// llama_ftype_get_default_type: IQ2_S means IQ2_XS tensors, IQ2_M IQ2_S,
// IQ3_XS and IQ3_M IQ3_S; the others their namesake. F32 for another id.
GgmlType iq_default_type(uint32_t llama_ftype) noexcept;

// A matrix's role, as llama-quantize's tensor categories name it (a tied
// token_embd, which is also the output, counts as output; attn_qkv and
// attn_kv_b count as attn_v: category_is_attn_v).
enum class TensorRole { other, output, token_embd, attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down };

// What the rules read of the model (llama_hparams, the tensor list, the
// imatrix).
struct IqMixModel {
  uint32_t llama_ftype = kIQ2_XXS;
  int64_t n_layer = 0;
  int64_t n_gqa = 0;          // n_head / n_head_kv of layer 0
  int64_t n_expert = 0;       // 0 or 1: dense
  bool has_imatrix = true;    // an importance matrix was given (IQ3_XXS's attn_v and ffn_down depend on it)
  bool is_70b = false;        // LLM_TYPE_70B (attn_v: Q3_K/Q4_K -> Q5_K)
  bool falcon = false;        // LLM_ARCH_FALCON
};

// The type of one matrix before the row-length fallback. `t`: the file
// type's default (iq_default_type). `ne0`: the row length (the output
// needs a multiple of 256, else Q8_0). `layer`: for ffn_gate/up/down the
// layer as llama-quantize's layer_info gives it (the running count of that
// role in a dense model, the blk.N of the name with experts); `i_ffn_down`:
// the running count of ffn_down matrices before this one (the low-bit types
// read it raw, not through layer_info).
GgmlType iq_mix_type(const IqMixModel& m, GgmlType t, TensorRole role, int64_t ne0, int64_t layer,
                     int64_t i_ffn_down) noexcept;

}  // namespace synapse::model

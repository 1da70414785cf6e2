// llama-quantize's IQ mixes (iq_mix.hpp): llama.cpp v0.5.0
// src/llama-quant.cpp, llama_tensor_get_type_impl's branches for the IQ
// file types, in its order.
#include "model/iq_mix.hpp"

namespace synapse::model {

bool is_iq_ftype(uint32_t f) noexcept {
  switch (f) {
    case kIQ2_XXS: case kIQ2_XS: case kIQ3_XS: case kIQ3_XXS: case kIQ1_S: case kIQ3_S: case kIQ3_M: case kIQ2_S:
    case kIQ2_M: case kIQ1_M: return true;
    default: return false;
  }
}

GgmlType iq_default_type(uint32_t f) noexcept {
  switch (f) {
    case kIQ2_XXS: return GgmlType::IQ2_XXS;
    case kIQ2_XS: case kIQ2_S: return GgmlType::IQ2_XS;
    case kIQ2_M: return GgmlType::IQ2_S;
    case kIQ3_XXS: return GgmlType::IQ3_XXS;
    case kIQ3_XS: case kIQ3_S: case kIQ3_M: return GgmlType::IQ3_S;
    case kIQ1_S: return GgmlType::IQ1_S;
    case kIQ1_M: return GgmlType::IQ1_M;
    default: return GgmlType::F32;
  }
}

namespace {
// use_more_bits(i_layer, n_layers): the first and last eighth of the layers
// and every third one in between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }
}  // namespace

GgmlType iq_mix_type(const IqMixModel& m, GgmlType t, TensorRole role, int64_t ne0, int64_t layer,
                     int64_t i_ffn_down) noexcept {
  using T = GgmlType;
  using R = TensorRole;
  const uint32_t f = m.llama_ftype;
  const int64_t n = m.n_layer;
  const bool low = f == kIQ2_XXS || f == kIQ2_XS || f == kIQ1_S || f == kIQ2_S || f == kIQ2_M || f == kIQ1_M;
  const bool iq2_sm = f == kIQ2_S || f == kIQ2_M;
  if (role == R::output) {
    if (m.falcon || ne0 % 256 != 0) return T::Q8_0;  // 256: the IQ types' block
    return low || f == kIQ3_XXS ? T::Q5_K : T::Q6_K;
  }
  if (role == R::token_embd) {
    if (f == kIQ2_XXS || f == kIQ2_XS || f == kIQ1_S || f == kIQ1_M) return T::Q2_K;
    if (iq2_sm || f == kIQ3_XXS) return T::IQ3_S;
    return t;
  }
  if (low) {
    switch (role) {
      case R::attn_v: return m.n_gqa >= 4 || m.n_expert >= 4 ? T::Q4_K : iq2_sm ? T::IQ3_S : T::Q2_K;
      case R::attn_k: return m.n_expert == 8 ? T::Q4_K : t;
      case R::ffn_down: return i_ffn_down < n / 8 ? (iq2_sm ? T::IQ3_S : T::Q2_K) : t;
      case R::attn_output:
        if (m.n_expert == 8) return T::Q5_K;
        if (f == kIQ1_S || f == kIQ1_M) return T::IQ2_XXS;
        return iq2_sm ? T::IQ3_S : t;
      default: return t;
    }
  }
  switch (role) {
    case R::attn_v:
      if (f == kIQ3_XXS) t = m.n_gqa >= 4 ? T::Q4_K : !m.has_imatrix ? T::IQ3_S : T::IQ3_XXS;
      else if ((f == kIQ3_XS || f == kIQ3_S) && m.n_gqa >= 4) t = T::Q4_K;
      else if (f == kIQ3_M) t = T::Q4_K;
      // 70B: 8 heads share attn_v, so more bits there cost little.
      if (m.is_70b && (t == T::Q3_K || t == T::Q4_K)) t = T::Q5_K;
      return m.n_expert == 8 ? T::Q8_0 : t;
    case R::attn_k:
      if (m.n_expert == 8) return T::Q8_0;
      [[fallthrough]];
    case R::attn_q:
      if (f == kIQ3_XS) return T::IQ3_XXS;
      if (f == kIQ3_XXS) return T::IQ2_S;
      return t;
    case R::ffn_down:
      if (f == kIQ3_XXS && !m.has_imatrix) return layer < n / 8 ? T::Q4_K : T::Q3_K;
      if (f == kIQ3_M && (layer < n / 8 || (m.n_expert == 8 && use_more_bits(layer, n)))) return T::Q4_K;
      return t;
    case R::attn_output:
      if (m.falcon) return t;
      if (m.n_expert == 8) return f == kIQ3_XS || f == kIQ3_XXS || f == kIQ3_S || f == kIQ3_M ? T::Q5_K : t;
      if (f == kIQ3_XXS) return T::IQ3_S;
      if (f == kIQ3_M) return T::Q4_K;
      return t;
    case R::ffn_gate:
    case R::ffn_up: return f == kIQ3_XS && layer >= n / 8 && layer < 7 * n / 8 ? T::IQ3_XXS : t;
    default: return t;
  }
}

}  // namespace synapse::model

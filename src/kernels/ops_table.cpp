// The kernels layer's table per level (ops_table.hpp).
#include "kernels/ops_table.hpp"

#include "kernels/ops.hpp"

namespace synapse::kernels {
namespace {

void expf_n_scalar(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = expf_ggml(x[i]);
}

OpsTable make_scalar_ops() {
  OpsTable t;
  t.isa = quant::Isa::scalar;
  t.attend_block = attend_block_scalar;
  t.attend_group = attend_group_scalar;
  t.softmax_f16_rows = softmax_f16_rows_scalar;
  t.attend_scores = attend_scores_scalar;
  t.attend_values = attend_values_scalar;
  t.attend_scores_typed = attend_scores_typed;
  t.attend_values_typed = attend_values_typed;
  t.row_max = row_max_scalar;
  t.exp_sum = exp_sum_pad16;
  t.scale_round_f16 = scale_round_f16_scalar;
  t.swiglu_rows = swiglu_rows_scalar;
  t.expf_n = expf_n_scalar;
  t.delta_rule_step = delta_rule_step_scalar;
  t.silu_row = silu_row_scalar;
  t.ssm_conv = ssm_conv_scalar;
  t.l2_norm_heads = l2_norm_heads_scalar;
  t.gated_norm_heads = gated_norm_heads_scalar;
  return t;
}

// x86-64 AVX2 (attention_avx2.cpp, ops_avx2.cpp, delta_rule_avx2.cpp); elsewhere the scalar
// table under this name.
OpsTable make_avx2_ops(quant::Isa isa) {
  OpsTable t = make_scalar_ops();
  t.isa = isa;
#if defined(__x86_64__) || defined(_M_X64)
  t.attend_block = attend_block_avx2;
  t.attend_group = attend_group_avx2;
  t.softmax_f16_rows = softmax_f16_rows_avx2;
  t.attend_scores = attend_scores_avx2;
  t.attend_values = attend_values_avx2;
  t.attend_scores_typed = attend_scores_typed_avx2;
  t.attend_values_typed = attend_values_typed_avx2;
  t.row_max = row_max_avx2;
  t.exp_sum = exp_sum_avx2;
  t.scale_round_f16 = scale_round_f16_avx2;
  t.swiglu_rows = swiglu_rows_avx2;
  t.expf_n = expf_ggml_avx2_n;
  t.delta_rule_step = delta_rule_step_avx2;
  t.silu_row = silu_row_avx2;
  t.ssm_conv = ssm_conv_avx2;
  t.l2_norm_heads = l2_norm_heads_avx2;
  t.gated_norm_heads = gated_norm_heads_avx2;
#endif
  return t;
}

// x86-64 AVX-512 (attention_avx512.cpp, delta_rule_avx512.cpp): its
// attention kernels and the DeltaNet kernels (delta-rule step, conv, norms);
// the rest, and attend_group (tests
// only), AVX2's.
OpsTable make_avx512_ops() {
  OpsTable t = make_avx2_ops(quant::Isa::avx512);
#if defined(__x86_64__) || defined(_M_X64)
  t.attend_block = attend_block_avx512;
  t.softmax_f16_rows = softmax_f16_rows_avx512;
  t.attend_scores = attend_scores_avx512;
  t.attend_values = attend_values_avx512;
  t.attend_scores_typed = attend_scores_typed_avx512;
  t.attend_values_typed = attend_values_typed_avx512;
  t.row_max = row_max_avx512;
  t.exp_sum = exp_sum_avx512;
  t.scale_round_f16 = scale_round_f16_avx512;
  t.delta_rule_step = delta_rule_step_avx512;
  t.ssm_conv = ssm_conv_avx512;
  t.l2_norm_heads = l2_norm_heads_avx512;
  t.gated_norm_heads = gated_norm_heads_avx512;
#endif
  return t;
}

OpsTable renamed_scalar(quant::Isa isa) {
  OpsTable t = make_scalar_ops();
  t.isa = isa;
  return t;
}

}  // namespace

const OpsTable& ops_table(quant::Isa isa) noexcept {
  static const OpsTable scalar = make_scalar_ops();
  static const OpsTable avx2 = make_avx2_ops(quant::Isa::avx2);
  static const OpsTable avx512 = make_avx512_ops();
  static const OpsTable neon = renamed_scalar(quant::Isa::neon);
  switch (isa) {
    case quant::Isa::avx2: return avx2;
    case quant::Isa::avx512: return avx512;
    case quant::Isa::neon: return neon;
    default: return scalar;
  }
}

const OpsTable& active_ops() noexcept {
  static const OpsTable& table = ops_table(quant::active_isa());
  return table;
}

}  // namespace synapse::kernels

// The kernels layer's table per instruction-set level: attention and the
// element-wise ops that have a SIMD version, chosen from the same decision
// as quant's kernel table (quant::active_isa(), quant/kernel_table.hpp says
// how the levels share kernels). x86 AVX2 has kernels of its own here; the
// avx512 table has its own attention pieces (attention_avx512.cpp) and
// AVX2's other entries; the neon table the scalar references.
//
// Thread-safety: built once on first use, read-only after.
#pragma once

#include <cstdint>

#include "kernels/attention.hpp"
#include "quant/simd.hpp"

namespace synapse::kernels {

struct OpsTable {
  quant::Isa isa = quant::Isa::scalar;
  // attend_block_scalar / _avx2 / _avx512 (attention.hpp).
  void (*attend_block)(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                       int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& scratch) = nullptr;
  // attend_group_scalar / _avx2 (the per-position reference; tests only).
  void (*attend_group)(const KvLayerView& kv, int64_t g, int64_t first, int64_t last, const float* q,
                       int64_t n_gqa, int64_t hd, int64_t hd_v, float kq_scale, float* out,
                       AttentionScratch& scratch) = nullptr;
  // softmax_f16_rows_scalar / _avx2 / _avx512 (attention.hpp).
  void (*softmax_f16_rows)(float* x, int64_t ld, const int64_t* n, int64_t n_rows, const float* sinks,
                           int64_t n_sinks) = nullptr;
  // The pieces of attend_block (attention.hpp): attend_scores_*, attend_values_*,
  // row_max_*, exp_sum_* (scalar: exp_sum_pad16), scale_round_f16_*.
  void (*attend_scores)(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                        int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld,
                        AttentionScratch& scratch) = nullptr;
  void (*attend_values)(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                        int64_t hd_v, int64_t bk, const float* p, int64_t ld, AttentionScratch& scratch) = nullptr;
  // attend_scores_typed(_avx2, _avx512), attend_values_typed(...): the
  // pieces for a cache whose K or V is not F16 (attention.hpp).
  void (*attend_scores_typed)(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                              int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld,
                              AttentionScratch& scratch) = nullptr;
  void (*attend_values_typed)(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows,
                              int64_t n_gqa, int64_t hd_v, int64_t bk, const float* p, int64_t ld,
                              AttentionScratch& scratch) = nullptr;
  float (*row_max)(const float* x, int64_t n) = nullptr;
  double (*exp_sum)(float* x, int64_t n, float mx) = nullptr;
  void (*scale_round_f16)(float* x, int64_t n, float inv) = nullptr;
  // swiglu_rows_scalar / _avx2 (ops.hpp).
  void (*swiglu_rows)(const float* gate, const float* up, float* y, int64_t n_rows, int64_t row_len) = nullptr;
  // y[0 .. n) = ggml_v_expf(x[0 .. n)) (ops.hpp expf_ggml, expf_ggml_avx2_n).
  void (*expf_n)(const float* x, float* y, int64_t n) = nullptr;
  // silu_row_scalar / _avx2 (ops.hpp).
  void (*silu_row)(float* x, int64_t n) = nullptr;
  // delta_rule_step_scalar / _avx2 / _avx512 (ops.hpp).
  void (*delta_rule_step)(float* st, const float* q, const float* k, const float* v, float decay, float beta,
                          float scale, int64_t d, float* o) = nullptr;
  // ssm_conv_scalar / _avx2 / _avx512 (ops.hpp).
  void (*ssm_conv)(float* x, int64_t ld, int64_t n_rows, float* const* states, const float* w, int64_t c0,
                   int64_t c1, int64_t d_conv) = nullptr;
  // l2_norm_heads_scalar / _avx2 / _avx512 (ops.hpp).
  void (*l2_norm_heads)(float* x, int64_t n_heads, int64_t d, float eps, float scale) = nullptr;
  // gated_norm_heads_scalar / _avx2 / _avx512 (ops.hpp).
  void (*gated_norm_heads)(float* x, float* z, const float* w, int64_t n_heads, int64_t d, float eps) = nullptr;
};

// The table of `isa` (every level has one; see above). Its entries may need
// instructions this CPU lacks: check quant::cpu_runs(isa) before calling.
const OpsTable& ops_table(quant::Isa isa) noexcept;

// ops_table(quant::active_isa()): what the forward pass runs.
const OpsTable& active_ops() noexcept;

}  // namespace synapse::kernels

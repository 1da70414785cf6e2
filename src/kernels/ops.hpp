// Element-wise and per-row kernels of the forward pass, scalar reference
// versions. Each reproduces the rounding of the ggml CPU op named beside it
// (seed 003 §8), so F32 models agree with llama.cpp to ~1e-7.
#pragma once

#include <cstdint>

namespace synapse::kernels {

// y = x / sqrt(mean(x^2) + eps) * w, one row of n floats (ggml_rms_norm then
// ggml_mul): squares in float, summed in double (ggml_float), mean rounded to
// float, scale = 1/sqrtf(mean + eps). y may alias x. w may be null (no gain).
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

// Rotary embedding angles of one position, as ggml's rope cache builds them
// (ggml_rope_cache_init + rope_yarn): theta_0 = pos, theta_{i+1} = theta_i *
// base^(-2/n_rot) in float; each divided by freq_factors[i] (Llama 3
// rope_freqs, may be null), then YaRN-mixed. cos/sin: [n_rot/2], mscale
// included. Source: Su et al. 2021 (RoPE), Peng et al. 2023 (YaRN).
struct RopeParams {
  int64_t n_rot;
  float freq_base;
  float freq_scale;
  float ext_factor;
  float attn_factor;
  float beta_fast;
  float beta_slow;
  int64_t n_ctx_orig;
  const float* freq_factors;  // [n_rot/2] or null
};
void rope_cache(const RopeParams& p, int64_t pos, float* cos, float* sin);

// Rotates one head in place: normal mode pairs (x[2i], x[2i+1]), NEOX mode
// pairs (x[i], x[i + n_rot/2]); dims >= n_rot pass through (ggml_rope_ext).
void rope_apply(float* x, int64_t n_rot, const float* cos, const float* sin, bool neox);

// One lane of ggml_v_expf (ggml-cpu, the AVX-512 version of llama.cpp
// v0.5.0's -march=native build, whose perplexity figures synapse
// reproduces), the polynomial exp that ggml's vectorized softmax and silu use
// instead of libm's expf; bit-equal per lane (same fma / mul / sub steps,
// _mm512_scalef_ps as one rounding of j * 2^n, 0 / inf for |n| > 192).
float expf_ggml(float x);

// y[0 .. n) = expf_ggml(x[0 .. n)) with AVX2 (ops_avx2.hpp's
// expf_ggml_avx2, 8 at a time, the tail through a zero-padded group; needs
// an AVX2 CPU; defined on x86-64 only). The avx2 entry of OpsTable::expf_n.
void expf_ggml_avx2_n(const float* x, float* y, int64_t n);

// In-place softmax of one row of n floats as ggml_soft_max computes it
// (ggml_compute_forward_soft_max_f32 -> ggml_vec_soft_max_f32, AVX-512):
// max, then per 16 values y = ggml_v_expf(x - max) and their float
// horizontal sum (quant::hsum_float_16, _mm512_reduce_add_ps) added to a
// double; the last n % 16 values use libm expf, each added to the double;
// then one multiply by (float)(1/sum) (ggml_vec_scale_f32). Used for the MoE
// router (row = n_expert).
void softmax(float* x, int64_t n);

// The same for an attention score row whose n values are the unmasked start
// of a row padded with -inf (the KQ mask) to a multiple of 16: llama.cpp's
// n_kv is a multiple of 256, so every value goes through ggml_v_expf and the
// last partial group of 16 is summed with zeros (ggml_v_expf(-inf) = 0).
// sink (null: none): an attention sink's logit (gpt-oss), a column of the
// softmax that weights no value, as ggml_soft_max_add_sinks computes it
// (ggml_compute_forward_soft_max_f32): max = MAX(max, sink), then after the
// groups sum += (double)expf(sink - max) with libm expf.
void softmax_pad16(float* x, int64_t n, const float* sink = nullptr);

// softmax_pad16's middle step: x[i] = expf_ggml(x[i] - mx) for i < n, and
// the return value: the groups of 16 from x[0] (the last padded with zeros),
// each group's quant::hsum_float_16 added in order to a double from 0.
// (kernels/attention.hpp's exp_sum, scalar.)
double exp_sum_pad16(float* x, int64_t n, float mx);

// The Walsh-Hadamard rotation llama.cpp v0.5.0 applies around a quantized
// KV cache (llama_mul_mat_hadamard, computed by ggml_compute_forward_fwht):
// each of the n_chunks consecutive chunks of n values (n a power of 2) of x
// becomes H_n x / sqrt(n), in place, with H_n Sylvester's +-1 matrix
// (ggml_gen_hadamard's), in ggml's order: every value times 1 / sqrtf(n)
// first, then butterfly passes of length 1, 2, ..., n/2, (u, v) -> (u + v,
// u - v). H_n / sqrt(n) is symmetric and orthonormal: applied twice it gives
// x back (up to rounding). Thread-safe (pure).
void fwht(float* x, int64_t n_chunks, int64_t n);

// silu(z) = z / (1 + expf(-z)) with libm expf (ggml_silu_f32).
float silu(float z);

// 1 / (1 + expf(-x)) with libm expf (ggml's op_sigmoid, ggml_sigmoid).
// Thread-safe (pure).
float sigmoid(float x);

// x for x > 20, else logf(1 + expf(x)) with libm (ggml's op_softplus,
// ggml_softplus). Thread-safe (pure).
float softplus(float x);

// silu(z) = z / (1 + ggml_v_expf(0 - z)), one lane of ggml_v_silu.
float silu_ggml(float z);

// y = silu(gate) * up (ggml_silu then ggml_mul) over n_rows rows of row_len
// floats, exactly as ggml_vec_swiglu_f32 (AVX-512) runs each row: silu_ggml
// (ggml_v_silu, 16 lanes) for the first row_len - row_len % 16 values, silu
// (ggml_silu_f32, libm expf) for the rest.
// Runs active_ops().swiglu_rows (kernels/ops_table.hpp): the AVX2 version (8
// lanes of expf_ggml_avx2, bit-equal to the scalar one;
// tests/kernels/ops_test.cpp) on the avx2 and avx512 tables.
void swiglu_rows(const float* gate, const float* up, float* y, int64_t n_rows, int64_t row_len);
// gpt-oss's expert activation, ggml_swiglu_oai as
// ggml_compute_forward_swiglu_oai_f32 computes each element (scalar there,
// libm expf): x = min(gate, limit), u = clamp(up, -limit, limit),
// y = x / (1 + expf(alpha * -x)) * (u + 1). gate, up, y: n floats (y may be
// gate). llama.cpp's build_moe_ffn passes alpha 1.702, limit 7.
// Thread-safe (pure).
void swiglu_oai(const float* gate, const float* up, float* y, int64_t n, float alpha, float limit);

// tanh(x) for a float, evaluated in double (e^2|x| - 1 by its own series,
// not libm's) and rounded once to float: within 0.5 ulp plus 2^-45 relative
// of the exact value, so it is the correctly rounded tanh except where that
// value lies within 2^-45 of a midpoint between two floats. It replaces
// libm's tanhf where the bits must not depend on the machine: glibc's tanhf
// gives different last bits on x86-64 and ARM64 for about 0.3% of arguments,
// and llama.cpp's ggml_tanh calls tanhf. Odd; NaN gives NaN, |x| >= 10 gives
// +-1. Thread-safe (pure).
float tanh_f32(float x);

// In place, x = tanh_f32(x * (1 / cap)) * cap over n floats: Gemma's final
// logit soft-capping as llama.cpp v0.5.0 builds it (src/models/gemma3.cpp:
// ggml_scale by 1 / cap, ggml_tanh, ggml_scale by cap), with tanh_f32 for
// tanhf. cap > 0. Thread-safe (pure).
void softcap(float* x, int64_t n, float cap);

// GELU, tanh form (Hendrycks & Gimpel 2016), as ggml_gelu_f32 computes it in
// float: 0.5 x (1 + tanhf(sqrt(2/pi) x (1 + 0.044715 x^2))), with
// 1 + 0.044715 x x one fma, as the reference build (llama.cpp v0.5.0, GCC
// -O3 -march=native) compiled it where it fills ggml_table_gelu_f16
// (ggml_cpu_init's disassembly: vfmadd213ss before the call to tanhf).
// Thread-safe (pure).
float gelu(float x);

// y = gelu(gate) * up over n floats, as ggml_vec_geglu_f32 computes it in
// llama.cpp v0.5.0 (ggml-cpu/vec.h, GGML_GELU_FP16 defined): gate <= -10
// gives 0, gate >= 10 gives gate * up, else gate is rounded to F16 and looked
// up in a table of F16(gelu(h)) for every F16 value h (ggml_table_gelu_f16),
// and that value times up. Gemma 3's FFN (ggml_geglu_split). y may alias
// gate or up. Thread-safe (the table is built once, on first use).
void geglu(const float* gate, const float* up, float* y, int64_t n);

// In place, silu of a row of n floats as ggml_vec_silu_f32 (AVX-512) runs a
// row of ggml_silu: silu_ggml for the first n - n % 16, silu (libm expf) for
// the rest. Runs active_ops().silu_row: the AVX2 form (8 lanes of
// expf_ggml_avx2) on the avx2 and avx512 tables, bit-equal to
// silu_row_scalar (tests/kernels/ops_test.cpp). Thread-safe (pure).
void silu_row(float* x, int64_t n);
void silu_row_scalar(float* x, int64_t n);
void silu_row_avx2(float* x, int64_t n);

// One step of the gated delta rule on one head: the inner loop of
// ggml_compute_forward_gated_delta_net_one_chunk (llama.cpp v0.5.0) for one
// token. st: the head's state [d][d], held as ggml holds it, transposed
// (st[j * d + e] = S[e][j]); q, k, v: [d]; o: [d] out. For each row j:
// st_j *= decay (rounded products), delta = (v[j] - dot(st_j, k)) * beta,
// st_j[e] = fma(k[e], delta, st_j[e]), o[j] = dot(st_j, q) * scale, the dots
// in quant::vec_dot_f32_ggml's order (ggml_vec_dot_f32, AVX-512 build). The
// rows are independent, so this row-by-row order gives the reference's bits
// (which decays every row, then finds every delta, then updates). decay:
// exp(g) of the token's gate; beta: sigmoid of its ssm_beta row; scale
// 1/sqrt(d). Runs active_ops().delta_rule_step (kernels/ops_table.hpp): AVX2
// and AVX-512 forms for d a multiple of 64 (the scalar one else), bit-equal
// to the scalar one (tests/kernels/ops_test.cpp). Thread-safe on distinct
// states.
void delta_rule_step(float* st, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                     int64_t d, float* o);
void delta_rule_step_scalar(float* st, const float* q, const float* k, const float* v, float decay, float beta,
                            float scale, int64_t d, float* o);
void delta_rule_step_avx2(float* st, const float* q, const float* k, const float* v, float decay, float beta,
                          float scale, int64_t d, float* o);
void delta_rule_step_avx512(float* st, const float* q, const float* k, const float* v, float decay, float beta,
                            float scale, int64_t d, float* o);

// The Gated DeltaNet layer's short causal convolution (ggml_ssm_conv over
// the conv state and the new inputs; llama.cpp v0.5.0 qwen35.cpp), in place,
// for the channels [c0, c1): x [n_rows][ld], channel c of row i at
// x[i * ld + c]; states[i]: row i's sequence's conv state, channel c's last
// d_conv - 1 inputs (oldest first) at states[i] + c * (d_conv - 1); w:
// ssm_conv1d [channels][d_conv]. Rows run in order (rows of one sequence see
// each other's inputs through the state). Per channel and row: sum =
// fma(state[t], w[t], sum) over the taps in order from 0, then
// fma(x, w[d_conv - 1], sum) (the reference build's `sumf += s * c`
// contracted), x = sum, the input shifted into the state. Runs
// active_ops().ssm_conv: AVX2 and AVX-512 forms for d_conv 4 (vectors of
// channels; the scalar form else), bit-equal to ssm_conv_scalar
// (tests/kernels/ops_test.cpp). Thread-safe on disjoint channel ranges.
void ssm_conv(float* x, int64_t ld, int64_t n_rows, float* const* states, const float* w, int64_t c0, int64_t c1,
              int64_t d_conv);
void ssm_conv_scalar(float* x, int64_t ld, int64_t n_rows, float* const* states, const float* w, int64_t c0,
                     int64_t c1, int64_t d_conv);
void ssm_conv_avx2(float* x, int64_t ld, int64_t n_rows, float* const* states, const float* w, int64_t c0,
                   int64_t c1, int64_t d_conv);
void ssm_conv_avx512(float* x, int64_t ld, int64_t n_rows, float* const* states, const float* w, int64_t c0,
                     int64_t c1, int64_t d_conv);

// The DeltaNet q/k L2 norm (build_gdn_l2_norm: ggml_rms_norm with eps, then
// ggml_scale), in place on n_heads heads of d floats, head h at x[h * d]:
// each head as rms_norm(head, nullptr, head, d, eps) (squares summed in
// double in element order), then every value times `scale`. Runs
// active_ops().l2_norm_heads: AVX2 and AVX-512 forms that run 8 / 16 heads
// in the lanes, each lane's sum in the scalar order, bit-equal to
// l2_norm_heads_scalar (tests/kernels/ops_test.cpp). Thread-safe (pure).
void l2_norm_heads(float* x, int64_t n_heads, int64_t d, float eps, float scale);
void l2_norm_heads_scalar(float* x, int64_t n_heads, int64_t d, float eps, float scale);
void l2_norm_heads_avx2(float* x, int64_t n_heads, int64_t d, float eps, float scale);
void l2_norm_heads_avx512(float* x, int64_t n_heads, int64_t d, float eps, float scale);

// The DeltaNet gated output norm (build_norm_gated), in place on n_heads
// heads of d floats (head h at x[h * d] and z[h * d]): x = rms_norm(x, w,
// eps) * silu(z), w [d] shared by the heads, silu over each head's d values
// as silu_row (z is overwritten with it). Runs active_ops().gated_norm_heads:
// AVX2 and AVX-512 forms (heads in the lanes for the sums, as
// l2_norm_heads), bit-equal to gated_norm_heads_scalar
// (tests/kernels/ops_test.cpp). Thread-safe on distinct x and z.
void gated_norm_heads(float* x, float* z, const float* w, int64_t n_heads, int64_t d, float eps);
void gated_norm_heads_scalar(float* x, float* z, const float* w, int64_t n_heads, int64_t d, float eps);
void gated_norm_heads_avx2(float* x, float* z, const float* w, int64_t n_heads, int64_t d, float eps);
void gated_norm_heads_avx512(float* x, float* z, const float* w, int64_t n_heads, int64_t d, float eps);

// The two implementations behind swiglu_rows (the _avx2 one defined on
// x86-64 only; tests reach both through the tables).
void swiglu_rows_scalar(const float* gate, const float* up, float* y, int64_t n_rows, int64_t row_len);
void swiglu_rows_avx2(const float* gate, const float* up, float* y, int64_t n_rows, int64_t row_len);

}  // namespace synapse::kernels

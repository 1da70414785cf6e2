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

// In-place softmax of n floats: max, exp(x - max) in float, sum in double,
// one multiply by (float)(1/sum) (ggml_soft_max / ggml_vec_soft_max_f32).
void softmax(float* x, int64_t n);

// silu(z) = z * sigmoid(z) = z / (1 + exp(-z)) (ggml_silu_f32).
float silu(float z);

// y[i] = silu(gate[i]) * up[i] (ggml_silu then ggml_mul), n floats.
void swiglu(const float* gate, const float* up, float* y, int64_t n);

}  // namespace synapse::kernels

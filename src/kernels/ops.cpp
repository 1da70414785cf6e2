#include "kernels/ops.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/ops_table.hpp"
#include "quant/formats.hpp"

namespace synapse::kernels {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

namespace {

// ggml's rope_yarn_corr_dim: the rotary dim at which a pair completes
// n_rotations turns over the original context.
float yarn_corr_dim(int64_t n_dims, int64_t n_ctx_orig, float n_rotations, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rotations * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}

float yarn_ramp(float low, float high, int64_t i0) {
  const float y = (static_cast<float>(i0 / 2) - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

}  // namespace

void rope_cache(const RopeParams& p, int64_t pos, float* cos_out, float* sin_out) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float low = 0.0f, high = 0.0f;
  if (p.ext_factor != 0.0f) {
    low = std::max(0.0f, std::floor(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    high = std::min(static_cast<float>(p.n_rot - 1),
                    std::ceil(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base)));
  }
  float theta = static_cast<float>(pos);
  for (int64_t i0 = 0; i0 < p.n_rot; i0 += 2) {
    const float ff = p.freq_factors ? p.freq_factors[i0 / 2] : 1.0f;
    const float theta_extrap = theta / ff;
    const float theta_interp = p.freq_scale * theta_extrap;
    float t = theta_interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float ramp_mix = yarn_ramp(low, high, i0) * p.ext_factor;
      t = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cos_out[i0 / 2] = std::cos(t) * mscale;
    sin_out[i0 / 2] = std::sin(t) * mscale;
    theta *= theta_scale;
  }
}

void rope_apply(float* x, int64_t n_rot, const float* cos, const float* sin, bool neox) {
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t a = neox ? i : 2 * i;
    const int64_t b = neox ? i + half : 2 * i + 1;
    const float x0 = x[a], x1 = x[b];
    // GCC's contraction in ggml's rotate_pairs (llama.cpp v0.5.0, read off
    // its -march=native object code, scalar loop; checked against its
    // tensors on stories260K): fma(x0, cos, -(x1 sin)) and
    // fma(x0, sin, x1 cos).
    x[a] = std::fma(x0, cos[i], -(x1 * sin[i]));
    x[b] = std::fma(x0, sin[i], x1 * cos[i]);
  }
}

float expf_ggml(float x) {
  // One lane of ggml_v_expf's AVX-512 version (the llama.cpp v0.5.0 build of
  // the golden perplexity figures): each fmaf is one _mm512_fmadd_ps or
  // _mm512_fnmadd_ps (fmaf(-a, b, c) == -(a*b) + c, one rounding), each * /
  // - one _mm512_mul_ps / _mm512_sub_ps; _mm512_scalef_ps(j, n) = j * 2^n
  // rounded once, as std::ldexp.
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;  // round(x / ln 2)
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                      std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                            u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  if (std::isnan(n)) return n;
  return std::ldexp(j, static_cast<int>(n));
}

namespace {

float max_of(const float* x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  return mx;
}

void scale(float* x, int64_t n, double sum) {
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

void softmax(float* x, int64_t n) {
  // ggml_vec_soft_max_f32's AVX-512 loop: 16 lanes of ggml_v_expf, each
  // group's _mm512_reduce_add_ps added in double; the n % 16 tail by expf.
  const float mx = max_of(x, n);
  double sum = 0.0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; ++l) x[i + l] = expf_ggml(x[i + l] - mx);
    sum += static_cast<double>(quant::hsum_float_16(x + i));
  }
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += static_cast<double>(x[i]);
  }
  scale(x, n, sum);
}

void fwht(float* x, int64_t n_chunks, int64_t n) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t c = 0; c < n_chunks; ++c) {
    float* y = x + c * n;
    for (int64_t j = 0; j < n; ++j) y[j] *= scale;
    for (int64_t len = 1; len < n; len <<= 1)
      for (int64_t i = 0; i < n; i += 2 * len)
        for (int64_t j = 0; j < len; ++j) {
          const float u = y[i + j], v = y[i + len + j];
          y[i + j] = u + v;
          y[i + len + j] = u - v;
        }
  }
}

double exp_sum_pad16(float* x, int64_t n, float mx) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; i += 16) {
    float v[16] = {};  // masked lanes: ggml_v_expf(-inf) = 0
    for (int64_t l = 0; l < 16 && i + l < n; ++l) v[l] = x[i + l] = expf_ggml(x[i + l] - mx);
    sum += static_cast<double>(quant::hsum_float_16(v));
  }
  return sum;
}

void softmax_pad16(float* x, int64_t n, const float* sink) {
  float mx = max_of(x, n);
  if (sink) mx = mx > *sink ? mx : *sink;  // ggml's MAX(max, sk[h])
  double sum = exp_sum_pad16(x, n, mx);
  if (sink) sum += static_cast<double>(std::exp(*sink - mx));
  scale(x, n, sum);
}

float silu(float z) { return z / (1.0f + std::exp(-z)); }

float silu_ggml(float z) { return z / (1.0f + expf_ggml(0.0f - z)); }

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

void delta_rule_step_scalar(float* st, const float* q, const float* k, const float* v, float decay, float beta,
                            float scale, int64_t d, float* o) {
  for (int64_t j = 0; j < d; ++j) {
    float* s = st + j * d;
    for (int64_t e = 0; e < d; ++e) s[e] *= decay;
    const float delta = (v[j] - quant::vec_dot_f32_ggml(d, s, k)) * beta;
    for (int64_t e = 0; e < d; ++e) s[e] = std::fma(k[e], delta, s[e]);
    o[j] = quant::vec_dot_f32_ggml(d, s, q) * scale;
  }
}

void delta_rule_step(float* st, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                     int64_t d, float* o) {
  active_ops().delta_rule_step(st, q, k, v, decay, beta, scale, d, o);
}

void silu_row_scalar(float* x, int64_t n) {
  const int64_t n16 = n - n % 16;
  for (int64_t i = 0; i < n16; ++i) x[i] = silu_ggml(x[i]);
  for (int64_t i = n16; i < n; ++i) x[i] = silu(x[i]);
}

void silu_row(float* x, int64_t n) { active_ops().silu_row(x, n); }

void ssm_conv_scalar(float* x, int64_t ld, int64_t n_rows, float* const* states, const float* w, int64_t c0,
                     int64_t c1, int64_t d_conv) {
  for (int64_t c = c0; c < c1; ++c) {
    const float* wc = w + c * d_conv;
    for (int64_t i = 0; i < n_rows; ++i) {
      float* st = states[i] + c * (d_conv - 1);
      float& xi = x[i * ld + c];
      float sum = 0.0f;
      for (int64_t t = 0; t + 1 < d_conv; ++t) sum = std::fma(st[t], wc[t], sum);
      sum = std::fma(xi, wc[d_conv - 1], sum);
      for (int64_t t = 0; t + 2 < d_conv; ++t) st[t] = st[t + 1];
      if (d_conv > 1) st[d_conv - 2] = xi;
      xi = sum;
    }
  }
}

void ssm_conv(float* x, int64_t ld, int64_t n_rows, float* const* states, const float* w, int64_t c0, int64_t c1,
              int64_t d_conv) {
  active_ops().ssm_conv(x, ld, n_rows, states, w, c0, c1, d_conv);
}

void l2_norm_heads_scalar(float* x, int64_t n_heads, int64_t d, float eps, float scale) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* p = x + h * d;
    rms_norm(p, nullptr, p, d, eps);
    for (int64_t e = 0; e < d; ++e) p[e] *= scale;
  }
}

void l2_norm_heads(float* x, int64_t n_heads, int64_t d, float eps, float scale) {
  active_ops().l2_norm_heads(x, n_heads, d, eps, scale);
}

void gated_norm_heads_scalar(float* x, float* z, const float* w, int64_t n_heads, int64_t d, float eps) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* o = x + h * d;
    float* zh = z + h * d;
    rms_norm(o, w, o, d, eps);
    silu_row_scalar(zh, d);
    for (int64_t e = 0; e < d; ++e) o[e] *= zh[e];
  }
}

void gated_norm_heads(float* x, float* z, const float* w, int64_t n_heads, int64_t d, float eps) {
  active_ops().gated_norm_heads(x, z, w, n_heads, d, eps);
}

void swiglu_oai(const float* gate, const float* up, float* y, int64_t n, float alpha, float limit) {
  for (int64_t k = 0; k < n; ++k) {
    const float x = std::min(gate[k], limit);
    const float u = std::clamp(up[k], -limit, limit);
    const float glu = x / (1.0f + std::exp(alpha * (-x)));
    y[k] = glu * (u + 1.0f);
  }
}

namespace {

// e^y - 1 in double for 0 <= y <= 20, relative error a few units in 2^-53:
// below 0.5 the Taylor series itself (no cancellation), above it
// 2^k e^r - 1 with r = y - k ln 2 in [-ln2/2, ln2/2] (Cody-Waite: ln 2 split
// so that k * kLn2Hi is exact for k <= 29) and e^r by its Taylor series to
// degree 13 (remainder below 2^-57). Plain double operations only, in a fixed
// order (the build has -ffp-contract=off), so every IEEE-754 machine gives
// the same bits.
double expm1_0_20(double y) {
  constexpr double kInvFact[] = {1.0,
                                 1.0,
                                 1.0 / 2,
                                 1.0 / 6,
                                 1.0 / 24,
                                 1.0 / 120,
                                 1.0 / 720,
                                 1.0 / 5040,
                                 1.0 / 40320,
                                 1.0 / 362880,
                                 1.0 / 3628800,
                                 1.0 / 39916800,
                                 1.0 / 479001600,
                                 1.0 / 6227020800.0,
                                 1.0 / 87178291200.0,
                                 1.0 / 1307674368000.0};
  if (y < 0.5) {  // y (1 + y/2 + ... + y^14/15!): the next term is below 2^-60 y
    double p = kInvFact[15];
    for (int k = 14; k >= 1; --k) p = p * y + kInvFact[k];
    return p * y;
  }
  constexpr double kLn2Hi = 0x1.62e42fefa3800p-1;  // ln 2 to 43 bits: k * kLn2Hi exact
  constexpr double kLn2Lo = 0x1.ef35793c76730p-45;  // ln 2 - kLn2Hi
  constexpr double kLog2E = 0x1.71547652b82fep0;
  const double k = std::nearbyint(y * kLog2E);
  const double r = (y - k * kLn2Hi) - k * kLn2Lo;
  double p = kInvFact[13];
  for (int j = 12; j >= 0; --j) p = p * r + kInvFact[j];
  return std::ldexp(p, static_cast<int>(k)) - 1.0;  // >= e^0.5 - 1: the subtraction loses under 2 bits
}

}  // namespace

float tanh_f32(float x) {
  if (std::isnan(x)) return x;
  const double a = std::fabs(static_cast<double>(x));
  // tanh(a) = 1 - 2 / (e^2a + 1) rounds to 1.0f from a = 9.01 on.
  if (a >= 10.0) return std::copysign(1.0f, x);
  const double e = expm1_0_20(2.0 * a);
  return std::copysign(static_cast<float>(e / (e + 2.0)), x);
}

void softcap(float* x, int64_t n, float cap) {
  const float inv_cap = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = tanh_f32(x[i] * inv_cap) * cap;
}

float gelu(float x) {
  constexpr float kCoefA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  // 1 + A x x as one fma: GCC contracts it so in the reference build's table
  // (ggml_cpu_init, -O3 -march=native), and the table is what ggml reads.
  const float inner = std::fma(kCoefA * x, x, 1.0f);
  return 0.5f * x * (1.0f + tanh_f32(kSqrt2OverPi * x * inner));
}

void geglu(const float* gate, const float* up, float* y, int64_t n) {
  static const std::vector<quant::ggml_fp16_t> table = [] {
    std::vector<quant::ggml_fp16_t> t(size_t{1} << 16);
    for (size_t i = 0; i < t.size(); ++i)
      t[i] = quant::fp32_to_fp16(gelu(quant::fp16_to_fp32(static_cast<quant::ggml_fp16_t>(i))));
    return t;
  }();
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    if (g <= -10.0f) y[i] = 0.0f;
    else if (g >= 10.0f) y[i] = g * up[i];
    else y[i] = quant::fp16_to_fp32(table[quant::fp32_to_fp16(g)]) * up[i];
  }
}

void swiglu_rows(const float* gate, const float* up, float* y, int64_t n_rows, int64_t row_len) {
  active_ops().swiglu_rows(gate, up, y, n_rows, row_len);
}

void swiglu_rows_scalar(const float* gate, const float* up, float* y, int64_t n_rows, int64_t row_len) {
  const int64_t nv = row_len - row_len % 16;  // ggml_vec_swiglu_f32 (AVX-512): 16-lane ggml_v_silu, then ggml_silu_f32
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t o = r * row_len;
    for (int64_t i = 0; i < nv; ++i) y[o + i] = silu_ggml(gate[o + i]) * up[o + i];
    for (int64_t i = nv; i < row_len; ++i) y[o + i] = silu(gate[o + i]) * up[o + i];
  }
}

}  // namespace synapse::kernels

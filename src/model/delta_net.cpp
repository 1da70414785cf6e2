#include "model/delta_net.hpp"

#include <cmath>
#include <initializer_list>
#include <string_view>

#include "kernels/ops.hpp"
#include "model/forward.hpp"

namespace synapse::model {

namespace {

// Floats of one layer's conv state and delta-rule state.
int64_t conv_floats(const HParams& hp) { return (hp.ssm_d_conv - 1) * hp.ssm_conv_channels(); }
int64_t ssm_floats(const HParams& hp) { return hp.ssm_dt_rank * hp.ssm_d_state * hp.ssm_d_state; }

}  // namespace

RecurrentState make_recurrent_state(const HParams& hp) {
  if (!hp.has_recurrent()) return {};
  return RecurrentState(hp.recurrent_layers, conv_floats(hp), ssm_floats(hp));
}

size_t recurrent_state_bytes(const HParams& hp) {
  int64_t n = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) n += hp.is_recurrent(il) ? 1 : 0;
  return static_cast<size_t>(n * (conv_floats(hp) + ssm_floats(hp))) * sizeof(float);
}

void delta_net_layer(const Model& m, int64_t il, std::span<KvCache* const> seqs, const BatchRow* rows, int64_t n,
                     const float* x, float* out, base::ThreadPool& pool, DeltaNetScratch& sc,
                     kernels::ActivationBuffers* act, ProductObserver* obs) {
  const HParams& hp = m.hp;
  const Layer& L = m.layers[static_cast<size_t>(il)];
  const int64_t n_embd = hp.n_embd, n_ch = hp.ssm_conv_channels(), d_inner = hp.ssm_d_inner;
  const int64_t n_v_heads = hp.ssm_dt_rank, n_k_heads = hp.ssm_n_group, d = hp.ssm_d_state, d_conv = hp.ssm_d_conv;
  const auto show = [&](std::initializer_list<const WeightView*> ws, const float* in, int64_t n_in) {
    if (!obs) return;
    for (const WeightView* w : ws) {
      ProductInput p;
      p.tensor = std::string_view(w->name);
      p.x = in;
      p.n_rows = n;
      p.n_in = n_in;
      obs->observe(p);
    }
  };
  auto &qkv = sc.qkv, &z = sc.z, &beta = sc.beta, &g = sc.alpha, &core = sc.core;
  qkv.resize(static_cast<size_t>(n * n_ch));
  z.resize(static_cast<size_t>(n * d_inner));
  beta.resize(static_cast<size_t>(n * n_v_heads));
  g.resize(beta.size());
  core.resize(z.size());

  // The input projections (build_qkvz, then ssm_beta and ssm_alpha).
  show({&L.wqkv, &L.wqkv_gate, &L.ssm_beta, &L.ssm_alpha}, x, n_embd);
  {
    kernels::Activations a(x, n, n_embd, act);
    const kernels::MatmulOut outs[] = {
        {&L.wqkv, qkv.data()}, {&L.wqkv_gate, z.data()}, {&L.ssm_beta, beta.data()}, {&L.ssm_alpha, g.data()}};
    kernels::matmul_many(outs, a, pool);
  }
  // beta = sigmoid(ssm_beta x); g = softplus(ssm_alpha x + ssm_dt) * ssm_a
  // (ggml_add, ggml_softplus, ggml_mul: -exp(A_log) * softplus).
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < n_v_heads; ++h) {
      const size_t j = static_cast<size_t>(i * n_v_heads + h);
      beta[j] = kernels::sigmoid(beta[j]);
      g[j] = kernels::softplus(g[j] + L.ssm_dt[h]) * L.ssm_a[h];
    }

  // The causal depthwise convolution (ggml_ssm_conv over the concatenation of
  // the conv state and the new inputs; kernels::ssm_conv): per channel, the
  // rows in batch order, each against its sequence's last d_conv - 1 inputs;
  // in place, the input then shifted into the state.
  auto& states = sc.conv_states;
  states.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) states[static_cast<size_t>(i)] = seqs[rows[i].seq]->recurrent().conv(il);
  pool.parallel_for(n_ch, 64, [&](int64_t c0, int64_t c1) {
    kernels::ssm_conv(qkv.data(), n_ch, n, states.data(), L.ssm_conv1d.data(), c0, c1, d_conv);
  });
  // SiLU over each row's channels, then q and k L2-normed per head
  // (build_gdn_l2_norm: ggml_rms_norm with eps / d, then ggml_scale by 1/sqrt(d)).
  const float l2_eps = hp.f_norm_rms_eps / static_cast<float>(d);
  const float l2_scale = 1.0f / std::sqrt(static_cast<float>(d));
  pool.parallel_for(n, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      float* row = &qkv[static_cast<size_t>(i * n_ch)];
      kernels::silu_row(row, n_ch);
      kernels::l2_norm_heads(row, 2 * n_k_heads, d, l2_eps, l2_scale);
    }
  });

  // The gated delta rule, ggml_compute_forward_gated_delta_net_one_chunk: per
  // v head, the rows in batch order, each on its sequence's state. The state
  // is held as ggml holds it, transposed: st[j * d + e] = S[e][j].
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  pool.parallel_for(n_v_heads, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t hk = h % n_k_heads;
      for (int64_t i = 0; i < n; ++i) {
        float* st = seqs[rows[i].seq]->recurrent().ssm(il) + h * d * d;
        const float* row = &qkv[static_cast<size_t>(i * n_ch)];
        const float* q = row + hk * d;
        const float* k = row + (n_k_heads + hk) * d;
        const float* v = row + 2 * n_k_heads * d + h * d;
        const float decay = std::exp(g[static_cast<size_t>(i * n_v_heads + h)]);
        const float b = beta[static_cast<size_t>(i * n_v_heads + h)];
        kernels::delta_rule_step(st, q, k, v, decay, b, scale, d, &core[static_cast<size_t>(i * d_inner + h * d)]);
      }
    }
  });

  // The gated output norm (build_norm_gated): RMSNorm of each head times
  // ssm_norm, times silu(z) (rows of d, as ggml_silu sees z reshaped).
  pool.parallel_for(n, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i)
      kernels::gated_norm_heads(&core[static_cast<size_t>(i * d_inner)], &z[static_cast<size_t>(i * d_inner)],
                                L.ssm_norm.data(), n_v_heads, d, hp.f_norm_rms_eps);
  });
  show({&L.ssm_out}, core.data(), d_inner);
  kernels::Activations a(core.data(), n, d_inner, act);
  kernels::matmul(L.ssm_out, a, out, pool);
}

}  // namespace synapse::model

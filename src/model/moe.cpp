#include "model/moe.hpp"

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "kernels/ops.hpp"
#include "model/forward.hpp"

namespace synapse::model {

void moe_ffn(const HParams& hp, const Layer& L, const float* h, float* out, int64_t n, base::ThreadPool& pool,
             MoeScratch& sc, kernels::ActivationBuffers* buffers, ProductObserver* obs) {
  const int64_t n_exp = hp.n_expert, n_used = hp.n_expert_used, n_embd = hp.n_embd, n_ff = hp.n_ff;
  const int64_t n_slots = n * n_used;
  // The rows of every step each go through one row-by-row pass over the
  // pool's threads; chunks of at least 8 keep a decode step's few rows on one.
  const auto by_rows = [&](int64_t count, const auto& fn) {
    pool.parallel_for(count, 8, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) fn(r);
    });
  };
  observe_products(obs, {&L.ffn_gate_inp}, h, n, n_embd);
  auto& probs = sc.probs;
  probs.resize(static_cast<size_t>(n * n_exp));
  kernels::Activations act(h, n, n_embd, buffers);
  kernels::matmul(L.ffn_gate_inp, act, probs.data(), pool);
  add_bias(probs, n, L.ffn_gate_inp_b);

  // Routing: per row its experts in selection order and their weights. The
  // top n_used by repeated selection of the largest, ties to the lower id:
  // what a stable sort by descending probability puts first.
  auto &chosen = sc.chosen, &where = sc.where;
  auto& weight = sc.weight;
  chosen.resize(static_cast<size_t>(n_slots));
  weight.resize(chosen.size());
  where.resize(chosen.size());
  const bool softmax_weight = hp.expert_gating == ExpertGating::softmax_weight;
  by_rows(n, [&](int64_t i) {
    float* p = &probs[i * n_exp];
    if (!softmax_weight) kernels::softmax(p, n_exp);
    int64_t* c = &chosen[i * n_used];
    float* w = &weight[i * n_used];
    for (int64_t s = 0; s < n_used; ++s) {
      int64_t best = -1;
      for (int64_t e = 0; e < n_exp; ++e) {
        if (std::find(c, c + s, e) != c + s) continue;
        if (best < 0 || p[e] > p[best]) best = e;
      }
      c[s] = best;
      w[s] = p[best];
    }
    if (softmax_weight) {
      kernels::softmax(w, n_used);
    } else {
      double wsum = 0.0;
      for (int64_t s = 0; s < n_used; ++s) wsum += w[s];
      const float wsum_f = static_cast<float>(wsum);
      for (int64_t s = 0; s < n_used; ++s) w[s] /= wsum_f;
    }
  });

  // The slots grouped by expert (a counting sort: ascending within each).
  auto &begin = sc.begin, &fill = sc.fill, &slots = sc.slots, &src_rows = sc.src_rows;
  begin.assign(static_cast<size_t>(n_exp + 1), 0);
  for (int64_t j = 0; j < n_slots; ++j) ++begin[chosen[j] + 1];
  for (int64_t e = 0; e < n_exp; ++e) begin[e + 1] += begin[e];
  fill.assign(begin.begin(), begin.end() - 1);
  slots.resize(static_cast<size_t>(n_slots));
  src_rows.resize(slots.size());
  for (int64_t j = 0; j < n_slots; ++j) {
    const int64_t k = fill[chosen[j]]++;
    slots[k] = j;
    src_rows[k] = j / n_used;
    where[j] = k;
  }
  const auto rows_of = [&](int64_t e) { return begin[e + 1] - begin[e]; };

  // An expert's input rows x [m][n_in] (its grouped slots) for each matrix
  // of `ws`. A slice of a merged [n_in, n_out, n_expert] tensor is a
  // mul_mat_id product; a tensor of its own (the older blk.N.ffn_gate.E
  // layout) a plain one.
  const auto observe_expert = [&](std::initializer_list<const kernels::WeightView*> ws, int64_t e, const float* x,
                                  int64_t n_in) {
    for (const kernels::WeightView* w : ws) {
      const std::string_view t = product_tensor(*w);
      if (t.size() == w->name.size()) {
        observe_products(obs, {w}, x, rows_of(e), n_in);
        continue;
      }
      ProductInput in;
      in.tensor = t;
      in.x = x;
      in.n_rows = rows_of(e);
      in.n_in = n_in;
      in.expert = e;
      in.n_expert = n_exp;
      in.n_used = n_used;
      in.slots = &slots[begin[e]];
      obs->observe(in);
    }
  };
  if (obs) {
    sc.x_obs.resize(static_cast<size_t>(n_slots * n_embd));
    for (int64_t k = 0; k < n_slots; ++k) std::copy_n(&h[src_rows[k] * n_embd], n_embd, &sc.x_obs[k * n_embd]);
    for (int64_t e = 0; e < n_exp; ++e)
      if (rows_of(e)) observe_expert({&L.gate_exps[e], &L.up_exps[e]}, e, &sc.x_obs[begin[e] * n_embd], n_embd);
  }

  // Every expert's gate and up over its rows, one job: the rows gathered
  // from h's one conversion per weight type.
  auto &gate = sc.gate, &up = sc.up, &y = sc.y;
  auto& products = sc.products;
  gate.resize(static_cast<size_t>(n_slots * n_ff));
  up.resize(gate.size());
  y.resize(static_cast<size_t>(n_slots * n_embd));
  {
    kernels::Activations grouped(act, src_rows, buffers);
    products.clear();
    for (int64_t e = 0; e < n_exp; ++e) {
      if (!rows_of(e)) continue;
      products.push_back({&L.gate_exps[e], &gate[begin[e] * n_ff], begin[e], rows_of(e)});
      products.push_back({&L.up_exps[e], &up[begin[e] * n_ff], begin[e], rows_of(e)});
    }
    kernels::matmul_many(products, grouped, pool);
  }
  if (hp.swiglu_oai) {
    // ggml_add_id of each expert's biases, then ggml_swiglu_oai (alpha and
    // limit as llama.cpp v0.5.0's build_moe_ffn, LLM_FFN_SWIGLU_OAI_MOE).
    constexpr float kAlpha = 1.702f, kLimit = 7.0f;
    by_rows(n_slots, [&](int64_t k) {
      const int64_t e = chosen[slots[k]];
      float* g = &gate[k * n_ff];
      float* u = &up[k * n_ff];
      for (int64_t d = 0; d < n_ff; ++d) {
        g[d] += L.gate_exps_b[e * n_ff + d];
        u[d] += L.up_exps_b[e * n_ff + d];
      }
      kernels::swiglu_oai(g, u, g, n_ff, kAlpha, kLimit);
    });
  } else {
    by_rows(n_slots, [&](int64_t k) { kernels::swiglu_rows(&gate[k * n_ff], &up[k * n_ff], &gate[k * n_ff], 1, n_ff); });
  }
  if (obs)
    for (int64_t e = 0; e < n_exp; ++e)
      if (rows_of(e)) observe_expert({&L.down_exps[e]}, e, &gate[begin[e] * n_ff], n_ff);

  // Every expert's down over its rows, one job.
  {
    kernels::Activations par(gate.data(), n_slots, n_ff, buffers);
    products.clear();
    for (int64_t e = 0; e < n_exp; ++e)
      if (rows_of(e)) products.push_back({&L.down_exps[e], &y[begin[e] * n_embd], begin[e], rows_of(e)});
    kernels::matmul_many(products, par, pool);
  }
  if (!L.down_exps_b.empty())
    by_rows(n_slots, [&](int64_t k) {
      const float* b = &L.down_exps_b[chosen[slots[k]] * n_embd];
      for (int64_t d = 0; d < n_embd; ++d) y[k * n_embd + d] += b[d];
    });

  // Weighted sum in selection order, as the row-at-a-time evaluation adds them.
  by_rows(n, [&](int64_t i) {
    float* o = &out[i * n_embd];
    for (int64_t s = 0; s < n_used; ++s) {
      const float w = weight[i * n_used + s];
      const float* ys = &y[where[i * n_used + s] * n_embd];
      for (int64_t d = 0; d < n_embd; ++d) o[d] = s == 0 ? ys[d] * w : o[d] + ys[d] * w;
    }
  });
}

void shared_expert_ffn(const HParams& hp, const Layer& L, const float* h, float* out, int64_t n,
                       base::ThreadPool& pool, MoeScratch& sc, kernels::ActivationBuffers* buffers,
                       ProductObserver* obs) {
  const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff_shexp;
  auto &gate = sc.sh_gate, &up = sc.sh_up, &logit = sc.sh_logit, &y = sc.sh_y;
  gate.resize(static_cast<size_t>(n * n_ff));
  up.resize(gate.size());
  logit.resize(static_cast<size_t>(n));
  y.resize(static_cast<size_t>(n * n_embd));
  observe_products(obs, {&L.ffn_up_shexp, &L.ffn_gate_shexp, &L.ffn_gate_inp_shexp}, h, n, n_embd);
  {
    kernels::Activations act(h, n, n_embd, buffers);
    const kernels::MatmulOut outs[] = {
        {&L.ffn_gate_shexp, gate.data()}, {&L.ffn_up_shexp, up.data()}, {&L.ffn_gate_inp_shexp, logit.data()}};
    kernels::matmul_many(outs, act, pool);
  }
  kernels::swiglu_rows(gate.data(), up.data(), gate.data(), n, n_ff);
  observe_products(obs, {&L.ffn_down_shexp}, gate.data(), n, n_ff);
  kernels::Activations par(gate.data(), n, n_ff, buffers);
  kernels::matmul(L.ffn_down_shexp, par, y.data(), pool);
  for (int64_t i = 0; i < n; ++i) {
    const float s = kernels::sigmoid(logit[static_cast<size_t>(i)]);
    for (int64_t d = i * n_embd; d < (i + 1) * n_embd; ++d) out[d] += y[d] * s;
  }
}

}  // namespace synapse::model

// The Llama-family forward pass (seed 000 "Forward Pass Flow", seed 003 §2).
//
// Rounding points follow llama.cpp's CPU path with flash attention off and an
// F16 KV cache (seed 003 §8): activations converted to the weight's vec_dot
// type before every matrix product (kernels/matmul), K and V stored as F16, q
// rounded to F16 before q.k, softmax probabilities rounded to F16 before they
// weight V, RMSNorm's sum of squares in double.
#include "model/forward.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "kernels/attention.hpp"
#include "kernels/ops.hpp"
#include "quant/quant.hpp"

namespace synapse::model {

std::string_view product_tensor(const kernels::WeightView& w) {
  const std::string_view name = w.name;
  return name.substr(0, name.find('['));
}

void observe_products(ProductObserver* obs, std::initializer_list<const kernels::WeightView*> ws, const float* x,
                      int64_t n, int64_t n_in) {
  if (!obs) return;
  std::string_view last;
  for (const kernels::WeightView* w : ws) {
    const std::string_view t = product_tensor(*w);
    if (t == last) continue;
    last = t;
    ProductInput in;
    in.tensor = t;
    in.x = x;
    in.n_rows = n;
    in.n_in = n_in;
    obs->observe(in);
  }
}

void add_bias(std::vector<float>& y, int64_t n_rows, const std::vector<float>& bias) {
  if (bias.empty()) return;
  const int64_t w = static_cast<int64_t>(bias.size());
  for (int64_t m = 0; m < n_rows; ++m)
    for (int64_t i = 0; i < w; ++i) y[m * w + i] += bias[i];
}

namespace {

using quant::fp32_to_fp16;

}  // namespace

model::KvCache make_kv_cache(const Model& m, int64_t n_ctx, std::shared_ptr<model::KvPool> pool,
                             model::KvTypes types) {
  const HParams& hp = m.hp;
  model::KvCache kv(pool ? std::move(pool) : make_kv_pool(m, 0, types), n_ctx, hp.kv_window());
  kv.recurrent() = make_recurrent_state(hp);
  return kv;
}

std::shared_ptr<model::KvPool> make_kv_pool(const Model& m, int64_t max_pages, model::KvTypes types) {
  const HParams& hp = m.hp;
  model::check_kv_type("type_k", types.k, hp.n_embd_head_k);
  model::check_kv_type("type_v", types.v, hp.n_embd_head_v);
  return std::make_shared<model::KvPool>(hp.n_layer_kv(), hp.n_embd_k_gqa(), hp.n_embd_v_gqa(), max_pages, types);
}

void forward(const Model& m, model::KvCache& kv, std::span<const token_id> tokens, bool all_logits,
             std::vector<float>& logits, base::ThreadPool& pool, ForwardScratch* scratch, ProductObserver* observer) {
  ForwardScratch local;
  ForwardScratch& s = scratch ? *scratch : local;
  s.one_seq.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) s.one_seq[i] = {tokens[i], nullptr, 0, all_logits || i + 1 == tokens.size()};
  model::KvCache* seqs[1] = {&kv};
  forward_batch(m, seqs, s.one_seq, logits, pool, &s, ForwardOutput::logits, observer);
}

namespace {

// One pass of every layer over `rows` (at most kMaxPassRows, already
// validated): appends their K/V rows to their sequences' caches, advances
// each sequence's n_past, and writes the final-normed hidden state of each
// wanted row to `out` ([n_wanted][n_embd], in row order). obs: shown every
// product's input, or null.
void forward_pass(const Model& m, std::span<model::KvCache* const> seqs, std::span<const BatchRow> rows,
                  float* out, base::ThreadPool& pool, ForwardScratch& sc, ProductObserver* obs) {
  const HParams& hp = m.hp;
  const int64_t n = static_cast<int64_t>(rows.size());
  // resize() keeps the buffers of earlier calls: no allocation, no page
  // faults, and nothing relies on their contents (every element is written
  // before it is read).
  auto& pos = sc.pos;
  auto& n_new = sc.n_new;
  pos.resize(static_cast<size_t>(n));
  n_new.assign(seqs.size(), 0);
  for (int64_t i = 0; i < n; ++i) pos[i] = seqs[rows[i].seq]->n_past() + n_new[rows[i].seq]++;

  const int64_t n_embd = hp.n_embd, hd = hp.n_embd_head_k, hd_v = hp.n_embd_head_v;
  const int64_t n_q = hd * hp.n_head, n_k = hp.n_embd_k_gqa(), n_v = hp.n_embd_v_gqa(), n_att = hd_v * hp.n_head;
  bool any_v_rotation = false;  // a sequence whose V rows are rotated (model::kv_rotation_v)
  for (const model::KvCache* s : seqs)
    any_v_rotation = any_v_rotation || (s && model::kv_rotation_v(s->pool().types().v, hd_v) != 0);

  // Embedding rows (ggml_get_rows), or the row's own embedding.
  auto& x = sc.x;
  x.resize(static_cast<size_t>(n * n_embd));
  for (int64_t i = 0; i < n; ++i) {
    if (rows[i].embd) {
      std::copy(rows[i].embd, rows[i].embd + n_embd, &x[i * n_embd]);
    } else {
      kernels::get_row(m.tok_embd, rows[i].token, &x[i * n_embd]);
      if (hp.embd_scale != 1.0f)  // Gemma 3: ggml_scale by sqrtf(n_embd), tokens only
        for (int64_t j = i * n_embd; j < (i + 1) * n_embd; ++j) x[j] *= hp.embd_scale;
    }
  }

  // RoPE angles of each row's position, shared by every layer; the frequency
  // factors may depend on the row's sequence (its n_ctx picks Phi-3 LongRoPE's
  // set, Model::rope_factors). Ministral 3's attention temperature of each row.
  // Gemma 3's sliding layers have RoPE tables of their own (hp.swa_rope).
  const int64_t half = hp.n_rot / 2;
  auto &rope_cos = sc.rope_cos, &rope_sin = sc.rope_sin, &q_temp = sc.q_temp;
  auto &rope_cos_swa = sc.rope_cos_swa, &rope_sin_swa = sc.rope_sin_swa;
  rope_cos.resize(static_cast<size_t>(n * half));
  rope_sin.resize(rope_cos.size());
  rope_cos_swa.resize(hp.swa_rope ? rope_cos.size() : 0);
  rope_sin_swa.resize(rope_cos_swa.size());
  q_temp.resize(static_cast<size_t>(n));
  kernels::RopeParams rp{hp.n_rot,          hp.rope_freq_base, hp.rope_freq_scale, hp.yarn_ext_factor,
                         hp.yarn_attn_factor, hp.yarn_beta_fast, hp.yarn_beta_slow, hp.n_ctx_orig_yarn,
                         nullptr};
  // IMROPE (Qwen3.5): a text token's position is (p, p, p, 0); the pairs of
  // the 4th section rotate as position 0 does (HParams::imrope_pos0).
  if (hp.imrope) {
    sc.rope_cos0.resize(static_cast<size_t>(half));
    sc.rope_sin0.resize(static_cast<size_t>(half));
    kernels::rope_cache(rp, 0, sc.rope_cos0.data(), sc.rope_sin0.data());
  }
  for (int64_t i = 0; i < n; ++i) {
    rp.freq_factors = m.rope_factors(seqs[rows[i].seq]->n_ctx());
    kernels::rope_cache(rp, pos[i], &rope_cos[i * half], &rope_sin[i * half]);
    for (int64_t j = 0; hp.imrope && j < half; ++j)
      if (hp.imrope_pos0(j)) {
        rope_cos[i * half + j] = sc.rope_cos0[j];
        rope_sin[i * half + j] = sc.rope_sin0[j];
      }
    if (hp.swa_rope) {
      kernels::RopeParams rp_swa = rp;
      rp_swa.freq_base = hp.rope_freq_base_swa;
      rp_swa.freq_scale = hp.rope_freq_scale_swa;
      kernels::rope_cache(rp_swa, pos[i], &rope_cos_swa[i * half], &rope_sin_swa[i * half]);
    }
    q_temp[i] = attn_temperature(hp, pos[i]);
  }
  const bool neox = hp.rope_type == RopeType::neox;
  const float inv_sqrt_hd = 1.0f / std::sqrt(static_cast<float>(hd));
  const float kq_scale = hp.scale_q_before_kq ? 1.0f : inv_sqrt_hd;
  const float q_scale = hp.f_attention_scale != 0.0f ? hp.f_attention_scale : inv_sqrt_hd;
  // Every new row is written to its sequence's pages before attention: pages
  // hold each position apart (a sliding window gives pages back only after
  // the pass, KvCache::set_n_past), so no row overwrites one another reads.
  auto& batched_rows = sc.batched_rows;
  batched_rows.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) batched_rows[static_cast<size_t>(i)] = i;
  // Query blocks (seed 000 "Flash (Blocked) Prefill Attention"): each
  // sequence's batched rows, in batch order (so consecutive positions), cut
  // into blocks that share every K/V block they read (kernels::attend_block):
  // 64 rows, fewer when the block's full score rows (rows x n_gqa x cached
  // positions floats) would pass 2 MiB, at least 2 (64 was the fastest
  // measured: docs/PERFORMANCE.md, "Measurements behind the tuning
  // constants"). A block of one row (a decode step) takes the same kernel
  // (its K/V blocks dotted 8 keys at a time, where attend_group, one key at
  // a time, waits on each dot's chain), cut into chunks at depth (attend
  // below). Block b is block_rows[block_begin[b] .. block_begin[b + 1]).
  // Every way gives the same bits for a row.
  auto query_block = [&](int seq) {
    const int64_t n_kv = seqs[seq]->n_past() + n_new[seq];
    return std::clamp<int64_t>((int64_t{1} << 19) / std::max<int64_t>(1, hp.n_gqa() * n_kv), 2, 64);
  };
  auto &block_rows = sc.block_rows, &block_begin = sc.block_begin;
  block_rows.assign(batched_rows.begin(), batched_rows.end());
  block_begin.clear();
  // By sequence, then batch order: a stable sort's result, without the
  // buffer std::stable_sort allocates on every call.
  std::sort(block_rows.begin(), block_rows.end(),
            [&](int64_t a, int64_t b) { return rows[a].seq != rows[b].seq ? rows[a].seq < rows[b].seq : a < b; });
  for (size_t j = 0; j < block_rows.size(); ++j)
    if (j == 0 || rows[block_rows[j]].seq != rows[block_rows[j - 1]].seq ||
        static_cast<int64_t>(j) - block_begin.back() == query_block(rows[block_rows[j]].seq))
      block_begin.push_back(static_cast<int64_t>(j));
  block_begin.push_back(static_cast<int64_t>(block_rows.size()));

  auto &cur = sc.cur, &q = sc.q, &k = sc.k, &v = sc.v, &att = sc.att, &tmp = sc.tmp, &gate = sc.gate, &up = sc.up;
  cur.resize(x.size());
  q.resize(static_cast<size_t>(n * n_q));
  k.resize(static_cast<size_t>(n * n_k));
  v.resize(static_cast<size_t>(n * n_v));
  att.resize(static_cast<size_t>(n * n_att));
  tmp.resize(x.size());
  if (hp.attn_output_gate) sc.attn_gate.resize(static_cast<size_t>(2 * n * n_q));
  if (hp.n_expert == 0) {
    gate.resize(static_cast<size_t>(n * hp.n_ff));
    up.resize(gate.size());
  }
  // The per-row steps between the products (norms, RoPE, the K/V stores,
  // the residual adds) on the pool's threads too, a row at a time: each row
  // gets the same operations whichever thread takes it. Chunks of at least
  // kRowGrain rows: a decode step's few rows stay on one thread.
  constexpr int64_t kRowGrain = 8;
  auto by_rows = [&](int64_t count, const auto& fn) {
    pool.parallel_for(count, kRowGrain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) fn(r);
    });
  };
  // x += tmp over row i (a residual add).
  auto add_residual = [&](int64_t i) {
    for (int64_t j = i * n_embd; j < (i + 1) * n_embd; ++j) x[j] += tmp[j];
  };
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const Layer& L = m.layers[il];
    const bool swa = hp.is_swa(il);
    const float* layer_cos = swa && hp.swa_rope ? rope_cos_swa.data() : rope_cos.data();
    const float* layer_sin = swa && hp.swa_rope ? rope_sin_swa.data() : rope_sin.data();
    // Attention block (Qwen3.5's DeltaNet layers: model/delta_net.hpp).
    by_rows(n, [&](int64_t i) {
      kernels::rms_norm(&x[i * n_embd], L.attn_norm.data(), &cur[i * n_embd], n_embd, hp.f_norm_rms_eps);
    });
    if (hp.is_recurrent(il)) {
      delta_net_layer(m, il, seqs, rows.data(), n, cur.data(), tmp.data(), pool, sc.delta_net, &sc.act, obs);
    } else {  // attention, to the attn_output product and its bias
      {
        observe_products(obs, {&L.wq, &L.wk, &L.wv}, cur.data(), n, n_embd);
        kernels::Activations act(cur.data(), n, n_embd, &sc.act);
        float* q_out = hp.attn_output_gate ? sc.attn_gate.data() : q.data();
        const kernels::MatmulOut qkv[] = {{&L.wq, q_out}, {&L.wk, k.data()}, {&L.wv, v.data()}};
        kernels::matmul_many(qkv, act, pool);
      }
      add_bias(q, n, L.bq);
      add_bias(k, n, L.bk);
      add_bias(v, n, L.bv);
      by_rows(n, [&](int64_t i) {
        const float* c = &layer_cos[i * half];
        const float* s = &layer_sin[i * half];
        if (hp.attn_output_gate)  // Qwen3.5: per head [q | gate]; q goes on, the gate waits for the output
          for (int64_t h = 0; h < hp.n_head; ++h)
            std::copy_n(&sc.attn_gate[2 * i * n_q + 2 * h * hd], hd, &q[i * n_q + h * hd]);
        if (hp.qk_norm) {  // Qwen3, Gemma 3: RMSNorm of each head over its hd values, before RoPE
          for (int64_t h = 0; h < hp.n_head; ++h)
            kernels::rms_norm(&q[i * n_q + h * hd], L.attn_q_norm.data(), &q[i * n_q + h * hd], hd, hp.f_norm_rms_eps);
          for (int64_t h = 0; h < hp.n_head_kv; ++h)
            kernels::rms_norm(&k[i * n_k + h * hd], L.attn_k_norm.data(), &k[i * n_k + h * hd], hd, hp.f_norm_rms_eps);
        }
        for (int64_t h = 0; h < hp.n_head; ++h) kernels::rope_apply(&q[i * n_q + h * hd], hp.n_rot, c, s, neox);
        for (int64_t h = 0; h < hp.n_head_kv; ++h) kernels::rope_apply(&k[i * n_k + h * hd], hp.n_rot, c, s, neox);
        if (hp.attn_temp_scale != 0.0f)  // Ministral 3: q times its position's temperature, after RoPE
          for (int64_t d = 0; d < n_q; ++d) q[i * n_q + d] *= q_temp[i];
        if (hp.scale_q_before_kq)
          for (int64_t d = 0; d < n_q; ++d) q[i * n_q + d] *= q_scale;
        // A quantized cache's rotation (model::kv_rotation_k/_v), as
        // llama.cpp's build_attn applies it to q_cur, k_cur and v_cur.
        const model::KvTypes& t = seqs[rows[i].seq]->pool().types();
        if (const int64_t r = model::kv_rotation_k(t.k, hd)) {
          kernels::fwht(&q[i * n_q], n_q / r, r);
          kernels::fwht(&k[i * n_k], n_k / r, r);
        }
        if (const int64_t r = model::kv_rotation_v(t.v, hd_v)) kernels::fwht(&v[i * n_v], n_v / r, r);
      });
      const int64_t il_kv = hp.kv_layer(il);  // the cache holds the attention layers only
      auto store_kv = [&](int64_t i) {
        model::KvCache& kv = *seqs[rows[i].seq];
        quant::ggml_fp16_t* kd = kv.k(il_kv, pos[i]);
        quant::ggml_fp16_t* vd = kv.v(il_kv, pos[i]);
        const model::KvTypes& t = kv.pool().types();
        // llama.cpp stores rows through ggml_set_rows, i.e. the CPU type's
        // from_float (quant::quantize_row); F16 rounds to nearest even.
        if (t.k == GgmlType::F16) {
          for (int64_t d = 0; d < n_k; ++d) kd[d] = fp32_to_fp16(k[i * n_k + d]);
        } else {
          quant::quantize_row(t.k, &k[i * n_k], kd, n_k);
        }
        if (t.v == GgmlType::F16) {
          for (int64_t d = 0; d < n_v; ++d) vd[d] = fp32_to_fp16(v[i * n_v + d]);
        } else {
          quant::quantize_row(t.v, &v[i * n_v], vd, n_v);
        }
      };
      // The view of layer il_kv in a sequence's cache, and the attention row
      // (QueryRow) of batch row i for KV group g.
      auto layer_view = [&](const model::KvCache& kv) {
        return kernels::KvLayerView{kv.pages(),
                                    kv.pool().k_offset(il_kv),
                                    kv.pool().v_offset(il_kv),
                                    kv.pool().k_row_words(),
                                    kv.pool().v_row_words(),
                                    model::kPageShift,
                                    L.attn_sinks.empty() ? nullptr : L.attn_sinks.data(),
                                    kv.pool().types().k,
                                    kv.pool().types().v};
      };
      auto query_row = [&](int64_t i, int64_t g) {
        const model::KvCache& kv = *seqs[rows[i].seq];
        // A window's start rounded down to a multiple of 16, the positions
        // before it masked (QueryRow::n_masked), where the sequence keeps
        // every position (n_ctx within the window, or beside gpt-oss's and
        // Gemma 3's global layers); otherwise the window's own start, as the
        // circular cache before pages read it (same bits as then).
        const bool align_window = kv.capacity() >= kv.n_ctx();
        const int64_t window_first = swa ? std::max<int64_t>(0, pos[i] - hp.n_swa + 1) : 0;
        const int64_t n_masked = align_window ? window_first % 16 : 0;
        return kernels::QueryRow{&q[i * n_q + g * hp.n_gqa() * hd], &att[i * n_att + g * hp.n_gqa() * hd_v],
                                 window_first - n_masked, pos[i], n_masked};
      };
      auto attend = [&](const int64_t* row_ids, const int64_t* begin, int64_t n_blocks) {
        // Work items are (query block, KV group) pairs, split across threads,
        // never inside a sum; handed out last block first (the longest, under
        // the causal mask) so the cheap ones even out the threads at the end.
        // Each reads its group's K/V rows once for all n_gqa heads of its rows.
        // A block of one row (a decode step) whose range spans several chunks
        // (kernels::kAttendChunk) is split further, into (group, chunk) items
        // (flash decoding, kernels::attend_chunk_scores), so one sequence at
        // depth keeps every thread busy; the chunks combine in a fixed order,
        // so the bits are those of attend_block whatever the split.
        const int64_t n_groups = hp.n_head_kv, n_gqa = hp.n_gqa();
        SplitAttention& sp = sc.split;
        sp.jobs.clear();
        sp.blocks.clear();
        int64_t n_scores = 0, n_stats = 0, n_partial = 0, n_split_items = 0;
        for (int64_t b = 0; b < n_blocks; ++b) {
          const int64_t i = row_ids[begin[b]];
          const int64_t n_chunks = begin[b + 1] - begin[b] == 1 ? kernels::attend_chunk_count(query_row(i, 0)) : 1;
          if (n_chunks == 1) {
            sp.blocks.push_back(b);
            continue;
          }
          const int64_t n_kv = pos[i] - query_row(i, 0).first + 1;
          sp.jobs.push_back({i, n_chunks, n_kv, n_scores, n_stats, n_partial, n_split_items});
          n_scores += n_groups * n_gqa * n_kv;
          n_stats += n_groups * n_gqa * n_chunks;
          n_partial += n_groups * n_chunks * n_gqa * hd_v;
          n_split_items += n_groups * n_chunks;
        }
        sp.scores.resize(static_cast<size_t>(n_scores));
        sp.chunk_max.resize(static_cast<size_t>(n_stats));
        sp.chunk_sum.resize(static_cast<size_t>(n_stats));
        sp.partial.resize(static_cast<size_t>(n_partial));
        // Split item w: its job (the last whose first item is at most w), group and chunk.
        struct SplitItem {
          const SplitAttention::Job* job;
          int64_t g, c;
          float* scores;
          float* chunk_max;
          double* chunk_sum;
          float* partial;
        };
        auto split_item = [&](int64_t w) {
          const SplitAttention::Job* job =
              std::upper_bound(sp.jobs.data(), sp.jobs.data() + sp.jobs.size(), w,
                               [](int64_t x, const SplitAttention::Job& j) { return x < j.first_item; }) - 1;
          const int64_t g = (w - job->first_item) / job->n_chunks, c = (w - job->first_item) % job->n_chunks;
          const int64_t stats = job->stats + g * n_gqa * job->n_chunks;
          return SplitItem{job, g, c, &sp.scores[job->scores + g * n_gqa * job->n_kv], &sp.chunk_max[stats],
                           &sp.chunk_sum[stats], &sp.partial[job->partial + g * job->n_chunks * n_gqa * hd_v]};
        };
        const int64_t n_items = static_cast<int64_t>(sp.blocks.size()) * n_groups;
        // Phase 1 of the split rows (their scores) beside the whole blocks.
        pool.parallel_for(n_split_items + n_items, 1, [&](int64_t w0, int64_t w1) {
          // Per thread and kept: its score rows reach 2 MiB in a prefill block.
          thread_local kernels::AttentionScratch scratch;
          thread_local std::vector<kernels::QueryRow> block;
          for (int64_t w = w0; w < w1; ++w) {
            if (w < n_split_items) {
              const SplitItem it = split_item(w);
              const int64_t i = it.job->row;
              kernels::attend_chunk_scores(layer_view(*seqs[rows[i].seq]), it.g, query_row(i, it.g), it.c, n_gqa, hd,
                                           hd_v, kq_scale, it.scores, it.chunk_max, scratch);
              continue;
            }
            const int64_t idx = n_items - 1 - (w - n_split_items);
            const int64_t b = sp.blocks[static_cast<size_t>(idx / n_groups)], g = idx % n_groups;
            const int64_t* ids = row_ids + begin[b];
            const int64_t n_b = begin[b + 1] - begin[b];
            block.resize(static_cast<size_t>(n_b));
            for (int64_t r = 0; r < n_b; ++r) block[r] = query_row(ids[r], g);
            kernels::attend_block(layer_view(*seqs[rows[ids[0]].seq]), g, block.data(), n_b, n_gqa, hd, hd_v,
                                  kq_scale, scratch);
          }
        });
        if (n_split_items == 0) return;
        // Phases 2 and 3 (the chunks' exponentials and sums; their
        // probabilities and weighted V), then the chunks combined in order.
        pool.parallel_for(n_split_items, 1, [&](int64_t w0, int64_t w1) {
          for (int64_t w = w0; w < w1; ++w) {
            const SplitItem it = split_item(w);
            const int64_t i = it.job->row;
            kernels::attend_chunk_exp(layer_view(*seqs[rows[i].seq]), it.g, query_row(i, it.g), it.c, n_gqa,
                                      it.scores, it.chunk_max, it.chunk_sum);
          }
        });
        pool.parallel_for(n_split_items, 1, [&](int64_t w0, int64_t w1) {
          thread_local kernels::AttentionScratch scratch;
          for (int64_t w = w0; w < w1; ++w) {
            const SplitItem it = split_item(w);
            const int64_t i = it.job->row;
            kernels::attend_chunk_values(layer_view(*seqs[rows[i].seq]), it.g, query_row(i, it.g), it.c, n_gqa, hd,
                                         hd_v, it.scores, it.chunk_max, it.chunk_sum, it.partial, scratch);
          }
        });
        const int64_t n_combine = static_cast<int64_t>(sp.jobs.size()) * n_groups;
        pool.parallel_for(n_combine, 1, [&](int64_t w0, int64_t w1) {
          for (int64_t w = w0; w < w1; ++w) {
            const SplitAttention::Job& job = sp.jobs[static_cast<size_t>(w / n_groups)];
            const int64_t g = w % n_groups;
            kernels::attend_chunks_combine(query_row(job.row, g), n_gqa, hd_v,
                                           &sp.partial[job.partial + g * job.n_chunks * n_gqa * hd_v]);
          }
        });
      };
      // Distinct positions of distinct rows, so the stores go on in parallel.
      by_rows(n, [&](int64_t r) { store_kv(r); });
      attend(block_rows.data(), block_begin.data(), static_cast<int64_t>(block_begin.size()) - 1);
      if (any_v_rotation)
        by_rows(n, [&](int64_t i) {  // a rotated V's output rotated back
          const int64_t r = model::kv_rotation_v(seqs[rows[i].seq]->pool().types().v, hd_v);
          if (r) kernels::fwht(&att[i * n_att], n_att / r, r);
        });
      if (hp.attn_output_gate)  // Qwen3.5: the output times sigmoid(gate) (ggml_sigmoid, ggml_mul)
        by_rows(n, [&](int64_t i) {
          for (int64_t h = 0; h < hp.n_head; ++h)
            for (int64_t d = 0; d < hd_v; ++d)
              att[i * n_att + h * hd_v + d] *= kernels::sigmoid(sc.attn_gate[2 * i * n_q + (2 * h + 1) * hd + d]);
        });
      {
        observe_products(obs, {&L.wo}, att.data(), n, n_att);
        kernels::Activations act(att.data(), n, n_att, &sc.act);
        kernels::matmul(L.wo, act, tmp.data(), pool);
      }
      add_bias(tmp, n, L.bo);
    }  // attention
    // Gemma 3 normalizes a block's output before its residual add.
    auto post_norm = [&](const std::vector<float>& w, int64_t i) {
      if (hp.post_norms) kernels::rms_norm(&tmp[i * n_embd], w.data(), &tmp[i * n_embd], n_embd, hp.f_norm_rms_eps);
    };
    // Feed-forward block (after the residual add of its row).
    by_rows(n, [&](int64_t i) {
      post_norm(L.attn_post_norm, i);
      add_residual(i);
      kernels::rms_norm(&x[i * n_embd], L.ffn_norm.data(), &cur[i * n_embd], n_embd, hp.f_norm_rms_eps);
    });
    if (hp.n_expert > 0) {
      moe_ffn(hp, L, cur.data(), tmp.data(), n, pool, sc.moe, &sc.act, obs);
      if (hp.n_ff_shexp > 0) shared_expert_ffn(hp, L, cur.data(), tmp.data(), n, pool, sc.moe, &sc.act, obs);
    } else {
      observe_products(obs, {&L.ffn_gate, &L.ffn_up}, cur.data(), n, n_embd);
      kernels::Activations act(cur.data(), n, n_embd, &sc.act);
      const kernels::MatmulOut gate_up[] = {{&L.ffn_gate, gate.data()}, {&L.ffn_up, up.data()}};
      kernels::matmul_many(gate_up, act, pool);
      pool.parallel_for(n, 1, [&](int64_t r0, int64_t r1) {  // row by row: any split gives the same bits
        const size_t o = static_cast<size_t>(r0 * hp.n_ff);
        if (hp.gelu_ffn) kernels::geglu(gate.data() + o, up.data() + o, gate.data() + o, (r1 - r0) * hp.n_ff);
        else kernels::swiglu_rows(gate.data() + o, up.data() + o, gate.data() + o, r1 - r0, hp.n_ff);
      });
      observe_products(obs, {&L.ffn_down}, gate.data(), n, hp.n_ff);
      kernels::Activations par(gate.data(), n, hp.n_ff, &sc.act);
      kernels::matmul(L.ffn_down, par, tmp.data(), pool);
    }
    by_rows(n, [&](int64_t i) {
      post_norm(L.ffn_post_norm, i);
      add_residual(i);
    });
  }
  for (size_t sq = 0; sq < seqs.size(); ++sq)
    if (n_new[sq]) seqs[sq]->set_n_past(seqs[sq]->n_past() + n_new[sq]);

  // The final norm of the wanted rows; the caller runs the vocabulary
  // projection once for every pass.
  int64_t n_out = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!rows[i].logits) continue;
    kernels::rms_norm(&x[i * n_embd], m.output_norm.data(), out + n_out * n_embd, n_embd, hp.f_norm_rms_eps);
    ++n_out;
  }
}

// The rows of `rows` (a pass, at most kMaxPassRows) up to and including the
// first that brings its sequence to that sequence's next snapshot position;
// all of them when none does.
int64_t rows_before_snapshot(std::span<KvCache* const> seqs, std::span<const BatchRow> rows, ForwardScratch& sc) {
  auto& at = sc.snapshot_at;
  auto& pos = sc.snapshot_pos;
  at.resize(seqs.size());
  pos.resize(seqs.size());
  for (size_t sq = 0; sq < seqs.size(); ++sq) {
    at[sq] = seqs[sq] ? seqs[sq]->next_snapshot() : std::numeric_limits<int64_t>::max();
    pos[sq] = seqs[sq] ? seqs[sq]->n_past() : 0;
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  for (int64_t i = 0; i < n; ++i) {
    const auto sq = static_cast<size_t>(rows[i].seq);
    if (++pos[sq] == at[sq]) return i + 1;
  }
  return n;
}

}  // namespace

void forward_batch(const Model& m, std::span<model::KvCache* const> seqs, std::span<const BatchRow> rows,
                   std::vector<float>& logits, base::ThreadPool& pool, ForwardScratch* scratch, ForwardOutput what,
                   ProductObserver* observer) {
  const HParams& hp = m.hp;
  const int64_t n = static_cast<int64_t>(rows.size());
  if (n == 0) throw Error(Errc::invalid_argument, "forward: empty batch");
  ForwardScratch local;
  ForwardScratch& s = scratch ? *scratch : local;

  // Validate everything before touching any cache.
  s.n_new.assign(seqs.size(), 0);
  int64_t n_wanted = 0;
  for (int64_t i = 0; i < n; ++i) {
    const BatchRow& r = rows[i];
    if (r.seq < 0 || static_cast<size_t>(r.seq) >= seqs.size() || !seqs[r.seq])
      throw Error(Errc::out_of_range, "batch row " + std::to_string(i) + ": sequence " + std::to_string(r.seq) +
                                          " does not exist (" + std::to_string(seqs.size()) + " sequences)");
    if (!r.embd && (r.token < 0 || r.token >= hp.n_vocab))
      throw Error(Errc::out_of_range, "token id " + std::to_string(r.token) + " is outside the vocabulary [0, " +
                                          std::to_string(hp.n_vocab) + ")");
    ++s.n_new[r.seq];
    n_wanted += r.logits ? 1 : 0;
  }
  for (size_t sq = 0; sq < seqs.size(); ++sq) {
    if (!s.n_new[sq]) continue;
    const model::KvCache& kv = *seqs[sq];
    if (kv.pool().n_layer() != hp.n_layer_kv() || kv.pool().n_embd_k() != hp.n_embd_k_gqa() ||
        kv.pool().n_embd_v() != hp.n_embd_v_gqa())
      throw Error(Errc::invalid_argument, "forward: sequence " + std::to_string(sq) +
                                              "'s KV pool has the shapes of another model");
    if (hp.has_recurrent() && kv.recurrent().bytes() != recurrent_state_bytes(hp))
      throw Error(Errc::invalid_argument, "sequence " + std::to_string(sq) +
                                              ": its cache holds no recurrent state for this model's DeltaNet layers");
    if (kv.n_past() + s.n_new[sq] > kv.n_ctx())
      throw Error(Errc::invalid_argument, "context full: " + std::to_string(kv.n_past()) + " cached + " +
                                              std::to_string(s.n_new[sq]) + " new tokens exceed the context size " +
                                              std::to_string(kv.n_ctx()) +
                                              (seqs.size() > 1 ? " (sequence " + std::to_string(sq) + ")" : ""));
  }
  // The pages of every new row, taken before any cache is touched: the pages
  // each pool must give, summed over its sequences, checked first, so an
  // out-of-pages batch fails whole (Error out_of_range) and changes nothing.
  {
    auto& need = s.pool_pages;
    need.clear();
    for (size_t sq = 0; sq < seqs.size(); ++sq) {
      if (!s.n_new[sq]) continue;
      const int64_t n_pages = seqs[sq]->pages_needed(s.n_new[sq]);
      auto it = std::find_if(need.begin(), need.end(), [&](const auto& e) { return e.first == &seqs[sq]->pool(); });
      if (it == need.end()) need.emplace_back(&seqs[sq]->pool(), n_pages);
      else it->second += n_pages;
    }
    for (const auto& [pool_of, n_pages] : need)
      if (n_pages > pool_of->n_free())
        throw Error(Errc::out_of_range, "KV pool full: the batch needs " + std::to_string(n_pages) + " pages of " +
                                            std::to_string(model::kPageSize) + " positions, " +
                                            std::to_string(pool_of->n_free()) + " are free of " +
                                            std::to_string(pool_of->max_pages()));
    for (size_t sq = 0; sq < seqs.size(); ++sq)
      if (s.n_new[sq]) seqs[sq]->reserve(s.n_new[sq]);
  }

  // Passes of at most kMaxPassRows rows, in batch order: a row's result does
  // not depend on the rows beside it (contract 2), and the rows of a sequence
  // cut between two passes find the earlier ones in its cache. What a pass
  // touches (activations, their quantized copies) then stays in cache.
  // A pass also ends after the row that brings a sequence to a snapshot
  // position (KvCache::next_snapshot: the end of a prompt, every
  // kSnapshotInterval positions), which is taken then; the cut changes no
  // row's bits, for the same reason.
  s.normed.resize(static_cast<size_t>(n_wanted * hp.n_embd));
  const bool snapshots = std::any_of(seqs.begin(), seqs.end(), [](const KvCache* kv) {
    return kv && kv->keeps_snapshots();
  });
  int64_t done_wanted = 0;
  for (int64_t i0 = 0; i0 < n;) {
    int64_t len = std::min(kMaxPassRows, n - i0);
    if (snapshots) len = rows_before_snapshot(seqs, rows.subspan(static_cast<size_t>(i0), static_cast<size_t>(len)), s);
    const std::span<const BatchRow> pass = rows.subspan(static_cast<size_t>(i0), static_cast<size_t>(len));
    forward_pass(m, seqs, pass, s.normed.data() + done_wanted * hp.n_embd, pool, s, observer);
    for (const BatchRow& r : pass) done_wanted += r.logits ? 1 : 0;
    if (snapshots)
      for (KvCache* kv : seqs)
        if (kv) kv->take_due_snapshot();
    i0 += len;
  }

  if (what == ForwardOutput::hidden) {
    logits.assign(s.normed.begin(), s.normed.end());
    return;
  }
  // Output: the vocabulary projection of the wanted rows of every pass.
  logits.resize(static_cast<size_t>(n_wanted * hp.n_vocab));
  if (n_wanted == 0) return;
  observe_products(observer, {&m.output}, s.normed.data(), n_wanted, hp.n_embd);
  kernels::Activations act(s.normed.data(), n_wanted, hp.n_embd, &s.act);
  kernels::matmul(m.output, act, logits.data(), pool);
  if (hp.f_final_logit_softcapping > 0.0f) {
    kernels::softcap(logits.data(), static_cast<int64_t>(logits.size()), hp.f_final_logit_softcapping);
  }
}

}  // namespace synapse::model

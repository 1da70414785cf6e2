// Embeddings and rerank scores (model/embedding.hpp).
#include "model/embedding.hpp"

#include <cmath>
#include <string>

#include "kernels/matmul.hpp"
#include "kernels/ops.hpp"
#include "synapse/error.hpp"

namespace synapse::model {
namespace {

// Rank pooling reads the last token for Qwen3 rerankers, the first for the
// others (llm_graph_input_cls::set_input, src/llama-graph.cpp:298-301).
bool rank_reads_last(const Model& m) { return m.hp.arch == Arch::qwen3; }

// The classifier over one pooled row h [n_embd]: cls.output (+ bias), or the
// output matrix's "yes" and "no" rows for a Qwen3-Reranker file without it;
// then, for qwen3, softmax (build_pooling's LLAMA_POOLING_TYPE_RANK branch).
std::vector<float> rank_head(const Model& m, const float* h, base::ThreadPool& pool,
                             kernels::ActivationBuffers* buffers) {
  std::vector<float> y;
  kernels::Activations act(h, 1, m.hp.n_embd, buffers);
  if (m.cls_out.data) {
    y.resize(static_cast<size_t>(m.cls_out.n_out));
    kernels::matmul(m.cls_out, act, y.data(), pool);
    for (size_t i = 0; i < m.cls_out_b.size(); ++i) y[i] += m.cls_out_b[i];
  } else {
    // Each output is one vec_dot of its own row (kernels::matmul), so these
    // two equal what a cls.output made of the same two rows gives.
    std::vector<float> logits(static_cast<size_t>(m.hp.n_vocab));
    kernels::matmul(m.output, act, logits.data(), pool);
    y = {logits[static_cast<size_t>(m.rank_yes)], logits[static_cast<size_t>(m.rank_no)]};
  }
  if (m.hp.arch == Arch::qwen3) kernels::softmax(y.data(), static_cast<int64_t>(y.size()));
  return y;
}

}  // namespace

Pooling resolve_pooling(const Model& m, Pooling requested) {
  if (requested != Pooling::unspecified) return requested;
  return m.hp.pooling_type >= 0 ? static_cast<Pooling>(m.hp.pooling_type) : Pooling::none;
}

void check_rank_head(const Model& m) {
  if (m.cls_out.data) return;
  if (m.rank_yes >= 0) return;
  throw Error(Errc::unsupported, m.file.path() +
                                     ": rank pooling needs a classifier head (cls.output.weight), or a qwen3 "
                                     "reranker whose vocabulary has the tokens \"yes\" and \"no\"; this file has neither");
}

void normalize_embedding(const float* in, float* out, int64_t n, int embd_normalize) {
  double sum = 0.0;
  switch (embd_normalize) {
    case -1:
      sum = 1.0;
      break;
    case 0:
      for (int64_t i = 0; i < n; ++i) sum = std::max(sum, static_cast<double>(std::abs(in[i])));
      sum /= 32760.0;  // the int16 range
      break;
    case 2:
      for (int64_t i = 0; i < n; ++i) sum += in[i] * in[i];  // float products, as common_embd_normalize
      sum = std::sqrt(sum);
      break;
    default:
      for (int64_t i = 0; i < n; ++i) sum += std::pow(std::abs(in[i]), embd_normalize);
      sum = std::pow(sum, 1.0 / embd_normalize);
      break;
  }
  const float norm = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * norm;
}

std::vector<EmbeddingRows> embed(const Model& m, std::span<const std::vector<token_id>> inputs, Pooling pooling,
                                 int embd_normalize, int64_t n_ctx, base::ThreadPool& pool, ForwardScratch* scratch) {
  if (inputs.empty()) throw Error(Errc::invalid_argument, "embed: no inputs");
  if (pooling == Pooling::unspecified) throw Error(Errc::invalid_argument, "embed: the pooling type is not resolved");
  if (pooling == Pooling::rank) check_rank_head(m);
  const bool first_only = pooling == Pooling::cls || (pooling == Pooling::rank && !rank_reads_last(m));
  const bool last_only = pooling == Pooling::last || (pooling == Pooling::rank && rank_reads_last(m));

  std::vector<KvCache> caches;
  caches.reserve(inputs.size());
  std::vector<KvCache*> seqs;
  std::vector<BatchRow> rows;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t n = static_cast<int64_t>(inputs[i].size());
    if (n == 0) throw Error(Errc::invalid_argument, "input " + std::to_string(i) + " has no tokens");
    if (n > n_ctx)
      throw Error(Errc::invalid_argument, "input " + std::to_string(i) + " is " + std::to_string(n) +
                                              " tokens, longer than the context (n_ctx " + std::to_string(n_ctx) + ")");
    caches.push_back(make_kv_cache(m, n));
    seqs.push_back(&caches.back());
    for (int64_t t = 0; t < n; ++t) {
      const bool wanted = first_only ? t == 0 : last_only ? t == n - 1 : true;
      rows.push_back({inputs[i][static_cast<size_t>(t)], nullptr, static_cast<int32_t>(i), wanted});
    }
  }
  std::vector<float> hidden;
  forward_batch(m, seqs, rows, hidden, pool, scratch, ForwardOutput::hidden);

  const int64_t n_embd = m.hp.n_embd;
  std::vector<EmbeddingRows> out(inputs.size());
  const float* h = hidden.data();  // the wanted rows, input by input
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t n = static_cast<int64_t>(inputs[i].size());
    EmbeddingRows& r = out[i];
    r.n_tokens = n;
    switch (pooling) {
      case Pooling::none:
        for (int64_t t = 0; t < n; ++t) r.rows.emplace_back(h + t * n_embd, h + (t + 1) * n_embd);
        h += n * n_embd;
        break;
      case Pooling::mean: {
        const float div = 1.0f / static_cast<float>(n);
        std::vector<float> v(static_cast<size_t>(n_embd));
        for (int64_t d = 0; d < n_embd; ++d) {
          double sum = 0.0;
          for (int64_t t = 0; t < n; ++t) sum += h[t * n_embd + d] * div;
          v[static_cast<size_t>(d)] = static_cast<float>(sum);
        }
        r.rows.push_back(std::move(v));
        h += n * n_embd;
        break;
      }
      case Pooling::cls:
      case Pooling::last:
        r.rows.emplace_back(h, h + n_embd);
        h += n_embd;
        break;
      case Pooling::rank:
        r.rows.push_back(rank_head(m, h, pool, scratch ? &scratch->act : nullptr));
        h += n_embd;
        break;
      case Pooling::unspecified:
        break;
    }
    if (pooling != Pooling::rank)
      for (std::vector<float>& row : r.rows)
        normalize_embedding(row.data(), row.data(), static_cast<int64_t>(row.size()), embd_normalize);
  }
  return out;
}

}  // namespace synapse::model

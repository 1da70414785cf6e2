// Runs the split attention of one row (kernels::attend_chunk_scores and the
// phases after it, attention.hpp) as a pool of threads may: each phase's
// chunks in reverse order, alternating between two scratches, on buffers
// filled with NaN (so nothing read before it is written passes unseen).
#pragma once

#include <cmath>
#include <vector>

#include "kernels/attention.hpp"

namespace synapse::kernels {

inline void attend_split(const KvLayerView& view, int64_t g, const QueryRow& row, int64_t n_gqa, int64_t hd,
                         int64_t hd_v, float kq_scale) {
  const int64_t n_chunks = attend_chunk_count(row), n_kv = row.last - row.first + 1;
  std::vector<float> scores(static_cast<size_t>(n_gqa * n_kv), NAN), mx(static_cast<size_t>(n_gqa * n_chunks), NAN);
  std::vector<float> partial(static_cast<size_t>(n_chunks * n_gqa * hd_v), NAN);
  std::vector<double> sum(mx.size(), NAN);
  AttentionScratch s[2];
  for (int64_t c = n_chunks - 1; c >= 0; --c)
    attend_chunk_scores(view, g, row, c, n_gqa, hd, hd_v, kq_scale, scores.data(), mx.data(), s[c % 2]);
  for (int64_t c = n_chunks - 1; c >= 0; --c) attend_chunk_exp(view, g, row, c, n_gqa, scores.data(), mx.data(), sum.data());
  for (int64_t c = n_chunks - 1; c >= 0; --c)
    attend_chunk_values(view, g, row, c, n_gqa, hd, hd_v, scores.data(), mx.data(), sum.data(), partial.data(),
                        s[(c + 1) % 2]);
  attend_chunks_combine(row, n_gqa, hd_v, partial.data());
}

}  // namespace synapse::kernels

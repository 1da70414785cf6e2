#include "runtime/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "synapse/error.hpp"

namespace synapse::runtime {

token_id sample_greedy(std::span<const float> logits) {
  if (logits.empty()) throw Error(Errc::invalid_argument, "sample: empty logits row");
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<token_id>(best);
}

Sampler::Sampler(const SamplerParams& p)
    : p_(p), seed_(p.seed == 0xFFFFFFFFu ? std::random_device{}() : p.seed), rng_(seed_) {}

token_id Sampler::sample(std::span<const float> logits) {
  if (p_.temp <= 0.0f) return sample_greedy(logits);
  struct Cand {
    token_id id;
    float logit;
  };
  std::vector<Cand> c(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) c[i] = {static_cast<token_id>(i), logits[i]};
  auto by_logit = [](const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  // top-k
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < c.size()) {
    std::partial_sort(c.begin(), c.begin() + p_.top_k, c.end(), by_logit);
    c.resize(static_cast<size_t>(p_.top_k));
  } else {
    std::sort(c.begin(), c.end(), by_logit);
  }
  auto probs = [&] {
    std::vector<double> pr(c.size());
    double sum = 0;
    for (size_t i = 0; i < c.size(); ++i) sum += pr[i] = std::exp(static_cast<double>(c[i].logit - c[0].logit));
    for (double& v : pr) v /= sum;
    return pr;
  };
  // top-p: the smallest prefix whose probability reaches p (at least one).
  if (p_.top_p < 1.0f) {
    const std::vector<double> pr = probs();
    double cum = 0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
      cum += pr[i];
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
    c.resize(keep);
  }
  // min-p: drop candidates whose probability is below min_p times the top one.
  if (p_.min_p > 0.0f) {
    const float floor = c[0].logit + std::log(p_.min_p);
    size_t keep = 1;
    while (keep < c.size() && c[keep].logit >= floor) ++keep;
    c.resize(keep);
  }
  for (Cand& x : c) x.logit /= p_.temp;
  const std::vector<double> pr = probs();
  std::discrete_distribution<size_t> dist(pr.begin(), pr.end());
  return c[dist(rng_)].id;
}

}  // namespace synapse::runtime

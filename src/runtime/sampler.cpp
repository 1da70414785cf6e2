#include "synapse/sampling.hpp"

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>
#include <unordered_map>

#include "synapse/error.hpp"

namespace synapse {

namespace {

// Descending logit, then ascending id: a total order, so every sort here is
// deterministic (llama.cpp's partial sorts leave equal logits in any order).
bool by_logit(const TokenData& a, const TokenData& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

void sort_candidates(Candidates& c) {
  if (!c.sorted) std::sort(c.data.begin(), c.data.end(), by_logit);
  c.sorted = true;
}

float max_logit(const Candidates& c) {
  if (c.sorted) return c.data[0].logit;
  float m = c.data[0].logit;
  for (const TokenData& t : c.data) m = std::max(m, t.logit);
  return m;
}

// exp(logit - m) for the maximum logit m. When m is +inf (a +inf logit bias)
// the +inf candidates share the whole mass equally and the others get none:
// the limit of raising those logits without bound, where exp(inf - inf)
// would be NaN.
float exp_rel(float logit, float m) {
  if (m == INFINITY) return logit == INFINITY ? 1.0f : 0.0f;
  return std::exp(logit - m);
}

// Whether temperature `temp` leaves only the argmax: temp <= 0 (llama.cpp's
// greedy), or a temperature so small that a finite logit divided by it
// overflows to +-inf (1e-40: softmax at temperature -> 0 tends to the
// argmax, which is where this ends).
bool temp_is_greedy(const Candidates& c, float temp) {
  if (temp <= 0.0f) return true;
  for (const TokenData& t : c.data)
    if (std::isfinite(t.logit) && !std::isfinite(t.logit / temp)) return true;
  return false;
}

void check_finite_param(float v, const char* name) {
  if (std::isnan(v)) throw Error(Errc::invalid_argument, std::string("sampler: ") + name + " is NaN");
}

}  // namespace

LogitBias parse_logit_bias(std::string_view value) {
  auto bad = [&] {
    return Error(Errc::invalid_argument, "--logit-bias: '" + std::string(value) +
                                             "' is not TOKEN_ID(+|-)BIAS, e.g. 15043+1 or 2-inf");
  };
  size_t i = 0;
  while (i < value.size() && value[i] >= '0' && value[i] <= '9') ++i;
  if (i == 0 || i > 10 || i + 1 >= value.size()) throw bad();
  const long long id = std::stoll(std::string(value.substr(0, i)));
  if (id > INT32_MAX) throw bad();
  const char sign = value[i];
  if (sign != '+' && sign != '-') throw bad();
  const std::string rest(value.substr(i + 1));
  if (rest.empty() || rest[0] == '+' || rest[0] == '-' || std::isspace(static_cast<unsigned char>(rest[0])))
    throw bad();
  char* end = nullptr;
  errno = 0;
  const float mag = std::strtof(rest.c_str(), &end);
  if (end != rest.c_str() + rest.size() || std::isnan(mag)) throw bad();
  return {static_cast<token_id>(id), sign == '-' ? -mag : mag};
}

namespace {

// Candidates::from_logits into `c`, reusing its storage: a sampler refills
// the same n_vocab entries every token (1.5 MB for a 128k vocabulary, which
// a fresh vector would take from mmap and fault in page by page each time).
void fill_candidates(Candidates& c, std::span<const float> logits) {
  if (logits.empty()) throw Error(Errc::invalid_argument, "sampler: empty logits row");
  c.data.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) c.data[i] = {static_cast<token_id>(i), logits[i], 0.0f};
  c.sorted = false;
}

}  // namespace

Candidates Candidates::from_logits(std::span<const float> logits) {
  Candidates c;
  fill_candidates(c, logits);
  return c;
}

token_id sample_greedy(std::span<const float> logits) {
  if (logits.empty()) throw Error(Errc::invalid_argument, "sample: empty logits row");
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<token_id>(best);
}

void softmax(Candidates& c, bool do_sort) {
  if (c.data.empty()) return;
  if (do_sort) sort_candidates(c);
  const float m = max_logit(c);
  float sum = 0.0f;
  for (TokenData& t : c.data) {
    t.p = exp_rel(t.logit, m);
    sum += t.p;
  }
  for (TokenData& t : c.data) t.p /= sum;
}

void apply_logit_bias(Candidates& c, std::span<const LogitBias> biases) {
  if (biases.empty()) return;
  // Candidates straight from from_logits hold id i at index i; otherwise look up.
  std::unordered_map<token_id, size_t> where;
  bool identity = c.data.size() > 0;
  for (size_t i = 0; i < c.data.size() && identity; ++i) identity = c.data[i].id == static_cast<token_id>(i);
  if (!identity)
    for (size_t i = 0; i < c.data.size(); ++i) where[c.data[i].id] = i;
  for (const LogitBias& b : biases) {
    if (identity) {
      if (b.token < 0 || static_cast<size_t>(b.token) >= c.data.size())
        throw Error(Errc::out_of_range, "--logit-bias: token " + std::to_string(b.token) + " outside [0, " +
                                            std::to_string(c.data.size()) + ")");
      c.data[static_cast<size_t>(b.token)].logit += b.bias;
    } else if (auto it = where.find(b.token); it != where.end()) {
      c.data[it->second].logit += b.bias;
    }
  }
  c.sorted = false;
}

void apply_penalties(Candidates& c, std::span<const token_id> window, float repeat, float freq,
                     float present) {
  if (window.empty() || (repeat == 1.0f && freq == 0.0f && present == 0.0f)) return;
  std::unordered_map<token_id, int> count;
  for (token_id t : window) ++count[t];
  for (TokenData& t : c.data) {
    const auto it = count.find(t.id);
    if (it == count.end()) continue;
    // The CTRL paper divides; llama.cpp multiplies negative logits so that the
    // penalty always lowers the probability.
    if (t.logit <= 0) {
      t.logit *= repeat;
    } else {
      t.logit /= repeat;
    }
    t.logit -= static_cast<float>(it->second) * freq + present;
  }
  c.sorted = false;
}

void apply_top_k(Candidates& c, int32_t k) {
  if (k <= 0 || c.data.empty()) return;
  const size_t kk = std::min(static_cast<size_t>(k), c.data.size());
  if (!c.sorted) {
    std::partial_sort(c.data.begin(), c.data.begin() + static_cast<std::ptrdiff_t>(kk), c.data.end(), by_logit);
    c.sorted = true;
  }
  c.data.resize(kk);
}

void apply_typical(Candidates& c, float p, size_t min_keep) {
  if (p >= 1.0f || c.data.empty()) return;
  softmax(c, true);
  float entropy = 0.0f;
  for (const TokenData& t : c.data) entropy += -t.p * std::log(t.p);
  std::vector<float> shifted(c.data.size());
  for (size_t i = 0; i < c.data.size(); ++i) shifted[i] = std::fabs(-std::log(c.data[i].p) - entropy);
  std::vector<size_t> idx(c.data.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return shifted[a] < shifted[b]; });
  float cum = 0.0f;
  size_t last = idx.size();
  for (size_t i = 0; i < idx.size(); ++i) {
    cum += c.data[idx[i]].p;
    if (cum > p && (min_keep == 0 || i >= min_keep - 1)) {
      last = i + 1;
      break;
    }
  }
  std::vector<TokenData> kept(last);
  for (size_t i = 0; i < last; ++i) kept[i] = c.data[idx[i]];
  c.data.swap(kept);
  c.sorted = false;
}

void apply_top_p(Candidates& c, float p, size_t min_keep) {
  if (p >= 1.0f || c.data.empty()) return;
  softmax(c, false);
  sort_candidates(c);
  float cum = 0.0f;
  size_t last = c.data.size();
  for (size_t i = 0; i < c.data.size(); ++i) {
    cum += c.data[i].p;
    if (cum >= p && i + 1 >= min_keep) {
      last = i + 1;
      break;
    }
  }
  c.data.resize(last);
}

void apply_min_p(Candidates& c, float p, size_t min_keep) {
  if (p <= 0.0f || c.data.empty()) return;
  if (!c.sorted) {
    // Unsorted: filter in place, keeping the order (llama.cpp's fast path).
    float m = -FLT_MAX;
    for (const TokenData& t : c.data) m = std::max(m, t.logit);
    const float min_logit = m + std::log(p);
    std::vector<TokenData> kept;
    for (const TokenData& t : c.data)
      if (t.logit >= min_logit) kept.push_back(t);
    if (!kept.empty() && kept.size() >= min_keep) {
      c.data.swap(kept);
      return;
    }
    sort_candidates(c);
  }
  const float min_logit = c.data[0].logit + std::log(p);
  size_t i = 1;
  for (; i < c.data.size(); ++i)
    if (c.data[i].logit < min_logit && i >= min_keep) break;
  c.data.resize(i);
}

void apply_temperature(Candidates& c, float temp) {
  if (c.data.empty()) return;
  if (temp_is_greedy(c, temp)) {
    size_t best = 0;
    for (size_t i = 1; i < c.data.size(); ++i)
      if (by_logit(c.data[i], c.data[best])) best = i;
    for (size_t i = 0; i < c.data.size(); ++i)
      if (i != best) c.data[i].logit = -INFINITY;
    return;
  }
  for (TokenData& t : c.data) t.logit /= temp;
}

size_t sample_dist(Candidates& c, std::mt19937& rng) {
  if (c.data.empty()) throw Error(Errc::invalid_argument, "sampler: no candidates left to draw from");
  if (c.data.size() == 1) {
    c.data[0].p = 1.0f;
    return 0;
  }
  const float m = max_logit(c);
  double sum = 0.0;
  for (TokenData& t : c.data) {
    t.p = exp_rel(t.logit, m);
    sum += t.p;
  }
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  const double target = sum * uni(rng);
  double run = 0.0;
  size_t chosen = c.data.size();
  for (size_t i = 0; i < c.data.size(); ++i) {
    if (chosen == c.data.size()) {
      run += c.data[i].p;
      if (run >= target) chosen = i;
    }
    c.data[i].p = static_cast<float>(c.data[i].p / sum);
  }
  return chosen == c.data.size() ? c.data.size() - 1 : chosen;
}

Sampler::Sampler(const SamplerParams& p, int32_t n_ctx) : p_(p) {
  check_finite_param(p.temp, "--temp");
  check_finite_param(p.top_p, "--top-p");
  check_finite_param(p.min_p, "--min-p");
  check_finite_param(p.typical_p, "--typical");
  check_finite_param(p.penalty_repeat, "--repeat-penalty");
  check_finite_param(p.penalty_freq, "--frequency-penalty");
  check_finite_param(p.penalty_present, "--presence-penalty");
  for (const LogitBias& b : p.logit_bias) {
    check_finite_param(b.bias, "--logit-bias");
    if (b.token < 0)
      throw Error(Errc::out_of_range, "--logit-bias: negative token id " + std::to_string(b.token));
  }
  if (p.penalty_last_n < -1)
    throw Error(Errc::invalid_argument,
                "--repeat-last-n " + std::to_string(p.penalty_last_n) + ": must be >= -1 (-1: the context size)");
  if (p.penalty_last_n == -1) {
    if (n_ctx <= 0)
      throw Error(Errc::invalid_argument, "--repeat-last-n -1 needs the context size, and none was given");
    window_cap_ = static_cast<size_t>(n_ctx);
  } else {
    window_cap_ = static_cast<size_t>(p.penalty_last_n);
  }
  seed_ = p.seed == kDefaultSeed ? std::random_device{}() : p.seed;
  rng_.seed(seed_);
}

void Sampler::accept(token_id id) {
  if (window_cap_ == 0) return;
  if (window_.size() == window_cap_) window_.pop_front();
  window_.push_back(id);
}

void Sampler::reset() {
  window_.clear();
  rng_.seed(seed_);
}

token_id Sampler::sample(std::span<const float> logits) {
  fill_candidates(cur_, logits);
  return run_chain(/*biased=*/false);
}

token_id Sampler::sample(std::span<const float> logits, std::span<const uint64_t> allowed) {
  if (logits.empty()) throw Error(Errc::invalid_argument, "sampler: empty logits row");
  if (allowed.size() * 64 < logits.size())
    throw Error(Errc::invalid_argument, "sampler: a mask of " + std::to_string(allowed.size() * 64) +
                                            " tokens for " + std::to_string(logits.size()) + " logits");
  // The logit bias first, on the whole row (the chain's first stage; its ids
  // are checked against n_vocab as sample() checks them), then the mask.
  if (!p_.logit_bias.empty()) {
    biased_.assign(logits.begin(), logits.end());
    for (const LogitBias& b : p_.logit_bias) {
      if (b.token < 0 || static_cast<size_t>(b.token) >= logits.size())
        throw Error(Errc::out_of_range, "--logit-bias: token " + std::to_string(b.token) + " outside [0, " +
                                            std::to_string(logits.size()) + ")");
      biased_[static_cast<size_t>(b.token)] += b.bias;
    }
    logits = biased_;
  }
  cur_.data.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    if ((allowed[i >> 6] >> (i & 63)) & 1) cur_.data.push_back({static_cast<token_id>(i), logits[i], 0.0f});
  cur_.sorted = false;
  if (cur_.data.empty()) throw Error(Errc::invalid_argument, "sampler: the mask allows no token");
  return run_chain(/*biased=*/true);
}

token_id Sampler::run_chain(bool biased) {
  if (!biased) apply_logit_bias(cur_, p_.logit_bias);
  if (window_cap_ > 0 && !window_.empty()) {
    window_buf_.assign(window_.begin(), window_.end());
    apply_penalties(cur_, window_buf_, p_.penalty_repeat, p_.penalty_freq, p_.penalty_present);
  }
  apply_top_k(cur_, p_.top_k);
  apply_typical(cur_, p_.typical_p, p_.min_keep);
  apply_top_p(cur_, p_.top_p, p_.min_keep);
  apply_min_p(cur_, p_.min_p, p_.min_keep);
  const bool greedy = temp_is_greedy(cur_, p_.temp);
  apply_temperature(cur_, p_.temp);
  if (greedy) {
    // The draw would pick the one finite candidate; skip the RNG.
    size_t best = 0;
    for (size_t i = 1; i < cur_.data.size(); ++i)
      if (by_logit(cur_.data[i], cur_.data[best])) best = i;
    for (TokenData& t : cur_.data) t.p = 0.0f;
    cur_.data[best].p = 1.0f;
    return cur_.data[best].id;
  }
  return cur_.data[sample_dist(cur_, rng_)].id;
}

}  // namespace synapse

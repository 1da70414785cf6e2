// The generation loop (include/synapse/generation.hpp).
#include "synapse/generation.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>

#include "runtime/grammar_cache.hpp"
#include "runtime/reply.hpp"
#include "synapse/error.hpp"

namespace synapse {

const char* finish_reason_name(FinishReason r) noexcept {
  switch (r) {
    case FinishReason::none: return "none";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
  }
  return "?";
}

token_id end_of_turn_token(const Tokenizer& tok) {
  if (tok.eot() >= 0) return tok.eot();
  return tok.eos();
}

namespace {

// log-softmax of the raw row (OpenAI's logprobs are the model's distribution):
// log p_i = l_i - (max + log sum_j exp(l_j - max)), the sum in double in id
// order so that the value depends on the row alone.
double log_sum_exp(std::span<const float> logits) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  if (!std::isfinite(mx)) return mx;
  double sum = 0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l) - mx);
  return mx + std::log(sum);
}

void fill_logprobs(GeneratedToken& t, std::span<const float> logits, int32_t n_probs) {
  const double lse = log_sum_exp(logits);
  t.logprob = static_cast<float>(logits[static_cast<size_t>(t.id)] - lse);
  if (n_probs <= 0) return;
  const size_t n = std::min(static_cast<size_t>(n_probs), logits.size());
  std::vector<token_id> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  // Highest logit first, ties to the lower id (a total order: the result does
  // not depend on the sort's implementation).
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), [&](token_id a, token_id b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  t.top_logprobs.reserve(n);
  for (size_t i = 0; i < n; ++i)
    t.top_logprobs.push_back({ids[i], static_cast<float>(logits[static_cast<size_t>(ids[i])] - lse)});
}

// post_sampling_probs: the draw's distribution (Sampler::last_candidates, p
// normalized by the last stage) instead of the raw row's; llama-server's
// populate_token_probs(post_sampling = true), with its sort by p made total
// (ties to the lower id) so that the entries depend on the row alone.
void fill_post_sampling_probs(GeneratedToken& t, const Candidates& c, int32_t n_probs) {
  for (const TokenData& d : c.data)
    if (d.id == t.id) t.logprob = std::log(d.p);
  if (n_probs <= 0) return;
  std::vector<TokenData> by_p(c.data.begin(), c.data.end());
  const size_t n = std::min(static_cast<size_t>(n_probs), by_p.size());
  std::partial_sort(by_p.begin(), by_p.begin() + static_cast<std::ptrdiff_t>(n), by_p.end(),
                    [](const TokenData& a, const TokenData& b) { return a.p > b.p || (a.p == b.p && a.id < b.id); });
  t.top_logprobs.reserve(n);
  for (size_t i = 0; i < n && by_p[i].p > 0.0f; ++i) t.top_logprobs.push_back({by_p[i].id, std::log(by_p[i].p)});
}

}  // namespace

struct Generation::State {
  const Tokenizer& tok;
  GenerationParams p;
  std::optional<Sampler> own;
  Sampler* sampler;
  Stopper stopper;
  FinishReason finish = FinishReason::none;
  token_id last = -1;
  std::optional<GrammarMatcher> grammar;  // p.sampling.grammar, when set
  std::vector<uint64_t> mask;
  std::vector<token_id> eog_ids;  // filled on first need (ignore_eos with a grammar)

  State(const Tokenizer& t, GenerationParams params)
      : tok(t), p(std::move(params)), sampler(nullptr), stopper(t, {p.max_tokens, p.stop, p.ignore_eos, p.preserved_tokens}) {
    if (!p.sampling.grammar.empty()) {
      auto g = runtime::cached_grammar(p.sampling.grammar);
      const std::vector<int32_t> ids = runtime::resolve_grammar_tokens(*g, t);
      grammar.emplace(std::move(g), runtime::cached_vocabulary(t, p.preserved_tokens), ids);
    }
    if (p.n_ubatch < 1)
      throw Error(Errc::invalid_argument, "n_ubatch must be at least 1, got " + std::to_string(p.n_ubatch));
    if (p.n_probs < 0) throw Error(Errc::invalid_argument, "n_probs must be >= 0, got " + std::to_string(p.n_probs));
    // max_tokens 0: the reply is over before it starts (Stopper says n_predict).
    if (stopper.done()) finish = FinishReason::length;
  }
};

Generation::Generation(const Tokenizer& tok, GenerationParams params, int32_t n_ctx)
    : s_(std::make_unique<State>(tok, std::move(params))) {
  s_->own.emplace(s_->p.sampling, n_ctx);
  s_->sampler = &*s_->own;
}

Generation::Generation(const Tokenizer& tok, GenerationParams params, Sampler& sampler)
    : s_(std::make_unique<State>(tok, std::move(params))) {
  s_->sampler = &sampler;
}

Generation::Generation(Generation&&) noexcept = default;
Generation& Generation::operator=(Generation&&) noexcept = default;
Generation::~Generation() = default;

void Generation::accept_prompt(std::span<const token_id> prompt) {
  for (const token_id t : prompt) s_->sampler->accept(t);
}

GeneratedToken Generation::next(std::span<const float> logits) {
  State& s = *s_;
  if (s.finish != FinishReason::none)
    throw Error(Errc::invalid_argument, "Generation::next called after the reply ended");
  GeneratedToken t;
  if (s.grammar) {
    t.id = sample_in_grammar(logits);
    s.grammar->accept(t.id);
  } else {
    t.id = s.sampler->sample(logits);
  }
  s.sampler->accept(t.id);
  s.last = t.id;
  if (s.p.post_sampling_probs && (s.p.logprobs || s.p.n_probs > 0))
    fill_post_sampling_probs(t, s.sampler->last_candidates(), s.p.n_probs);
  else if (s.p.logprobs || s.p.n_probs > 0)
    fill_logprobs(t, logits, s.p.n_probs);
  t.text = s.stopper.on_token(t.id);
  t.eog = s.stopper.reason() == StopReason::eog;
  if (s.stopper.done()) {
    s.finish = s.stopper.reason() == StopReason::n_predict ? FinishReason::length : FinishReason::stop;
    t.text += s.stopper.finish();
    t.finish = s.finish;
  } else if (s.grammar && s.p.ignore_eos && s.tok.is_eog(t.id)) {
    // With ignore_eos an end-of-generation token is drawn only when the
    // grammar allows nothing else; the grammar's end is the reply's end.
    s.finish = FinishReason::stop;
    t.text += s.stopper.finish();
    t.finish = s.finish;
  }
  return t;
}

// The sampled token when the grammar allows it and the chain is an argmax
// (the argmax of all candidates is then the argmax of the allowed ones: the
// check-first shortcut of llama.cpp PR #4306, exact only there); otherwise
// the chain over the grammar's mask. Throws Error(invalid_argument) when no
// token can continue the reply: ending it would return text outside the grammar.
token_id Generation::sample_in_grammar(std::span<const float> logits) {
  State& s = *s_;
  if (static_cast<int64_t>(logits.size()) != s.tok.n_vocab())
    throw Error(Errc::invalid_argument, "grammar: a row of " + std::to_string(logits.size()) + " logits for a vocabulary of " +
                                            std::to_string(s.tok.n_vocab()));
  if (s.sampler->greedy()) {
    const token_id first = s.sampler->sample(logits);
    if (s.grammar->allows(first) && !(s.p.ignore_eos && s.tok.is_eog(first))) return first;
  }
  s.grammar->fill_mask(s.mask);
  bool any = false;
  for (const uint64_t w : s.mask) any = any || w != 0;
  if (!any) throw Error(Errc::invalid_argument, "grammar: no token of the vocabulary can continue the reply");
  if (s.p.ignore_eos && !s.grammar->is_finished()) {
    // ignore_eos: no end of generation while the grammar can go on.
    if (s.eog_ids.empty()) s.eog_ids = s.tok.eog_ids();
    for (const token_id e : s.eog_ids) s.mask[static_cast<size_t>(e) >> 6] &= ~(uint64_t{1} << (e & 63));
  }
  return s.sampler->sample(logits, s.mask);
}

GeneratedToken Generation::finish(FinishReason why) {
  GeneratedToken t;
  if (s_->finish == FinishReason::none) {
    s_->finish = why;
    t.text = s_->stopper.finish();
  }
  t.finish = s_->finish;
  return t;
}

bool Generation::done() const { return s_->finish != FinishReason::none; }
FinishReason Generation::finish_reason() const { return s_->finish; }
StopReason Generation::stop_reason() const { return s_->stopper.reason(); }
const std::string& Generation::stopping_word() const { return s_->stopper.matched(); }
int32_t Generation::n_generated() const { return s_->stopper.n_generated(); }
token_id Generation::last_token() const { return s_->last; }
uint32_t Generation::seed() const { return s_->sampler->seed(); }
const GenerationParams& Generation::params() const { return s_->p; }

namespace runtime {

void record_step(GenerationResult& r, const GeneratedToken& t, const GenerationParams& p) {
  r.text += t.text;
  if (t.id < 0 || t.eog) return;
  r.tokens.push_back(t.id);
  if (p.logprobs || p.n_probs > 0) r.logprobs.push_back(t.logprob);
  if (p.n_probs > 0) r.top_logprobs.push_back(t.top_logprobs);
}

void record_end(GenerationResult& r, const Generation& gen) {
  r.finish_reason = gen.finish_reason();
  r.stop_reason = gen.stop_reason();
  r.stopping_word = gen.stopping_word();
  r.seed = gen.seed();
}

std::vector<token_id> closing_rows(const Generation& gen, const Tokenizer& tok, token_id pending, int64_t room) {
  if (!gen.params().close_turn) return {};
  std::vector<token_id> rows;
  if (pending >= 0) rows.push_back(pending);
  const bool ended_by_eog = gen.stop_reason() == StopReason::eog;
  if (!ended_by_eog && end_of_turn_token(tok) >= 0) rows.push_back(end_of_turn_token(tok));
  if (static_cast<int64_t>(rows.size()) > room) rows.clear();
  return rows;
}

}  // namespace runtime

GenerationResult generate(Context& ctx, Sequence& seq, std::span<const token_id> prompt,
                          const GenerationParams& params, const TokenCallback& on_token,
                          const std::atomic<bool>* cancel) {
  Generation gen(ctx.tokenizer(), params, static_cast<int32_t>(seq.n_ctx()));
  return generate(ctx, seq, prompt, gen, on_token, cancel);
}

GenerationResult generate(Context& ctx, Sequence& seq, std::span<const token_id> prompt, Generation& gen,
                          const TokenCallback& on_token, const std::atomic<bool>* cancel) {
  using runtime::Clock;
  const Tokenizer& tok = ctx.tokenizer();
  const GenerationParams& p = gen.params();
  if (prompt.empty()) throw Error(Errc::invalid_argument, "generate: the prompt has no tokens");
  const int64_t room = seq.n_ctx() - seq.n_past();
  if (static_cast<int64_t>(prompt.size()) > room)
    throw Error(Errc::invalid_argument, "generate: the prompt is " + std::to_string(prompt.size()) +
                                            " tokens; the sequence has " + std::to_string(room) + " of its n_ctx " +
                                            std::to_string(seq.n_ctx()) + " positions left");
  for (const token_id t : prompt)
    if (t < 0 || t >= tok.n_vocab())
      throw Error(Errc::out_of_range, "generate: prompt token id " + std::to_string(t) + " outside [0, " +
                                          std::to_string(tok.n_vocab()) + ")");

  GenerationResult r;
  r.n_cached = seq.n_past();
  r.n_prompt = r.n_cached + static_cast<int64_t>(prompt.size());
  r.timings.prompt_n = static_cast<int64_t>(prompt.size());
  gen.accept_prompt(prompt);
  const auto t_start = Clock::now();
  std::span<const float> logits;
  for (size_t i = 0; i < prompt.size(); i += static_cast<size_t>(p.n_ubatch))
    logits = ctx.decode(seq, prompt.subspan(i, std::min(static_cast<size_t>(p.n_ubatch), prompt.size() - i)));
  const auto t_first = Clock::now();
  r.timings.prompt_ms = runtime::ms_between(t_start, t_first);

  bool stepped = false;
  auto emit = [&](const GeneratedToken& t) {
    stepped = true;
    runtime::record_step(r, t, p);
    return on_token ? on_token(t) : true;
  };
  token_id pending = -1;  // sampled, not yet in the cache
  while (!gen.done()) {
    if (cancel != nullptr && cancel->load()) {
      emit(gen.finish(FinishReason::cancelled));
      break;
    }
    const GeneratedToken t = gen.next(logits);
    ++r.timings.predicted_n;
    pending = t.id;
    const bool go_on = emit(t);
    if (t.finish != FinishReason::none) break;
    if (!go_on) {
      emit(gen.finish(FinishReason::cancelled));
      break;
    }
    if (seq.n_past() >= seq.n_ctx()) {
      r.context_full = true;
      emit(gen.finish(FinishReason::length));
      break;
    }
    const token_id one[1] = {t.id};
    logits = ctx.decode(seq, one);
    pending = -1;
  }
  if (!stepped) emit(gen.finish(FinishReason::length));  // max_tokens 0: one closing step
  r.timings.predicted_ms = runtime::ms_between(t_first, Clock::now());
  const std::vector<token_id> rows = runtime::closing_rows(gen, tok, pending, seq.n_ctx() - seq.n_past());
  if (!rows.empty()) ctx.decode(seq, rows);
  runtime::record_end(r, gen);
  return r;
}

}  // namespace synapse

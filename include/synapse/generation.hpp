// The generation loop: a prompt's token ids in, sampled tokens and their text
// out through a callback, with sampling (synapse/sampling.hpp), stop strings
// and end-of-generation tokens (synapse/stop.hpp), a token limit, cancellation,
// per-token log-probabilities and timings.
//
// Two levels:
//   - Generation: the per-request state of one reply (sampler, stopper, limit,
//     logprobs). It never touches a model: it turns a row of logits into the
//     next token. The serving runtime (synapse/scheduler.hpp) keeps one per
//     request and feeds it rows from a shared batch.
//   - generate(): the whole loop for one Sequence on one Context (prefill in
//     chunks, then decode token by token), as `synapse run` / `synapse chat`
//     use it.
//
//   synapse::GenerationParams p;
//   p.sampling.seed = 42;
//   p.max_tokens = 64;
//   p.stop = {"\n\n"};
//   auto r = synapse::generate(ctx, seq, ids, p, [](const synapse::GeneratedToken& t) {
//     std::fputs(t.text.c_str(), stdout);
//     return true;  // false stops the reply (finish_reason cancelled)
//   });
//
// Field and value names follow OpenAI's API (finish_reason "stop" / "length",
// logprobs, top_logprobs) and llama-server's (n_probs, timings.prompt_n, ...).
//
// Thread-safety: a Generation is per-reply state, one thread at a time;
// generate() is as Context::decode (one call at a time per Context and per
// Sequence); the parameter and result structs are plain values;
// end_of_turn_token and finish_reason_name are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "synapse/sampling.hpp"
#include "synapse/stop.hpp"
#include "synapse/synapse.hpp"

namespace synapse {

// Why a reply ended (OpenAI's finish_reason, plus the two ends a server
// reports by other means).
enum class FinishReason {
  none,       // still generating
  stop,       // an end-of-generation token or a stop string
  length,     // max_tokens generated, or the sequence's context is full
  cancelled,  // the caller stopped it (callback returned false, cancel flag, Scheduler::cancel)
  error,      // the forward pass failed (GenerationResult::error says why); Scheduler only
};

// "none", "stop", "length", "cancelled", "error" (the first three are OpenAI's spellings).
const char* finish_reason_name(FinishReason r) noexcept;

// One alternative of a position: a token id and its log-probability.
struct TokenLogprob {
  token_id id;
  float logprob;
};

// Everything that decides one reply besides the prompt. Copyable; the
// defaults are llama.cpp's.
struct GenerationParams {
  SamplerParams sampling;          // the sampler chain and its seed (synapse/sampling.hpp)
  int32_t max_tokens = -1;         // -n / n_predict / max_tokens: tokens to generate, EOG excluded; < 0 no limit
  std::vector<std::string> stop;   // stop strings: the reply ends before the first occurrence (not returned)
  bool ignore_eos = false;         // --ignore-eos: end-of-generation tokens are ordinary tokens
  // Control tokens that are part of the reply's text (llama-server's
  // preserved_tokens): a chat format's markers its model writes as special
  // tokens (gpt-oss's <|channel|>, Mistral's [TOOL_CALLS]), so that the reply
  // parser sees them. Their pieces are rendered with special = true in the
  // text, in stop-string matching and in a grammar's vocabulary (a grammar
  // can then write them). End-of-generation tokens among them still end the reply.
  std::vector<token_id> preserved_tokens = {};
  // logprobs: report each generated token's log-probability (GeneratedToken::logprob).
  bool logprobs = false;
  // n_probs / top_logprobs: also report this many most likely alternatives per
  // position (0 none). Values > 0 imply logprobs.
  int32_t n_probs = 0;
  // llama-server's post_sampling_probs: logprob and top_logprobs are those of
  // the distribution the token was drawn from (the candidates the sampler
  // chain left, after temperature, with the draw's probabilities), not of the
  // raw row. See GeneratedToken::logprob.
  bool post_sampling_probs = false;
  // Close the turn in the KV cache whatever ended the reply (llama.cpp's
  // need_insert_eot, PR #8296): when the reply ends by max_tokens, a stop
  // string, a full context or a cancel instead of an end-of-generation token,
  // generate() and the Scheduler still write the reply's last sampled token
  // and then end_of_turn_token() into the sequence, so the cache holds
  // `prompt + reply + end-of-turn` exactly as after a reply that ended by
  // itself (whose EOG token is written too). For multi-turn chat over one
  // sequence; nothing is written when the context has no room left.
  bool close_turn = false;
  // generate() only: the most prompt rows per Context::decode call (the
  // smaller of llama.cpp's -b and -ub); any split gives the same bits
  // (DESIGN.md contract 2). The Scheduler uses its own n_ubatch. Must be >= 1.
  int32_t n_ubatch = 512;
};

// llama-server's "timings" of one reply.
struct GenerationTimings {
  int64_t prompt_n = 0;      // prompt tokens computed (cached ones excluded)
  double prompt_ms = 0;      // wall time from the start of the prefill to the first sampled token
  int64_t predicted_n = 0;   // tokens sampled (EOG included)
  double predicted_ms = 0;   // wall time from the first sampled token to the end
  // The decode steps of the generation: the first token comes from the
  // prompt's last logits, so it costs none (llama-server's n_gen_steps).
  int64_t predicted_steps() const { return predicted_n > 0 ? predicted_n - 1 : 0; }
  // Rates and milliseconds per token, 0 for none (llama-server's n_prompt_tps,
  // n_gen_tps, t_prompt_per_token_ms and t_gen_per_token_ms; generation per
  // decode step, as predicted_ms starts at the first token).
  double prompt_per_second() const { return prompt_ms > 0 ? prompt_n * 1e3 / prompt_ms : 0; }
  double predicted_per_second() const { return predicted_ms > 0 ? predicted_steps() * 1e3 / predicted_ms : 0; }
  double prompt_per_token_ms() const { return prompt_n > 0 ? prompt_ms / static_cast<double>(prompt_n) : 0; }
  double predicted_per_token_ms() const {
    return predicted_steps() > 0 ? predicted_ms / static_cast<double>(predicted_steps()) : 0;
  }
};

// What one step of a reply produced.
struct GeneratedToken {
  // The sampled token; -1 on a closing step that only releases held-back
  // text (Generation::finish).
  token_id id = -1;
  // id is an end-of-generation token: it ends the reply and is not part of
  // its text or of GenerationResult::tokens.
  bool eog = false;
  // The text this step releases: the token's piece, minus what is held back
  // while it may be the start of a stop string or an incomplete UTF-8
  // character, plus what earlier steps held back. On the reply's last step
  // it includes everything still held (and nothing at or after a stop string).
  std::string text;
  // log p(id) = logit[id] - log(sum_j exp(logit[j])) over the raw logits of
  // the row id was sampled from (before logit bias, penalties and
  // temperature: what the model says, as OpenAI reports logprobs). Computed
  // when params.logprobs or n_probs > 0, else 0; 0 on a closing step.
  // With params.post_sampling_probs: log p(id) of the draw instead, p as the
  // sampler's last stage computed it (softmax of the surviving candidates'
  // logits after temperature, in float; 1 for the one candidate of a greedy
  // chain): llama-server's populate_token_probs with post_sampling.
  float logprob = 0;
  // The n_probs highest-logit tokens of that row with their log-probabilities,
  // most likely first, ties to the lower id (may or may not contain id). With
  // params.post_sampling_probs: the n_probs most probable candidates of the
  // draw with log p, highest p first, ties to the lower id, those of p = 0
  // left out (fewer than n_probs when the chain kept fewer).
  std::vector<TokenLogprob> top_logprobs;
  // Not none on the reply's last step: why it ended.
  FinishReason finish = FinishReason::none;
  // The reply's timings as of this step, filled by the Scheduler (zero from
  // Generation and generate()): prompt_n and prompt_ms as the final ones,
  // predicted_n counting this step, predicted_ms from the first token to
  // this step's report; and the prompt tokens found in the cache
  // (GenerationResult::n_cached). llama-server's timings_per_token.
  GenerationTimings timings;
  int64_t n_cached = 0;
};

// A finished reply.
struct GenerationResult {
  std::string text;                // the concatenated GeneratedToken::text of every step
  std::vector<token_id> tokens;    // generated token ids in order, end-of-generation tokens excluded
  // One per entry of `tokens` when params.logprobs or n_probs > 0, else empty.
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // one per entry of `tokens` when n_probs > 0
  FinishReason finish_reason = FinishReason::none;
  StopReason stop_reason = StopReason::none;  // finer: eog / stop_string / n_predict; none for context full or cancel
  std::string stopping_word;       // the stop string that matched, "" if none
  bool context_full = false;       // ended (finish_reason length) because the sequence reached its n_ctx
  int64_t n_prompt = 0;            // tokens of the prompt (cached ones included)
  int64_t n_cached = 0;            // of those, how many were already in the sequence's KV cache and not recomputed
  uint32_t seed = 0;               // the sampler's seed (the drawn one when sampling.seed was kDefaultSeed)
  int32_t slot = -1;               // Scheduler: the slot that served it (llama-server's id_slot); generate(): -1
  std::string error;               // FinishReason::error: what failed
  // FinishReason::error: the category of the synapse::Error that ended it
  // (invalid_argument: the request itself was at fault, e.g. a grammar too
  // ambiguous for GrammarLimits::max_matcher_work); nullopt when the failure
  // was not a synapse::Error (an internal one).
  std::optional<Errc> error_code;
  GenerationTimings timings;
  // Scheduler: its request's deadline (Request::deadline, or Scheduler::drain's)
  // ended it: with finish_reason length while it held a slot; with cancelled
  // before it had one (slot -1, nothing computed).
  bool deadline_passed = false;
  // Scheduler: its step count (SchedulerMetrics::n_decode_total) when the
  // request ended; generate(): 0.
  uint64_t step = 0;
};

// Called once per step, in order, the last time with finish != none; return
// false to stop the reply (it then ends with FinishReason::cancelled after
// this step, unless this step already ended it).
using TokenCallback = std::function<bool(const GeneratedToken&)>;

// The vocabulary's end-of-turn token: eot (<|eot_id|>, <|im_end|>, <|end|>,
// <end_of_turn>, ...), else eos, else -1 (llama-cli: llama_vocab_eot, falling
// back to llama_vocab_eos).
token_id end_of_turn_token(const Tokenizer& tok);

// The state of one reply: sampler, stopping rule, token limit, logprobs.
// Not thread-safe: one thread at a time (the Scheduler keeps each on its
// worker thread). The Tokenizer (and a borrowed Sampler) must outlive it.
class Generation {
 public:
  // A fresh sampler from params.sampling; n_ctx resolves
  // sampling.penalty_last_n = -1 (Sampler's constructor). A non-empty
  // sampling.grammar (GBNF) constrains every token (synapse/grammar.hpp; the
  // compiled grammar and the vocabulary trie are cached across replies). Throws
  // Error(invalid_argument) naming the field for a bad sampling parameter,
  // n_ubatch < 1, or a grammar that does not compile (its line and column).
  // next() throws Error(invalid_argument) when the grammar leaves no token.
  Generation(const Tokenizer& tok, GenerationParams params, int32_t n_ctx = 0);
  // Continues `sampler` instead (its RNG state and penalty window carry over:
  // one sampler for a whole chat session, as llama-cli keeps one
  // common_sampler); params.sampling is then ignored but for its grammar.
  Generation(const Tokenizer& tok, GenerationParams params, Sampler& sampler);
  Generation(Generation&&) noexcept;
  Generation& operator=(Generation&&) noexcept;
  ~Generation();

  // Records the prompt's tokens in the sampler's penalty window
  // (common_sampler_accept on every prompt token, as llama-cli does). Call
  // before the first next().
  void accept_prompt(std::span<const token_id> prompt);

  // Samples the next token from `logits` ([n_vocab] floats: the last row of
  // the sequence so far), accepts it into the sampler and the stopping rule,
  // and returns it with the text it releases. When the returned step's
  // finish is not none the reply is over; otherwise the caller feeds `id` to
  // the model and calls next() with the new row. Throws Error(invalid_argument)
  // after done() or on an empty row, Error(out_of_range) for a logit-bias
  // token outside the row.
  GeneratedToken next(std::span<const float> logits);

  // Ends the reply for a reason found outside the token stream (length for a
  // full context, cancelled): returns the closing step (id -1) carrying the
  // held-back text. No-op returning an empty step with the existing reason
  // when the reply is already over.
  GeneratedToken finish(FinishReason why);

  bool done() const;
  FinishReason finish_reason() const;
  StopReason stop_reason() const;
  const std::string& stopping_word() const;
  int32_t n_generated() const;  // tokens generated, EOG excluded
  token_id last_token() const;  // the last token next() returned (-1 before the first)
  uint32_t seed() const;        // the sampler's seed
  const GenerationParams& params() const;

 private:
  token_id sample_in_grammar(std::span<const float> logits);
  struct State;
  std::unique_ptr<State> s_;
};

// Runs one reply on one sequence: appends `prompt` to `seq` (at seq.n_past():
// a sequence that already holds a conversation continues it) in chunks of
// params.n_ubatch rows, then samples and feeds tokens until the reply ends,
// calling on_token (if set) after each step. The reply ends by EOG, a stop
// string, max_tokens, a full context (seq.n_past() == seq.n_ctx()), on_token
// returning false, or *cancel becoming true (checked before each sample).
// With params.close_turn the sequence then ends with an end-of-turn token
// (see GenerationParams::close_turn). n_cached in the result is seq.n_past()
// at entry.
//
// Throws Error(invalid_argument) for an empty prompt with an empty sequence,
// a prompt that does not fit in seq.n_ctx() - seq.n_past() (naming both
// counts), or a bad parameter; Error(out_of_range) for a token id outside the
// vocabulary; whatever Context::decode throws. Nothing is written to `seq`
// when the prompt is refused. Thread-safety: as Context::decode (one call at
// a time per Context); on_token runs on the calling thread.
GenerationResult generate(Context& ctx, Sequence& seq, std::span<const token_id> prompt,
                          const GenerationParams& params, const TokenCallback& on_token = {},
                          const std::atomic<bool>* cancel = nullptr);

// The same loop with a Generation the caller made (e.g. one that continues a
// session's Sampler). `gen` must not be done().
GenerationResult generate(Context& ctx, Sequence& seq, std::span<const token_id> prompt, Generation& gen,
                          const TokenCallback& on_token = {}, const std::atomic<bool>* cancel = nullptr);

}  // namespace synapse

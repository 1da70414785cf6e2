// The serving runtime: many requests, one model, one forward pass per step.
//
// A Scheduler owns one Context and n_parallel slots (llama-server's -np):
// sequences decoding at once, whose KV pages come from ONE pool of n_ctx
// positions (-c, the total, as llama-server's unified KV cache;
// Context::share_kv). Any one request may use the whole pool, so a long
// request and many short ones coexist. Requests wait in a FIFO queue and
// take a free slot in arrival order, once the pages for the rows they
// prefill are free (with a page to spare per running request). A worker thread then runs steps; each
// step builds ONE Batch from every active slot (continuous batching, as
// llama-server's update_slots):
//   - one decode row for every slot that is generating (its last sampled
//     token, logits wanted);
//   - then prompt chunks of the slots still prefilling, oldest request first,
//     at most n_ubatch rows per slot and at most n_batch rows in the whole
//     step (decode rows count against n_batch but are never left out);
// runs Context::decode once, and hands each logits row to its request's
// Generation (synapse/generation.hpp), which samples, applies stop strings /
// EOG / max_tokens and reports through the request's callbacks. A long prompt
// thus delays the generating slots by at most one chunk per step.
//
// Because every row's result is bit-identical to its sequence run alone
// (DESIGN.md contract 2), a request's tokens, text and logprobs depend on the
// request alone: not on what runs beside it, the slot, the thread count, the
// chunking, or whether its prompt came from the cache.
//
// Prompt cache (llama-server's cache_prompt): a slot that finished keeps its
// KV rows and the tokens they hold. A new request goes to the free slot whose
// tokens share the longest prefix with its prompt, if that prefix is more
// than slot_prompt_similarity of the prompt (llama-server's rule), else to
// the least recently used free slot. The prefix it shares with the chosen
// slot is kept (at most prompt length - 1: the last prompt token is always
// recomputed for its logits) and only the rest is prefilled. Shared
// prefixes: every request's whole pages (prompt chunks as they are computed,
// the whole sequence when the reply is over) go into a radix tree over token
// ids that holds them independent of the slots (SGLang's RadixAttention, in
// pages: src/runtime/prefix_tree.hpp). When the tree holds a longer prefix
// of the prompt (by a page or more) than the chosen slot, the slot's
// sequence becomes a fork of it: whole pages referenced, not copied
// (Sequence::fork); a request whose prefix another is still prefilling
// waits for those pages instead of computing them again. So concurrent
// requests with one system prompt or document store it once. A model whose
// cache cannot be cut at any page (recurrent layers; a sliding window
// smaller than n_ctx) has no tree: it forks a prefix another slot holds,
// under Sequence::fork's rules. GenerationResult::n_cached reports how many
// positions were kept.
//
// Out of pages: the pool is shared, so a step's rows may need more pages than
// are free. Free slots' prompt caches are given back first (least recently
// used first), then the tree's least recently used leaves that no running
// request reads; then the newest running request is preempted: its pages go
// back, it waits at the head of the queue, and once admitted again it
// prefills what it had (prompt, tokens fed so far, the token drawn but not
// yet fed) and goes on. Rows are bit-identical however they are batched, so
// the reply is byte-identical to an uninterrupted one, and nothing already
// reported (on_token) is reported again. Nothing is truncated and no
// request fails for lack of pages; a prompt longer than n_ctx is refused at
// submission (it could never fit).
//
// Deadlines: a request may carry a wall-clock end (Request::deadline), which
// is checked when it is submitted, while it waits, when it would take a slot
// and at every step: one whose deadline passed before it had a slot never
// takes one (on_done: cancelled, GenerationResult::deadline_passed, slot -1);
// one that holds a slot ends after the step in progress (finish_reason
// length, deadline_passed). drain() gives every request the same end at once.
//
// Thread-safety: try_submit, cancel, drain, metrics, wait_idle, model, params
// and n_ctx may be called from any threads at once (all but wait_idle from the
// callbacks too); the destructor must not run on the worker thread (from a
// callback) nor concurrently with another member call. Callbacks run on the
// worker thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "synapse/generation.hpp"
#include "synapse/synapse.hpp"

namespace synapse {

struct SchedulerParams {
  int32_t n_parallel = 1;    // -np: slots, i.e. sequences served at once (>= 1)
  int64_t n_ctx = 0;         // -c: positions of the KV pool all slots share (<= 0: the model's training context, at most 4096)
  int32_t n_batch = 2048;    // -b: rows per step, all slots together (>= 1)
  int32_t n_ubatch = 512;    // -ub: prompt rows per slot per step (>= 1)
  size_t max_queue = 256;    // requests waiting for a slot before try_submit refuses (0: refuse when no slot is free)
  int n_threads = 0;         // -t: the Context's threads (<= 0: physical cores)
  // -ctk, -ctv: the KV pool's row types (Context::set_kv_types; the
  // constructor throws its error for a type the model cannot cache).
  GgmlType type_k = GgmlType::F16;
  GgmlType type_v = GgmlType::F16;
  // --slot-prompt-similarity: the fraction of a prompt a free slot's cached
  // prefix must exceed for the request to go to that slot rather than the
  // least recently used one (llama-server's default 0.5).
  float slot_prompt_similarity = 0.5f;
};

// llama-server's prompt_progress (a request's return_progress): how far its
// prompt is in the cache.
struct PromptProgress {
  int64_t total = 0;      // the prompt's tokens
  int64_t cache = 0;      // of them found in the cache (GenerationResult::n_cached)
  int64_t processed = 0;  // in the cache now, `cache` included (total at the last report)
  int64_t time_ms = 0;    // whole milliseconds since the request took its slot
  // The reply's timings as of now: prompt_n = processed - cache, prompt_ms
  // since the slot was taken, both 0 at the first report; predicted_* 0.
  GenerationTimings timings;
};

// One request. The callbacks run on the scheduler's worker thread, one
// request's calls in order; they must be quick (the whole batch waits) and
// may call Scheduler::cancel / try_submit / metrics. An exception thrown by
// a callback cancels that request (it is not propagated).
struct Request {
  std::vector<token_id> prompt;  // token ids (BOS and chat template already applied)
  GenerationParams params;       // sampling, stop, max_tokens, logprobs, close_turn (n_ubatch is ignored)
  bool cache_prompt = true;      // llama-server's cache_prompt: false starts from an empty slot
  // The wall-clock end of the whole request, its wait in the queue included
  // (the server's --timeout from the request's arrival); max(): none. See
  // the top of this file for what happens when it passes.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // llama-server's t_max_predict_ms (> 0): once the reply has generated for
  // longer than this (measured from its first token), it ends at the next
  // step whose text holds a newline, with that step (finish_reason length:
  // llama-server's STOP_TYPE_LIMIT). A cut at a line's end, for
  // fill-in-the-middle clients; <= 0: none. A hard limit is `deadline`.
  int64_t t_max_predict_ms = -1;
  // Each step of the reply (synapse/generation.hpp), with its timings and
  // n_cached filled; returning false cancels the request. May be empty.
  TokenCallback on_token;
  // Prompt progress (llama-server's return_progress, send_partial_response
  // with is_progress): once when the request takes its slot (processed ==
  // cache), then after each step that computed rows of its prompt, the last
  // (processed == total) before the step's on_token. How many reports a
  // prompt gets and their counts depend on the rows each step had for it
  // (n_ubatch, the other requests' rows): like timings, not a function of
  // the request alone. A request preempted while prefilling reports again
  // from what its cache then holds. May be empty.
  std::function<void(const PromptProgress&)> on_progress;
  // Called exactly once per accepted request, after its last on_token, also
  // when it is cancelled (while queued too) or the scheduler shuts down
  // (finish_reason cancelled), or its deadline passed (see the top). The
  // result carries all the caller may want to know about the request's end
  // (GenerationResult::step, ::deadline_passed), so that the callback need
  // not call the Scheduler. May be empty.
  std::function<void(const GenerationResult&)> on_done;
};

using RequestId = uint64_t;

// An embedding request (llama-server's /v1/embeddings, /embedding, /rerank):
// its inputs run on the worker thread between two steps: the oldest requests
// waiting, up to n_batch tokens (at least one request), in Context::embed
// calls of up to n_batch tokens each (an input longer than that alone); they
// take no slot and keep nothing. Each input's vectors are bit-identical to
// running it alone (Context::embed).
struct EmbeddingRequest {
  std::vector<std::vector<token_id>> inputs;  // token ids (BOS/EOS already added)
  EmbeddingParams params;
  // Called exactly once per accepted request, on the worker thread: the
  // embeddings (one per input, in order), or an empty vector and why none
  // were made (the forward pass failed, or the scheduler shut down).
  std::function<void(std::vector<Embedding> result, const std::string& error)> on_done;
};

// llama-server's /metrics counters (names in comments), for the process so far.
struct SchedulerMetrics {
  uint64_t prompt_tokens_total = 0;       // llamacpp:prompt_tokens_total: prompt tokens computed (cache hits excluded)
  double prompt_seconds_total = 0;        // llamacpp:prompt_seconds_total: sum of the replies' prompt_ms / 1000
  uint64_t tokens_predicted_total = 0;    // llamacpp:tokens_predicted_total: tokens sampled
  double tokens_predicted_seconds_total = 0;  // llamacpp:tokens_predicted_seconds_total
  uint64_t cached_tokens_total = 0;       // prompt tokens served from the prompt cache
  uint64_t n_decode_total = 0;            // llamacpp:n_decode_total: Context::decode calls (steps)
  uint64_t n_busy_slots_total = 0;        // sum over steps of the slots in the step (llamacpp:n_busy_slots_per_decode = this / n_decode_total)
  uint64_t requests_total = 0;            // requests accepted
  uint64_t n_tokens_max = 0;              // llamacpp:n_tokens_max: the longest request, prompt + generated tokens
  int32_t requests_processing = 0;        // llamacpp:requests_processing: requests holding a slot
  int32_t requests_deferred = 0;          // llamacpp:requests_deferred: requests waiting in the queue
  int64_t kv_cells_used = 0;              // positions held by requests being processed
  int64_t kv_cells_cached = 0;            // positions kept by free slots for the prompt cache
  int64_t kv_cells_total = 0;             // n_ctx: the pool's positions
  int64_t kv_page_size = 0;               // positions a KV page
  int64_t kv_pages_total = 0;             // pages of the pool
  int64_t kv_pages_used = 0;              // pages held (running requests and prompt caches)
  int64_t prefix_cache_pages = 0;         // pages the prefix tree owns, each once (also held by the requests and slots reading them)
  uint64_t preemptions_total = 0;         // requests preempted for lack of pages (requeued, resumed later)
  uint64_t snapshot_bytes = 0;            // recurrent state the slots' snapshots hold (Sequence::snapshot_bytes; hybrid models)
};

// One slot as llama-server's GET /slots shows it (server_slot::to_json's
// fields that do not quote the request's text), as of the worker's last step.
// The request fields describe the request the slot is processing; once its
// reply is over they read as llama-server's do for an idle slot (id_task
// stays, n_prompt_tokens is the positions its cache holds, the other counts
// 0, max_tokens -1). has_task is false before the slot's first request.
struct SlotState {
  int32_t id = 0;
  bool is_processing = false;           // holds a request whose reply is not over
  bool has_task = false;                // the fields below describe a request
  RequestId id_task = 0;                // try_submit's id
  int64_t n_prompt_tokens = 0;          // the prompt's tokens (cached ones included); idle: positions cached
  int64_t n_prompt_tokens_cache = 0;    // of them, taken from the slot's prompt cache
  int64_t n_prompt_tokens_processed = 0;  // of them, computed so far
  int64_t n_decoded = 0;                // tokens generated so far (end-of-generation excluded)
  bool has_new_line = false;            // the reply's text so far has a newline
  int32_t max_tokens = -1;              // the request's GenerationParams::max_tokens (< 0: none)
};

class Scheduler {
 public:
  // Makes the Context and the slots and starts the worker thread. `model`
  // is shared (the Scheduler keeps it alive). Throws Error(invalid_argument)
  // naming the field for n_parallel, n_batch or n_ubatch < 1 or
  // slot_prompt_similarity outside [0, 1]; whatever the
  // slots' allocation throws.
  Scheduler(const Model& model, const SchedulerParams& params);
  // Cancels every queued and running request (on_done with cancelled, on
  // the worker thread) and joins the worker. Must not run on the worker (from
  // a callback).
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Returns its id, or std::nullopt when max_queue
  // requests are already waiting or drain() was called (a refusal: nothing
  // is queued and no callback is called; HTTP 503). Throws Error(invalid_argument) for an
  // empty prompt, a prompt longer than n_ctx (naming n_ctx and the prompt's
  // token count) or a bad parameter (named), Error(out_of_range) for a
  // prompt or logit_bias token id outside the vocabulary; nothing is queued
  // then. Thread-safe.
  std::optional<RequestId> try_submit(Request request);

  // Queues an embedding request (see EmbeddingRequest). Returns its id, or
  // std::nullopt when max_queue requests already wait or drain() was called
  // (HTTP 503). Throws
  // Error(invalid_argument) for no inputs, an empty input or one longer than
  // n_ctx (naming its index and length), Error(out_of_range) for a token id
  // outside the vocabulary, Error(unsupported) for rank pooling on a model
  // without a head (Model::check_rank_head); nothing is queued then.
  // Thread-safe.
  std::optional<RequestId> try_submit_embedding(EmbeddingRequest request);

  // Cancels a queued or running request: within one step its on_done has
  // run (finish_reason cancelled), its slot is free and its KV rows no longer
  // count as used (they stay as prompt cache). With params.close_turn the
  // slot is held one step more, to write the reply's last token and the
  // end-of-turn token. Returns false when the id is unknown or already
  // finished. Thread-safe; may be called from a callback.
  bool cancel(RequestId id);

  // Begins a graceful stop (SIGTERM): from now on try_submit and
  // try_submit_embedding refuse (std::nullopt); requests still waiting for a
  // slot end at once (on_done: cancelled, deadline_passed, slot -1), waiting
  // embedding requests end with the error "the server is shutting down", and
  // every request holding a slot ends by `deadline` at the latest (finish
  // length, deadline_passed; its own earlier deadline still holds). The
  // worker keeps running, so wait_idle() returns once they have all ended.
  // A later call can only move the deadline earlier. Thread-safe.
  void drain(std::chrono::steady_clock::time_point deadline);

  // A snapshot of the counters. Thread-safe.
  SchedulerMetrics metrics() const;

  // A snapshot of the n_parallel slots, in id order (GET /slots). Thread-safe.
  std::vector<SlotState> slots() const;

  // Blocks until no request is queued or running. Thread-safe; must not be
  // called from a callback.
  void wait_idle() const;

  const Model& model() const;
  const SchedulerParams& params() const;  // with n_ctx and n_threads resolved
  int64_t n_ctx() const;                  // positions of the shared pool: the most one request may use

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace synapse

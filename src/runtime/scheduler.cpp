// The serving runtime (include/synapse/scheduler.hpp): a FIFO queue, slots
// with a prompt cache, and a worker thread that runs one batch per step.
//
// Ownership: the queue, the set of live ids, the cancel requests and the
// metrics are guarded by `mu`; the slots and the running requests belong to
// the worker thread alone. Callbacks run on the worker without `mu` held, so
// they may call back into the Scheduler.
#include "synapse/scheduler.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>

#include "runtime/prefix_tree.hpp"
#include "runtime/reply.hpp"
#include "synapse/error.hpp"

namespace synapse {

using runtime::Clock;

namespace {

enum class Phase {
  prefill,   // prompt rows still to run
  generate,  // `pending` is the token to feed next
  closing,   // the reply is over; `closing` rows (close_turn) go in next step
};

struct Job {
  RequestId id = 0;
  Request req;
  Generation gen;
  GenerationResult result;
  Phase phase = Phase::prefill;
  size_t n_done = 0;     // prompt tokens in the slot's cache
  token_id pending = -1;
  std::vector<token_id> closing;
  bool reply_over = false;  // on_done has run
  bool admitted = false;    // has held a slot (its prompt accepted, t_admit set)
  // A request preempted while generating (its pages taken back): the rows
  // to prefill again on resumption, its prompt, the tokens already fed and
  // `pending`; its last row's logits draw the next token (phase generate).
  std::vector<token_id> resume;
  Clock::time_point t_admit, t_first;

  // What prefill feeds: the prompt, or the rows of a resumption.
  const std::vector<token_id>& feed() const { return resume.empty() ? req.prompt : resume; }

  Job(RequestId i, Request r, Generation g) : id(i), req(std::move(r)), gen(std::move(g)) {}
};

struct Slot {
  int32_t id = 0;
  Sequence seq;
  std::vector<token_id> tokens;  // what seq's cache holds, position by position
  uint64_t last_used = 0;
  std::unique_ptr<Job> job;
  runtime::PrefixTree::Node* held = nullptr;  // the tree node its running request locks
};

void call_on_done(Job& j) {
  if (!j.req.on_done) return;
  try {
    j.req.on_done(j.result);
  } catch (...) {
    // Nothing to report it to: the request is over either way.
  }
}

// A request cancelled, shut down or past its deadline while it waited for a
// slot; `step`: the scheduler's step count now. One preempted after it had
// started ends past its deadline as a running one does (length).
void drop_queued(Job& j, bool deadline_passed, uint64_t step) {
  j.gen.finish(deadline_passed && j.admitted ? FinishReason::length : FinishReason::cancelled);
  runtime::record_end(j.result, j.gen);
  j.result.n_prompt = static_cast<int64_t>(j.req.prompt.size());
  j.result.deadline_passed = deadline_passed;
  j.result.step = step;
  call_on_done(j);
}

void call_on_done(EmbeddingRequest& e, std::vector<Embedding> result, const std::string& error) {
  if (!e.on_done) return;
  try {
    e.on_done(std::move(result), error);
  } catch (...) {
    // Nothing to report it to.
  }
}

constexpr char kShuttingDown[] = "the server is shutting down";

size_t common_prefix(const std::vector<token_id>& a, const std::vector<token_id>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

struct Scheduler::Impl {
  Model model;
  SchedulerParams p;
  Context ctx;
  std::vector<Slot> slots;
  int64_t n_vocab;

  mutable std::mutex mu;
  std::condition_variable wake;          // work arrived, a cancel, or shutdown
  mutable std::condition_variable idle;  // the queue and the slots became empty
  std::deque<std::unique_ptr<Job>> queue;
  std::deque<EmbeddingRequest> embed_queue;  // embedding requests waiting for the worker
  std::unordered_set<RequestId> live;     // queued or running, reply not yet over
  std::unordered_set<RequestId> cancels;  // asked to stop
  RequestId next_id = 1;
  int32_t n_free = 0;  // slots without a job, as of the worker's last update
  bool busy = false;   // the worker holds jobs
  bool stopping = false;
  bool draining = false;                                   // drain() was called
  Clock::time_point drain_deadline = Clock::time_point::max();  // the latest end of every request then
  SchedulerMetrics m;
  std::vector<SlotState> slot_states;  // under mu, refreshed with m
  uint64_t clock = 0;  // LRU counter for slot choice and the tree (worker only)
  // The prefix cache over every request's whole pages (worker only); none
  // for a model whose cache cannot be forked at any page boundary (recurrent
  // layers, or a sliding window that gives pages back): those reuse a free
  // slot's own cache, and a prefix another slot holds, as before.
  std::optional<runtime::PrefixTree> tree;
  std::thread worker;

  Impl(const Model& mod, const SchedulerParams& params) : model(mod), p(params), ctx(mod, params.n_threads) {
    if (p.n_parallel < 1) throw Error(Errc::invalid_argument, "n_parallel must be at least 1, got " + std::to_string(p.n_parallel));
    if (p.n_batch < 1) throw Error(Errc::invalid_argument, "n_batch must be at least 1, got " + std::to_string(p.n_batch));
    if (p.n_ubatch < 1) throw Error(Errc::invalid_argument, "n_ubatch must be at least 1, got " + std::to_string(p.n_ubatch));
    if (!(p.slot_prompt_similarity >= 0 && p.slot_prompt_similarity <= 1))
      throw Error(Errc::invalid_argument,
                  "slot_prompt_similarity must be in [0, 1], got " + std::to_string(p.slot_prompt_similarity));
    p.n_threads = ctx.n_threads();
    n_vocab = model.n_vocab();
    // n_ctx <= 0: new_sequence's default (a sequence of its own pool holds
    // no page until written, so asking costs nothing).
    p.n_ctx = ctx.new_sequence(p.n_ctx).n_ctx();
    ctx.set_kv_types(p.type_k, p.type_v);
    // One pool of n_ctx positions for all slots (llama-server's unified KV
    // cache); each slot may use all of it.
    ctx.share_kv(p.n_ctx);
    for (int32_t i = 0; i < p.n_parallel; ++i) slots.push_back(Slot{i, ctx.new_sequence(p.n_ctx), {}, 0, nullptr});
    if (!model.has_recurrent_layers() && slots[0].seq.capacity() == p.n_ctx) tree.emplace(ctx.kv_pool().page_size);
    n_free = p.n_parallel;
    m.kv_cells_total = p.n_ctx;
    m.kv_page_size = ctx.kv_pool().page_size;
    m.kv_pages_total = ctx.kv_pool().n_pages;
    worker = std::thread([this] { run(); });
  }

  void run();
  void run_embeddings(std::deque<EmbeddingRequest> jobs);
  std::unique_ptr<Job> admit(std::unique_ptr<Job> job);
  void report_progress(Job& j, bool first);
  int64_t pages_free() const;
  bool evict_cache(const Slot* keep);
  bool evict(const Slot* keep);
  void hold(Slot& s, runtime::PrefixTree::Node* node);
  void cache_prefix(Slot& s, bool held);
  bool computing_prefix(const std::vector<token_id>& prompt, size_t have) const;
  void preempt(Slot& s);
  void finish(Slot& s, GeneratedToken closing_step);
  bool call_on_token(Job& j, GeneratedToken& t);
  void on_first_row(Job& j);
  void on_step(Slot& s, GeneratedToken& t);
  void end_reply(Slot& s, FinishReason why);
  void release(Slot& s);
  void fail_all(const std::string& what);
  void shutdown();
  void update_metrics();
  void record_slot(const Slot& s);
};

int64_t Scheduler::Impl::pages_free() const {
  const KvPoolStats st = ctx.kv_pool();
  return st.n_pages - st.n_used;
}

// Gives back the pages of the least recently used free slot's prompt cache
// (not `keep`'s); false when no free slot but `keep` holds any.
bool Scheduler::Impl::evict_cache(const Slot* keep) {
  Slot* lru = nullptr;
  for (Slot& s : slots)
    if (!s.job && &s != keep && s.seq.kv_pages() > 0 && (!lru || s.last_used < lru->last_used)) lru = &s;
  if (!lru) return false;
  lru->seq.clear();
  lru->tokens.clear();
  return true;
}

// Frees pages for rows to come: a free slot's prompt cache (not `keep`'s),
// else the prefix tree's least recently used leaf that no running request
// holds; false when none is left.
// Last, the snapshots of running requests on a sliding-window model (the
// window's pages they keep).
bool Scheduler::Impl::evict(const Slot* keep) {
  if (evict_cache(keep) || (tree && tree->evict_one())) return true;
  const int64_t before = pages_free();
  for (Slot& s : slots)
    if (&s != keep && s.seq.capacity() < s.seq.n_ctx()) s.seq.drop_snapshots();
  return pages_free() > before;
}

// Slot s's running request holds `node` (null: nothing) in the tree.
void Scheduler::Impl::hold(Slot& s, runtime::PrefixTree::Node* node) {
  if (s.held) runtime::PrefixTree::unlock(s.held);
  s.held = node;
  if (node) runtime::PrefixTree::lock(node);
}

// Records the whole pages of slot s's cache in the prefix tree (after each
// prompt chunk, so that a request arriving meanwhile finds what is already
// computed, and when the reply is over or preempted); `held`: the slot's
// running request holds the node where they end (else it holds none).
void Scheduler::Impl::cache_prefix(Slot& s, bool held) {
  if (!tree) return;
  runtime::PrefixTree::Node* node = nullptr;
  try {
    node = tree->insert(s.tokens, s.seq, ++clock);
  } catch (const Error&) {
    // Not for a model with a tree (its forks at page boundaries cannot
    // fail); the pages are then just not shared.
  }
  hold(s, held ? node : nullptr);
}

// Whether a running request is still prefilling at least one more page of
// `prompt` than the `have` positions a new request could reuse now: it then
// waits for those pages rather than compute them a second time (SGLang's
// in-batch prefix caching), so that many clients arriving at once with one
// system prompt store it once.
bool Scheduler::Impl::computing_prefix(const std::vector<token_id>& prompt, size_t have) const {
  const size_t page = static_cast<size_t>(ctx.kv_pool().page_size);
  for (const Slot& s : slots) {
    if (!s.job || s.job->phase != Phase::prefill) continue;
    const size_t c = std::min(common_prefix(s.job->feed(), prompt), prompt.size() - 1) / page * page;
    if (c >= have + page && s.job->n_done < c) return true;
  }
  return false;
}

// Takes slot s's pages back for the requests older than its own: its
// request goes back to the head of the queue and, once admitted again,
// prefills what its cache held (the prompt, and while generating the tokens
// already fed and the pending one) and goes on where it was. Every row is
// the bits it was (contract 2), so the reply is the one it would have been;
// nothing already reported is reported again. A request whose reply is over
// (closing rows) just loses those rows.
void Scheduler::Impl::preempt(Slot& s) {
  std::unique_ptr<Job> j = std::move(s.job);
  if (j->phase == Phase::generate) {
    j->resume = s.tokens;
    j->resume.push_back(j->pending);
  } else if (j->phase == Phase::prefill && !j->resume.empty()) {
    // Preempted again while resuming: the same rows.
  } else {
    j->resume.clear();
  }
  j->n_done = 0;
  cache_prefix(s, false);  // kept unless the pages are still short: a cheaper resumption
  s.seq.clear();
  s.tokens.clear();
  s.last_used = ++clock;
  std::lock_guard<std::mutex> lock(mu);
  ++m.preemptions_total;
  if (j->reply_over) return;  // closing rows only: nothing waits for them
  j->phase = Phase::prefill;
  queue.push_front(std::move(j));
}

// Picks the free slot whose cached tokens share the longest prefix with the
// rows to prefill when that prefix is more than slot_prompt_similarity of
// them, else the least recently used free slot (llama-server's choice), and
// keeps the prefix the chosen slot shares in place. A longer prefix, by at
// least a page, in the prefix tree (whole pages) or in another slot (to the
// position: its partial last page copied) is shared instead: the slot's
// sequence becomes a fork of the node's or the slot's, its whole pages
// referenced, not copied. The rows are the same bits either way, so the
// reply does not change. A request still prefilling more of the prefix
// makes the job wait for it (computing_prefix). The rows must fit in the
// free pages (prompt caches of other free slots, then the tree's unheld
// leaves given back, least recently used first) with one page to spare for
// each request already running (so that a new request does not at once
// force a preemption); otherwise the job is handed back and waits (nothing
// is truncated).
std::unique_ptr<Job> Scheduler::Impl::admit(std::unique_ptr<Job> job) {
  const std::vector<token_id>& prompt = job->feed();
  const size_t page = static_cast<size_t>(ctx.kv_pool().page_size);
  // The last row is always recomputed: its logits start (or continue) the
  // reply. A hybrid or sliding-window cache goes back to its latest snapshot
  // at or before the common prefix (Sequence::rewind_point).
  const auto reusable = [&](const Slot& s) -> size_t {
    if (!job->req.cache_prompt) return 0;
    const size_t common = std::min(common_prefix(s.tokens, prompt), prompt.size() - 1);
    return static_cast<size_t>(s.seq.rewind_point(static_cast<int64_t>(common)));
  };
  Slot* best = nullptr;
  Slot* lru = nullptr;
  size_t best_len = 0;
  int64_t n_running = 0;
  for (Slot& s : slots) {
    if (s.job) {
      ++n_running;
      continue;
    }
    const size_t len = reusable(s);
    if (len > best_len && static_cast<double>(len) > p.slot_prompt_similarity * static_cast<double>(prompt.size())) {
      best = &s;
      best_len = len;
    }
    if (lru == nullptr || s.last_used < lru->last_used) lru = &s;
  }
  if (best == nullptr) {
    best = lru;
    best_len = reusable(*lru);
  }
  // Shared prefixes: the longest prefix the tree holds in whole pages, or
  // one another slot (running or free) holds position by position when that
  // is longer (its whole pages shared, its partial last page copied).
  runtime::PrefixTree::Match cached;
  Slot* donor = nullptr;
  size_t donor_len = 0;
  if (job->req.cache_prompt) {
    if (tree) {
      cached = tree->match(prompt, ++clock);
      cached.n = std::min(cached.n, static_cast<int64_t>(prompt.size() - 1));
    }
    for (Slot& s : slots) {
      const size_t len = &s == best ? 0 : reusable(s);
      if (len > donor_len) {
        donor = &s;
        donor_len = len;
      }
    }
    if (tree && computing_prefix(prompt, std::max({best_len, donor_len, static_cast<size_t>(cached.n)}))) return job;
  }
  best->seq.truncate(static_cast<int64_t>(best_len));  // a rewind_point: accepted
  best->tokens.resize(best_len);
  // Worth a fork when it saves at least a page of rows.
  const Sequence* from = nullptr;
  size_t from_len = 0;
  if (donor && donor_len >= best_len + page && donor_len > static_cast<size_t>(cached.n)) {
    from = &donor->seq;
    from_len = donor_len;
  } else if (cached.node && static_cast<size_t>(cached.n) >= best_len + page) {
    from = &*cached.node->seq;
    from_len = static_cast<size_t>(cached.n);
  }
  if (from) {
    try {
      Sequence shared = from->fork(static_cast<int64_t>(from_len));
      best->seq = std::move(shared);
      best->tokens.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(from_len));
      best_len = from_len;
      hold(*best, cached.node);
    } catch (const Error&) {
      // No page for the copy of a partial last page: computed as usual.
    }
  }
  const int64_t need = best->seq.kv_pages_needed(static_cast<int64_t>(prompt.size() - best_len)) + n_running;
  while (pages_free() < need && evict(best)) {
  }
  if (pages_free() < need) {
    hold(*best, nullptr);  // what it forked stays as its prompt cache
    return job;
  }
  // The end of the prompt (but its last row): where a follow-up that starts
  // with this prompt goes back to on a hybrid or sliding-window model.
  best->seq.request_snapshot(static_cast<int64_t>(prompt.size() - 1));
  best->last_used = ++clock;
  job->n_done = best_len;
  job->result.slot = best->id;
  if (job->resume.empty()) {
    job->result.n_prompt = static_cast<int64_t>(prompt.size());
    job->result.n_cached = static_cast<int64_t>(best_len);
    job->result.timings.prompt_n = static_cast<int64_t>(prompt.size() - best_len);
  }
  const bool first_admission = !job->admitted;
  if (first_admission) {
    job->admitted = true;
    job->t_admit = Clock::now();
    job->gen.accept_prompt(prompt);
  }
  best->job = std::move(job);
  if (first_admission) report_progress(*best->job, true);
  return nullptr;
}

// llama-server's is_progress result: job j's prompt rows in the cache now
// (Request::on_progress). A throwing callback cancels the request, as a
// throwing on_token does.
void Scheduler::Impl::report_progress(Job& j, bool first) {
  if (!j.req.on_progress || !j.resume.empty()) return;
  PromptProgress pp;
  pp.total = static_cast<int64_t>(j.req.prompt.size());
  pp.cache = j.result.n_cached;
  pp.processed = static_cast<int64_t>(j.n_done);
  if (!first) {
    pp.timings.prompt_n = pp.processed - pp.cache;
    pp.timings.prompt_ms = runtime::ms_between(j.t_admit, Clock::now());
    pp.time_ms = static_cast<int64_t>(pp.timings.prompt_ms);
  }
  try {
    j.req.on_progress(pp);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu);
    cancels.insert(j.id);
  }
}

bool Scheduler::Impl::call_on_token(Job& j, GeneratedToken& t) {
  runtime::record_step(j.result, t, j.gen.params());
  if (!j.req.on_token) return true;
  // The step as reported: with the reply's timings so far.
  t.timings = j.result.timings;
  t.timings.predicted_ms = j.t_first == Clock::time_point{} ? 0 : runtime::ms_between(j.t_first, Clock::now());
  t.n_cached = j.result.n_cached;
  try {
    return j.req.on_token(t);
  } catch (...) {
    return false;  // a throwing callback cancels its request
  }
}

// The reply of slot s is over (its last step has been reported): on_done
// runs now; the slot is released, or kept one more step for close_turn rows.
void Scheduler::Impl::finish(Slot& s, GeneratedToken closing_step) {
  Job& j = *s.job;
  if (closing_step.finish != FinishReason::none && closing_step.id < 0) call_on_token(j, closing_step);
  j.result.timings.predicted_ms =
      j.t_first == Clock::time_point{} ? 0 : runtime::ms_between(j.t_first, Clock::now());
  runtime::record_end(j.result, j.gen);
  // A reply cut before its prompt was in the cache has no turn to close.
  if (j.phase != Phase::prefill)
    j.closing = runtime::closing_rows(j.gen, model.tokenizer(), j.pending, s.seq.n_ctx() - s.seq.n_past());
  j.reply_over = true;
  {
    std::lock_guard<std::mutex> lock(mu);
    live.erase(j.id);
    cancels.erase(j.id);
    m.tokens_predicted_total += static_cast<uint64_t>(j.result.timings.predicted_n);
    m.tokens_predicted_seconds_total += j.result.timings.predicted_ms / 1e3;
    j.result.step = m.n_decode_total;
    m.n_tokens_max = std::max(m.n_tokens_max, static_cast<uint64_t>(j.result.n_prompt) + j.result.tokens.size());
    record_slot(s);  // final counts, before the caller hears of the end
  }
  call_on_done(j);
  if (j.closing.empty()) release(s);
  else j.phase = Phase::closing;
}

void Scheduler::Impl::end_reply(Slot& s, FinishReason why) { finish(s, s.job->gen.finish(why)); }

void Scheduler::Impl::release(Slot& s) {
  cache_prefix(s, false);
  s.job.reset();
  s.last_used = ++clock;
}

// The first logits row of job j (its prompt is in the cache): its prompt
// timing, and from now on it generates.
void Scheduler::Impl::on_first_row(Job& j) {
  j.t_first = Clock::now();
  j.result.timings.prompt_ms = runtime::ms_between(j.t_admit, j.t_first);
  j.phase = Phase::generate;
  std::lock_guard<std::mutex> lock(mu);
  m.prompt_tokens_total += static_cast<uint64_t>(j.result.timings.prompt_n);
  m.prompt_seconds_total += j.result.timings.prompt_ms / 1e3;
  m.cached_tokens_total += static_cast<uint64_t>(j.result.n_cached);
}

// Token t, drawn from slot s's logits row: report it and decide what the
// slot feeds next.
void Scheduler::Impl::on_step(Slot& s, GeneratedToken& t) {
  Job& j = *s.job;
  ++j.result.timings.predicted_n;
  j.pending = t.id;
  const bool go_on = call_on_token(j, t);
  if (t.finish != FinishReason::none) return finish(s, {});
  if (!go_on) return end_reply(s, FinishReason::cancelled);
  if (s.seq.n_past() >= s.seq.n_ctx()) {
    j.result.context_full = true;
    return end_reply(s, FinishReason::length);
  }
  // llama-server's t_max_predict_ms: checked on a step with a newline only,
  // so that the reply ends at a line's end (server-context.cpp, STOP_TYPE_LIMIT).
  if (j.req.t_max_predict_ms > 0 && t.text.find('\n') != std::string::npos &&
      runtime::ms_between(j.t_first, Clock::now()) > static_cast<double>(j.req.t_max_predict_ms))
    return end_reply(s, FinishReason::length);
}

void Scheduler::Impl::fail_all(const std::string& what) {
  for (Slot& s : slots) {
    if (!s.job) continue;
    // Context::decode changed no cache, but the rows already written for this
    // job are dropped too: the cache is rebuilt from scratch next time.
    s.seq.clear();
    s.tokens.clear();
    if (!s.job->reply_over) {
      s.job->result.error = what;
      s.job->pending = -1;
      end_reply(s, FinishReason::error);
    }
    release(s);
  }
}

// Copies slot s's state into slot_states (GET /slots); mu must be held.
void Scheduler::Impl::record_slot(const Slot& s) {
  slot_states.resize(slots.size());
  SlotState& st = slot_states[static_cast<size_t>(s.id)];
  st.id = s.id;
  st.is_processing = s.job && !s.job->reply_over;
  if (!st.is_processing) {
    // llama-server resets a slot's counts when its request ends: the last
    // request's id stays, the prompt is what the cache holds, nothing left.
    if (st.has_task) {
      st.n_prompt_tokens = s.seq.n_past();
      st.n_prompt_tokens_cache = st.n_prompt_tokens_processed = st.n_decoded = 0;
      st.max_tokens = -1;
      st.has_new_line = false;
    }
    return;
  }
  const Job& j = *s.job;
  if (!st.has_task || st.id_task != j.id) st.has_new_line = false;
  st.has_task = true;
  st.id_task = j.id;
  if (!st.has_new_line) st.has_new_line = j.result.text.find('\n') != std::string::npos;
  st.n_prompt_tokens = j.result.n_prompt;
  st.n_prompt_tokens_cache = j.result.n_cached;
  st.n_prompt_tokens_processed = static_cast<int64_t>(j.n_done) - j.result.n_cached;
  st.n_decoded = static_cast<int64_t>(j.result.tokens.size());
  st.max_tokens = j.req.params.max_tokens;
}

void Scheduler::Impl::update_metrics() {
  std::lock_guard<std::mutex> lock(mu);
  m.requests_processing = 0;
  m.kv_cells_used = m.kv_cells_cached = 0;
  n_free = 0;
  for (const Slot& s : slots) {
    record_slot(s);
    if (s.job) {
      m.kv_cells_used += s.seq.n_past();
      if (!s.job->reply_over) ++m.requests_processing;
    } else {
      m.kv_cells_cached += s.seq.n_past();
      ++n_free;
    }
  }
  m.requests_deferred = static_cast<int32_t>(queue.size());
  m.kv_pages_used = ctx.kv_pool().n_used;
  m.snapshot_bytes = 0;
  for (const Slot& s : slots) m.snapshot_bytes += s.seq.snapshot_bytes();
  m.prefix_cache_pages = tree ? tree->n_pages() : 0;
  busy = n_free < static_cast<int32_t>(slots.size());
  if (!busy && queue.empty() && embed_queue.empty()) idle.notify_all();
}

void Scheduler::Impl::shutdown() {
  std::deque<std::unique_ptr<Job>> queued;
  std::deque<EmbeddingRequest> embeds;
  {
    std::lock_guard<std::mutex> lock(mu);
    queued.swap(queue);
    embeds.swap(embed_queue);
  }
  for (EmbeddingRequest& e : embeds) call_on_done(e, {}, kShuttingDown);
  for (Slot& s : slots)
    if (s.job && !s.job->reply_over) {
      s.job->pending = -1;
      end_reply(s, FinishReason::cancelled);
    }
  uint64_t step;
  {
    std::lock_guard<std::mutex> lock(mu);
    step = m.n_decode_total;
  }
  for (std::unique_ptr<Job>& j : queued) drop_queued(*j, false, step);
  std::lock_guard<std::mutex> lock(mu);
  live.clear();
  idle.notify_all();
}

// Embedding requests taken from the queue: the inputs of the requests with the
// same parameters in Context::embed calls of up to n_batch tokens (each
// input's result does not depend on the others), results handed back request
// by request, in arrival order.
void Scheduler::Impl::run_embeddings(std::deque<EmbeddingRequest> jobs) {
  std::vector<bool> done(jobs.size(), false);
  for (size_t a = 0; a < jobs.size(); ++a) {
    if (done[a]) continue;
    const EmbeddingParams& ep = jobs[a].params;
    std::vector<size_t> group;
    std::vector<std::vector<token_id>> inputs;
    for (size_t b = a; b < jobs.size(); ++b) {
      if (done[b] || jobs[b].params.pooling != ep.pooling || jobs[b].params.embd_normalize != ep.embd_normalize)
        continue;
      group.push_back(b);
      done[b] = true;
      inputs.insert(inputs.end(), jobs[b].inputs.begin(), jobs[b].inputs.end());
    }
    // Calls of at most n_batch tokens (an input longer than that alone): the
    // caches and hidden states of a call are held at once.
    std::vector<Embedding> all;
    std::string error;
    const auto t0 = Clock::now();
    try {
      for (size_t i0 = 0; i0 < inputs.size();) {
        size_t i1 = i0 + 1;
        int64_t rows = static_cast<int64_t>(inputs[i0].size());
        while (i1 < inputs.size() && rows + static_cast<int64_t>(inputs[i1].size()) <= p.n_batch)
          rows += static_cast<int64_t>(inputs[i1++].size());
        std::vector<Embedding> part =
            ctx.embed(std::span(inputs).subspan(i0, i1 - i0), ep, p.n_ctx);
        for (Embedding& e : part) all.push_back(std::move(e));
        i0 = i1;
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    const double seconds = runtime::ms_between(t0, Clock::now()) / 1e3;
    uint64_t n_tokens = 0;
    for (const auto& in : inputs) n_tokens += in.size();
    {
      std::lock_guard<std::mutex> lock(mu);
      ++m.n_decode_total;
      m.prompt_tokens_total += n_tokens;
      m.prompt_seconds_total += seconds;
    }
    size_t next = 0;
    for (const size_t b : group) {
      EmbeddingRequest& job = jobs[b];
      std::vector<Embedding> mine;
      if (error.empty())
        for (size_t k = 0; k < job.inputs.size(); ++k) mine.push_back(std::move(all[next + k]));
      next += job.inputs.size();
      call_on_done(job, std::move(mine), error);
    }
  }
}

void Scheduler::Impl::run() {
  Batch batch;
  std::vector<Slot*> owners;  // the slot of each logits row, in order
  std::vector<GeneratedToken> drawn;        // the token of each logits row
  std::vector<std::exception_ptr> failed;   // or why none was drawn
  std::vector<size_t> order;  // slots in admission order (oldest first)
  for (;;) {
    std::vector<std::unique_ptr<Job>> dropped;  // cancelled while queued
    std::vector<std::unique_ptr<Job>> expired;  // past their deadline (or drained) while queued
    std::deque<EmbeddingRequest> drained_embeds;
    std::unordered_set<RequestId> to_cancel;
    uint64_t step = 0;
    Clock::time_point now, cap;  // cap: the drain's deadline (max() when not draining)
    {
      std::unique_lock<std::mutex> lock(mu);
      const auto has_free = [&] {
        return std::any_of(slots.begin(), slots.end(), [](const Slot& s) { return !s.job; });
      };
      wake.wait(lock, [&] {
        return stopping || busy || !cancels.empty() || !embed_queue.empty() || (!queue.empty() && has_free()) ||
               (draining && !queue.empty());
      });
      if (stopping) break;
      if (draining) drained_embeds.swap(embed_queue);
      if (!embed_queue.empty()) {
        // The oldest requests, up to n_batch tokens (at least one request):
        // the generating slots wait at most that long for their next step.
        std::deque<EmbeddingRequest> jobs;
        int64_t rows = 0;
        while (!embed_queue.empty() && (jobs.empty() || rows < p.n_batch)) {
          for (const auto& in : embed_queue.front().inputs) rows += static_cast<int64_t>(in.size());
          jobs.push_back(std::move(embed_queue.front()));
          embed_queue.pop_front();
        }
        busy = true;
        lock.unlock();
        run_embeddings(std::move(jobs));
        lock.lock();
      }
      // Deadlines are read once per step: a request whose deadline passed
      // while it waited leaves the queue here, before any takes a slot.
      now = Clock::now();
      cap = drain_deadline;
      step = m.n_decode_total;
      for (auto it = queue.begin(); it != queue.end();) {
        const bool cancel = cancels.count((*it)->id) != 0;
        const bool late = draining || now >= (*it)->req.deadline;
        if (cancel || late) {
          cancels.erase((*it)->id);
          live.erase((*it)->id);
          (cancel ? dropped : expired).push_back(std::move(*it));
          it = queue.erase(it);
        } else {
          ++it;
        }
      }
      to_cancel = cancels;
      // Arrival order: the oldest waiting request takes the next free slot
      // when its rows fit in the pool; the others wait behind it.
      while (!queue.empty() && has_free()) {
        std::unique_ptr<Job> j = std::move(queue.front());
        queue.pop_front();
        busy = true;
        lock.unlock();
        j = admit(std::move(j));
        lock.lock();
        if (j) {
          queue.push_front(std::move(j));
          break;
        }
      }
    }
    for (EmbeddingRequest& e : drained_embeds) call_on_done(e, {}, kShuttingDown);
    for (std::unique_ptr<Job>& j : dropped) drop_queued(*j, false, step);
    for (std::unique_ptr<Job>& j : expired) drop_queued(*j, true, step);
    for (Slot& s : slots) {
      if (!s.job || s.job->reply_over) continue;
      if (to_cancel.count(s.job->id)) {
        end_reply(s, FinishReason::cancelled);
      } else if (now >= std::min(s.job->req.deadline, cap)) {
        s.job->result.deadline_passed = true;
        end_reply(s, FinishReason::length);
      }
    }

    // One batch: decode rows and closing rows first, then prompt chunks of
    // the oldest requests under the step's row budget. The rows must find
    // their pages: if the pool has too few, free slots' prompt caches are
    // given back, then the newest request is preempted (its pages back, it
    // waits at the head of the queue), until they fit.
    std::vector<Slot*> closing;
    std::vector<size_t> n_rows(slots.size());
    for (;;) {
      order.clear();
      for (size_t i = 0; i < slots.size(); ++i)
        if (slots[i].job) order.push_back(i);
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return slots[a].job->id < slots[b].job->id; });
      int64_t budget = p.n_batch, need = 0;
      for (const size_t i : order) {
        const Job& j = *slots[i].job;
        n_rows[i] = j.phase == Phase::generate ? 1 : j.phase == Phase::closing ? j.closing.size() : 0;
        budget -= static_cast<int64_t>(n_rows[i]);
      }
      for (const size_t i : order) {
        const Job& j = *slots[i].job;
        if (j.phase != Phase::prefill || budget <= 0) continue;
        n_rows[i] = std::min({static_cast<size_t>(p.n_ubatch), static_cast<size_t>(budget), j.feed().size() - j.n_done});
        budget -= static_cast<int64_t>(n_rows[i]);
      }
      for (const size_t i : order) need += slots[i].seq.kv_pages_needed(static_cast<int64_t>(n_rows[i]));
      if (order.empty() || need <= pages_free() || evict(nullptr)) {
        if (order.empty() || need <= pages_free()) break;
        continue;
      }
      preempt(slots[order.back()]);
    }
    batch.clear();
    owners.clear();
    for (const size_t i : order) {
      Slot& s = slots[i];
      Job& j = *s.job;
      if (j.phase == Phase::generate) {
        batch.add(s.seq, j.pending, true);
        s.tokens.push_back(j.pending);
        owners.push_back(&s);
      } else if (j.phase == Phase::closing) {
        for (const token_id t : j.closing) {
          batch.add(s.seq, t, false);
          s.tokens.push_back(t);
        }
        closing.push_back(&s);
      }
    }
    for (const size_t i : order) {
      Slot& s = slots[i];
      Job& j = *s.job;
      if (j.phase != Phase::prefill) continue;
      const std::vector<token_id>& feed = j.feed();
      for (size_t k = 0; k < n_rows[i]; ++k) {
        const bool last = j.n_done + k + 1 == feed.size();
        batch.add(s.seq, feed[j.n_done + k], last);
        s.tokens.push_back(feed[j.n_done + k]);
        if (last) owners.push_back(&s);
      }
      j.n_done += n_rows[i];
    }
    if (batch.size() > 0) {
      std::span<const float> logits;
      try {
        logits = ctx.decode(batch);
      } catch (const std::exception& e) {
        fail_all(e.what());
        update_metrics();
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        ++m.n_decode_total;
        m.n_busy_slots_total += order.size();
      }
      for (Slot* s : closing) release(*s);
      for (const size_t i : order)
        if (slots[i].job && slots[i].job->phase == Phase::prefill && n_rows[i] > 0) cache_prefix(slots[i], true);
      for (const size_t i : order)
        if (slots[i].job && slots[i].job->phase == Phase::prefill && n_rows[i] > 0) report_progress(*slots[i].job, false);
      // Each row's draw touches its own Generation only (sampler, RNG,
      // stopper; the Tokenizer is read-only), so the rows are drawn on the
      // Context's threads at once, a row's token the same as drawn alone;
      // reporting stays here, in row order.
      for (Slot* s : owners) {
        Job& j = *s->job;
        if (j.phase != Phase::prefill) continue;
        if (j.resume.empty()) {
          on_first_row(j);
        } else {  // a resumption: its rows are back in the cache
          j.phase = Phase::generate;
          j.resume.clear();
          j.resume.shrink_to_fit();
        }
      }
      drawn.assign(owners.size(), GeneratedToken{});
      failed.assign(owners.size(), nullptr);
      ctx.parallel_for(static_cast<int64_t>(owners.size()), 1, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          try {
            const size_t o = static_cast<size_t>(r) * static_cast<size_t>(n_vocab);
            drawn[r] = owners[r]->job->gen.next(logits.subspan(o, static_cast<size_t>(n_vocab)));
          } catch (...) {
            failed[r] = std::current_exception();
          }
        }
      });
      for (size_t r = 0; r < owners.size(); ++r) {
        Slot& s = *owners[r];
        try {
          if (failed[r]) std::rethrow_exception(failed[r]);
          on_step(s, drawn[r]);
        } catch (const std::exception& e) {  // refused at submission; kept so the worker never dies
          if (s.job && !s.job->reply_over) {
            s.job->result.error = e.what();
            if (const auto* se = dynamic_cast<const Error*>(&e)) s.job->result.error_code = se->code();
            end_reply(s, FinishReason::error);
          }
        }
      }
    }
    update_metrics();
  }
  shutdown();
}

Scheduler::Scheduler(const Model& model, const SchedulerParams& params)
    : impl_(std::make_unique<Impl>(model, params)) {}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  impl_->worker.join();
}

std::optional<RequestId> Scheduler::try_submit(Request request) {
  Impl& d = *impl_;
  const size_t n = request.prompt.size();
  if (n == 0) throw Error(Errc::invalid_argument, "the prompt has no tokens");
  if (static_cast<int64_t>(n) > d.p.n_ctx)
    throw Error(Errc::invalid_argument, "the prompt is " + std::to_string(n) + " tokens, longer than the context (n_ctx " +
                                            std::to_string(d.p.n_ctx) + ")");
  for (const token_id t : request.prompt)
    if (t < 0 || t >= d.n_vocab)
      throw Error(Errc::out_of_range,
                  "prompt token id " + std::to_string(t) + " outside [0, " + std::to_string(d.n_vocab) + ")");
  for (const LogitBias& b : request.params.sampling.logit_bias)
    if (b.token >= d.n_vocab)
      throw Error(Errc::out_of_range, "logit_bias: token " + std::to_string(b.token) + " outside [0, " +
                                          std::to_string(d.n_vocab) + ")");
  // The Generation is made here so that a bad parameter is refused at once
  // and a random seed is drawn at submission.
  Generation gen(d.model.tokenizer(), request.params, static_cast<int32_t>(d.p.n_ctx));
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.stopping || d.draining) return std::nullopt;
  const size_t waiting_room = d.p.max_queue + static_cast<size_t>(std::max(0, d.n_free));
  if (d.queue.size() >= waiting_room) return std::nullopt;
  const RequestId id = d.next_id++;
  d.queue.push_back(std::make_unique<Job>(id, std::move(request), std::move(gen)));
  d.live.insert(id);
  ++d.m.requests_total;
  d.m.requests_deferred = static_cast<int32_t>(d.queue.size());
  d.wake.notify_all();
  return id;
}

std::optional<RequestId> Scheduler::try_submit_embedding(EmbeddingRequest request) {
  Impl& d = *impl_;
  if (request.inputs.empty()) throw Error(Errc::invalid_argument, "the request has no inputs");
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const std::vector<token_id>& in = request.inputs[i];
    if (in.empty()) throw Error(Errc::invalid_argument, "input " + std::to_string(i) + " has no tokens");
    if (static_cast<int64_t>(in.size()) > d.p.n_ctx)
      throw Error(Errc::invalid_argument, "input " + std::to_string(i) + " is " + std::to_string(in.size()) +
                                              " tokens, longer than the context (n_ctx " + std::to_string(d.p.n_ctx) +
                                              ")");
    for (const token_id t : in)
      if (t < 0 || t >= d.n_vocab)
        throw Error(Errc::out_of_range, "input " + std::to_string(i) + ": token id " + std::to_string(t) +
                                            " outside [0, " + std::to_string(d.n_vocab) + ")");
  }
  const bool rank = request.params.pooling == Pooling::rank ||
                    (request.params.pooling == Pooling::unspecified && d.model.pooling_type() == Pooling::rank);
  if (rank) d.model.check_rank_head();
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.stopping || d.draining || d.embed_queue.size() >= std::max<size_t>(d.p.max_queue, 1)) return std::nullopt;
  const RequestId id = d.next_id++;
  d.embed_queue.push_back(std::move(request));
  ++d.m.requests_total;
  d.wake.notify_all();
  return id;
}

bool Scheduler::cancel(RequestId id) {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  if (!d.live.count(id)) return false;
  d.cancels.insert(id);
  d.wake.notify_all();
  return true;
}

void Scheduler::drain(Clock::time_point deadline) {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  d.draining = true;
  d.drain_deadline = std::min(d.drain_deadline, deadline);
  d.wake.notify_all();
}

SchedulerMetrics Scheduler::metrics() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->m;
}

std::vector<SlotState> Scheduler::slots() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->slot_states.empty()) return impl_->slot_states;
  // Before the worker's first update: every slot idle.
  std::vector<SlotState> idle(static_cast<size_t>(impl_->p.n_parallel));
  for (size_t i = 0; i < idle.size(); ++i) idle[i].id = static_cast<int32_t>(i);
  return idle;
}

void Scheduler::wait_idle() const {
  Impl& d = *impl_;
  std::unique_lock<std::mutex> lock(d.mu);
  d.idle.wait(lock, [&] { return d.stopping || (d.queue.empty() && d.embed_queue.empty() && !d.busy); });
}

const Model& Scheduler::model() const { return impl_->model; }
const SchedulerParams& Scheduler::params() const { return impl_->p; }
int64_t Scheduler::n_ctx() const { return impl_->p.n_ctx; }

}  // namespace synapse

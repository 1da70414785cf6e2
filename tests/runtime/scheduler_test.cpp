// The serving runtime (synapse/scheduler.hpp). The headline property: a
// fixed request's token ids, text and logprobs are byte-identical run alone,
// beside 15 other requests started before, during and after it, on any slot,
// with -np 1 and -np 16, 1 and 2 threads, with a cold and a warm prompt
// cache; on stories260K and a quantized tiny model. Then: cancel frees the
// slot, a full queue refuses, requests start in arrival order, a long prompt
// delays the others by at most one step, metrics add up, deadlines and
// drain() end requests on time (one past its deadline never takes a slot).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "golden_util.hpp"
#include "synapse/scheduler.hpp"

namespace synapse {
namespace {

using test::data_path;

// What a client sees of one request.
struct Reply {
  std::vector<token_id> tokens;
  std::string text, streamed;
  std::vector<float> logprobs;
  std::vector<TokenLogprob> top;  // flattened
  FinishReason finish = FinishReason::none;
  int64_t n_cached = 0;
  int32_t slot = -1;
  std::string error;
  bool deadline_passed = false;
  bool context_full = false;
  uint64_t step = 0;
  std::vector<std::string> step_texts;
};

// Collects a request's steps and result; get() waits for on_done.
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Reply r;
  std::function<void(const GeneratedToken&, int)> on_step;  // extra action per step (step index)
  int steps = 0;

  void attach(Request& req) {
    req.on_token = [this](const GeneratedToken& t) {
      r.streamed += t.text;
      r.step_texts.push_back(t.text);
      if (on_step) on_step(t, steps);
      ++steps;
      return true;
    };
    req.on_done = [this](const GenerationResult& g) {
      std::lock_guard<std::mutex> lock(mu);
      r.tokens = g.tokens;
      r.text = g.text;
      r.logprobs = g.logprobs;
      for (const auto& v : g.top_logprobs) r.top.insert(r.top.end(), v.begin(), v.end());
      r.finish = g.finish_reason;
      r.n_cached = g.n_cached;
      r.slot = g.slot;
      r.error = g.error;
      r.deadline_passed = g.deadline_passed;
      r.context_full = g.context_full;
      r.step = g.step;
      done = true;
      cv.notify_all();
    };
  }
  // Ready when the request has reported step `n` (0-based).
  std::future<void> reached(int n) {
    auto p = std::make_shared<std::promise<void>>();
    on_step = [p, n](const GeneratedToken&, int step) {
      if (step == n) p->set_value();
    };
    return p->get_future();
  }
  Reply get() {
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return done; })) << "request never finished";
    return r;
  }
  bool finished() {
    std::lock_guard<std::mutex> lock(mu);
    return done;
  }
};

void expect_same_bytes(const Reply& want, const Reply& got, const std::string& what) {
  EXPECT_EQ(want.tokens, got.tokens) << what;
  EXPECT_EQ(want.text, got.text) << what;
  EXPECT_EQ(got.text, got.streamed) << what;
  EXPECT_EQ(want.finish, got.finish) << what;
  ASSERT_EQ(want.logprobs.size(), got.logprobs.size()) << what;
  if (!want.logprobs.empty()) {  // memcmp of a null pointer is undefined even for 0 bytes
    EXPECT_EQ(0, std::memcmp(want.logprobs.data(), got.logprobs.data(), want.logprobs.size() * sizeof(float))) << what;
  }
  ASSERT_EQ(want.top.size(), got.top.size()) << what;
  if (!want.top.empty()) {
    EXPECT_EQ(0, std::memcmp(want.top.data(), got.top.data(), want.top.size() * sizeof(TokenLogprob))) << what;
  }
}

std::vector<token_id> prompt_of(const Model& m, const std::string& text) {
  return m.tokenizer().tokenize(text, true, false);
}

const char* const kTexts[] = {
    "Once upon a time",
    "The cat sat on the mat and looked at the bird in the tree. It wanted to catch it.",
    "Lily",
    "One day, a little boy named Tom went to the park with his mom. He saw a big slide and wanted to go down it. "
    "His mom said he had to wait for his turn, so he waited and waited.",
    "The sun was hot.",
    "Max the dog liked to dig holes in the garden, but his owner did not like it at all.",
    "A bird",
    "There was a big red ball in the yard. Sam kicked it very hard and it flew over the fence into the garden of "
    "the old man who lived next door. The old man came out and",
};

// The 15 others: different prompts, lengths, sampling and limits.
Request other(const Model& m, int i) {
  Request r;
  std::string text = kTexts[i % 8];
  if (i >= 8) text += " And then";
  r.prompt = prompt_of(m, text);
  r.params.max_tokens = 4 + (i * 7) % 37;
  r.params.ignore_eos = i % 3 == 0;
  r.params.sampling.seed = 100 + i;
  r.params.sampling.temp = i % 2 ? 0.0f : 0.7f + 0.1f * (i % 4);
  r.params.n_probs = i % 4;
  return r;
}

struct Case {
  const char* model;
  bool greedy;
};

Request fixed_request(const Model& m, bool greedy) {
  Request r;
  // Shares no prefix with the others' prompts beyond BOS.
  r.prompt = prompt_of(m, "In a small house near the woods, there lived a girl who loved to sing songs to the "
                          "birds every morning.");
  r.params.max_tokens = 32;
  r.params.ignore_eos = true;
  if (greedy) {
    r.params.sampling.temp = 0;
    r.params.logprobs = true;
  } else {
    r.params.sampling.seed = 1234;
    r.params.sampling.temp = 0.9f;
    r.params.sampling.top_k = 0;  // the whole distribution: every position's draw matters
    r.params.n_probs = 4;
  }
  return r;
}

SchedulerParams sched_params(int np, int threads) {
  SchedulerParams p;
  p.n_parallel = np;
  p.n_threads = threads;
  p.n_ctx = 256 * np;  // the pool all slots share: 256 positions a slot, so they run side by side
  p.n_batch = 24;  // small: prompt chunks and budget limits happen often
  p.n_ubatch = 8;
  p.max_queue = 64;
  return p;
}

Reply run_alone(const Model& m, const Request& fixed, int np, int threads) {
  Scheduler s(m, sched_params(np, threads));
  Collector c;
  Request r = fixed;
  c.attach(r);
  EXPECT_TRUE(s.try_submit(std::move(r)).has_value());
  return c.get();
}

// The fixed request among 15 others: 7 submitted before it (and running when
// it arrives), 8 submitted while it generates. `warm`: a request with the
// same prompt runs (after the 7) and ends just before, so the fixed one finds
// its prefix cached.
Reply run_crowded(const Model& m, const Request& fixed, int np, int threads, bool warm) {
  Scheduler s(m, sched_params(np, threads));
  std::vector<std::unique_ptr<Collector>> others;
  for (int i = 0; i < 15; ++i) others.push_back(std::make_unique<Collector>());
  std::future<void> started = others[0]->reached(0);
  for (int i = 0; i < 7; ++i) {
    Request r = other(m, i);
    others[static_cast<size_t>(i)]->attach(r);
    EXPECT_TRUE(s.try_submit(std::move(r)).has_value());
  }
  started.wait();  // the first others are generating
  if (warm) {
    Collector w;
    Request r = fixed;
    r.params.max_tokens = 3;
    r.params.sampling.seed = 99;
    w.attach(r);
    EXPECT_TRUE(s.try_submit(std::move(r)).has_value());
    w.get();
  }
  Collector c;
  c.on_step = [&](const GeneratedToken&, int step) {
    if (step == 2) {  // during: submitted from the worker's callback
      for (int i = 7; i < 11; ++i) {
        Request r = other(m, i);
        others[static_cast<size_t>(i)]->attach(r);
        EXPECT_TRUE(s.try_submit(std::move(r)).has_value());
      }
    }
  };
  Request r = fixed;
  c.attach(r);
  EXPECT_TRUE(s.try_submit(std::move(r)).has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  for (int i = 11; i < 15; ++i) {  // after (or during, depending on timing)
    Request o = other(m, i);
    others[static_cast<size_t>(i)]->attach(o);
    EXPECT_TRUE(s.try_submit(std::move(o)).has_value());
  }
  const Reply got = c.get();
  s.wait_idle();
  for (auto& o : others) {
    EXPECT_TRUE(o->finished());
    EXPECT_TRUE(o->get().error.empty());
  }
  if (warm) {
    EXPECT_GT(got.n_cached, 0) << "the warm run found nothing in the prompt cache";
  }
  const SchedulerMetrics mt = s.metrics();
  EXPECT_EQ(mt.requests_total, warm ? 17u : 16u);
  if (np > 1) {
    EXPECT_GT(mt.n_busy_slots_total, 2 * mt.n_decode_total) << "the requests did not run side by side";
  }
  return got;
}

class SchedulerInvariance : public ::testing::TestWithParam<Case> {};

TEST_P(SchedulerInvariance, ReplyDependsOnTheRequestAlone) {
  const Model m = Model::load(data_path(std::string("models/") + GetParam().model));
  const Request fixed = fixed_request(m, GetParam().greedy);

  // The single-sequence loop the CLI uses gives the same reply.
  Context ctx(m, 1);
  Sequence seq = ctx.new_sequence(256);
  const GenerationResult g = generate(ctx, seq, fixed.prompt, fixed.params);
  const Reply want = run_alone(m, fixed, 1, 1);
  ASSERT_EQ(want.tokens.size(), 32u);
  EXPECT_EQ(want.tokens, g.tokens);
  EXPECT_EQ(want.text, g.text);
  EXPECT_EQ(want.n_cached, 0);
  ASSERT_FALSE(want.logprobs.empty());
  ASSERT_EQ(want.logprobs.size(), g.logprobs.size());
  EXPECT_EQ(0, std::memcmp(want.logprobs.data(), g.logprobs.data(), g.logprobs.size() * sizeof(float)));

  expect_same_bytes(want, run_alone(m, fixed, 16, 2), "alone, -np 16 -t 2");
  std::vector<int32_t> slots;
  for (const int np : {16, 1})
    for (const int threads : {2, 1})
      for (const bool warm : {false, true}) {
        const Reply got = run_crowded(m, fixed, np, threads, warm);
        expect_same_bytes(want, got, "crowded, -np " + std::to_string(np) + " -t " + std::to_string(threads) +
                                         (warm ? " warm" : " cold"));
        slots.push_back(got.slot);
      }
  // It ran on slots other than the one it had alone.
  EXPECT_TRUE(std::any_of(slots.begin(), slots.end(), [&](int32_t s) { return s != want.slot; }));
}

INSTANTIATE_TEST_SUITE_P(Models, SchedulerInvariance,
                         ::testing::Values(Case{"stories260K.gguf", false}, Case{"stories260K.gguf", true},
                                           Case{"tiny-qwen2-q4_k_m.gguf", false},
                                           Case{"tiny-qwen2-q4_k_m.gguf", true}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string n = i.param.model;
                           n = n.substr(0, n.find('.'));
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n + (i.param.greedy ? "_greedy" : "_seeded");
                         });

Request endless(const Model& m) {
  Request r;
  r.prompt = prompt_of(m, "Once upon a time");
  r.params.ignore_eos = true;
  r.params.sampling.temp = 0;
  return r;
}

TEST(Scheduler, CancelFreesTheSlotAndItsKvRows) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  Scheduler s(m, sched_params(1, 1));
  Collector a, b;
  std::future<void> streaming = a.reached(3);
  Request ra = endless(m), rb = endless(m);
  a.attach(ra);
  b.attach(rb);
  const RequestId ia = *s.try_submit(std::move(ra));
  const RequestId ib = *s.try_submit(std::move(rb));  // waits: one slot
  streaming.wait();
  EXPECT_EQ(s.metrics().requests_deferred, 1);
  EXPECT_TRUE(s.cancel(ib));  // queued: dropped without running
  const Reply rb_got = b.get();
  EXPECT_EQ(rb_got.finish, FinishReason::cancelled);
  EXPECT_TRUE(rb_got.tokens.empty());
  EXPECT_FALSE(a.finished());
  EXPECT_TRUE(s.cancel(ia));
  const Reply ra_got = a.get();
  EXPECT_EQ(ra_got.finish, FinishReason::cancelled);
  EXPECT_GE(ra_got.tokens.size(), 4u);
  s.wait_idle();
  const SchedulerMetrics mt = s.metrics();
  EXPECT_EQ(mt.requests_processing, 0);
  EXPECT_EQ(mt.requests_deferred, 0);
  EXPECT_EQ(mt.kv_cells_used, 0);
  EXPECT_GT(mt.kv_cells_cached, 0);  // kept for the prompt cache
  // Its pages: only those of the prompt cache (64 positions a page).
  EXPECT_EQ(mt.kv_pages_used, (mt.kv_cells_cached + mt.kv_page_size - 1) / mt.kv_page_size);
  EXPECT_FALSE(s.cancel(ia));        // already over
  // The slot serves the next request.
  Collector c;
  Request rc = endless(m);
  rc.params.max_tokens = 3;
  c.attach(rc);
  ASSERT_TRUE(s.try_submit(std::move(rc)).has_value());
  EXPECT_EQ(c.get().tokens.size(), 3u);
}

// Request r run alone on a sequence of its own (a standalone pool of n_ctx
// positions), with the single-sequence loop the CLI uses.
Reply cold_run(const Model& m, const Request& r, int64_t n_ctx) {
  Context ctx(m, 1);
  Sequence seq = ctx.new_sequence(n_ctx);
  const GenerationResult g = generate(ctx, seq, r.prompt, r.params);
  Reply w;
  w.tokens = g.tokens;
  w.text = g.text;
  w.logprobs = g.logprobs;
  for (const auto& v : g.top_logprobs) w.top.insert(w.top.end(), v.begin(), v.end());
  w.finish = g.finish_reason;
  return w;
}

// -c is one pool for every slot: a long request and short ones in a pool of
// 192 positions (3 pages of 64), far less than n_parallel x the longest.
// The short ones outgrow it together, so the newest is preempted (its pages
// taken back, resumed later); every reply is byte-identical to the request
// run alone on a sequence of its own (Context::new_sequence, a standalone
// pool), the seeded ones too (the sampler's state goes on where it was), and
// when all is over the pages held are exactly those of the slots' prompt
// caches.
TEST(Scheduler, SharedPoolPreemptsAndRepliesStayByteIdentical) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  SchedulerParams p = sched_params(4, 2);
  p.n_ctx = 192;
  std::vector<Request> reqs;
  for (int i : {0, 2, 4}) {  // short prompts, long replies: two pages each
    Request r;
    r.prompt = prompt_of(m, kTexts[i]);
    r.params.max_tokens = 100;
    r.params.ignore_eos = true;
    r.params.sampling.seed = 7 + static_cast<uint32_t>(i);
    r.params.sampling.temp = i == 2 ? 0.0f : 0.8f;
    r.params.n_probs = 2;
    reqs.push_back(r);
  }
  Request long_req;
  long_req.prompt = prompt_of(m, kTexts[3]);
  ASSERT_GT(long_req.prompt.size(), 40u);
  ASSERT_LT(long_req.prompt.size(), 150u);
  long_req.params.max_tokens = static_cast<int32_t>(185 - long_req.prompt.size());
  long_req.params.ignore_eos = true;
  long_req.params.sampling.seed = 3;
  long_req.params.logprobs = true;
  reqs.push_back(long_req);

  std::vector<Reply> want;
  for (const Request& r : reqs) want.push_back(cold_run(m, r, p.n_ctx));

  Scheduler s(m, p);
  EXPECT_EQ(s.n_ctx(), 192);
  std::vector<std::unique_ptr<Collector>> got;
  for (Request r : reqs) {
    got.push_back(std::make_unique<Collector>());
    got.back()->attach(r);
    ASSERT_TRUE(s.try_submit(std::move(r)).has_value());
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Reply r = got[i]->get();
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.tokens.size(), static_cast<size_t>(reqs[i].params.max_tokens)) << "request " << i;
    expect_same_bytes(want[i], r, "request " + std::to_string(i));
  }
  s.wait_idle();
  const SchedulerMetrics mt = s.metrics();
  EXPECT_GT(mt.preemptions_total, 0u) << "the pool never ran out: the test does not reach preemption";
  EXPECT_EQ(mt.kv_page_size, 64);
  EXPECT_EQ(mt.kv_pages_total, 3);
  EXPECT_EQ(mt.kv_cells_total, 192);
  EXPECT_EQ(mt.kv_cells_used, 0);
  int64_t cache_pages = 0;
  for (const SlotState& st : s.slots()) cache_pages += (st.n_prompt_tokens + 63) / 64;
  EXPECT_EQ(mt.kv_pages_used, cache_pages);
  EXPECT_LE(mt.kv_pages_used, mt.kv_pages_total);
}

// Shared prefixes: B arrives while A runs, their prompts share 1,000 tokens
// (330 under sanitizers). B's slot takes A's whole pages by reference (a
// fork) instead of computing them again: cached_tokens reports them, the
// pool holds the prefix once, and both replies are byte-identical to cold
// runs alone.
// The shared prefix: the 1,000 tokens (15 full pages and a part);
// under sanitizers, where the three prefills of it take most of a minute,
// 330 (5 full pages and a part), the same paths.
constexpr size_t kSharedPrefix = SYNAPSE_TEST_SANITIZED ? 330 : 1000;

TEST(Scheduler, SharedPrefixIsStoredOnce) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  SchedulerParams p = sched_params(2, 2);
  p.n_ctx = 2048;
  std::vector<token_id> prefix;
  for (int i = 0; prefix.size() < kSharedPrefix; ++i) {
    const std::vector<token_id> part = prompt_of(m, kTexts[i % 8]);
    prefix.insert(prefix.end(), part.begin() + (prefix.empty() ? 0 : 1), part.end());  // one BOS
  }
  prefix.resize(kSharedPrefix);
  Request a, b;
  a.prompt = b.prompt = prefix;
  for (token_id t : m.tokenizer().tokenize(" The dog", false, false)) a.prompt.push_back(t);
  for (token_id t : m.tokenizer().tokenize(" A bird sang", false, false)) b.prompt.push_back(t);
  a.params.max_tokens = 60;
  b.params.max_tokens = 20;
  a.params.ignore_eos = b.params.ignore_eos = true;
  a.params.sampling.seed = 11;
  b.params.sampling.seed = 12;
  b.params.logprobs = true;
  const std::vector<Reply> want = {cold_run(m, a, p.n_ctx), cold_run(m, b, p.n_ctx)};

  Scheduler s(m, p);
  Collector ca, cb;
  std::future<void> a_generates = ca.reached(1);
  int64_t pages_both = -1;
  cb.on_step = [&](const GeneratedToken&, int step) {
    if (step == 3) pages_both = s.metrics().kv_pages_used;  // A still runs (60 tokens)
  };
  Request ra = a, rb = b;
  ca.attach(ra);
  cb.attach(rb);
  ASSERT_TRUE(s.try_submit(std::move(ra)).has_value());
  a_generates.wait();  // A's prompt is in its pages
  ASSERT_TRUE(s.try_submit(std::move(rb)).has_value());
  const Reply got_b = cb.get(), got_a = ca.get();
  expect_same_bytes(want[0], got_a, "A");
  expect_same_bytes(want[1], got_b, "B");
  EXPECT_EQ(got_a.n_cached, 0);
  size_t common = 0;
  while (a.prompt[common] == b.prompt[common]) ++common;
  EXPECT_GE(common, kSharedPrefix);  // the prefix, and maybe the tails' first token
  EXPECT_EQ(got_b.n_cached, static_cast<int64_t>(common));  // forked from A's slot
  EXPECT_NE(got_a.slot, got_b.slot);
  // Both running: A's pages (its prompt and reply: 17 pages for the
  // 1,000-token prefix) and B's own (the copied page where the prompts part,
  // and its tail: 1 or 2), not two copies of the prefix's full pages.
  const int64_t a_pages = (static_cast<int64_t>(a.prompt.size()) + 3 + 63) / 64;
  EXPECT_GE(pages_both, a_pages);
  EXPECT_LE(pages_both, a_pages + 3);
  s.wait_idle();
  EXPECT_EQ(s.metrics().cached_tokens_total, common);
}

// A prefix of n tokens built from kTexts (one BOS).
std::vector<token_id> long_prefix(const Model& m, size_t n) {
  std::vector<token_id> prefix;
  for (int i = 0; prefix.size() < n; ++i) {
    const std::vector<token_id> part = prompt_of(m, kTexts[i % 8]);
    prefix.insert(prefix.end(), part.begin() + (prefix.empty() ? 0 : 1), part.end());
  }
  prefix.resize(n);
  return prefix;
}

// Submits every request at once and collects the replies, and the most KV
// pages in use at any token (the metrics as of the step before).
std::vector<Reply> run_all(Scheduler& s, const std::vector<Request>& reqs, int64_t* peak_pages) {
  std::mutex mu;
  std::vector<std::unique_ptr<Collector>> got;
  for (Request r : reqs) {
    got.push_back(std::make_unique<Collector>());
    got.back()->on_step = [&](const GeneratedToken&, int) {
      const int64_t used = s.metrics().kv_pages_used;
      std::lock_guard<std::mutex> lock(mu);
      *peak_pages = std::max(*peak_pages, used);
    };
    got.back()->attach(r);
    EXPECT_TRUE(s.try_submit(std::move(r)).has_value());
  }
  std::vector<Reply> replies;
  for (auto& c : got) replies.push_back(c->get());
  s.wait_idle();
  return replies;
}

// The memory check in pages: 16 clients at once, one long system
// prompt and a short question each, hold the system prompt's whole pages
// once (the first client computes them, the others wait for them and fork
// them) and one page of their own each: at most 1.2x the most pages one
// client alone holds, 79 pages of the prompt and 16 own ones against 80.
// Client 0's reply is byte-identical to its run alone. tiny-llama3 (one
// layer, head dim 64) keeps the 5,080-token prefill short; under sanitizers
// the prompt is 5 pages and a part: the same sum, not the 1.2x.
constexpr int64_t kSystemPages = SYNAPSE_TEST_SANITIZED ? 5 : 79;

TEST(Scheduler, SixteenClientsStoreTheirSystemPromptOnce) {
  const Model m = Model::load(data_path("models/tiny-llama3-f32.gguf"));
  SchedulerParams p = sched_params(16, 2);
  p.n_ctx = (kSystemPages + 40) * 64;  // room for admission's spare page per running request
  p.n_batch = p.n_ubatch = 512;
  // The system prompt ends 40 positions into its last page: each client's
  // question (at most 8 tokens) and 16 tokens of reply stay in that page.
  const std::vector<token_id> system = long_prefix(m, static_cast<size_t>(kSystemPages * 64 + 24));
  std::vector<Request> reqs;
  for (int i = 0; i < 16; ++i) {
    Request r;
    r.prompt = system;
    std::vector<token_id> q = m.tokenizer().tokenize(std::string(" ") + kTexts[i % 8], false, false);
    q.resize(std::min<size_t>(q.size(), 1 + i % 7));
    q.push_back(static_cast<token_id>(300 + i));  // every question its own
    r.prompt.insert(r.prompt.end(), q.begin(), q.end());
    ASSERT_LE(r.prompt.size() + 16, static_cast<size_t>((kSystemPages + 1) * 64));
    r.params.max_tokens = 16;
    r.params.ignore_eos = true;
    r.params.sampling.seed = 40 + static_cast<uint32_t>(i);
    r.params.logprobs = i % 2 == 0;
    reqs.push_back(r);
  }
  int64_t one_peak = 0;
  Reply alone;
  {
    Scheduler one(m, p);
    alone = run_all(one, {reqs[0]}, &one_peak)[0];
  }
  EXPECT_EQ(one_peak, kSystemPages + 1);
  Scheduler s(m, p);
  int64_t peak = 0;
  const std::vector<Reply> got = run_all(s, reqs, &peak);
  expect_same_bytes(alone, got[0], "client 0");
  uint64_t cached = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens.size(), 16u) << i;
    // The system prompt (and a question's first token, when another's is the same) from client 0.
    if (i == 0) EXPECT_EQ(got[i].n_cached, 0);
    else EXPECT_GE(got[i].n_cached, static_cast<int64_t>(system.size())) << i;
    cached += static_cast<uint64_t>(got[i].n_cached);
  }
  EXPECT_EQ(peak, kSystemPages + 16);
  if (!SYNAPSE_TEST_SANITIZED) {
    EXPECT_LE(static_cast<double>(peak), 1.2 * static_cast<double>(one_peak));
  }
  const SchedulerMetrics mt = s.metrics();
  EXPECT_EQ(mt.cached_tokens_total, cached);
  // The system prompt's pages stay in the tree once every client is gone.
  EXPECT_EQ(mt.prefix_cache_pages, kSystemPages);
}

// Out of pages under load: 64 clients at once against 8 slots, a queue of
// 8 (4 and 4, and shorter replies, under sanitizers, where each step is
// slow) and a pool of 5
// pages, far less than the requests need together (up to 4 pages each as
// their replies grow; half of them share a 100-token prefix). A request is either refused at submission (the server's 503) or
// ends with its complete reply, byte-identical to the request run alone
// (requests preempted and resumed included); nothing fails or is cut short.
// Afterwards nothing holds a page but the prompt caches, and every page can
// be had again: a request that needs the whole pool runs.
constexpr int kLoadSlots = SYNAPSE_TEST_SANITIZED ? 4 : 8;

TEST(Scheduler, SixtyFourClientsOutOfPagesQueueOrAreRefused) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  SchedulerParams p = sched_params(kLoadSlots, 1);
  p.n_ctx = 320;
  p.n_batch = 64;
  p.n_ubatch = 32;
  p.max_queue = kLoadSlots;
  const std::vector<token_id> shared = long_prefix(m, 100);
  std::vector<Request> kinds;
  for (int i = 0; i < 8; ++i) {
    Request r;
    r.prompt = prompt_of(m, kTexts[i]);
    if (i % 2 == 1) r.prompt.insert(r.prompt.begin() + 1, shared.begin() + 1, shared.end());
    r.params.max_tokens = 30 + (SYNAPSE_TEST_SANITIZED ? 7 : 10) * i;
    r.params.ignore_eos = true;
    r.params.sampling.seed = 70 + static_cast<uint32_t>(i);
    r.params.sampling.temp = i % 3 == 0 ? 0.0f : 0.9f;
    r.params.n_probs = i % 4 == 0 ? 2 : 0;
    kinds.push_back(r);
  }
  std::vector<Reply> want;
  for (const Request& r : kinds) want.push_back(cold_run(m, r, p.n_ctx));

  Scheduler s(m, p);
  std::vector<std::unique_ptr<Collector>> got(64);
  std::vector<int> accepted, refused;
  for (int i = 0; i < 64; ++i) {
    Request r = kinds[static_cast<size_t>(i % 8)];
    got[static_cast<size_t>(i)] = std::make_unique<Collector>();
    got[static_cast<size_t>(i)]->attach(r);
    (s.try_submit(std::move(r)).has_value() ? accepted : refused).push_back(i);
  }
  EXPECT_GE(accepted.size(), static_cast<size_t>(2 * kLoadSlots));
  EXPECT_LT(accepted.size(), 64u) << "nothing was refused: the test does not reach a full queue";
  for (const int i : accepted) {
    const Reply r = got[static_cast<size_t>(i)]->get();
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_FALSE(r.context_full) << i;
    expect_same_bytes(want[static_cast<size_t>(i % 8)], r, "client " + std::to_string(i));
  }
  s.wait_idle();
  for (const int i : refused) EXPECT_FALSE(got[static_cast<size_t>(i)]->finished()) << "refused, yet answered: " << i;
  SchedulerMetrics mt = s.metrics();
  EXPECT_GT(mt.preemptions_total, 0u) << "the pool never ran out";
  EXPECT_EQ(mt.requests_processing, 0);
  EXPECT_EQ(mt.kv_cells_used, 0);
  EXPECT_EQ(mt.kv_pages_total, 5);
  int64_t cache_pages = mt.prefix_cache_pages;
  for (const SlotState& st : s.slots()) cache_pages += (st.n_prompt_tokens + 63) / 64;
  EXPECT_LE(mt.kv_pages_used, std::min(cache_pages, mt.kv_pages_total));
  // The whole pool for one request: 306 prompt positions and 3 fed tokens.
  Request whole;
  whole.prompt = long_prefix(m, 306);
  whole.prompt.back() = 400;  // not a prefix anything cached
  whole.params.max_tokens = 4;
  whole.params.ignore_eos = true;
  whole.params.sampling.seed = 9;
  int64_t ignored = 0;
  const Reply r = run_all(s, {whole}, &ignored)[0];
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.tokens.size(), 4u);
  mt = s.metrics();
  EXPECT_EQ(mt.kv_pages_used, 5);
  EXPECT_EQ(mt.prefix_cache_pages, 4);  // its whole pages (309 positions)
}

TEST(Scheduler, FullQueueRefuses) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  SchedulerParams p = sched_params(1, 1);
  p.max_queue = 2;
  Scheduler s(m, p);
  Collector a;
  std::future<void> running = a.reached(2);
  Request ra = endless(m);
  a.attach(ra);
  const RequestId ia = *s.try_submit(std::move(ra));
  running.wait();
  std::vector<std::unique_ptr<Collector>> queued;
  for (int i = 0; i < 2; ++i) {
    queued.push_back(std::make_unique<Collector>());
    Request r = endless(m);
    r.params.max_tokens = 2;
    queued.back()->attach(r);
    EXPECT_TRUE(s.try_submit(std::move(r)).has_value());
  }
  Request refused = endless(m);
  bool called = false;
  refused.on_done = [&](const GenerationResult&) { called = true; };
  EXPECT_FALSE(s.try_submit(std::move(refused)).has_value());
  EXPECT_EQ(s.metrics().requests_deferred, 2);
  s.cancel(ia);
  for (auto& q : queued) EXPECT_EQ(q->get().tokens.size(), 2u);
  EXPECT_FALSE(called);
}

TEST(Scheduler, RequestsStartInArrivalOrder) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  Scheduler s(m, sched_params(1, 1));
  std::mutex mu;
  std::vector<int> first_token_order;
  std::vector<std::unique_ptr<Collector>> cs;
  for (int i = 0; i < 8; ++i) {
    cs.push_back(std::make_unique<Collector>());
    Request r = other(m, i);
    r.params.max_tokens = 6;
    r.params.ignore_eos = true;
    cs.back()->attach(r);
    cs.back()->on_step = [&, i](const GeneratedToken&, int step) {
      if (step == 0) {
        std::lock_guard<std::mutex> lock(mu);
        first_token_order.push_back(i);
      }
    };
    ASSERT_TRUE(s.try_submit(std::move(r)).has_value());
  }
  s.wait_idle();
  EXPECT_EQ(first_token_order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(Scheduler, LongPromptDelaysOthersByAtMostOneStep) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  Scheduler s(m, sched_params(2, 1));
  Collector a, b;
  std::vector<uint64_t> steps_at_token;
  Request rb;
  rb.prompt = prompt_of(m, std::string(kTexts[3]) + " " + kTexts[7] + " " + kTexts[1]);
  ASSERT_GT(rb.prompt.size(), 80u);
  rb.params.max_tokens = 2;
  b.attach(rb);
  a.on_step = [&](const GeneratedToken&, int step) {
    steps_at_token.push_back(s.metrics().n_decode_total);
    if (step == 2) {
      EXPECT_TRUE(s.try_submit(std::move(rb)).has_value());
    }
  };
  Request ra = endless(m);
  ra.params.max_tokens = 30;
  a.attach(ra);
  ASSERT_TRUE(s.try_submit(std::move(ra)).has_value());
  EXPECT_EQ(a.get().tokens.size(), 30u);
  b.get();
  // A token for `a` at every step, while b's prompt is prefilled 8 rows at a time.
  for (size_t i = 1; i < steps_at_token.size(); ++i) EXPECT_EQ(steps_at_token[i], steps_at_token[i - 1] + 1) << i;
}

// A conversation's first turn run to its end (greedy, 5 tokens, the turn
// closed), and the prompt of the next turn: the first prompt + the reply +
// end-of-turn + a new message.
struct FirstTurn {
  Request req;
  Reply reply;
  std::vector<token_id> next;
};
FirstTurn first_turn(Scheduler& s, const Model& m) {
  FirstTurn f;
  Collector first;
  f.req.prompt = prompt_of(m, "Once upon a time, there was a cat");
  f.req.params.sampling.temp = 0;
  f.req.params.max_tokens = 5;
  f.req.params.ignore_eos = true;
  f.req.params.close_turn = true;
  first.attach(f.req);
  EXPECT_TRUE(s.try_submit(f.req).has_value());
  f.reply = first.get();
  s.wait_idle();
  f.next = f.req.prompt;
  f.next.insert(f.next.end(), f.reply.tokens.begin(), f.reply.tokens.end());
  f.next.push_back(end_of_turn_token(m.tokenizer()));
  for (token_id t : prompt_of(m, "The dog")) f.next.push_back(t);
  return f;
}

// A conversation's next turn (seeded sampling, 8 tokens with logprobs) run
// with the prompt cache (warm), then without it (cold).
struct WarmCold {
  Reply warm, cold;
};
WarmCold warm_then_cold(Scheduler& s, const std::vector<token_id>& prompt, bool close_turn) {
  Request r;
  r.prompt = prompt;
  r.params.sampling.seed = 5;
  r.params.max_tokens = 8;
  r.params.ignore_eos = true;
  r.params.logprobs = true;
  r.params.close_turn = close_turn;
  WarmCold out;
  Collector warm, cold;
  Request rw = r;
  warm.attach(rw);
  EXPECT_TRUE(s.try_submit(std::move(rw)).has_value());
  out.warm = warm.get();
  s.wait_idle();
  Request rc = r;
  rc.cache_prompt = false;
  cold.attach(rc);
  EXPECT_TRUE(s.try_submit(std::move(rc)).has_value());
  out.cold = cold.get();
  s.wait_idle();
  return out;
}

TEST(Scheduler, PromptCacheAndCloseTurnAndMetrics) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  Scheduler s(m, sched_params(2, 1));
  const FirstTurn f = first_turn(s, m);
  const Request& r1 = f.req;
  const Reply& a = f.reply;
  const std::vector<token_id>& turn2 = f.next;
  const WarmCold r2 = warm_then_cold(s, turn2, false);
  const Reply& w = r2.warm;
  EXPECT_EQ(w.n_cached, static_cast<int64_t>(r1.prompt.size() + a.tokens.size() + 1));
  EXPECT_EQ(w.slot, a.slot);
  EXPECT_EQ(r2.cold.n_cached, 0);
  expect_same_bytes(r2.cold, w, "cache hit against miss");
  const SchedulerMetrics mt = s.metrics();
  EXPECT_EQ(mt.requests_total, 3u);
  EXPECT_EQ(mt.cached_tokens_total, static_cast<uint64_t>(w.n_cached));
  EXPECT_EQ(mt.prompt_tokens_total, r1.prompt.size() + 2 * turn2.size() - static_cast<uint64_t>(w.n_cached));
  EXPECT_EQ(mt.tokens_predicted_total, 5u + 8u + 8u);
  EXPECT_EQ(mt.kv_cells_total, 2 * 256);  // -c: the pool both slots share
  EXPECT_EQ(mt.kv_cells_used, 0);
}

// A hybrid model (Qwen3.5's DeltaNet layers, whose recurrent state cannot be
// cut back to any position): the next turn of a conversation, which extends
// the whole cached sequence, reuses all of it; a prompt that shares only the
// first prompt (a branch, or a template that re-renders the reply) goes back
// to the snapshot taken at the end of that prompt (issue 50 item 4), all but
// its last token; a prompt sharing less than that starts from 0. Each
// replies as a cold run does, byte for byte. The snapshots' state is in the
// metrics.
TEST(Scheduler, HybridModelReusesTheSnapshotAtTheEndOfThePrompt) {
  const Model m = Model::load(data_path("models/tiny-qwen35-q8_0.gguf"));
  Scheduler s(m, sched_params(1, 1));
  const FirstTurn f = first_turn(s, m);
  const Request& r1 = f.req;
  const Reply& a = f.reply;
  const std::vector<token_id>& turn2 = f.next;
  // 4 DeltaNet layers x (3 x 256 conv inputs + 4 heads x 32 x 32) floats: the one snapshot.
  EXPECT_EQ(s.metrics().snapshot_bytes, uint64_t{4} * (3 * 256 + 4 * 32 * 32) * sizeof(float));
  std::vector<token_id> branch = r1.prompt;
  for (token_id t : prompt_of(m, "The dog")) branch.push_back(t);
  std::vector<token_id> early(r1.prompt.begin(), r1.prompt.begin() + 3);
  for (token_id t : prompt_of(m, "A bird")) early.push_back(t);
  ASSERT_GT(r1.prompt.size(), 4u);
  for (const auto& [prompt, want_cached] :
       {std::make_pair(turn2, static_cast<int64_t>(r1.prompt.size() + a.tokens.size() + 1)),
        std::make_pair(branch, static_cast<int64_t>(r1.prompt.size() - 1)), std::make_pair(early, int64_t{0})}) {
    const WarmCold r2 = warm_then_cold(s, prompt, true);
    EXPECT_EQ(r2.warm.n_cached, want_cached);
    EXPECT_EQ(r2.cold.n_cached, 0);
    EXPECT_FALSE(r2.warm.tokens.empty());
    expect_same_bytes(r2.cold, r2.warm, "hybrid: cache against cold");
    // Back to r1's conversation for the next prompt.
    Collector again;
    Request r1b = r1;
    r1b.cache_prompt = false;
    again.attach(r1b);
    ASSERT_TRUE(s.try_submit(std::move(r1b)).has_value());
    EXPECT_EQ(again.get().tokens, a.tokens);
    s.wait_idle();
  }
}

// issue 26: a reply cut by a disconnect (cancel) still ends its turn in the
// cache, so the conversation's next request reuses all of it.
TEST(Scheduler, CancelledReplyClosesItsTurn) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  Scheduler s(m, sched_params(1, 1));
  Collector a;
  RequestId id = 0;
  std::future<void> streaming = a.reached(3);
  Request r1 = endless(m);
  r1.params.close_turn = true;
  a.attach(r1);
  id = *s.try_submit(r1);
  streaming.wait();
  s.cancel(id);
  const Reply got = a.get();
  EXPECT_EQ(got.finish, FinishReason::cancelled);
  s.wait_idle();
  std::vector<token_id> turn2 = r1.prompt;
  turn2.insert(turn2.end(), got.tokens.begin(), got.tokens.end());
  turn2.push_back(end_of_turn_token(m.tokenizer()));
  turn2.push_back(13);
  EXPECT_EQ(s.metrics().kv_cells_cached, static_cast<int64_t>(turn2.size() - 1));
  Collector b;
  Request r2 = endless(m);
  r2.prompt = turn2;
  r2.params.max_tokens = 2;
  b.attach(r2);
  ASSERT_TRUE(s.try_submit(std::move(r2)).has_value());
  EXPECT_EQ(b.get().n_cached, static_cast<int64_t>(turn2.size() - 1));
}

TEST(Scheduler, RefusesBadRequests) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  SchedulerParams p = sched_params(1, 1);
  p.n_ctx = 8;
  Scheduler s(m, p);
  Request empty;
  EXPECT_THROW(s.try_submit(empty), Error);
  Request longer;
  longer.prompt.assign(9, 1);
  try {
    s.try_submit(longer);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("9 tokens"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("n_ctx 8"), std::string::npos) << e.what();
  }
  Request bad_id;
  bad_id.prompt = {1, 600};
  EXPECT_THROW(s.try_submit(bad_id), Error);
  Request bad_bias;
  bad_bias.prompt = {1};
  bad_bias.params.sampling.logit_bias = {{512, 1.0f}};
  EXPECT_THROW(s.try_submit(bad_bias), Error);
  Request bad_param;
  bad_param.prompt = {1};
  bad_param.params.sampling.penalty_last_n = -2;
  EXPECT_THROW(s.try_submit(bad_param), Error);
  EXPECT_EQ(s.metrics().requests_total, 0u);
  SchedulerParams zero = sched_params(0, 1);
  EXPECT_THROW({ Scheduler bad(m, zero); }, Error);
  SchedulerParams sim = sched_params(1, 1);
  sim.slot_prompt_similarity = 1.5f;
  EXPECT_THROW({ Scheduler bad(m, sim); }, Error);
}

// A request that generates for as long as it is let: each step takes at
// least 2 ms (its callback sleeps), so that 256 positions last 0.5 s or more.
Request slow_endless(const Model& m, Collector& c) {
  Request r = endless(m);
  c.attach(r);
  r.on_token = [collect = r.on_token](const GeneratedToken& t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return collect(t);
  };
  return r;
}

TEST(Scheduler, QueuedPastItsDeadlineNeverTakesASlot) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  Scheduler s(m, sched_params(1, 1));
  Collector a, b, c;
  Request ra = slow_endless(m, a);
  std::future<void> running = a.reached(2);
  const RequestId ia = *s.try_submit(std::move(ra));
  running.wait();
  const uint64_t prompt_tokens = s.metrics().prompt_tokens_total;
  Request rb = endless(m);
  rb.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  b.attach(rb);
  ASSERT_TRUE(s.try_submit(std::move(rb)).has_value());  // waits: the one slot is a's
  const Reply got = b.get();
  EXPECT_FALSE(a.finished());  // b ended while a still ran: b never had the slot
  EXPECT_EQ(got.finish, FinishReason::cancelled);
  EXPECT_TRUE(got.deadline_passed);
  EXPECT_EQ(got.slot, -1);
  EXPECT_TRUE(got.tokens.empty());
  EXPECT_TRUE(got.step_texts.empty());
  EXPECT_GT(got.step, 0u);
  // Past its deadline when submitted: it ends before it is admitted, also
  // with a slot free.
  s.cancel(ia);
  a.get();
  s.wait_idle();
  Request rc = endless(m);
  rc.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  c.attach(rc);
  ASSERT_TRUE(s.try_submit(std::move(rc)).has_value());
  const Reply late = c.get();
  EXPECT_EQ(late.finish, FinishReason::cancelled);
  EXPECT_TRUE(late.deadline_passed);
  EXPECT_EQ(late.slot, -1);
  s.wait_idle();
  EXPECT_EQ(s.metrics().prompt_tokens_total, prompt_tokens);  // neither prompt was computed
  EXPECT_EQ(s.metrics().kv_cells_used, 0);
}

TEST(Scheduler, RunningPastItsDeadlineEndsWithLength) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  Scheduler s(m, sched_params(1, 1));
  Collector a;
  Request ra = slow_endless(m, a);
  const auto t0 = std::chrono::steady_clock::now();
  ra.deadline = t0 + std::chrono::milliseconds(100);
  ASSERT_TRUE(s.try_submit(std::move(ra)).has_value());
  const Reply got = a.get();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(got.finish, FinishReason::length);
  EXPECT_TRUE(got.deadline_passed);
  EXPECT_FALSE(got.context_full);
  EXPECT_EQ(got.slot, 0);
  // Cut by the deadline: at 2 ms a token about 50 come before it, where a
  // request that ran on would fill its 256 positions (context_full; a
  // prefill crossing the deadline on a loaded machine may leave none). The
  // time is the deadline, then one step; 2 s leaves a loaded sanitized run
  // its slow steps.
  EXPECT_LT(got.tokens.size(), 200u);
  EXPECT_GE(took, std::chrono::milliseconds(100));
  EXPECT_LT(took, std::chrono::milliseconds(2000));
  s.wait_idle();
  EXPECT_EQ(s.metrics().kv_cells_used, 0);
}

TEST(Scheduler, DrainEndsEveryRequestByItsDeadline) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  Scheduler s(m, sched_params(2, 1));
  Collector a, b, q;
  Request ra = slow_endless(m, a), rb = slow_endless(m, b);
  rb.params.max_tokens = 3;  // ends by itself before the drain's deadline
  std::future<void> running = a.reached(2);
  ASSERT_TRUE(s.try_submit(std::move(ra)).has_value());
  ASSERT_TRUE(s.try_submit(std::move(rb)).has_value());
  running.wait();
  Request rq = endless(m);
  q.attach(rq);
  Request rq2 = endless(m);
  rq2.params.max_tokens = 1;
  ASSERT_TRUE(s.try_submit(std::move(rq)).has_value());  // waits if b still holds its slot
  const auto t0 = std::chrono::steady_clock::now();
  s.drain(t0 + std::chrono::milliseconds(150));
  EXPECT_FALSE(s.try_submit(std::move(rq2)).has_value());  // refused from now on
  EmbeddingRequest e;
  e.inputs = {prompt_of(m, "Once")};
  EXPECT_FALSE(s.try_submit_embedding(std::move(e)).has_value());
  const Reply ga = a.get();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(ga.finish, FinishReason::length);
  EXPECT_TRUE(ga.deadline_passed);
  EXPECT_GE(took, std::chrono::milliseconds(150));
  EXPECT_LT(took, std::chrono::milliseconds(500));
  const Reply gb = b.get();
  EXPECT_EQ(gb.tokens.size(), 3u);
  EXPECT_FALSE(gb.deadline_passed);
  const Reply gq = q.get();
  // Still waiting at the drain (dropped at once, never a slot), or admitted
  // when b ended just before it and then cut with a.
  if (gq.slot < 0) EXPECT_EQ(gq.finish, FinishReason::cancelled);
  else EXPECT_EQ(gq.finish, FinishReason::length);
  EXPECT_TRUE(gq.deadline_passed);
  s.wait_idle();
  const SchedulerMetrics mt = s.metrics();
  EXPECT_EQ(mt.requests_processing, 0);
  EXPECT_EQ(mt.requests_deferred, 0);
}

TEST(Scheduler, TMaxPredictMsEndsAtANewline) {
  const Model m = Model::load(data_path("models/stories260K.gguf"));
  Scheduler s(m, sched_params(1, 1));
  Collector a;
  Request ra = slow_endless(m, a);
  ra.t_max_predict_ms = 20;
  ASSERT_TRUE(s.try_submit(std::move(ra)).has_value());
  const Reply got = a.get();
  EXPECT_EQ(got.finish, FinishReason::length);
  EXPECT_FALSE(got.deadline_passed);
  EXPECT_FALSE(got.context_full);
  // llama-server's rule: the first step with a newline after 20 ms ends it,
  // that step included (the steps take 2 ms or more: 10 of them are 20 ms).
  ASSERT_GE(got.step_texts.size(), 11u);
  size_t last = got.step_texts.size() - 1;
  if (got.step_texts[last].empty()) --last;  // the closing step (held-back text) may be empty
  EXPECT_NE(got.step_texts[last].find('\n'), std::string::npos) << got.text;
  EXPECT_NE(got.text.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace synapse

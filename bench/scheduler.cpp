// The serving runtime's throughput without HTTP: one request alone, then N
// requests submitted at once to a Scheduler with -np N, each generating the
// same number of tokens (EOG ignored) from its own prompt. Prints generated
// tokens per second for both, their ratio, and the time to first token.
// First it times bare decode steps on a Context (no scheduler): one row of
// one sequence against one row of each of N sequences (the batch a step of N
// generating slots makes), each sequence holding a 32-token prompt.
//
//   bench_scheduler MODEL.gguf [N=16] [THREADS=2] [TOKENS=64]
//   TOKENS 0: the decode step costs only; -1: and steps of N decode rows with
//   0-240 prompt rows beside them; -LEN: and prefill steps of N prompts of LEN
//   tokens in one batch against one alone. Env REPS: decode steps timed per
//   size (default 9; more to profile them with perf record). Env GRAMMAR=FILE:
//   every request constrained by that GBNF grammar.
//
// Run it alone on the machine (flock /work/bench.lock ...): every number is
// wall-clock time.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "synapse/scheduler.hpp"
#include "synapse/synapse.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Run {
  double seconds = 0;
  int64_t tokens = 0;
  std::vector<double> ttft_ms;
};

// Env GRAMMAR=FILE: every request is constrained by that GBNF grammar (the
// cost of the token mask in a serving step; issue 42). Read once.
const std::string& grammar_text() {
  static const std::string text = [] {
    const char* path = std::getenv("GRAMMAR");
    if (!path || !*path) return std::string();
    std::FILE* f = std::fopen(path, "rb");
    if (!f) {
      std::fprintf(stderr, "bench_scheduler: cannot open GRAMMAR=%s\n", path);
      std::exit(2);
    }
    std::string t;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) t.append(buf, n);
    std::fclose(f);
    return t;
  }();
  return text;
}

Run serve(synapse::Scheduler& s, int n, int n_tokens) {
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  Run run;
  run.ttft_ms.assign(static_cast<size_t>(n), 0);
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    synapse::Request r;
    const std::string text = "Request " + std::to_string(i) + ": tell me a story about the number " +
                             std::to_string(i * 7919) + " and a cat.";
    r.prompt = s.model().tokenizer().tokenize(text, true, false);
    r.params.max_tokens = n_tokens;
    r.params.ignore_eos = true;
    r.params.sampling.seed = static_cast<uint32_t>(i);
    r.params.sampling.grammar = grammar_text();
    r.on_token = [&, i, first = true](const synapse::GeneratedToken&) mutable {
      if (first) run.ttft_ms[static_cast<size_t>(i)] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      first = false;
      return true;
    };
    r.on_done = [&](const synapse::GenerationResult& g) {
      std::lock_guard<std::mutex> lock(mu);
      run.tokens += static_cast<int64_t>(g.tokens.size());
      ++done;
      cv.notify_all();
    };
    if (!s.try_submit(std::move(r))) {
      std::fprintf(stderr, "refused\n");
      return run;
    }
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done == n; });
  run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return run;
}

// Milliseconds per decode step: the median of `reps` steps of one row in
// each of seqs[0, n).
double step_ms(synapse::Context& ctx, std::vector<synapse::Sequence>& seqs, int n, int reps) {
  std::vector<double> ms;
  synapse::Batch b;
  for (int r = 0; r < reps; ++r) {
    b.clear();
    for (int i = 0; i < n; ++i) b.add(seqs[static_cast<size_t>(i)], 100 + r, true);
    const auto t0 = Clock::now();
    ctx.decode(b);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void step_costs(const synapse::Model& model, int n, int threads) {
  synapse::Context ctx(model, threads);
  std::vector<synapse::Sequence> seqs;
  std::vector<synapse::token_id> prompt(32);
  for (size_t k = 0; k < prompt.size(); ++k) prompt[k] = static_cast<synapse::token_id>(10 + 3 * k);
  for (int i = 0; i < n; ++i) {
    seqs.push_back(ctx.new_sequence(256));
    ctx.decode(seqs.back(), prompt);
  }
  const int reps = std::max(1, std::getenv("REPS") ? std::atoi(std::getenv("REPS")) : 9);
  const double one = step_ms(ctx, seqs, 1, reps);
  const double many = step_ms(ctx, seqs, n, reps);
  std::printf("decode step: 1 row %.1f ms, %d rows %.1f ms (%.2fx one row)\n", one, n, many, many / one);
}

// Prefill steps: one prompt of `len` tokens alone, then one step holding a
// prompt of `len` tokens for each of n fresh sequences (a cold round's first
// step with n_batch >= n * len); the median of `reps`, as prompt tokens per
// second.
void prefill_costs(const synapse::Model& model, int n, int threads, int len, int reps) {
  synapse::Context ctx(model, threads);
  auto rate = [&](int n_seq) {
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      std::vector<synapse::Sequence> seqs;
      for (int i = 0; i < n_seq; ++i) seqs.push_back(ctx.new_sequence(512));
      synapse::Batch b;
      for (int i = 0; i < n_seq; ++i)
        for (int k = 0; k < len; ++k)
          b.add(seqs[static_cast<size_t>(i)], static_cast<synapse::token_id>(10 + 7 * i + 3 * k), k + 1 == len);
      const auto t0 = Clock::now();
      ctx.decode(b);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const double rows = static_cast<double>(n_seq) * len;
    return std::pair<double, double>(rows / (ms[ms.size() / 2] / 1e3), rows / (ms[0] / 1e3));
  };
  const auto one = rate(1);
  const auto many = rate(n);
  std::printf("prefill step (median, best of %d): 1 x %d rows %.1f, %.1f t/s; %d x %d rows %.1f, %.1f t/s (%.2fx, %.2fx)\n",
              reps, len, one.first, one.second, n, len, many.first, many.second, many.first / one.first,
              many.second / one.second);
}

// A decode step of n rows (one per generating sequence) with `extra` prompt
// rows of one more sequence in the same batch (a step that mixes a prefill
// chunk into the decode rows): milliseconds, the median of `reps`, for each
// value of `extra`; the prompt rows' marginal cost is what they add to the
// decode rows alone.
void mixed_costs(const synapse::Model& model, int n, int threads, int reps) {
  synapse::Context ctx(model, threads);
  std::vector<synapse::Sequence> seqs;
  std::vector<synapse::token_id> prompt(176);
  for (size_t k = 0; k < prompt.size(); ++k) prompt[k] = static_cast<synapse::token_id>(10 + 3 * k);
  for (int i = 0; i < n; ++i) {
    seqs.push_back(ctx.new_sequence(512));
    ctx.decode(seqs.back(), prompt);
  }
  synapse::Sequence fresh = ctx.new_sequence(512);
  double base = 0;
  for (const int extra : {0, 16, 48, 112, 240}) {
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      for (synapse::Sequence& s : seqs) s.truncate(176);
      fresh.clear();
      synapse::Batch b;
      for (int i = 0; i < n; ++i) b.add(seqs[static_cast<size_t>(i)], 100 + r, true);
      for (int k = 0; k < extra; ++k) b.add(fresh, static_cast<synapse::token_id>(20 + k), k + 1 == extra);
      const auto t0 = Clock::now();
      ctx.decode(b);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const double t = ms[ms.size() / 2];
    if (extra == 0) base = t;
    std::printf("mixed step: %d decode rows + %3d prompt rows %.1f ms (prompt rows %.2f ms each)\n", n, extra, t,
                extra ? (t - base) / extra : 0.0);
  }
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [N=16] [THREADS=2] [TOKENS=64]\n", argv[0]);
    return 2;
  }
  try {
    const int n = argc > 2 ? std::stoi(argv[2]) : 16;
    const int threads = argc > 3 ? std::stoi(argv[3]) : 2;
    const int n_tokens = argc > 4 ? std::stoi(argv[4]) : 64;
    const synapse::Model model = synapse::Model::load(argv[1]);
    step_costs(model, n, threads);
    if (n_tokens == -1) {  // -1: mixed steps only
      mixed_costs(model, n, threads, 5);
      return 0;
    }
    if (n_tokens < 0) {  // -LEN: prefill steps of LEN-token prompts only
      prefill_costs(model, n, threads, -n_tokens, 3);
      return 0;
    }
    if (n_tokens == 0) return 0;  // the step costs only
    synapse::SchedulerParams p;
    p.n_parallel = n;
    p.n_threads = threads;
    p.n_ctx = 256 * static_cast<int64_t>(n);  // the pool all slots share: 256 positions each
    synapse::Scheduler s(model, p);
    const Run one = serve(s, 1, n_tokens);
    const Run many = serve(s, n, n_tokens);
    const double t1 = static_cast<double>(one.tokens) / one.seconds, tn = static_cast<double>(many.tokens) / many.seconds;
    std::printf("1 client: %.2f t/s, ttft %.0f ms\n", t1, one.ttft_ms[0]);
    std::printf("%d clients: %.2f t/s aggregate (%.2fx), ttft p50 %.0f ms p99 %.0f ms\n", n, tn, tn / t1,
                percentile(many.ttft_ms, 0.5), percentile(many.ttft_ms, 0.99));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

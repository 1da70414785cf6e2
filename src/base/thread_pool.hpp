// A persistent pool of worker threads with one primitive, parallel_for.
//
// Work is split by output rows or heads, never inside a reduction, so every
// result is bit-identical for any thread count (DESIGN.md contract 2).
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <mutex>
#include <thread>
#include <vector>

namespace synapse::base {

// The most threads a pool takes: ggml's GGML_MAX_N_THREADS. More than this
// is a typo or a misunderstanding, not a machine (and each thread costs a
// stack and a process-table slot).
inline constexpr int kMaxThreads = 512;

// A reference to what parallel_for runs: any callable taking (begin, end),
// not owned, never copied. Unlike a std::function it allocates nothing (a
// std::function holds a lambda of more than two captures on the heap, and a
// decode step runs hundreds of jobs). The callable must outlive the
// reference: a temporary passed to parallel_for does, as the call returns
// first.
class RangeFn {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeFn>>>
  RangeFn(F&& fn) noexcept  // NOLINT(google-explicit-constructor): lambdas convert as to std::function
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(fn)))),
        call_([](void* obj, int64_t begin, int64_t end) {
          (*static_cast<std::remove_reference_t<F>*>(obj))(begin, end);
        }) {}
  void operator()(int64_t begin, int64_t end) const { call_(obj_, begin, end); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int64_t);
};

class ThreadPool {
 public:
  // n_threads in [1, kMaxThreads] (values below 1 mean 1; the caller's thread
  // counts as one; n_threads - 1 workers are started once and live until
  // destruction). Throws Error(invalid_argument) for n_threads > kMaxThreads,
  // Error(resource) naming the count when the system refuses to create a
  // worker (the workers already started are stopped and joined first).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n), in parallel;
  // returns when all are done. Ranges are contiguous chunks whose length is
  // a multiple of `grain` (the last may be shorter), handed out to the
  // threads as they become free, longest first (guided: about a 1/(2T) share
  // of what is left each), so a thread slowed by another process does not
  // hold the others back and the threads finish close together. Which thread runs a range never changes
  // a result: callers split by output element. Exceptions from fn are
  // rethrown in the caller (the first one).
  void parallel_for(int64_t n, int64_t grain, RangeFn fn);

 private:
  void worker();
  void stop_workers();  // sets stop_, wakes and joins every worker
  void run_chunks();

  int n_threads_;
  std::vector<std::thread> workers_;
  // A job is published by bumping generation_ (release); workers spin on it
  // for a short while (a decode step issues hundreds of small jobs per
  // token), then sleep on cv_work_.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_{0};    // first index not yet handed out
  std::atomic<int> running_{0};     // workers not yet done with the job
  std::atomic<bool> stop_{false};
  const RangeFn* job_ = nullptr;
  int64_t job_n_ = 0, job_grain_ = 1, job_chunk_ = 0;  // job_chunk_: the smallest chunk
  std::mutex mu_;  // guards error_ and the sleeps on the condition variables
  std::condition_variable cv_work_, cv_done_;
  std::exception_ptr error_;
};

int default_thread_count();

}  // namespace synapse::base

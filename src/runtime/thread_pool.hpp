// A persistent pool of worker threads with one primitive, parallel_for.
//
// Work is split by output rows or heads, never inside a reduction, so every
// result is bit-identical for any thread count (DESIGN.md contract 2).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace synapse::runtime {

class ThreadPool {
 public:
  // n_threads >= 1 (the caller's thread counts as one; n_threads - 1 workers
  // are started once and live until destruction).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n), in parallel;
  // returns when all are done. Ranges are contiguous chunks of at least
  // `grain` items. Exceptions from fn are rethrown in the caller (the first).
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0;
  std::exception_ptr error_;
};

// Physical cores of this machine (a guess from hardware_concurrency and SMT
// siblings in /sys); at least 1.
int default_thread_count();

}  // namespace synapse::runtime

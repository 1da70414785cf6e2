#include "runtime/thread_pool.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>

namespace synapse::runtime {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n, chunk;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      chunk = job_chunk_;
    }
    const int64_t begin = std::min(n, index * chunk), end = std::min(n, begin + chunk);
    std::exception_ptr err;
    if (begin < end) {
      try {
        (*job)(begin, end);
      } catch (...) {
        err = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (err && !error_) error_ = err;
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_parts = (n + grain - 1) / grain;
  if (n_threads_ == 1 || max_parts == 1) {
    fn(0, n);
    return;
  }
  const int64_t parts = std::min<int64_t>(n_threads_, max_parts);
  const int64_t chunk = (n + parts - 1) / parts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    pending_ = n_threads_ - 1;
    error_ = nullptr;
    ++generation_;
  }
  cv_work_.notify_all();
  std::exception_ptr mine;
  try {
    fn(0, std::min(n, chunk));
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

int default_thread_count() {
  // Count distinct (package, core) pairs; fall back to hardware_concurrency.
  std::set<std::string> cores;
  const unsigned hc = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned cpu = 0; cpu < hc; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream pkg(base + "physical_package_id"), core(base + "core_id");
    std::string p, c;
    if (!(pkg >> p) || !(core >> c)) return static_cast<int>(hc);
    cores.insert(p + ":" + c);
  }
  return std::max<int>(1, static_cast<int>(cores.size()));
}

}  // namespace synapse::runtime

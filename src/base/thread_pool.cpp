#include "base/thread_pool.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <system_error>

#include "synapse/error.hpp"

namespace synapse::base {

namespace {

// Spin iterations before a thread sleeps: about 50-100 microseconds, longer
// than the gap between two jobs of a decode step, far shorter than a
// scheduler time slice.
constexpr int kSpins = 4000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  if (n_threads_ > kMaxThreads)
    throw Error(Errc::invalid_argument, "threads: " + std::to_string(n_threads_) + " is more than the most, " +
                                            std::to_string(kMaxThreads) + " (ggml's GGML_MAX_N_THREADS)");
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) {
    try {
      workers_.emplace_back([this] { worker(); });
    } catch (const std::system_error& e) {
      // The destructor does not run for a constructor that throws: stop and
      // join the workers made so far here (leaving them would deadlock or
      // terminate).
      stop_workers();
      throw Error(Errc::resource, "threads: the system refused to create thread " + std::to_string(i + 1) +
                                      " of " + std::to_string(n_threads_) + " (" + e.what() + "); use fewer (-t)");
    }
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

// Takes chunks of the current job until none is left. Guided sizes (as
// OpenMP's schedule(guided)): each chunk is about 1 / (2 n_threads) of what
// is left, in whole grains, at least job_chunk_, so the first chunks are
// long (one stream of rows per thread) and the last ones short: the
// threads finish within about one short chunk of each other whatever the
// number of grains (a fixed chunk left one thread a whole extra chunk when
// the chunk count was odd).
void ThreadPool::run_chunks() {
  const int64_t n = job_n_, grain = job_grain_, min_chunk = job_chunk_, split = 2 * static_cast<int64_t>(n_threads_);
  int64_t begin = next_.load(std::memory_order_relaxed);
  for (;;) {
    if (begin >= n) return;
    const int64_t guided = (n - begin) / split / grain * grain;
    const int64_t len = std::max(min_chunk, guided);
    if (!next_.compare_exchange_weak(begin, begin + len, std::memory_order_relaxed)) continue;
    (*job_)(begin, std::min(n, begin + len));
    begin = next_.load(std::memory_order_relaxed);
  }
}

void ThreadPool::worker() {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && !stop_.load(std::memory_order_acquire)) {
      if (++spins < kSpins) {
        cpu_relax();
        continue;
      }
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] {
        return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
      });
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    try {
      run_chunks();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      next_.store(job_n_, std::memory_order_relaxed);  // hand out nothing more
    }
    if (running_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, RangeFn fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_parts = (n + grain - 1) / grain;
  if (n_threads_ == 1 || max_parts == 1) {
    fn(0, n);
    return;
  }
  // Chunks shrink from about n / (2 n_threads) down to the smallest chunk,
  // which is one grain or 1/32 of the job per thread, whichever is longer
  // (run_chunks): short enough to even out the threads at the end, long
  // enough that handing out costs nothing.
  const int64_t min_grains = std::max<int64_t>(1, max_parts / (32 * static_cast<int64_t>(n_threads_)));
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  job_chunk_ = min_grains * grain;
  error_ = nullptr;
  next_.store(0, std::memory_order_relaxed);
  running_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // Under the mutex, so that a worker between its check and its wait
    // cannot miss the wake-up.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_work_.notify_all();
  std::exception_ptr mine;
  try {
    run_chunks();
  } catch (...) {
    mine = std::current_exception();
    next_.store(n, std::memory_order_relaxed);
  }
  for (int spins = 0; running_.load(std::memory_order_acquire) != 0 && spins < kSpins; ++spins) cpu_relax();
  if (running_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [&] { return running_.load(std::memory_order_acquire) == 0; });
  }
  job_ = nullptr;
  if (mine) std::rethrow_exception(mine);
  std::lock_guard<std::mutex> lock(mu_);
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

}  // namespace synapse::base

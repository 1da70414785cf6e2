// base::ThreadPool::parallel_for: every index handed out exactly once, in
// ranges that start on a grain and are whole grains but for the last, for
// many job sizes, grains and thread counts; exceptions reach the caller; a
// thread count past ggml's 512 or one the system refuses is an Error, not a
// hang.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "base/thread_pool.hpp"
#include "synapse/error.hpp"

namespace synapse::base {
namespace {

TEST(ThreadPool, CoversEveryIndexOnceInWholeGrains) {
  const int64_t sizes[] = {0, 1, 2, 5, 31, 32, 33, 100, 896, 1000, 4864, 151936};
  const int64_t grains[] = {1, 4, 16, 32};
  for (int threads = 1; threads <= 4; ++threads) {
    ThreadPool pool(threads);
    for (int64_t n : sizes)
      for (int64_t grain : grains) {
        std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
        std::mutex mu;
        std::vector<std::pair<int64_t, int64_t>> ranges;
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
          std::lock_guard<std::mutex> lock(mu);
          ranges.emplace_back(b, e);
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "index " << i << " n " << n << " grain " << grain;
        for (const auto& [b, e] : ranges) {
          ASSERT_LT(b, e) << "empty range, n " << n;
          ASSERT_EQ(b % grain, 0) << "range [" << b << ", " << e << ") n " << n << " grain " << grain;
          if (e != n) {
            ASSERT_EQ((e - b) % grain, 0) << "range [" << b << ", " << e << ") n " << n;
          }
        }
        if (n > 0 && threads == 1) {
          ASSERT_EQ(ranges.size(), 1u);  // one thread: one call
        }
      }
  }
}

// With several threads the first ranges are long and the last short
// (guided hand-out): the largest range of a big job holds a sizeable share.
TEST(ThreadPool, HandsOutLongRangesFirst) {
  ThreadPool pool(2);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  const int64_t n = 4096 * 32;
  pool.parallel_for(n, 32, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    ranges.emplace_back(b, e);
  });
  int64_t longest = 0, shortest = n;
  for (const auto& [b, e] : ranges) {
    longest = std::max(longest, e - b);
    shortest = std::min(shortest, e - b);
  }
  EXPECT_GE(longest, n / 8);  // about n / (2 * threads) at the start
  EXPECT_LE(shortest, n / 32);
  EXPECT_LE(ranges.size(), 64u);
}

TEST(ThreadPool, RethrowsTheFirstException) {
  for (int threads = 1; threads <= 3; ++threads) {
    ThreadPool pool(threads);
    EXPECT_THROW(pool.parallel_for(1000, 1,
                                   [&](int64_t b, int64_t e) {
                                     if (b <= 500 && 500 < e) throw std::runtime_error("boom");
                                   }),
                 std::runtime_error);
    // The pool still works afterwards.
    std::atomic<int64_t> sum{0};
    pool.parallel_for(100, 7, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
    EXPECT_EQ(sum.load(), 4950);
  }
}

TEST(ThreadPool, RefusesMoreThanGgmlsMaximum) {
  try {
    ThreadPool pool(100000);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("100000"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("512"), std::string::npos) << e.what();
  }
  ThreadPool most(kMaxThreads);  // the maximum itself is allowed
  EXPECT_EQ(most.n_threads(), 512);
}

// Under an address-space limit that leaves room for a few thread stacks, not
// 100, the constructor must throw (after joining the threads it made), not
// hang. Runs in a child process, which the parent kills after 30 s.
TEST(ThreadPool, ThrowsWhenTheSystemRefusesAThread) {
#if defined(__SANITIZE_ADDRESS__) || SYNAPSE_TEST_SANITIZED  // (the test files themselves are not instrumented)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space; RLIMIT_AS cannot be set under it";
#else
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    long vm_kb = 0;
    std::ifstream status("/proc/self/status");
    for (std::string key; status >> key;)
      if (key == "VmSize:") status >> vm_kb;
    const rlim_t limit = static_cast<rlim_t>(vm_kb + 64 * 1024) * 1024;  // 64 MiB beyond what is mapped
    const rlimit rl{limit, limit};
    if (vm_kb == 0 || setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
    try {
      ThreadPool pool(100);  // 99 stacks of >= 2 MiB each cannot fit
      _exit(1);
    } catch (const Error& e) {
      _exit(e.code() == Errc::resource && std::string(e.what()).find("of 100") != std::string::npos ? 0 : 2);
    } catch (...) {
      _exit(2);
    }
  }
  int status = 0;
  for (int waited_ms = 0; waitpid(pid, &status, WNOHANG) == 0; waited_ms += 10) {
    if (waited_ms > 30000) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "ThreadPool(100) hung under an address-space limit";
    }
    usleep(10000);
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: no error, 2: the wrong error, 3: setrlimit failed";
#endif
}

}  // namespace
}  // namespace synapse::base

// Memory read-bandwidth probe: the bound that decode speed is measured
// against (issue 6: bound = read bandwidth / bytes streamed per token).
//
// Each of `threads` threads first writes (so its pages are placed near it,
// first touch) and then repeatedly sums its own contiguous slice of one
// buffer of `bytes` bytes; a pass's bandwidth is bytes / wall time of the
// slowest thread; the result is the best pass, in GB/s (1e9 bytes/s). The sum
// uses four independent 64-bit accumulators so the loop is load-bound, not
// add-latency-bound, and its result is consumed so it cannot be optimised out.
//
// Header-only so both bench/bandwidth.cpp (bench_bandwidth) and
// `synapse bench --bw auto` use the same probe.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "quant/simd.hpp"
#include "base/huge_pages.hpp"

namespace synapse::bench {

// Sums n 64-bit words (the load stream), asking for each cache line
// `ahead` words ahead into L1 and, when `far` is not 0, `far` words ahead
// into L2, as the decode kernels do (quant::prefetch_ahead_bytes,
// prefetch_far_bytes): the hardware prefetchers alone stop at 4 KiB pages,
// and without a prefetch the probe read less than the kernels streamed, so
// it was no bound (docs/PERFORMANCE.md, "Measurements moved out of the code").
inline uint64_t sum_words(const uint64_t* p, size_t n, size_t ahead, size_t far) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __builtin_prefetch(p + i + ahead, 0, 3);  // (into L1) a prefetch past the end does not fault
    if (far != 0) __builtin_prefetch(p + i + far, 0, 2);  // (into L2)
    a += p[i] + p[i + 4];
    b += p[i + 1] + p[i + 5];
    c += p[i + 2] + p[i + 6];
    d += p[i + 3] + p[i + 7];
  }
  for (; i < n; ++i) a += p[i];
  return a + b + c + d;
}

// Best read bandwidth in GB/s over `passes` passes. threads >= 1, bytes >= 1 MiB.
// Throws std::invalid_argument for other values, std::bad_alloc when the
// buffer cannot be allocated.
inline double read_bandwidth_gbps(int threads, size_t bytes, int passes) {
  if (threads < 1 || bytes < (1u << 20) || passes < 1)
    throw std::invalid_argument("bandwidth probe: threads >= 1, bytes >= 1 MiB, passes >= 1");
  const size_t words = bytes / sizeof(uint64_t);
  // In 2 MiB pages where the kernel grants them, as the engine's weight
  // copies are (base::huge_page_alloc): the probe reads memory of the kind
  // the decode reads. Not initialised: each thread touches its own slice.
  const size_t n_bytes = words * sizeof(uint64_t);
  const auto release = [n_bytes](uint64_t* p) { base::huge_page_free(p, n_bytes); };
  std::unique_ptr<uint64_t[], decltype(release)> buf(static_cast<uint64_t*>(base::huge_page_alloc(n_bytes)),
                                                     release);
  const size_t per = (words + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  const size_t ahead = static_cast<size_t>(quant::prefetch_ahead_bytes()) / sizeof(uint64_t);
  const size_t far = static_cast<size_t>(quant::prefetch_far_bytes()) / sizeof(uint64_t);
  std::atomic<uint64_t> sink{0};
  double best = 0;
  // Pass -1 writes (first touch); passes 0.. read.
  for (int pass = -1; pass < passes; ++pass) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    std::vector<double> secs(static_cast<size_t>(threads), 0.0);
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        const size_t b = std::min(words, per * static_cast<size_t>(t)), e = std::min(words, b + per);
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        const auto t0 = std::chrono::steady_clock::now();
        if (pass < 0) {
          for (size_t i = b; i < e; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
        } else {
          sink.fetch_add(sum_words(buf.get() + b, e - b, ahead, far), std::memory_order_relaxed);
        }
        secs[static_cast<size_t>(t)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    go.store(true, std::memory_order_release);
    for (auto& th : ts) th.join();
    if (pass < 0) continue;
    const double slowest = *std::max_element(secs.begin(), secs.end());
    best = std::max(best, static_cast<double>(words * sizeof(uint64_t)) / slowest / 1e9);
  }
  if (sink.load() == 42) std::this_thread::yield();  // consume the sums
  return best;
}

}  // namespace synapse::bench

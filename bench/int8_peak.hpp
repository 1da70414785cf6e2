// The int8 multiply-accumulate peak of this machine, measured the way
// ../shared/tools/vnni_peak.c does: 12 independent accumulator chains of the
// widest int8 dot instruction the CPU has, in a loop with nothing else, on
// each of `threads` threads at once. Prefill's matrix products are int8 dot
// products (Q8_0 / Q8_K activations against the weight bytes), so t/s times
// the model's operations per token, divided by this, is the share of the
// machine prefill reaches (issue 41: ik_llama.cpp ~25-30% on Q8_0 on a Zen 5).
//
// Instructions: vpdpbusd zmm (AVX-512 VNNI: 64 u8 x s8 products added into
// 16 int32 lanes), else vpdpbusd ymm (AVX-VNNI: 32), else vpmaddubsw ymm
// (AVX2: 32 products into 16 int16 pair sums; the kernels need an add or
// two more per 32 products there, which this peak does not count). One product counts as 2 operations
// (a multiply and an add), as vnni_peak.c counts them. No such instruction
// (scalar builds, ARM64): 0, "not measured".
//
// Header-only, like bandwidth.hpp, so `synapse bench` uses it without a
// library of its own. The loops carry their instruction set as a function
// attribute and run only after the CPU check;
// everything here has internal linkage (an anonymous namespace), so no
// out-of-line copy is shared with generic code or between files.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "quant/cpu.hpp"

namespace synapse::bench {
namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// The 12 accumulators are 12 named variables with distinct starts, as in
// vnni_peak.c (in an array the compiler copied every register once per
// iteration; from equal starts it may merge the chains into one).
#define SYNAPSE_INT8_CHAINS(V, init, step)                                                                        \
  V c0 = init(0), c1 = init(1), c2 = init(2), c3 = init(3), c4 = init(4), c5 = init(5), c6 = init(6), c7 = init(7), \
    c8 = init(8), c9 = init(9), c10 = init(10), c11 = init(11);                                                   \
  for (int64_t i = 0; i < iters; ++i) {                                                                            \
    c0 = step(c0), c1 = step(c1), c2 = step(c2), c3 = step(c3), c4 = step(c4), c5 = step(c5);                      \
    c6 = step(c6), c7 = step(c7), c8 = step(c8), c9 = step(c9), c10 = step(c10), c11 = step(c11);                  \
  }                                                                                                                \
  V out[12] = {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11};                                                 \
  int32_t sum = 0;                                                                                                 \
  for (const V& v : out) {                                                                                         \
    int32_t w;                                                                                                     \
    __builtin_memcpy(&w, &v, sizeof w);                                                                            \
    sum += w;                                                                                                      \
  }                                                                                                                \
  return sum

// vpdpbusd zmm (AVX-512 VNNI): 12 x 64 products per iteration.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) inline int32_t int8_chains_avx512(int64_t iters) {
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
#define SYNAPSE_INIT(k) _mm512_set1_epi32(k)
#define SYNAPSE_STEP(x) _mm512_dpbusd_epi32(x, a, b)
  SYNAPSE_INT8_CHAINS(__m512i, SYNAPSE_INIT, SYNAPSE_STEP);
#undef SYNAPSE_INIT
#undef SYNAPSE_STEP
}

// vpdpbusd ymm (AVX-VNNI): 12 x 32 products per iteration.
__attribute__((target("avx2,avxvnni"))) inline int32_t int8_chains_avxvnni(int64_t iters) {
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5);
#define SYNAPSE_INIT(k) _mm256_set1_epi32(k)
#define SYNAPSE_STEP(x) _mm256_dpbusd_avx_epi32(x, a, b)
  SYNAPSE_INT8_CHAINS(__m256i, SYNAPSE_INIT, SYNAPSE_STEP);
#undef SYNAPSE_INIT
#undef SYNAPSE_STEP
}

// vpmaddubsw ymm (AVX2), each chain fed its own last result as the unsigned
// bytes (the values do not matter, only that each multiply waits for the
// one before it in its chain): 12 x 32 products per iteration.
__attribute__((target("avx2"))) inline int32_t int8_chains_avx2(int64_t iters) {
  const __m256i b = _mm256_set1_epi8(1);
#define SYNAPSE_INIT(k) _mm256_set1_epi8(static_cast<char>(k))
#define SYNAPSE_STEP(x) _mm256_maddubs_epi16(x, b)
  SYNAPSE_INT8_CHAINS(__m256i, SYNAPSE_INIT, SYNAPSE_STEP);
#undef SYNAPSE_INIT
#undef SYNAPSE_STEP
}
#undef SYNAPSE_INT8_CHAINS
#endif

// Which probe this CPU runs: its name and int8 products per iteration (0: none).
struct Int8Probe {
  const char* name = "none";
  int products = 0;
  int32_t (*run)(int64_t) = nullptr;
};

// (The AVX-512 and AVX2 checks are the kernel tables' own, quant/cpu.hpp;
// AVX-VNNI has none there, as no kernel uses it.)
inline Int8Probe int8_probe() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (quant::cpu_has_avx512_vnni()) return {"vpdpbusd zmm", 12 * 64, int8_chains_avx512};
  if (quant::cpu_has_avx2() && __builtin_cpu_supports("avxvnni")) return {"vpdpbusd ymm", 12 * 32, int8_chains_avxvnni};
  if (quant::cpu_has_avx2()) return {"vpmaddubsw ymm", 12 * 32, int8_chains_avx2};
#endif
  return {};
}

// The int8 peak in GOPS (1e9 operations per second, 2 per product) of
// `threads` threads running the probe at once for about `seconds` each: the
// sum over the threads of their products / their own time. 0 when the CPU
// has no probe. Throws std::system_error if a thread cannot start (the
// threads already started are released and joined first).
inline double int8_peak_gops(int threads, double seconds = 0.25) {
  const Int8Probe p = int8_probe();
  if (p.run == nullptr || threads < 1) return 0.0;
  std::vector<double> gops(static_cast<size_t>(threads));
  std::atomic<int> ready{0};
  std::atomic<bool> abandon{false};
  std::atomic<int32_t> sink{0};
  const auto work = [&](int t) {
    ready.fetch_add(1);
    while (ready.load() < threads) {
      if (abandon.load()) return;
    }
    constexpr int64_t kIters = 1 << 20;
    p.run(kIters / 16);  // warm-up: the wide units' power-up, the frequency step
    const auto t0 = std::chrono::steady_clock::now();
    int64_t done = 0;
    double el = 0;
    do {
      sink.fetch_add(p.run(kIters));
      done += kIters;
      el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (el < seconds);
    gops[static_cast<size_t>(t)] = static_cast<double>(done) * p.products * 2 / el / 1e9;
  };
  std::vector<std::thread> pool;
  try {
    for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  } catch (...) {
    abandon.store(true);
    for (auto& th : pool) th.join();
    throw;
  }
  work(0);
  for (auto& th : pool) th.join();
  double sum = 0;
  for (double g : gops) sum += g;
  return sum;
}

}  // namespace
}  // namespace synapse::bench

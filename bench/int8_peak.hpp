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
// plus vpaddw (AVX2: 32 products, the pair sums added in int16, two
// instructions where VNNI needs one). One product counts as 2 operations
// (a multiply and an add), as vnni_peak.c counts them. No such instruction
// (scalar builds, ARM64): 0, "not measured".
//
// Header-only, like bandwidth.hpp, so `synapse bench` uses it without a
// library of its own. The loops carry their instruction set as a function
// attribute and run only after the CPU check (__builtin_cpu_supports); they
// are file-local (static), so no out-of-line copy is shared with generic
// code.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace synapse::bench {

#if defined(__x86_64__) && defined(__GNUC__)
// 12 chains of vpdpbusd zmm, `iters` times; returns a value that depends on
// every chain (so the loop is kept). 12 x 64 products per iteration.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static inline int32_t int8_chains_avx512(int64_t iters) {
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
  __m512i c[12];
  for (auto& x : c) x = _mm512_setzero_si512();
  for (int64_t i = 0; i < iters; ++i)
    for (auto& x : c) x = _mm512_dpbusd_epi32(x, a, b);
  __m512i s = c[0];
  for (int k = 1; k < 12; ++k) s = _mm512_add_epi32(s, c[k]);
  int32_t out[16];
  _mm512_storeu_si512(out, s);
  return out[0] + out[15];
}

// 12 chains of vpdpbusd ymm (AVX-VNNI). 12 x 32 products per iteration.
__attribute__((target("avx2,avxvnni"))) static inline int32_t int8_chains_avxvnni(int64_t iters) {
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5);
  __m256i c[12];
  for (auto& x : c) x = _mm256_setzero_si256();
  for (int64_t i = 0; i < iters; ++i)
    for (auto& x : c) x = _mm256_dpbusd_avx_epi32(x, a, b);
  __m256i s = c[0];
  for (int k = 1; k < 12; ++k) s = _mm256_add_epi32(s, c[k]);
  return _mm256_extract_epi32(s, 0) + _mm256_extract_epi32(s, 7);
}

// 12 chains of vpmaddubsw + vpaddw (AVX2). 12 x 32 products per iteration.
__attribute__((target("avx2"))) static inline int32_t int8_chains_avx2(int64_t iters) {
  const __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(1);
  __m256i c[12];
  for (auto& x : c) x = _mm256_setzero_si256();
  for (int64_t i = 0; i < iters; ++i)
    for (auto& x : c) x = _mm256_add_epi16(x, _mm256_maddubs_epi16(a, b));
  __m256i s = c[0];
  for (int k = 1; k < 12; ++k) s = _mm256_add_epi16(s, c[k]);
  return _mm256_extract_epi16(s, 0) + _mm256_extract_epi16(s, 15);
}
#endif

// Which probe this CPU runs: its name and int8 products per iteration (0: none).
struct Int8Probe {
  const char* name = "none";
  int products = 0;
  int32_t (*run)(int64_t) = nullptr;
};

inline Int8Probe int8_probe() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni"))
    return {"vpdpbusd zmm", 12 * 64, int8_chains_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni"))
    return {"vpdpbusd ymm", 12 * 32, int8_chains_avxvnni};
  if (__builtin_cpu_supports("avx2")) return {"vpmaddubsw ymm", 12 * 32, int8_chains_avx2};
#endif
  return {};
}

// The int8 peak in GOPS (1e9 operations per second, 2 per product) of
// `threads` threads running the probe at once for about `seconds` each: the
// sum over the threads of their products / their own time. 0 when the CPU
// has no probe. Throws std::system_error if a thread cannot start.
inline double int8_peak_gops(int threads, double seconds = 0.25) {
  const Int8Probe p = int8_probe();
  if (p.run == nullptr || threads < 1) return 0.0;
  std::vector<double> gops(static_cast<size_t>(threads));
  std::atomic<int> ready{0};
  std::atomic<int32_t> sink{0};
  const auto work = [&](int t) {
    ready.fetch_add(1);
    while (ready.load() < threads) {
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
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  double sum = 0;
  for (double g : gops) sum += g;
  return sum;
}

}  // namespace synapse::bench

// Micro-benchmark of the dot-product kernels: one activation row against a
// weight matrix of 2048 rows x 8192 columns (ggml's GEMV, the decode case;
// SYNAPSE_BENCH_COLS changes the shape),
// per weight type, with the scalar reference and with the AVX2 kernel, on
// one thread; and the engine's kernels::matmul (the active ISA) on 1 and 2
// threads. Reports GB/s of weight bytes streamed ("bytes_per_second").
//
//   build-x/bench/bench_kernels --benchmark_filter='Q4_K'
//   build-x/bench/bench_kernels --benchmark_min_time=0.2
//   SYNAPSE_BENCH_COLS=2048 build-x/bench/bench_kernels --benchmark_filter='gemm/'
//
// The weights are random bytes with finite scales (a kernel's speed does
// not depend on the values). Note the matrix sizes in bytes: Q4_K is 9.4 MB,
// which stays in a large L3; F32 is 64 MB (DRAM).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.hpp"
#include "quant/formats.hpp"
#include "quant/quant.hpp"
#include "quant/simd.hpp"
#include "base/thread_pool.hpp"

namespace {

using synapse::GgmlType;
namespace quant = synapse::quant;

// SYNAPSE_BENCH_COLS sets the columns (the reduction length: 2048 is the
// attention and FFN-up matrices of llama-3.2-1b, 8192 its FFN-down), the
// matrix keeping 2048 x 8192 elements; main() checks it.
const int64_t kCols = std::getenv("SYNAPSE_BENCH_COLS") ? std::atoll(std::getenv("SYNAPSE_BENCH_COLS")) : 8192;
const int64_t kRows = kCols > 0 ? 2048 * 8192 / kCols : 0;

const GgmlType kTypes[] = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0,  GgmlType::Q4_0, GgmlType::Q5_K,
                           GgmlType::F16,  GgmlType::F32,  GgmlType::BF16,  GgmlType::Q5_0, GgmlType::Q4_1,
                           GgmlType::Q5_1, GgmlType::Q3_K, GgmlType::Q2_K,  GgmlType::IQ4_NL, GgmlType::IQ4_XS,
                           GgmlType::TQ1_0, GgmlType::TQ2_0, GgmlType::MXFP4, GgmlType::IQ2_XXS, GgmlType::IQ2_XS,
                           GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ1_S, GgmlType::IQ1_M};

// A weight matrix of type t: random bytes, and every 16-bit word a finite
// F16 (so scales and F16/BF16 elements are finite). The activation row is
// a Gaussian row quantized to the paired type.
struct Problem {
  GgmlType type;
  size_t row_bytes;
  std::vector<uint8_t> w;
  std::vector<float> x;
  std::vector<uint8_t> a;
};

const Problem& problem(GgmlType t) {
  static std::unique_ptr<Problem> cache[64];
  auto& p = cache[static_cast<int>(t)];
  if (p) return *p;
  p = std::make_unique<Problem>();
  p->type = t;
  p->row_bytes = synapse::row_size(t, kCols);
  p->w.resize(p->row_bytes * kRows);
  std::mt19937 rng(42);
  auto* words = reinterpret_cast<uint16_t*>(p->w.data());
  for (size_t i = 0; i < p->w.size() / 2; ++i) words[i] = static_cast<uint16_t>(rng() & 0x3BFF);
  if (t == GgmlType::BF16) {  // normal numbers around 1 (no subnormal products)
    for (size_t i = 0; i < p->w.size() / 2; ++i) words[i] = static_cast<uint16_t>((rng() & 0x807F) | 0x3F00);
  }
  if (t == GgmlType::F32) {
    auto* f = reinterpret_cast<float*>(p->w.data());
    for (int64_t i = 0; i < kRows * kCols; ++i) f[i] = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) * 1e-3f;
  }
  if (t == GgmlType::Q8_0) {  // bytes in [-127, 127], as ggml's quantizer writes them (a -128 keeps a
    // matrix plain: quant::rows_interleave_exactly), so the models' interleaved kernel is what runs
    for (size_t b = 0; b < p->w.size(); b += sizeof(quant::block_q8_0))
      for (size_t k = b + 2; k < b + sizeof(quant::block_q8_0); ++k)
        if (p->w[k] == 0x80) p->w[k] = 0x81;
  }
  if (t == GgmlType::MXFP4) {  // exponents of real weights (2^-8 .. 2^7): no subnormal or huge scales
    for (size_t b = 0; b < p->w.size(); b += sizeof(quant::block_mxfp4)) p->w[b] = static_cast<uint8_t>(120 + rng() % 16);
  }
  std::normal_distribution<float> g(0.f, 1.f);
  p->x.resize(kCols);
  for (auto& v : p->x) v = g(rng);
  const GgmlType vt = quant::vec_dot_type(t);
  p->a.resize(synapse::row_size(vt, kCols));
  quant::quantize_row(vt, p->x.data(), p->a.data(), kCols);
  return *p;
}

void gemv(benchmark::State& state, GgmlType t, quant::Isa isa) {
  if (isa == quant::Isa::avx2 && !quant::cpu_has_avx2()) {
    state.SkipWithError("no AVX2 on this CPU");
    return;
  }
  const Problem& p = problem(t);
  const quant::VecDotFn f = quant::vec_dot_kernel(t, isa);
  std::vector<float> y(kRows);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) y[r] = f(kCols, p.w.data() + r * p.row_bytes, p.a.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(p.w.size()));
}

// The problem's matrix as kernels::matmul takes it: interleaved where a
// loaded model's would be (kernels::interleave_weight; the copy is made
// once, outside the timed loop).
synapse::kernels::WeightView weight_view(const Problem& p) {
  static std::map<GgmlType, synapse::kernels::WeightView> made;  // one copy per type
  static synapse::kernels::WeightStore store;
  if (auto it = made.find(p.type); it != made.end()) return it->second;
  synapse::kernels::WeightView wv;
  wv.name = "bench";
  wv.type = p.type;
  wv.n_in = kCols;
  wv.n_out = kRows;
  wv.row_bytes = p.row_bytes;
  wv.data = p.w.data();
  synapse::kernels::interleave_weight(wv, store, quant::active_isa());
  return made[p.type] = wv;
}

void matmul(benchmark::State& state, GgmlType t, int threads) {
  const Problem& p = problem(t);
  synapse::base::ThreadPool pool(threads);
  const synapse::kernels::WeightView wv = weight_view(p);
  std::vector<float> y(kRows);
  for (auto _ : state) {
    synapse::kernels::Activations act(p.x.data(), 1, kCols);
    synapse::kernels::matmul(wv, act, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(p.w.size()));
  state.SetLabel(quant::isa_name(quant::active_isa()));
}

// Prefill (m 64) and a 16-row decode step (m 16): m activation rows (the
// one row repeated) against the matrix, through kernels::matmul on one
// thread; items = multiply-adds.
void gemm(benchmark::State& state, GgmlType t, int64_t m) {
  const Problem& p = problem(t);
  synapse::base::ThreadPool pool(1);
  const synapse::kernels::WeightView wv = weight_view(p);
  std::vector<float> x;
  for (int64_t i = 0; i < m; ++i) x.insert(x.end(), p.x.begin(), p.x.end());
  std::vector<float> y(static_cast<size_t>(kRows * m));
  for (auto _ : state) {
    synapse::kernels::Activations act(x.data(), m, kCols);
    synapse::kernels::matmul(wv, act, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows * kCols * m);
  state.SetLabel(quant::isa_name(quant::active_isa()));
}

}  // namespace

int main(int argc, char** argv) {
  if (kCols < 256 || kCols % 256 != 0 || (2048 * 8192) % kCols != 0) {
    std::fprintf(stderr, "bench_kernels: SYNAPSE_BENCH_COLS must be a multiple of 256 dividing 2048 * 8192\n");
    return 1;
  }
  for (GgmlType t : kTypes) {
    const std::string name(synapse::type_name(t));
    benchmark::RegisterBenchmark(("gemv/scalar/" + name).c_str(), gemv, t, quant::Isa::scalar)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("gemv/avx2/" + name).c_str(), gemv, t, quant::Isa::avx2)
        ->Unit(benchmark::kMillisecond);
    for (int threads : {1, 2}) {
      benchmark::RegisterBenchmark(("matmul/" + name + "/t" + std::to_string(threads)).c_str(), matmul, t, threads)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    for (int64_t m : {16, 64}) {  // the server's 16-client decode step, prefill
      benchmark::RegisterBenchmark(("gemm/" + name + "/m" + std::to_string(m)).c_str(), gemm, t, m)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

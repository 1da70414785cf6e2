// mxfp4_ggml_ref: what ggml (llama.cpp v0.5.0) computes for MXFP4, as raw
// data for tests/quant/mxfp4_test.cpp (tests/data/quant/mxfp4-ggml.bin).
//
// Not part of synapse's build: it links the reference llama.cpp's static ggml
// libraries and calls ggml's own functions, dequantize_row_mxfp4 and
// quantize_row_mxfp4_ref (ggml-quants.c) and, from the CPU backend,
// quantize_row_q8_0 and ggml_vec_dot_mxfp4_q8_0 (arch/x86/quants.c, the
// AVX2 path of the native build). Build and run (one line each):
//
//   g++ -O2 -std=c++17 scripts/golden/mxfp4_ggml_ref.cpp $B/ggml/src/libggml-cpu.a
//       $B/ggml/src/libggml-base.a -fopenmp -lm -lpthread -o /tmp/mxfp4_ggml_ref
//   /tmp/mxfp4_ggml_ref tests/data/quant/mxfp4-ggml.bin
//
// with B=/work/ref/llama-build (llama.cpp v0.5.0 de3ff81, GCC 12.2, Release,
// GGML_NATIVE=ON). The inputs come from a fixed seed, so a rerun writes the
// same bytes.
//
// File layout (little-endian):
//   "MXF4GGML"
//   u32 n_deq;  n_deq blocks (17 bytes each; block i has e = i), then
//               their 32 * n_deq floats from dequantize_row_mxfp4
//   u32 n_q;    32 * n_q input floats, then the n_q blocks
//               quantize_row_mxfp4_ref writes for them
//   u32 n_dot, u32 n;  n_dot times: an MXFP4 row of n elements
//               (quantize_row_mxfp4_ref of Gaussian floats), a Q8_0 row
//               (quantize_row_q8_0 of Gaussian floats), and the float
//               ggml_vec_dot_mxfp4_q8_0 gives for them
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

extern "C" {
void dequantize_row_mxfp4(const void* x, float* y, int64_t k);
void quantize_row_mxfp4_ref(const float* x, void* y, int64_t k);
void quantize_row_q8_0(const float* x, void* y, int64_t k);
void ggml_vec_dot_mxfp4_q8_0(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                             int nrc);
void ggml_cpu_init(void);
}

namespace {

std::vector<uint8_t> out;

void put(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
void put_u32(uint32_t v) { put(&v, 4); }

// 32 floats of one quantizer test block, of kind k (see the cases below).
void quant_block(int k, std::mt19937& rng, float* x) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  const float levels[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};  // E2M1
  const int kind = k % 8;
  const int scale_exp = static_cast<int>(rng() % 250) - 140;  // 2^-140 .. 2^109
  switch (kind) {
    case 0:  // Gaussian at any scale, subnormal to huge
    case 1:
      for (int j = 0; j < 32; ++j) x[j] = std::ldexp(g(rng), scale_exp);
      break;
    case 2:  // exact midpoints between E2M1 levels (ties), one element at the top level 6 * 2^s
      for (int j = 0; j < 32; ++j) {
        const int i = static_cast<int>(rng() % 7);
        const float v = 0.5f * (levels[i] + levels[i + 1]);
        x[j] = std::ldexp((rng() % 2 ? -v : v), scale_exp % 100);
      }
      x[rng() % 32] = std::ldexp(6.0f, scale_exp % 100);
      break;
    case 3: {  // amax at and around a power of two (where floor(log2f) turns)
      const float p = std::ldexp(1.0f, scale_exp % 120);
      for (int j = 0; j < 32; ++j) x[j] = p * 0.25f * g(rng) * 0.1f;
      const float a[4] = {p, std::nextafter(p, 0.0f), std::nextafter(p, 2 * p), p * 0.75f};
      x[rng() % 32] = (rng() % 2 ? -1.0f : 1.0f) * a[(k / 8) % 4];
      break;
    }
    case 4:  // zeros, negative zeros, a single value
      for (int j = 0; j < 32; ++j) x[j] = (rng() % 2) ? 0.0f : -0.0f;
      if (k % 16 == 4) x[rng() % 32] = std::ldexp(g(rng), scale_exp);
      break;
    case 5:  // tiny blocks: amax below 2^-125 (the exponent wraps) and subnormals
      for (int j = 0; j < 32; ++j)
        x[j] = std::numeric_limits<float>::denorm_min() * static_cast<float>(static_cast<int>(rng() % 2001) - 1000);
      if (k % 16 == 5) x[3] = std::ldexp(1.5f, -126);
      break;
    case 6:  // extremes
      for (int j = 0; j < 32; ++j) {
        switch (rng() % 4) {
          case 0: x[j] = std::numeric_limits<float>::max() * (rng() % 2 ? 1.f : -1.f); break;
          case 1: x[j] = 65504.0f; break;
          case 2: x[j] = std::numeric_limits<float>::min(); break;
          default: x[j] = g(rng) * 1e30f; break;
        }
      }
      break;
    default:  // small integers and halves, and one non-finite value (ggml skips a NaN in amax)
      for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(static_cast<int>(rng() % 64) - 32) * 0.5f;
      if (k % 24 == 7) x[rng() % 32] = std::numeric_limits<float>::quiet_NaN();
      if (k % 24 == 15) x[rng() % 32] = std::numeric_limits<float>::infinity();
      if (k % 24 == 23) x[rng() % 32] = -std::numeric_limits<float>::infinity();
      break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.bin\n", argv[0]);
    return 2;
  }
  ggml_cpu_init();  // the CPU backend's FP16 and E8M0 tables
  std::mt19937 rng(20261206);
  put("MXF4GGML", 8);

  // Dequantize: every exponent byte once, random codes.
  const uint32_t n_deq = 256;
  std::vector<uint8_t> blocks(17 * n_deq);
  for (uint32_t i = 0; i < n_deq; ++i) {
    blocks[17 * i] = static_cast<uint8_t>(i);
    for (int j = 1; j < 17; ++j) blocks[17 * i + j] = static_cast<uint8_t>(rng());
  }
  std::vector<float> y(32 * n_deq);
  dequantize_row_mxfp4(blocks.data(), y.data(), 32 * n_deq);
  put_u32(n_deq);
  put(blocks.data(), blocks.size());
  put(y.data(), y.size() * 4);

  // Quantize: the block kinds of quant_block.
  const uint32_t n_q = 192;
  std::vector<float> x(32 * n_q);
  for (uint32_t k = 0; k < n_q; ++k) quant_block(static_cast<int>(k), rng, x.data() + 32 * k);
  std::vector<uint8_t> q(17 * n_q);
  quantize_row_mxfp4_ref(x.data(), q.data(), 32 * n_q);
  put_u32(n_q);
  put(x.data(), x.size() * 4);
  put(q.data(), q.size());

  // Dots: gpt-oss's row length (2880 = 90 blocks, an odd count: ggml's
  // AVX2 loop takes two blocks a step and the last one alone).
  const uint32_t n_dot = 6, n = 2880;
  put_u32(n_dot);
  put_u32(n);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (uint32_t r = 0; r < n_dot; ++r) {
    std::vector<float> wf(n), af(n);
    for (auto& v : wf) v = g(rng) * 0.02f;
    for (auto& v : af) v = g(rng) * (r % 2 ? 3.0f : 0.5f);
    std::vector<uint8_t> w(n / 32 * 17), a(n / 32 * 34);
    quantize_row_mxfp4_ref(wf.data(), w.data(), n);
    quantize_row_q8_0(af.data(), a.data(), n);
    float s = 0;
    ggml_vec_dot_mxfp4_q8_0(static_cast<int>(n), &s, 0, w.data(), 0, a.data(), 0, 1);
    put(w.data(), w.size());
    put(a.data(), a.size());
    put(&s, 4);
  }

  FILE* f = std::fopen(argv[1], "wb");
  if (f == nullptr || std::fwrite(out.data(), 1, out.size(), f) != out.size() || std::fclose(f) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  std::printf("%s: %zu bytes\n", argv[1], out.size());
  return 0;
}

// iq_ggml_ref: what ggml (llama.cpp v0.5.0) computes for the lattice formats
// IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M, as raw data for
// tests/quant/iq_quants_test.cpp (tests/data/quant/iq-ggml.bin).
//
// Not part of synapse's build: it links the reference llama.cpp's static ggml
// libraries and calls ggml's own functions: dequantize_row_<t> and
// ggml_quantize_chunk (ggml-quants.c, ggml.c), and from the CPU backend
// quantize_row_q8_K, the generic ggml_vec_dot_<t>_q8_K_generic (ggml-cpu/
// quants.c, compiled with the native build's flags) and the x86 one
// ggml_vec_dot_<t>_q8_K (arch/x86/quants.c, its AVX2 path). Build and run
// (one line each):
//
//   g++ -O2 -std=c++17 scripts/golden/iq_ggml_ref.cpp $B/ggml/src/libggml.a $B/ggml/src/libggml-cpu.a
//       $B/ggml/src/libggml-base.a -fopenmp -lm -lpthread -o /tmp/iq_ggml_ref
//   /tmp/iq_ggml_ref tests/data/quant/iq-ggml.bin
//
// with B=/work/ref/llama-build (llama.cpp v0.5.0 de3ff81, GCC 12.2, Release,
// GGML_NATIVE=ON). The inputs come from a fixed seed, so a rerun writes the
// same bytes.
//
// File layout (little-endian):
//   "IQGGML01", u32 n_types; then per type:
//   u32 ggml type id, u32 block bytes
//   u32 n_deq;  n_deq blocks (random bytes, a finite F16 scale; the first
//               half, then ggml_quantize_chunk's blocks of Gaussian rows with a
//               random importance matrix), then their 256 * n_deq floats from
//               dequantize_row_<t>
//   u32 n_dot, u32 n;  n_dot times: a weight row of n elements (even rows
//               random bytes, odd rows ggml_quantize_chunk's), a Q8_K row
//               (quantize_row_q8_K of Gaussian floats: values -127..127),
//               the float of ggml_vec_dot_<t>_q8_K_generic, and the float of
//               ggml_vec_dot_<t>_q8_K (x86)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

extern "C" {
void dequantize_row_iq2_xxs(const void* x, float* y, int64_t k);
void dequantize_row_iq2_xs(const void* x, float* y, int64_t k);
void dequantize_row_iq2_s(const void* x, float* y, int64_t k);
void dequantize_row_iq3_xxs(const void* x, float* y, int64_t k);
void dequantize_row_iq3_s(const void* x, float* y, int64_t k);
void dequantize_row_iq1_s(const void* x, float* y, int64_t k);
void dequantize_row_iq1_m(const void* x, float* y, int64_t k);
size_t ggml_quantize_chunk(int type, const float* src, void* dst, int64_t start, int64_t nrows, int64_t n_per_row,
                           const float* imatrix);
void quantize_row_q8_K(const float* x, void* y, int64_t k);
void ggml_cpu_init(void);
#define DOTS(t)                                                                                                   \
  void ggml_vec_dot_##t##_q8_K_generic(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy,     \
                                       size_t by, int nrc);                                                       \
  void ggml_vec_dot_##t##_q8_K(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by, \
                               int nrc);
DOTS(iq2_xxs)
DOTS(iq2_xs)
DOTS(iq2_s)
DOTS(iq3_xxs)
DOTS(iq3_s)
DOTS(iq1_s)
DOTS(iq1_m)
}

namespace {

using DeqFn = void (*)(const void*, float*, int64_t);
using DotFn = void (*)(int, float*, size_t, const void*, size_t, const void*, size_t, int);

struct Type {
  uint32_t id;
  uint32_t bytes;
  DeqFn deq;
  DotFn generic, x86;
  // byte offsets of F16 scales (IQ1_M: none, its scale is spread over 4 nibbles)
  int f16_offset;
};

#define T(t) ggml_vec_dot_##t##_q8_K_generic, ggml_vec_dot_##t##_q8_K
const Type kTypes[] = {
    {16, 66, dequantize_row_iq2_xxs, T(iq2_xxs), 0}, {17, 74, dequantize_row_iq2_xs, T(iq2_xs), 0},
    {22, 82, dequantize_row_iq2_s, T(iq2_s), 0},     {18, 98, dequantize_row_iq3_xxs, T(iq3_xxs), 0},
    {21, 110, dequantize_row_iq3_s, T(iq3_s), 0},    {19, 50, dequantize_row_iq1_s, T(iq1_s), 0},
    {29, 56, dequantize_row_iq1_m, T(iq1_m), -1},
};
#undef T

std::vector<uint8_t> out;

void put(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
void put_u32(uint32_t v) { put(&v, 4); }

// A finite F16 of moderate size (exponent field 1..20: 2^-14 .. 2^5).
uint16_t f16(std::mt19937& rng) {
  return static_cast<uint16_t>((rng() & 0x83FF) | ((1 + rng() % 20) << 10));
}

// n / 256 random blocks with finite scales.
std::vector<uint8_t> random_blocks(const Type& t, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> b(static_cast<size_t>(n / 256) * t.bytes);
  for (auto& v : b) v = static_cast<uint8_t>(rng());
  for (size_t off = 0; off < b.size(); off += t.bytes) {
    if (t.f16_offset >= 0) {
      const uint16_t h = f16(rng);
      std::memcpy(b.data() + off + t.f16_offset, &h, 2);
    } else {  // IQ1_M: the scale's nibbles are bits 12-15 of the 4 words at 48..55
      const uint16_t h = f16(rng);
      for (int w = 0; w < 4; ++w) {
        uint16_t word;
        std::memcpy(&word, b.data() + off + 48 + 2 * w, 2);
        word = static_cast<uint16_t>((word & 0x0FFF) | (((h >> (4 * w)) & 0xF) << 12));
        std::memcpy(b.data() + off + 48 + 2 * w, &word, 2);
      }
    }
  }
  return b;
}

// ggml_quantize_chunk of one Gaussian row with a random positive importance matrix.
std::vector<uint8_t> quantized_blocks(const Type& t, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n)), im(static_cast<size_t>(n));
  const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 12) - 8);
  for (auto& v : x) v = g(rng) * scale;
  for (auto& v : im) v = 0.01f + std::fabs(g(rng));
  std::vector<uint8_t> b(static_cast<size_t>(n / 256) * t.bytes);
  ggml_quantize_chunk(static_cast<int>(t.id), x.data(), b.data(), 0, 1, n, im.data());
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.bin\n", argv[0]);
    return 2;
  }
  ggml_cpu_init();
  std::mt19937 rng(20261207);
  put("IQGGML01", 8);
  put_u32(sizeof kTypes / sizeof kTypes[0]);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (const Type& t : kTypes) {
    put_u32(t.id);
    put_u32(t.bytes);
    // Dequantize: 6 random blocks, 2 quantized ones.
    const uint32_t n_deq = 8;
    std::vector<uint8_t> blocks = random_blocks(t, 6 * 256, rng);
    const std::vector<uint8_t> q = quantized_blocks(t, 2 * 256, rng);
    blocks.insert(blocks.end(), q.begin(), q.end());
    std::vector<float> y(256 * n_deq);
    t.deq(blocks.data(), y.data(), 256 * n_deq);
    put_u32(n_deq);
    put(blocks.data(), blocks.size());
    put(y.data(), y.size() * 4);
    // Dots: 6 rows of 512.
    const uint32_t n_dot = 6, n = 512;
    put_u32(n_dot);
    put_u32(n);
    for (uint32_t r = 0; r < n_dot; ++r) {
      const std::vector<uint8_t> w = r % 2 == 0 ? random_blocks(t, n, rng) : quantized_blocks(t, n, rng);
      std::vector<float> af(n);
      for (auto& v : af) v = g(rng) * (r % 3 == 0 ? 3.0f : 0.5f);
      std::vector<uint8_t> a(n / 256 * 292);
      quantize_row_q8_K(af.data(), a.data(), n);
      float s_generic = 0, s_x86 = 0;
      t.generic(static_cast<int>(n), &s_generic, 0, w.data(), 0, a.data(), 0, 1);
      t.x86(static_cast<int>(n), &s_x86, 0, w.data(), 0, a.data(), 0, 1);
      put(w.data(), w.size());
      put(a.data(), a.size());
      put(&s_generic, 4);
      put(&s_x86, 4);
    }
  }
  FILE* f = std::fopen(argv[1], "wb");
  if (f == nullptr || std::fwrite(out.data(), 1, out.size(), f) != out.size() || std::fclose(f) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  std::printf("%s: %zu bytes\n", argv[1], out.size());
  return 0;
}

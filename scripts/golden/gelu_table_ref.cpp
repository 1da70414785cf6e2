// gelu_table_ref: the GELU table ggml's CPU backend (llama.cpp v0.5.0) reads,
// as a checksum for tests/kernels/ops_test.cpp (Geglu.TableEqualsGgmls).
//
// Not part of synapse's build: it links the reference llama.cpp's static ggml
// libraries, runs ggml_cpu_init (which fills ggml_table_gelu_f16: F16 of
// ggml_gelu_f32 of every F16 value, compiled by GCC with the 1 + A x x
// contracted into an fma) and prints the FNV-1a 64 hash of the entries ggml's
// geglu reads (the F16 values h with -10 < h < 10; outside, ggml_vec_geglu_f32
// does not use the table), each as its 2 little-endian bytes in bit-pattern
// order, and how many there are. Build and run (one line each):
//
//   g++ -O2 -std=c++17 scripts/golden/gelu_table_ref.cpp $B/ggml/src/libggml-cpu.a
//       $B/ggml/src/libggml-base.a -fopenmp -lm -lpthread -o /tmp/gelu_table_ref
//   /tmp/gelu_table_ref
//
// with B=/work/ref/llama-build (llama.cpp v0.5.0 de3ff81, GCC 12.2, Release,
// GGML_NATIVE=ON).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

extern "C" {
extern uint16_t ggml_table_gelu_f16[1 << 16];
void ggml_cpu_init(void);
}

namespace {

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::nanf("") * (sign ? -1.0f : 1.0f);
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(mant), -24)
                             : std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -mag : mag;
}

}  // namespace

int main() {
  ggml_cpu_init();
  uint64_t hash = 1469598103934665603ull;
  int n = 0;
  for (uint32_t i = 0; i < (1u << 16); ++i) {
    const float x = half_to_float(static_cast<uint16_t>(i));
    if (!(x > -10.0f && x < 10.0f)) continue;
    const uint16_t v = ggml_table_gelu_f16[i];
    for (int b = 0; b < 2; ++b) {
      hash ^= static_cast<uint8_t>(v >> (8 * b));
      hash *= 1099511628211ull;
    }
    ++n;
  }
  std::printf("entries %d fnv1a64 0x%016llx\n", n, static_cast<unsigned long long>(hash));
  return 0;
}

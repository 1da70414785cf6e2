// The ARM64 NEON dot kernels (src/quant/*_neon.cpp) against the scalar
// references that define their results (DESIGN.md contract 2): for every
// weight type with a NEON dot, random rows, real quantized rows and extreme
// byte patterns of several lengths must give the same float, compared with
// memcmp (two NaNs count as equal: NaN has no single bit pattern).
//
// A plain program, not a GoogleTest suite, so it builds from synapse_quant
// alone: CMakeLists.txt builds it on aarch64 only (target neon_check, also
// registered with CTest there), and scripts/cross-arm64.sh cross-builds it
// and runs it under qemu-aarch64. Prints one line per type (comparisons
// made) and exits 1 on the first difference, 2 when the CPU has no dotprod.
// With --digest it prints a digest of dots through the active ISA instead
// (see print_digest), which scripts/cross-arm64.sh compares across machines.
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "quant/formats.hpp"
#include "quant/quant.hpp"
#include "quant/simd.hpp"
#include "quant/random_rows.hpp"

namespace {

using namespace synapse;
using namespace synapse::quant;
using namespace synapse::quant::test_rows;

// Every scale field of a row of type t set to `h` (F16 bits), or for Q8_K
// the float d to fp16_to_fp32(h).
void set_scales(GgmlType t, std::vector<uint8_t>& row, ggml_fp16_t h) {
  if (t == GgmlType::Q8_K) {
    const float d = fp16_to_fp32(h);
    for (size_t off = 0; off < row.size(); off += sizeof(block_q8_K)) std::memcpy(row.data() + off, &d, sizeof d);
    return;
  }
  const ScaleFields s = scale_fields(t);
  for (size_t off = 0; off + s.block_bytes <= row.size() && s.block_bytes != 0; off += s.block_bytes)
    for (size_t f : s.f16) std::memcpy(row.data() + off + f, &h, sizeof h);
}

struct Counts {
  long compared = 0, nan = 0;
};

// One comparison; prints and exits on a difference.
void compare(GgmlType t, const char* what, int64_t n, int trial, const std::vector<uint8_t>& w,
             const std::vector<uint8_t>& a, Counts& c) {
  const float want = vec_dot_kernel(t, Isa::scalar)(n, w.data(), a.data());
  const float got = vec_dot_kernel(t, Isa::neon)(n, w.data(), a.data());
  if (std::isnan(want) && std::isnan(got)) {
    ++c.nan;
    return;
  }
  if (std::memcmp(&want, &got, sizeof want) != 0) {
    std::printf("FAIL %s %s n %lld trial %d: scalar %a neon %a\n", type_name(t).data(), what,
                static_cast<long long>(n), trial, static_cast<double>(want), static_cast<double>(got));
    std::exit(1);
  }
  ++c.compared;
}

// Extreme byte patterns: every weight byte b (0x00, 0x0F, 0x7F, 0x80, 0xF0,
// 0xFF) against activation bytes of all -128, all 127 or random, with unit
// scales (so nothing rounds but the integer lanes' float conversion) and
// with the largest finite F16 scale (65504, products overflow to inf).
void check_extremes(GgmlType t, Counts& c, std::mt19937& rng) {
  const GgmlType vt = vec_dot_type(t);
  if (type_traits(t).block_size == 1) return;  // float rows: covered by random_floats kind 2
  const int64_t n = type_traits(t).block_size * 3;
  int trial = 0;
  for (uint8_t b : {0x00, 0x0F, 0x7F, 0x80, 0xF0, 0xFF}) {
    for (int act = 0; act < 3; ++act) {
      for (ggml_fp16_t scale : {fp32_to_fp16(1.0f), ggml_fp16_t{0x7BFF}, ggml_fp16_t{0x0001}}) {
        std::vector<uint8_t> w(row_size(t, n), b);
        std::vector<uint8_t> a(row_size(vt, n));
        if (act == 2) {
          for (auto& v : a) v = static_cast<uint8_t>(rng());
        } else {
          std::memset(a.data(), act == 0 ? 0x80 : 0x7F, a.size());
        }
        set_scales(t, w, scale);
        set_scales(vt, a, fp32_to_fp16(1.0f));
        compare(t, "extreme", n, trial++, w, a, c);
      }
    }
  }
}

// FNV-1a over the bits of every dot of a fixed set of rows (seeded, so the
// same on every machine), through the public quantize_row / vec_dot of the
// active ISA: float rows quantized to the weight type and to its activation
// type, then dotted. A NaN counts as one canonical pattern (x86 and ARM make
// different default NaNs). Equal digests on x86-64 (AVX2 or scalar) and ARM64
// (NEON or scalar) mean the same bits from the same inputs on both.
void print_digest() {
  std::mt19937 rng(20250520);
  uint64_t h = 1469598103934665603ull;
  long count = 0;
  for (GgmlType t : kDotTypes) {
    const GgmlType vt = vec_dot_type(t);
    for (int64_t n : lengths_of(t)) {
      for (int trial = 0; trial < 8; ++trial) {
        const auto wf = random_floats(n, rng, trial % 4);
        const auto af = random_floats(n, rng, (trial / 4 + trial) % 4);
        std::vector<uint8_t> w(row_size(t, n)), a(row_size(vt, n));
        if (quantize_kernel(t, Isa::scalar) != nullptr) {
          quantize_row(t, wf.data(), w.data(), n);
        } else {  // no quantizer (the IQ1/IQ2/IQ3 formats): seeded random blocks
          w = random_row_bytes(t, n, rng);
        }
        quantize_row(vt, af.data(), a.data(), n);
        float r = vec_dot(t, n, w.data(), a.data());
        if (std::isnan(r)) r = std::numeric_limits<float>::quiet_NaN();
        uint32_t bits;
        std::memcpy(&bits, &r, sizeof bits);
        for (int b = 0; b < 4; ++b) h = (h ^ ((bits >> (8 * b)) & 0xFF)) * 1099511628211ull;
        ++count;
      }
    }
  }
  std::printf("digest %016llx (%ld dots, active_isa %s)\n", static_cast<unsigned long long>(h), count,
              isa_name(active_isa()));
}

}  // namespace

// neon_check            the NEON == scalar comparisons
// neon_check --digest   only the digest line (runs on any CPU; the cross
//                       script compares the x86-64 and ARM64 ones)
int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--digest") == 0) {
    print_digest();
    return 0;
  }
  std::printf("neon_check: cpu_has_neon_dotprod %d, active_isa %s\n", cpu_has_neon_dotprod() ? 1 : 0,
              isa_name(active_isa()));
  if (!cpu_has_neon_dotprod()) {
    std::printf("neon_check: this CPU has no ASIMD dot product: the NEON kernels cannot run here\n");
    return 2;
  }
  const char* env = std::getenv("SYNAPSE_NO_SIMD");
  const bool off = env != nullptr && env[0] != '\0' && std::strcmp(env, "0") != 0;
  if (active_isa() != (off ? Isa::scalar : Isa::neon)) {
    std::printf("FAIL active_isa %s\n", isa_name(active_isa()));
    return 1;
  }
  std::mt19937 rng(1234);
  long total = 0;
  int n_types = 0;
  for (GgmlType t : kDotTypes) {
    if (!has_vec_dot(t, Isa::neon)) {
      std::printf("%-7s scalar (no NEON kernel)\n", type_name(t).data());
      continue;
    }
    if (vec_dot_kernel(t, Isa::neon) == vec_dot_kernel(t, Isa::scalar)) {
      std::printf("FAIL %s: the NEON kernel is the scalar one\n", type_name(t).data());
      return 1;
    }
    const GgmlType vt = vec_dot_type(t);
    Counts c;
    for (int64_t n : lengths_of(t)) {
      for (int trial = 0; trial < 24; ++trial) {
        std::vector<uint8_t> w, a;
        if (trial < 8) {
          w = random_row_bytes(t, n, rng);
          a = random_row_bytes(vt, n, rng);
        } else {
          const auto wf = random_floats(n, rng, trial % 4);
          const auto af = random_floats(n, rng, (trial / 4) % 4);
          w.resize(row_size(t, n));
          a.resize(row_size(vt, n));
          if (const QuantizeFn q = quantize_kernel(t, Isa::scalar)) {
            q(wf.data(), w.data(), n);
          } else {  // no quantizer (the IQ1/IQ2/IQ3 formats): random blocks
            w = random_row_bytes(t, n, rng);
          }
          quantize_kernel(vt, Isa::scalar)(af.data(), a.data(), n);
        }
        compare(t, trial < 8 ? "random bytes" : "quantized", n, trial, w, a, c);
      }
    }
    check_extremes(t, c, rng);
    // The public entry point runs the active ISA's kernel.
    {
      const int64_t n = lengths_of(t).back();
      const auto w = random_row_bytes(t, n, rng), a = random_row_bytes(vt, n, rng);
      const float got = vec_dot(t, n, w.data(), a.data());
      const float want = vec_dot_kernel(t, active_isa())(n, w.data(), a.data());
      if (std::memcmp(&got, &want, sizeof got) != 0 && !(std::isnan(got) && std::isnan(want))) {
        std::printf("FAIL %s: vec_dot does not run the active ISA's kernel\n", type_name(t).data());
        return 1;
      }
    }
    if (c.compared < 100) {
      std::printf("FAIL %s: only %ld comparisons were not NaN\n", type_name(t).data(), c.compared);
      return 1;
    }
    std::printf("%-7s neon == scalar: %ld comparisons bit-equal (%ld both NaN)\n", type_name(t).data(), c.compared,
                c.nan);
    total += c.compared;
    ++n_types;
  }
  std::printf("neon_check: OK, %d types with a NEON kernel, %ld comparisons, all bit-equal\n", n_types, total);
  return 0;
}

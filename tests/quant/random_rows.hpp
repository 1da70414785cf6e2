// Random rows for the kernel tests (tests/quant/simd_test.cpp,
// tests/quant/gemm_test.cpp) and the ARM64 check (tests/cross/neon_check.cpp):
// rows of any weight or activation type whose bytes are random except that
// every scale field and float element is finite (NaN has no single bit
// pattern to compare), and floats of the kinds that stress rounding.
// Header-only and GoogleTest-free, so neon_check builds without it.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "quant/formats.hpp"
#include "quant/quant.hpp"

namespace synapse::quant::test_rows {

// Every type with a vec_dot kernel (the IQ1/IQ2/IQ3 formats have no
// quantizer: their rows are random bytes, random_row_bytes).
inline constexpr GgmlType kDotTypes[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,   GgmlType::Q4_0, GgmlType::Q4_1,   GgmlType::Q5_0,
    GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,
    GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::TQ1_0, GgmlType::TQ2_0, GgmlType::MXFP4,
    GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ1_S,
    GgmlType::IQ1_M};

// Byte offsets of the F16 scale fields in one block, and the block size
// (ggml's block layouts, quant/formats.hpp).
struct ScaleFields {
  size_t block_bytes;
  std::vector<size_t> f16;
};

inline ScaleFields scale_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return {sizeof(block_q4_0), {0}};
    case GgmlType::Q4_1: return {sizeof(block_q4_1), {0, 2}};
    case GgmlType::Q5_0: return {sizeof(block_q5_0), {0}};
    case GgmlType::Q5_1: return {sizeof(block_q5_1), {0, 2}};
    case GgmlType::Q8_0: return {sizeof(block_q8_0), {0}};
    case GgmlType::Q8_1: return {sizeof(block_q8_1), {0, 2}};
    case GgmlType::IQ4_NL: return {sizeof(block_iq4_nl), {0}};
    case GgmlType::Q2_K: return {sizeof(block_q2_K), {offsetof(block_q2_K, d), offsetof(block_q2_K, dmin)}};
    case GgmlType::Q3_K: return {sizeof(block_q3_K), {offsetof(block_q3_K, d)}};
    case GgmlType::Q4_K: return {sizeof(block_q4_K), {0, 2}};
    case GgmlType::Q5_K: return {sizeof(block_q5_K), {0, 2}};
    case GgmlType::Q6_K: return {sizeof(block_q6_K), {offsetof(block_q6_K, d)}};
    case GgmlType::IQ4_XS: return {sizeof(block_iq4_xs), {0}};
    case GgmlType::TQ1_0: return {sizeof(block_tq1_0), {offsetof(block_tq1_0, d)}};
    case GgmlType::TQ2_0: return {sizeof(block_tq2_0), {offsetof(block_tq2_0, d)}};
    case GgmlType::MXFP4: return {sizeof(block_mxfp4), {}};  // an exponent byte, no F16 (random_row_bytes)
    case GgmlType::IQ2_XXS: return {sizeof(block_iq2_xxs), {0}};
    case GgmlType::IQ2_XS: return {sizeof(block_iq2_xs), {0}};
    case GgmlType::IQ2_S: return {sizeof(block_iq2_s), {0}};
    case GgmlType::IQ3_XXS: return {sizeof(block_iq3_xxs), {0}};
    case GgmlType::IQ3_S: return {sizeof(block_iq3_s), {0}};
    case GgmlType::IQ1_S: return {sizeof(block_iq1_s), {0}};
    case GgmlType::IQ1_M: return {sizeof(block_iq1_m), {}};  // F16 in 4 nibbles (random_row_bytes)
    default: return {0, {}};
  }
}

// A finite F16 value: random sign, mantissa and exponent (subnormals and the
// largest finite values included).
inline ggml_fp16_t random_finite_f16(std::mt19937& rng) {
  for (;;) {
    const auto h = static_cast<ggml_fp16_t>(rng() & 0xFFFF);
    if (((h >> 10) & 0x1F) != 0x1F) return h;
  }
}

// A row of type t with every byte random, except that scale fields and
// float elements are finite. Q8_K's float d is a multiple of 2^-12 in
// [-1000, 1000] * 2^-12. MXFP4's exponent byte e is below 216 (scales
// 2^-128 .. 2^87, the subnormal ones included), so that a dot with any
// finite Q8_0 row stays finite (2^87 * 65504 * 6144 per lane and block).
inline std::vector<uint8_t> random_row_bytes(GgmlType t, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> row(row_size(t, n));
  for (auto& b : row) b = static_cast<uint8_t>(rng());
  if (t == GgmlType::F32) {
    auto* f = reinterpret_cast<float*>(row.data());
    for (int64_t i = 0; i < n; ++i) f[i] = std::ldexp(static_cast<float>(static_cast<int32_t>(rng())), -40);
  } else if (t == GgmlType::F16 || t == GgmlType::BF16) {
    auto* h = reinterpret_cast<uint16_t*>(row.data());
    for (int64_t i = 0; i < n; ++i) {
      h[i] = t == GgmlType::F16 ? random_finite_f16(rng) : static_cast<uint16_t>((rng() & 0x80FF) | 0x3C00u);
    }
  } else if (t == GgmlType::Q8_K) {
    for (size_t off = 0; off < row.size(); off += sizeof(block_q8_K)) {
      const float d = std::ldexp(static_cast<float>(static_cast<int32_t>(rng() % 2001) - 1000), -12);
      std::memcpy(row.data() + off, &d, sizeof d);
      // quantize_row_q8_K's values lie in [-127, 127]; the lattice kernels
      // rely on it (they move the weights' signs onto the activations).
      for (size_t j = 0; j < QK_K; ++j) {
        uint8_t& q = row[off + offsetof(block_q8_K, qs) + j];
        if (q == 0x80) q = 0x81;
      }
    }
  } else if (t == GgmlType::MXFP4) {
    for (size_t off = 0; off < row.size(); off += sizeof(block_mxfp4)) row[off] = static_cast<uint8_t>(rng() % 216);
  } else if (t == GgmlType::IQ1_M) {
    // The F16 scale is bits 12-15 of the four scale words (nibble w of h in word w).
    for (size_t off = 0; off < row.size(); off += sizeof(block_iq1_m)) {
      const ggml_fp16_t h = random_finite_f16(rng);
      uint8_t* sc = row.data() + off + offsetof(block_iq1_m, scales);
      for (int w = 0; w < 4; ++w) sc[2 * w + 1] = static_cast<uint8_t>((sc[2 * w + 1] & 0x0F) | (((h >> (4 * w)) & 0xF) << 4));
    }
  } else {
    const ScaleFields s = scale_fields(t);
    for (size_t off = 0; off + s.block_bytes <= row.size() && s.block_bytes != 0; off += s.block_bytes) {
      for (size_t f : s.f16) {
        const ggml_fp16_t h = random_finite_f16(rng);
        std::memcpy(row.data() + off + f, &h, sizeof h);
      }
    }
  }
  return row;
}

// Floats of several kinds: 0 Gaussian at a random scale; 1 the same with
// two thirds zeros; 2 with extremes mixed in (FLT_MAX, subnormals, FLT_MIN,
// 65504); 3 small integers and halves (rounding ties).
inline std::vector<float> random_floats(int64_t n, std::mt19937& rng, int kind) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
  for (auto& v : x) v = g(rng) * scale;
  switch (kind) {
    case 1:
      for (auto& v : x)
        if (rng() % 3 != 0) v = 0.0f;
      break;
    case 2:
      for (auto& v : x) {
        switch (rng() % 8) {
          case 0: v = FLT_MAX * (rng() % 2 ? 1.f : -1.f); break;
          case 1: v = std::numeric_limits<float>::denorm_min() * static_cast<float>(rng() % 100); break;
          case 2: v = FLT_MIN * (rng() % 2 ? 1.f : -1.f); break;
          case 3: v = 65504.0f * (rng() % 2 ? 1.f : -1.f); break;
          default: break;
        }
      }
      break;
    case 3:
      for (auto& v : x) v = static_cast<float>(static_cast<int>(rng() % 512) - 256) * 0.5f;
      break;
    default: break;
  }
  return x;
}

// Row lengths that cover every tail of a type's kernels.
inline std::vector<int64_t> lengths_of(GgmlType t) {
  const int64_t bs = type_traits(t).block_size;
  if (bs == 1) return {1, 3, 7, 8, 9, 15, 16, 17, 31, 64, 100, 255, 256, 257, 1000, 4096, 4101};
  if (bs == 32) return {32, 64, 96, 224, 256, 288, 1024, 4096 + 32};
  return {256, 512, 768, 256 * 7, 4096, 4096 + 256};
}

}  // namespace synapse::quant::test_rows

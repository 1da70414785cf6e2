// Tests of the 32-element block formats (src/quant/legacy.cpp): Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/cpu.hpp"
#include "quant/formats.hpp"
#include "quant/quant.hpp"
#include "quant/simd.hpp"
#include "synapse/gguf.hpp"

namespace synapse::quant {
namespace {

std::vector<float> random_row(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = dist(rng);
  return x;
}

template <typename Block>
std::vector<Block> quantize(GgmlType t, const std::vector<float>& x) {
  std::vector<Block> y(x.size() / 32);
  quantize_row(t, x.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

template <typename Block>
std::vector<float> dequantize(GgmlType t, const std::vector<Block>& y) {
  std::vector<float> x(y.size() * 32);
  dequantize_row(t, y.data(), x.data(), static_cast<int64_t>(x.size()));
  return x;
}

// ------------------------------------------------ dequantize of hand-built blocks

TEST(LegacyDequant, Q4_0HandBuilt) {
  block_q4_0 b{};
  b.d = fp32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(GgmlType::Q4_0, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;             // low nibble: element j
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.5f) << j;   // high nibble: element j + 16
  }
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[16], 3.5f);
}

TEST(LegacyDequant, Q4_1HandBuilt) {
  block_q4_1 b{};
  b.d = fp32_to_fp16(0.25f);
  b.m = fp32_to_fp16(-1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (3 << 4));
  float y[32];
  dequantize_row(GgmlType::Q4_1, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.25f - 1.0f);
    EXPECT_EQ(y[j + 16], -0.25f);
  }
}

TEST(LegacyDequant, Q5_0HandBuilt) {
  block_q5_0 b{};
  b.d = fp32_to_fp16(2.0f);
  // qh bit j = fifth bit of element j: set it for elements 1 and 17 and 31.
  const uint32_t qh = (1u << 1) | (1u << 17) | (1u << 31);
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = 0x00;
  b.qs[1] = 0xF0;   // element 1 low nibble 0 (q = 16), element 17 high nibble 15 (q = 31)
  b.qs[15] = 0x3A;  // element 15: q = 10, element 31: q = 16 + 3 = 19
  float y[32];
  dequantize_row(GgmlType::Q5_0, &b, y, 32);
  EXPECT_EQ(y[0], -32.0f);             // q = 0
  EXPECT_EQ(y[1], 0.0f);               // q = 16
  EXPECT_EQ(y[17], (31 - 16) * 2.0f);  // 30
  EXPECT_EQ(y[15], (10 - 16) * 2.0f);  // -12
  EXPECT_EQ(y[31], (19 - 16) * 2.0f);  // 6
  EXPECT_EQ(y[16], -32.0f);
  EXPECT_EQ(b.qh[0], 0x02);            // little-endian qh bytes
  EXPECT_EQ(b.qh[3], 0x80);
}

TEST(LegacyDequant, Q5_1HandBuilt) {
  block_q5_1 b{};
  b.d = fp32_to_fp16(0.5f);
  b.m = fp32_to_fp16(1.0f);
  const uint32_t qh = 0xFFFF0000u;  // elements 16..31 have the fifth bit
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  float y[32];
  dequantize_row(GgmlType::Q5_1, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f + 1.0f);
    EXPECT_EQ(y[j + 16], (j + 16) * 0.5f + 1.0f);
  }
}

TEST(LegacyDequant, Q8_0AndQ8_1HandBuilt) {
  block_q8_0 b{};
  b.d = fp32_to_fp16(0.125f);
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 127);
  float y[32];
  dequantize_row(GgmlType::Q8_0, &b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 127) * 0.125f);

  block_q8_1 c{};
  c.d = fp32_to_fp16(-3.0f);
  c.s = fp32_to_fp16(12345.0f);  // not used to decode
  for (int j = 0; j < 32; ++j) c.qs[j] = static_cast<int8_t>(j - 16);
  dequantize_row(GgmlType::Q8_1, &c, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j - 16) * -3.0f);
}

TEST(LegacyDequant, IQ4_NLHandBuilt) {
  block_iq4_nl b{};
  b.d = fp32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(GgmlType::IQ4_NL, &b, y, 32);
  const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], levels[j] * 0.5f);
    EXPECT_EQ(y[j + 16], levels[15 - j] * 0.5f);
  }
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[16], 56.5f);
}

TEST(LegacyDequant, RowOfSeveralBlocksAndBadLength) {
  block_q8_0 b[2]{};
  b[0].d = fp32_to_fp16(1.0f);
  b[1].d = fp32_to_fp16(2.0f);
  b[0].qs[31] = 5;
  b[1].qs[0] = -7;
  float y[64];
  dequantize_row(GgmlType::Q8_0, b, y, 64);
  EXPECT_EQ(y[31], 5.0f);
  EXPECT_EQ(y[32], -14.0f);
  EXPECT_THROW(dequantize_row(GgmlType::Q8_0, b, y, 48), Error);
  float x[48] = {};
  EXPECT_THROW(quantize_row(GgmlType::Q4_0, x, b, 48), Error);
}

// ------------------------------------------------ weight quantizers (ggml's _ref)

TEST(LegacyQuant, Q4_0HandChosen) {
  // max = -8 (largest magnitude, negative): d = -8 / -8 = 1, id = 1,
  // q = min(15, trunc(x + 8.5)).
  float x[32] = {};
  x[0] = -8.0f;
  x[1] = 7.0f;
  x[2] = 7.6f;   // 16.1 -> 16 -> clamped to 15
  x[3] = 0.49f;  // 8.99 -> 8
  x[4] = 0.5f;   // 9.0 -> 9 (ties go up: +8.5 and truncation)
  x[5] = -0.5f;  // 8.0 -> 8
  x[16] = -3.2f; // 5.3 -> 5
  block_q4_0 b{};
  quantize_row(GgmlType::Q4_0, x, &b, 32);
  EXPECT_EQ(b.d, fp32_to_fp16(1.0f));
  EXPECT_EQ(b.qs[0], 0 | (5 << 4));
  EXPECT_EQ(b.qs[1], 15 | (8 << 4));
  EXPECT_EQ(b.qs[2], 15 | (8 << 4));
  EXPECT_EQ(b.qs[3], 8 | (8 << 4));
  EXPECT_EQ(b.qs[4], 9 | (8 << 4));
  EXPECT_EQ(b.qs[5], 8 | (8 << 4));
  // All zero: d = 0 and every q = 8 (value 0).
  float z[32] = {};
  quantize_row(GgmlType::Q4_0, z, &b, 32);
  EXPECT_EQ(b.d, 0x8000);  // d = 0 / -8 = -0, as ggml stores it
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], 0x88);
}

TEST(LegacyQuant, Q4_1AndQ5_1HandChosen) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = -2.0f + 0.5f * static_cast<float>(j % 16);  // min -2, max 5.5
  block_q4_1 b{};
  quantize_row(GgmlType::Q4_1, x, &b, 32);
  EXPECT_EQ(b.d, fp32_to_fp16(0.5f));  // (5.5 + 2) / 15
  EXPECT_EQ(b.m, fp32_to_fp16(-2.0f));
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], j | (j << 4));
  float y[32];
  dequantize_row(GgmlType::Q4_1, &b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]);

  // Q5_1: 32 levels from -1 in steps of 0.25: d = 7.75 / 31 = 0.25 exactly.
  for (int j = 0; j < 32; ++j) x[j] = -1.0f + 0.25f * static_cast<float>(j);
  block_q5_1 c{};
  quantize_row(GgmlType::Q5_1, x, &c, 32);
  EXPECT_EQ(c.d, fp32_to_fp16(0.25f));
  EXPECT_EQ(c.m, fp32_to_fp16(-1.0f));
  uint32_t qh;
  std::memcpy(&qh, c.qh, 4);
  EXPECT_EQ(qh, 0xFFFF0000u);
  dequantize_row(GgmlType::Q5_1, &c, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]);
}

TEST(LegacyQuant, Q5_0HandChosen) {
  float x[32] = {};
  x[0] = 16.0f;  // max: d = 16 / -16 = -1, id = -1: q = min(31, trunc(-x + 16.5))
  x[1] = -15.0f; // 31.5 -> 31
  x[2] = -16.0f; // 32.5 -> 32 -> 31
  x[20] = 3.0f;  // 13.5 -> 13
  block_q5_0 b{};
  quantize_row(GgmlType::Q5_0, x, &b, 32);
  EXPECT_EQ(b.d, fp32_to_fp16(-1.0f));
  float y[32];
  dequantize_row(GgmlType::Q5_0, &b, y, 32);
  EXPECT_EQ(y[0], 16.0f);   // q = 0
  EXPECT_EQ(y[1], -15.0f);  // q = 31
  EXPECT_EQ(y[2], -15.0f);  // clamped
  EXPECT_EQ(y[20], 3.0f);   // q = 13
  EXPECT_EQ(y[5], -0.0f);   // q = 16
}

// quantize -> dequantize stays within the format's step: |x - x'| <= d/2
// (plus the fp16 rounding of d), except where the format clamps (Q4_0/Q5_0's
// top level and IQ4_NL's non-uniform levels, bounded by one step).
TEST(LegacyQuant, RoundTripErrorWithinBound) {
  const auto x = random_row(32 * 64, 7);
  {
    const auto q = quantize<block_q4_0>(GgmlType::Q4_0, x);
    const auto y = dequantize(GgmlType::Q4_0, q);
    for (size_t i = 0; i < x.size(); ++i) {
      const float d = std::fabs(fp16_to_fp32(q[i / 32].d));
      EXPECT_LE(std::fabs(x[i] - y[i]), (x[i] * fp16_to_fp32(q[i / 32].d) > 0 ? 1.0f : 0.5f) * d * 1.01f) << i;
    }
  }
  {
    const auto q = quantize<block_q5_0>(GgmlType::Q5_0, x);
    const auto y = dequantize(GgmlType::Q5_0, q);
    for (size_t i = 0; i < x.size(); ++i) {
      const float d = std::fabs(fp16_to_fp32(q[i / 32].d));
      EXPECT_LE(std::fabs(x[i] - y[i]), 1.01f * d) << i;
    }
  }
  {
    const auto q = quantize<block_q4_1>(GgmlType::Q4_1, x);
    const auto y = dequantize(GgmlType::Q4_1, q);
    for (size_t i = 0; i < x.size(); ++i) {
      const float d = fp16_to_fp32(q[i / 32].d);
      // fp16 rounding of m and d adds up to 15 * d * 2^-11 + |m| * 2^-11.
      const float slack = 16 * d / 2048 + std::fabs(fp16_to_fp32(q[i / 32].m)) / 2048;
      EXPECT_LE(std::fabs(x[i] - y[i]), 0.5f * d + slack) << i;
    }
  }
  {
    const auto q = quantize<block_q5_1>(GgmlType::Q5_1, x);
    const auto y = dequantize(GgmlType::Q5_1, q);
    for (size_t i = 0; i < x.size(); ++i) {
      const float d = fp16_to_fp32(q[i / 32].d);
      const float slack = 32 * d / 2048 + std::fabs(fp16_to_fp32(q[i / 32].m)) / 2048;
      EXPECT_LE(std::fabs(x[i] - y[i]), 0.5f * d + slack) << i;
    }
  }
  {
    const auto q = quantize<block_q8_0>(GgmlType::Q8_0, x);
    const auto y = dequantize(GgmlType::Q8_0, q);
    for (size_t i = 0; i < x.size(); ++i) {
      const float d = fp16_to_fp32(q[i / 32].d);
      EXPECT_LE(std::fabs(x[i] - y[i]), 0.5f * d + 128 * d / 2048) << i;
    }
  }
  {
    const auto q = quantize<block_iq4_nl>(GgmlType::IQ4_NL, x);
    const auto y = dequantize(GgmlType::IQ4_NL, q);
    double e2 = 0, x2 = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float d = std::fabs(fp16_to_fp32(q[i / 32].d));
      // Widest gap between neighbouring levels is 24 (89 -> 113), the
      // outermost level can be exceeded by the scale search: one gap.
      EXPECT_LE(std::fabs(x[i] - y[i]), 24.0f * d) << i;
      e2 += (x[i] - y[i]) * (x[i] - y[i]);
      x2 += x[i] * x[i];
    }
    EXPECT_LT(std::sqrt(e2 / x2), 0.12);  // ~4.5 bits of a Gaussian
  }
}

TEST(LegacyQuant, IQ4_NLZeroAndTinyBlocks) {
  float x[32] = {};
  block_iq4_nl b{};
  quantize_row(GgmlType::IQ4_NL, x, &b, 32);
  EXPECT_EQ(b.d, 0);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], 0x88);  // ggml writes index 8 (level 1) times d = 0
  // A block whose values are exactly levels times a power of two is
  // reproduced exactly.
  for (int j = 0; j < 32; ++j) x[j] = kvalues_iq4nl[j % 16] * 0.0625f;
  quantize_row(GgmlType::IQ4_NL, x, &b, 32);
  float y[32];
  dequantize_row(GgmlType::IQ4_NL, &b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]) << j;
}

// ------------------------------------------------ activation quantizers (AVX2 bits)

TEST(LegacyActivation, Q8_0RoundsHalfToEven) {
  // amax = 127: d = 1, id = 1, q = round_half_even(x).
  float x[32] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.49f, -126.5f, 125.5f, 0.0f, -127.0f};
  block_q8_0 b{};
  quantize_row(GgmlType::Q8_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x3c00);  // 1.0
  const int8_t want[12] = {127, 0, 2, 2, 0, -2, -2, 3, -126, 126, 0, -127};
  for (int j = 0; j < 12; ++j) EXPECT_EQ(b.qs[j], want[j]) << j;
  for (int j = 12; j < 32; ++j) EXPECT_EQ(b.qs[j], 0);

  // amax = 254: d = 2 (0x4000), id = 0.5.
  float z[32] = {};
  z[0] = -254.0f;
  z[1] = 5.0f;   // 2.5 -> 2
  z[2] = 7.0f;   // 3.5 -> 4
  z[3] = -9.0f;  // -4.5 -> -4
  quantize_row(GgmlType::Q8_0, z, &b, 32);
  EXPECT_EQ(b.d, 0x4000);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], 4);
  EXPECT_EQ(b.qs[3], -4);
}

TEST(LegacyActivation, Q8_0UsesInverseOf127OverAmax) {
  // amax = 11: 127/11 = 0x1.71745ep+3 but 1/(11/127) = 0x1.71745cp+3. For
  // x = 0x1.0a1428p-3, x * 127/11 is exactly 1.5 (-> 2, half to even) while
  // x * (1/d) is just below 1.5 (-> 1, what quantize_row_q8_0_ref gives).
  float x[32] = {};
  x[0] = 11.0f;
  x[1] = 0x1.0a1428p-3f;
  x[2] = -0x1.0a1428p-3f;
  x[3] = 0x1.6p+2f / 0x1.71745ep+3f;  // lands on 5.5 or next to it
  block_q8_0 b{};
  quantize_row(GgmlType::Q8_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x2d8b);  // fp16(11/127)
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], -2);
  EXPECT_EQ(b.qs[3], static_cast<int8_t>(std::nearbyint(x[3] * (127.f / 11.0f))));
}

TEST(LegacyActivation, Q8_0AndQ8_1AllZeroBlock) {
  float x[64] = {};
  x[40] = 1.0f;  // second block not zero
  block_q8_0 b[2]{};
  quantize_row(GgmlType::Q8_0, x, b, 64);
  EXPECT_EQ(b[0].d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b[0].qs[j], 0);
  EXPECT_EQ(b[1].d, fp32_to_fp16(1.0f / 127.f));
  EXPECT_EQ(b[1].qs[8], 127);
  block_q8_1 c[2]{};
  quantize_row(GgmlType::Q8_1, x, c, 64);
  EXPECT_EQ(c[0].d, 0);
  EXPECT_EQ(c[0].s, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(c[0].qs[j], 0);
  EXPECT_EQ(c[1].s, fp32_to_fp16(1.0f / 127.f * 127.0f));
}

TEST(LegacyActivation, Q8_1SumUsesUnroundedD) {
  // amax = 11 (d = 11/127 unrounded; fp16(d) = 0x2d8b); x[1] = 6 * 11/127
  // gives q = 6, so sum(q) = 133 and s = fp16((11/127) * 133) = 0x49c3,
  // where the fp16-rounded d would give another value.
  float x[32] = {};
  x[0] = 11.0f;
  x[1] = 0x1.0a1428p-1f;
  block_q8_1 b{};
  quantize_row(GgmlType::Q8_1, x, &b, 32);
  EXPECT_EQ(b.d, 0x2d8b);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 6);
  EXPECT_EQ(b.s, 0x49c3);
  EXPECT_EQ(b.s, fp32_to_fp16((11.0f / 127.f) * 133.0f));
  EXPECT_NE(b.s, fp32_to_fp16(fp16_to_fp32(b.d) * 133.0f));
  // Q8_1's quants equal Q8_0's for any input.
  const auto r = random_row(32 * 16, 99, 3.0f);
  const auto q0 = quantize<block_q8_0>(GgmlType::Q8_0, r);
  const auto q1 = quantize<block_q8_1>(GgmlType::Q8_1, r);
  for (size_t i = 0; i < q0.size(); ++i) {
    EXPECT_EQ(q0[i].d, q1[i].d);
    EXPECT_EQ(std::memcmp(q0[i].qs, q1[i].qs, 32), 0);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += q1[i].qs[j];
    // s is within one fp16 step of (rounded d) * sum.
    EXPECT_NEAR(fp16_to_fp32(q1[i].s), fp16_to_fp32(q1[i].d) * sum,
                std::fabs(fp16_to_fp32(q1[i].d) * sum) * 2e-3 + 1e-6);
  }
}

// The AVX2 quantizers equal the scalar reference bit for bit, on Gaussian
// rows of several scales, exact ties, zero blocks, huge and tiny values
// (127/amax overflowing to inf makes every quant -128 in both).
TEST(LegacyActivation, Avx2EqualsScalar) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "CPU without AVX2/FMA/F16C";
  std::vector<float> x;
  for (float scale : {1e-3f, 1.0f, 37.0f, 3e4f}) {
    const auto r = random_row(32 * 64, static_cast<uint32_t>(scale * 10), scale);
    x.insert(x.end(), r.begin(), r.end());
  }
  for (int j = 0; j < 32; ++j) x.push_back(j == 0 ? 127.0f : static_cast<float>(j) - 15.5f);  // ties
  for (int j = 0; j < 32; ++j) x.push_back(0.0f);
  for (int j = 0; j < 32; ++j) x.push_back(j % 2 ? -0.0f : 1e-39f * static_cast<float>(j));  // tiny amax: 127/amax = inf
  for (int j = 0; j < 32; ++j) x.push_back(j == 3 ? -3.0e38f : 1e30f * static_cast<float>(j));
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<block_q8_0> a(n / 32), b(n / 32);
  quantize_row_q8_0(x.data(), a.data(), n);
  quantize_kernel(GgmlType::Q8_0, Isa::avx2)(x.data(), b.data(), n);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(block_q8_0)), 0);
  std::vector<block_q8_1> c(n / 32), e(n / 32);
  quantize_row_q8_1(x.data(), c.data(), n);
  quantize_kernel(GgmlType::Q8_1, Isa::avx2)(x.data(), e.data(), n);
  EXPECT_EQ(std::memcmp(c.data(), e.data(), c.size() * sizeof(block_q8_1)), 0);
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_EQ(std::memcmp(&c[i], &e[i], sizeof(block_q8_1)), 0) << "block " << i;
  }
  // The tiny-amax block: id = 127/amax = inf, x*id is inf or NaN, and
  // the conversion makes every quant -128 (what the AVX2 instructions do).
  const size_t sub = static_cast<size_t>(n / 32) - 2;
  for (int j = 0; j < 32; ++j) EXPECT_EQ(a[sub].qs[j], -128) << j;
}

// ------------------------------------------------ dot products

// Independent model of the documented dot: the integer values are recovered
// from the dequantized floats (value / d is exact for these formats), summed
// per lane of 4, fused-multiply-added per lane, lanes reduced as
// hsum_float_8; or, for Q4_0, Q5_0, Q8_0 and IQ4_NL (block_order), summed per block and
// fused-multiply-added into one accumulator block after block.
float model_dot(const std::vector<float>& wq, const std::vector<float>& wd, const std::vector<float>& aq,
                const std::vector<float>& ad, const std::vector<float>& extra, bool block_order) {
  const size_t nb = wd.size();
  if (block_order) {
    float acc = 0;
    for (size_t b = 0; b < nb; ++b) {
      int64_t s = 0;
      for (size_t i = b * 32; i < b * 32 + 32; ++i) s += static_cast<int64_t>(wq[i]) * static_cast<int64_t>(aq[i]);
      acc = std::fma(static_cast<float>(s), wd[b] * ad[b], acc);
    }
    return acc;
  }
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t b = 0; b < nb; ++b) {
    for (int l = 0; l < 8; ++l) {
      int64_t s = 0;
      for (int k = 0; k < 4; ++k) {
        const size_t i = b * 32 + static_cast<size_t>(4 * l + k);
        s += static_cast<int64_t>(wq[i]) * static_cast<int64_t>(aq[i]);
      }
      acc[l] = std::fma(wd[b] * ad[b], static_cast<float>(s), acc[l]);
    }
  }
  const float r = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
  float summs = 0;
  for (size_t b = 0; b < extra.size(); b += 2) summs = std::fma(extra[b], extra[b + 1], summs);
  return r + summs;
}

struct DotCase {
  GgmlType w_type;
  GgmlType a_type;
  size_t w_block_bytes;
  size_t a_block_bytes;
};

class LegacyDot : public ::testing::TestWithParam<DotCase> {};

TEST_P(LegacyDot, MatchesModelAndFloatDot) {
  const DotCase c = GetParam();
  const int64_t n = 32 * 24;
  const auto xw = random_row(n, 1234, 0.8f);
  const auto xa = random_row(n, 4321, 2.5f);
  std::vector<uint8_t> w(c.w_block_bytes * n / 32), a(c.a_block_bytes * n / 32);
  quantize_row(c.w_type, xw.data(), w.data(), n);
  quantize_row(c.a_type, xa.data(), a.data(), n);
  ASSERT_EQ(vec_dot_type(c.w_type), c.a_type);
  const float got = vec_dot(c.w_type, n, w.data(), a.data());

  std::vector<float> wf(n), af(n);
  dequantize_row(c.w_type, w.data(), wf.data(), n);
  dequantize_row(c.a_type, a.data(), af.data(), n);
  double ref = 0, mag = 0;
  for (int64_t i = 0; i < n; ++i) {
    ref += static_cast<double>(wf[i]) * af[i];
    mag += std::fabs(static_cast<double>(wf[i]) * af[i]);
  }

  // Block scales and integer values, recovered independently.
  const size_t nb = static_cast<size_t>(n / 32);
  std::vector<float> wd(nb), ad(nb), wq(n), aq(n), extra;
  const bool has_min = c.w_type == GgmlType::Q4_1 || c.w_type == GgmlType::Q5_1;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* wb = w.data() + b * c.w_block_bytes;
    const uint8_t* ab = a.data() + b * c.a_block_bytes;
    ggml_fp16_t h;
    std::memcpy(&h, wb, 2);
    wd[b] = fp16_to_fp32(h);
    std::memcpy(&h, ab, 2);
    ad[b] = fp16_to_fp32(h);
    float m = 0;
    if (has_min) {
      std::memcpy(&h, wb + 2, 2);
      m = fp16_to_fp32(h);
      ggml_fp16_t s;
      std::memcpy(&s, ab + 2, 2);
      extra.push_back(m);
      extra.push_back(fp16_to_fp32(s));
    }
    for (int j = 0; j < 32; ++j) {
      const size_t i = b * 32 + static_cast<size_t>(j);
      aq[i] = af[i] / ad[b];
      // IQ4_NL: value / d is the level; other formats: the (offset) integer.
      wq[i] = has_min ? std::nearbyint((wf[i] - m) / wd[b]) : wf[i] / wd[b];
      ASSERT_EQ(aq[i], std::nearbyint(aq[i]));
      if (!has_min) {
        ASSERT_EQ(wq[i], std::nearbyint(wq[i]));
      }
    }
  }
  const bool block_order = c.w_type == GgmlType::Q4_0 || c.w_type == GgmlType::Q5_0 || c.w_type == GgmlType::Q8_0 ||
                           c.w_type == GgmlType::IQ4_NL;
  EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(model_dot(wq, wd, aq, ad, extra, block_order)));

  // Against the float dot of the dequantized rows. Q4_1/Q5_1 take the
  // offset term from the activation's s = fp16(d_a * sum(q_a)), which is
  // rounded to fp16: allow for that rounding (and for fp16(d_a) != d_a).
  double slack = 0;
  for (size_t b = 0; b < extra.size() / 2; ++b) {
    double qsum = 0;
    for (int j = 0; j < 32; ++j) qsum += aq[b * 32 + static_cast<size_t>(j)];
    slack += std::fabs(extra[2 * b]) * (std::fabs(extra[2 * b + 1]) + std::fabs(qsum * ad[b])) / 1024;
  }
  EXPECT_NEAR(got, ref, 1e-6 * mag + 1e-6 + slack);
  if (has_min) {  // the format's own value: sum d_w d_a sum(q_w q_a) + m_w s_a
    double exact = 0;
    for (size_t i = 0; i < wq.size(); ++i) exact += double(wd[i / 32]) * ad[i / 32] * wq[i] * aq[i];
    for (size_t b = 0; b < extra.size(); b += 2) exact += double(extra[b]) * extra[b + 1];
    EXPECT_NEAR(got, exact, 1e-6 * mag + 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Legacy, LegacyDot,
    ::testing::Values(DotCase{GgmlType::Q4_0, GgmlType::Q8_0, sizeof(block_q4_0), sizeof(block_q8_0)},
                      DotCase{GgmlType::Q4_1, GgmlType::Q8_1, sizeof(block_q4_1), sizeof(block_q8_1)},
                      DotCase{GgmlType::Q5_0, GgmlType::Q8_0, sizeof(block_q5_0), sizeof(block_q8_0)},
                      DotCase{GgmlType::Q5_1, GgmlType::Q8_1, sizeof(block_q5_1), sizeof(block_q8_1)},
                      DotCase{GgmlType::Q8_0, GgmlType::Q8_0, sizeof(block_q8_0), sizeof(block_q8_0)},
                      DotCase{GgmlType::IQ4_NL, GgmlType::Q8_0, sizeof(block_iq4_nl), sizeof(block_q8_0)}),
    [](const ::testing::TestParamInfo<DotCase>& i) { return std::string(type_name(i.param.w_type)); });

TEST(LegacyDotExact, Q8_0HandBuilt) {
  // Two blocks, small integers and power-of-two scales: the result is exact.
  block_q8_0 w[2]{}, a[2]{};
  w[0].d = fp32_to_fp16(0.5f);
  a[0].d = fp32_to_fp16(2.0f);
  w[1].d = fp32_to_fp16(0.25f);
  a[1].d = fp32_to_fp16(4.0f);
  int64_t want = 0;
  for (int j = 0; j < 32; ++j) {
    w[0].qs[j] = static_cast<int8_t>(j - 16);
    a[0].qs[j] = static_cast<int8_t>(3 - j);
    w[1].qs[j] = static_cast<int8_t>(127 - j);
    a[1].qs[j] = static_cast<int8_t>(-127 + 2 * j);
    want += (j - 16) * (3 - j) + (127 - j) * (-127 + 2 * j);  // both scale products are 1
  }
  EXPECT_EQ(vec_dot(GgmlType::Q8_0, 64, w, a), static_cast<float>(want));
}

// ------------------------------------------------ against llama-quantize's files

struct FileCase {
  GgmlType type;
  const char* suffix;
  double min_identical;  // fraction of blocks byte-identical to llama-quantize's
};

class LegacyVsLlamaQuantize : public ::testing::TestWithParam<FileCase> {};

TEST_P(LegacyVsLlamaQuantize, ErrorAndIdenticalBlocks) {
  const FileCase c = GetParam();
  const std::string dir = std::string(SYNAPSE_TEST_DATA) + "/models/";
  const gguf::File master = gguf::File::open(dir + "tiny-llama-f32.gguf");
  const gguf::File theirs = gguf::File::open(dir + "tiny-llama-" + c.suffix + ".gguf");
  const size_t block_bytes = type_traits(c.type).type_size;

  int64_t blocks = 0, identical = 0, tensors = 0;
  double err_ours = 0, err_theirs = 0;
  for (const auto& t : theirs.tensors()) {
    if (t.type != c.type) continue;
    const gguf::TensorInfo* src = master.find_tensor(t.name);
    ASSERT_NE(src, nullptr) << t.name;
    ASSERT_EQ(src->type, GgmlType::F32) << t.name;
    ASSERT_EQ(src->ne, t.ne) << t.name;
    ++tensors;
    const int64_t ne0 = t.ne[0], rows = t.n_elements() / ne0;
    const size_t rb = row_size(c.type, ne0);
    std::vector<uint8_t> ours(rb);
    std::vector<float> x(ne0), y_ours(ne0), y_theirs(ne0);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(x.data(), src->data + r * ne0 * 4, ne0 * 4);
      const uint8_t* their_row = t.data + r * rb;
      quantize_row(c.type, x.data(), ours.data(), ne0);
      for (size_t b = 0; b < rb / block_bytes; ++b) {
        ++blocks;
        identical += std::memcmp(ours.data() + b * block_bytes, their_row + b * block_bytes, block_bytes) == 0;
      }
      dequantize_row(c.type, ours.data(), y_ours.data(), ne0);
      dequantize_row(c.type, their_row, y_theirs.data(), ne0);
      for (int64_t i = 0; i < ne0; ++i) {
        err_ours += (double(x[i]) - y_ours[i]) * (double(x[i]) - y_ours[i]);
        err_theirs += (double(x[i]) - y_theirs[i]) * (double(x[i]) - y_theirs[i]);
      }
    }
  }
  ASSERT_GT(tensors, 0);
  const double ratio = std::sqrt(err_ours / err_theirs);
  const double frac = static_cast<double>(identical) / static_cast<double>(blocks);
  std::printf("[ %s ] %lld tensors, %lld blocks: identical %.6f, RMS error ratio ours/llama-quantize %.6f\n",
              c.suffix, static_cast<long long>(tensors), static_cast<long long>(blocks), frac, ratio);
  RecordProperty("identical_fraction", std::to_string(frac));
  if (c.type == GgmlType::Q8_0) {
    // llama-quantize writes Q8_0 with quantize_row_q8_0_ref (id = 1/d,
    // roundf); synapse's Q8_0 quantizer is the AVX2 activation one. The ref
    // rule, written out here, reproduces every block of the file.
    int64_t ref_identical = 0, ref_blocks = 0;
    for (const auto& t : theirs.tensors()) {
      if (t.type != c.type) continue;
      const float* xs = reinterpret_cast<const float*>(master.find_tensor(t.name)->data);
      const auto* blocks_theirs = reinterpret_cast<const block_q8_0*>(t.data);
      for (int64_t b = 0; b < t.n_elements() / 32; ++b, ++ref_blocks) {
        const float* xb = xs + b * 32;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127, id = d != 0 ? 1.0f / d : 0.0f;
        block_q8_0 r{};
        r.d = fp32_to_fp16(d);
        for (int j = 0; j < 32; ++j) r.qs[j] = static_cast<int8_t>(std::roundf(xb[j] * id));
        ref_identical += std::memcmp(&r, &blocks_theirs[b], sizeof r) == 0;
      }
    }
    EXPECT_EQ(ref_identical, ref_blocks);
  }
  RecordProperty("rms_ratio", std::to_string(ratio));
  EXPECT_LE(ratio, 1.02);
  EXPECT_GE(frac, c.min_identical);
}

INSTANTIATE_TEST_SUITE_P(Legacy, LegacyVsLlamaQuantize,
                         ::testing::Values(FileCase{GgmlType::Q4_0, "q4_0", 1.0},
                                           FileCase{GgmlType::Q4_1, "q4_1", 1.0},
                                           FileCase{GgmlType::Q5_0, "q5_0", 1.0},
                                           FileCase{GgmlType::Q5_1, "q5_1", 1.0},
                                           FileCase{GgmlType::Q8_0, "q8_0", 0.9999},
                                           FileCase{GgmlType::IQ4_NL, "iq4_nl", 1.0}),
                         [](const ::testing::TestParamInfo<FileCase>& i) { return std::string(i.param.suffix); });

}  // namespace
}  // namespace synapse::quant

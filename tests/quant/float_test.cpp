// Tests of the float formats (src/quant/float.cpp) and of the F16/BF16
// conversions they rest on (src/quant/fp16.hpp).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "quant/formats.hpp"
#include "quant/quant.hpp"
#include "synapse/gguf.hpp"

namespace synapse::quant {
namespace {

float f(uint32_t bits) { return std::bit_cast<float>(bits); }

// ------------------------------------------------ F16 conversions

TEST(FloatFp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = fp16_to_fp32(static_cast<ggml_fp16_t>(h));
    if (std::isnan(v)) {
      EXPECT_EQ((h & 0x7c00u), 0x7c00u);
      EXPECT_NE((h & 0x3ffu), 0u);
      const ggml_fp16_t back = fp32_to_fp16(v);
      EXPECT_EQ(back & 0x7c00u, 0x7c00u);
      EXPECT_NE(back & 0x3ffu, 0u) << h;  // still a NaN
      EXPECT_EQ(back & 0x8000u, h & 0x8000u);
    } else {
      EXPECT_EQ(fp32_to_fp16(v), h) << h;
    }
  }
}

TEST(FloatFp16, KnownValues) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(0.5f), 0x3800);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);   // largest finite half
  EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);   // smallest normal
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);   // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x03ff), 0x3ffp-24f);  // largest subnormal
  EXPECT_EQ(fp16_to_fp32(0x3555), 0x1.554p-2f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
}

TEST(FloatFp16, RoundsHalfToEven) {
  // Ties between neighbouring halves go to the even mantissa.
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);        // 1 + half ulp -> 1
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);    // 1 + 1.5 ulp -> 1 + 2 ulp
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // just above the tie
  EXPECT_EQ(fp32_to_fp16(-(1.0f + 3 * 0x1p-11f)), 0xbc02);
  // Subnormal ties: 0.5 and 1.5 units of 2^-24.
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(fp32_to_fp16(0x1.000002p-25f), 0x0001);  // just above half a unit
  EXPECT_EQ(fp32_to_fp16(0x1p-26f), 0x0000);
  // Largest subnormal + half unit rounds up into the smallest normal.
  EXPECT_EQ(fp32_to_fp16(0x3ffp-24f + 0x1p-25f), 0x0400);
  // Overflow: 65520 is the tie between 65504 and 65536 (inf): even -> inf.
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-1e10f), 0xfc00);
}

TEST(FloatFp16, InfAndNan) {
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(std::isinf(fp16_to_fp32(0x7c00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
  // F16C keeps a NaN quiet and keeps the top mantissa bits.
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN()), 0x7e00);
  EXPECT_EQ(fp32_to_fp16(f(0x7f800001u)), 0x7e00);  // signalling NaN made quiet
  EXPECT_EQ(fp32_to_fp16(f(0xffc02000u)), 0xfe01);
}

// ------------------------------------------------ BF16 conversions

TEST(FloatBf16, RoundTripAndTies) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = bf16_to_fp32(static_cast<ggml_bf16_t>(h));
    EXPECT_EQ(std::bit_cast<uint32_t>(v), h << 16);
    if (!std::isnan(v)) {
      EXPECT_EQ(fp32_to_bf16(v), h);
    }
  }
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(f(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(fp32_to_bf16(f(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(fp32_to_bf16(f(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(fp32_to_bf16(f(0x00018000u)), 0x0002);  // subnormal tie -> even
  EXPECT_EQ(fp32_to_bf16(f(0x7f7fffffu)), 0x7f80);  // max float rounds to inf
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(f(0x7f800001u)), 0x7fc0);  // NaN made quiet (ggml: bits | 64)
  EXPECT_EQ(fp32_to_bf16(f(0xff810000u)), 0xffc1);
}

// ------------------------------------------------ rows

TEST(FloatRows, ConvertThroughDispatch) {
  const float x[5] = {1.0f, -0.1f, 65520.0f, 0x1p-25f, 3.14159f};
  ggml_fp16_t h[5];
  quantize_row(GgmlType::F16, x, h, 5);
  EXPECT_EQ(h[0], 0x3c00);
  EXPECT_EQ(h[1], fp32_to_fp16(-0.1f));
  EXPECT_EQ(h[2], 0x7c00);
  EXPECT_EQ(h[3], 0x0000);
  float y[5];
  dequantize_row(GgmlType::F16, h, y, 5);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[4], 0x1.92p+1f);  // 3.140625, nearest half to pi-ish
  ggml_bf16_t b[5];
  quantize_row(GgmlType::BF16, x, b, 5);
  EXPECT_EQ(b[0], 0x3f80);
  dequantize_row(GgmlType::BF16, b, y, 5);
  EXPECT_EQ(y[2], 65536.0f);
  EXPECT_EQ(y[4], 3.140625f);
  float z[5];
  quantize_row(GgmlType::F32, x, z, 5);
  EXPECT_EQ(std::memcmp(x, z, sizeof x), 0);
  dequantize_row(GgmlType::F32, z, y, 5);
  EXPECT_EQ(std::memcmp(x, y, sizeof x), 0);
}

// ------------------------------------------------ dots

// The documented order, written independently: lane i % 8 with fma over the
// first n - n % 8 elements, hsum_float_8, then the tail with fma.
// BF16's order: 8 lanes, hsum_float_8's tree, the tail fused.
float model_dot8(const std::vector<float>& w, const std::vector<float>& a) {
  const size_t n = w.size(), n8 = n - n % 8;
  float lane[8] = {};
  for (size_t i = 0; i < n8; ++i) lane[i % 8] = std::fma(w[i], a[i], lane[i % 8]);
  float s = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  for (size_t i = n8; i < n; ++i) s = std::fma(w[i], a[i], s);
  return s;
}

// _mm512_reduce_add_ps (GCC 12): high 8 + low 8, then hsum_float_8's tree.
float model_reduce16(const float* l) {
  float h[8];
  for (int i = 0; i < 8; ++i) h[i] = l[i + 8] + l[i];
  return ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
}

// F32 (f16 false) and F16 (true) in llama.cpp v0.5.0's AVX-512 orders:
// tinyBLAS<16> for n % 16 == 0, else ggml_vec_dot_f32 / _f16.
float model_dot(const std::vector<float>& w, const std::vector<float>& a, bool f16 = false) {
  const size_t n = w.size();
  if (n % 16 == 0) {
    float lane[16] = {};
    for (size_t i = 0; i < n; ++i) lane[i % 16] = std::fma(w[i], a[i], lane[i % 16]);
    return model_reduce16(lane);
  }
  const size_t np = n - n % 64;
  float acc[4][16] = {};
  for (size_t i = 0; i < np; ++i) acc[(i / 16) % 4][i % 16] = std::fma(w[i], a[i], acc[(i / 16) % 4][i % 16]);
  float x[16];
  for (int l = 0; l < 16; ++l) x[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  const float r = model_reduce16(x);
  if (f16) {
    double s = r;
    for (size_t i = np; i < n; ++i) s += double(w[i] * a[i]);
    return static_cast<float>(s);
  }
  float s = r;
  size_t i = np;
  for (; i + 16 <= n; i += 16)
    for (size_t l = 0; l < 16; ++l) s += w[i + l] * a[i + l];
  if (i + 8 <= n)
    for (size_t e = i + 8; i < e; ++i) s += w[i] * a[i];
  for (; i < n; ++i) s = std::fma(w[i], a[i], s);
  return s;
}

TEST(FloatDot, ExactOnSmallIntegers) {
  std::vector<float> w(37), a(37);
  double want = 0;
  for (int i = 0; i < 37; ++i) {
    w[i] = static_cast<float>(i % 7 - 3);
    a[i] = static_cast<float>(11 - i);
    want += double(w[i]) * a[i];
  }
  EXPECT_EQ(vec_dot(GgmlType::F32, 37, w.data(), a.data()), static_cast<float>(want));
  std::vector<ggml_fp16_t> wh(37), ah(37);
  std::vector<ggml_bf16_t> wb(37), ab(37);
  quantize_row(GgmlType::F16, w.data(), wh.data(), 37);
  quantize_row(GgmlType::F16, a.data(), ah.data(), 37);
  quantize_row(GgmlType::BF16, w.data(), wb.data(), 37);
  quantize_row(GgmlType::BF16, a.data(), ab.data(), 37);
  EXPECT_EQ(vec_dot(GgmlType::F16, 37, wh.data(), ah.data()), static_cast<float>(want));
  EXPECT_EQ(vec_dot(GgmlType::BF16, 37, wb.data(), ab.data()), static_cast<float>(want));
}

TEST(FloatDot, ReductionOrderIsTheDocumentedOne) {
  // n = 32 (tinyBLAS<16>): lane 0 holds 2^24, lane 8 holds 1 + 1 = 2;
  // the reduction adds lane 8 to lane 0 first (exact: 2^24 + 2), lane 4's 1
  // then makes 2^24 + 3, a tie that rounds to even, 2^24 + 4. A
  // left-to-right sum would lose every 1: 2^24.
  std::vector<float> w(32, 0.0f), a(32, 1.0f);
  w[0] = 0x1p24f;
  w[8] = 1.0f;
  w[24] = 1.0f;
  w[4] = 1.0f;
  EXPECT_EQ(vec_dot(GgmlType::F32, 32, w.data(), a.data()), 0x1p24f + 4.0f);
  EXPECT_EQ(model_dot(w, a), 0x1p24f + 4.0f);
  // n = 17 (ggml_vec_dot_f32, no whole step of 64): all 17 in the tail, a
  // plain left-to-right float sum (16 rounded products, then one fma):
  // 2^24 + 1 + ... loses each 1.
  std::vector<float> w2(17, 1.0f), a2(17, 1.0f);
  w2[0] = 0x1p24f;
  EXPECT_EQ(vec_dot(GgmlType::F32, 17, w2.data(), a2.data()), 0x1p24f);
  EXPECT_EQ(model_dot(w2, a2), 0x1p24f);
}

TEST(FloatDot, RandomRowsMatchModelBitForBit) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int n : {1, 7, 8, 9, 16, 44, 64, 172, 255, 1024}) {
    std::vector<float> w(n), a(n);
    for (int i = 0; i < n; ++i) {
      w[i] = dist(rng);
      a[i] = dist(rng);
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(vec_dot(GgmlType::F32, n, w.data(), a.data())),
              std::bit_cast<uint32_t>(model_dot(w, a)))
        << n;
    double ref = 0, mag = 0;
    for (int i = 0; i < n; ++i) {
      ref += double(w[i]) * a[i];
      mag += std::fabs(double(w[i]) * a[i]);
    }
    EXPECT_NEAR(vec_dot(GgmlType::F32, n, w.data(), a.data()), ref, 1e-6 * mag);

    // F16 and BF16: the model on the rounded rows.
    std::vector<ggml_fp16_t> wh(n), ah(n);
    std::vector<ggml_bf16_t> wb(n), ab(n);
    quantize_row(GgmlType::F16, w.data(), wh.data(), n);
    quantize_row(GgmlType::F16, a.data(), ah.data(), n);
    quantize_row(GgmlType::BF16, w.data(), wb.data(), n);
    quantize_row(GgmlType::BF16, a.data(), ab.data(), n);
    std::vector<float> wr(n), ar(n);
    dequantize_row(GgmlType::F16, wh.data(), wr.data(), n);
    dequantize_row(GgmlType::F16, ah.data(), ar.data(), n);
    EXPECT_EQ(std::bit_cast<uint32_t>(vec_dot(GgmlType::F16, n, wh.data(), ah.data())),
              std::bit_cast<uint32_t>(model_dot(wr, ar, true)))
        << n;
    dequantize_row(GgmlType::BF16, wb.data(), wr.data(), n);
    dequantize_row(GgmlType::BF16, ab.data(), ar.data(), n);
    EXPECT_EQ(std::bit_cast<uint32_t>(vec_dot(GgmlType::BF16, n, wb.data(), ab.data())),
              std::bit_cast<uint32_t>(model_dot8(wr, ar)))
        << n;
  }
}

// llama-quantize's F16 and BF16 files of tiny-llama hold, tensor by tensor,
// exactly what our row conversions make of the F32 master.
TEST(FloatRows, MatchLlamaQuantizeFiles) {
  const std::string dir = std::string(SYNAPSE_TEST_DATA) + "/models/";
  const gguf::File master = gguf::File::open(dir + "tiny-llama-f32.gguf");
  for (const auto& [type, name] : {std::pair{GgmlType::F16, "tiny-llama-f16.gguf"},
                                   std::pair{GgmlType::BF16, "tiny-llama-bf16.gguf"}}) {
    const gguf::File theirs = gguf::File::open(dir + name);
    int tensors = 0;
    for (const auto& t : theirs.tensors()) {
      if (t.type != type) continue;
      const gguf::TensorInfo* src = master.find_tensor(t.name);
      ASSERT_NE(src, nullptr) << t.name;
      ASSERT_EQ(src->type, GgmlType::F32);
      const int64_t n = t.n_elements();
      std::vector<float> x(static_cast<size_t>(n));
      std::memcpy(x.data(), src->data, static_cast<size_t>(n) * 4);
      std::vector<uint16_t> ours(static_cast<size_t>(n));
      quantize_row(type, x.data(), ours.data(), n);
      EXPECT_EQ(std::memcmp(ours.data(), t.data, static_cast<size_t>(n) * 2), 0) << name << " " << t.name;
      ++tensors;
    }
    EXPECT_EQ(tensors, 16) << name;
  }
}

TEST(FloatDot, VecDotTypes) {
  EXPECT_EQ(vec_dot_type(GgmlType::F32), GgmlType::F32);
  EXPECT_EQ(vec_dot_type(GgmlType::F16), GgmlType::F16);
  EXPECT_EQ(vec_dot_type(GgmlType::BF16), GgmlType::BF16);
}

}  // namespace
}  // namespace synapse::quant

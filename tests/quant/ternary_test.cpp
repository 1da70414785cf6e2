// TQ1_0 and TQ2_0 (src/quant/ternary.cpp): layouts, golden bytes of the
// reference quantizer, and the dot products with Q8_K.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/formats.hpp"
#include "quant/quant.hpp"
#include "synapse/types.hpp"

namespace synapse::quant {
namespace {

// Trit k (0 = most significant of 5) of a TQ1_0 byte as -1, 0, 1: the byte
// is ceil(v * 256 / 243) for v = sum t_k 3^(4-k), so the trit is the
// integer part of 3 * frac(byte * 3^k / 256).
int trit(uint8_t byte, int k) {
  int p = 1;
  for (int i = 0; i < k; ++i) p *= 3;
  return (((byte * p) & 255) * 3 >> 8) - 1;
}

// Element-wise reading of block_tq1_0: values 0..159 in qs[0..32) (value v:
// byte v%32, trit v/32), 160..239 in qs[32..48) (byte 32 + u%16, trit u/16),
// 240..255 in qh[0..4) (byte u%4, trit u/4).
int tq1_value(const block_tq1_0& b, int v) {
  if (v < 160) return trit(b.qs[v % 32], v / 32);
  if (v < 240) return trit(b.qs[32 + (v - 160) % 16], (v - 160) / 16);
  return trit(b.qh[(v - 240) % 4], (v - 240) / 4);
}

// block_tq2_0: value v in byte 32*(v/128) + v%32, bits 2*((v%128)/32), stored + 1.
int tq2_value(const block_tq2_0& b, int v) {
  return ((b.qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3) - 1;
}

std::vector<float> gaussian(int64_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

// ---------------------------------------------------------------------------
// TQ1_0

TEST(TernaryTQ1_0, HandBuiltBlock) {
  block_tq1_0 b{};
  std::memset(b.qs, 128, sizeof(b.qs));  // trits 1,1,1,1,1: all zero
  std::memset(b.qh, 128, sizeof(b.qh));
  b.d = fp32_to_fp16(0.5f);
  b.qs[0] = 187;  // v = 177 = trits (2,0,1,2,0): values 0,32,64,96,128 = +1,-1,0,+1,-1
  b.qs[32] = 255; // v = 242: values 160,176,192,208,224 = +1
  b.qh[3] = 0;    // values 243,247,251,255 = -1 (qh holds 4 trits)
  float y[QK_K];
  dequantize_row(GgmlType::TQ1_0, &b, y, QK_K);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[32], -0.5f);
  EXPECT_EQ(y[64], 0.0f);
  EXPECT_EQ(y[96], 0.5f);
  EXPECT_EQ(y[128], -0.5f);
  for (int v : {160, 176, 192, 208, 224}) EXPECT_EQ(y[v], 0.5f) << v;
  for (int v : {243, 247, 251, 255}) EXPECT_EQ(y[v], -0.5f) << v;
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[240], 0.0f);
}

TEST(TernaryTQ1_0, QuantizeGoldenBytes) {
  std::vector<float> x(QK_K, 0.f);
  x[0] = 2.0f;    // amax: d = 2, values / 2 rounded half away from zero
  x[32] = -1.0f;  // -0.5 -> -1 (lroundf, not ties-to-even)
  x[64] = 1.0f;   // 0.5 -> +1
  x[96] = 0.9f;   // 0.45 -> 0
  x[128] = -2.0f;
  for (int v = 160; v < 240; v += 16) x[v] = 1.5f;  // 0.75 -> +1
  x[255] = -1.9f;
  block_tq1_0 b;
  quantize_row(GgmlType::TQ1_0, x.data(), &b, QK_K);
  EXPECT_EQ(fp16_to_fp32(b.d), 2.0f);
  // trits (2,0,2,1,0): v = 162 + 18 + 3 = 183 -> ceil(183*256/243) = 193
  EXPECT_EQ(b.qs[0], 193);
  EXPECT_EQ(b.qs[1], 128);   // all zero: v = 121
  EXPECT_EQ(b.qs[32], 255);  // all +1: v = 242
  // qh byte 0 holds values 240, 244, 248, 252, all zero (trit 1), then a zero
  // fifth trit: v = (27 + 9 + 3 + 1) * 3 = 120 -> ceil(120*256/243) = 127
  EXPECT_EQ(b.qh[0], 127);
  // qh byte 3 holds values 243, 247, 251, 255: (1,1,1,0) and a zero fifth trit:
  // v = (1*27 + 1*9 + 1*3 + 0) * 3 = 117 -> ceil(117*256/243) = 124
  EXPECT_EQ(b.qh[3], 124);
  float y[QK_K];
  dequantize_row(GgmlType::TQ1_0, &b, y, QK_K);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[32], -2.0f);
  EXPECT_EQ(y[64], 2.0f);
  EXPECT_EQ(y[96], 0.0f);
  EXPECT_EQ(y[255], -2.0f);
}

TEST(TernaryTQ1_0, RandomBytesMatchLayout) {
  std::mt19937 rng(5);
  std::vector<block_tq1_0> b(3);
  for (auto& blk : b) {
    for (auto& q : blk.qs) q = static_cast<uint8_t>(rng());
    for (auto& q : blk.qh) q = static_cast<uint8_t>(rng());
    blk.d = fp32_to_fp16(0.01f + 0.001f * static_cast<float>(rng() % 100));
  }
  std::vector<float> y(3 * QK_K);
  dequantize_row(GgmlType::TQ1_0, b.data(), y.data(), 3 * QK_K);
  for (int i = 0; i < 3; ++i)
    for (int v = 0; v < QK_K; ++v)
      ASSERT_EQ(y[i * QK_K + v], static_cast<float>(tq1_value(b[i], v)) * fp16_to_fp32(b[i].d)) << i << " " << v;
}

// ---------------------------------------------------------------------------
// TQ2_0

TEST(TernaryTQ2_0, HandBuiltBlock) {
  block_tq2_0 b{};
  std::memset(b.qs, 0x55, sizeof(b.qs));  // all stored 1: zero
  b.d = fp32_to_fp16(0.25f);
  b.qs[0] = 0b00100110;  // values 0: 2-1, 32: 1-1, 64: 2-1, 96: 0-1
  b.qs[63] = 0b11010101; // value 255 (byte 63, bits 6-7): 3-1 = 2 (never written by the quantizer)
  float y[QK_K];
  dequantize_row(GgmlType::TQ2_0, &b, y, QK_K);
  EXPECT_EQ(y[0], 0.25f);
  EXPECT_EQ(y[32], 0.0f);
  EXPECT_EQ(y[64], 0.25f);
  EXPECT_EQ(y[96], -0.25f);
  EXPECT_EQ(y[255], 0.5f);
  EXPECT_EQ(y[1], 0.0f);
}

TEST(TernaryTQ2_0, QuantizeGoldenBytes) {
  std::vector<float> x(QK_K, 0.f);
  x[0] = -4.0f;  // amax 4
  x[32] = 2.0f;  // 0.5 -> +1 (half away from zero)
  x[64] = -1.9f; // -0.475 -> 0
  x[96] = 4.0f;
  x[255] = -2.0f;
  block_tq2_0 b;
  quantize_row(GgmlType::TQ2_0, x.data(), &b, QK_K);
  EXPECT_EQ(fp16_to_fp32(b.d), 4.0f);
  EXPECT_EQ(b.qs[0], 0 | (2 << 2) | (1 << 4) | (2 << 6));
  EXPECT_EQ(b.qs[1], 0x55);
  EXPECT_EQ(b.qs[63], 1 | (1 << 2) | (1 << 4) | (0 << 6));
}

TEST(TernaryTQ2_0, RandomBytesMatchLayout) {
  std::mt19937 rng(6);
  std::vector<block_tq2_0> b(3);
  for (auto& blk : b) {
    for (auto& q : blk.qs) q = static_cast<uint8_t>(rng());
    blk.d = fp32_to_fp16(0.02f);
  }
  std::vector<float> y(3 * QK_K);
  dequantize_row(GgmlType::TQ2_0, b.data(), y.data(), 3 * QK_K);
  for (int i = 0; i < 3; ++i)
    for (int v = 0; v < QK_K; ++v)
      ASSERT_EQ(y[i * QK_K + v], static_cast<float>(tq2_value(b[i], v)) * fp16_to_fp32(b[i].d)) << i << " " << v;
}

// ---------------------------------------------------------------------------
// Both formats

TEST(TernaryRoundTrip, TernaryDataIsExact) {
  // Values in {-a, 0, a} per block with a exact in F16: both formats are lossless.
  std::mt19937 rng(9);
  const float a[] = {0.75f, 0.015625f, 3.0f};
  std::vector<float> x(3 * QK_K);
  for (int i = 0; i < 3; ++i) {
    for (int v = 0; v < QK_K; ++v) x[i * QK_K + v] = a[i] * static_cast<float>(static_cast<int>(rng() % 3) - 1);
    x[i * QK_K + 7] = a[i];  // make sure the block's amax is a
  }
  for (GgmlType t : {GgmlType::TQ1_0, GgmlType::TQ2_0}) {
    std::vector<uint8_t> q(row_size(t, 3 * QK_K));
    quantize_row(t, x.data(), q.data(), 3 * QK_K);
    std::vector<float> y(3 * QK_K);
    dequantize_row(t, q.data(), y.data(), 3 * QK_K);
    for (int j = 0; j < 3 * QK_K; ++j) ASSERT_EQ(y[j], x[j]) << type_name(t) << " " << j;
  }
}

TEST(TernaryRoundTrip, ZeroBlockAndGaussianBound) {
  for (GgmlType t : {GgmlType::TQ1_0, GgmlType::TQ2_0}) {
    std::vector<float> z(QK_K, 0.f);
    std::vector<uint8_t> q(row_size(t, QK_K));
    quantize_row(t, z.data(), q.data(), QK_K);
    std::vector<float> y(QK_K, 1.f);
    dequantize_row(t, q.data(), y.data(), QK_K);
    for (float v : y) ASSERT_EQ(v, 0.f) << type_name(t);

    // Gaussian data: |error| <= d/2 wherever |x| <= d/2 rounds to 0, and the
    // ternary grid {-d, 0, d} leaves at most d/2 error everywhere.
    const auto x = gaussian(8 * QK_K, 1.f, 3);
    std::vector<uint8_t> qg(row_size(t, 8 * QK_K));
    quantize_row(t, x.data(), qg.data(), 8 * QK_K);
    std::vector<float> yg(8 * QK_K);
    dequantize_row(t, qg.data(), yg.data(), 8 * QK_K);
    for (int i = 0; i < 8; ++i) {
      float amax = 0;
      for (int v = 0; v < QK_K; ++v) amax = std::max(amax, std::fabs(x[i * QK_K + v]));
      for (int v = 0; v < QK_K; ++v)
        ASSERT_LE(std::fabs(yg[i * QK_K + v] - x[i * QK_K + v]), 0.501f * amax) << type_name(t);
    }
  }
}

// vec_dot: one integer sum per block, sumf += sum * (d_w * d_8) (ggml's
// ggml_vec_dot_tq{1,2}_0_q8_K), and close to the double dot of dequantized rows.
TEST(TernaryVecDot, MatchesIntegerReadingAndDequantizedDot) {
  const int nb = 6;
  const int64_t n = nb * QK_K;
  const auto wf = gaussian(n, 0.05f, 21);
  const auto xf = gaussian(n, 1.f, 22);
  std::vector<block_q8_K> a(nb);
  quantize_row(GgmlType::Q8_K, xf.data(), a.data(), n);
  std::vector<float> ad(n);
  dequantize_row(GgmlType::Q8_K, a.data(), ad.data(), n);
  for (GgmlType t : {GgmlType::TQ1_0, GgmlType::TQ2_0}) {
    EXPECT_EQ(vec_dot_type(t), GgmlType::Q8_K);
    std::vector<uint8_t> w(row_size(t, n));
    quantize_row(t, wf.data(), w.data(), n);
    float expect = 0;
    for (int i = 0; i < nb; ++i) {
      int sum = 0;
      float dw;
      if (t == GgmlType::TQ1_0) {
        const auto& b = reinterpret_cast<const block_tq1_0*>(w.data())[i];
        for (int v = 0; v < QK_K; ++v) sum += tq1_value(b, v) * a[i].qs[v];
        dw = fp16_to_fp32(b.d);
      } else {
        const auto& b = reinterpret_cast<const block_tq2_0*>(w.data())[i];
        for (int v = 0; v < QK_K; ++v) sum += tq2_value(b, v) * a[i].qs[v];
        dw = fp16_to_fp32(b.d);
      }
      expect += static_cast<float>(sum) * (dw * a[i].d);
    }
    const float got = vec_dot(t, n, w.data(), a.data());
    EXPECT_EQ(got, expect) << type_name(t);

    std::vector<float> wd(n);
    dequantize_row(t, w.data(), wd.data(), n);
    double ref = 0, mag = 0;
    for (int64_t j = 0; j < n; ++j) {
      ref += static_cast<double>(wd[j]) * ad[j];
      mag += std::fabs(static_cast<double>(wd[j]) * ad[j]);
    }
    EXPECT_NEAR(got, ref, 2e-6 * mag) << type_name(t);
  }
}

}  // namespace
}  // namespace synapse::quant

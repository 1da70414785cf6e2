// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K and IQ4_XS (src/quant/k_quants.cpp).
//
// The block layouts are checked against an element-wise reading of
// ggml-common.h's block_* definitions written here independently of the
// kernels (value v of a block -> integer quant, integer scale, integer min);
// the dot products against an integer computation from that reading,
// combined in ggml's float order, and against a double dot of dequantized rows.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/formats.hpp"
#include "quant/quant.hpp"
#include "synapse/error.hpp"
#include "synapse/types.hpp"

namespace synapse::quant {
namespace {

// ---------------------------------------------------------------------------
// Element-wise reading of each format: value v (0..255) of a block is
// (d * scale(v)) * q(v) - dmin * min(v).

struct Spec {
  GgmlType type;
  size_t block_bytes;
  float (*d)(const uint8_t*);
  float (*dmin)(const uint8_t*);
  int (*q)(const uint8_t*, int v);
  int (*scale)(const uint8_t*, int v);
  int (*min)(const uint8_t*, int v);
};

template <typename B>
const B& as(const uint8_t* p) {
  return *reinterpret_cast<const B*>(p);
}

// Q4_K / Q5_K: 6-bit scale and min of sub-block j (0..7). Scales 0-3 and
// mins 0-3 are the low 6 bits of bytes 0-3 and 4-7; scale/min 4-7 have their
// low nibbles in bytes 8-11 (scale low, min high) and their top 2 bits in
// bits 6-7 of bytes 0-3 (scales) and 4-7 (mins).
int k4_scale(const uint8_t* s, int j) { return j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4); }
int k4_min(const uint8_t* s, int j) { return j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4); }

// Q2_K/Q3_K 2-bit field of value v: half h = v/128 uses bytes 32h..32h+31;
// within the half, value 32g + l sits in byte l at bits 2g.
int two_bits(const uint8_t* qs, int v) { return (qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3; }

const Spec kSpecs[] = {
    {GgmlType::Q2_K, sizeof(block_q2_K), [](const uint8_t* b) { return fp16_to_fp32(as<block_q2_K>(b).d); },
     [](const uint8_t* b) { return fp16_to_fp32(as<block_q2_K>(b).dmin); },
     [](const uint8_t* b, int v) { return two_bits(as<block_q2_K>(b).qs, v); },
     [](const uint8_t* b, int v) { return as<block_q2_K>(b).scales[v / 16] & 15; },
     [](const uint8_t* b, int v) { return as<block_q2_K>(b).scales[v / 16] >> 4; }},
    {GgmlType::Q3_K, sizeof(block_q3_K), [](const uint8_t* b) { return fp16_to_fp32(as<block_q3_K>(b).d); },
     [](const uint8_t*) { return 0.f; },
     [](const uint8_t* b, int v) {
       const auto& x = as<block_q3_K>(b);
       const bool high = (x.hmask[v % 32] >> (v / 32)) & 1;  // bit v/32 of byte v%32
       return two_bits(x.qs, v) - (high ? 0 : 4);
     },
     [](const uint8_t* b, int v) {
       const auto& x = as<block_q3_K>(b);
       const int j = v / 16;
       const int lo = (x.scales[j % 8] >> (4 * (j / 8))) & 15;
       const int hi = (x.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
       return (lo | (hi << 4)) - 32;
     },
     [](const uint8_t*, int) { return 0; }},
    {GgmlType::Q4_K, sizeof(block_q4_K), [](const uint8_t* b) { return fp16_to_fp32(as<block_q4_K>(b).d); },
     [](const uint8_t* b) { return fp16_to_fp32(as<block_q4_K>(b).dmin); },
     [](const uint8_t* b, int v) {  // 64 values per 32 bytes: low nibbles, then high
       return (as<block_q4_K>(b).qs[32 * (v / 64) + v % 32] >> (4 * ((v % 64) / 32))) & 15;
     },
     [](const uint8_t* b, int v) { return k4_scale(as<block_q4_K>(b).scales, v / 32); },
     [](const uint8_t* b, int v) { return k4_min(as<block_q4_K>(b).scales, v / 32); }},
    {GgmlType::Q5_K, sizeof(block_q5_K), [](const uint8_t* b) { return fp16_to_fp32(as<block_q5_K>(b).d); },
     [](const uint8_t* b) { return fp16_to_fp32(as<block_q5_K>(b).dmin); },
     [](const uint8_t* b, int v) {
       const auto& x = as<block_q5_K>(b);
       const int lo = (x.qs[32 * (v / 64) + v % 32] >> (4 * ((v % 64) / 32))) & 15;
       return lo | (((x.qh[v % 32] >> (v / 32)) & 1) << 4);  // bit v/32 of qh[v%32]
     },
     [](const uint8_t* b, int v) { return k4_scale(as<block_q5_K>(b).scales, v / 32); },
     [](const uint8_t* b, int v) { return k4_min(as<block_q5_K>(b).scales, v / 32); }},
    {GgmlType::Q6_K, sizeof(block_q6_K), [](const uint8_t* b) { return fp16_to_fp32(as<block_q6_K>(b).d); },
     [](const uint8_t*) { return 0.f; },
     [](const uint8_t* b, int v) {
       // Per 128 values (c): group k = 0..3 of 32; low nibble from ql[64c + l + 32(k&1)]
       // (nibble k>>1), top 2 bits from qh[32c + l] bits 2k.
       const auto& x = as<block_q6_K>(b);
       const int c = v / 128, k = (v % 128) / 32, l = v % 32;
       const int lo = (x.ql[64 * c + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 15;
       const int hi = (x.qh[32 * c + l] >> (2 * k)) & 3;
       return (lo | (hi << 4)) - 32;
     },
     [](const uint8_t* b, int v) { return static_cast<int>(as<block_q6_K>(b).scales[v / 16]); },
     [](const uint8_t*, int) { return 0; }},
    {GgmlType::IQ4_XS, sizeof(block_iq4_xs), [](const uint8_t* b) { return fp16_to_fp32(as<block_iq4_xs>(b).d); },
     [](const uint8_t*) { return 0.f; },
     [](const uint8_t* b, int v) {  // per 32: byte 16*ib + v%16, low nibble first 16
       const auto& x = as<block_iq4_xs>(b);
       return static_cast<int>(kvalues_iq4nl[(x.qs[16 * (v / 32) + v % 16] >> (4 * ((v % 32) / 16))) & 15]);
     },
     [](const uint8_t* b, int v) {
       const auto& x = as<block_iq4_xs>(b);
       const int ib = v / 32;
       return (((x.scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((x.scales_h >> (2 * ib)) & 3) << 4)) - 32;
     },
     [](const uint8_t*, int) { return 0; }},
};

const Spec& spec_of(GgmlType t) {
  for (const Spec& s : kSpecs)
    if (s.type == t) return s;
  throw std::logic_error("no spec");
}

float spec_value(const Spec& s, const uint8_t* b, int v) {
  return (s.d(b) * s.scale(b, v)) * s.q(b, v) - s.dmin(b) * s.min(b, v);
}

// Random block bytes with chosen F16 scales (random bytes are valid blocks
// for every format here).
std::vector<uint8_t> random_blocks(const Spec& s, int nb, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(s.block_bytes * nb);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < nb; ++i) {
    uint8_t* blk = bytes.data() + i * s.block_bytes;
    const ggml_fp16_t d = fp32_to_fp16(0.001f * (i + 1)), dmin = fp32_to_fp16(0.0007f * (i + 2));
    switch (s.type) {
      case GgmlType::Q2_K: reinterpret_cast<block_q2_K*>(blk)->d = d; reinterpret_cast<block_q2_K*>(blk)->dmin = dmin; break;
      case GgmlType::Q3_K: reinterpret_cast<block_q3_K*>(blk)->d = d; break;
      case GgmlType::Q4_K: reinterpret_cast<block_q4_K*>(blk)->d = d; reinterpret_cast<block_q4_K*>(blk)->dmin = dmin; break;
      case GgmlType::Q5_K: reinterpret_cast<block_q5_K*>(blk)->d = d; reinterpret_cast<block_q5_K*>(blk)->dmin = dmin; break;
      case GgmlType::Q6_K: reinterpret_cast<block_q6_K*>(blk)->d = d; break;
      case GgmlType::IQ4_XS: reinterpret_cast<block_iq4_xs*>(blk)->d = d; break;
      default: break;
    }
  }
  return bytes;
}

std::vector<float> gaussian(int64_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

const GgmlType kWeightTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                                 GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS};

// ---------------------------------------------------------------------------
// Dequantization of hand-built blocks: literal values.

TEST(KQuantDequant, Q2_KHandBuilt) {
  block_q2_K b{};
  b.d = fp32_to_fp16(0.5f);
  b.dmin = fp32_to_fp16(0.25f);
  b.scales[0] = 0x35;        // sub-block 0: scale 5, min 3
  b.scales[6] = 0x12;        // sub-block 6: scale 2, min 1
  b.qs[0] = 0b10000011;      // value 0: q 3; value 96: q 2
  float y[QK_K];
  dequantize_row(GgmlType::Q2_K, &b, y, QK_K);
  EXPECT_EQ(y[0], 6.75f);    // 0.5*5*3 - 0.25*3
  EXPECT_EQ(y[1], -0.75f);   // q 0: -dmin*m
  EXPECT_EQ(y[96], 1.75f);   // 0.5*2*2 - 0.25*1
  EXPECT_EQ(y[255], 0.0f);
}

TEST(KQuantDequant, Q3_KHandBuilt) {
  block_q3_K b{};
  b.d = fp32_to_fp16(1.0f);
  b.scales[0] = 0x3E;   // scale 0 low nibble 14, scale 8 low nibble 3
  b.scales[8] = 0x21;   // scale 0 top bits 1 (-> 30), scale 8 top bits 2 (-> 35)
  b.qs[0] = 0x03;       // value 0: low bits 3
  b.hmask[0] = 0x01;    // value 0: high bit set -> q = 3; value 128: high bit clear
  b.qs[32] = 0x01;      // value 128: low bits 1 -> q = 1 - 4
  float y[QK_K];
  dequantize_row(GgmlType::Q3_K, &b, y, QK_K);
  EXPECT_EQ(y[0], -6.0f);   // (30-32) * 3
  EXPECT_EQ(y[128], -9.0f); // (35-32) * (1-4)
  EXPECT_EQ(y[1], 8.0f);    // (30-32) * (0-4)
  EXPECT_EQ(y[16], 128.0f); // scale 1 = 0 - 32, q = -4
}

TEST(KQuantDequant, Q4_KAndQ5_KHandBuilt) {
  block_q4_K b{};
  b.d = fp32_to_fp16(1.0f);
  b.dmin = fp32_to_fp16(0.5f);
  b.scales[0] = 2 | (1 << 6);  // scale 0 = 2; top bits of scale 4 = 1
  b.scales[4] = 3;             // min 0 = 3
  b.scales[1] = 1;             // scale 1
  b.scales[5] = 1;             // min 1
  b.scales[8] = 0x21;          // scale 4 low 1 (-> 17), min 4 low 2 (-> 2)
  b.qs[0] = 0x5A;              // value 0: 10, value 32: 5
  b.qs[64] = 0x03;             // value 128: 3
  float y[QK_K];
  dequantize_row(GgmlType::Q4_K, &b, y, QK_K);
  EXPECT_EQ(y[0], 18.5f);      // 2*10 - 0.5*3
  EXPECT_EQ(y[32], 4.5f);      // 1*5 - 0.5*1
  EXPECT_EQ(y[128], 50.0f);    // 17*3 - 0.5*2
  EXPECT_EQ(y[255], 0.0f);

  block_q5_K c{};
  c.d = b.d;
  c.dmin = b.dmin;
  std::memcpy(c.scales, b.scales, sizeof(c.scales));
  std::memcpy(c.qs, b.qs, sizeof(c.qs));
  c.qh[0] = 0x01 | 0x10;       // value 0 gets +16; value 128 (bit 4) gets +16
  dequantize_row(GgmlType::Q5_K, &c, y, QK_K);
  EXPECT_EQ(y[0], 50.5f);      // 2*26 - 1.5
  EXPECT_EQ(y[32], 4.5f);
  EXPECT_EQ(y[128], 322.0f);   // 17*19 - 1
}

TEST(KQuantDequant, Q6_KHandBuilt) {
  block_q6_K b{};
  b.d = fp32_to_fp16(0.5f);
  b.scales[0] = -3;
  b.scales[2] = 10;
  b.scales[4] = 7;
  b.scales[6] = -1;
  b.ql[0] = 0x21;    // value 0 low 1, value 64 low 2
  b.ql[32] = 0x0F;   // value 32 low 15, value 96 low 0
  b.qh[0] = 0xE4;    // top bits: value 0: 0, 32: 1, 64: 2, 96: 3
  float y[QK_K];
  dequantize_row(GgmlType::Q6_K, &b, y, QK_K);
  EXPECT_EQ(y[0], 46.5f);   // 0.5*-3*(1-32)
  EXPECT_EQ(y[32], -5.0f);  // 0.5*10*(31-32)
  EXPECT_EQ(y[64], 7.0f);   // 0.5*7*(34-32)
  EXPECT_EQ(y[96], -8.0f);  // 0.5*-1*(48-32)
}

TEST(KQuantDequant, IQ4_XSHandBuilt) {
  block_iq4_xs b{};
  b.d = fp32_to_fp16(0.25f);
  b.scales_l[0] = 0xF4;   // sub-block 0 low 4, sub-block 1 low 15
  b.scales_h = 2 | (1 << 2);  // sub-block 0 top 2 (-> 36), sub-block 1 top 1 (-> 31)
  b.qs[0] = 0xF0;         // value 0: index 0 (-127); value 16: index 15 (113)
  b.qs[16] = 0x08;        // value 32: index 8 (1)
  float y[QK_K];
  dequantize_row(GgmlType::IQ4_XS, &b, y, QK_K);
  EXPECT_EQ(y[0], -127.0f);  // 0.25*4*-127
  EXPECT_EQ(y[16], 113.0f);
  EXPECT_EQ(y[32], -0.25f);  // 0.25*-1*1
  EXPECT_EQ(y[64], 0.25f * -32 * -127);  // sub-block 2: scale 0-32, index 0
}

// Whole random blocks against the element-wise reading, bit for bit.
TEST(KQuantDequant, RandomBlocksMatchLayout) {
  for (GgmlType t : kWeightTypes) {
    const Spec& s = spec_of(t);
    const int nb = 3;
    const auto bytes = random_blocks(s, nb, 42);
    std::vector<float> y(nb * QK_K);
    dequantize_row(t, bytes.data(), y.data(), nb * QK_K);
    for (int i = 0; i < nb; ++i)
      for (int v = 0; v < QK_K; ++v)
        ASSERT_EQ(y[i * QK_K + v], spec_value(s, bytes.data() + i * s.block_bytes, v))
            << type_name(t) << " block " << i << " value " << v;
  }
}

// ---------------------------------------------------------------------------
// Q8_K: bit-exact with ggml's quantize_row_q8_K_ref (what the x86 build runs).

TEST(KQuantQ8K, NegativeExtremeGivesUnitScaleAndTiesToEven) {
  std::vector<float> x(QK_K, 0.f);
  x[0] = -127.f;  // largest |x|, negative: iscale = -127/-127 = 1, d = 1
  x[1] = 127.f;   // same |x| later: not the max (strict >), q = 127
  const float ties[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, 3.49f, 3.51f};
  const int expect[] = {0, 2, 2, 0, -2, -2, 126, 3, 4};
  for (int k = 0; k < 9; ++k) x[2 + k] = ties[k];
  block_q8_K b;
  quantize_row(GgmlType::Q8_K, x.data(), &b, QK_K);
  EXPECT_EQ(std::bit_cast<uint32_t>(b.d), 0x3f800000u);  // 1.0f
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 127);
  for (int k = 0; k < 9; ++k) EXPECT_EQ(b.qs[2 + k], expect[k]) << ties[k];
  EXPECT_EQ(b.bsums[0], -127 + 127 + 0 + 2 + 2 + 0 - 2 - 2 + 126 + 3 + 4);
  for (int j = 1; j < 16; ++j) EXPECT_EQ(b.bsums[j], 0);
}

TEST(KQuantQ8K, PositiveExtremeFlipsSign) {
  std::vector<float> x(QK_K);
  for (int j = 0; j < QK_K; ++j) x[j] = static_cast<float>(j % 7) * 0.25f - 0.75f;  // -0.75 .. 0.75
  x[17] = 2.0f;   // max: iscale = -63.5, d = 1/-63.5
  x[18] = 1.0f;   // -63.5 -> tie -> -64
  x[19] = -0.5f;  // 31.75 -> 32
  x[20] = 0.25f;  // -15.875 -> -16
  x[21] = -2.0f;  // 127
  block_q8_K b;
  quantize_row(GgmlType::Q8_K, x.data(), &b, QK_K);
  EXPECT_EQ(std::bit_cast<uint32_t>(b.d), 0xbc810204u);  // -0.015748031f
  EXPECT_EQ(b.qs[17], -127);
  EXPECT_EQ(b.qs[18], -64);
  EXPECT_EQ(b.qs[19], 32);
  EXPECT_EQ(b.qs[20], -16);
  EXPECT_EQ(b.qs[21], 127);
  EXPECT_EQ(b.qs[0], 48);   // -0.75 * -63.5 = 47.625
  EXPECT_EQ(b.qs[3], 0);    // 0
  EXPECT_EQ(b.qs[6], -48);  // 0.75
  for (int j = 0; j < 16; ++j) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += b.qs[16 * j + l];
    EXPECT_EQ(b.bsums[j], sum) << j;
  }
}

TEST(KQuantQ8K, NonIntegerScaleGolden) {
  std::vector<float> x(QK_K, 1.0f);
  x[5] = -3.0f;  // iscale = -127/-3 = 42.333332f (0x42295555), d = 0.023622047f (0x3cc18306)
  block_q8_K b;
  quantize_row(GgmlType::Q8_K, x.data(), &b, QK_K);
  EXPECT_EQ(std::bit_cast<uint32_t>(b.d), 0x3cc18306u);
  EXPECT_EQ(b.qs[5], -127);
  EXPECT_EQ(b.qs[0], 42);
  EXPECT_EQ(b.bsums[0], 15 * 42 - 127);
  EXPECT_EQ(b.bsums[15], 16 * 42);
}

TEST(KQuantQ8K, ZeroBlocks) {
  std::vector<float> x(2 * QK_K, 0.f);
  x[QK_K] = -0.0f;
  x[QK_K + 3] = 0.5f;  // second block non-zero: iscale = -254
  std::vector<block_q8_K> b(2);
  std::memset(b.data(), 0x5a, sizeof(block_q8_K) * 2);
  quantize_row(GgmlType::Q8_K, x.data(), b.data(), 2 * QK_K);
  EXPECT_EQ(std::bit_cast<uint32_t>(b[0].d), 0u);
  for (int j = 0; j < QK_K; ++j) ASSERT_EQ(b[0].qs[j], 0);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b[0].bsums[j], 0);
  EXPECT_EQ(b[1].d, 1.f / (-127.f / 0.5f));
  EXPECT_EQ(b[1].qs[3], -127);
  EXPECT_EQ(b[1].qs[0], 0);
  EXPECT_EQ(b[1].bsums[0], -127);

  std::vector<float> y(2 * QK_K, 1.f);
  dequantize_row(GgmlType::Q8_K, b.data(), y.data(), 2 * QK_K);
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[QK_K + 3], b[1].d * -127);
}

TEST(KQuantQ8K, RoundTripWithinHalfStep) {
  const auto x = gaussian(8 * QK_K, 1.f, 7);
  std::vector<block_q8_K> b(8);
  quantize_row(GgmlType::Q8_K, x.data(), b.data(), 8 * QK_K);
  std::vector<float> y(8 * QK_K);
  dequantize_row(GgmlType::Q8_K, b.data(), y.data(), 8 * QK_K);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < QK_K; ++j)
      ASSERT_LE(std::fabs(y[i * QK_K + j] - x[i * QK_K + j]), 0.5001f * std::fabs(b[i].d)) << i << " " << j;
}

TEST(KQuantQ8K, RejectsPartialBlocks) {
  std::vector<float> x(300);
  std::vector<block_q8_K> b(2);
  EXPECT_THROW(quantize_row(GgmlType::Q8_K, x.data(), b.data(), 300), Error);
  EXPECT_THROW(quantize_row(GgmlType::Q4_K, x.data(), b.data(), 100), Error);
}

// ---------------------------------------------------------------------------
// Quantize -> dequantize error.

double rel_rms_error(GgmlType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(row_size(t, n));
  quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(n);
  dequantize_row(t, q.data(), y.data(), n);
  double e = 0, s = 0;
  for (int64_t j = 0; j < n; ++j) {
    e += std::pow(static_cast<double>(y[j]) - x[j], 2);
    s += static_cast<double>(x[j]) * x[j];
  }
  return std::sqrt(e / s);
}

TEST(KQuantRoundTrip, GaussianErrorWithinFormatBound) {
  // Relative RMS error on N(0, 0.02) weights: bits per weight set the bound
  // (each extra bit roughly halves it). Measured: Q2_K 0.297, Q3_K 0.152,
  // Q4_K 0.071, Q5_K 0.036, Q6_K 0.018, IQ4_XS 0.077, Q8_K 0.0070.
  const struct {
    GgmlType t;
    double bound;
  } cases[] = {{GgmlType::Q2_K, 0.32}, {GgmlType::Q3_K, 0.17}, {GgmlType::Q4_K, 0.08}, {GgmlType::Q5_K, 0.04},
               {GgmlType::Q6_K, 0.02}, {GgmlType::IQ4_XS, 0.085}, {GgmlType::Q8_K, 0.008}};
  const auto x = gaussian(64 * QK_K, 0.02f, 1234);
  for (const auto& c : cases) {
    const double e = rel_rms_error(c.t, x);
    std::printf("[ %-7s ] relative rms error %.5f\n", std::string(type_name(c.t)).c_str(), e);
    EXPECT_LT(e, c.bound) << type_name(c.t);
  }
}

TEST(KQuantRoundTrip, ZeroAndConstantBlocks) {
  for (GgmlType t : kWeightTypes) {
    std::vector<float> x(2 * QK_K, 0.f);
    for (int j = QK_K; j < 2 * QK_K; ++j) x[j] = 0.125f;  // constant positive block
    std::vector<uint8_t> q(row_size(t, 2 * QK_K));
    quantize_row(t, x.data(), q.data(), 2 * QK_K);
    std::vector<float> y(2 * QK_K, 1.f);
    dequantize_row(t, q.data(), y.data(), 2 * QK_K);
    for (int j = 0; j < QK_K; ++j) ASSERT_EQ(y[j], 0.f) << type_name(t) << " zero block value " << j;
    for (int j = QK_K; j < 2 * QK_K; ++j) ASSERT_NEAR(y[j], 0.125f, 0.125f * 0.02f) << type_name(t) << " " << j;
  }
}

// ---------------------------------------------------------------------------
// Dot products.

// The block's integer dot with Q8_K, from the element-wise reading, combined
// in the float order of ggml's AVX2 ggml_vec_dot_<t>_q8_K (what llama.cpp
// runs on x86): 8 lanes, lane (v % 32) / 4 (_mm256_maddubs_epi16 then
// _mm256_madd_epi16 per chunk of 32 with the sub-block scale), each block
// added with a fused multiply-add by d = d_8 * d_w, reduced as
// hsum_float_8. Min terms: Q2_K adds m[2k]*bsums[2k] + m[2k+1]*bsums[2k+1]
// to lane k first (fma by -d_8 * dmin_w); Q4_K/Q5_K add the bsums in
// adjacent pairs as int16 (_mm_hadd_epi16) times the mins in 4 lanes: Q4_K
// kept 4 float lanes before its block order (below), Q5_K one float (fma
// of the lanes' integer sum).
// Q4_K has its own block order (below). (The activations here come from
// quantize_row_q8_K: no -128, where IQ4_XS's sign trick would differ from
// the plain product.)
float spec_dot(const Spec& s, const uint8_t* w, const block_q8_K* a, int nb) {
  if (s.type == GgmlType::Q4_K) {
    // Q4_K's block order (k_quants.cpp; its matrices run interleaved): per
    // block the exact integers isum and msum (the mins times the int16
    // bsums pairs), one fused multiply-add into each of two accumulators,
    // subtracted at the end.
    float acc = 0, acc_min = 0;
    for (int i = 0; i < nb; ++i) {
      const uint8_t* b = w + i * s.block_bytes;
      int32_t isum = 0, msum = 0;
      for (int v = 0; v < QK_K; ++v) isum += s.scale(b, v) * s.q(b, v) * a[i].qs[v];
      for (int j = 0; j < 8; ++j)
        msum += s.min(b, 32 * j) * static_cast<int16_t>(static_cast<uint16_t>(a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]));
      acc = std::fma(static_cast<float>(isum), s.d(b) * a[i].d, acc);
      acc_min = std::fma(static_cast<float>(msum), s.dmin(b) * a[i].d, acc_min);
    }
    return acc - acc_min;
  }
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float min_lanes[4] = {0, 0, 0, 0};
  float summs = 0;
  for (int i = 0; i < nb; ++i) {
    const uint8_t* b = w + i * s.block_bytes;
    const int8_t* q8 = a[i].qs;
    const float dw = s.d(b), dmw = s.dmin(b);
    const float dmin = -a[i].d * dmw;
    if (s.type == GgmlType::Q2_K) {
      for (int k = 0; k < 8; ++k) {
        const int prod = a[i].bsums[2 * k] * s.min(b, 32 * k) + a[i].bsums[2 * k + 1] * s.min(b, 32 * k + 16);
        lanes[k] = std::fma(dmin, static_cast<float>(prod), lanes[k]);
      }
    }
    int32_t aux[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int v = 0; v < QK_K; ++v) aux[(v % 32) / 4] += s.scale(b, v) * s.q(b, v) * q8[v];
    const float d = s.type == GgmlType::IQ4_XS ? dw * a[i].d : a[i].d * dw;
    for (int l = 0; l < 8; ++l) lanes[l] = std::fma(d, static_cast<float>(aux[l]), lanes[l]);
    if (s.type == GgmlType::Q4_K || s.type == GgmlType::Q5_K) {
      int32_t prod[4] = {0, 0, 0, 0};
      for (int j = 0; j < 8; ++j) {  // sub-block j of 32 = bsums 2j, 2j + 1
        const auto pair = static_cast<int16_t>(static_cast<uint16_t>(a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]));
        prod[j / 2] += s.min(b, 32 * j) * pair;
      }
      if (s.type == GgmlType::Q4_K) {
        for (int k = 0; k < 4; ++k) min_lanes[k] = std::fma(dmin, static_cast<float>(prod[k]), min_lanes[k]);
      } else {
        summs = std::fma(dmin, static_cast<float>(prod[0] + prod[1] + prod[2] + prod[3]), summs);
      }
    }
  }
  const float h = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
  if (s.type == GgmlType::Q4_K) return h + ((min_lanes[0] + min_lanes[2]) + (min_lanes[1] + min_lanes[3]));
  if (s.type == GgmlType::Q5_K) return h + summs;
  return h;
}

TEST(KQuantVecDot, MatchesIntegerReadingExactly) {
  for (GgmlType t : kWeightTypes) {
    const Spec& s = spec_of(t);
    for (int nb : {1, 2, 5}) {
      const auto w = random_blocks(s, nb, 100 + nb);
      const auto x = gaussian(nb * QK_K, 1.f, 200 + nb);
      std::vector<block_q8_K> a(nb);
      quantize_row(GgmlType::Q8_K, x.data(), a.data(), nb * QK_K);
      const float got = vec_dot(t, nb * QK_K, w.data(), a.data());
      EXPECT_EQ(got, spec_dot(s, w.data(), a.data(), nb)) << type_name(t) << " nb " << nb;
    }
  }
}

TEST(KQuantVecDot, MatchesDequantizedDot) {
  for (GgmlType t : kWeightTypes) {
    const int nb = 16;
    const int64_t n = nb * QK_K;
    // Real quantized weights (from Gaussian data) and activations.
    const auto wf = gaussian(n, 0.02f, 11);
    std::vector<uint8_t> w(row_size(t, n));
    quantize_row(t, wf.data(), w.data(), n);
    const auto x = gaussian(n, 1.f, 12);
    std::vector<block_q8_K> a(nb);
    quantize_row(GgmlType::Q8_K, x.data(), a.data(), n);
    std::vector<float> wd(n), ad(n);
    dequantize_row(t, w.data(), wd.data(), n);
    dequantize_row(GgmlType::Q8_K, a.data(), ad.data(), n);
    double ref = 0, mag = 0;
    for (int64_t j = 0; j < n; ++j) {
      ref += static_cast<double>(wd[j]) * ad[j];
      mag += std::fabs(static_cast<double>(wd[j]) * ad[j]);
    }
    const float got = vec_dot(t, n, w.data(), a.data());
    EXPECT_NEAR(got, ref, 2e-6 * mag) << type_name(t);
  }
}

TEST(KQuantVecDot, TypesPairWithQ8K) {
  for (GgmlType t : kWeightTypes) {
    EXPECT_EQ(vec_dot_type(t), GgmlType::Q8_K) << type_name(t);
    EXPECT_TRUE(is_supported_weight(t)) << type_name(t);
  }
}

}  // namespace
}  // namespace synapse::quant

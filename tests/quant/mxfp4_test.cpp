// MXFP4 (src/quant/legacy.cpp, ggml type 39) against ggml itself: what
// llama.cpp v0.5.0's dequantize_row_mxfp4, quantize_row_mxfp4_ref and
// ggml_vec_dot_mxfp4_q8_0 computed on fixed inputs
// (tests/data/quant/mxfp4-ggml.bin, made by scripts/golden/mxfp4_ggml_ref.cpp),
// and llama-quantize's expert tensors of tests/data/models/tiny-mixtral-mxfp4_moe.gguf.
// The SIMD kernels against the scalar ones: simd_test.cpp and gemm_test.cpp
// (MXFP4 is in their type lists).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "quant/formats.hpp"
#include "quant/gemm.hpp"
#include "quant/kernel_table.hpp"
#include "quant/quant.hpp"
#include "quant/simd.hpp"
#include "synapse/gguf.hpp"

namespace synapse::quant {
namespace {

const std::string kData = SYNAPSE_TEST_DATA;

std::string hex(float f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(f));
  return buf;
}

// tests/data/quant/mxfp4-ggml.bin, parsed (layout: scripts/golden/mxfp4_ggml_ref.cpp).
struct GgmlData {
  std::vector<uint8_t> deq_blocks;  // 17 bytes each
  std::vector<float> deq_out;       // dequantize_row_mxfp4 of them
  std::vector<float> q_in;          // 32 floats a block
  std::vector<uint8_t> q_out;       // quantize_row_mxfp4_ref of them
  uint32_t n_dot = 0, n = 0;
  std::vector<std::vector<uint8_t>> dot_w, dot_a;  // MXFP4 rows, Q8_0 rows
  std::vector<float> dot;                          // ggml_vec_dot_mxfp4_q8_0
};

const GgmlData& ggml_data() {
  static const GgmlData d = [] {
    std::ifstream f(kData + "/quant/mxfp4-ggml.bin", std::ios::binary);
    const std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    GgmlData r;
    size_t p = 0;
    const auto take = [&](void* dst, size_t n) {
      if (p + n > b.size()) throw std::runtime_error("mxfp4-ggml.bin: truncated");
      std::memcpy(dst, b.data() + p, n);
      p += n;
    };
    const auto u32 = [&] {
      uint32_t v;
      take(&v, 4);
      return v;
    };
    char magic[8];
    take(magic, 8);
    if (std::memcmp(magic, "MXF4GGML", 8) != 0) throw std::runtime_error("mxfp4-ggml.bin: bad magic");
    const uint32_t n_deq = u32();
    r.deq_blocks.resize(17 * n_deq);
    r.deq_out.resize(32 * n_deq);
    take(r.deq_blocks.data(), r.deq_blocks.size());
    take(r.deq_out.data(), r.deq_out.size() * 4);
    const uint32_t n_q = u32();
    r.q_in.resize(32 * n_q);
    r.q_out.resize(17 * n_q);
    take(r.q_in.data(), r.q_in.size() * 4);
    take(r.q_out.data(), r.q_out.size());
    r.n_dot = u32();
    r.n = u32();
    for (uint32_t k = 0; k < r.n_dot; ++k) {
      std::vector<uint8_t> w(r.n / 32 * sizeof(block_mxfp4)), a(r.n / 32 * sizeof(block_q8_0));
      float s;
      take(w.data(), w.size());
      take(a.data(), a.size());
      take(&s, 4);
      r.dot_w.push_back(std::move(w));
      r.dot_a.push_back(std::move(a));
      r.dot.push_back(s);
    }
    if (p != b.size()) throw std::runtime_error("mxfp4-ggml.bin: trailing bytes");
    return r;
  }();
  return d;
}

// ------------------------------------------------ the format

TEST(MXFP4, TypeTable) {
  const TypeTraits& t = type_traits(GgmlType::MXFP4);
  EXPECT_EQ(static_cast<uint32_t>(GgmlType::MXFP4), 39u);
  EXPECT_EQ(t.name, "MXFP4");
  EXPECT_EQ(t.block_size, 32);
  EXPECT_EQ(t.type_size, 17u);
  EXPECT_TRUE(t.known);
  EXPECT_TRUE(t.supported);
  GgmlType parsed{};
  ASSERT_TRUE(type_from_name("mxfp4", parsed));
  EXPECT_EQ(parsed, GgmlType::MXFP4);
  for (uint32_t id : {36u, 37u, 38u}) EXPECT_FALSE(type_traits(id).known) << id;  // ggml's removed IQ4_NL repacks
  EXPECT_EQ(vec_dot_type(GgmlType::MXFP4), GgmlType::Q8_0);
  EXPECT_TRUE(is_supported_weight(GgmlType::MXFP4));
}

// GGML_E8M0_TO_FP32_HALF: 2^(e - 128) for every byte, the two smallest as
// subnormals, 255 as 2^127 (no NaN).
TEST(MXFP4, E8M0HalfIsTwoToTheEMinus128) {
  for (int e = 0; e < 256; ++e) EXPECT_EQ(kE8M0Half.v[e], std::ldexp(1.0f, e - 128)) << e;
  EXPECT_EQ(std::bit_cast<uint32_t>(kE8M0Half.v[0]), 0x00200000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(kE8M0Half.v[1]), 0x00400000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(kE8M0Half.v[2]), 0x00800000u);
  EXPECT_EQ(kE8M0Half.v[128], 1.0f);
  EXPECT_TRUE(std::isfinite(kE8M0Half.v[255]));
}

TEST(MXFP4, DequantizeHandBuilt) {
  block_mxfp4 b{};
  b.e = 127;  // scale 1/2: the doubled table halved, i.e. the E2M1 values
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(GgmlType::MXFP4, &b, y, 32);
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], e2m1[j]) << j;             // low nibble: element j
    EXPECT_EQ(y[j + 16], e2m1[15 - j]) << j;   // high nibble: element j + 16
  }
  EXPECT_FALSE(std::signbit(y[8]));  // code 8 is +0 (the table has no -0)
  b.e = 0;                           // 2^-128: subnormal results, exact
  dequantize_row(GgmlType::MXFP4, &b, y, 32);
  EXPECT_EQ(y[7], std::ldexp(12.0f, -128));
  EXPECT_EQ(y[16 + 1], std::ldexp(-8.0f, -128));  // byte 1's high nibble is 14: -8
  b.e = 255;
  dequantize_row(GgmlType::MXFP4, &b, y, 32);
  EXPECT_EQ(y[7], std::ldexp(12.0f, 127));
}

// ------------------------------------------------ against ggml's own functions

TEST(MXFP4, DequantizeEqualsGgmlBitForBit) {
  const GgmlData& g = ggml_data();
  const int64_t n = static_cast<int64_t>(g.deq_out.size());
  ASSERT_EQ(n, 256 * 32);  // every exponent byte
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(GgmlType::MXFP4, g.deq_blocks.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(g.deq_out[i]))
        << "element " << i << " (e " << i / 32 << "): " << hex(y[i]) << " vs ggml " << hex(g.deq_out[i]);
}

// Ties, powers of two at the top of a block (where floor(log2f(amax))
// turns), subnormal and huge blocks, exponents that wrap, NaN and infinity:
// quantize_row_mxfp4_ref's bytes, block for block, through every table.
TEST(MXFP4, QuantizeEqualsGgmlByteForByte) {
  const GgmlData& g = ggml_data();
  const int64_t n = static_cast<int64_t>(g.q_in.size());
  size_t n_isa = 0;
  const Isa* isas = compiled_isas(&n_isa);
  for (size_t k = 0; k < n_isa; ++k) {
    std::vector<uint8_t> q(g.q_out.size(), 0xCD);
    quantize_kernel(GgmlType::MXFP4, isas[k])(g.q_in.data(), q.data(), n);
    for (size_t b = 0; b < q.size() / 17; ++b)
      EXPECT_EQ(std::memcmp(q.data() + 17 * b, g.q_out.data() + 17 * b, 17), 0)
          << isa_name(isas[k]) << " block " << b << ": e " << int(q[17 * b]) << " vs ggml " << int(g.q_out[17 * b]);
  }
  // The data covers what it claims: exponents that wrap (amax < 2^-125) and all-zero blocks.
  bool wrapped = false, zero = false;
  for (size_t b = 0; b < g.q_out.size() / 17; ++b) {
    wrapped |= g.q_out[17 * b] >= 200;
    zero |= g.q_out[17 * b] == 0;
  }
  EXPECT_TRUE(wrapped);
  EXPECT_TRUE(zero);
}

// ggml_vec_dot_mxfp4_q8_0 sums the same products in another order (two
// accumulators, even and odd blocks, the last odd block alone); synapse's
// vec_dot on every table agrees to the float rounding of that order.
TEST(MXFP4, VecDotAgreesWithGgml) {
  const GgmlData& g = ggml_data();
  ASSERT_GT(g.n_dot, 0u);
  size_t n_isa = 0;
  const Isa* isas = compiled_isas(&n_isa);
  for (uint32_t r = 0; r < g.n_dot; ++r) {
    const auto* w = reinterpret_cast<const block_mxfp4*>(g.dot_w[r].data());
    const auto* a = reinterpret_cast<const block_q8_0*>(g.dot_a[r].data());
    double exact = 0, mag = 0;
    for (uint32_t b = 0; b < g.n / 32; ++b) {
      int64_t isum = 0;
      for (int j = 0; j < 16; ++j) {
        isum += kvalues_mxfp4[w[b].qs[j] & 15] * a[b].qs[j] + kvalues_mxfp4[w[b].qs[j] >> 4] * a[b].qs[j + 16];
      }
      const double d = static_cast<double>(fp16_to_fp32(a[b].d) * kE8M0Half.v[w[b].e]);
      exact += d * static_cast<double>(isum);
      mag += std::fabs(d * static_cast<double>(isum));
    }
    EXPECT_NEAR(g.dot[r], exact, 1e-6 * mag) << "ggml row " << r;
    for (size_t k = 0; k < n_isa; ++k) {
      if (!cpu_runs(isas[k])) continue;
      const float got = kernel_table(isas[k]).row(GgmlType::MXFP4).vec_dot(g.n, w, a);
      EXPECT_NEAR(got, g.dot[r], 2e-6 * mag) << isa_name(isas[k]) << " row " << r;
      EXPECT_NEAR(got, exact, 1e-6 * mag) << isa_name(isas[k]) << " row " << r;
    }
  }
}

// ------------------------------------------------ properties

TEST(MXFP4, QuantizeZeroAndExactBlocks) {
  float x[32] = {};
  block_mxfp4 b;
  std::memset(&b, 0xAB, sizeof b);
  quantize_row(GgmlType::MXFP4, x, &b, 32);
  EXPECT_EQ(b.e, 0);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], 0) << j;
  // Values that are E2M1 levels times a power of two, with 6 as the block's
  // largest magnitude (amax 6 * 2^s: e = floor(log2(amax)) - 2 + 127 =
  // s + 127, the scale 2^(s - 1) halves the doubled levels), come back exactly.
  for (int s : {-100, -3, 0, 5, 60}) {
    for (int j = 0; j < 32; ++j) x[j] = std::ldexp(static_cast<float>(kvalues_mxfp4[j % 16]) * 0.5f, s);
    x[5] = std::ldexp(-6.0f, s);
    quantize_row(GgmlType::MXFP4, x, &b, 32);
    EXPECT_EQ(b.e, s + 127) << s;
    float y[32];
    dequantize_row(GgmlType::MXFP4, &b, y, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]) << s << " " << j;
  }
}

// amax in [2^k, 2^(k+1)) gives the scale 2^(k - 3) for the doubled levels:
// amax / scale in [8, 16), so the top level 12 clips by at most 4 scales and
// every other value is within half the widest gap (4 scales between 8 and 12).
TEST(MXFP4, RoundTripErrorWithinBound) {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t n = 32 * 256;
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  for (auto& v : x) v = g(rng) * 0.03f;
  std::vector<block_mxfp4> q(n / 32);
  quantize_row(GgmlType::MXFP4, x.data(), q.data(), n);
  dequantize_row(GgmlType::MXFP4, q.data(), y.data(), n);
  double e2 = 0, x2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = kE8M0Half.v[q[i / 32].e];
    EXPECT_LE(std::fabs(x[i] - y[i]), 4.0f * d) << i;
    e2 += double(x[i] - y[i]) * (x[i] - y[i]);
    x2 += double(x[i]) * x[i];
  }
  EXPECT_LT(std::sqrt(e2 / x2), 0.2);  // about 3.5 bits of a Gaussian
}

// Small integers and power-of-two scales: every step exact, so the dot is
// the exact sum.
TEST(MXFP4, VecDotExactHandBuilt) {
  block_mxfp4 w[3]{};
  block_q8_0 a[3]{};
  int64_t want = 0;
  for (int b = 0; b < 3; ++b) {
    w[b].e = static_cast<uint8_t>(126 + b);  // 2^-2, 2^-1, 1
    a[b].d = fp32_to_fp16(std::ldexp(1.0f, 2 - b));
    for (int j = 0; j < 16; ++j) w[b].qs[j] = static_cast<uint8_t>(((j + b) & 15) | (((15 - j) & 15) << 4));
    for (int j = 0; j < 32; ++j) a[b].qs[j] = static_cast<int8_t>(j * 8 - 128 + b);
    for (int j = 0; j < 16; ++j)
      want += kvalues_mxfp4[(j + b) & 15] * a[b].qs[j] + kvalues_mxfp4[15 - j] * a[b].qs[j + 16];
  }
  size_t n_isa = 0;
  const Isa* isas = compiled_isas(&n_isa);
  for (size_t k = 0; k < n_isa; ++k) {
    if (!cpu_runs(isas[k])) continue;
    EXPECT_EQ(kernel_table(isas[k]).row(GgmlType::MXFP4).vec_dot(96, w, a), static_cast<float>(want))
        << isa_name(isas[k]);
  }
}

// Extreme blocks through every table's vec_dot and gemm against the scalar
// dot: the smallest and largest exponents (subnormal scales, products that
// overflow), every code in both nibbles, activations all -128 (the AVX2
// lanes' |a| = 128), all 127 or random, with the largest F16 scale.
TEST(MXFP4, ExtremeBlocksEqualScalarOnEveryTable) {
  std::mt19937 rng(11);
  const int64_t n = 96;
  const VecDotFn scalar = vec_dot_kernel(GgmlType::MXFP4, Isa::scalar);
  size_t n_isa = 0;
  const Isa* isas = compiled_isas(&n_isa);
  int compared = 0;
  for (int e : {0, 1, 2, 100, 127, 128, 200, 254, 255}) {
    for (int code = 0; code < 16; ++code) {
      for (int act = 0; act < 3; ++act) {
        std::vector<block_mxfp4> w(n / 32);
        std::vector<block_q8_0> a(n / 32);
        for (size_t b = 0; b < w.size(); ++b) {
          w[b].e = static_cast<uint8_t>(e);
          for (int j = 0; j < 16; ++j) w[b].qs[j] = static_cast<uint8_t>(code | ((15 - code) << 4));
          a[b].d = b == 1 ? ggml_fp16_t{0x7BFF} : fp32_to_fp16(1.0f);  // 65504
          for (int j = 0; j < 32; ++j)
            a[b].qs[j] = static_cast<int8_t>(act == 0 ? -128 : act == 1 ? 127 : static_cast<int>(rng() % 256) - 128);
        }
        const float want = scalar(n, w.data(), a.data());
        for (size_t k = 0; k < n_isa; ++k) {
          if (!cpu_runs(isas[k])) continue;
          const TypeKernels& row = kernel_table(isas[k]).row(GgmlType::MXFP4);
          // gemm over two copies of the row (the AVX-512 kernel takes rows in pairs).
          std::vector<block_mxfp4> w2(w);
          w2.insert(w2.end(), w.begin(), w.end());
          float got[3] = {row.vec_dot(n, w.data(), a.data()), 0.0f, 0.0f};
          gemm(GgmlType::MXFP4, isas[k], n, reinterpret_cast<const uint8_t*>(w2.data()), sizeof(block_mxfp4) * 3, 2,
               reinterpret_cast<const uint8_t*>(a.data()), sizeof(block_q8_0) * 3, 1, &got[1], 2);
          for (float g : got) {
            if (std::isnan(want) && std::isnan(g)) continue;
            EXPECT_EQ(std::bit_cast<uint32_t>(g), std::bit_cast<uint32_t>(want))
                << isa_name(isas[k]) << " e " << e << " code " << code << " act " << act << ": " << hex(g) << " vs "
                << hex(want);
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 1000);
}

// ------------------------------------------------ against llama-quantize's file

// Every MXFP4 tensor of llama-quantize's MXFP4_MOE file (the experts) is the
// master's rows quantized here, byte for byte.
TEST(MXFP4, ExpertsEqualLlamaQuantizes) {
  const gguf::File master = gguf::File::open(kData + "/models/tiny-mixtral-f32.gguf");
  const gguf::File theirs = gguf::File::open(kData + "/models/tiny-mixtral-mxfp4_moe.gguf");
  int tensors = 0;
  for (const gguf::TensorInfo& t : theirs.tensors()) {
    if (t.type != GgmlType::MXFP4) continue;
    const gguf::TensorInfo* src = master.find_tensor(t.name);
    ASSERT_NE(src, nullptr) << t.name;
    ASSERT_EQ(src->type, GgmlType::F32) << t.name;
    ASSERT_EQ(src->ne, t.ne) << t.name;
    std::vector<uint8_t> ours(t.n_bytes);
    quantize_row(GgmlType::MXFP4, reinterpret_cast<const float*>(src->data), ours.data(), t.n_elements());
    EXPECT_EQ(std::memcmp(ours.data(), t.data, t.n_bytes), 0) << t.name;
    ++tensors;
  }
  EXPECT_EQ(tensors, 3);  // ffn_gate_exps, ffn_up_exps, ffn_down_exps
}

}  // namespace
}  // namespace synapse::quant

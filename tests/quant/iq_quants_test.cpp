// The lattice formats IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M
// (src/quant/iq_quants.cpp) against ggml itself: what llama.cpp v0.5.0's
// dequantize_row_<t>, ggml_vec_dot_<t>_q8_K_generic and the x86
// ggml_vec_dot_<t>_q8_K computed on random and ggml-quantized blocks
// (tests/data/quant/iq-ggml.bin, made by scripts/golden/iq_ggml_ref.cpp);
// hand-built blocks whose values are worked out here from ggml-common.h's
// layouts; and the corners of the SIMD instruction sequences through every
// kernel table. The SIMD kernels against the scalar ones on random rows:
// simd_test.cpp and gemm_test.cpp (the seven types are in their lists).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "quant/cpu.hpp"
#include "quant/formats.hpp"
#include "quant/gemm.hpp"
#include "quant/iq_grids.hpp"
#include "quant/kernel_table.hpp"
#include "quant/kernel_tables.hpp"
#include "quant/quant.hpp"
#include "quant/random_rows.hpp"
#include "quant/simd.hpp"
#include "synapse/types.hpp"

namespace synapse::quant {
namespace {

const std::string kData = SYNAPSE_TEST_DATA;

constexpr GgmlType kIqTypes[] = {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS,
                                 GgmlType::IQ3_S,   GgmlType::IQ1_S,  GgmlType::IQ1_M};

std::string hex(float f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(f));
  return buf;
}

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

// tests/data/quant/iq-ggml.bin, parsed (layout: scripts/golden/iq_ggml_ref.cpp).
struct GgmlCase {
  uint32_t block_bytes = 0;
  std::vector<uint8_t> deq_blocks;
  std::vector<float> deq_out;
  uint32_t n = 0;
  std::vector<std::vector<uint8_t>> dot_w, dot_a;
  std::vector<float> dot_generic, dot_x86;
};

const std::map<uint32_t, GgmlCase>& ggml_data() {
  static const std::map<uint32_t, GgmlCase> d = [] {
    std::ifstream f(kData + "/quant/iq-ggml.bin", std::ios::binary);
    const std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::map<uint32_t, GgmlCase> r;
    size_t p = 0;
    const auto take = [&](void* dst, size_t n) {
      if (p + n > b.size()) throw std::runtime_error("iq-ggml.bin: truncated");
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
    if (std::memcmp(magic, "IQGGML01", 8) != 0) throw std::runtime_error("iq-ggml.bin: bad magic");
    const uint32_t n_types = u32();
    for (uint32_t k = 0; k < n_types; ++k) {
      const uint32_t id = u32();
      GgmlCase& c = r[id];
      c.block_bytes = u32();
      const uint32_t n_deq = u32();
      c.deq_blocks.resize(static_cast<size_t>(n_deq) * c.block_bytes);
      c.deq_out.resize(256 * static_cast<size_t>(n_deq));
      take(c.deq_blocks.data(), c.deq_blocks.size());
      take(c.deq_out.data(), c.deq_out.size() * 4);
      const uint32_t n_dot = u32();
      c.n = u32();
      for (uint32_t i = 0; i < n_dot; ++i) {
        std::vector<uint8_t> w(c.n / 256 * c.block_bytes), a(c.n / 256 * sizeof(block_q8_K));
        float s_generic, s_x86;
        take(w.data(), w.size());
        take(a.data(), a.size());
        take(&s_generic, 4);
        take(&s_x86, 4);
        c.dot_w.push_back(std::move(w));
        c.dot_a.push_back(std::move(a));
        c.dot_generic.push_back(s_generic);
        c.dot_x86.push_back(s_x86);
      }
    }
    if (p != b.size()) throw std::runtime_error("iq-ggml.bin: trailing bytes");
    return r;
  }();
  return d;
}

const GgmlCase& ggml_case(GgmlType t) { return ggml_data().at(static_cast<uint32_t>(t)); }

// ------------------------------------------------ the types

TEST(IqQuants, TypeTable) {
  const struct {
    GgmlType t;
    uint32_t id;
    const char* name;
    size_t bytes;
  } kWant[] = {{GgmlType::IQ2_XXS, 16, "IQ2_XXS", 66}, {GgmlType::IQ2_XS, 17, "IQ2_XS", 74},
               {GgmlType::IQ3_XXS, 18, "IQ3_XXS", 98}, {GgmlType::IQ1_S, 19, "IQ1_S", 50},
               {GgmlType::IQ3_S, 21, "IQ3_S", 110},    {GgmlType::IQ2_S, 22, "IQ2_S", 82},
               {GgmlType::IQ1_M, 29, "IQ1_M", 56}};
  for (const auto& w : kWant) {
    const TypeTraits& tt = type_traits(w.t);
    EXPECT_EQ(static_cast<uint32_t>(w.t), w.id);
    EXPECT_EQ(tt.name, w.name);
    EXPECT_EQ(tt.block_size, 256);
    EXPECT_EQ(tt.type_size, w.bytes);
    EXPECT_TRUE(tt.known && tt.supported) << w.name;
    EXPECT_TRUE(is_supported_weight(w.t)) << w.name;
    EXPECT_EQ(vec_dot_type(w.t), GgmlType::Q8_K) << w.name;
    GgmlType parsed{};
    ASSERT_TRUE(type_from_name(w.name, parsed));
    EXPECT_EQ(parsed, w.t);
    // No quantizer (reading only), a dequantizer on every table.
    EXPECT_EQ(kernel_table(Isa::scalar).row(w.t).quantize, nullptr) << w.name;
    EXPECT_NE(kernel_table(Isa::scalar).row(w.t).dequantize, nullptr) << w.name;
  }
}

// The tables are ggml-common.h's (spot values; the generator copies them
// all, scripts/quant/gen_iq_grids.py) and every entry is what its format
// claims: IQ2 magnitudes 8, 25, 43; IQ3_XXS 4..62; IQ3_S odd 1..15; IQ1 -1..1.
TEST(IqQuants, GridTables) {
  EXPECT_EQ(iq2xxs_grid[0], 0x0808080808080808u);
  EXPECT_EQ(iq2xxs_grid[255], 0x2b2b2b1908081908u);
  EXPECT_EQ(iq2xs_grid[511], 0x2b2b2b2b2b2b2b2bu);
  EXPECT_EQ(iq2s_grid[1023], 0x2b2b2b2b2b2b2b2bu);
  EXPECT_EQ(iq3xxs_grid[0], 0x04040404u);
  EXPECT_EQ(iq3s_grid[0], 0x01010101u);
  EXPECT_EQ(iq1s_grid[0], 0xffffffffffffffffu);
  EXPECT_EQ(ksigns_iq2xs[1], 129);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(std::popcount(static_cast<unsigned>(ksigns_iq2xs[i])) % 2, 0) << i;
  const auto bytes_in = [](uint64_t g, int n, auto ok) {
    for (int j = 0; j < n; ++j)
      if (!ok(static_cast<int>((g >> (8 * j)) & 0xFF))) return false;
    return true;
  };
  const auto iq2 = [](int v) { return v == 8 || v == 25 || v == 43; };
  for (uint64_t g : iq2xxs_grid) EXPECT_TRUE(bytes_in(g, 8, iq2));
  for (uint64_t g : iq2xs_grid) EXPECT_TRUE(bytes_in(g, 8, iq2));
  for (uint64_t g : iq2s_grid) EXPECT_TRUE(bytes_in(g, 8, iq2));
  for (uint32_t g : iq3xxs_grid) EXPECT_TRUE(bytes_in(g, 4, [](int v) { return v >= 4 && v <= 62; }));
  for (uint32_t g : iq3s_grid) EXPECT_TRUE(bytes_in(g, 4, [](int v) { return v % 2 == 1 && v <= 15; }));
  for (uint64_t g : iq1s_grid) EXPECT_TRUE(bytes_in(g, 8, [](int v) { return v == 0 || v == 1 || v == 0xFF; }));
}

// ------------------------------------------------ against ggml's own functions

TEST(IqQuants, DequantizeEqualsGgmlBitForBit) {
  for (GgmlType t : kIqTypes) {
    const GgmlCase& c = ggml_case(t);
    ASSERT_EQ(c.block_bytes, type_traits(t).type_size) << type_name(t);
    const int64_t n = static_cast<int64_t>(c.deq_out.size());
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(t, c.deq_blocks.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_TRUE(same_bits(y[i], c.deq_out[i]))
          << type_name(t) << " element " << i << ": " << hex(y[i]) << " vs ggml " << hex(c.deq_out[i]);
  }
}

// Q8_K rows from quantize_row_q8_K: the scalar reference is ggml's generic
// dot bit for bit, and so is every table's kernel; ggml's x86 dot (8 float
// lanes) agrees to its rounding. (Any activation bytes in [-127, 127]:
// IqExtremesEqualScalar and the sign corner below.)
TEST(IqQuants, VecDotEqualsGgmlGenericBitForBit) {
  size_t n_isa = 0;
  const Isa* isas = compiled_isas(&n_isa);
  for (GgmlType t : kIqTypes) {
    const GgmlCase& c = ggml_case(t);
    ASSERT_GT(c.dot_w.size(), 0u);
    for (size_t r = 0; r < c.dot_w.size(); ++r) {
      for (size_t k = 0; k < n_isa; ++k) {
        if (!cpu_runs(isas[k])) continue;
        const float got = kernel_table(isas[k]).row(t).vec_dot(c.n, c.dot_w[r].data(), c.dot_a[r].data());
        EXPECT_TRUE(same_bits(got, c.dot_generic[r])) << type_name(t) << " " << isa_name(isas[k]) << " row " << r
                                                       << ": " << hex(got) << " vs ggml " << hex(c.dot_generic[r]);
      }
      EXPECT_NEAR(c.dot_x86[r], c.dot_generic[r], 1e-5 * std::fabs(c.dot_generic[r]) + 1e-30)
          << type_name(t) << " row " << r;
    }
  }
}

// The dot of a row with a Q8_K row is the double dot of their dequantized
// values to within float rounding (a second reading of every layout).
TEST(IqQuants, VecDotMatchesDequantizedDot) {
  for (GgmlType t : kIqTypes) {
    const GgmlCase& c = ggml_case(t);
    for (size_t r = 0; r < c.dot_w.size(); ++r) {
      std::vector<float> w(c.n), a(c.n);
      dequantize_row(t, c.dot_w[r].data(), w.data(), c.n);
      dequantize_row(GgmlType::Q8_K, c.dot_a[r].data(), a.data(), c.n);
      double want = 0, mag = 0;
      for (uint32_t i = 0; i < c.n; ++i) {
        want += static_cast<double>(w[i]) * a[i];
        mag += std::fabs(static_cast<double>(w[i]) * a[i]);
      }
      const float got = vec_dot_kernel(t, Isa::scalar)(c.n, c.dot_w[r].data(), c.dot_a[r].data());
      EXPECT_NEAR(got, want, 1e-5 * mag) << type_name(t) << " row " << r;
    }
  }
}

// ------------------------------------------------ hand-built blocks

// IQ2_XXS: sub-block 0 takes grid entries 0 (all 8) and 255 (bytes 8 25 8
// 8 25 43 43 43 from the low end), sign index 1 (ksigns 129: elements 0
// and 7 negative), scale nibble 3: db = d * 3.5 / 4.
TEST(IqQuants, IQ2_XXSHandBuilt) {
  block_iq2_xxs b{};
  b.d = fp32_to_fp16(2.0f);
  const uint32_t idx = 0u | 255u << 8, sgn = 1u | 3u << 28;
  std::memcpy(&b.qs[0], &idx, 4);
  std::memcpy(&b.qs[2], &sgn, 4);
  float y[256];
  dequantize_row(GgmlType::IQ2_XXS, &b, y, 256);
  const float db = 2.0f * 3.5f * 0.25f;
  EXPECT_EQ(y[0], -8 * db);
  EXPECT_EQ(y[1], 8 * db);
  EXPECT_EQ(y[7], -8 * db);
  EXPECT_EQ(y[8], 8 * db);  // group 1: sign index 0
  EXPECT_EQ(y[8 + 1], 25 * db);
  EXPECT_EQ(y[8 + 5], 43 * db);
  EXPECT_EQ(y[8 + 7], 43 * db);
  EXPECT_EQ(y[32], 8 * 2.0f * 0.5f * 0.25f);  // sub-block 1: all zero bits
}

// IQ3_S: sub-block 1 (scale nibble 2: 5), its first group of 4 with index
// 256 + 1 (qh bit 0), signs of elements 1 and 2.
TEST(IqQuants, IQ3_SHandBuilt) {
  block_iq3_s b{};
  b.d = fp32_to_fp16(1.0f);
  b.qs[8] = 1;
  b.qh[1] = 1;
  b.signs[4] = 0x06;
  b.scales[0] = 2 << 4;
  float y[256];
  dequantize_row(GgmlType::IQ3_S, &b, y, 256);
  const uint32_t g = iq3s_grid[257];
  for (int j = 0; j < 4; ++j) {
    const float v = 5.0f * static_cast<float>((g >> 8 * j) & 0xFF);
    EXPECT_EQ(y[32 + j], j == 1 || j == 2 ? -v : v) << j;
  }
  EXPECT_EQ(y[0], 1.0f);  // sub-block 0: scale 1, grid entry 0 (1 1 1 1)
}

// IQ1_S: sub-block 2 with scale 5 (11), shift negative, group 3 index
// 7 << 8 | 200; IQ1_M the same entry in its layout, with the F16 scale
// spread over the scale words' top nibbles.
TEST(IqQuants, IQ1HandBuilt) {
  block_iq1_s s{};
  s.d = fp32_to_fp16(0.5f);
  s.qs[4 * 2 + 3] = 200;
  s.qh[2] = static_cast<uint16_t>(7u << 9 | 5u << 12 | 0x8000u);
  float y[256];
  dequantize_row(GgmlType::IQ1_S, &s, y, 256);
  const uint64_t g = iq1s_grid[7 << 8 | 200];
  for (int j = 0; j < 8; ++j) {
    const float v = static_cast<float>(static_cast<int8_t>((g >> 8 * j) & 0xFF));
    EXPECT_EQ(y[64 + 24 + j], 0.5f * 11 * (v - 0.125f)) << j;
  }

  block_iq1_m m{};
  const uint16_t h = fp32_to_fp16(0.5f);
  uint16_t sc[4] = {};
  for (int w = 0; w < 4; ++w) sc[w] = static_cast<uint16_t>(((h >> 4 * w) & 0xF) << 12);
  sc[1] |= 5u << 3;  // sub-block 2, second half: scale 5 (11)
  std::memcpy(m.scales, sc, sizeof sc);
  m.qs[4 * 2 + 3] = 200;
  m.qh[2 * 2 + 1] = 0x70 | 0x80;  // group 3: index bits 8-10 = 7, shift negative
  dequantize_row(GgmlType::IQ1_M, &m, y, 256);
  for (int j = 0; j < 8; ++j) {
    const float v = static_cast<float>(static_cast<int8_t>((g >> 8 * j) & 0xFF));
    EXPECT_EQ(y[64 + 24 + j], 0.5f * 11 * (v - 0.125f)) << j;
  }
  EXPECT_EQ(y[0], 0.5f * 1 * (-1 + 0.125f));  // grid entry 0 (all -1), scale 1, shift +
}

// ------------------------------------------------ SIMD corners

// Every byte 0xFF or 0x00 (largest and smallest indices, every sign set or
// none, the largest scales) against activations all -127 or all 127 (the
// ends of quantize_row_q8_K's range; -128 never occurs, and the SIMD dots of
// IQ2/IQ3 move the weights' signs onto the activations, where a negated
// -128 would stay -128), with bsums of 16 * a or the int16 extremes:
// bit-equal to the scalar reference on every table; for the sign corner
// also ggml's exact value.
TEST_P(KernelTables, IqExtremesEqualScalar) {
  const int64_t n = 2 * QK_K;
  for (GgmlType t : kIqTypes) {
    for (uint8_t fill : {uint8_t{0xFF}, uint8_t{0x00}}) {
      std::vector<uint8_t> w(row_size(t, n), fill);
      const size_t bb = type_traits(t).type_size;
      for (size_t off = 0; off < w.size(); off += bb) {
        const ggml_fp16_t one = fp32_to_fp16(1.0f);
        if (t == GgmlType::IQ1_M) {
          for (int k = 0; k < 4; ++k) {
            w[off + 48 + 2 * k + 1] = static_cast<uint8_t>((w[off + 48 + 2 * k + 1] & 0x0F) | (((one >> 4 * k) & 0xF) << 4));
          }
        } else {
          std::memcpy(w.data() + off, &one, sizeof one);
        }
      }
      for (int8_t v : {int8_t{-127}, int8_t{127}}) {
        for (int bsum_case = 0; bsum_case < 3; ++bsum_case) {
          std::vector<block_q8_K> a(n / QK_K);
          for (auto& b : a) {
            b.d = 1.0f;
            std::memset(b.qs, static_cast<uint8_t>(v), sizeof b.qs);
            for (int j = 0; j < QK_K / 16; ++j)
              b.bsums[j] = bsum_case == 0 ? static_cast<int16_t>(16 * v) : bsum_case == 1 ? int16_t{32767} : int16_t{-32768};
          }
          const float want = vec_dot_kernel(t, Isa::scalar)(n, w.data(), a.data());
          const float got = vec_dot_kernel(t, isa())(n, w.data(), a.data());
          EXPECT_TRUE(same_bits(want, got)) << type_name(t) << " fill " << int{fill} << " a " << int{v} << " bsums "
                                            << bsum_case << ": scalar " << hex(want) << " " << isa_name(isa()) << " "
                                            << hex(got);
          // The multi-row kernel: 1 activation row (the few-rows tiles) and 9
          // copies of it (the rows decoded to int8 once, a + 128 and the bias).
          std::vector<block_q8_K> a9;
          for (int k = 0; k < 9; ++k) a9.insert(a9.end(), a.begin(), a.end());
          for (int64_t rows : {1, 9}) {
            std::vector<float> y(static_cast<size_t>(rows), -7.0f);
            gemm(t, isa(), n, w.data(), row_size(t, n), 1, reinterpret_cast<const uint8_t*>(a9.data()),
                 n / QK_K * sizeof(block_q8_K), rows, y.data(), 1);
            for (float v : y) EXPECT_TRUE(same_bits(want, v)) << type_name(t) << " gemm of " << rows << " rows";
          }
        }
      }
    }
  }
  // IQ2_XXS all 0xFF: grid entry 255, sign index 127 (ksigns 255: every
  // value negative), scale 15 (31); against -127 every product is
  // -|g| * -127 = 127 * |g|: per 32, the entry's bytes (8 25 8 8 25 43 43 43:
  // 203) four times.
  std::vector<uint8_t> w(row_size(GgmlType::IQ2_XXS, QK_K), 0xFF);
  const ggml_fp16_t one = fp32_to_fp16(1.0f);
  std::memcpy(w.data(), &one, sizeof one);
  block_q8_K a{};
  a.d = 1.0f;
  std::memset(a.qs, 0x81, sizeof a.qs);
  EXPECT_EQ(vec_dot_kernel(GgmlType::IQ2_XXS, isa())(QK_K, w.data(), &a), 0.125f * (8 * 31 * 4 * 203 * 127.0f));
}

// The avx512 table takes the IQ3 kernels that look up their grids with
// vpermi2b when the CPU has AVX-512 VBMI, so the table tests above run only
// one of the two forms on a given machine: both, called directly, against
// the scalar reference (dots and 1-7 activation rows), wherever the CPU runs
// them (on a CPU without AVX-512 VNNI there is none to run, and the test
// says so).
#if defined(__x86_64__)
TEST(IqQuants, Avx512VbmiFormsEqualScalar) {
  struct Form {
    GgmlType t;
    VecDotFn dot;
    GemmFn gemm;
    bool vbmi;
  };
  const Form forms[] = {
      {GgmlType::IQ3_XXS, avx512::vec_dot_iq3_xxs_q8_K, avx512::gemm_iq3_xxs_q8_K, false},
      {GgmlType::IQ3_S, avx512::vec_dot_iq3_s_q8_K, avx512::gemm_iq3_s_q8_K, false},
      {GgmlType::IQ3_XXS, avx512::vec_dot_iq3_xxs_q8_K_vbmi, avx512::gemm_iq3_xxs_q8_K_vbmi, true},
      {GgmlType::IQ3_S, avx512::vec_dot_iq3_s_q8_K_vbmi, avx512::gemm_iq3_s_q8_K_vbmi, true},
  };
  std::mt19937 rng(77);
  int checked = 0, forms_run = 0;
  for (const Form& f : forms) {
    if (!cpu_has_avx512_vnni() || (f.vbmi && !cpu_has_avx512_vbmi())) continue;
    ++forms_run;
    const int64_t n = 3 * QK_K;
    for (int trial = 0; trial < 6; ++trial) {
      // 2 weight rows and 7 activation rows, each set one row of their total length.
      const std::vector<uint8_t> w = test_rows::random_row_bytes(f.t, 2 * n, rng);
      const std::vector<uint8_t> a_bytes = test_rows::random_row_bytes(GgmlType::Q8_K, 7 * n, rng);
      const auto* a = reinterpret_cast<const block_q8_K*>(a_bytes.data());
      const size_t ws = row_size(f.t, n), as = n / QK_K * sizeof(block_q8_K);
      for (int64_t rows = 1; rows <= 7; ++rows) {
        std::vector<float> y(static_cast<size_t>(rows) * 2, -1.0f);
        f.gemm(n, w.data(), ws, 2, a_bytes.data(), as, rows, y.data(), 2);
        for (int64_t m = 0; m < rows; ++m) {
          for (int r = 0; r < 2; ++r) {
            const float want = vec_dot_kernel(f.t, Isa::scalar)(n, w.data() + r * ws, a + m * (n / QK_K));
            ASSERT_TRUE(same_bits(want, y[m * 2 + r])) << type_name(f.t) << (f.vbmi ? " vbmi" : "") << " rows " << rows;
            if (rows == 1) {
              ASSERT_TRUE(same_bits(want, f.dot(n, w.data() + r * ws, a + m * (n / QK_K))))
                  << type_name(f.t) << (f.vbmi ? " vbmi" : "") << " dot";
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, forms_run * 6 * 56);  // 6 trials x (1 + ... + 7 rows) x 2 weight rows
  std::printf("[ avx512   ] %d of 4 IQ3 forms run on this CPU, %d results compared\n", forms_run, checked);
}
#endif

// Hostile blocks: every weight byte random, F16 scales infinite or NaN
// included (a file's blocks are whatever it holds). Against activation bytes
// in [-127, 127], every table's dot and multi-row kernel give the scalar
// reference's float (NaN where it is NaN); the indices cannot leave their
// tables (iq_grids.hpp: each is masked to its table's width), which the
// sanitizer build checks on these reads.
TEST_P(KernelTables, IqAnyBytesEqualScalar) {
  std::mt19937 rng(4242);
  for (GgmlType t : kIqTypes) {
    int non_finite = 0;
    // 17 blocks: more than one of the GEMMs' chunks of decoded blocks.
    for (int64_t n : {256, 768, 2048, 17 * 256}) {
      for (int trial = 0; trial < 8; ++trial) {
        std::vector<uint8_t> w(row_size(t, n) * 3);
        for (auto& b : w) b = static_cast<uint8_t>(rng());
        // 2 activation rows (random bytes in quantize_row_q8_K's range, finite d).
        const std::vector<uint8_t> a_bytes = test_rows::random_row_bytes(GgmlType::Q8_K, 2 * n, rng);
        std::vector<block_q8_K> a(static_cast<size_t>(n / QK_K) * 2);
        std::memcpy(a.data(), a_bytes.data(), a_bytes.size());
        // 2 activation rows (the few-rows tiles) and 10 (decoded once), 3 weight rows.
        std::vector<block_q8_K> a10;
        for (int k = 0; k < 5; ++k) a10.insert(a10.end(), a.begin(), a.end());
        std::vector<float> y(6, 0.0f), y10(30, 0.0f);
        gemm(t, isa(), n, w.data(), row_size(t, n), 3, reinterpret_cast<const uint8_t*>(a.data()),
             n / QK_K * sizeof(block_q8_K), 2, y.data(), 3);
        gemm(t, isa(), n, w.data(), row_size(t, n), 3, reinterpret_cast<const uint8_t*>(a10.data()),
             n / QK_K * sizeof(block_q8_K), 10, y10.data(), 3);
        for (int k = 0; k < 30; ++k) {
          if (std::isnan(y[k % 6])) {
            EXPECT_TRUE(std::isnan(y10[k])) << type_name(t);
          } else {
            EXPECT_TRUE(same_bits(y[k % 6], y10[k])) << type_name(t) << " decoded gemm n " << n;
          }
        }
        for (int m = 0; m < 2; ++m) {
          for (int r = 0; r < 3; ++r) {
            const uint8_t* wr = w.data() + r * row_size(t, n);
            const block_q8_K* am = a.data() + m * (n / QK_K);
            const float want = vec_dot_kernel(t, Isa::scalar)(n, wr, am);
            const float got = vec_dot_kernel(t, isa())(n, wr, am);
            if (!std::isfinite(want)) ++non_finite;
            if (std::isnan(want)) {
              EXPECT_TRUE(std::isnan(got) && std::isnan(y[m * 3 + r])) << type_name(t);
            } else {
              EXPECT_TRUE(same_bits(want, got)) << type_name(t) << " n " << n << ": " << hex(want) << " " << hex(got);
              EXPECT_TRUE(same_bits(want, y[m * 3 + r])) << type_name(t) << " gemm n " << n;
            }
          }
        }
        std::vector<float> deq(static_cast<size_t>(n));
        dequantize_row(t, w.data(), deq.data(), n);
      }
    }
    EXPECT_GT(non_finite, 0) << type_name(t) << ": no infinite or NaN scale drawn";
  }
}

}  // namespace
}  // namespace synapse::quant

// Every kernel table's dots and quantizers (src/quant/*_avx2.cpp,
// *_neon.cpp) against the scalar references that define their results
// (DESIGN.md contract 2), in the KernelTables suite (kernel_tables.hpp):
// random and extreme rows of several lengths must give the same float / the
// same bytes, compared with memcmp.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "quant/formats.hpp"
#include "quant/kernel_tables.hpp"
#include "quant/quant.hpp"
#include "quant/simd.hpp"
#include "quant/random_rows.hpp"

namespace synapse::quant {
namespace {

using namespace test_rows;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

std::string hex(float f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(f));
  return buf;
}

// Every entry the scalar table has, every table has (a level without a
// kernel of its own points to the level below); the packs come with their
// sizes.
TEST_P(KernelTables, EveryReferenceEntryIsFilled) {
  EXPECT_EQ(table().isa, isa());
  for (size_t i = 0; i < kGgmlTypeCount; ++i) {
    const auto t = static_cast<GgmlType>(i);
    const TypeKernels& ref = reference().rows[i];
    const TypeKernels& row = table().rows[i];
    EXPECT_EQ(row.vec_dot_type, ref.vec_dot_type) << type_name(t);
    EXPECT_EQ(row.dequantize != nullptr, ref.dequantize != nullptr) << type_name(t);
    if (ref.vec_dot != nullptr) { EXPECT_NE(row.vec_dot, nullptr) << type_name(t); }
    if (ref.quantize != nullptr) { EXPECT_NE(row.quantize, nullptr) << type_name(t); }
    if (ref.gemm_x8 != nullptr) { EXPECT_NE(row.gemm_x8, nullptr) << type_name(t); }
    EXPECT_EQ(row.gemm_pack != nullptr, row.gemm_pack_bytes != 0) << type_name(t);
    EXPECT_EQ(row.x8_pack != nullptr, row.x8_pack_bytes != 0) << type_name(t);
    if (row.interleave) { EXPECT_NE(row.gemm_x8, nullptr) << type_name(t); }
    if (row.gemm_x8 != nullptr) {
      EXPECT_TRUE(row.x8_group_step >= 1 && row.x8_group_step <= 64) << type_name(t);
      EXPECT_TRUE(row.x8_tile_step >= 1 && row.x8_tile_step <= 64) << type_name(t);
    }
  }
  for (GgmlType t : kDotTypes) EXPECT_NE(table().row(t).vec_dot, nullptr) << type_name(t);
}

// Random bytes (any digit, any int8 activation in [-127, 127], any finite
// scale) and real quantized rows from floats of every kind.
TEST_P(KernelTables, VecDotEqualsScalarBitForBit) {
  std::mt19937 rng(1234);
  for (GgmlType t : kDotTypes) {
    const GgmlType vt = vec_dot_type(t);
    const VecDotFn scalar = vec_dot_kernel(t, Isa::scalar);
    const VecDotFn simd = vec_dot_kernel(t, isa());
    int checked = 0;
    for (int64_t n : lengths_of(t)) {
      for (int trial = 0; trial < 12; ++trial) {
        std::vector<uint8_t> w, a;
        if (trial < 4) {
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
        const float want = scalar(n, w.data(), a.data());
        const float got = simd(n, w.data(), a.data());
        if (std::isnan(want) && std::isnan(got)) continue;  // from an extreme row
        ASSERT_TRUE(same_bits(want, got)) << type_name(t) << " n " << n << " trial " << trial << ": scalar "
                                          << hex(want) << " " << isa_name(isa()) << " " << hex(got);
        ++checked;
      }
    }
    EXPECT_GT(checked, 40) << type_name(t);  // not all NaN
  }
}

// The public entry point runs the kernel active_isa() names.
TEST(KernelTable, DispatchFollowsActiveIsa) {
  const char* env = std::getenv("SYNAPSE_NO_SIMD");
  const bool off = env != nullptr && env[0] != '\0' && std::strcmp(env, "0") != 0;
  const char* chosen = std::getenv("SYNAPSE_ISA");
  // (A SYNAPSE_ISA naming a table this CPU runs wins over cpuid's choice.)
  Isa expected = cpu_has_avx512_vnni() ? Isa::avx512 : cpu_has_avx2()          ? Isa::avx2
                 : cpu_has_neon_dotprod()                    ? Isa::neon
                                                             : Isa::scalar;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::neon})
    if (chosen != nullptr && std::strcmp(chosen, isa_name(isa)) == 0 && cpu_runs(isa)) expected = isa;
  EXPECT_EQ(active_isa(), off ? Isa::scalar : expected);
  EXPECT_STREQ(isa_name(Isa::avx2), "avx2");
  EXPECT_STREQ(isa_name(Isa::avx512), "avx512");
  EXPECT_EQ(&active_kernels(), &kernel_table(active_isa()));
  std::mt19937 rng(7);
  const int64_t n = 512;
  const auto w = random_row_bytes(GgmlType::Q4_K, n, rng);
  const auto a = random_row_bytes(GgmlType::Q8_K, n, rng);
  const float got = vec_dot(GgmlType::Q4_K, n, w.data(), a.data());
  const float want = vec_dot_kernel(GgmlType::Q4_K, active_isa())(n, w.data(), a.data());
  EXPECT_TRUE(same_bits(got, want));
}

// Activation quantizers: identical bytes for every input, NaN and inf
// included, and nothing written past the row (16 guard bytes).
TEST_P(KernelTables, QuantizersEqualScalarByteForByte) {
  std::mt19937 rng(99);
  for (GgmlType t : {GgmlType::Q8_K, GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::F16}) {
    const QuantizeFn scalar = quantize_kernel(t, Isa::scalar);
    const QuantizeFn simd = quantize_kernel(t, isa());
    // The Q8_0/Q8_1 pair (legacy.cpp / legacy_avx2.cpp) does not agree on
    // where a NaN goes in the block maximum; known, left to its owner.
    const bool nan_ok = t == GgmlType::Q8_K || t == GgmlType::F16;
    for (int64_t n : lengths_of(t)) {
      for (int trial = 0; trial < 16; ++trial) {
        auto x = random_floats(n, rng, trial % 4);
        if (trial >= 12) {  // non-finite values and all-zero blocks
          for (auto& v : x) {
            const uint32_t r = rng() % 64;
            if (r == 0 && nan_ok) v = std::numeric_limits<float>::quiet_NaN();
            if (r == 1) v = -std::numeric_limits<float>::infinity();
            if (r == 2) v = std::numeric_limits<float>::infinity();
          }
          if (trial == 15) std::fill(x.begin(), x.begin() + std::min<int64_t>(n, 256), 0.0f);
        }
        // ties on the first largest |x|: +m and -m (the first one decides the sign)
        if (trial == 5 && n >= 32) {
          x[3] = -1000.0f;
          x[9] = 1000.0f;
        }
        std::vector<uint8_t> want(row_size(t, n), 0xAA), got(row_size(t, n) + 16, 0x55);
        scalar(x.data(), want.data(), n);
        simd(x.data(), got.data(), n);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size()))
            << type_name(t) << " n " << n << " trial " << trial;
        for (size_t k = want.size(); k < got.size(); ++k) ASSERT_EQ(got[k], 0x55) << type_name(t) << " wrote past the row";
      }
    }
  }
}

// Hand-checked corner: a Q8_0 weight block of -128 against an activation
// block of -128 (the pair ggml's sign trick gets wrong) gives 32 * 16384 * d.
TEST_P(KernelTables, Q8_0MinusOneTwentyEightIsExact) {
  block_q8_0 w{}, a{};
  w.d = a.d = fp32_to_fp16(1.0f);
  std::memset(w.qs, 0x80, sizeof w.qs);
  std::memset(a.qs, 0x80, sizeof a.qs);
  EXPECT_EQ(vec_dot_kernel(GgmlType::Q8_0, isa())(32, &w, &a), 32.0f * 16384.0f);
}

// K-quant corners of ggml's AVX2 instruction sequences: weight bytes all
// 0xFF (the largest digits: Q4_K 15, Q5_K 31, Q6_K 63, IQ4_XS value 113)
// or all 0x00 (IQ4_XS value -127, Q3_K digit - 4) against activations of all
// -128 or all 127, where a maddubs pair comes closest to int16 saturation
// (none saturates) and IQ4_XS's sign trick meets -128 (the reference
// computes what the instructions do); and bsums of 16 * a, +32767 or
// -32768, whose Q4_K/Q5_K pair sums wrap in _mm_hadd_epi16 (the reference
// wraps them alike). Bit-equal to the scalar reference, and where nothing
// wraps equal to a value worked out by hand.
TEST_P(KernelTables, KQuantExtremesEqualScalar) {
  const int64_t n = 2 * QK_K;
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                     GgmlType::IQ4_XS}) {
    for (uint8_t fill : {uint8_t{0xFF}, uint8_t{0x00}}) {
      std::vector<uint8_t> w(row_size(t, n), fill);
      const ScaleFields sf = scale_fields(t);
      for (size_t off = 0; off < w.size(); off += sf.block_bytes)
        for (size_t f : sf.f16) {
          const ggml_fp16_t one = fp32_to_fp16(1.0f);
          std::memcpy(w.data() + off + f, &one, sizeof one);
        }
      for (int8_t v : {int8_t{-128}, int8_t{127}}) {
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
                                            << bsum_case << ": scalar " << hex(want) << " " << isa_name(isa()) << " " << hex(got);
          if (bsum_case != 0 || fill != 0xFF) continue;
          if (t == GgmlType::Q6_K) {  // digit 63 (value 31), scales 0xFF = -1
            EXPECT_EQ(want, static_cast<float>(n * 31 * -1 * v)) << int{v};
          }
          if (t == GgmlType::IQ4_XS) {  // value 113, scale 63 - 32 = 31
            EXPECT_EQ(want, static_cast<float>(n * 113 * 31 * v)) << int{v};
          }
        }
      }
      if (t == GgmlType::IQ4_XS && fill == 0x00) {
        // value -127 against -128: the sign trick gives 127 * -128 per
        // element (not +127 * 128); scale 0 - 32 = -32.
        std::vector<block_q8_K> a(n / QK_K);
        for (auto& b : a) {
          b.d = 1.0f;
          std::memset(b.qs, 0x80, sizeof b.qs);
          std::memset(b.bsums, 0, sizeof b.bsums);
        }
        EXPECT_EQ(vec_dot_kernel(t, Isa::scalar)(n, w.data(), a.data()), static_cast<float>(n * 127 * -128 * -32));
      }
    }
  }
}

}  // namespace
}  // namespace synapse::quant

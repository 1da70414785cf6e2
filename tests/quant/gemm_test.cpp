// Multi-row dot kernels (src/quant/gemm*.cpp) against the single-row dot
// they must equal bit for bit (DESIGN.md contract 2): for 1..5 weight rows
// by 1..17 activation rows (every edge of the register tiles), random weight
// and activation rows of every type, each output compared with memcmp to
// vec_dot_kernel(t, isa) on that pair of rows alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/formats.hpp"
#include "quant/gemm.hpp"
#include "quant/interleave.hpp"
#include "quant/kernel_tables.hpp"
#include "quant/quant.hpp"
#include "quant/simd.hpp"
#include "quant/random_rows.hpp"
#include "synapse/error.hpp"

namespace synapse::quant {
namespace {

const GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q5_0,  GgmlType::Q8_0,   GgmlType::Q4_K,  GgmlType::Q5_K,
                           GgmlType::Q6_K, GgmlType::F16,   GgmlType::F32,    GgmlType::Q4_1,  GgmlType::Q5_1,
                           GgmlType::IQ4_NL, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_XS, GgmlType::TQ1_0,
                           GgmlType::TQ2_0, GgmlType::BF16, GgmlType::MXFP4, GgmlType::IQ2_XXS, GgmlType::IQ2_XS,
                           GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ1_S, GgmlType::IQ1_M};

// Random row of type t: either quantized from Gaussian floats at a random
// scale, or (raw = true) random bytes with finite scales and floats.
std::vector<uint8_t> random_row(GgmlType t, int64_t n, std::mt19937& rng, bool raw) {
  if (raw || quantize_kernel(t, Isa::scalar) == nullptr) return test_rows::random_row_bytes(t, n, rng);
  std::vector<uint8_t> row(row_size(t, n));
  std::normal_distribution<float> g(0.0f, 1.0f);
  const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = g(rng) * scale;
  quantize_kernel(t, Isa::scalar)(x.data(), row.data(), n);
  return row;
}

std::vector<int64_t> lengths_of(GgmlType t) {
  const int64_t bs = type_traits(t).block_size;
  if (bs == 1) return {8, 13, 64, 100, 2048 + 5};
  if (bs == 32) return {32, 96, 2048};
  return {256, 768, 2048};
}

// Checks gemm(t, isa) against the scalar vec_dot for n_w = 1..5 weight
// rows (w_stride bytes apart, with a gap) and M = 1..17 activation rows, with
// an output stride of n_w + 2 (the elements between must stay untouched).
void check(GgmlType t, Isa isa, std::mt19937& rng) {
  const GgmlType vt = vec_dot_type(t);
  const VecDotFn dot = vec_dot_kernel(t, Isa::scalar);
  int compared = 0;
  for (int64_t n : lengths_of(t)) {
    for (int trial = 0; trial < 2; ++trial) {
      const bool raw = trial == 1;
      const size_t row_bytes = row_size(t, n), w_stride = row_bytes + 32;
      std::vector<uint8_t> w(w_stride * 5, 0xCD);
      for (int r = 0; r < 5; ++r) {
        const std::vector<uint8_t> row = random_row(t, n, rng, raw);
        std::memcpy(w.data() + r * w_stride, row.data(), row_bytes);
      }
      const size_t stride = row_size(vt, n);
      std::vector<uint8_t> a;
      for (int m = 0; m < 17; ++m) {
        const std::vector<uint8_t> r = random_row(vt, n, rng, raw);
        a.insert(a.end(), r.begin(), r.end());
      }
      for (int64_t n_w = 1; n_w <= 5; ++n_w) {
        for (int64_t M = 1; M <= 17; ++M) {
          const size_t ys = static_cast<size_t>(n_w) + 2;
          std::vector<float> y(static_cast<size_t>(M) * ys, -7.0f);
          gemm(t, isa, n, w.data(), w_stride, n_w, a.data(), stride, M, y.data(), ys);
          for (int64_t m = 0; m < M; ++m) {
            for (int64_t r = 0; r < n_w; ++r) {
              const float want = dot(n, w.data() + r * w_stride, a.data() + m * stride);
              const float got = y[m * ys + r];
              if (std::isnan(want) && std::isnan(got)) continue;
              ASSERT_EQ(std::memcmp(&want, &got, sizeof(float)), 0)
                  << type_name(t) << " " << isa_name(isa) << " n " << n << " raw " << raw << " n_w " << n_w << " M "
                  << M << " row " << r << " act " << m << ": vec_dot " << want << " gemm " << got;
              ++compared;
            }
            ASSERT_EQ(y[m * ys + n_w], -7.0f) << type_name(t) << " wrote past its rows";
            ASSERT_EQ(y[m * ys + n_w + 1], -7.0f) << type_name(t) << " wrote past its rows";
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 2000) << type_name(t);
}

// Checks gemv_kernel(t, isa) (several weight rows, one activation row)
// against vec_dot on each row for n_w = 1..11 weight rows, the rows
// w_stride bytes apart with a gap between them; y[n_w] must stay untouched.
// Returns the number of outputs compared (0 when isa has no gemv for t).
int check_gemv(GgmlType t, Isa isa, std::mt19937& rng) {
  const GemvFn gemv = gemv_kernel(t, isa);
  if (gemv == nullptr) return 0;
  const GgmlType vt = vec_dot_type(t);
  const VecDotFn dot = vec_dot_kernel(t, Isa::scalar);
  const GemmPackFn pack = gemm_pack_kernel(t, isa);
  int compared = 0;
  for (int64_t n : lengths_of(t)) {
    for (int trial = 0; trial < 2; ++trial) {
      const bool raw = trial == 1;
      const size_t row_bytes = row_size(t, n), w_stride = row_bytes + 64;
      std::vector<uint8_t> w(w_stride * 11, 0xAB);
      for (int r = 0; r < 11; ++r) {
        const std::vector<uint8_t> row = random_row(t, n, rng, raw);
        std::memcpy(w.data() + r * w_stride, row.data(), row_bytes);
      }
      const std::vector<uint8_t> a = random_row(vt, n, rng, raw);
      std::vector<uint8_t> packed = a;
      if (pack) {
        packed.assign(gemm_packed_row_size(t, isa, n), 0);
        pack(n, a.data(), packed.data());
      }
      for (int64_t n_w = 1; n_w <= 11; ++n_w) {
        std::vector<float> y(static_cast<size_t>(n_w) + 1, -7.0f);
        gemv(n, w.data(), w_stride, n_w, packed.data(), y.data());
        for (int64_t r = 0; r < n_w; ++r) {
          const float want = dot(n, w.data() + r * w_stride, a.data());
          if (std::isnan(want) && std::isnan(y[r])) continue;
          EXPECT_EQ(std::memcmp(&want, &y[r], sizeof(float)), 0)
              << type_name(t) << " n " << n << " raw " << raw << " n_w " << n_w << " row " << r << ": vec_dot "
              << want << " gemv " << y[r];
          ++compared;
        }
        EXPECT_EQ(y[n_w], -7.0f) << type_name(t) << " wrote past its rows";
      }
    }
  }
  return compared;
}

TEST_P(KernelTables, GemvEqualsScalarDot) {
  std::mt19937 rng(21);
  for (GgmlType t : kTypes) {
    const int compared = check_gemv(t, isa(), rng);
    if (table().row(t).gemv != nullptr) { EXPECT_GT(compared, 300) << type_name(t); }
  }
}

// Every type: the table's multi-row kernel, or its vec_dot loop where it
// has none.
TEST_P(KernelTables, GemmEqualsScalarDot) {
  std::mt19937 rng(5);
  for (GgmlType t : kTypes) check(t, isa(), rng);
}

TEST(Gemm, TypeWithoutDotIsRefused) {
  std::vector<uint8_t> w(64), a(64);
  float y = 0;
  EXPECT_THROW(gemm(GgmlType::Q8_K, Isa::scalar, 256, w.data(), 0, 1, a.data(), 0, 1, &y, 1), Error);
}

}  // namespace
}  // namespace synapse::quant

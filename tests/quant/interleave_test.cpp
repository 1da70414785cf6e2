// Interleaved Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4, Q4_K and Q6_K matrices
// (src/quant/interleave*.cpp): the repack keeps every row (dequantized rows
// memcmp-equal to the plain ones), and the kernels of every ISA give, per
// output, the scalar vec_dot_<t>_<vt> of the plain row bit for bit (DESIGN.md contract
// 2) for 1..3 groups by 1..17 activation rows (the edges of the AVX2 tiles)
// and by 131 (more than one Q6_K prefill call takes: 64 rows, 32 for two
// groups), quantized and raw-byte rows (activation bytes down to -128),
// with untouched gaps in the output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "quant/formats.hpp"
#include "quant/gemm.hpp"
#include "quant/interleave.hpp"
#include "quant/kernel_tables.hpp"
#include "quant/quant.hpp"
#include "quant/random_rows.hpp"
#include "quant/simd.hpp"
#include "synapse/error.hpp"

namespace synapse::quant {
namespace {

std::vector<uint8_t> rows_of(GgmlType t, int64_t n, int64_t count, std::mt19937& rng, bool raw) {
  std::vector<uint8_t> out;
  for (int64_t r = 0; r < count; ++r) {
    std::vector<uint8_t> row;
    if (raw) {
      row = test_rows::random_row_bytes(t, n, rng);
    } else {
      row.resize(row_size(t, n));
      const std::vector<float> x = test_rows::random_floats(n, rng, static_cast<int>(r % 2));
      quantize_kernel(t, Isa::scalar)(x.data(), row.data(), n);
    }
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// Weight rows: as rows_of, with no Q8_0 byte of -128 (which
// rows_interleave_exactly refuses; tested apart).
std::vector<uint8_t> weight_rows_of(GgmlType t, int64_t n, int64_t count, std::mt19937& rng, bool raw) {
  std::vector<uint8_t> out = rows_of(t, n, count, rng, raw);
  if (t == GgmlType::Q8_0) {
    for (size_t off = 0; off < out.size(); off += sizeof(block_q8_0)) {
      auto* b = reinterpret_cast<block_q8_0*>(out.data() + off);
      for (int8_t& q : b->qs) q = q == -128 ? int8_t{-127} : q;
    }
  }
  return out;
}

const GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q5_0,  GgmlType::Q8_0, GgmlType::IQ4_NL,
                           GgmlType::MXFP4, GgmlType::Q4_K, GgmlType::Q6_K};

std::vector<int64_t> lengths_of(GgmlType t) {
  if (type_traits(t).block_size == 32) return {32, 96, 2048};
  return {256, 768, 2048};
}

// Bytes of 24 interleaved rows (3 groups).
size_t x8_bytes(GgmlType t, int64_t n) { return 3 * interleaved_group_bytes(t, n); }

TEST(Interleave, RowsSurviveTheRepack) {
  std::mt19937 rng(21);
  for (GgmlType t : kTypes) {
    for (int64_t n : lengths_of(t)) {
      const size_t rb = row_size(t, n);
      const std::vector<uint8_t> plain = weight_rows_of(t, n, 24, rng, true);
      std::vector<uint8_t> x8(x8_bytes(t, n), 0xEE);
      interleave_rows(t, n, plain.data(), rb, 24, x8.data());
      EXPECT_NE(std::memcmp(plain.data(), x8.data(), std::min(plain.size(), x8.size())), 0);  // the bytes did move
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
      for (int64_t r = 0; r < 24; ++r) {
        dequantize_row(t, plain.data() + r * rb, want.data(), n);
        dequantize_interleaved_row(t, x8.data(), r, got.data(), n);
        ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
            << type_name(t) << " n " << n << " row " << r;
      }
    }
  }
}

TEST(Interleave, RefusesWhatItCannotInterleave) {
  EXPECT_TRUE(can_interleave(GgmlType::Q4_0, 8));
  EXPECT_FALSE(can_interleave(GgmlType::Q4_0, 12));
  EXPECT_FALSE(can_interleave(GgmlType::Q4_0, 0));
  EXPECT_TRUE(can_interleave(GgmlType::Q5_0, 16));
  EXPECT_TRUE(can_interleave(GgmlType::Q8_0, 16));
  EXPECT_FALSE(can_interleave(GgmlType::Q4_1, 16));
  EXPECT_TRUE(can_interleave(GgmlType::Q4_K, 16));
  EXPECT_TRUE(can_interleave(GgmlType::Q6_K, 16));
  EXPECT_FALSE(can_interleave(GgmlType::Q5_K, 16));
  EXPECT_TRUE(can_interleave(GgmlType::IQ4_NL, 16));
  EXPECT_TRUE(can_interleave(GgmlType::MXFP4, 8));
  EXPECT_FALSE(can_interleave(GgmlType::MXFP4, 20));
  EXPECT_FALSE(can_interleave(GgmlType::IQ4_XS, 16));
  EXPECT_EQ(interleaved_group_bytes(GgmlType::MXFP4, 64), 8 * row_size(GgmlType::MXFP4, 64));
  EXPECT_EQ(interleaved_group_bytes(GgmlType::IQ4_NL, 64), 8 * row_size(GgmlType::IQ4_NL, 64));
  EXPECT_EQ(interleaved_group_bytes(GgmlType::Q4_0, 64), 8 * row_size(GgmlType::Q4_0, 64));
  EXPECT_EQ(interleaved_group_bytes(GgmlType::Q4_K, 512), 2 * sizeof(block_q4_Kx8));
  for (GgmlType t : kTypes) EXPECT_FALSE(interleave_pays(t, Isa::scalar)) << type_name(t);
  EXPECT_EQ(gemm_x8_kernel(GgmlType::Q4_1, Isa::scalar), nullptr);
  std::vector<uint8_t> src(20 * 16), dst(src.size());
  EXPECT_THROW(interleave_rows(GgmlType::Q4_0, 32, src.data(), 18, 12, dst.data()), Error);
  EXPECT_THROW(interleave_rows(GgmlType::Q4_1, 32, src.data(), 20, 8, dst.data()), Error);
  EXPECT_THROW(interleave_rows(GgmlType::Q4_0, 32, src.data(), 20, 8, dst.data()), Error);  // not Q4_0 rows
  EXPECT_THROW(interleave_rows(GgmlType::Q4_0, 48, src.data(), 27, 8, dst.data()), Error);  // n % 32 != 0
  float y[32];
  EXPECT_THROW(dequantize_interleaved_row(GgmlType::Q4_1, src.data(), 0, y, 32), Error);
}

// A Q8_0 weight byte of -128 (the sign trick cannot negate it) keeps the
// matrix plain: rows_interleave_exactly says so and interleave_rows refuses
// (returns false and writes nothing).
TEST(Interleave, Q8_0ByteMinus128StaysPlain) {
  std::mt19937 rng(3);
  const int64_t n = 64;
  std::vector<uint8_t> rows = weight_rows_of(GgmlType::Q8_0, n, 8, rng, true);
  const size_t rb = row_size(GgmlType::Q8_0, n);
  EXPECT_TRUE(rows_interleave_exactly(GgmlType::Q8_0, n, rows.data(), rb, 8));
  std::vector<uint8_t> x8(interleaved_group_bytes(GgmlType::Q8_0, n));
  EXPECT_TRUE(interleave_rows(GgmlType::Q8_0, n, rows.data(), rb, 8, x8.data()));
  for (int byte = 0; byte < 32; ++byte) {  // each place of a block's 8-byte words
    std::vector<uint8_t> bad = rows;
    reinterpret_cast<block_q8_0*>(bad.data() + 7 * rb)[1].qs[byte] = -128;
    EXPECT_FALSE(rows_interleave_exactly(GgmlType::Q8_0, n, bad.data(), rb, 8)) << byte;
    EXPECT_TRUE(rows_interleave_exactly(GgmlType::Q8_0, n, bad.data(), rb, 7));  // the rows before it
  }
  reinterpret_cast<block_q8_0*>(rows.data() + 7 * rb)[1].qs[31] = -128;  // the very last byte
  std::vector<uint8_t> untouched(x8.size(), 0x5A);
  x8 = untouched;
  EXPECT_FALSE(interleave_rows(GgmlType::Q8_0, n, rows.data(), rb, 8, x8.data()));
  EXPECT_EQ(x8, untouched);
  // 0x80 in a d (not a byte) is no -128: the scan reads only the bytes.
  std::vector<uint8_t> d80 = weight_rows_of(GgmlType::Q8_0, n, 8, rng, true);
  reinterpret_cast<block_q8_0*>(d80.data())->d = 0x8080;
  EXPECT_TRUE(rows_interleave_exactly(GgmlType::Q8_0, n, d80.data(), rb, 8));
  EXPECT_TRUE(rows_interleave_exactly(GgmlType::Q4_0, 32, rows.data(), 18, 8));  // other types: always
}

// count activation rows a (vec_dot_type(t), row_size apart) as t's
// interleaved kernel under isa reads them: through x8_pack_kernel(t, isa)
// when it has one, else as they are. stride: the result's bytes per row.
std::vector<uint8_t> packed_rows(GgmlType t, Isa isa, int64_t n, const std::vector<uint8_t>& a, int64_t count,
                                 size_t& stride) {
  const size_t as = row_size(vec_dot_type(t), n);
  const GemmPackFn pack = x8_pack_kernel(t, isa);
  if (pack == nullptr) {
    stride = as;
    return a;
  }
  stride = x8_packed_row_size(t, isa, n);
  std::vector<uint8_t> packed(stride * static_cast<size_t>(count), 0);
  for (int64_t m = 0; m < count; ++m) pack(n, a.data() + m * as, packed.data() + m * stride);
  return packed;
}

// gemm_x8_kernel(t, isa) against the scalar vec_dot on the plain rows,
// output stride 8 * n_groups + 3 (the 3 floats between rows must stay
// untouched).
void check(GgmlType t, Isa isa, std::mt19937& rng) {
  const GemmX8Fn kernel = gemm_x8_kernel(t, isa);
  ASSERT_NE(kernel, nullptr);
  const VecDotFn dot = vec_dot_kernel(t, Isa::scalar);
  int compared = 0;
  const GgmlType vt = vec_dot_type(t);
  for (int64_t n : lengths_of(t)) {
    for (bool raw : {false, true}) {
      const size_t rb = row_size(t, n), as = row_size(vt, n);
      // Up to 5 groups: the AVX-512 kernels take 2 pairs, then 1 pair,
      // then a lone group.
      const std::vector<uint8_t> plain = weight_rows_of(t, n, 40, rng, raw);
      std::vector<uint8_t> x8(5 * interleaved_group_bytes(t, n));
      interleave_rows(t, n, plain.data(), rb, 40, x8.data());
      const std::vector<uint8_t> a = rows_of(vt, n, 17, rng, raw);
      size_t ps = 0;
      const std::vector<uint8_t> packed = packed_rows(t, isa, n, a, 17, ps);
      for (int64_t groups = 1; groups <= 5; ++groups) {
        for (int64_t M = 1; M <= 17; ++M) {
          const size_t ys = static_cast<size_t>(8 * groups) + 3;
          std::vector<float> y(static_cast<size_t>(M) * ys, -7.0f);
          kernel(n, x8.data(), groups, packed.data(), ps, M, y.data(), ys);
          for (int64_t m = 0; m < M; ++m) {
            for (int64_t r = 0; r < 8 * groups; ++r) {
              const float want = dot(n, plain.data() + r * rb, a.data() + m * as);
              const float got = y[m * ys + r];
              ASSERT_EQ(std::memcmp(&want, &got, sizeof(float)), 0)
                  << type_name(t) << " " << isa_name(isa) << " n " << n << " raw " << raw << " groups " << groups << " M " << M << " row "
                  << r << " act " << m << ": vec_dot " << want << " kernel " << got;
              ++compared;
            }
            for (size_t k = static_cast<size_t>(8 * groups); k < ys; ++k)
              ASSERT_EQ(y[m * ys + k], -7.0f) << "wrote past its rows";
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 10000);
}

// More activation rows than one call of the Q6_K prefill path takes (64,
// 32 for two groups): 131 rows by 4 groups, the table's kernel against the
// scalar vec_dot.
TEST_P(KernelTables, X8ManyActivationRowsEqualScalarDot) {
  std::mt19937 rng(99);
  for (GgmlType t : kTypes) {
    const int64_t n = type_traits(t).block_size == 32 ? 64 : 512, M = 131;
    const GgmlType vt = vec_dot_type(t);
    const size_t rb = row_size(t, n), as = row_size(vt, n);
    const std::vector<uint8_t> plain = weight_rows_of(t, n, 32, rng, true);
    std::vector<uint8_t> x8(4 * interleaved_group_bytes(t, n));
    ASSERT_TRUE(interleave_rows(t, n, plain.data(), rb, 32, x8.data()));
    const std::vector<uint8_t> a = rows_of(vt, n, M, rng, false);
    size_t ps = 0;
    const std::vector<uint8_t> packed = packed_rows(t, isa(), n, a, M, ps);
    std::vector<float> y(static_cast<size_t>(M) * 32, -7.0f);
    gemm_x8_kernel(t, isa())(n, x8.data(), 4, packed.data(), ps, M, y.data(), 32);
    for (int64_t m = 0; m < M; ++m) {
      for (int r = 0; r < 32; ++r) {
        const float want = vec_dot_kernel(t, Isa::scalar)(n, plain.data() + r * rb, a.data() + m * as);
        ASSERT_EQ(std::memcmp(&want, &y[m * 32 + r], sizeof want), 0)
            << type_name(t) << " " << isa_name(isa()) << " act " << m << " row " << r;
      }
    }
  }
}

// Every interleaved type, 1..5 groups by 1..17 activation rows (AVX-512:
// two pairs of groups, one pair, a lone last group, and 1..3 rows through
// the AVX2 kernels).
TEST_P(KernelTables, X8KernelsEqualScalarDot) {
  std::mt19937 rng(8);
  for (GgmlType t : kTypes) {
    // A level interleaves exactly when it has interleaved kernels of its own.
    EXPECT_EQ(interleave_pays(t, isa()), isa() != Isa::scalar && table().row(t).gemm_x8 != reference().row(t).gemm_x8)
        << type_name(t);
    check(t, isa(), rng);
  }
}

// The integer sums at their extremes (every digit or byte at its largest
// magnitude against activation bytes of -128 and of 127, where an int16
// step would saturate first): every kernel still equals the vec_dot.
TEST_P(KernelTables, X8ExtremeBlocksEqualScalarDot) {
  for (GgmlType t : kTypes) {
    const int64_t n = 2 * type_traits(t).block_size;
    const GgmlType vt = vec_dot_type(t);
    const size_t rb = row_size(t, n), bb = row_size(t, n / 2);
    for (int pattern = 0; pattern < 3; ++pattern) {
      std::vector<uint8_t> plain(rb * 16);  // two groups (the AVX-512 kernels take them in pairs)
      for (size_t off = 0; off < plain.size(); off += bb) {
        uint8_t* blk = plain.data() + off;
        // Digits 15 (Q5_0: 31; Q4_K scales and mins 63; Q8_0 bytes -127 or
        // 127; IQ4_NL level 113, MXFP4 -12) or all 0 (IQ4_NL: level -127).
        const int fill = t != GgmlType::Q8_0 ? 0xFF : pattern == 0 ? 0x81 : 0x7F;
        std::memset(blk, pattern == 1 ? 0x00 : fill, bb);
        const ggml_fp16_t one = fp32_to_fp16(pattern == 2 ? 1e-3f : 1.0f);
        if (t == GgmlType::MXFP4) {
          blk[0] = pattern == 2 ? 118 : 128;  // the exponent: scale 2^-10 or 1
        } else {
          // d (Q4_K: dmin next to it; Q6_K: d last, its int8 scales -1 here)
          std::memcpy(blk + (t == GgmlType::Q6_K ? offsetof(block_q6_K, d) : 0), &one, sizeof one);
        }
        if (t == GgmlType::Q4_K) std::memcpy(blk + 2, &one, sizeof one);
      }
      std::vector<uint8_t> x8(2 * interleaved_group_bytes(t, n));
      interleave_rows(t, n, plain.data(), rb, 16, x8.data());
      for (int8_t byte : {int8_t{-128}, int8_t{127}}) {
        std::vector<uint8_t> a(row_size(vt, n));
        if (vt == GgmlType::Q8_0) {
          for (size_t off = 0; off < a.size(); off += sizeof(block_q8_0)) {
            const ggml_fp16_t d = fp32_to_fp16(0.5f);
            std::memcpy(a.data() + off, &d, sizeof d);
            std::memset(a.data() + off + 2, static_cast<uint8_t>(byte), 32);
          }
        } else {  // Q8_K: d, the bytes, and their sums per 16
          for (size_t off = 0; off < a.size(); off += sizeof(block_q8_K)) {
            auto* b = reinterpret_cast<block_q8_K*>(a.data() + off);
            b->d = 0.5f;
            std::memset(b->qs, static_cast<uint8_t>(byte), sizeof b->qs);
            for (int16_t& s : b->bsums) s = static_cast<int16_t>(16 * byte);
          }
        }
        {
          const Isa isa = KernelTables::isa();
          // One activation row (decode), and the same row 4 times (the
          // prefill tiles of 4 rows).
          std::vector<uint8_t> a4;
          for (int m = 0; m < 4; ++m) a4.insert(a4.end(), a.begin(), a.end());
          size_t ps = 0;
          const std::vector<uint8_t> packed4 = packed_rows(t, isa, n, a4, 4, ps);
          float y[16];
          gemm_x8_kernel(t, isa)(n, x8.data(), 2, packed4.data(), ps, 1, y, 16);
          float y4[4][16];
          gemm_x8_kernel(t, isa)(n, x8.data(), 2, packed4.data(), ps, 4, &y4[0][0], 16);
          for (int r = 0; r < 16; ++r) {
            const float want = vec_dot_kernel(t, Isa::scalar)(n, plain.data() + r * rb, a.data());
            ASSERT_EQ(std::memcmp(&want, &y[r], sizeof want), 0)
                << type_name(t) << " " << isa_name(isa) << " pattern " << pattern << " byte " << int{byte}
                << ": vec_dot " << want << " kernel " << y[r];
            for (int m = 0; m < 4; ++m)
              ASSERT_EQ(std::memcmp(&want, &y4[m][r], sizeof want), 0)
                  << type_name(t) << " " << isa_name(isa) << " 4 rows, pattern " << pattern << " byte " << int{byte};
          }
          // And the value itself, from the dequantized floats.
          std::vector<float> wf(n);
          dequantize_row(t, plain.data(), wf.data(), n);
          double exact = 0;
          for (int64_t k = 0; k < n; ++k) exact += double(wf[k]) * 0.5 * byte;
          EXPECT_NEAR(y[0], exact, std::fabs(exact) * 1e-5 + 1e-3) << type_name(t) << " pattern " << pattern;
        }
      }
    }
  }
}

// Q6_K at the edges of the AVX-512 kernel's int16 steps: a register's 4
// digits all 0 (v = -32) or all 63 against activation bytes -128 or 127
// (4-product sums up to 4 * 255 * 32 = 32640, the int16 it packs them
// into) under scales -128 and 127, rows holding either extreme or a mix of
// both per byte; 3 groups (a pair and a lone group) by 1..17 activation
// rows (the tiles of 8, 4, 2 and 1 rows and their tails). Every table
// equals the scalar vec_dot bit for bit.
TEST_P(KernelTables, X8Q6KExtremeDigitsAndScalesEqualScalarDot) {
  std::mt19937 rng(2026);
  const int64_t n = 2 * QK_K, nb = n / QK_K, groups = 3;
  const size_t rb = row_size(GgmlType::Q6_K, n), as = row_size(GgmlType::Q8_K, n);
  for (int pattern = 0; pattern < 3; ++pattern) {
    std::vector<uint8_t> plain(rb * 8 * groups);
    for (int64_t r = 0; r < 8 * groups; ++r) {
      auto* b = reinterpret_cast<block_q6_K*>(plain.data() + r * rb);
      for (int64_t i = 0; i < nb; ++i) {
        // pattern 0: every digit 0 or every digit 63 (by row); 1: each
        // byte 0x00 or 0xFF (digits 0, 3, 12, 15, 48, ..., 63); 2: digits
        // 0 in even rows, 63 in odd rows, scales of one sign per row.
        const uint8_t row_fill = (r % 2) ? 0xFF : 0x00;
        for (uint8_t& q : b[i].ql) q = pattern == 1 ? ((rng() & 1) ? 0xFF : 0x00) : row_fill;
        for (uint8_t& q : b[i].qh) q = pattern == 1 ? ((rng() & 1) ? 0xFF : 0x00) : row_fill;
        for (int8_t& sc : b[i].scales)
          sc = pattern == 2 ? static_cast<int8_t>(r % 4 < 2 ? -128 : 127) : static_cast<int8_t>((rng() & 1) ? -128 : 127);
        b[i].d = fp32_to_fp16(pattern == 2 ? 1.0f : 1e-3f * static_cast<float>(1 + r));
      }
    }
    std::vector<uint8_t> x8(groups * interleaved_group_bytes(GgmlType::Q6_K, n));
    ASSERT_TRUE(interleave_rows(GgmlType::Q6_K, n, plain.data(), rb, 8 * groups, x8.data()));
    const int64_t max_rows = 17;
    std::vector<uint8_t> a(as * max_rows);
    for (int64_t m = 0; m < max_rows; ++m) {
      auto* x = reinterpret_cast<block_q8_K*>(a.data() + m * as);
      for (int64_t i = 0; i < nb; ++i) {
        x[i].d = 0.25f * static_cast<float>(1 + m);
        // Row m: all -128, all 127, or each byte one of the two.
        for (int8_t& q : x[i].qs) q = static_cast<int8_t>(m % 3 == 0 ? -128 : m % 3 == 1 ? 127 : (rng() & 1) ? 127 : -128);
        for (int k = 0; k < QK_K / 16; ++k) {
          int s = 0;
          for (int e = 0; e < 16; ++e) s += x[i].qs[16 * k + e];
          x[i].bsums[k] = static_cast<int16_t>(s);
        }
      }
    }
    size_t ps = 0;
    const std::vector<uint8_t> packed = packed_rows(GgmlType::Q6_K, isa(), n, a, max_rows, ps);
    const VecDotFn dot = vec_dot_kernel(GgmlType::Q6_K, Isa::scalar);
    for (int64_t M = 1; M <= max_rows; ++M) {
      const size_t ys = static_cast<size_t>(8 * groups);
      std::vector<float> y(static_cast<size_t>(M) * ys, -7.0f);
      gemm_x8_kernel(GgmlType::Q6_K, isa())(n, x8.data(), groups, packed.data(), ps, M, y.data(), ys);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t r = 0; r < 8 * groups; ++r) {
          const float want = dot(n, plain.data() + r * rb, a.data() + m * as);
          ASSERT_EQ(std::memcmp(&want, &y[m * ys + r], sizeof want), 0)
              << isa_name(isa()) << " pattern " << pattern << " M " << M << " act " << m << " row " << r << ": vec_dot "
              << want << " kernel " << y[m * ys + r];
        }
    }
  }
}

// The Q4_0 order itself (legacy.cpp), that of Q5_0, Q8_0, IQ4_NL and MXFP4
// too: one exact integer per block, one fused multiply-add per block by
// d_w * d_a (MXFP4: 2^(e - 128) * d_a); every table's dot gives it.
TEST_P(KernelTables, DotIsOneFmaPerBlock) {
  std::mt19937 rng(13);
  const int64_t n = 96;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4}) {
    const std::vector<uint8_t> w = rows_of(t, n, 1, rng, true);
    const std::vector<uint8_t> a = rows_of(GgmlType::Q8_0, n, 1, rng, true);
    std::vector<float> values(n);  // the integer times d_w, so value / d_w is the integer
    dequantize_row(t, w.data(), values.data(), n);
    const auto* ab = reinterpret_cast<const block_q8_0*>(a.data());
    const size_t bb = row_size(t, 32);
    float acc = 0.0f;
    for (int i = 0; i < 3; ++i) {
      ggml_fp16_t dh;
      std::memcpy(&dh, w.data() + i * bb, sizeof dh);  // d is the first field of the blocks but MXFP4's
      const float d = t == GgmlType::MXFP4 ? kE8M0Half.v[w[i * bb]] : fp16_to_fp32(dh);
      int32_t isum = 0;
      for (int k = 0; k < 32 && d != 0.0f; ++k)  // (d = 0: any isum adds 0)
        isum += static_cast<int32_t>(std::lround(values[32 * i + k] / d)) * ab[i].qs[k];
      acc = std::fma(static_cast<float>(isum), d * fp16_to_fp32(ab[i].d), acc);
    }
    const float got = vec_dot_kernel(t, isa())(n, w.data(), a.data());
    EXPECT_EQ(std::memcmp(&acc, &got, sizeof acc), 0) << type_name(t) << ": " << acc << " vs " << got;
  }
}

}  // namespace
}  // namespace synapse::quant

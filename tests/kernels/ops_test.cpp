// kernels::expf_ggml (one lane of ggml_v_expf) against every ops table's
// form (ops_tables.hpp) and known values; the softmax / swiglu forms built
// on it; geglu's GELU table against ggml's. The OpsTables suite is
// instantiated here, once.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/ops.hpp"
#include "kernels/ops_tables.hpp"
#include "quant/fp16.hpp"
#include "quant/simd.hpp"

namespace synapse::kernels {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

INSTANTIATE_TEST_SUITE_P(Tables, OpsTables, ::testing::ValuesIn(compiled_ops_isas()),
                         [](const ::testing::TestParamInfo<quant::Isa>& info) {
                           return std::string(quant::isa_name(info.param));
                         });

void expect_table_equals_scalar(const OpsTable& t, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  t.expf_n(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float s = expf_ggml(x[i]);
    if (std::isnan(s)) {
      EXPECT_TRUE(std::isnan(y[i])) << x[i];
    } else {
      ASSERT_EQ(bits(s), bits(y[i])) << "x = " << x[i] << " (0x" << std::hex << bits(x[i]) << ")";
    }
  }
}

// Every 251st bit pattern (all signs, exponents, NaNs, infinities,
// subnormals), in groups of 8 that mix the fast path and the |n| > 126 / 192
// blends in one vector.
// Every 251st bit pattern (17 million floats); under sanitizers every
// 1757th (251 * 7), which still walks every exponent of both signs.
constexpr uint64_t kBitPatternStep = SYNAPSE_TEST_SANITIZED ? 1757 : 251;

TEST_P(OpsTables, ExpfEqualsScalarOverBitPatterns) {
  std::vector<float> x;
  x.reserve(1 << 20);
  for (uint64_t b = 0; b <= 0xffffffffull; b += kBitPatternStep) {
    x.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
    if (x.size() == (1u << 20)) {
      expect_table_equals_scalar(table(), x);
      x.clear();
    }
  }
  expect_table_equals_scalar(table(), x);
}

TEST_P(OpsTables, ExpfEqualsScalarOverRanges) {
  std::mt19937 rng(5);
  std::vector<float> x;
  for (float lim : {1.0f, 10.0f, 88.0f, 100.0f, 130.0f, 200.0f}) {
    std::uniform_real_distribution<float> ud(-lim, lim);
    for (int i = 0; i < 200000; ++i) x.push_back(ud(rng));
  }
  // Around the blend thresholds and the ends of the float range.
  for (float c : {87.0f, 88.72f, 89.0f, -87.3f, -88.0f, -103.0f, -104.0f, -126.0f * 0.6931472f,
                  126.0f * 0.6931472f, 192.0f * 0.6931472f, -192.0f * 0.6931472f, 0.0f})
    for (int k = -300; k <= 300; ++k) x.push_back(std::nextafter(c, k < 0 ? -1e9f : 1e9f) + k * 1e-3f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                  -std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(), 1e-30f, -1e-30f})
    x.push_back(v);
  expect_table_equals_scalar(table(), x);
}

// Values that follow from ggml_v_expf's steps: x = 0 gives n = 0, b = 0,
// j = 1, so scalef(j, 0) = 1 exactly; x = -inf and +inf take the |n| > 192
// blend: 0 and inf; x = 100 gives n = 144, j * 2^144 past FLT_MAX; NaN
// stays NaN. Elsewhere it is an approximation of exp within 2.5 ulp (the
// polynomial's stated ~1.5 ulp, plus the AVX-512 form's rounding of
// 1 + c0 b before the scaling: up to 2.14 ulp measured), subnormal results
// included down to -103.
TEST(ExpfGgml, KnownValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bits(1.0f), bits(expf_ggml(0.0f)));
  EXPECT_EQ(bits(1.0f), bits(expf_ggml(-0.0f)));
  EXPECT_EQ(bits(0.0f), bits(expf_ggml(-inf)));
  EXPECT_EQ(bits(inf), bits(expf_ggml(inf)));
  EXPECT_EQ(bits(inf), bits(expf_ggml(100.0f)));  // n = 144: j * 2^144, past FLT_MAX
  EXPECT_TRUE(std::isnan(expf_ggml(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(bits(0.0f), bits(expf_ggml(-200.0f)));
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    const double ref = std::exp(static_cast<double>(x));
    const float got = expf_ggml(x);
    const double ulp = std::nextafter(static_cast<float>(ref), inf) - static_cast<float>(ref);
    EXPECT_LE(std::fabs(got - ref), 2.5 * ulp) << x;
  }
}

// The softmax of a row with n % 16 == 0 does not depend on the padding form.
TEST(Softmax, Pad16EqualsPlainForWholeGroups) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int64_t n : {16, 32, 64, 208}) {
    std::vector<float> a(static_cast<size_t>(n));
    for (auto& v : a) v = nd(rng);
    std::vector<float> b = a;
    softmax(a.data(), n);
    softmax_pad16(b.data(), n);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
    double s = 0;
    for (float v : a) s += v;
    EXPECT_NEAR(1.0, s, 1e-5);
  }
}

// An attention sink (gpt-oss) is one more column of the softmax that weights
// nothing: the probabilities plus exp(sink - max) / sum add up to 1; the sink
// sets the max when it is the largest; a sink of -inf changes nothing.
TEST(Softmax, Pad16WithSink) {
  std::vector<float> x = {0.0f, 0.0f};
  const float zero = 0.0f;
  softmax_pad16(x.data(), 2, &zero);  // exp(0) = 1 three times: 1/3 each
  EXPECT_EQ(static_cast<float>(1.0 / 3.0), x[0]);
  EXPECT_EQ(x[0], x[1]);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int64_t n : {1, 7, 16, 40}) {
    for (float sink : {-5.0f, 0.5f, 30.0f}) {
      std::vector<float> a(static_cast<size_t>(n));
      for (auto& v : a) v = nd(rng);
      double mx = sink, ref_sum = 0;
      for (float v : a) mx = std::max<double>(mx, v);
      for (float v : a) ref_sum += std::exp(v - mx);
      ref_sum += std::exp(sink - mx);
      std::vector<float> want(a.size());
      for (size_t i = 0; i < a.size(); ++i) want[i] = static_cast<float>(std::exp(a[i] - mx) / ref_sum);
      softmax_pad16(a.data(), n, &sink);
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(want[i], a[i], 1e-6 + 1e-5 * want[i]) << n << " " << sink;
    }
  }
  std::vector<float> a = {1.0f, 2.0f, -3.0f}, b = a;
  const float ninf = -std::numeric_limits<float>::infinity();
  softmax_pad16(a.data(), 3);
  softmax_pad16(b.data(), 3, &ninf);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

// ggml_swiglu_oai (alpha 1.702, limit 7): gate clamped above only, up on
// both sides, then x * sigmoid(alpha x) * (up + 1).
TEST(Swiglu, OaiClampsAndAddsOne) {
  const float gate[] = {0.0f, 1.0f, -2.0f, 7.0f, 100.0f, -100.0f, 3.0f, 3.0f};
  const float up[] = {5.0f, 0.0f, 1.0f, 7.0f, 100.0f, 1.0f, -100.0f, -7.0f};
  float y[8];
  swiglu_oai(gate, up, y, 8, 1.702f, 7.0f);
  for (int k = 0; k < 8; ++k) {
    const double x = std::min<double>(gate[k], 7.0), u = std::clamp<double>(up[k], -7.0, 7.0);
    const double want = x / (1.0 + std::exp(-1.702 * x)) * (u + 1.0);
    EXPECT_NEAR(want, y[k], 1e-5 * (1.0 + std::fabs(want))) << k;
  }
  EXPECT_EQ(0.0f, y[0]);
  EXPECT_EQ(bits(y[3]), bits(y[4]));  // gate and up past the limit act as the limit
  EXPECT_EQ(bits(y[6]), bits(y[7]));  // up below -limit acts as -limit
  EXPECT_GT(y[5], -1e-30f);           // a very negative gate is not clamped: silu -> 0
}

// tanh_f32 is the correctly rounded tanh (its error bound leaves out only
// values within 2^-45 of a midpoint): every 1021st float of [0, 10) against
// tanhl rounded to float (x86-64's 64-bit and ARM64's 113-bit long double
// both put the double rounding far below that), odd, and the edges. An
// exhaustive run over all of [0, 10) found no difference (commit message).
TEST(TanhF32, CorrectlyRoundedOverASweep) {
  long n = 0;
  for (uint32_t u = 0; u < bits(10.0f); u += 1021) {
    const float x = std::bit_cast<float>(u);
    const float want = static_cast<float>(std::tanh(static_cast<long double>(x)));
    ASSERT_EQ(bits(want), bits(tanh_f32(x))) << std::hexfloat << x;
    ASSERT_EQ(bits(-want), bits(tanh_f32(-x))) << std::hexfloat << x;
    ++n;
  }
  EXPECT_GT(n, 1000000);
  EXPECT_EQ(bits(tanh_f32(0.0f)), bits(0.0f));
  EXPECT_EQ(bits(tanh_f32(-0.0f)), bits(-0.0f));
  EXPECT_EQ(tanh_f32(std::numeric_limits<float>::denorm_min()), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(tanh_f32(9.0f), std::nextafter(1.0f, 0.0f));
  EXPECT_EQ(tanh_f32(10.0f), 1.0f);
  EXPECT_EQ(tanh_f32(-1e30f), -1.0f);
  EXPECT_EQ(tanh_f32(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_TRUE(std::isnan(tanh_f32(std::numeric_limits<float>::quiet_NaN())));
}

// Gemma's soft-capping: tanh_f32(x * (1 / cap)) * cap in place, so |y| <= cap
// and small logits pass through almost unchanged.
TEST(TanhF32, Softcap) {
  std::vector<float> x = {0.0f, 1.0f, -3.5f, 29.0f, 300.0f, -1e6f, 1e-3f};
  const std::vector<float> in = x;
  softcap(x.data(), static_cast<int64_t>(x.size()), 30.0f);
  for (size_t k = 0; k < x.size(); ++k) {
    EXPECT_EQ(bits(x[k]), bits(tanh_f32(in[k] * (1.0f / 30.0f)) * 30.0f)) << k;
    EXPECT_LE(std::fabs(x[k]), 30.0f) << k;
  }
  EXPECT_EQ(x[4], 30.0f);
  EXPECT_EQ(x[5], -30.0f);
  EXPECT_NEAR(x[1], 1.0f, 1e-3f);
}

// geglu's table against ggml's: every entry ggml_vec_geglu_f32 reads (the F16
// gates h with -10 < h < 10), recovered from geglu(h, 1) (exact: an F16 value
// times 1), hashed as scripts/golden/gelu_table_ref.cpp hashes llama.cpp
// v0.5.0's ggml_table_gelu_f16 (FNV-1a 64, bit-pattern order, 2 bytes
// little-endian each); that program printed the count and hash below for the
// reference build.
TEST(Geglu, TableEqualsGgmls) {
  uint64_t hash = 1469598103934665603ull;
  int n = 0;
  const float one = 1.0f;
  for (uint32_t i = 0; i < (1u << 16); ++i) {
    const float x = quant::fp16_to_fp32(static_cast<quant::ggml_fp16_t>(i));
    if (!(x > -10.0f && x < 10.0f)) continue;
    float y = 0.0f;
    geglu(&x, &one, &y, 1);
    const quant::ggml_fp16_t v = quant::fp32_to_fp16(y);
    ASSERT_EQ(quant::fp16_to_fp32(v), y) << "not an F16 value at 0x" << std::hex << i;
    for (int b = 0; b < 2; ++b) {
      hash ^= static_cast<uint8_t>(v >> (8 * b));
      hash *= 1099511628211ull;
    }
    ++n;
  }
  EXPECT_EQ(n, 37376);
  EXPECT_EQ(hash, 0xf0f8429dfdb90568ull);
}

// Outside (-10, 10) ggml skips the table: 0 below, gate * up above; inside,
// the gate is rounded to F16 first, so two gates of one F16 value give the
// same bits, and the result is GELU to F16 precision.
TEST(Geglu, EdgesAndRounding) {
  const float gate[] = {-10.0f, -50.0f, 10.0f, 12.5f, 1.0f, 1.0001f, -1.5f, 3.0f};
  const float up[] = {3.0f, 3.0f, 2.0f, -2.0f, 1.0f, 1.0f, 2.0f, 0.5f};
  float y[8];
  geglu(gate, up, y, 8);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 20.0f);
  EXPECT_EQ(y[3], -25.0f);
  EXPECT_EQ(bits(y[4]), bits(y[5]));  // 1.0001 rounds to the F16 1.0
  for (int k = 4; k < 8; ++k) {
    const double g = quant::round_fp16(gate[k]);
    const double want = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up[k];
    EXPECT_NEAR(want, y[k], 1e-3 * std::fabs(want)) << k;
  }
  float z[8];
  std::copy(gate, gate + 8, z);
  geglu(z, up, z, 8);  // in place
  for (int k = 0; k < 8; ++k) EXPECT_EQ(bits(z[k]), bits(y[k])) << k;
}

// swiglu_rows = ggml_vec_swiglu_f32 per row: ggml_v_silu on whole groups of
// 16, ggml_silu_f32 (libm expf) on each row's n % 16 tail.
TEST(Swiglu, GroupsThenTail) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  const int64_t len = 29, rows = 3, n = len * rows;
  std::vector<float> g(n), u(n), y(n);
  for (auto& v : g) v = nd(rng);
  for (auto& v : u) v = nd(rng);
  swiglu_rows(g.data(), u.data(), y.data(), rows, len);
  for (int64_t i = 0; i < n; ++i) {
    const float sg = g[i] / (1.0f + expf_ggml(0.0f - g[i]));
    const float s = i % len < 16 ? sg : g[i] / (1.0f + std::exp(-g[i]));
    EXPECT_EQ(bits(s * u[i]), bits(y[i])) << i;
  }
}

// Every table's swiglu_rows equals the scalar one bit for bit, including the
// inputs that take expf's special paths (|x| / ln 2 above 126 and 192), and
// writes nothing past its rows.
TEST_P(OpsTables, SwigluEqualsScalar) {
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0.0f, 30.0f);
  const int64_t len = 8 * 40 + 5, rows = 4, n = len * rows;
  std::vector<float> g(n), u(n), a(n), b(n + 8, -7.0f);
  for (auto& v : g) v = nd(rng);
  for (auto& v : u) v = nd(rng);
  const float special[] = {0.0f, -0.0f, 87.0f, -87.0f, 88.7f, -88.7f, 100.0f, -100.0f, 134.0f, -134.0f, 200.0f, -200.0f};
  for (size_t k = 0; k < sizeof special / sizeof special[0]; ++k) g[3 * k] = special[k];
  swiglu_rows_scalar(g.data(), u.data(), a.data(), rows, len);
  table().swiglu_rows(g.data(), u.data(), b.data(), rows, len);
  for (int64_t i = n; i < n + 8; ++i) EXPECT_EQ(b[i], -7.0f) << "wrote past its rows";
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    EXPECT_EQ(bits(a[i]), bits(b[i])) << i << " gate " << g[i];
  }
}

// Every table's silu_row equals the scalar one bit for bit (the groups of 16,
// then the libm tail), including inputs that take expf's special paths; no
// write past the row.
TEST_P(OpsTables, SiluRowEqualsScalar) {
  std::mt19937 rng(22);
  std::normal_distribution<float> nd(0.0f, 30.0f);
  for (int64_t n : {0, 5, 16, 8 * 40 + 5, 8192}) {
    std::vector<float> a(static_cast<size_t>(n) + 8, -7.0f);
    for (int64_t i = 0; i < n; ++i) a[static_cast<size_t>(i)] = nd(rng);
    const float special[] = {0.0f, -0.0f, 87.0f, -87.0f, 88.7f, -88.7f, 100.0f, -100.0f, 134.0f, -134.0f, 200.0f, -200.0f};
    for (size_t k = 0; k < sizeof special / sizeof special[0] && 3 * k < static_cast<size_t>(n); ++k) a[3 * k] = special[k];
    std::vector<float> b = a;
    silu_row_scalar(a.data(), n);
    table().silu_row(b.data(), n);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << n;
    EXPECT_EQ(b[static_cast<size_t>(n)], -7.0f) << "wrote past the row";
  }
}

// The gated delta rule's step (the reference's row order, with the dots of
// quant::vec_dot_f32_ggml) on a hand-checkable state: d = 2, st = S^T with
// S = [[1, 2], [3, 4]] (st = [1, 3, 2, 4]), decay 0.5, beta 2, k = [1, 0],
// v = [1, 1], q = [0, 1], scale 1: decayed rows [0.5, 1.5] and [1, 2];
// dot(row, k) = 0.5 and 1, delta = (1 - 0.5) * 2 = 1 and 0, rows updated to
// [1.5, 1.5] and [1, 2]; o = dot(row, q) = 1.5 and 2.
TEST(DeltaRule, StepByHand) {
  float st[4] = {1, 3, 2, 4};
  const float q[2] = {0, 1}, k[2] = {1, 0}, v[2] = {1, 1};
  float o[2] = {};
  delta_rule_step_scalar(st, q, k, v, 0.5f, 2.0f, 1.0f, 2, o);
  EXPECT_EQ(st[0], 1.5f);
  EXPECT_EQ(st[1], 1.5f);
  EXPECT_EQ(st[2], 1.0f);
  EXPECT_EQ(st[3], 2.0f);
  EXPECT_EQ(o[0], 1.5f);
  EXPECT_EQ(o[1], 2.0f);
}

// Every table's delta_rule_step equals the scalar one bit for bit (memcmp of
// the state and the output) over several steps, for the head sizes of the
// SIMD forms (64, 128, 256: Qwen3.5 has 128) and ones they hand to the
// scalar form (32, 72); and writes nothing past the state or the output.
TEST_P(OpsTables, DeltaRuleEqualsScalar) {
  std::mt19937 rng(50);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  for (int64_t d : {32, 64, 72, 128, 256}) {
    SCOPED_TRACE(d);
    std::vector<float> st(static_cast<size_t>(d * d + 8), -3.0f);
    for (int64_t e = 0; e < d * d; ++e) st[static_cast<size_t>(e)] = 0.1f * nd(rng);
    std::vector<float> mine = st, o_ref(static_cast<size_t>(d + 8), -5.0f), o_mine = o_ref;
    std::vector<float> q(static_cast<size_t>(d)), k(q.size()), v(q.size());
    for (int step = 0; step < 6; ++step) {
      for (auto* x : {&q, &k, &v})
        for (float& f : *x) f = nd(rng) / std::sqrt(static_cast<float>(d));
      const float decay = ud(rng), beta = ud(rng), scale = 1.0f / std::sqrt(static_cast<float>(d));
      delta_rule_step_scalar(st.data(), q.data(), k.data(), v.data(), decay, beta, scale, d, o_ref.data());
      table().delta_rule_step(mine.data(), q.data(), k.data(), v.data(), decay, beta, scale, d, o_mine.data());
      ASSERT_EQ(std::memcmp(st.data(), mine.data(), st.size() * sizeof(float)), 0) << "state, step " << step;
      ASSERT_EQ(std::memcmp(o_ref.data(), o_mine.data(), o_ref.size() * sizeof(float)), 0) << "output, step " << step;
    }
    EXPECT_EQ(mine[static_cast<size_t>(d * d)], -3.0f) << "wrote past the state";
    EXPECT_EQ(o_mine[static_cast<size_t>(d)], -5.0f) << "wrote past the output";
  }
}

// The short convolution by hand: d_conv 4, one channel, state [1, 2, 3],
// taps [1, 10, 100, 1000]: input 4 gives 1 + 20 + 300 + 4000 = 4321 and
// leaves the state [2, 3, 4]; the next input 5 (the same sequence) gives
// 2 + 30 + 400 + 5000 = 5432, state [3, 4, 5].
TEST(SsmConv, ByHand) {
  float st[3] = {1, 2, 3};
  const float w[4] = {1, 10, 100, 1000};
  float x[2] = {4, 5};
  float* const states[2] = {st, st};
  ssm_conv_scalar(x, 1, 2, states, w, 0, 1, 4);
  EXPECT_EQ(x[0], 4321.0f);
  EXPECT_EQ(x[1], 5432.0f);
  EXPECT_EQ(st[0], 3.0f);
  EXPECT_EQ(st[1], 4.0f);
  EXPECT_EQ(st[2], 5.0f);
}

// Every table's ssm_conv equals the scalar one bit for bit (memcmp of the
// outputs and of the states): channel counts around the 8- and 16-lane
// blocks, a channel range that starts unaligned, rows of two sequences
// interleaved (each row's state must carry the previous row of its
// sequence), d_conv 4 (the SIMD forms) and 3 (handed to the scalar form);
// nothing written outside the range or past the arrays.
TEST_P(OpsTables, SsmConvEqualsScalar) {
  std::mt19937 rng(77);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const int64_t d_conv : {4, 3}) {
    for (const int64_t n_ch : {5, 16, 24, 40, 8192 + 8 + 3}) {
      for (const int64_t c0 : {int64_t{0}, int64_t{3}}) {
        SCOPED_TRACE(testing::Message() << "d_conv " << d_conv << " channels " << n_ch << " from " << c0);
        const int64_t c1 = n_ch - (c0 > 0 ? 1 : 0), n = 7;
        const int seq_of[n] = {0, 0, 1, 0, 1, 1, 0};
        const size_t n_state = static_cast<size_t>(n_ch * (d_conv - 1));
        std::vector<float> w(static_cast<size_t>(n_ch * d_conv)), x(static_cast<size_t>(n * n_ch) + 8, -9.0f);
        std::vector<float> st[2] = {std::vector<float>(n_state + 8, -9.0f), std::vector<float>(n_state + 8, -9.0f)};
        for (float& f : w) f = nd(rng);
        for (int64_t i = 0; i < n * n_ch; ++i) x[static_cast<size_t>(i)] = nd(rng);
        for (auto& v : st)
          for (size_t i = 0; i < n_state; ++i) v[i] = nd(rng);
        std::vector<float> x2 = x;
        std::vector<float> st2[2] = {st[0], st[1]};
        float* ref[n];
        float* mine[n];
        for (int64_t i = 0; i < n; ++i) {
          ref[i] = st[seq_of[i]].data();
          mine[i] = st2[seq_of[i]].data();
        }
        ssm_conv_scalar(x.data(), n_ch, n, ref, w.data(), c0, c1, d_conv);
        table().ssm_conv(x2.data(), n_ch, n, mine, w.data(), c0, c1, d_conv);
        ASSERT_EQ(std::memcmp(x.data(), x2.data(), x.size() * sizeof(float)), 0);
        for (int q = 0; q < 2; ++q) {
          ASSERT_EQ(std::memcmp(st[q].data(), st2[q].data(), st[q].size() * sizeof(float)), 0) << "state " << q;
          EXPECT_EQ(st2[q][n_state], -9.0f) << "wrote past the state";
        }
        EXPECT_EQ(x2[static_cast<size_t>(n * n_ch)], -9.0f) << "wrote past the rows";
        if (c0 > 0) {
          EXPECT_EQ(x2[0], x[0]);
        }
      }
    }
  }
}

// Every table's l2_norm_heads and gated_norm_heads equal the scalar ones bit
// for bit (memcmp of x, and of z which the gated norm overwrites with
// silu(z)): head counts around the 8- and 16-lane blocks, head sizes of
// Qwen3.5 (128), the golden tiny models (32) and ones with a tail (72, 5);
// values spread over several magnitudes; nothing written past the heads.
TEST_P(OpsTables, DeltaNetNormsEqualScalar) {
  std::mt19937 rng(91);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> mag(-6.0f, 6.0f);
  for (const int64_t d : {128, 32, 72, 5}) {
    for (const int64_t n_heads : {1, 4, 8, 9, 16, 17, 32, 33}) {
      SCOPED_TRACE(testing::Message() << "d " << d << " heads " << n_heads);
      const size_t len = static_cast<size_t>(n_heads * d);
      std::vector<float> x(len + 8, -9.0f), z(len + 8, -9.0f), w(static_cast<size_t>(d));
      for (size_t i = 0; i < len; ++i) {
        x[i] = nd(rng) * std::exp2(mag(rng));
        z[i] = 4.0f * nd(rng);
      }
      for (float& f : w) f = 1.0f + 0.1f * nd(rng);
      const float eps = 1e-6f / static_cast<float>(d), scale = 1.0f / std::sqrt(static_cast<float>(d));
      std::vector<float> a = x, b = x;
      l2_norm_heads_scalar(a.data(), n_heads, d, eps, scale);
      table().l2_norm_heads(b.data(), n_heads, d, eps, scale);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "l2";
      EXPECT_EQ(b[len], -9.0f) << "l2 wrote past the heads";
      a = x, b = x;
      std::vector<float> za = z, zb = z;
      gated_norm_heads_scalar(a.data(), za.data(), w.data(), n_heads, d, 1e-6f);
      table().gated_norm_heads(b.data(), zb.data(), w.data(), n_heads, d, 1e-6f);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "gated";
      ASSERT_EQ(std::memcmp(za.data(), zb.data(), za.size() * sizeof(float)), 0) << "gated z";
      EXPECT_EQ(b[len], -9.0f) << "gated wrote past the heads";
      EXPECT_EQ(zb[len], -9.0f) << "gated wrote past z";
    }
  }
}

}  // namespace
}  // namespace synapse::kernels

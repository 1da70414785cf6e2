// The AVX2 attention kernel equals the scalar reference bit for bit, and the
// reference equals a plain double-precision attention to float accuracy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/attention.hpp"
#include "quant/simd.hpp"

namespace synapse::kernels {
namespace {

struct Case {
  int64_t hd, hd_v, n_gqa, n_groups, capacity, first, last;
};

class Attention : public ::testing::TestWithParam<Case> {};

TEST_P(Attention, Avx2EqualsScalarAndDoubleReference) {
  const Case c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.hd * 131 + c.n_gqa * 7 + c.last));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t k_stride = c.hd * c.n_groups, v_stride = c.hd_v * c.n_groups;
  std::vector<quant::ggml_fp16_t> k(static_cast<size_t>(c.capacity * k_stride)), v(static_cast<size_t>(c.capacity * v_stride));
  for (auto& x : k) x = quant::fp32_to_fp16(nd(rng) * 2.0f);
  for (auto& x : v) x = quant::fp32_to_fp16(nd(rng));
  std::vector<float> q(static_cast<size_t>(c.n_gqa * c.hd));
  for (auto& x : q) x = nd(rng);
  const KvLayerView view{k.data(), v.data(), k_stride, v_stride, c.capacity};
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  const int64_t g = c.n_groups - 1;
  std::vector<float> a(static_cast<size_t>(c.n_gqa * c.hd_v)), b(a.size());
  AttentionScratch sa, sb;
  attend_group_scalar(view, g, c.first, c.last, q.data(), c.n_gqa, c.hd, c.hd_v, scale, a.data(), sa);
  if (quant::cpu_has_avx2()) {
    attend_group_avx2(view, g, c.first, c.last, q.data(), c.n_gqa, c.hd, c.hd_v, scale, b.data(), sb);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  }
  // Independent reference in double with the same F16 roundings.
  for (int64_t i = 0; i < c.n_gqa; ++i) {
    std::vector<double> s;
    double mx = -INFINITY;
    for (int64_t p = c.first; p <= c.last; ++p) {
      const quant::ggml_fp16_t* kr = k.data() + (p % c.capacity) * k_stride + g * c.hd;
      double dot = 0;
      for (int64_t d = 0; d < c.hd; ++d)
        dot += static_cast<double>(quant::round_fp16(q[i * c.hd + d])) * quant::fp16_to_fp32(kr[d]);
      s.push_back(dot * scale);
      mx = std::max(mx, s.back());
    }
    double sum = 0;
    for (double& x : s) sum += x = std::exp(x - mx);
    for (int64_t d = 0; d < c.hd_v; ++d) {
      double o = 0;
      for (int64_t p = c.first; p <= c.last; ++p)
        o += quant::round_fp16(static_cast<float>(s[p - c.first] / sum)) *
             static_cast<double>(quant::fp16_to_fp32(v[(p % c.capacity) * v_stride + g * c.hd_v + d]));
      EXPECT_NEAR(a[i * c.hd_v + d], o, 2e-3 * (1 + std::fabs(o))) << "head " << i << " dim " << d;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Attention,
                         ::testing::Values(Case{8, 8, 2, 4, 64, 0, 0}, Case{8, 8, 2, 4, 64, 0, 40},
                                           Case{64, 64, 4, 2, 256, 0, 200}, Case{64, 64, 1, 1, 32, 90, 121},
                                           Case{96, 96, 1, 4, 100, 0, 99}, Case{100, 100, 3, 2, 50, 10, 59},
                                           Case{128, 128, 7, 2, 4096, 0, 4095}, Case{64, 32, 5, 3, 40, 3, 42}));

}  // namespace
}  // namespace synapse::kernels

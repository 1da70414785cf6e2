// Every ops table's attention kernels (ops_tables.hpp) equal the scalar
// reference bit for bit, and the reference equals a plain double-precision
// attention to float accuracy. The blocked kernel (attend_block) of every
// table equals attend_group_scalar row by row bit for bit, for any block
// sizes, windows and ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/attention.hpp"
#include "kernels/attention_split.hpp"
#include "kernels/ops.hpp"
#include "kernels/ops_tables.hpp"
#include "quant/simd.hpp"

namespace synapse::kernels {
namespace {

struct Case {
  int64_t hd, hd_v, n_gqa, n_groups, capacity, first, last;
};

// The rows of a circular cache of `capacity` positions (k, v: position p in
// slot p % capacity, k_stride / v_stride values a row) for positions
// [0, n_pos), laid out as model::KvCache's pages hold them: pages of
// 2^shift positions (8 here, so ranges cross many pages), each K rows then V
// rows, stored in reverse order in memory (the kernels must follow the
// table, not assume pages follow one another).
struct Paged {
  std::vector<quant::ggml_fp16_t> mem;
  std::vector<const quant::ggml_fp16_t*> table;
  int64_t k_stride = 0, v_stride = 0;
  int shift = 3;
  KvLayerView view(const float* sinks = nullptr) const {
    return {table.data(), 0, (int64_t{1} << shift) * k_stride, k_stride, v_stride, shift, sinks};
  }
};

Paged paged(const std::vector<quant::ggml_fp16_t>& k, const std::vector<quant::ggml_fp16_t>& v, int64_t k_stride,
            int64_t v_stride, int64_t capacity, int64_t n_pos) {
  Paged pg;
  pg.k_stride = k_stride;
  pg.v_stride = v_stride;
  const int64_t page = int64_t{1} << pg.shift, n_pages = (n_pos + page - 1) / page;
  const int64_t page_elems = page * (k_stride + v_stride);
  pg.mem.assign(static_cast<size_t>(n_pages * page_elems), 0);
  for (int64_t i = 0; i < n_pages; ++i) pg.table.push_back(pg.mem.data() + (n_pages - 1 - i) * page_elems);
  for (int64_t p = 0; p < n_pos; ++p) {
    quant::ggml_fp16_t* base = const_cast<quant::ggml_fp16_t*>(pg.table[static_cast<size_t>(p / page)]);
    std::copy_n(&k[(p % capacity) * k_stride], k_stride, base + (p % page) * k_stride);
    std::copy_n(&v[(p % capacity) * v_stride], v_stride, base + page * k_stride + (p % page) * v_stride);
  }
  return pg;
}

using Attention = OpsTablesWith<Case>;

TEST_P(Attention, EqualsScalarAndDoubleReference) {
  const Case c = shape();
  std::mt19937 rng(static_cast<uint32_t>(c.hd * 131 + c.n_gqa * 7 + c.last));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t k_stride = c.hd * c.n_groups, v_stride = c.hd_v * c.n_groups;
  std::vector<quant::ggml_fp16_t> k(static_cast<size_t>(c.capacity * k_stride)), v(static_cast<size_t>(c.capacity * v_stride));
  for (auto& x : k) x = quant::fp32_to_fp16(nd(rng) * 2.0f);
  for (auto& x : v) x = quant::fp32_to_fp16(nd(rng));
  std::vector<float> q(static_cast<size_t>(c.n_gqa * c.hd));
  for (auto& x : q) x = nd(rng);
  // Attention sinks (gpt-oss), one per head of every group, or none.
  std::vector<float> sink_logits(static_cast<size_t>(c.n_gqa * c.n_groups));
  for (auto& x : sink_logits) x = nd(rng) * 3.0f;
  const Paged pg = paged(k, v, k_stride, v_stride, c.capacity, c.last + 1);
  for (const bool with_sinks : {false, true}) {
  const KvLayerView view = pg.view(with_sinks ? sink_logits.data() : nullptr);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  const int64_t g = c.n_groups - 1;
  std::vector<float> a(static_cast<size_t>(c.n_gqa * c.hd_v)), b(a.size());
  AttentionScratch sa, sb;
  attend_group_scalar(view, g, c.first, c.last, q.data(), c.n_gqa, c.hd, c.hd_v, scale, a.data(), sa);
  std::vector<float> canary(b.size() + 8, -7.0f);
  table().attend_group(view, g, c.first, c.last, q.data(), c.n_gqa, c.hd, c.hd_v, scale, canary.data(), sb);
  EXPECT_EQ(0, std::memcmp(a.data(), canary.data(), a.size() * sizeof(float)));
  for (size_t i = a.size(); i < canary.size(); ++i) EXPECT_EQ(canary[i], -7.0f) << "wrote past its output";
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
    // A sink is one more softmax column whose probability weights nothing.
    const double sink = with_sinks ? sink_logits[g * c.n_gqa + i] : -INFINITY;
    mx = std::max(mx, sink);
    double sum = with_sinks ? std::exp(sink - mx) : 0.0;
    for (double& x : s) sum += x = std::exp(x - mx);
    for (int64_t d = 0; d < c.hd_v; ++d) {
      double o = 0;
      for (int64_t p = c.first; p <= c.last; ++p)
        o += quant::round_fp16(static_cast<float>(s[p - c.first] / sum)) *
             static_cast<double>(quant::fp16_to_fp32(v[(p % c.capacity) * v_stride + g * c.hd_v + d]));
      EXPECT_NEAR(a[i * c.hd_v + d], o, 2e-3 * (1 + std::fabs(o)))
          << "head " << i << " dim " << d << (with_sinks ? " (sinks)" : "");
    }
  }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, Attention,
                         ::testing::Combine(::testing::ValuesIn(compiled_ops_isas()),
                                            ::testing::Values(Case{8, 8, 2, 4, 64, 0, 0}, Case{8, 8, 2, 4, 64, 0, 40},
                                                              Case{64, 64, 4, 2, 256, 0, 200}, Case{64, 64, 1, 1, 32, 90, 121},
                                                              Case{96, 96, 1, 4, 100, 0, 99}, Case{100, 100, 3, 2, 50, 10, 59},
                                                              Case{128, 128, 7, 2, 4096, 0, 4095},
                                                              Case{64, 32, 5, 3, 40, 3, 42})),
                         table_and_index<Case>);

// A block of bq query rows at consecutive positions p0 .. p0+bq-1 of one
// sequence, each attending [max(0, pos - n_swa + 1), pos] (n_swa = 0: [0, pos]),
// in a cache of `capacity` slots (circular when positions pass it).
struct BlockCase {
  int64_t bq, bk, n_gqa, hd, hd_v, n_groups, capacity, p0, n_swa;
};

using AttentionBlock = OpsTablesWith<BlockCase>;

struct BlockData {
  std::vector<quant::ggml_fp16_t> k, v;
  std::vector<float> q;
  int64_t k_stride, v_stride;
};

BlockData make_block_data(int64_t n_rows, int64_t n_gqa, int64_t hd, int64_t hd_v, int64_t n_groups, int64_t capacity,
                          uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  BlockData b;
  b.k_stride = hd * n_groups;
  b.v_stride = hd_v * n_groups;
  b.k.resize(static_cast<size_t>(capacity * b.k_stride));
  b.v.resize(static_cast<size_t>(capacity * b.v_stride));
  for (auto& x : b.k) x = quant::fp32_to_fp16(nd(rng) * 2.0f);
  for (auto& x : b.v) x = quant::fp32_to_fp16(nd(rng));
  b.q.resize(static_cast<size_t>(n_rows * n_groups * n_gqa * hd));  // [row][group][head][hd], like forward's q
  for (auto& x : b.q) x = nd(rng);
  return b;
}

// Table t's attend_block with block length bk on `ranges` equals
// attend_group_scalar on each row's range, for every KV group; so do t's
// attend_group (the per-position kernel) and the dispatching attend_block.
void expect_block_equals_group(const OpsTable& t, const BlockData& b,
                               const std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t n_gqa, int64_t hd,
                               int64_t hd_v, int64_t n_groups, int64_t capacity, int64_t bk,
                               const float* sinks = nullptr) {
  const int64_t n_rows = static_cast<int64_t>(ranges.size());
  int64_t n_pos = 0;
  for (const auto& r : ranges) n_pos = std::max(n_pos, r.second + 1);
  const Paged pg = paged(b.k, b.v, b.k_stride, b.v_stride, capacity, n_pos);
  const KvLayerView view = pg.view(sinks);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t q_row = n_groups * n_gqa * hd, o_row = n_groups * n_gqa * hd_v;
  std::vector<float> want(static_cast<size_t>(n_rows * o_row)), got_t(want.size(), NAN), got_d(want.size(), NAN);
  AttentionScratch sg, st, sd;
  for (int64_t g = 0; g < n_groups; ++g) {
    std::vector<QueryRow> rt(static_cast<size_t>(n_rows)), rd(rt.size());
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* q = &b.q[r * q_row + g * n_gqa * hd];
      const int64_t o = r * o_row + g * n_gqa * hd_v;
      attend_group_scalar(view, g, ranges[r].first, ranges[r].second, q, n_gqa, hd, hd_v, scale, &want[o], sg);
      rt[r] = {q, &got_t[o], ranges[r].first, ranges[r].second};
      rd[r] = {q, &got_d[o], ranges[r].first, ranges[r].second};
    }
    t.attend_block(view, g, rt.data(), n_rows, n_gqa, hd, hd_v, scale, bk, st);
    attend_block(view, g, rd.data(), n_rows, n_gqa, hd, hd_v, scale, sd);
  }
  const size_t bytes = want.size() * sizeof(float);
  EXPECT_EQ(0, std::memcmp(want.data(), got_t.data(), bytes)) << quant::isa_name(t.isa) << ", bk " << bk;
  EXPECT_EQ(0, std::memcmp(want.data(), got_d.data(), bytes)) << "dispatch";
  // The table's attend_group gives the same bits too.
  std::vector<float> gv(want.size());
  for (int64_t g = 0; g < n_groups; ++g)
    for (int64_t r = 0; r < n_rows; ++r)
      t.attend_group(view, g, ranges[r].first, ranges[r].second, &b.q[r * q_row + g * n_gqa * hd], n_gqa, hd, hd_v,
                     scale, &gv[r * o_row + g * n_gqa * hd_v], sg);
  EXPECT_EQ(0, std::memcmp(want.data(), gv.data(), bytes)) << quant::isa_name(t.isa) << " attend_group";
  // So does each row split into its chunks (decode at depth), the chunks
  // taken in any order.
  std::fill(gv.begin(), gv.end(), NAN);
  for (int64_t g = 0; g < n_groups; ++g)
    for (int64_t r = 0; r < n_rows; ++r)
      attend_split(view, g,
                   {&b.q[r * q_row + g * n_gqa * hd], &gv[r * o_row + g * n_gqa * hd_v], ranges[r].first,
                    ranges[r].second},
                   n_gqa, hd, hd_v, scale);
  EXPECT_EQ(0, std::memcmp(want.data(), gv.data(), bytes)) << "split into chunks";
}

TEST_P(AttentionBlock, EqualsAttendGroupBitForBit) {
  const BlockCase c = shape();
  ASSERT_TRUE(c.n_swa == 0 ? c.p0 + c.bq <= c.capacity : c.n_swa + c.bq - 1 <= c.capacity);
  const BlockData b = make_block_data(c.bq, c.n_gqa, c.hd, c.hd_v, c.n_groups, c.capacity,
                                      static_cast<uint32_t>(c.bq * 1009 + c.hd * 31 + c.p0));
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t r = 0; r < c.bq; ++r) {
    const int64_t pos = c.p0 + r;
    ranges.emplace_back(c.n_swa > 0 ? std::max<int64_t>(0, pos - c.n_swa + 1) : 0, pos);
  }
  expect_block_equals_group(table(), b, ranges, c.n_gqa, c.hd, c.hd_v, c.n_groups, c.capacity, c.bk);
}

INSTANTIATE_TEST_SUITE_P(
    Tables, AttentionBlock,
    ::testing::Combine(::testing::ValuesIn(compiled_ops_isas()), ::testing::Values(
        // bq, bk, n_gqa, hd, hd_v, n_groups, capacity, p0, n_swa
        BlockCase{1, 8, 1, 8, 8, 1, 16, 0, 0},            // one row, one position
        BlockCase{16, 64, 4, 64, 64, 2, 512, 0, 0},       // a prompt's first block (Llama 3.2 1B heads)
        BlockCase{16, 64, 4, 64, 64, 2, 512, 300, 0},     // a later block
        BlockCase{13, 24, 4, 64, 64, 2, 300, 211, 0},     // lengths not multiples of the block sizes
        BlockCase{7, 8, 2, 128, 128, 2, 200, 50, 0},      // hd 128, smallest K block
        BlockCase{32, 256, 8, 128, 128, 1, 400, 333, 0},  // one block covers the whole range
        BlockCase{9, 40, 3, 100, 100, 2, 100, 60, 0},     // hd % 8 != 0 (tails in q.k and V)
        BlockCase{9, 40, 4, 100, 100, 2, 100, 60, 0},     // four heads at a time with the q.k tail
        BlockCase{10, 32, 7, 64, 64, 1, 128, 40, 0},      // qwen2.5-0.5b's 7 heads per group: 4 + 3
        BlockCase{5, 16, 5, 64, 32, 3, 64, 17, 0},        // hd_v != hd
        BlockCase{11, 16, 2, 96, 96, 1, 64, 0, 0},        // hd_v = 96 (64 + 32 register tiles)
        BlockCase{12, 8, 1, 24, 24, 2, 64, 3, 0},         // hd_v = 24 (16 + 8 tiles)
        BlockCase{20, 32, 4, 64, 64, 2, 64, 10, 24},      // sliding window, partly before 0
        BlockCase{20, 32, 4, 64, 64, 2, 64, 150, 24},     // sliding window in a circular cache
        BlockCase{33, 16, 2, 64, 64, 1, 48, 1000, 16})),  // window shorter than the block
    table_and_index<BlockCase>);

// Masked leading positions (QueryRow::n_masked, a sliding window aligned to
// 16 as ggml's lanes are): every table gives the scalar kernel's bits, the
// masked positions' K and V do not matter (other values, same bits), and the
// result is attention over the unmasked range, summed in other groups (so
// equal to attend_group on it to rounding, not to the bit).
TEST_P(OpsTables, AttentionMaskedPositionsAreIgnored) {
  const int64_t n_rows = 20, n_gqa = 4, hd = 64, hd_v = 64, n_groups = 2, capacity = 160, n_swa = 37;
  BlockData b = make_block_data(n_rows, n_gqa, hd, hd_v, n_groups, capacity, 123);
  const float scale = 1.0f / 8.0f;
  const int64_t q_row = n_groups * n_gqa * hd, o_row = n_groups * n_gqa * hd_v;
  const auto run = [&](const OpsTable& t, std::vector<float>& out) {
    const Paged pg = paged(b.k, b.v, b.k_stride, b.v_stride, capacity, 105 + n_rows);
    const KvLayerView view = pg.view();
    AttentionScratch sc;
    out.assign(static_cast<size_t>(n_rows * o_row), NAN);
    for (int64_t g = 0; g < n_groups; ++g) {
      std::vector<QueryRow> rows(static_cast<size_t>(n_rows));
      for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t pos = 105 + r, w = pos - n_swa + 1;
        rows[r] = {&b.q[r * q_row + g * n_gqa * hd], &out[r * o_row + g * n_gqa * hd_v], w - w % 16, pos, w % 16};
      }
      t.attend_block(view, g, rows.data(), n_rows, n_gqa, hd, hd_v, scale, 32, sc);
    }
  };
  std::vector<float> want, got, other;
  run(ops_table(quant::Isa::scalar), want);
  run(table(), got);
  ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << quant::isa_name(table().isa);
  AttentionScratch sg;
  std::vector<float> ref(static_cast<size_t>(hd_v * n_gqa));
  const Paged pg = paged(b.k, b.v, b.k_stride, b.v_stride, capacity, 105 + n_rows);
  const KvLayerView view = pg.view();
  for (int64_t g = 0; g < n_groups; ++g)
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t pos = 105 + r;
      attend_group_scalar(view, g, pos - n_swa + 1, pos, &b.q[r * q_row + g * n_gqa * hd], n_gqa, hd, hd_v, scale,
                          ref.data(), sg);
      for (int64_t d = 0; d < n_gqa * hd_v; ++d)
        ASSERT_NEAR(ref[d], got[r * o_row + g * n_gqa * hd_v + d], 1e-5f * (1.0f + std::fabs(ref[d]))) << r << " " << d;
    }
  // The windows start at 69 .. 88: positions 64 .. 68 are masked for the
  // rows whose range starts at 64 and outside the others' ranges, so new K
  // and V there leave the bits as they were.
  for (int64_t p = 64; p < 69; ++p) {
    for (int64_t d = 0; d < b.k_stride; ++d) b.k[p * b.k_stride + d] = quant::fp32_to_fp16(100.0f);
    for (int64_t d = 0; d < b.v_stride; ++d) b.v[p * b.v_stride + d] = quant::fp32_to_fp16(-50.0f);
  }
  run(table(), other);
  EXPECT_EQ(0, std::memcmp(got.data(), other.data(), got.size() * sizeof(float)));
}

// Arbitrary ranges in one call (rows need not be consecutive positions):
// rows that skip some K blocks, with 3 heads per group (one head at a
// time), 4 and 7 (the four-head kernels, then the rest), hd_v 72 and 64
// (the four-head V kernel needs a multiple of 16).
TEST_P(OpsTables, AttentionArbitraryRangesEqualAttendGroup) {
  const int64_t n_rows = 24, hd = 40, n_groups = 2, capacity = 200;
  for (int64_t n_gqa : {3, 4, 7}) {
    for (int64_t hd_v : {72, 64}) {
      const BlockData b = make_block_data(n_rows, n_gqa, hd, hd_v, n_groups, capacity, 77);
      std::mt19937 rng(5);
      std::vector<std::pair<int64_t, int64_t>> ranges;
      for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t x = static_cast<int64_t>(rng() % capacity), y = static_cast<int64_t>(rng() % capacity);
        ranges.emplace_back(std::min(x, y), std::max(x, y));
      }
      ranges[3] = {5, 5};
      ranges[n_rows - 1] = {0, 5};  // the last row ends before most K blocks
      for (int64_t bk : {8, 16, 56, 256})
        expect_block_equals_group(table(), b, ranges, n_gqa, hd, hd_v, n_groups, capacity, bk);
    }
  }
}

// Every table's probabilities (AVX2: vector max, ggml_v_expf 8 lanes at a
// time, each group's float horizontal sum added to a double) equal
// kernels::softmax_pad8 + F16 rounding bit for bit, for uneven row lengths,
// ties, signed zeros, values whose exp underflows, and any number of rows;
// the padding after each row (ld - n) stays untouched.
TEST_P(OpsTables, AttentionSoftmaxEqualsScalar) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (int64_t n_rows : {1, 3, 4, 5, 8, 9, 13}) {
    for (int64_t base : {1, 7, 31, 32, 33, 100, 517}) {
      const int64_t ld = base + 3;
      std::vector<int64_t> n(static_cast<size_t>(n_rows));
      for (int64_t r = 0; r < n_rows; ++r) n[r] = std::max<int64_t>(1, base - static_cast<int64_t>(rng() % 4));
      std::vector<float> x(static_cast<size_t>(n_rows * ld));
      for (auto& v : x) v = nd(rng);
      x[0] = -0.0f;
      if (x.size() > 5) x[5] = 0.0f, x[4] = -150.0f, x[3] = x[2];
      std::vector<float> a = x, b = x;
      softmax_f16_rows_scalar(a.data(), ld, n.data(), n_rows, nullptr, 1);
      table().softmax_f16_rows(b.data(), ld, n.data(), n_rows, nullptr, 1);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << n_rows << " rows of ~" << base;
      // With attention sinks (3 of them, cycling over the rows): some above
      // every score (the sink sets the max), some far below.
      const float sinks[3] = {nd(rng) + 12.0f, nd(rng), -90.0f};
      a = x, b = x;
      softmax_f16_rows_scalar(a.data(), ld, n.data(), n_rows, sinks, 3);
      table().softmax_f16_rows(b.data(), ld, n.data(), n_rows, sinks, 3);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << n_rows << " rows, sinks";
    }
  }
  // All-equal and all-zero rows (the max is a tie everywhere).
  std::vector<float> z(64, 0.0f), w(64, -0.0f);
  for (int i = 0; i < 64; i += 3) w[i] = 0.0f;
  const int64_t n64[2] = {64, 64};
  std::vector<float> za = z, zb = z, wa = w, wb = w;
  softmax_f16_rows_scalar(za.data(), 32, n64, 1, nullptr, 1);
  table().softmax_f16_rows(zb.data(), 32, n64, 1, nullptr, 1);
  softmax_f16_rows_scalar(wa.data(), 64, n64, 1, nullptr, 1);
  table().softmax_f16_rows(wb.data(), 64, n64, 1, nullptr, 1);
  EXPECT_EQ(0, std::memcmp(za.data(), zb.data(), za.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(wa.data(), wb.data(), wa.size() * sizeof(float)));
}

// Every n_kv from 1 to 40 (all tails of the 16-lane groups and of the
// 4-key and 16-key q.k tiles), query blocks of 1 .. 6 rows ending at the
// same position, windows that start after 0 (first > 0), hd 64 and 128 and
// 48 (16-lane but not 64: the V tiles of 32 + 16) and 40 (off the 16-lane
// grid), n_gqa 1, 4 (the 4-head tiles) and 6 (4 + 2), small block lengths.
// Under sanitizers (a hundred times slower here) every 5th length
// (1, 6, .. 36): every tail of the 4-key tiles, half of the 16-lane tails,
// both block lengths; the Release pass runs every length.
constexpr int64_t kKvLengthStep = SYNAPSE_TEST_SANITIZED ? 5 : 1;

TEST_P(OpsTables, AttentionEveryShortRangeEqualsAttendGroup) {
  const int64_t n_groups = 2, capacity = 64;
  for (int64_t hd : {64, 128, 48, 40}) {
    for (int64_t n_gqa : {1, 4, 6}) {
      const int64_t n_rows = 6;
      const BlockData b = make_block_data(n_rows, n_gqa, hd, hd, n_groups, capacity,
                                          static_cast<uint32_t>(hd * 3 + n_gqa));
      for (int64_t n_kv = 1; n_kv <= 40; n_kv += kKvLengthStep) {
        for (int64_t rows = 1; rows <= n_rows; ++rows) {
          // Row r attends [first, last]: the last row n_kv positions ending
          // at 45, the earlier rows end one position sooner each (causal).
          std::vector<std::pair<int64_t, int64_t>> ranges;
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t last = 45 - (rows - 1 - r), first = std::max<int64_t>(0, 45 - n_kv + 1);
            ranges.emplace_back(std::min(first, last), last);
          }
          expect_block_equals_group(table(), b, ranges, n_gqa, hd, hd, n_groups, capacity, n_kv % 2 ? 8 : 24);
          // The same with attention sinks (gpt-oss), one per head.
          std::vector<float> sinks(static_cast<size_t>(n_groups * n_gqa));
          for (size_t h = 0; h < sinks.size(); ++h) sinks[h] = static_cast<float>(h % 3) * 2.5f - 2.0f;
          expect_block_equals_group(table(), b, ranges, n_gqa, hd, hd, n_groups, capacity, n_kv % 2 ? 8 : 24,
                                    sinks.data());
          if (HasFailure()) return;
        }
      }
    }
  }
}

// Rows longer than a chunk (kAttendChunk): ranges that cross one and
// several chunk ends, end exactly at one, start after 0 (chunks count from
// the row's first), and leave one position in the last chunk, in blocks
// with rows of other lengths; several K/V block lengths, with and without
// sinks, heads off the 16-lane grid. Every table's attend_block, the
// dispatch and the split rows equal attend_group_scalar bit for bit.
TEST_P(OpsTables, AttentionChunkedRowsEqualAttendGroup) {
  constexpr int64_t C = kAttendChunk;
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 2 * C + 300}, {0, C - 1}, {0, C}, {5, 2 * C + 4}, {17, 3 * C - 1}, {C + 3, 3 * C + 40}, {200, 260}};
  const int64_t n_groups = 2, capacity = 3 * C + 64;
  for (const auto& [hd, n_gqa] : {std::pair<int64_t, int64_t>{64, 4}, {40, 3}}) {
    const BlockData b = make_block_data(static_cast<int64_t>(ranges.size()), n_gqa, hd, hd, n_groups, capacity,
                                        static_cast<uint32_t>(hd + n_gqa));
    std::vector<float> sinks(static_cast<size_t>(n_groups * n_gqa));
    for (size_t h = 0; h < sinks.size(); ++h) sinks[h] = static_cast<float>(h % 3) * 2.5f - 1.0f;
    for (const int64_t bk : {8, 56, 256}) {
      expect_block_equals_group(table(), b, ranges, n_gqa, hd, hd, n_groups, capacity, bk);
      expect_block_equals_group(table(), b, ranges, n_gqa, hd, hd, n_groups, capacity, bk, sinks.data());
      if (HasFailure()) return;
    }
  }
}

// Sliding-window rows longer than a chunk, their windows' starts masked
// (QueryRow::n_masked), chunks counted from the aligned start: every table's
// attend_block equals the scalar one bit for bit, and so does each row split
// into chunks; the result is the attention over the unmasked range (to
// rounding).
TEST_P(OpsTables, AttentionChunkedWindowRowsEqualScalar) {
  const int64_t n_rows = 9, n_gqa = 4, hd = 64, hd_v = 64, n_groups = 2, n_swa = 2 * kAttendChunk + 37, p0 = 2500;
  const int64_t capacity = p0 + n_rows;
  const BlockData b = make_block_data(n_rows, n_gqa, hd, hd_v, n_groups, capacity, 321);
  std::vector<float> sinks(static_cast<size_t>(n_groups * n_gqa));
  for (size_t h = 0; h < sinks.size(); ++h) sinks[h] = 1.5f - static_cast<float>(h);
  const float scale = 1.0f / 8.0f;
  const int64_t q_row = n_groups * n_gqa * hd, o_row = n_groups * n_gqa * hd_v;
  const Paged pg = paged(b.k, b.v, b.k_stride, b.v_stride, capacity, capacity);
  for (const float* sk : {static_cast<const float*>(nullptr), static_cast<const float*>(sinks.data())}) {
    const KvLayerView view = pg.view(sk);
    const auto rows_of = [&](std::vector<float>& out) {
      out.assign(static_cast<size_t>(n_rows * o_row), NAN);
      std::vector<QueryRow> rows(static_cast<size_t>(n_groups * n_rows));
      for (int64_t g = 0; g < n_groups; ++g)
        for (int64_t r = 0; r < n_rows; ++r) {
          const int64_t pos = p0 + r, w = pos - n_swa + 1;
          rows[g * n_rows + r] = {&b.q[r * q_row + g * n_gqa * hd], &out[r * o_row + g * n_gqa * hd_v], w - w % 16,
                                  pos, w % 16};
        }
      return rows;
    };
    std::vector<float> want, got, split;
    AttentionScratch sc;
    for (const auto& [t, out] : {std::pair<const OpsTable*, std::vector<float>*>{&ops_table(quant::Isa::scalar), &want},
                                 {&table(), &got}}) {
      const std::vector<QueryRow> rows = rows_of(*out);
      for (int64_t g = 0; g < n_groups; ++g)
        t->attend_block(view, g, &rows[g * n_rows], n_rows, n_gqa, hd, hd_v, scale, 40, sc);
    }
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << quant::isa_name(table().isa);
    const std::vector<QueryRow> rows = rows_of(split);
    for (int64_t g = 0; g < n_groups; ++g)
      for (int64_t r = 0; r < n_rows; ++r) {
        ASSERT_EQ(3, attend_chunk_count(rows[g * n_rows + r]));
        attend_split(view, g, rows[g * n_rows + r], n_gqa, hd, hd_v, scale);
      }
    EXPECT_EQ(0, std::memcmp(want.data(), split.data(), want.size() * sizeof(float))) << "split into chunks";
    // Against the per-position reference on the unmasked window (other
    // chunk and lane boundaries: equal to rounding).
    if (sk) continue;
    std::vector<float> ref(static_cast<size_t>(n_gqa * hd_v));
    AttentionScratch sg;
    for (int64_t g = 0; g < n_groups; ++g)
      for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t pos = p0 + r;
        attend_group_scalar(view, g, pos - n_swa + 1, pos, &b.q[r * q_row + g * n_gqa * hd], n_gqa, hd, hd_v, scale,
                            ref.data(), sg);
        for (int64_t d = 0; d < n_gqa * hd_v; ++d)
          ASSERT_NEAR(ref[d], got[r * o_row + g * n_gqa * hd_v + d], 1e-5f * (1.0f + std::fabs(ref[d]))) << r << " " << d;
      }
  }
}

// The softmax's denominator is the per-chunk double sums added in chunk
// order: every table's probabilities of a row of 2 chunks + 5 positions
// equal exp_sum_pad16 over each chunk, the sums added in order (then the
// sink), and the F16 rounding of e_j * (float)(1 / sum), bit for bit.
TEST_P(OpsTables, AttentionSoftmaxSumsByChunks) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const int64_t n = 2 * kAttendChunk + 5;
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(rng);
  const float sink = 2.0f;
  for (const float* sk : {static_cast<const float*>(nullptr), &sink}) {
    std::vector<float> got = x, want = x;
    table().softmax_f16_rows(got.data(), n, &n, 1, sk, 1);
    float mx = *std::max_element(x.begin(), x.end());
    if (sk) mx = std::max(mx, *sk);
    double sum = 0.0;
    for (int64_t c0 = 0; c0 < n; c0 += kAttendChunk)
      sum += exp_sum_pad16(want.data() + c0, std::min(kAttendChunk, n - c0), mx);
    if (sk) sum += static_cast<double>(std::exp(*sk - mx));
    const float inv = static_cast<float>(1.0 / sum);
    for (float& v : want) v = quant::round_fp16(v * inv);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << (sk ? "sink" : "no sink");
  }
}

TEST(AttentionBlock, BlockLengthFitsL1) {
  EXPECT_EQ(64, attend_block_bk(64, 64));
  EXPECT_EQ(32, attend_block_bk(128, 128));
  EXPECT_EQ(0, attend_block_bk(100, 100) % 8);
  EXPECT_LE(attend_block_bk(100, 100) * 100 * 4, 16384);
  EXPECT_GE(attend_block_bk(1024, 1024), 8);
}

}  // namespace
}  // namespace synapse::kernels

// attend_block_typed (attention.hpp): attention over K/V rows of the
// quantized and BF16 cache types. Each row's output is bit-identical
// whatever rows share its block and whatever the V block length (G1), and
// equals a double-precision attention over the same stored rows and the
// same converted query (flash attention's mathematics) to float accuracy;
// masked positions and sinks act as in attend_block. Every ops table's
// typed pieces (OpsTable::attend_scores_typed, attend_values_typed) equal
// the scalar table's bit for bit, for head sizes on and off the SIMD
// kernels' grids.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/attention_split.hpp"
#include "kernels/ops_tables.hpp"
#include "quant/kernel_table.hpp"
#include "quant/quant.hpp"

namespace synapse::kernels {
namespace {

constexpr int kShift = 3;  // pages of 8 positions, so ranges cross pages
constexpr int64_t kPage = int64_t{1} << kShift;

// n_pos positions of n_groups groups, K rows of k_type (hd values a group)
// then V rows of v_type, in pages laid out as model::KvPool's (a page's K
// rows, then its V rows), pages in reverse order in memory.
struct TypedCache {
  std::vector<quant::ggml_fp16_t> mem;
  std::vector<const quant::ggml_fp16_t*> table;
  int64_t k_words = 0, v_words = 0;
  std::vector<float> k_f, v_f;  // the stored rows dequantized, [n_pos][row]
  GgmlType k_type, v_type;
  KvLayerView view(const float* sinks) const {
    return {table.data(), 0, kPage * k_words, k_words, v_words, kShift, sinks, k_type, v_type};
  }
};

TypedCache make_cache(GgmlType kt, GgmlType vt, int64_t hd, int64_t hd_v, int64_t n_groups, int64_t n_pos,
                      std::mt19937& rng) {
  TypedCache c;
  c.k_type = kt;
  c.v_type = vt;
  const int64_t nk = hd * n_groups, nv = hd_v * n_groups;
  c.k_words = static_cast<int64_t>(row_size(kt, nk) / 2);
  c.v_words = static_cast<int64_t>(row_size(vt, nv) / 2);
  const int64_t n_pages = (n_pos + kPage - 1) / kPage, page_words = kPage * (c.k_words + c.v_words);
  c.mem.assign(static_cast<size_t>(n_pages * page_words), 0);
  for (int64_t i = 0; i < n_pages; ++i) c.table.push_back(c.mem.data() + (n_pages - 1 - i) * page_words);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(nk)), v(static_cast<size_t>(nv));
  c.k_f.resize(static_cast<size_t>(n_pos * nk));
  c.v_f.resize(static_cast<size_t>(n_pos * nv));
  for (int64_t p = 0; p < n_pos; ++p) {
    for (auto& x : k) x = nd(rng) * 2.0f;
    for (auto& x : v) x = nd(rng);
    auto* base = const_cast<quant::ggml_fp16_t*>(c.table[static_cast<size_t>(p / kPage)]);
    quant::ggml_fp16_t* kr = base + (p % kPage) * c.k_words;
    quant::ggml_fp16_t* vr = base + kPage * c.k_words + (p % kPage) * c.v_words;
    quant::quantize_row(kt, k.data(), kr, nk);
    quant::quantize_row(vt, v.data(), vr, nv);
    quant::dequantize_row(kt, kr, &c.k_f[p * nk], nk);
    quant::dequantize_row(vt, vr, &c.v_f[p * nv], nv);
  }
  return c;
}

struct TypeCase {
  GgmlType k, v;
};

class AttentionTyped : public ::testing::TestWithParam<TypeCase> {};

struct R {
  int64_t first, last, n_masked;
};

// The rows `ranges` of a cache of n_pos positions of types tc, in one
// block: the same bits with other V block lengths, alone in a block, through
// attend_block's dispatch and split into chunks (attend_chunk_scores ..);
// equal to a double-precision reference to float accuracy.
void expect_rows_invariant_and_near_reference(const TypeCase tc, int64_t n_pos, const std::vector<R>& ranges) {
  const int64_t hd = 64, hd_v = 64, n_gqa = 3, n_groups = 2, g = 1;
  std::mt19937 rng(static_cast<uint32_t>(static_cast<int>(tc.k) * 37 + static_cast<int>(tc.v)));
  const TypedCache c = make_cache(tc.k, tc.v, hd, hd_v, n_groups, n_pos, rng);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> sinks(static_cast<size_t>(n_gqa * n_groups));
  for (auto& x : sinks) x = nd(rng) * 2.0f;
  const int64_t n_rows = static_cast<int64_t>(ranges.size());
  std::vector<float> q(static_cast<size_t>(n_rows * n_gqa * hd));
  for (auto& x : q) x = nd(rng);
  const float scale = 0.125f;
  for (const bool with_sinks : {false, true}) {
    SCOPED_TRACE(with_sinks ? "sinks" : "no sinks");
    const KvLayerView view = c.view(with_sinks ? sinks.data() : nullptr);
    std::vector<float> block_out(static_cast<size_t>(n_rows * n_gqa * hd_v)), small_bk(block_out.size());
    std::vector<QueryRow> rows;
    for (int64_t r = 0; r < n_rows; ++r)
      rows.push_back({&q[r * n_gqa * hd], &block_out[r * n_gqa * hd_v], ranges[r].first, ranges[r].last,
                      ranges[r].n_masked});
    AttentionScratch s;
    attend_block_typed(view, g, rows.data(), n_rows, n_gqa, hd, hd_v, scale, 256, s);
    for (int64_t r = 0; r < n_rows; ++r) rows[r].out = &small_bk[r * n_gqa * hd_v];
    attend_block_typed(view, g, rows.data(), n_rows, n_gqa, hd, hd_v, scale, 8, s);
    EXPECT_EQ(0, std::memcmp(block_out.data(), small_bk.data(), block_out.size() * sizeof(float))) << "bk 8 vs 256";
    // attend_block dispatches to it for a typed view.
    for (int64_t r = 0; r < n_rows; ++r) rows[r].out = &small_bk[r * n_gqa * hd_v];
    attend_block(view, g, rows.data(), n_rows, n_gqa, hd, hd_v, scale, s);
    EXPECT_EQ(0, std::memcmp(block_out.data(), small_bk.data(), block_out.size() * sizeof(float))) << "attend_block";

    const quant::TypeKernels& kk = quant::active_kernels().row(tc.k);
    for (int64_t r = 0; r < n_rows; ++r) {
      SCOPED_TRACE(::testing::Message() << "row " << r);
      // Alone in its block: the same bits.
      std::vector<float> alone(static_cast<size_t>(n_gqa * hd_v));
      QueryRow one = rows[r];
      one.out = alone.data();
      attend_block_typed(view, g, &one, 1, n_gqa, hd, hd_v, scale, 16, s);
      EXPECT_EQ(0, std::memcmp(alone.data(), &block_out[r * n_gqa * hd_v], alone.size() * sizeof(float)));
      // Split into its chunks (decode at depth): the same bits.
      std::fill(alone.begin(), alone.end(), NAN);
      attend_split(view, g, one, n_gqa, hd, hd_v, scale);
      EXPECT_EQ(0, std::memcmp(alone.data(), &block_out[r * n_gqa * hd_v], alone.size() * sizeof(float))) << "split";
      // Double reference over the stored rows and the converted query.
      for (int64_t i = 0; i < n_gqa; ++i) {
        std::vector<uint8_t> qc(row_size(kk.vec_dot_type, hd));
        std::vector<float> qf(static_cast<size_t>(hd));
        quant::quantize_row(kk.vec_dot_type, &q[(r * n_gqa + i) * hd], qc.data(), hd);
        quant::dequantize_row(kk.vec_dot_type, qc.data(), qf.data(), hd);
        std::vector<double> p;
        double mx = with_sinks ? sinks[g * n_gqa + i] : -INFINITY;
        for (int64_t j = ranges[r].first; j <= ranges[r].last; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += static_cast<double>(qf[d]) * c.k_f[j * hd * n_groups + g * hd + d];
          p.push_back(j < ranges[r].first + ranges[r].n_masked ? -INFINITY : dot * scale);
          mx = std::max(mx, p.back());
        }
        double sum = with_sinks ? std::exp(sinks[g * n_gqa + i] - mx) : 0.0;
        for (double& x : p) sum += x = std::exp(x - mx);
        for (int64_t d = 0; d < hd_v; ++d) {
          double o = 0;
          for (int64_t j = ranges[r].first; j <= ranges[r].last; ++j)
            o += p[j - ranges[r].first] / sum * c.v_f[j * hd_v * n_groups + g * hd_v + d];
          EXPECT_NEAR(block_out[(r * n_gqa + i) * hd_v + d], o, 1e-4 * (1 + std::fabs(o))) << "head " << i << " dim " << d;
        }
      }
    }
  }
}

TEST_P(AttentionTyped, RowsAreBlockInvariantAndEqualADoubleReference) {
  // Rows with their own ranges: a causal prefix, a window with masked
  // positions, a single position, a range across pages.
  expect_rows_invariant_and_near_reference(GetParam(), 70, {{0, 40, 0}, {16, 69, 5}, {33, 33, 0}, {7, 60, 0}, {0, 0, 0}});
}

// Rows longer than a chunk (kAttendChunk): across one and two chunk ends,
// ending exactly at one, a masked window start, beside a short row.
TEST_P(AttentionTyped, ChunkedRowsAreBlockInvariantAndEqualADoubleReference) {
  constexpr int64_t C = kAttendChunk;
  expect_rows_invariant_and_near_reference(
      GetParam(), 2 * C + 100, {{0, 2 * C + 99, 0}, {0, C, 0}, {32, 2 * C + 31, 9}, {C - 5, 2 * C + 50, 0}, {40, 90, 3}});
}

INSTANTIATE_TEST_SUITE_P(Types, AttentionTyped,
                         ::testing::Values(TypeCase{GgmlType::Q8_0, GgmlType::Q8_0},
                                           TypeCase{GgmlType::Q4_0, GgmlType::Q4_0},
                                           TypeCase{GgmlType::Q5_0, GgmlType::Q5_0},
                                           TypeCase{GgmlType::IQ4_NL, GgmlType::IQ4_NL},
                                           TypeCase{GgmlType::BF16, GgmlType::BF16},
                                           TypeCase{GgmlType::F16, GgmlType::Q8_0},
                                           TypeCase{GgmlType::Q4_0, GgmlType::F16}),
                         [](const ::testing::TestParamInfo<TypeCase>& i) {
                           return std::string(type_name(i.param.k)) + "_" + std::string(type_name(i.param.v));
                         });

// A table against the scalar one: K / V types, head sizes, heads per group.
struct TableCase {
  GgmlType k, v;
  int64_t hd, hd_v, n_gqa;
};

using AttentionTypedTables = OpsTablesWith<TableCase>;

// Rows crossing chunk ends, masked window starts off the 16-key tiles,
// single positions, short rows inside one tile and a row ending on a chunk
// end, in one block (through the table's attend_block), with and without
// sinks and for two V block lengths: memcmp against the scalar table; each
// row alone in its block and split into chunks (the active table, as the
// forward pass runs decode at depth) gives the same bits.
TEST_P(AttentionTypedTables, EqualScalarBitForBit) {
  const TableCase tc = shape();
  constexpr int64_t C = kAttendChunk;
  const int64_t n_groups = 3, g = 2, n_pos = 2 * C + 100, hd = tc.hd, hd_v = tc.hd_v, n_gqa = tc.n_gqa;
  std::mt19937 rng(static_cast<uint32_t>(static_cast<int>(tc.k) * 131 + static_cast<int>(tc.v) * 7 + hd + n_gqa));
  const TypedCache c = make_cache(tc.k, tc.v, hd, hd_v, n_groups, n_pos, rng);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> sinks(static_cast<size_t>(n_gqa * n_groups));
  for (auto& x : sinks) x = nd(rng) * 2.0f;
  const std::vector<R> ranges = {{0, n_pos - 1, 0},   {0, C - 1, 0},     {37, 2 * C + 31, 9}, {C - 5, 2 * C + 50, 0},
                                 {40, 90, 3},         {33, 33, 0},       {5, 20, 0},          {C - 16, C + 15, 0},
                                 {17, 2 * C + 2, 13}, {n_pos - 3, n_pos - 1, 0}};
  const int64_t n_rows = static_cast<int64_t>(ranges.size());
  std::vector<float> q(static_cast<size_t>(n_rows * n_gqa * hd));
  for (auto& x : q) x = nd(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t n_out = static_cast<size_t>(n_rows * n_gqa * hd_v);
  auto run = [&](const OpsTable& t, const KvLayerView& view, int64_t bk) {
    std::vector<float> out(n_out, NAN);
    std::vector<QueryRow> rows;
    for (int64_t r = 0; r < n_rows; ++r)
      rows.push_back({&q[r * n_gqa * hd], &out[r * n_gqa * hd_v], ranges[r].first, ranges[r].last, ranges[r].n_masked});
    AttentionScratch s;
    t.attend_block(view, g, rows.data(), n_rows, n_gqa, hd, hd_v, scale, bk, s);
    return out;
  };
  for (const bool with_sinks : {false, true}) {
    SCOPED_TRACE(with_sinks ? "sinks" : "no sinks");
    const KvLayerView view = c.view(with_sinks ? sinks.data() : nullptr);
    const std::vector<float> want = run(ops_table(quant::Isa::scalar), view, 64);
    for (const float x : want) ASSERT_TRUE(std::isfinite(x));
    for (const int64_t bk : {8, 64, 256}) {
      const std::vector<float> got = run(table(), view, bk);
      EXPECT_EQ(0, std::memcmp(want.data(), got.data(), n_out * sizeof(float))) << "bk " << bk;
    }
    AttentionScratch s;
    for (int64_t r = 0; r < n_rows; ++r) {
      SCOPED_TRACE(::testing::Message() << "row " << r);
      std::vector<float> alone(static_cast<size_t>(n_gqa * hd_v), NAN);
      const QueryRow one{&q[r * n_gqa * hd], alone.data(), ranges[r].first, ranges[r].last, ranges[r].n_masked};
      table().attend_block(view, g, &one, 1, n_gqa, hd, hd_v, scale, 32, s);
      EXPECT_EQ(0, std::memcmp(alone.data(), &want[r * n_gqa * hd_v], alone.size() * sizeof(float)));
      std::fill(alone.begin(), alone.end(), NAN);
      attend_split(view, g, one, n_gqa, hd, hd_v, scale);
      EXPECT_EQ(0, std::memcmp(alone.data(), &want[r * n_gqa * hd_v], alone.size() * sizeof(float))) << "split";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tables, AttentionTypedTables,
    ::testing::Combine(
        ::testing::ValuesIn(compiled_ops_isas()),
        ::testing::Values(TableCase{GgmlType::Q8_0, GgmlType::Q8_0, 64, 64, 4},
                          TableCase{GgmlType::Q8_0, GgmlType::Q8_0, 128, 128, 1},
                          TableCase{GgmlType::Q8_0, GgmlType::Q8_0, 96, 96, 5},
                          TableCase{GgmlType::Q4_0, GgmlType::Q4_0, 64, 64, 3},
                          TableCase{GgmlType::Q4_0, GgmlType::Q4_0, 128, 128, 8},
                          TableCase{GgmlType::Q5_0, GgmlType::Q5_0, 64, 64, 2},
                          TableCase{GgmlType::Q5_0, GgmlType::Q5_0, 128, 128, 4},
                          TableCase{GgmlType::IQ4_NL, GgmlType::IQ4_NL, 64, 64, 3},
                          TableCase{GgmlType::IQ4_NL, GgmlType::IQ4_NL, 256, 256, 2},
                          TableCase{GgmlType::BF16, GgmlType::BF16, 64, 64, 4},
                          TableCase{GgmlType::BF16, GgmlType::BF16, 40, 40, 2},
                          TableCase{GgmlType::F16, GgmlType::Q8_0, 64, 64, 4},
                          TableCase{GgmlType::Q4_0, GgmlType::F16, 64, 64, 4},
                          TableCase{GgmlType::Q8_0, GgmlType::F16, 64, 48, 3},
                          TableCase{GgmlType::Q8_0, GgmlType::BF16, 32, 40, 2},
                          TableCase{GgmlType::Q5_0, GgmlType::Q8_0, 64, 128, 6},
                          TableCase{GgmlType::IQ4_NL, GgmlType::Q4_0, 128, 64, 4})),
    table_and_index<TableCase>);

}  // namespace
}  // namespace synapse::kernels

// kernels::matmul and kernels::matmul_many against the definition: every
// output element is quant::vec_dot of its weight row and its activation row
// (converted to vec_dot_type), bit for bit (memcmp), for decode (1-3 rows)
// and prefill (more rows) shapes, 1 to 3 threads, and products of several
// weight types sharing one input.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "kernels/matmul.hpp"
#include "quant/formats.hpp"
#include "quant/interleave.hpp"
#include "quant/quant.hpp"
#include "quant/random_rows.hpp"
#include "synapse/error.hpp"
#include "base/thread_pool.hpp"

namespace synapse::kernels {
namespace {

struct Weight {
  std::vector<uint8_t> bytes;
  WeightView view;
};

Weight make_weight(GgmlType t, int64_t n_in, int64_t n_out, std::mt19937& rng) {
  Weight w;
  const size_t rb = row_size(t, n_in);
  w.bytes.resize(rb * static_cast<size_t>(n_out));
  for (int64_t r = 0; r < n_out; ++r) {
    const std::vector<float> x = quant::test_rows::random_floats(n_in, rng, 0);
    quant::quantize_row(t, x.data(), w.bytes.data() + static_cast<size_t>(r) * rb, n_in);
  }
  w.view = WeightView{"w." + std::string(type_name(t)), t, n_in, n_out, rb, w.bytes.data()};
  return w;
}

// What interleave_weight makes of a plain matrix, whatever the active ISA:
// its whole groups of 8 interleaved, the rest plain after them, in buf.
WeightView interleave_copy(const WeightView& plain, std::vector<uint8_t>& buf) {
  const int64_t grouped = plain.n_out / quant::kInterleave * quant::kInterleave;
  const size_t gb = quant::interleaved_group_bytes(plain.type, plain.n_in);
  const size_t grouped_bytes = static_cast<size_t>(grouped / quant::kInterleave) * gb;
  buf.assign(grouped_bytes + static_cast<size_t>(plain.n_out - grouped) * plain.row_bytes, 0);
  EXPECT_TRUE(quant::interleave_rows(plain.type, plain.n_in, plain.data, plain.row_bytes, grouped, buf.data()));
  std::memcpy(buf.data() + grouped_bytes, plain.row(grouped), buf.size() - grouped_bytes);
  WeightView v = plain;
  v.data = buf.data();
  v.interleaved = true;
  v.group_bytes = gb;
  return v;
}

// y[m][r] = vec_dot(W[r], quantize(x[m])), one element at a time.
std::vector<float> reference(const WeightView& w, const std::vector<float>& x, int64_t n_rows) {
  const GgmlType vt = quant::vec_dot_type(w.type);
  std::vector<uint8_t> a(row_size(vt, w.n_in));
  std::vector<float> y(static_cast<size_t>(n_rows * w.n_out));
  for (int64_t m = 0; m < n_rows; ++m) {
    quant::quantize_row(vt, x.data() + m * w.n_in, a.data(), w.n_in);
    for (int64_t r = 0; r < w.n_out; ++r) y[m * w.n_out + r] = quant::vec_dot(w.type, w.n_in, w.row(r), a.data());
  }
  return y;
}

TEST(Matmul, ManyProductsEqualVecDotPerElement) {
  std::mt19937 rng(7);
  const int64_t n_in = 512;
  // Several types on one input, as Q/K/V or gate/up of a quantized file
  // mix them (Q4_K_M: Q4_K, Q6_K, Q5_0, Q8_0); odd row counts exercise the
  // kernels' remainders and the split between products.
  std::vector<Weight> ws;
  ws.push_back(make_weight(GgmlType::Q4_K, n_in, 77, rng));
  ws.push_back(make_weight(GgmlType::Q6_K, n_in, 33, rng));
  ws.push_back(make_weight(GgmlType::Q5_0, n_in, 64, rng));
  ws.push_back(make_weight(GgmlType::Q8_0, n_in, 5, rng));
  ws.push_back(make_weight(GgmlType::Q4_0, n_in, 130, rng));
  ws.push_back(make_weight(GgmlType::F16, n_in, 9, rng));
  // Interleaved matrices (the reference reads the plain ones): Q4_0 of 17
  // groups and 2 plain rows, Q5_0 of 2 groups and 5 plain rows, Q4_K of 3
  // groups and 3 plain rows, Q8_0 of 3 groups and 5 plain rows, Q6_K of 3
  // groups and 3 plain rows (the last two beside plain Q8_0 and Q6_K
  // matrices on the same input, whose activation packs differ from theirs).
  // 318 rows of other products come first (318 % 8 = 6), so the split of
  // matmul_many's rows cuts their groups.
  std::vector<Weight> plain;  // the plain matrix of each interleaved one
  for (const auto& [t, rows] : {std::pair{GgmlType::Q4_0, int64_t{138}}, std::pair{GgmlType::Q5_0, int64_t{21}},
                                std::pair{GgmlType::Q4_K, int64_t{27}}, std::pair{GgmlType::Q8_0, int64_t{29}},
                                std::pair{GgmlType::Q6_K, int64_t{27}}}) {
    plain.push_back(make_weight(t, n_in, rows, rng));
    ws.emplace_back();
  }
  for (size_t k = 0; k < plain.size(); ++k) {
    Weight& w = ws[ws.size() - plain.size() + k];
    w.view = interleave_copy(plain[k].view, w.bytes);
  }
  const auto plain_of = [&](const WeightView& v) -> const WeightView& {
    for (const Weight& p : plain)
      if (v.interleaved && p.view.type == v.type) return p.view;
    return v;
  };
  // Conversion buffers kept across every product below (as a Context keeps
  // them): each is reused by products of other types and row counts, larger
  // and smaller, and holds their stale bytes; the results must not change.
  ActivationBuffers kept;
  for (int64_t n_rows : {1, 2, 3, 4, 7, 19, 67, 3}) {
    const std::vector<float> x = quant::test_rows::random_floats(n_rows * n_in, rng, 0);
    std::vector<std::vector<float>> want;
    for (const Weight& w : ws) want.push_back(reference(plain_of(w.view), x, n_rows));
    for (int threads = 1; threads <= 3; ++threads) {
      base::ThreadPool pool(threads);
      // One product at a time.
      for (size_t j = 0; j < ws.size(); ++j) {
        for (ActivationBuffers* buffers : {static_cast<ActivationBuffers*>(nullptr), &kept}) {
          Activations act(x.data(), n_rows, n_in, buffers);
          std::vector<float> y(want[j].size(), -1.f);
          matmul(ws[j].view, act, y.data(), pool);
          ASSERT_EQ(std::memcmp(y.data(), want[j].data(), y.size() * sizeof(float)), 0)
              << ws[j].view.name << " rows " << n_rows << " threads " << threads << " kept buffers "
              << (buffers != nullptr);
        }
      }
      // All of them in one job.
      std::vector<std::vector<float>> ys;
      std::vector<MatmulOut> outs;
      for (size_t j = 0; j < ws.size(); ++j) ys.emplace_back(want[j].size(), -1.f);
      for (size_t j = 0; j < ws.size(); ++j) outs.push_back({&ws[j].view, ys[j].data()});
      Activations act(x.data(), n_rows, n_in, &kept);
      matmul_many(outs, act, pool);
      for (size_t j = 0; j < ws.size(); ++j)
        ASSERT_EQ(std::memcmp(ys[j].data(), want[j].data(), ys[j].size() * sizeof(float)), 0)
            << "matmul_many: " << ws[j].view.name << " rows " << n_rows << " threads " << threads;
    }
  }
}

// interleave_weight: which matrices it takes, and that rows and views of
// the interleaved copy are those of the plain matrix.
TEST(Matmul, InterleavedWeightKeepsItsRows) {
  std::mt19937 rng(11);
  const int64_t n_in = 96;
  Weight q41 = make_weight(GgmlType::Q4_1, n_in, 16, rng), few = make_weight(GgmlType::Q4_0, n_in, 5, rng);
  Weight q4 = make_weight(GgmlType::Q4_0, n_in, 12, rng);  // one group and 4 plain rows
  WeightStore store;
  const quant::Isa isa = quant::active_isa();
  EXPECT_FALSE(interleave_weight(q41.view, store, isa));   // not an interleaved format
  EXPECT_FALSE(interleave_weight(few.view, store, isa));   // no whole group
  EXPECT_FALSE(interleave_weight(q4.view, store, quant::Isa::scalar));  // nothing to gain there
  EXPECT_TRUE(store.empty());
  Weight q8 = make_weight(GgmlType::Q8_0, n_in, 16, rng), q5 = make_weight(GgmlType::Q5_0, n_in, 16, rng);
  Weight q8_min = make_weight(GgmlType::Q8_0, n_in, 16, rng);
  reinterpret_cast<quant::block_q8_0*>(q8_min.bytes.data())[5].qs[3] = -128;  // the sign trick cannot negate it
  EXPECT_FALSE(interleave_weight(q8_min.view, store, isa));
  EXPECT_FALSE(q8_min.view.interleaved);
  EXPECT_TRUE(store.empty());
  EXPECT_EQ(interleave_weight(q8.view, store, isa), quant::interleave_pays(GgmlType::Q8_0, isa));
  EXPECT_EQ(interleave_weight(q5.view, store, isa), quant::interleave_pays(GgmlType::Q5_0, isa));
  EXPECT_EQ(q5.view.interleaved, quant::interleave_pays(GgmlType::Q5_0, isa));
  WeightView x8 = q4.view;
  EXPECT_EQ(interleave_weight(x8, store, isa), quant::interleave_pays(GgmlType::Q4_0, isa));
  std::vector<uint8_t> own;
  if (!x8.interleaved) x8 = interleave_copy(q4.view, own);  // this ISA keeps plain rows; test the layout all the same
  EXPECT_NE(x8.data, q4.view.data);
  std::vector<float> want(n_in), got(n_in);
  for (int64_t r = 0; r < 12; ++r) {
    get_row(q4.view, r, want.data());
    get_row(x8, r, got.data());
    ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << "row " << r;
  }
  const WeightView tail = x8.rows(8, 4, "tail");  // ends at the matrix's end: allowed
  get_row(tail, 2, got.data());
  get_row(q4.view, 10, want.data());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0);
  EXPECT_NO_THROW(x8.rows(0, 8, "group"));
  EXPECT_THROW(x8.rows(4, 8, "cut"), Error);
  EXPECT_THROW(x8.rows(0, 11, "cut"), Error);
}

// The same for Q4_K, whose groups are larger than 8 plain rows
// (interleaved_group_bytes): interleave_weight itself, its plain last rows,
// views, and the product against the plain matrix.
// Copies smaller than a chunk are placed back to back (64-byte aligned), not
// each on whole 2 MiB pages; a larger one has a chunk of its own; the block
// given back is taken again.
TEST(WeightStore, CopiesSharePagesAndStayAligned) {
  WeightStore store;
  EXPECT_TRUE(store.empty());
  const size_t expert = 4423680 + 8;  // a gpt-oss expert copy's size, off 64
  uint8_t* a = store.take(expert);
  uint8_t* b = store.take(expert);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(b, a + (expert + 56));  // the next 64-byte boundary
  std::memset(a, 1, expert);
  std::memset(b, 2, expert);
  uint8_t* c = store.take(100);
  store.give_back_last(c);
  EXPECT_EQ(store.bytes(), 2 * expert);
  EXPECT_EQ(store.take(100), c);
  uint8_t* big = store.take(WeightStore::kChunkBytes + 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % (size_t{2} << 20), 0u);  // a chunk of its own
  std::memset(big, 3, WeightStore::kChunkBytes + 1);
  EXPECT_EQ(store.bytes(), 2 * expert + 100 + WeightStore::kChunkBytes + 1);
  EXPECT_EQ(a[expert - 1], 1);
  EXPECT_EQ(b[0], 2);
}

TEST(Matmul, InterleavedQ4_KKeepsItsRowsAndProducts) {
  std::mt19937 rng(12);
  const int64_t n_in = 512;
  Weight q4k = make_weight(GgmlType::Q4_K, n_in, 12, rng);  // one group and 4 plain rows
  WeightStore store;
  WeightView x8 = q4k.view;
  std::vector<uint8_t> own;
  if (!interleave_weight(x8, store, quant::active_isa())) x8 = interleave_copy(q4k.view, own);
  ASSERT_TRUE(x8.interleaved);
  EXPECT_EQ(x8.group_bytes, quant::interleaved_group_bytes(GgmlType::Q4_K, n_in));
  std::vector<float> want(n_in), got(n_in);
  for (int64_t r = 0; r < 12; ++r) {
    get_row(q4k.view, r, want.data());
    get_row(x8, r, got.data());
    ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << "row " << r;
  }
  const WeightView tail = x8.rows(8, 4, "tail");
  get_row(tail, 1, got.data());
  get_row(q4k.view, 9, want.data());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0);
  for (int64_t n_rows : {1, 5}) {
    const std::vector<float> x = quant::test_rows::random_floats(n_rows * n_in, rng, 0);
    const std::vector<float> ref = reference(q4k.view, x, n_rows);
    base::ThreadPool pool(2);
    Activations act(x.data(), n_rows, n_in);
    std::vector<float> y(ref.size(), -1.f);
    matmul(x8, act, y.data(), pool);
    EXPECT_EQ(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)), 0) << "rows " << n_rows;
  }
}

// A mixture-of-experts layer's products: a gathered view of the layer's
// input (rows repeated and reordered, as rows are routed to experts) and
// products over ranges of its rows (one expert each), in one matmul_many;
// each output element is still the vec_dot of its weight row and its own
// activation row, whichever rows the range holds (decode and prefill
// kernels alike), with the source's conversions made once and copied.
TEST(Matmul, GatheredRangesEqualVecDotPerElement) {
  std::mt19937 rng(21);
  const int64_t n_in = 512, n_src = 7;
  std::vector<Weight> ws;
  ws.push_back(make_weight(GgmlType::Q4_K, n_in, 40, rng));
  ws.push_back(make_weight(GgmlType::Q6_K, n_in, 24, rng));  // a gate/up pair of two types
  ws.push_back(make_weight(GgmlType::MXFP4, n_in, 32, rng));
  ws.push_back(make_weight(GgmlType::F16, n_in, 9, rng));
  Weight q8_plain = make_weight(GgmlType::Q8_0, n_in, 29, rng);  // 3 groups and 5 plain rows, interleaved
  ws.emplace_back();
  ws.back().view = interleave_copy(q8_plain.view, ws.back().bytes);
  Weight mx_plain = make_weight(GgmlType::MXFP4, n_in, 29, rng);  // likewise: gpt-oss's experts
  ws.emplace_back();
  ws.back().view = interleave_copy(mx_plain.view, ws.back().bytes);
  const std::vector<int64_t> rows = {3, 0, 3, 6, 1, 1, 5, 2, 4, 0, 6, 2, 2, 5, 3, 1, 0, 4, 6};
  // Ranges of 1, 3, 5 and 10 rows: the decode kernels and the multi-row ones.
  const std::pair<int64_t, int64_t> ranges[] = {{0, 1}, {1, 3}, {4, 5}, {9, 10}};
  const std::vector<float> x = quant::test_rows::random_floats(n_src * n_in, rng, 0);
  std::vector<float> gathered;
  for (int64_t r : rows) gathered.insert(gathered.end(), x.begin() + r * n_in, x.begin() + (r + 1) * n_in);
  ActivationBuffers kept;
  for (int threads = 1; threads <= 3; ++threads) {
    base::ThreadPool pool(threads);
    Activations src(x.data(), n_src, n_in, &kept);
    Activations view(src, rows, &kept);
    std::vector<std::vector<float>> ys, want;
    std::vector<MatmulOut> outs;
    for (size_t j = 0; j < ws.size(); ++j) {
      for (const auto& [row0, count] : ranges) {
        const WeightView& plain = !ws[j].view.interleaved               ? ws[j].view
                                  : ws[j].view.type == GgmlType::Q8_0 ? q8_plain.view
                                                                      : mx_plain.view;
        want.push_back(reference(plain, std::vector<float>(gathered.begin() + row0 * n_in,
                                                           gathered.begin() + (row0 + count) * n_in),
                                 count));
        ys.emplace_back(want.back().size(), -1.f);
      }
    }
    size_t k = 0;
    for (size_t j = 0; j < ws.size(); ++j)
      for (const auto& [row0, count] : ranges) outs.push_back({&ws[j].view, ys[k++].data(), row0, count});
    matmul_many(outs, view, pool);
    for (k = 0; k < outs.size(); ++k)
      ASSERT_EQ(std::memcmp(ys[k].data(), want[k].data(), ys[k].size() * sizeof(float)), 0)
          << outs[k].w->name << " rows [" << outs[k].row0 << ", +" << outs[k].n_rows << ") threads " << threads;
  }
}

TEST(Matmul, ManyRejectsARangeOutsideItsInput) {
  std::mt19937 rng(4);
  Weight a = make_weight(GgmlType::Q8_0, 256, 8, rng);
  const std::vector<float> x = quant::test_rows::random_floats(3 * 256, rng, 0);
  std::vector<float> y(16, -1.f);
  base::ThreadPool pool(2);
  Activations act(x.data(), 3, 256);
  const MatmulOut past_end[] = {{&a.view, y.data(), 2, 2}};
  EXPECT_THROW(matmul_many(past_end, act, pool), Error);
  const MatmulOut negative[] = {{&a.view, y.data(), -1, 1}};
  EXPECT_THROW(matmul_many(negative, act, pool), Error);
  for (float v : y) EXPECT_EQ(v, -1.f);  // nothing computed
}

TEST(Matmul, ManyRejectsAMismatchedInputBeforeComputing) {
  std::mt19937 rng(3);
  Weight a = make_weight(GgmlType::Q8_0, 256, 8, rng), b = make_weight(GgmlType::Q8_0, 512, 8, rng);
  const std::vector<float> x = quant::test_rows::random_floats(256, rng, 0);
  std::vector<float> ya(8, -1.f), yb(8, -1.f);
  const MatmulOut outs[] = {{&a.view, ya.data()}, {&b.view, yb.data()}};
  base::ThreadPool pool(2);
  Activations act(x.data(), 1, 256);
  try {
    matmul_many(outs, act, pool);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w.Q8_0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("512"), std::string::npos) << e.what();
  }
  for (float v : ya) EXPECT_EQ(v, -1.f);  // nothing computed
}

}  // namespace
}  // namespace synapse::kernels

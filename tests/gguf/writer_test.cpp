// Writer round trips: every value type, nested arrays and tensors of several
// types go bytes -> File -> identical values and data; the byte layout is
// checked against a file built field by field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <unistd.h>

#include "gguf_test_util.hpp"

namespace {

using namespace synapse;
using namespace synapse::gguf;
using gguf_test::expect_error;
using gguf_test::Raw;

Value scalar(ValueType t) {
  Value v;
  v.type = t;
  return v;
}
Value u(ValueType t, uint64_t x) { Value v = scalar(t); v.u = x; return v; }
Value s(ValueType t, int64_t x) { Value v = scalar(t); v.i = x; return v; }
Value fl(ValueType t, double x) { Value v = scalar(t); v.f = x; return v; }
Value str(std::string x) { Value v = scalar(ValueType::STRING); v.str = std::move(x); return v; }
Value boolean(bool x) { Value v = scalar(ValueType::BOOL); v.b = x; return v; }
Value arr(ValueType et, std::vector<Value> items) {
  Value v = scalar(ValueType::ARRAY);
  v.elem_type = et;
  v.items = std::move(items);
  return v;
}

// Field-by-field equality of the parts of a Value its type uses.
void expect_same(const Value& a, const Value& b, const std::string& where) {
  ASSERT_EQ(a.type, b.type) << where;
  switch (a.type) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
      EXPECT_EQ(a.u, b.u) << where; break;
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
      EXPECT_EQ(a.i, b.i) << where; break;
    case ValueType::FLOAT32: case ValueType::FLOAT64:
      EXPECT_EQ(std::memcmp(&a.f, &b.f, sizeof a.f), 0) << where << ": " << a.f << " vs " << b.f; break;
    case ValueType::BOOL: EXPECT_EQ(a.b, b.b) << where; break;
    case ValueType::STRING: EXPECT_EQ(a.str, b.str) << where; break;
    case ValueType::ARRAY:
      EXPECT_EQ(a.elem_type, b.elem_type) << where;
      ASSERT_EQ(a.items.size(), b.items.size()) << where;
      for (size_t k = 0; k < a.items.size(); ++k) expect_same(a.items[k], b.items[k], where + "[" + std::to_string(k) + "]");
      break;
  }
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

TEST(GgufWriter, EveryValueTypeRoundTrips) {
  std::vector<KeyValue> want = {
      {"t.u8", u(ValueType::UINT8, 255)},
      {"t.i8", s(ValueType::INT8, -128)},
      {"t.u16", u(ValueType::UINT16, 65535)},
      {"t.i16", s(ValueType::INT16, -32768)},
      {"t.u32", u(ValueType::UINT32, 4294967295u)},
      {"t.i32", s(ValueType::INT32, std::numeric_limits<int32_t>::min())},
      {"t.f32", fl(ValueType::FLOAT32, -1.5e-7f)},
      {"t.bool", boolean(true)},
      {"t.bool0", boolean(false)},
      {"t.str", str("h\xC3\xA9llo")},
      {"t.str_nul", str(std::string("a\0b", 3))},
      {"t.str_empty", str("")},
      {"t.u64", u(ValueType::UINT64, std::numeric_limits<uint64_t>::max())},
      {"t.i64", s(ValueType::INT64, std::numeric_limits<int64_t>::min())},
      {"t.f64", fl(ValueType::FLOAT64, 3.141592653589793)},
      {"a.u8", arr(ValueType::UINT8, {u(ValueType::UINT8, 0), u(ValueType::UINT8, 200)})},
      {"a.i16", arr(ValueType::INT16, {s(ValueType::INT16, -5), s(ValueType::INT16, 7)})},
      {"a.f32", arr(ValueType::FLOAT32, {fl(ValueType::FLOAT32, 0.25), fl(ValueType::FLOAT32, -INFINITY)})},
      {"a.f64", arr(ValueType::FLOAT64, {fl(ValueType::FLOAT64, 1e300)})},
      {"a.bool", arr(ValueType::BOOL, {boolean(true), boolean(false), boolean(true)})},
      {"a.str", arr(ValueType::STRING, {str("x"), str(""), str("\xE2\x96\x81the")})},
      {"a.empty", arr(ValueType::INT32, {})},
      {"a.u64", arr(ValueType::UINT64, {u(ValueType::UINT64, 1ull << 40)})},
      {"a.nested", arr(ValueType::ARRAY, {arr(ValueType::INT32, {s(ValueType::INT32, 1), s(ValueType::INT32, -2)}),
                                          arr(ValueType::STRING, {str("deep")}),
                                          arr(ValueType::ARRAY, {arr(ValueType::UINT8, {u(ValueType::UINT8, 9)})})})},
  };
  Writer w;
  for (const KeyValue& kv : want) w.set_value(kv.key, kv.value);
  w.set_u32("s.u32", 7);
  w.set_i32("s.i32", -7);
  w.set_u64("s.u64", 1ull << 50);
  w.set_f32("s.f32", 0.1f);
  w.set_bool("s.bool", true);
  w.set_string("s.str", "seven");
  want.push_back({"s.u32", u(ValueType::UINT32, 7)});
  want.push_back({"s.i32", s(ValueType::INT32, -7)});
  want.push_back({"s.u64", u(ValueType::UINT64, 1ull << 50)});
  want.push_back({"s.f32", fl(ValueType::FLOAT32, 0.1f)});
  want.push_back({"s.bool", boolean(true)});
  want.push_back({"s.str", str("seven")});

  File f = File::from_bytes(w.bytes(), "rt.gguf");
  EXPECT_EQ(f.version(), 3u);
  ASSERT_EQ(f.metadata().size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(f.metadata()[k].key, want[k].key);
    expect_same(f.metadata()[k].value, want[k].value, want[k].key);
  }
  EXPECT_EQ(f.get_u32("t.u8"), 255u);
  EXPECT_EQ(f.get_i64("t.i8"), -128);
  EXPECT_EQ(f.get_f32("t.f64"), 3.14159265f);
  EXPECT_EQ(f.get_f32("s.f32"), 0.1f);
  EXPECT_EQ(f.get_bool("s.bool"), true);
  EXPECT_EQ(f.get_string("t.str_nul"), std::string("a\0b", 3));
  EXPECT_EQ(f.get_string_array("a.str"), (std::vector<std::string>{"x", "", "\xE2\x96\x81the"}));
  EXPECT_EQ(f.get_f32_array("a.f32"), (std::vector<float>{0.25f, -INFINITY}));
  EXPECT_EQ(f.get_i32_array("a.empty"), std::vector<int32_t>{});
  EXPECT_EQ(f.get_int_array("a.i16"), (std::vector<int64_t>{-5, 7}));
  EXPECT_EQ(f.get_int_array("a.u64"), (std::vector<int64_t>{1ll << 40}));
  EXPECT_TRUE(f.tensors().empty());
}

TEST(GgufWriter, IntegerGettersConvertOnlyWhatFits) {
  Writer w;
  w.set_i32("neg", -1);
  w.set_u64("big", 1ull << 32);
  w.set_u64("huge", 1ull << 63);
  w.set_value("u8", u(ValueType::UINT8, 7));
  w.set_value("i64", s(ValueType::INT64, -(1ll << 40)));
  w.set_value("arr.u64", arr(ValueType::UINT64, {u(ValueType::UINT64, 1), u(ValueType::UINT64, 1ull << 63)}));
  w.set_value("arr.bool", arr(ValueType::BOOL, {boolean(true)}));
  File f = File::from_bytes(w.bytes(), "ints.gguf");
  EXPECT_EQ(f.get_u32("u8"), 7u);
  EXPECT_EQ(f.get_i64("neg"), -1);
  EXPECT_EQ(f.get_i64("big"), 1ll << 32);
  EXPECT_EQ(f.get_i64("i64"), -(1ll << 40));
  expect_error([&] { f.get_u32("neg"); }, Errc::format, {"ints.gguf", "'neg'", "-1", "UINT32"});
  expect_error([&] { f.get_u32("big"); }, Errc::format, {"'big'", "4294967296"});
  expect_error([&] { f.get_u32("i64"); }, Errc::format, {"'i64'"});
  expect_error([&] { f.get_i64("huge"); }, Errc::format, {"'huge'", "9223372036854775808", "INT64"});
  expect_error([&] { f.get_int_array("arr.u64"); }, Errc::format, {"'arr.u64'", "9223372036854775808"});
  expect_error([&] { f.get_int_array("arr.bool"); }, Errc::format, {"'arr.bool'", "ARRAY of BOOL"});
  expect_error([&] { f.get_bool("u8"); }, Errc::format, {"'u8'", "BOOL", "UINT8"});
}

TEST(GgufWriter, InsertionOrderAndReplacement) {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 10000.f);
  w.set_u32("llama.block_count", 5);           // replaces in place
  w.set_string("llama.block_count", "five");   // even with another type
  File f = File::from_bytes(w.bytes(), "order.gguf");
  ASSERT_EQ(f.metadata().size(), 3u);
  EXPECT_EQ(f.metadata()[0].key, "general.architecture");
  EXPECT_EQ(f.metadata()[1].key, "llama.block_count");
  EXPECT_EQ(f.metadata()[2].key, "llama.rope.freq_base");
  EXPECT_EQ(f.get_string("llama.block_count"), "five");
}

struct TensorSpec {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
  size_t n_bytes;  // computed by hand from ggml's block sizes
};

// F32, F16, Q4_0, Q4_K, Q8_0 in 4 dims, IQ2_XXS, I8.
const std::vector<TensorSpec> kTensors = {
    {"f32", GgmlType::F32, {3, 2}, 3 * 2 * 4},
    {"f16", GgmlType::F16, {8}, 16},
    {"q4_0", GgmlType::Q4_0, {64, 2}, 2 * 2 * 18},
    {"q4_k", GgmlType::Q4_K, {256, 1, 2}, 2 * 144},
    {"q8_0", GgmlType::Q8_0, {32, 1, 1, 3}, 3 * 34},
    {"iq2_xxs", GgmlType::IQ2_XXS, {512}, 2 * 66},
    {"i8", GgmlType::I8, {5}, 5},
};

void check_tensors(const File& f, uint64_t alignment) {
  ASSERT_EQ(f.tensors().size(), kTensors.size());
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  for (size_t k = 0; k < kTensors.size(); ++k) {
    const TensorSpec& s = kTensors[k];
    const TensorInfo& t = f.tensors()[k];
    SCOPED_TRACE(s.name);
    EXPECT_EQ(t.name, s.name);
    EXPECT_EQ(t.type, s.type);
    EXPECT_EQ(t.n_dims, s.ne.size());
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d], d < s.ne.size() ? s.ne[d] : 1);
    EXPECT_EQ(t.n_bytes, s.n_bytes);
    EXPECT_EQ(t.offset % alignment, 0u);
    const std::vector<uint8_t> want = random_bytes(s.n_bytes, static_cast<uint32_t>(k + 1));
    EXPECT_EQ(std::memcmp(t.data, want.data(), want.size()), 0);
    if (k > 0) {  // packed: each tensor starts at the first aligned offset after the previous
      const TensorInfo& p = f.tensors()[k - 1];
      EXPECT_EQ(t.offset, (p.offset + p.n_bytes + alignment - 1) / alignment * alignment);
    }
  }
}

Writer tensor_writer(uint64_t alignment) {
  Writer w(alignment);
  w.set_string("general.architecture", "test");
  for (size_t k = 0; k < kTensors.size(); ++k) {
    const TensorSpec& s = kTensors[k];
    w.add_tensor(s.name, s.type, s.ne, random_bytes(s.n_bytes, static_cast<uint32_t>(k + 1)));
  }
  return w;
}

TEST(GgufWriter, TensorsRoundTripAtSeveralAlignments) {
  for (uint64_t alignment : {32ull, 1ull, 64ull, 4096ull}) {
    SCOPED_TRACE(alignment);
    const std::vector<uint8_t> b = tensor_writer(alignment).bytes();
    EXPECT_EQ(b.size() % alignment, 0u);  // the last tensor is padded too
    File f = File::from_bytes(b, "tensors.gguf");
    check_tensors(f, alignment);
    if (alignment != 32) EXPECT_EQ(f.get_u32("general.alignment"), alignment);
    else EXPECT_EQ(f.find("general.alignment"), nullptr);
    // Padding is zeros: between the infos and the data, and after each tensor.
    const size_t infos_end = gguf_test::tensor_fields(b, kTensors.back().name).offset + 8;
    for (uint64_t k = infos_end; k < f.data_offset(); ++k) EXPECT_EQ(b[k], 0) << k;
    const TensorInfo& last = f.tensors().back();
    for (uint64_t k = f.data_offset() + last.offset + last.n_bytes; k < b.size(); ++k) EXPECT_EQ(b[k], 0) << k;
  }
}

TEST(GgufWriter, WriteThenOpenMapsTheFile) {
  const std::string path = testing::TempDir() + "synapse_gguf_writer_" + std::to_string(getpid()) + ".gguf";
  tensor_writer(32).write(path);
  {
    File f = File::open(path);
    EXPECT_EQ(f.path(), path);
    check_tensors(f, 32);
    EXPECT_EQ(f.get_string("general.architecture"), "test");
  }
  std::remove(path.c_str());
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");  // an empty file is malformed, not unreadable
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  expect_error([&] { File::open(path); }, Errc::format, {path, "truncated"});
  std::remove(path.c_str());
  expect_error([&] { tensor_writer(32).write("/nonexistent/dir/x.gguf"); }, Errc::io, {"/nonexistent/dir/x.gguf"});
}

TEST(GgufWriter, BytesMatchAHandBuiltFile) {
  Writer w;
  w.set_u32("a", 5);
  const float data[2] = {1.0f, -2.0f};
  const int64_t ne[1] = {2};
  w.add_tensor("t", GgmlType::F32, ne, {reinterpret_cast<const uint8_t*>(data), sizeof data});
  Raw r;
  r.header(3, 1, 1).str("a").u32(4).u32(5);               // key "a": UINT32 5
  r.str("t").u32(1).u64(2).u32(0).u64(0);                 // tensor "t": 1 dim {2}, F32, offset 0
  r.zeros_to(96).f32(1.0f).f32(-2.0f).zeros_to(128);      // infos end at 74 -> data at 96, padded to 32
  EXPECT_EQ(w.bytes(), r.b);
}

TEST(GgufWriter, Version2FilesLoad) {
  Raw r;
  r.header(2, 1, 1).str("general.architecture").u32(8).str("llama");
  r.str("w").u32(2).u64(4).u64(1).u32(0).u64(0);
  r.zeros_to(128).f32(1).f32(2).f32(3).f32(4);  // infos end at 110
  File f = File::from_bytes(r.b, "v2.gguf");
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.data_offset(), 128u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  ASSERT_EQ(f.tensors().size(), 1u);
  float x[4];
  std::memcpy(x, f.tensors()[0].data, 16);
  EXPECT_EQ(x[3], 4.0f);
}

TEST(GgufWriter, RefusesBadArguments) {
  expect_error([] { Writer w(3); }, Errc::invalid_argument, {"alignment 3"});
  expect_error([] { Writer w(0); }, Errc::invalid_argument, {"alignment 0"});
  expect_error([] { Writer w(kMaxAlignment * 2); }, Errc::invalid_argument, {"2097152"});
  Writer w;
  const std::vector<uint8_t> d(18);
  const int64_t ne32[1] = {32}, ne16[1] = {16}, ne0[2] = {32, 0};
  expect_error([&] { w.add_tensor("x", GgmlType::Q4_0, ne32, std::span<const uint8_t>(d).first(17)); },
               Errc::invalid_argument, {"'x'", "17", "18"});
  expect_error([&] { w.add_tensor("x", GgmlType::Q4_0, ne16, d); }, Errc::invalid_argument, {"'x'", "block size 32"});
  expect_error([&] { w.add_tensor("x", GgmlType::Q4_0, ne0, {}); }, Errc::invalid_argument, {"'x'", "dimension 1"});
  expect_error([&] { w.add_tensor("x", GgmlType{4}, ne32, d); }, Errc::invalid_argument, {"'x'", "unknown type"});
  w.add_tensor("x", GgmlType::Q4_0, ne32, d);
  expect_error([&] { w.add_tensor("x", GgmlType::Q4_0, ne32, d); }, Errc::invalid_argument, {"'x'", "duplicate"});
  expect_error([&] { w.set_value("k", arr(ValueType::INT32, {u(ValueType::UINT8, 1)})); }, Errc::invalid_argument,
               {"'k'", "INT32", "UINT8"});
  expect_error([&] { w.set_u32("", 1); }, Errc::invalid_argument, {"empty"});
}

}  // namespace

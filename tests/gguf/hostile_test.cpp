// Hostile GGUF files, made here from real files (byte surgery) and from the
// Writer or a field-by-field builder. Each must throw synapse::Error with the
// right category and a message naming the file and the key or tensor; the
// "claim" files (huge counts in a tiny file) must fail fast without a large
// allocation (operator new is instrumented below to prove it).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <random>

#include <unistd.h>

#include "gguf_test_util.hpp"

// Largest single allocation and total bytes allocated while g_track is set
// (this test binary only).
// The replacements pair malloc with free, which GCC cannot see through.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
static std::atomic<bool> g_track{false};
static std::atomic<size_t> g_max_alloc{0};
static std::atomic<size_t> g_total_alloc{0};
void* operator new(size_t n) {
  if (g_track.load(std::memory_order_relaxed)) {
    g_total_alloc.fetch_add(n, std::memory_order_relaxed);
    size_t m = g_max_alloc.load(std::memory_order_relaxed);
    while (n > m && !g_max_alloc.compare_exchange_weak(m, n)) {
    }
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace {

using namespace synapse;
using namespace synapse::gguf;
using namespace gguf_test;

constexpr uint32_t kString = 8, kArray = 9, kU32 = 4, kF32 = 6;

// Runs `f`, expecting a format error naming `subs`; returns the seconds it
// took (the fastest of 5 runs, so a descheduled run on a busy CI machine does
// not count), the largest single allocation and the total bytes allocated
// (the most of any run; the 64-byte-aligned copy of the image is not counted).
struct Claim {
  double seconds;
  size_t max_alloc;
  size_t total_alloc;
};
template <typename F>
Claim expect_fast_error(F&& f, std::initializer_list<std::string_view> subs) {
  Claim c{1e9, 0, 0};
  for (int run = 0; run < 5; ++run) {
    g_max_alloc = 0;
    g_total_alloc = 0;
    g_track = true;
    const auto t0 = std::chrono::steady_clock::now();
    expect_error(f, Errc::format, subs);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    g_track = false;
    c.seconds = std::min(c.seconds, s);
    c.max_alloc = std::max(c.max_alloc, g_max_alloc.load());
    c.total_alloc = std::max(c.total_alloc, g_total_alloc.load());
  }
  return c;
}
Claim expect_fast_failure(const std::vector<uint8_t>& b, std::initializer_list<std::string_view> subs) {
  return expect_fast_error([&] { parse(b); }, subs);
}

// Issue 9: each "claim" file is refused in under 10 ms with under 1 MB
// allocated in all.
void expect_cheap(const Claim& c) {
  EXPECT_LT(c.seconds, 0.010);
  EXPECT_LT(c.max_alloc, 4096u);
  EXPECT_LT(c.total_alloc, size_t{1} << 20);
}

std::vector<uint8_t> stories() { return read_bytes(data_path("models/stories260K.gguf")); }

// A small well-formed file: a few keys and two F32 tensors {4, 4} and {8}.
Writer small_writer() {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "hostile");
  w.set_u32("dup.aaa", 1);
  w.set_u32("dup.bbb", 2);
  std::vector<uint8_t> d(64, 0x3f);
  const int64_t ne_a[2] = {4, 4}, ne_b[1] = {8};
  w.add_tensor("t.aaa", GgmlType::F32, ne_a, d);
  w.add_tensor("t.bbb", GgmlType::F32, ne_b, std::span<const uint8_t>(d).first(32));
  return w;
}

TEST(GgufHostile, SmallWriterFileIsValid) {
  File f = parse(small_writer().bytes());
  EXPECT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.get_u32("dup.bbb"), 2u);
}

TEST(GgufHostile, TruncatedAtEveryHeaderAndMetadataOffset) {
  const std::vector<uint8_t> full = stories();
  const uint64_t data_offset = 14176;  // from an independent Python parse
  ASSERT_EQ(parse(full).data_offset(), data_offset);
  int n = 0;
  for (uint64_t len = 0; len < data_offset; ++len) {
    std::vector<uint8_t> b(full.begin(), full.begin() + static_cast<ptrdiff_t>(len));
    try {
      parse(b, "cut.gguf");
      ADD_FAILURE() << "prefix of " << len << " bytes parsed";
    } catch (const Error& e) {
      const std::string m = e.what();
      ASSERT_EQ(e.code(), Errc::format) << len << ": " << m;
      ASSERT_EQ(m.rfind("cut.gguf: ", 0), 0u) << m;
      ++n;
    }
  }
  EXPECT_EQ(n, 14176);
  // A cut inside the tokens array names the key; one inside the infos the tensor.
  expect_error([&] { parse({full.begin(), full.begin() + 5000}); }, Errc::format, {"'tokenizer.ggml.tokens'"});
  expect_error([&] { parse({full.begin(), full.begin() + 14000}); }, Errc::format, {"tensor"});
}

TEST(GgufHostile, TruncatedInTheDataSection) {
  const std::vector<uint8_t> full = stories();
  for (uint64_t len = 14176; len < full.size(); len += 4099) {
    std::vector<uint8_t> b(full.begin(), full.begin() + static_cast<ptrdiff_t>(len));
    expect_error([&] { parse(b); }, Errc::format, {"hostile.gguf", "extends past the end of the file (" + std::to_string(len) + " bytes)"});
  }
  std::vector<uint8_t> b(full.begin(), full.end() - 1);  // only the last tensor is cut
  expect_error([&] { parse(b); }, Errc::format, {"tensor 'blk.4.ffn_norm.weight'", "extends past the end"});
}

TEST(GgufHostile, TruncatedVocabFile) {
  const std::vector<uint8_t> full = read_bytes(data_path("tokenizer/vocab/ggml-vocab-llama-spm.gguf"));
  for (uint64_t len = 1; len < full.size(); len += full.size() / 97) {
    std::vector<uint8_t> b(full.begin(), full.begin() + static_cast<ptrdiff_t>(len));
    expect_error([&] { parse(b); }, Errc::format, {"hostile.gguf"});
  }
  expect_error([&] { parse({full.begin(), full.end() - 1}); }, Errc::format, {"'tokenizer.ggml.add_eos_token'"});
}

TEST(GgufHostile, RandomByteFlipsNeverCrash) {
  // Whatever the damage, the result is a File or a synapse::Error.
  const std::vector<uint8_t> full = read_bytes(data_path("models/stories260K-q4_0.gguf"));
  std::mt19937 rng(42);
  int ok = 0, bad = 0;
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<uint8_t> b = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % 14240] ^= static_cast<uint8_t>(1u << (rng() % 8));
    try {
      File f = parse(b);
      // Every tensor lies inside the image.
      const uint8_t* base = f.tensors().at(0).data - f.tensors()[0].offset - f.data_offset();
      for (const TensorInfo& t : f.tensors()) {
        ASSERT_GE(t.data, base + f.data_offset());
        ASSERT_LE(t.data + t.n_bytes, base + f.file_size());
      }
      ++ok;
    } catch (const Error&) {
      ++bad;
    }
  }
  EXPECT_EQ(ok + bad, 300);
  EXPECT_GT(bad, 0);
}

TEST(GgufHostile, HugeStringLengths) {
  std::vector<uint8_t> b = small_writer().bytes();
  const size_t name_len = find_bytes(b, "general.name") + 12 + 4;  // after the key and its type
  poke_u64(b, name_len, 1ull << 62);
  expect_error([&] { parse(b); }, Errc::format, {"hostile.gguf", "'general.name'", "4611686018427387904", "cap"});
  poke_u64(b, name_len, 1ull << 20);  // under the cap, past the end
  expect_error([&] { parse(b); }, Errc::format, {"'general.name'", "1048576", "past the end"});
  b = small_writer().bytes();
  poke_u64(b, 24, ~0ull);  // the first key's length
  expect_error([&] { parse(b); }, Errc::format, {"metadata entry 0 key", "string length"});
  b = small_writer().bytes();
  const TensorFields tf = tensor_fields(b, "t.aaa");
  poke_u64(b, tf.n_dims - 5 - 8, 1ull << 40);  // the tensor name's length
  expect_error([&] { parse(b); }, Errc::format, {"tensor info 0 name", "1099511627776"});
}

TEST(GgufHostile, TenMegabyteStringClaimFailsFast) {
  Raw r;
  r.header(3, 0, 1).str("general.name").u32(kString).u64(10ull << 20).zeros_to(160);
  expect_cheap(expect_fast_failure(r.b, {"'general.name'", "10485760", "past the end"}));
}

TEST(GgufHostile, ArrayCount2To40In160Bytes) {
  Raw r;
  r.header(3, 0, 1).str("tokenizer.ggml.scores").u32(kArray).u32(kF32).u64(1ull << 40).zeros_to(160);
  ASSERT_EQ(r.b.size(), 160u);
  expect_cheap(expect_fast_failure(r.b, {"hostile.gguf", "'tokenizer.ggml.scores'", "1099511627776"}));
  // Under the item cap but beyond the bytes left: refused before reserving.
  for (uint32_t et : {kF32, kString, kArray}) {
    Raw q;
    q.header(3, 0, 1).str("tokenizer.ggml.tokens").u32(kArray).u32(et).u64(1ull << 23).zeros_to(160);
    expect_cheap(expect_fast_failure(q.b, {"'tokenizer.ggml.tokens'", "8388608", "left in the file"}));
  }
}

TEST(GgufHostile, TensorCount2To32) {
  Raw r;
  r.header(3, 1ull << 32, 1).str("general.architecture").u32(kString).str("llama").zeros_to(160);
  expect_cheap(expect_fast_failure(r.b, {"hostile.gguf", "tensor count 4294967296"}));
  Raw k;
  k.header(3, 0, 1ull << 40).zeros_to(160);
  expect_cheap(expect_fast_failure(k.b, {"metadata count 1099511627776"}));
}

// A sparse file of `size` bytes that starts with `head` (the rest reads as
// zeros), removed when the object goes.
struct SparseFile {
  std::string path;
  SparseFile(const std::vector<uint8_t>& head, uint64_t size) {
    path = ::testing::TempDir() + "/synapse_sparse_" + std::to_string(::getpid()) + "_" +
           std::to_string(size) + ".gguf";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr) << path;
    std::fwrite(head.data(), 1, head.size(), f);
    std::fclose(f);
    EXPECT_EQ(::truncate(path.c_str(), static_cast<off_t>(size)), 0) << path;
  }
  ~SparseFile() { std::remove(path.c_str()); }
};

// Array items become whole gguf::Values (~100 bytes each) whatever they take
// in the file, so the reader caps items per array, values in all, and the
// memory the metadata takes (kMetadataMemoryBase + 8 x file size); files are
// opened (mapped, not copied) so the test sees only the parser's allocations.
TEST(GgufHostile, MetadataMemoryIsProportionalToTheFile) {
  constexpr uint32_t kU8 = 0;
  {  // 256 MB of UINT8 items: ~25 GB as Values. Refused by the item cap.
    Raw r;
    r.header(3, 0, 1).str("x.bytes").u32(kArray).u32(kU8).u64((1ull << 28) - 64);
    SparseFile f(r.b, 1ull << 28);
    expect_cheap(expect_fast_error([&] { File::open(f.path); },
                                   {"'x.bytes'", "268435392 items exceeds the cap of 16777216"}));
  }
  {  // 4 MiB of UINT8 items: ~400 MB as Values, past 256 MiB + 8 x 4 MiB.
    Raw r;
    r.header(3, 0, 1).str("x.bytes").u32(kArray).u32(kU8).u64((4ull << 20) - 64);
    SparseFile f(r.b, 4ull << 20);
    expect_cheap(expect_fast_error([&] { File::open(f.path); },
                                   {"'x.bytes'", "bytes of memory", "256 MiB + 8 x the file size"}));
  }
  {  // 2^24 items (the per-array cap) after one other key: past kMaxMetadataValues.
    Raw r;
    r.header(3, 0, 2).str("x.one").u32(kU32).u32(1);
    r.str("x.bytes").u32(kArray).u32(kU8).u64(kMaxArrayItems);
    SparseFile f(r.b, kMaxArrayItems + 4096);
    expect_cheap(expect_fast_error([&] { File::open(f.path); },
                                   {"'x.bytes'", "more than 16777216 values in all"}));
  }
  {  // Under every cap: 1M UINT8 items load (~100 MB as Values).
    Raw r;
    r.header(3, 0, 1).str("x.bytes").u32(kArray).u32(kU8).u64(1ull << 20);
    SparseFile f(r.b, r.b.size() + (1ull << 20));
    const File file = File::open(f.path);
    ASSERT_NE(file.find("x.bytes"), nullptr);
    EXPECT_EQ(file.find("x.bytes")->items.size(), 1u << 20);
    EXPECT_EQ(file.get_int_array("x.bytes")->at(12345), 0);
  }
  // The real vocabularies stay far below the cap (the largest, Llama 3's).
  EXPECT_GT(File::open(data_path("tokenizer/vocab/ggml-vocab-llama-bpe.gguf"))
                .get_string_array("tokenizer.ggml.merges")->size(), 200000u);
}

TEST(GgufHostile, DimensionProductsThatOverflow) {
  std::vector<uint8_t> b = small_writer().bytes();
  const TensorFields tf = tensor_fields(b, "t.aaa");
  poke_u64(b, tf.ne0, 1ull << 32);
  poke_u64(b, tf.ne0 + 8, 1ull << 32);  // 2^64 elements
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.aaa'", "element count", "overflows 64 bits"});
  poke_u64(b, tf.ne0, 1ull << 31);
  poke_u64(b, tf.ne0 + 8, 1ull << 31);  // 2^62 elements fit, 2^64 bytes do not
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.aaa'", "byte size", "overflows 64 bits"});
  poke_u64(b, tf.ne0, 1ull << 63);  // not an int64
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.aaa'", "dimension 0"});
  poke_u64(b, tf.ne0, 1ull << 20);
  poke_u64(b, tf.ne0 + 8, 1ull << 20);  // fits, but far past the end of the file
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.aaa'", "4398046511104 bytes", "extends past the end"});
}

TEST(GgufHostile, BadDimensionCounts) {
  std::vector<uint8_t> b = small_writer().bytes();
  const TensorFields tf = tensor_fields(b, "t.aaa");
  poke_u32(b, tf.n_dims, 5);
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.aaa'", "n_dims 5"});
  b = small_writer().bytes();
  poke_u64(b, tf.ne0 + 8, 0);
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.aaa'", "dimension 1 is 0"});
}

TEST(GgufHostile, TensorOffsets) {
  std::vector<uint8_t> b = small_writer().bytes();
  const TensorFields tf = tensor_fields(b, "t.bbb");
  poke_u64(b, tf.offset, 1ull << 20);
  expect_error([&] { parse(b); }, Errc::format,
               {"hostile.gguf: tensor 't.bbb': data [offset 1048576", "32 bytes] extends past the end of the file (" + std::to_string(b.size()) + " bytes)"});
  poke_u64(b, tf.offset, ~0ull << 5);  // aligned, and offset + size wraps around 2^64
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.bbb'", "extends past the end"});
  poke_u64(b, tf.offset, 68);
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.bbb'", "offset 68", "alignment 32"});
  // Real file: a tensor moved past the end.
  std::vector<uint8_t> s = stories();
  poke_u64(s, tensor_fields(s, "output.weight").offset, 1185376);
  expect_error([&] { parse(s); }, Errc::format, {"tensor 'output.weight'", "extends past the end of the file (1185376 bytes)"});
}

// llama.cpp's layout rule: each tensor's data where the previous one's ends
// (padded to the alignment). Aliasing (output.weight at token_embd.weight's
// offset), a partial overlap and a gap are refused, naming both tensors.
TEST(GgufHostile, OverlappingOrAliasedTensorData) {
  std::vector<uint8_t> s = stories();
  poke_u64(s, tensor_fields(s, "output.weight").offset, 0);  // token_embd.weight's
  expect_error([&] { parse(s); }, Errc::format, {"tensor 'output.weight'", "data offset 0", "overlaps"});
  std::vector<uint8_t> b = small_writer().bytes();
  const TensorFields tf = tensor_fields(b, "t.bbb");
  poke_u64(b, tf.offset, 32);  // inside t.aaa's 64 bytes
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.bbb'", "data offset 32", "expected 64", "'t.aaa'"});
  b = small_writer().bytes();
  poke_u64(b, tensor_fields(b, "t.aaa").offset, 32);  // a gap before t.aaa (t.bbb at 64 overlaps it then)
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.aaa'", "data offset 32", "expected 0", "gap"});
}

// general.alignment = 1 (a power of two, so llama.cpp accepts it) with odd
// offsets: every tensor comes back aligned for its type, with its bytes.
TEST(GgufHostile, AlignmentOneGivesAlignedTensorData) {
  Writer w(1);
  std::vector<uint8_t> odd(3, 7), f32(16), f16(8);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<uint8_t>(i + 1);
  for (size_t i = 0; i < f16.size(); ++i) f16[i] = static_cast<uint8_t>(100 + i);
  std::vector<uint8_t> q8k(row_size(GgmlType::Q8_K, 256), 0x11);
  const int64_t ne3[1] = {3}, ne4[1] = {4}, ne256[1] = {256};
  w.add_tensor("t.i8", GgmlType::I8, ne3, odd);
  w.add_tensor("t.f32", GgmlType::F32, ne4, f32);
  w.add_tensor("t.f16", GgmlType::F16, ne4, f16);
  w.add_tensor("t.i8b", GgmlType::I8, ne3, odd);
  w.add_tensor("t.q8k", GgmlType::Q8_K, ne256, q8k);
  const File f = parse(w.bytes());
  ASSERT_EQ(f.alignment(), 1u);
  EXPECT_EQ(f.find_tensor("t.f32")->offset, 3u);  // odd in the file
  const auto at = [&](const char* name) { return reinterpret_cast<uintptr_t>(f.find_tensor(name)->data); };
  EXPECT_EQ(at("t.f32") % alignof(float), 0u);
  EXPECT_EQ(at("t.f16") % alignof(uint16_t), 0u);
  EXPECT_EQ(at("t.q8k") % alignof(float), 0u);
  EXPECT_EQ(0, std::memcmp(f.find_tensor("t.f32")->data, f32.data(), f32.size()));
  EXPECT_EQ(0, std::memcmp(f.find_tensor("t.f16")->data, f16.data(), f16.size()));
  EXPECT_EQ(0, std::memcmp(f.find_tensor("t.q8k")->data, q8k.data(), q8k.size()));
}

TEST(GgufHostile, TensorTypeIds) {
  std::vector<uint8_t> s = stories();
  const TensorFields tf = tensor_fields(s, "blk.0.attn_q.weight");
  ASSERT_EQ(peek_u32(s, tf.type), 0u);  // F32 in the original
  poke_u32(s, tf.type, 200);
  expect_error([&] { parse(s); }, Errc::format, {"tensor 'blk.0.attn_q.weight'", "unknown tensor type id 200"});
  poke_u32(s, tf.type, 4);  // Q4_2, removed from ggml
  expect_error([&] { parse(s); }, Errc::format, {"tensor 'blk.0.attn_q.weight'", "id 4"});
  // Q4_0 on ne[0] = 64 is well formed; on a 4-wide row it is not.
  std::vector<uint8_t> b = small_writer().bytes();
  poke_u32(b, tensor_fields(b, "t.aaa").type, 2);
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.aaa'", "ne[0] = 4", "Q4_0 block size 32"});
}

TEST(GgufHostile, UnknownValueTypes) {
  std::vector<uint8_t> b = small_writer().bytes();
  const size_t type_at = find_bytes(b, "general.name") + 12;
  poke_u32(b, type_at, 13);
  expect_error([&] { parse(b); }, Errc::format, {"'general.name'", "unknown value type 13"});
  Raw r;
  r.header(3, 0, 1).str("x.arr").u32(kArray).u32(0xdeadbeef).u64(1).u32(0);
  expect_error([&] { parse(r.b); }, Errc::format, {"'x.arr'", "unknown array element type 3735928559"});
  Raw bb;
  bb.header(3, 0, 1).str("x.bool").u32(7).u8(2);
  expect_error([&] { parse(bb.b); }, Errc::format, {"'x.bool'", "BOOL value 2"});
}

TEST(GgufHostile, NestingDepthAndEmptyNames) {
  auto nested = [](int depth) {
    Raw r;
    r.header(3, 0, 1).str("x.deep");
    r.u32(kArray);
    for (int d = 1; d < depth; ++d) r.u32(kArray).u64(1);
    r.u32(kU32).u64(1).u32(7);
    return r.b;
  };
  File ok = parse(nested(kMaxArrayDepth));
  const Value* v = ok.find("x.deep");
  for (int d = 1; d < kMaxArrayDepth; ++d) v = &v->items.at(0);
  EXPECT_EQ(v->items.at(0).u, 7u);
  expect_error([&] { parse(nested(kMaxArrayDepth + 1)); }, Errc::format, {"'x.deep'", "nested deeper than 8"});
  expect_error([&] { parse(nested(100000)); }, Errc::format, {"'x.deep'", "nested"});
  Raw e;
  e.header(3, 0, 1).str("").u32(kU32).u32(1);
  expect_error([&] { parse(e.b); }, Errc::format, {"metadata entry 0", "empty key"});
  Raw t;
  t.header(3, 1, 0).str("").u32(1).u64(8).u32(0).u64(0).zeros_to(96);
  expect_error([&] { parse(t.b); }, Errc::format, {"tensor info 0", "empty tensor name"});
}

TEST(GgufHostile, DuplicateKeyAndTensorName) {
  std::vector<uint8_t> b = small_writer().bytes();
  const size_t at = find_bytes(b, "dup.bbb");
  std::memcpy(b.data() + at, "dup.aaa", 7);
  expect_error([&] { parse(b); }, Errc::format, {"hostile.gguf", "key 'dup.aaa'", "duplicate key"});
  b = small_writer().bytes();
  const size_t tat = find_bytes(b, "t.bbb");
  std::memcpy(b.data() + tat, "t.aaa", 5);
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.aaa'", "duplicate tensor name"});
}

TEST(GgufHostile, Alignment) {
  for (uint32_t a : {0u, 3u, 1u << 21, 48u}) {
    Writer w = small_writer();
    w.set_u32("general.alignment", a);  // the layout stays at 32; the claim is bad
    expect_error([&] { parse(w.bytes()); }, Errc::format, {"'general.alignment'", "alignment " + std::to_string(a), "power of two"});
  }
  Writer s = small_writer();
  s.set_string("general.alignment", "32");
  expect_error([&] { parse(s.bytes()); }, Errc::format, {"'general.alignment'", "UINT32", "STRING"});
  Writer i = small_writer();
  i.set_i32("general.alignment", 32);
  expect_error([&] { parse(i.bytes()); }, Errc::format, {"'general.alignment'", "INT32"});
  // Any unsigned type holding a valid value is accepted.
  Writer u64w = small_writer();
  u64w.set_u64("general.alignment", 32);
  EXPECT_EQ(parse(u64w.bytes()).alignment(), 32u);
  // A valid alignment the layout does not honour: offsets become misaligned.
  Writer big = small_writer();
  big.set_u32("general.alignment", 4096);  // the writer lays out at 4096 then
  std::vector<uint8_t> b = big.bytes();
  EXPECT_EQ(parse(b).alignment(), 4096u);
  EXPECT_EQ(parse(b).data_offset(), 4096u);
  poke_u64(b, tensor_fields(b, "t.bbb").offset, 64);  // 32-aligned, not 4096-aligned
  expect_error([&] { parse(b); }, Errc::format, {"tensor 't.bbb'", "offset 64", "alignment 4096"});
}

TEST(GgufHostile, ScoresDeclaredAsUint8) {
  Writer w = small_writer();
  Value v;
  v.type = ValueType::ARRAY;
  v.elem_type = ValueType::UINT8;
  v.items.resize(3);
  for (Value& it : v.items) it.type = ValueType::UINT8;
  w.set_value("tokenizer.ggml.scores", v);
  File f = parse(w.bytes());  // loads: the type is only wrong for the consumer
  expect_error([&] { f.get_f32_array("tokenizer.ggml.scores"); }, Errc::format,
               {"hostile.gguf", "'tokenizer.ggml.scores'", "ARRAY of FLOAT32", "ARRAY of UINT8"});
}

TEST(GgufHostile, MagicAndVersion) {
  std::vector<uint8_t> s = stories();
  s[3] = 'X';
  expect_error([&] { parse(s); }, Errc::format, {"hostile.gguf", "bad magic 'GGUX'"});
  for (uint32_t v : {1u, 4u, 0u, 0x03000000u}) {
    std::vector<uint8_t> b = stories();
    poke_u32(b, 4, v);
    expect_error([&] { parse(b); }, Errc::unsupported, {"hostile.gguf", "version " + std::to_string(v)});
  }
  expect_error([&] { parse({}); }, Errc::format, {"hostile.gguf", "truncated"});
}

// The reader takes every known type (the model layer refuses the ones
// without weight kernels: Q8_K is ggml's activation type).
TEST(GgufHostile, KnownButUnsupportedTypeLoads) {
  Writer w;
  std::vector<uint8_t> d(292);
  const int64_t ne[2] = {256, 1};
  w.add_tensor("blk.0.ffn_down.weight", GgmlType::Q8_K, ne, d);
  File f = parse(w.bytes());
  EXPECT_EQ(f.tensors().at(0).type, GgmlType::Q8_K);
  EXPECT_EQ(f.tensors().at(0).n_bytes, 292u);
}

}  // namespace

namespace {

// The lattice formats (IQ2_XXS ... IQ1_M, 256-value blocks of 50 to 110
// bytes): a tensor cut anywhere in its data is refused naming it, as is a row
// that is not a whole number of blocks; a file whose blocks are all random
// loads (the indices are masked to their tables' widths in the kernels, so
// any bytes are a defined value: tests/quant/iq_quants_test.cpp).
TEST(GgufHostile, LatticeTypesCutOrPartialBlocks) {
  for (GgmlType t : {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S,
                     GgmlType::IQ1_S, GgmlType::IQ1_M}) {
    SCOPED_TRACE(std::string(type_name(t)));
    const size_t bytes = 2 * 2 * type_traits(t).type_size;  // [512, 2]: 4 blocks
    std::vector<uint8_t> d(bytes);
    std::mt19937 rng(static_cast<uint32_t>(t));
    for (auto& v : d) v = static_cast<uint8_t>(rng());
    Writer w;
    w.set_string("general.architecture", "llama");
    const int64_t ne[2] = {512, 2};
    w.add_tensor("blk.0.ffn_down.weight", t, ne, d);
    const std::vector<uint8_t> full = w.bytes();
    const File f = parse(full);
    ASSERT_EQ(f.tensors().at(0).n_bytes, bytes);
    EXPECT_EQ(std::memcmp(f.tensors().at(0).data, d.data(), bytes), 0);
    const uint64_t data_start = f.data_offset();
    for (uint64_t len = data_start; len < full.size(); len += 1 + (full.size() - data_start) / 7) {
      std::vector<uint8_t> b(full.begin(), full.begin() + static_cast<ptrdiff_t>(len));
      expect_error([&] { parse(b); }, Errc::format, {"tensor 'blk.0.ffn_down.weight'", "extends past the end"});
    }
    const uint64_t end = data_start + f.tensors().at(0).offset + bytes;
    std::vector<uint8_t> b(full.begin(), full.begin() + static_cast<ptrdiff_t>(end - 1));  // the last block 1 byte short
    expect_error([&] { parse(b); }, Errc::format, {"tensor 'blk.0.ffn_down.weight'", "extends past the end"});
    b = full;
    poke_u64(b, tensor_fields(b, "blk.0.ffn_down.weight").ne0, 384);  // 1.5 blocks a row
    expect_error([&] { parse(b); }, Errc::format,
                 {"tensor 'blk.0.ffn_down.weight'", "ne[0] = 384", std::string(type_name(t)) + " block size 256"});
  }
}

}  // namespace

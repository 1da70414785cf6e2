// The reader on the real GGUF files of tests/data. Expected values were
// computed independently with a ~30-line Python struct parser of the format
// (and ggml's block sizes typed in by hand), not by this reader.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <unistd.h>
#include <vector>

#include "gguf_test_util.hpp"

namespace {

using namespace synapse;
using namespace synapse::gguf;
using gguf_test::data_path;
using gguf_test::expect_error;

struct Expected {
  const char* path;
  uint32_t version;
  size_t n_kv, n_tensors;
  uint64_t data_offset, file_size;
  uint64_t total_tensor_bytes;  // sum of exact tensor sizes
  uint32_t last_tensor_sum;     // byte sum (mod 2^32) of the last tensor's data
};

// Vocab-only files have no tensors and end before the aligned data offset:
// data_offset() is then the file size.
const Expected kFiles[] = {
    {"models/llama-2-tiny-random.gguf", 3, 18, 12, 724416, 1750560, 1026144, 56453087u},
    {"models/stories260K-q4_0.gguf", 3, 21, 48, 14240, 277024, 262624, 805428u},
    {"models/stories260K-q8_0.gguf", 3, 21, 48, 14240, 379168, 364768, 1457390u},
    {"models/stories260K.gguf", 3, 19, 48, 14176, 1185376, 1171200, 29409u},
    {"models/tiny-gpt-oss-f32.gguf", 3, 33, 41, 14080, 4511104, 4496992, 32983099u},
    {"models/tiny-gpt-oss-mxfp4_moe.gguf", 3, 34, 41, 14144, 820672, 806496, 57205u},
    {"models/tiny-gemma3-f32.gguf", 3, 32, 80, 16544, 5013152, 4996608, 57410u},
    {"models/tiny-gemma3-q4_0.gguf", 3, 33, 80, 16608, 765664, 749056, 47237u},
    {"models/tiny-qwen35-f32.gguf", 3, 33, 81, 16288, 5038240, 5021824, 32898069u},
    {"models/tiny-qwen35-q8_0.gguf", 3, 34, 81, 16320, 1368512, 1352064, 56825u},
    {"models/tiny-qwen35moe-f32.gguf", 3, 37, 57, 15360, 4572032, 4556608, 33010953u},
    {"models/tiny-qwen35moe-q8_0.gguf", 3, 38, 57, 15392, 1245216, 1229760, 56928u},
    {"models/tiny-llama-bf16.gguf", 3, 24, 21, 21888, 4221312, 4199424, 48662973u},
    {"models/tiny-llama-f16.gguf", 3, 24, 21, 21888, 4221312, 4199424, 44674277u},
    {"models/tiny-llama-f32.gguf", 3, 23, 21, 21856, 8415584, 8393728, 130353669u},
    {"models/tiny-llama-iq1_m.gguf", 3, 28, 21, 22176, 486048, 463872, 5375830u},
    {"models/tiny-llama-iq1_s.gguf", 3, 28, 21, 22176, 471712, 449536, 5016775u},
    {"models/tiny-llama-iq2_s.gguf", 3, 28, 21, 22176, 701088, 678912, 7775507u},
    {"models/tiny-llama-iq2_xs.gguf", 3, 28, 21, 22176, 643744, 621568, 6958918u},
    {"models/tiny-llama-iq2_xxs.gguf", 3, 28, 21, 22176, 586400, 564224, 6356578u},
    {"models/tiny-llama-iq3_s.gguf", 3, 28, 21, 22176, 928416, 906240, 10336507u},
    {"models/tiny-llama-iq3_xxs.gguf", 3, 28, 21, 22176, 830112, 807936, 8969553u},
    {"models/tiny-llama-iq3_xs-mix.gguf", 3, 28, 21, 22176, 1003168, 980992, 10336507u},
    {"models/tiny-llama-iq4_nl.gguf", 3, 24, 21, 21888, 1206656, 1184768, 14059929u},
    {"models/tiny-llama-iq4_xs.gguf", 3, 24, 21, 21888, 1141120, 1119232, 13483365u},
    {"models/tiny-llama-q2_k.gguf", 3, 24, 21, 21888, 715136, 693248, 8419744u},
    {"models/tiny-llama-q3_k.gguf", 3, 24, 21, 21888, 928128, 906240, 10913903u},
    {"models/tiny-llama-q4_0.gguf", 3, 24, 21, 21888, 1206656, 1184768, 14339406u},
    {"models/tiny-llama-q4_1.gguf", 3, 24, 21, 21888, 1337728, 1315840, 15352978u},
    {"models/tiny-llama-q4_k.gguf", 3, 24, 21, 21888, 1206656, 1184768, 14349550u},
    {"models/tiny-llama-q4_k_m.gguf", 3, 24, 21, 21888, 1333376, 1311488, 14349550u},
    {"models/tiny-llama-q5_0.gguf", 3, 24, 21, 21888, 1468800, 1446912, 16754594u},
    {"models/tiny-llama-q5_1.gguf", 3, 24, 21, 21888, 1599872, 1577984, 18463587u},
    {"models/tiny-llama-q5_k.gguf", 3, 24, 21, 21888, 1468800, 1446912, 17603520u},
    {"models/tiny-llama-q6_k.gguf", 3, 24, 21, 21888, 1747328, 1725440, 19557917u},
    {"models/tiny-llama-q8_0.gguf", 3, 24, 21, 21888, 2255232, 2233344, 25810170u},
    {"models/tiny-llama-tq1_0.gguf", 3, 24, 21, 21888, 469376, 447488, 5228989u},
    {"models/tiny-llama-tq2_0.gguf", 3, 24, 21, 21888, 567680, 545792, 4319501u},
    {"models/tiny-llama-linear-f32.gguf", 3, 26, 21, 12768, 1719264, 1706496, 32934139u},
    {"models/tiny-llama-yarn-f32.gguf", 3, 26, 21, 12768, 1719264, 1706496, 32934139u},
    // llama-imatrix's GGUF format: <tensor>.in_sum2 and <tensor>.counts (F32).
    {"models/tiny-llama.imatrix.gguf", 3, 4, 30, 2016, 21952, 19516, 69u},
    {"models/tiny-llama.fa-off.imatrix.gguf", 3, 4, 30, 2016, 21952, 19516, 69u},
    {"models/tiny-mixtral.imatrix.gguf", 3, 4, 18, 1376, 18048, 16456, 68u},
    {"models/tiny-llama3-f32.gguf", 3, 25, 12, 28832, 2653472, 2624640, 112999u},
    {"models/tiny-llama3-q4_k_m.gguf", 3, 26, 12, 28864, 493632, 464768, 4757004u},
    {"models/tiny-mistral-arch-f32.gguf", 3, 24, 21, 12672, 1719168, 1706496, 32934139u},
    {"models/tiny-mistral-swa-f32.gguf", 3, 24, 21, 12672, 1719168, 1706496, 32934139u},
    {"models/tiny-mistral3-f32.gguf", 3, 34, 20, 12800, 1850368, 1837568, 56203u},
    {"models/tiny-mixtral-f32.gguf", 3, 25, 13, 12256, 3427296, 3415040, 65214015u},
    {"models/tiny-mixtral-q4_k_m.gguf", 3, 26, 13, 12320, 606496, 594176, 9555759u},
    {"models/tiny-mixtral-mxfp4_moe.gguf", 3, 26, 13, 12320, 715808, 703488, 8068515u},
    {"models/tiny-mixtral-split-f32.gguf", 3, 25, 22, 12800, 3427840, 3415040, 65214015u},
    {"models/tiny-phi3-f32.gguf", 3, 27, 9, 12992, 2637504, 2624512, 65203866u},
    {"models/tiny-phi3-longrope-f32.gguf", 3, 28, 11, 13184, 2637952, 2624768, 65203866u},
    {"models/tiny-phi3-q4_k_m.gguf", 3, 28, 9, 13056, 451840, 438784, 9513046u},
    {"models/tiny-phi3-q4_k_m-v050.gguf", 3, 28, 9, 13056, 469248, 456192, 9513046u},
    {"models/tiny-phi3-swa48-f32.gguf", 3, 27, 9, 13024, 2637536, 2624512, 65203866u},
    {"models/tiny-qwen2-f32.gguf", 3, 24, 14, 11936, 2114208, 2102272, 112651u},
    {"models/tiny-qwen2-q4_k_m.gguf", 3, 25, 14, 12000, 371168, 359168, 4769103u},
    {"models/tiny-qwen3-f32.gguf", 3, 26, 24, 12640, 5262688, 5250048, 114259u},
    {"models/tiny-qwen3-q4_k_m.gguf", 3, 27, 24, 12672, 824704, 812032, 4792278u},
    {"models/tiny-qwen3-reranker-f32.gguf", 3, 30, 25, 13280, 5265376, 5252096, 114259u},
    {"models/tiny-qwen3moe-f32.gguf", 3, 29, 27, 13056, 16813824, 16800768, 65254376u},
    {"models/tiny-qwen3moe-q4_k_m.gguf", 3, 30, 27, 13120, 2728768, 2715648, 38190889u},
    {"tokenizer/vocab/ggml-vocab-gpt-2.gguf", 3, 16, 0, 1766807, 1766807, 0, 0u},
    {"tokenizer/vocab/ggml-vocab-llama-bpe-3.1.gguf", 3, 23, 0, 7822849, 7822849, 0, 0u},
    {"tokenizer/vocab/ggml-vocab-llama-bpe.gguf", 3, 23, 0, 7818668, 7818668, 0, 0u},
    {"tokenizer/vocab/ggml-vocab-llama-spm.gguf", 3, 22, 0, 723869, 723869, 0, 0u},
    {"tokenizer/vocab/ggml-vocab-mistral-spm.gguf", 3, 25, 0, 717743, 717743, 0, 0u},
    {"tokenizer/vocab/ggml-vocab-phi-3.gguf", 3, 26, 0, 726019, 726019, 0, 0u},
    {"tokenizer/vocab/ggml-vocab-qwen2.gguf", 3, 23, 0, 5931049, 5931049, 0, 0u},
    {"tokenizer/vocab/stories260K.gguf", 3, 19, 48, 14176, 1185376, 1171200, 29409u},
};

uint32_t byte_sum(const uint8_t* p, uint64_t n) {
  uint32_t s = 0;
  for (uint64_t k = 0; k < n; ++k) s += p[k];
  return s;
}

TEST(GgufReader, EveryTestFileLoadsWithTheExpectedLayout) {
  for (const Expected& e : kFiles) {
    SCOPED_TRACE(e.path);
    File f = File::open(data_path(e.path));
    EXPECT_EQ(f.version(), e.version);
    EXPECT_EQ(f.metadata().size(), e.n_kv);
    EXPECT_EQ(f.tensors().size(), e.n_tensors);
    EXPECT_EQ(f.data_offset(), e.data_offset);
    EXPECT_EQ(f.file_size(), e.file_size);
    EXPECT_EQ(f.alignment(), 32u);
    uint64_t total = 0;
    for (const TensorInfo& t : f.tensors()) {
      total += t.n_bytes;
      EXPECT_EQ(t.offset % 32, 0u) << t.name;
      EXPECT_EQ(f.find_tensor(t.name), &t);
    }
    EXPECT_EQ(total, e.total_tensor_bytes);
    if (!f.tensors().empty()) {
      const TensorInfo& last = f.tensors().back();
      EXPECT_EQ(byte_sum(last.data, last.n_bytes), e.last_tensor_sum);
    }
    for (const KeyValue& kv : f.metadata()) EXPECT_EQ(f.find(kv.key), &kv.value) << kv.key;
  }
}

TEST(GgufReader, EveryGgufInTheDataFoldersIsCoveredAndLoads) {
  namespace fs = std::filesystem;
  std::set<std::string> listed;
  for (const Expected& e : kFiles) listed.insert(e.path);
  int n = 0;
  for (const char* dir : {"models", "tokenizer/vocab"}) {
    for (const auto& ent : fs::directory_iterator(data_path(dir))) {
      if (ent.path().extension() != ".gguf") continue;
      const std::string rel = std::string(dir) + "/" + ent.path().filename().string();
      EXPECT_TRUE(listed.count(rel)) << rel << " has no expected values in kFiles";
      EXPECT_NO_THROW(File::open(ent.path().string())) << rel;
      ++n;
    }
  }
  EXPECT_EQ(n, static_cast<int>(std::size(kFiles)));
}

TEST(GgufReader, Stories260KMetadata) {
  File f = File::open(data_path("models/stories260K.gguf"));
  EXPECT_EQ(f.path(), data_path("models/stories260K.gguf"));
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(f.get_u32("llama.block_count"), 5u);
  EXPECT_EQ(f.get_u32("llama.feed_forward_length"), 172u);
  EXPECT_EQ(f.get_u32("llama.attention.head_count"), 8u);
  EXPECT_EQ(f.get_u32("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(f.get_u32("llama.context_length"), 2048u);
  EXPECT_EQ(f.get_i64("llama.rope.dimension_count"), 8);
  EXPECT_EQ(f.get_u32("tokenizer.ggml.seperator_token_id"), 4294967295u);
  EXPECT_EQ(f.get_i64("tokenizer.ggml.padding_token_id"), 4294967295);
  EXPECT_EQ(f.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(f.get_u32("no.such.key"), std::nullopt);
  EXPECT_EQ(f.get_f32_array("no.such.key"), std::nullopt);
  EXPECT_EQ(f.find("no.such.key"), nullptr);

  // Metadata order is the file's.
  EXPECT_EQ(f.metadata().front().key, "tokenizer.ggml.tokens");
  EXPECT_EQ(f.metadata().back().key, "llama.attention.layer_norm_rms_epsilon");

  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ((*tokens)[100], "<0x61>");
  auto scores = f.get_f32_array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores);
  EXPECT_EQ(scores->size(), 512u);
  auto types = f.get_i32_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types);
  ASSERT_EQ(types->size(), 512u);
  EXPECT_EQ((*types)[0], 2);
  EXPECT_EQ((*types)[1], 3);
  EXPECT_EQ((*types)[3], 6);
  EXPECT_EQ(std::vector<int32_t>(types->begin() + 256, types->begin() + 260), (std::vector<int32_t>{6, 6, 6, 1}));
  auto types64 = f.get_int_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types64);
  EXPECT_EQ(std::vector<int64_t>(types->begin(), types->end()), *types64);

  const Value* v = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->type, ValueType::ARRAY);
  EXPECT_EQ(v->elem_type, ValueType::STRING);
}

TEST(GgufReader, Stories260KTensors) {
  File f = File::open(data_path("models/stories260K.gguf"));
  ASSERT_EQ(f.tensors().size(), 48u);
  const TensorInfo* te = f.find_tensor("token_embd.weight");
  ASSERT_NE(te, nullptr);
  EXPECT_EQ(te, &f.tensors()[0]);
  EXPECT_EQ(te->n_dims, 2u);
  EXPECT_EQ(te->ne, (std::array<int64_t, 4>{64, 512, 1, 1}));
  EXPECT_EQ(te->type, GgmlType::F32);
  EXPECT_EQ(te->offset, 0u);
  EXPECT_EQ(te->n_bytes, 64u * 512 * 4);
  EXPECT_EQ(te->n_elements(), 64 * 512);
  EXPECT_EQ(te->data, f.tensors()[0].data);
  float first[4];
  std::memcpy(first, te->data, sizeof first);
  EXPECT_EQ(first[0], -0.29474878311157227f);
  EXPECT_EQ(first[1], 0.5618956089019775f);
  EXPECT_EQ(first[2], 0.1754225343465805f);
  EXPECT_EQ(first[3], 0.34057360887527466f);

  const TensorInfo* on = f.find_tensor("output_norm.weight");
  ASSERT_NE(on, nullptr);
  EXPECT_EQ(on->n_dims, 1u);
  EXPECT_EQ(on->ne, (std::array<int64_t, 4>{64, 1, 1, 1}));
  EXPECT_EQ(on->offset, 131072u);
  std::memcpy(first, on->data, sizeof first);
  EXPECT_EQ(first[0], 2.4583089351654053f);
  EXPECT_EQ(first[3], 1.1078318357467651f);

  const TensorInfo* k = f.find_tensor("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->ne, (std::array<int64_t, 4>{64, 32, 1, 1}));
  EXPECT_EQ(k->offset, 278784u);
  const TensorInfo* up = f.find_tensor("blk.4.ffn_up.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->ne, (std::array<int64_t, 4>{64, 172, 1, 1}));
  EXPECT_EQ(up->offset, 1126912u);
  EXPECT_EQ(up->data, reinterpret_cast<const uint8_t*>(te->data) + 1126912);
  EXPECT_EQ(f.find_tensor("blk.5.ffn_up.weight"), nullptr);
}

// release_pages drops pages from the resident set (the process's
// file-backed resident pages go down by the range's whole pages) and
// nothing else: the bytes read afterwards are the file's, for a mapped file
// and for one made from bytes (where it does nothing), and ranges not wholly
// inside the file are ignored.
TEST(GgufReader, ReleasedPagesReadBackTheSame) {
  const std::string path = data_path("models/tiny-llama-q4_0.gguf");
  File mapped = File::open(path);
  std::vector<uint8_t> raw(static_cast<size_t>(mapped.file_size()));
  {
    std::FILE* fp = std::fopen(path.c_str(), "rb");
    ASSERT_NE(fp, nullptr);
    ASSERT_EQ(std::fread(raw.data(), 1, raw.size(), fp), raw.size());
    std::fclose(fp);
  }
  File copied = File::from_bytes(raw, "copy");
  // The largest tensor of the mapped file, read once (resident), leaves the
  // resident set when released: the Rss of its mapping in /proc/self/smaps
  // (walked from the page tables; statm's counters lag) drops by its pages.
  const TensorInfo* big = &mapped.tensors().front();
  for (const TensorInfo& t : mapped.tensors())
    if (t.n_bytes > big->n_bytes) big = &t;
  const long page = sysconf(_SC_PAGESIZE);
  ASSERT_GT(big->n_bytes, static_cast<uint64_t>(16 * page));
  const auto rss_kib = [](const void* addr) {  // Rss of the mapping holding addr, or -1
    std::FILE* sm = std::fopen("/proc/self/smaps", "r");
    if (sm == nullptr) return -1L;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    char line[512];
    bool inside = false;
    long rss = -1;
    while (std::fgets(line, sizeof line, sm) != nullptr) {
      unsigned long lo = 0, hi = 0;
      if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && std::strchr(line, '-') < std::strchr(line, ' ')) {
        inside = a >= lo && a < hi;
      } else if (inside && std::sscanf(line, "Rss: %ld kB", &rss) == 1) {
        break;
      }
    }
    std::fclose(sm);
    return rss;
  };
  volatile uint32_t sum = 0;
  for (uint64_t k = 0; k < big->n_bytes; k += static_cast<uint64_t>(page)) sum = sum + big->data[k];
  const long before = rss_kib(big->data);
  mapped.release_pages(big->data, static_cast<size_t>(big->n_bytes));
  const long after = rss_kib(big->data);
  ASSERT_GE(after, 0);
  EXPECT_GE(before - after, (static_cast<long>(big->n_bytes / static_cast<uint64_t>(page)) - 2) * page / 1024)
      << "Rss of the mapping " << before << " -> " << after << " KiB";
  for (const File* f : {&mapped, &copied}) {
    for (const TensorInfo& t : f->tensors()) {
      const std::vector<uint8_t> before(t.data, t.data + t.n_bytes);
      f->release_pages(t.data, static_cast<size_t>(t.n_bytes));
      ASSERT_EQ(std::memcmp(before.data(), t.data, before.size()), 0) << t.name;
    }
    const uint8_t* base = f->tensors().front().data;
    f->release_pages(base, static_cast<size_t>(f->file_size()) * 2);  // past the end: ignored
    f->release_pages(nullptr, 4096);
  }
  EXPECT_EQ(std::memcmp(mapped.tensors().back().data, copied.tensors().back().data,
                        static_cast<size_t>(mapped.tensors().back().n_bytes)),
            0);
}

TEST(GgufReader, QuantizedTensorsAndBools) {
  File f = File::open(data_path("models/tiny-llama-q4_k_m.gguf"));
  const TensorInfo* out = f.find_tensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->type, GgmlType::Q6_K);
  EXPECT_EQ(out->ne, (std::array<int64_t, 4>{256, 1024, 1, 1}));
  EXPECT_EQ(out->n_bytes, 215040u);  // 1024 rows x one 210-byte Q6_K block
  const TensorInfo* te = f.find_tensor("token_embd.weight");
  ASSERT_NE(te, nullptr);
  EXPECT_EQ(te->type, GgmlType::Q4_K);
  EXPECT_EQ(te->offset, 216064u);
  EXPECT_EQ(te->n_bytes, 1024u * 144);
  const uint8_t want[8] = {0x57, 0x13, 0xcf, 0x1e, 0xb8, 0xff, 0xef, 0xec};
  EXPECT_EQ(std::memcmp(te->data, want, 8), 0);
  EXPECT_EQ(f.get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(f.get_bool("tokenizer.ggml.add_eos_token"), false);
  EXPECT_EQ(f.get_u32("general.file_type"), 15u);
  EXPECT_EQ(f.get_f32("llama.rope.freq_base"), 10000.0f);
  EXPECT_EQ(f.get_string("general.name"), "tiny-llama (random weights)");
}

TEST(GgufReader, Llama3VocabFile) {
  File f = File::open(data_path("tokenizer/vocab/ggml-vocab-llama-bpe.gguf"));
  EXPECT_TRUE(f.tensors().empty());
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->size(), 128256u);
  EXPECT_EQ((*tokens)[0], "!");
  EXPECT_EQ((*tokens)[2], "#");
  auto merges = f.get_string_array("tokenizer.ggml.merges");
  ASSERT_TRUE(merges);
  ASSERT_EQ(merges->size(), 280147u);
  EXPECT_EQ((*merges)[0], "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ"
  EXPECT_EQ(f.get_u32("tokenizer.ggml.eos_token_id"), 128009u);
  EXPECT_EQ(f.get_u32("llama.vocab_size"), 128256u);
  EXPECT_EQ(f.get_f32("llama.rope.freq_base"), 500000.0f);
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "llama-bpe");
  auto tmpl = f.get_string("tokenizer.chat_template");
  ASSERT_TRUE(tmpl);
  EXPECT_EQ(tmpl->rfind("{% set loop_messages = messages %}", 0), 0u);
  EXPECT_EQ(f.get_i32_array("tokenizer.ggml.token_type")->size(), 128256u);
}

TEST(GgufReader, GettersRefuseTheWrongType) {
  File f = File::open(data_path("models/stories260K.gguf"));
  expect_error([&] { f.get_string("llama.block_count"); }, Errc::format,
               {"stories260K.gguf", "'llama.block_count'", "STRING", "UINT32"});
  expect_error([&] { f.get_u32("general.architecture"); }, Errc::format,
               {"'general.architecture'", "integer", "STRING"});
  expect_error([&] { f.get_f32("llama.block_count"); }, Errc::format, {"'llama.block_count'", "FLOAT32"});
  expect_error([&] { f.get_bool("llama.block_count"); }, Errc::format, {"'llama.block_count'", "BOOL"});
  expect_error([&] { f.get_f32_array("tokenizer.ggml.token_type"); }, Errc::format,
               {"'tokenizer.ggml.token_type'", "ARRAY of FLOAT32", "ARRAY of INT32"});
  expect_error([&] { f.get_i32_array("tokenizer.ggml.scores"); }, Errc::format,
               {"'tokenizer.ggml.scores'", "ARRAY of INT32", "ARRAY of FLOAT32"});
  expect_error([&] { f.get_string_array("llama.block_count"); }, Errc::format,
               {"'llama.block_count'", "ARRAY of STRING", "UINT32"});
  expect_error([&] { f.get_int_array("tokenizer.ggml.scores"); }, Errc::format,
               {"'tokenizer.ggml.scores'", "ARRAY of FLOAT32"});
}

TEST(GgufReader, FromBytesMatchesOpenAndSurvivesMoves) {
  const std::string path = data_path("models/stories260K-q8_0.gguf");
  File a = File::open(path);
  File b = File::from_bytes(gguf_test::read_bytes(path), "copy.gguf");
  EXPECT_EQ(b.path(), "copy.gguf");
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  ASSERT_EQ(a.metadata().size(), b.metadata().size());
  for (size_t k = 0; k < a.tensors().size(); ++k) {
    const TensorInfo& x = a.tensors()[k];
    const TensorInfo& y = b.tensors()[k];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.n_bytes, y.n_bytes);
    EXPECT_EQ(std::memcmp(x.data, y.data, x.n_bytes), 0) << x.name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(y.data) % 32, 0u) << "copy keeps the file's alignment";
  }
  const uint8_t* before = b.find_tensor("output.weight")->data;
  File c = std::move(b);  // moving keeps the data and the name index valid
  ASSERT_NE(c.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(c.find_tensor("output.weight")->data, before);
  EXPECT_EQ(c.get_string("general.architecture"), "llama");
}

TEST(GgufReader, MissingFileIsAnIoError) {
  expect_error([] { File::open("/nonexistent/dir/model.gguf"); }, Errc::io, {"/nonexistent/dir/model.gguf"});
  expect_error([] { File::open(SYNAPSE_TEST_DATA); }, Errc::io, {SYNAPSE_TEST_DATA});
}

}  // namespace

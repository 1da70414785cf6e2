// runtime::quantize_model against llama-quantize (llama.cpp c392e509; for
// MXFP4_MOE, which c392e509 lacks, v0.5.0).
//
// tests/data/models/MANIFEST.md records how each reference file was made:
// tiny-llama-<type>.gguf is llama-quantize --pure <TYPE> of tiny-llama-f32.gguf,
// *-q4_k_m.gguf the plain Q4_K_M mix of the f32 masters, stories260K-q8_0 and
// -q4_0 the Q6_K / TQ2_0 mixes of stories260K.gguf (their 64- and 172-column
// rows exercise the fallbacks). synapse's output must carry the same type for
// every tensor, the same metadata, and weights at least as accurate (RMS error
// against the F32 master <= 1.02x the reference's, per tensor); the bytes
// identical where the quantizer is (reported, and asserted for the files that
// are identical today).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "base/thread_pool.hpp"
#include "model/synth.hpp"
#include "quant/quant.hpp"
#include "runtime/imatrix.hpp"
#include "runtime/quantize_model.hpp"
#include "synapse/error.hpp"
#include "synapse/gguf.hpp"

namespace synapse::runtime {
namespace {

const std::string kModels = std::string(SYNAPSE_TEST_DATA) + "/models/";

gguf::File quantize_in_memory(const gguf::File& in, const QuantizeOptions& opt,
                              std::vector<uint8_t>* image = nullptr) {
  const gguf::Writer w = quantize_model(in, opt);
  const std::vector<uint8_t> bytes = w.bytes();
  if (image != nullptr) *image = bytes;
  return gguf::File::from_bytes(bytes, "quantized " + in.path());
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// RMS of dequantize(t) - master over the whole tensor.
double rms_error(const gguf::TensorInfo& t, const gguf::TensorInfo& master) {
  const int64_t n = t.ne[0], rows = t.n_elements() / n;
  const size_t rs = row_size(t.type, n);
  const auto* x = reinterpret_cast<const float*>(master.data);
  std::vector<float> y(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    quant::dequantize_row(t.type, t.data + r * rs, y.data(), n);
    for (int64_t j = 0; j < n; ++j) sum += std::pow(static_cast<double>(y[j]) - x[r * n + j], 2);
  }
  return std::sqrt(sum / static_cast<double>(t.n_elements()));
}

bool same_value(const gguf::Value& a, const gguf::Value& b) {
  if (a.type != b.type || a.u != b.u || a.i != b.i || a.b != b.b || a.str != b.str) return false;
  if (!(a.f == b.f || (std::isnan(a.f) && std::isnan(b.f)))) return false;
  if (a.elem_type != b.elem_type || a.items.size() != b.items.size()) return false;
  for (size_t i = 0; i < a.items.size(); ++i)
    if (!same_value(a.items[i], b.items[i])) return false;
  return true;
}

struct Comparison {
  int n_tensors = 0, n_identical = 0;
  double worst_ratio = 0;
};

// Every tensor of `mine` against `ref`: same names in the same order, same
// type and shape; RMS error ratio vs `master` for the converted ones.
// `skip` names one tensor whose type is known to differ (none if empty).
Comparison compare_files(const gguf::File& mine, const gguf::File& ref, const gguf::File& master,
                         const std::string& label, const std::string& skip = "") {
  Comparison c;
  EXPECT_EQ(mine.tensors().size(), ref.tensors().size()) << label;
  for (size_t i = 0; i < std::min(mine.tensors().size(), ref.tensors().size()); ++i) {
    const gguf::TensorInfo& a = mine.tensors()[i];
    const gguf::TensorInfo& b = ref.tensors()[i];
    EXPECT_EQ(a.name, b.name) << label << " tensor " << i;
    if (a.name != b.name || a.name == skip) continue;
    EXPECT_EQ(type_name(a.type), type_name(b.type)) << label << " " << a.name;
    EXPECT_EQ(a.n_dims, b.n_dims) << label << " " << a.name;
    EXPECT_EQ(a.ne, b.ne) << label << " " << a.name;
    if (a.type != b.type || a.n_bytes != b.n_bytes) continue;
    ++c.n_tensors;
    const bool identical = std::memcmp(a.data, b.data, a.n_bytes) == 0;
    c.n_identical += identical;
    const gguf::TensorInfo* m = master.find_tensor(a.name);
    if (m == nullptr || m->type != GgmlType::F32 || a.type == GgmlType::F32) continue;
    const double ea = rms_error(a, *m), eb = rms_error(b, *m);
    const double ratio = eb > 0 ? ea / eb : (ea > 0 ? INFINITY : 1.0);
    EXPECT_LE(ratio, 1.02) << label << " " << a.name << ": rms " << ea << " vs llama-quantize " << eb;
    c.worst_ratio = std::max(c.worst_ratio, ratio);
  }
  return c;
}

void expect_same_metadata(const gguf::File& mine, const gguf::File& ref, const std::string& label,
                          bool compare_file_type = true) {
  ASSERT_EQ(mine.metadata().size(), ref.metadata().size()) << label;
  for (size_t i = 0; i < mine.metadata().size(); ++i) {
    const gguf::KeyValue& a = mine.metadata()[i];
    const gguf::KeyValue& b = ref.metadata()[i];
    EXPECT_EQ(a.key, b.key) << label << " key " << i;
    if (!compare_file_type && a.key == "general.file_type") continue;
    EXPECT_TRUE(same_value(a.value, b.value)) << label << " " << a.key;
  }
}

// ---------------------------------------------------------------------------

TEST(QuantizeModel, ParsesLlamaQuantizeTypeNames) {
  EXPECT_EQ(parse_file_type("q4_k_m"), FileType::MOSTLY_Q4_K_M);
  EXPECT_EQ(parse_file_type("Q4_K"), FileType::MOSTLY_Q4_K_M);
  EXPECT_EQ(parse_file_type("q3_k"), FileType::MOSTLY_Q3_K_M);
  EXPECT_EQ(parse_file_type("Q5_k"), FileType::MOSTLY_Q5_K_M);
  EXPECT_EQ(parse_file_type("bf16"), FileType::MOSTLY_BF16);
  EXPECT_EQ(parse_file_type("F32"), FileType::ALL_F32);
  EXPECT_EQ(parse_file_type("iq4_xs"), FileType::MOSTLY_IQ4_XS);
  EXPECT_EQ(parse_file_type("TQ1_0"), FileType::MOSTLY_TQ1_0);
  EXPECT_EQ(static_cast<uint32_t>(parse_file_type("Q8_0")), 7u);  // LLAMA_FTYPE_MOSTLY_Q8_0
  EXPECT_EQ(static_cast<uint32_t>(parse_file_type("Q6_K")), 18u);
  EXPECT_EQ(static_cast<uint32_t>(parse_file_type("TQ2_0")), 37u);
  EXPECT_EQ(static_cast<uint32_t>(parse_file_type("mxfp4_moe")), 38u);  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
  EXPECT_EQ(file_type_name(FileType::MOSTLY_MXFP4_MOE), "MXFP4_MOE");
  EXPECT_EQ(default_tensor_type(FileType::MOSTLY_MXFP4_MOE), GgmlType::MXFP4);
  EXPECT_EQ(file_type_name(FileType::MOSTLY_Q3_K_L), "Q3_K_L");
  EXPECT_EQ(default_tensor_type(FileType::MOSTLY_Q3_K_S), GgmlType::Q3_K);
  EXPECT_EQ(default_tensor_type(FileType::MOSTLY_Q5_K_M), GgmlType::Q5_K);
  // The IQ file types (llama.h's ids) and their default tensor types
  // (llama_ftype_get_default_type: IQ2_S means IQ2_XS tensors, IQ2_M IQ2_S).
  EXPECT_EQ(static_cast<uint32_t>(parse_file_type("iq2_xxs")), 19u);
  EXPECT_EQ(static_cast<uint32_t>(parse_file_type("IQ3_XS")), 22u);
  EXPECT_EQ(static_cast<uint32_t>(parse_file_type("IQ1_M")), 31u);
  EXPECT_EQ(default_tensor_type(FileType::MOSTLY_IQ2_S), GgmlType::IQ2_XS);
  EXPECT_EQ(default_tensor_type(FileType::MOSTLY_IQ2_M), GgmlType::IQ2_S);
  EXPECT_EQ(default_tensor_type(FileType::MOSTLY_IQ3_M), GgmlType::IQ3_S);
  EXPECT_EQ(default_tensor_type(FileType::MOSTLY_IQ1_S), GgmlType::IQ1_S);
  for (const char* bad : {"Q9_0", "IQ2_XXXS", "q4_k_mm", ""}) {
    try {
      parse_file_type(bad);
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      const std::string msg = e.what();
      // (appended, not "'" + ...: GCC 12's -Wrestrict misfires on that here)
      const std::string quoted = std::string(1, '\'').append(bad).append(1, '\'');
      EXPECT_NE(msg.find(quoted), std::string::npos) << msg;
      EXPECT_NE(msg.find("Q4_K_M"), std::string::npos) << msg;
      EXPECT_NE(msg.find("IQ4_NL"), std::string::npos) << msg;
    }
  }
}

struct PureCase {
  const char* type;    // synapse quantize TYPE
  const char* suffix;  // tiny-llama-<suffix>.gguf
};

// Every file of the tiny-llama set: llama-quantize --pure <TYPE>, and the
// realistic Q4_K_M mix.
TEST(QuantizeModel, TinyLlamaSetMatchesLlamaQuantize) {
  const gguf::File master = gguf::File::open(kModels + "tiny-llama-f32.gguf");
  const PureCase cases[] = {{"F16", "f16"},       {"BF16", "bf16"},     {"Q8_0", "q8_0"},     {"Q4_0", "q4_0"},
                            {"Q4_1", "q4_1"},     {"Q5_0", "q5_0"},     {"Q5_1", "q5_1"},     {"IQ4_NL", "iq4_nl"},
                            {"Q2_K", "q2_k"},     {"Q3_K_S", "q3_k"},   {"Q4_K_S", "q4_k"},   {"Q5_K_S", "q5_k"},
                            {"Q6_K", "q6_k"},     {"IQ4_XS", "iq4_xs"}, {"TQ1_0", "tq1_0"},   {"TQ2_0", "tq2_0"},
                            {"Q4_K_M", "q4_k_m"}};
  for (const PureCase& pc : cases) {
    QuantizeOptions opt;
    opt.ftype = parse_file_type(pc.type);
    opt.pure = std::string(pc.suffix) != "q4_k_m";
    opt.n_threads = 2;
    std::vector<uint8_t> image;
    const gguf::File mine = quantize_in_memory(master, opt, &image);
    const std::string ref_path = kModels + "tiny-llama-" + pc.suffix + ".gguf";
    const gguf::File ref = gguf::File::open(ref_path);
    const std::string label = std::string(pc.type) + (opt.pure ? " --pure" : "");
    expect_same_metadata(mine, ref, label);
    const Comparison c = compare_files(mine, ref, master, label);
    EXPECT_EQ(c.n_tensors, 21) << label;
    std::printf("[ quantize ] %-14s %2d/%2d tensors byte-identical, worst rms ratio %.6f\n", label.c_str(),
                c.n_identical, c.n_tensors, c.worst_ratio);
    // The whole file, layout and padding included.
    EXPECT_EQ(c.n_identical, c.n_tensors) << label;
    EXPECT_EQ(mine.data_offset(), ref.data_offset()) << label;
    EXPECT_TRUE(image == read_file(ref_path)) << label << ": the file differs from llama-quantize's";
  }
}

// The lattice types (llama-quantize v0.5.0 --pure --imatrix; PROVENANCE.md
// gives each line): tiny-llama-f32 with tiny-llama.imatrix.gguf (which has
// output.weight's entry, --process-output), token_embd Q2_K where
// llama-quantize needs an imatrix it has no entry for; and the IQ3_XS mix
// (output Q6_K weighted by the imatrix, token_embd IQ3_S without one,
// attn_q/attn_k and layer 0's ffn_gate/ffn_up IQ3_XXS, the rest IQ3_S). The whole file,
// quantize.imatrix.* keys included, byte-identical. llama-quantize records
// the imatrix path as given, so the test gives it as the reference run did,
// relative to the repository root.
struct LatticeCase {
  const char* ftype;   // the file type llama-quantize ran (IQ2_M: IQ2_S tensors)
  const char* suffix;  // tiny-llama-<suffix>.gguf
  bool embd_q2_K;      // --token-embedding-type q2_K
  bool pure = true;    // --pure
};

constexpr LatticeCase kLatticeCases[] = {
    {"IQ3_XXS", "iq3_xxs", false}, {"IQ3_S", "iq3_s", false}, {"IQ2_XXS", "iq2_xxs", true},
    {"IQ2_XS", "iq2_xs", true},    {"IQ2_M", "iq2_s", true},  {"IQ1_S", "iq1_s", true},
    {"IQ1_M", "iq1_m", false},     {"IQ3_XS", "iq3_xs-mix", false, false},
};

// Runs `f` with the working directory at the repository root.
template <class F>
void at_repository_root(F f) {
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir((std::string(SYNAPSE_TEST_DATA) + "/../..").c_str()), 0);
  f();
  ASSERT_EQ(::chdir(cwd), 0);
}

TEST(QuantizeModel, LatticeTypesWithImatrixMatchLlamaQuantize) {
  const gguf::File master = gguf::File::open(kModels + "tiny-llama-f32.gguf");
  at_repository_root([&] {
    for (const LatticeCase& lc : kLatticeCases) {
      QuantizeOptions opt;
      opt.ftype = parse_file_type(lc.ftype);
      opt.pure = lc.pure;
      opt.n_threads = 2;
      opt.imatrix_file = "tests/data/models/tiny-llama.imatrix.gguf";
      if (lc.embd_q2_K) opt.token_embedding_type = GgmlType::Q2_K;
      std::vector<uint8_t> image;
      const gguf::File mine = quantize_in_memory(master, opt, &image);
      const std::string ref_path = kModels + "tiny-llama-" + lc.suffix + ".gguf";
      const gguf::File ref = gguf::File::open(ref_path);
      const std::string label = std::string(lc.ftype) + (lc.pure ? " --pure" : "") + " --imatrix";
      expect_same_metadata(mine, ref, label);
      const Comparison c = compare_files(mine, ref, master, label);
      EXPECT_EQ(c.n_tensors, 21) << label;
      std::printf("[ quantize ] %-24s %2d/%2d tensors byte-identical, worst rms ratio %.6f\n", label.c_str(),
                  c.n_identical, c.n_tensors, c.worst_ratio);
      EXPECT_EQ(c.n_identical, c.n_tensors) << label;
      EXPECT_TRUE(image == read_file(ref_path)) << label << ": the file differs from llama-quantize's";
    }
  });
}

// The SHA-256 (coreutils' sha256sum) of each of `paths`, in order; "" for
// one it could not read.
std::vector<std::string> sha256_of(const std::vector<std::string>& paths) {
  std::string cmd = "sha256sum";
  for (const std::string& p : paths) cmd += " '" + p + "'";
  std::vector<std::string> out;
  FILE* f = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  if (f == nullptr) return std::vector<std::string>(paths.size());
  char line[8192];
  while (out.size() < paths.size() && std::fgets(line, sizeof(line), f) != nullptr)
    out.emplace_back(std::strlen(line) >= 64 ? std::string(line, 64) : "");
  ::pclose(f);
  out.resize(paths.size());
  return out;
}

void write_bytes(const std::string& path, const uint8_t* p, size_t n) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
}

// The weighted quantizers of Q3_K, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and IQ4_XS
// (ggml's quantize_row_<t>_impl), --pure, and the Q3_K_M and IQ4_XS mixes,
// with tiny-llama.imatrix.gguf: every tensor's bytes and the whole file
// against the SHA-256s of llama-quantize v0.5.0's files
// (quant/tiny-llama-imatrix.sha256, made by
// scripts/golden/make_imatrix_quant_sha.py from the repository root).
TEST(QuantizeModel, WeightedLegacyAndK3TypesMatchLlamaQuantize) {
  std::map<std::string, std::string> expected;  // case[/tensor] -> sha256
  {
    std::ifstream f(std::string(SYNAPSE_TEST_DATA) + "/quant/tiny-llama-imatrix.sha256");
    std::string line;
    while (std::getline(f, line))
      if (line.size() > 66) expected[line.substr(66)] = line.substr(0, 64);
  }
  ASSERT_EQ(expected.size(), 198u);
  const struct {
    const char* ftype;
    bool pure;
  } cases[] = {{"Q3_K_S", true}, {"Q4_0", true},   {"Q4_1", true},   {"Q5_0", true},  {"Q5_1", true},
               {"IQ4_NL", true}, {"IQ4_XS", true}, {"Q3_K_M", false}, {"IQ4_XS", false}};
  const gguf::File master = gguf::File::open(kModels + "tiny-llama-f32.gguf");
  at_repository_root([&] {
    for (const auto& c : cases) {
      const std::string name = std::string(c.ftype) + (c.pure ? "+pure" : "");
      QuantizeOptions opt;
      opt.ftype = parse_file_type(c.ftype);
      opt.pure = c.pure;
      opt.n_threads = 2;
      opt.imatrix_file = "tests/data/models/tiny-llama.imatrix.gguf";
      std::vector<uint8_t> image;
      const gguf::File mine = quantize_in_memory(master, opt, &image);
      const std::string dir = ::testing::TempDir() + "/";
      std::vector<std::string> keys{name}, paths{dir + "weighted.gguf"};
      write_bytes(paths[0], image.data(), image.size());
      for (const gguf::TensorInfo& t : mine.tensors()) {
        keys.push_back(name + "/" + t.name);
        paths.push_back(dir + "weighted." + std::to_string(paths.size()) + ".bin");
        write_bytes(paths.back(), t.data, t.n_bytes);
      }
      const std::vector<std::string> got = sha256_of(paths);
      int n_identical = 0;
      for (size_t i = 0; i < keys.size(); ++i) {
        const auto it = expected.find(keys[i]);
        const bool same = it != expected.end() && it->second == got[i];
        n_identical += same && i > 0;
        EXPECT_TRUE(same) << keys[i] << ": " << got[i] << " vs llama-quantize's "
                          << (it == expected.end() ? "(none)" : it->second);
        std::remove(paths[i].c_str());
      }
      EXPECT_EQ(mine.tensors().size(), 21u) << name;
      std::printf("[ quantize ] %-24s %2d/%2zu tensors byte-identical\n", (name + " --imatrix").c_str(), n_identical,
                  mine.tensors().size());
    }
  });
}

// Without an importance matrix llama-quantize refuses the types that need
// one before writing anything, naming the first tensor (token_embd and
// output are exempt: --pure IQ3_XXS fails on blk.0.attn_k, the first
// matrix in its order after them); with an imatrix whose entry does not fit
// a tensor, it fails naming that tensor.
TEST(QuantizeModel, LatticeTypesNeedAnImportanceMatrix) {
  const gguf::File master = gguf::File::open(kModels + "tiny-llama-f32.gguf");
  for (const char* ft : {"IQ2_XXS", "IQ2_XS", "IQ2_M", "IQ3_XXS", "IQ1_S", "IQ1_M"}) {
    QuantizeOptions opt;
    opt.ftype = parse_file_type(ft);
    opt.pure = true;
    try {
      quantize_model(master, opt);
      ADD_FAILURE() << ft << " quantized without an importance matrix";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << ft;
      EXPECT_NE(std::string(e.what()).find("this quantization requires an importance matrix"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("offending tensor blk.0.attn_k.weight"), std::string::npos) << e.what();
    }
  }
  // IQ3_S needs none (ggml's quantizer weights by x^2).
  QuantizeOptions opt;
  opt.ftype = FileType::MOSTLY_IQ3_S;
  opt.pure = true;
  EXPECT_EQ(quantize_in_memory(master, opt).find_tensor("blk.0.attn_k.weight")->type, GgmlType::IQ3_S);

  // An imatrix with one entry, `name` of `n` columns.
  const auto one_entry_imatrix = [](const std::string& name, int64_t n) {
    const std::string path = ::testing::TempDir() + "/" + name + ".imatrix.gguf";
    Imatrix m;
    m.datasets = {"x"};
    m.chunk_count = 1;
    m.chunk_size = 8;
    m.entries[name] = ImatrixEntry{std::vector<float>(static_cast<size_t>(n), 1.0f), {8}};
    write_imatrix(m, path);
    return path;
  };
  opt.ftype = FileType::MOSTLY_IQ3_XXS;
  const std::pair<std::string, std::string> cases[] = {
      {one_entry_imatrix("blk.0.attn_k.weight", 128),
       "imatrix size 128 is different from tensor size 256 for blk.0.attn_k.weight"},
      {one_entry_imatrix("output.weight", 256),
       "Missing importance matrix for tensor blk.0.attn_k.weight in a very low-bit quantization"},
  };
  for (const auto& [path, message] : cases) {
    opt.imatrix_file = path;
    try {
      quantize_model(master, opt);
      ADD_FAILURE() << "quantized with a wrong imatrix: " << message;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
}

// write_imatrix gives llama-imatrix's file back byte for byte from what
// load_imatrix read of it (key order, name order, dimensions, alignment).
TEST(QuantizeModel, ImatrixWriterGivesLlamaImatrixsBytes) {
  const std::string ref = kModels + "tiny-llama.imatrix.gguf";
  const std::string out = ::testing::TempDir() + "/rewritten.imatrix.gguf";
  write_imatrix(load_imatrix(ref), out);
  EXPECT_TRUE(read_file(out) == read_file(ref));
}

// Importance matrices no llama-imatrix run writes: a negative mean of
// squares is refused at reading, naming the file and the entry; importances
// near FLT_MAX (finite, so llama-quantize takes them) leave the lattice
// search no grid point, and the error names the tensor, the row and the type.
TEST(QuantizeModel, HostileImatrixIsAnErrorNamingWhatIsWrong) {
  const gguf::File master = gguf::File::open(kModels + "tiny-llama-f32.gguf");
  const std::string entry = "blk.0.attn_q.weight";
  const auto quantize_with = [&](float value) {
    Imatrix m = load_imatrix(kModels + "tiny-llama.imatrix.gguf");
    ASSERT_TRUE(m.entries.count(entry));
    for (float& f : m.entries[entry].sums) f = value;
    for (int64_t& c : m.entries[entry].counts) c = 1;  // importance = the sum
    const std::string path = ::testing::TempDir() + "/hostile.imatrix.gguf";
    write_imatrix(m, path);
    QuantizeOptions opt;
    opt.ftype = FileType::MOSTLY_IQ2_XXS;
    opt.pure = true;
    opt.token_embedding_type = GgmlType::Q2_K;
    opt.imatrix_file = path;
    try {
      quantize_in_memory(master, opt);
      ADD_FAILURE() << "an imatrix of " << value << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::format) << e.what();
      const std::string what = e.what();
      if (value < 0) {
        EXPECT_NE(what.find("negative value"), std::string::npos) << what;
        EXPECT_NE(what.find(path), std::string::npos) << what;
      } else {
        EXPECT_EQ(what.rfind("tensor " + entry + ", row ", 0), 0u) << what;
        EXPECT_NE(what.find(", to IQ2_XXS: lattice quantizer"), std::string::npos) << what;
      }
      EXPECT_NE(what.find(entry), std::string::npos) << what;
    }
  };
  quantize_with(-1.0f);
  quantize_with(FLT_MAX);
}

// llama-imatrix's legacy .dat format: the same importances (written here
// from the GGUF file's sums / counts with ncall 1) give the same tensors.
TEST(QuantizeModel, LegacyImatrixFileGivesTheSameTensors) {
  const Imatrix m = load_imatrix(kModels + "tiny-llama.imatrix.gguf");
  EXPECT_FALSE(m.is_legacy);
  EXPECT_TRUE(m.has_metadata);
  EXPECT_EQ(m.chunk_count, 16);
  EXPECT_EQ(m.chunk_size, 128);
  EXPECT_EQ(m.entries.size(), 15u);  // 7 matrices x 2 layers + output.weight
  std::vector<uint8_t> dat;
  const auto put = [&](const void* p, size_t n) { dat.insert(dat.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n); };
  const auto put_i32 = [&](int32_t v) { put(&v, 4); };
  put_i32(static_cast<int32_t>(m.entries.size()));
  for (const auto& [name, e] : m.entries) {
    put_i32(static_cast<int32_t>(name.size()));
    put(name.data(), name.size());
    put_i32(1);  // ncall
    const std::vector<float> v = imatrix_importance(e, false);
    put_i32(static_cast<int32_t>(v.size()));
    put(v.data(), v.size() * 4);
  }
  put_i32(16);  // the chunk count, then the dataset's name
  put_i32(4);
  put("wiki", 4);
  const std::string path = ::testing::TempDir() + "/tiny-llama.imatrix.dat";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(dat.data()), static_cast<std::streamsize>(dat.size()));
  const Imatrix legacy = load_imatrix(path);
  EXPECT_TRUE(legacy.is_legacy);
  EXPECT_EQ(legacy.chunk_count, 16);
  ASSERT_EQ(legacy.datasets.size(), 1u);
  EXPECT_EQ(legacy.datasets[0], "wiki");

  const gguf::File master = gguf::File::open(kModels + "tiny-llama-f32.gguf");
  QuantizeOptions opt;
  opt.ftype = FileType::MOSTLY_IQ2_XXS;
  opt.pure = true;
  opt.token_embedding_type = GgmlType::Q2_K;
  opt.imatrix_file = path;
  const gguf::File mine = quantize_in_memory(master, opt);
  const gguf::File ref = gguf::File::open(kModels + "tiny-llama-iq2_xxs.gguf");
  for (const gguf::TensorInfo& t : ref.tensors()) {
    const gguf::TensorInfo* a = mine.find_tensor(t.name);
    ASSERT_NE(a, nullptr) << t.name;
    ASSERT_EQ(a->n_bytes, t.n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(a->data, t.data, t.n_bytes), 0) << t.name;
  }
  EXPECT_EQ(mine.get_string("quantize.imatrix.dataset").value_or(""), "wiki");
  EXPECT_EQ(mine.get_u32("quantize.imatrix.entries_count").value_or(0), 15u);
  EXPECT_EQ(mine.get_u32("quantize.imatrix.chunks_count").value_or(0), 16u);

  // A truncated legacy file is an error naming it.
  dat.resize(20);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(dat.data()), static_cast<std::streamsize>(dat.size()));
  try {
    load_imatrix(path);
    ADD_FAILURE() << "a truncated legacy imatrix accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::format);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// The Q4_K_M mixes of the other architectures: tied embeddings (token_embd
// takes the output's Q6_K), rope_freqs and biases kept F32, Phi-3's fused
// attn_qkv (an attn_v in v0.5.0: its one layer's use_more_bits Q6_K; the
// reference is v0.5.0's, tiny-phi3-q4_k_m-v050.gguf, where c392e509's
// tiny-phi3-q4_k_m.gguf has Q5_K), Mixtral's merged experts (ffn_down_exps:
// Q6_K falls back to Q8_0 on 128 columns) and router (kept F32).
TEST(QuantizeModel, Q4_K_MMixesMatchLlamaQuantize) {
  for (const std::string m : {"tiny-llama3", "tiny-qwen2", "tiny-phi3", "tiny-mixtral"}) {
    const gguf::File master = gguf::File::open(kModels + m + "-f32.gguf");
    QuantizeOptions opt;
    opt.ftype = FileType::MOSTLY_Q4_K_M;
    const gguf::File mine = quantize_in_memory(master, opt);
    const gguf::File ref = gguf::File::open(kModels + m + (m == "tiny-phi3" ? "-q4_k_m-v050.gguf" : "-q4_k_m.gguf"));
    if (m == "tiny-phi3") {
      EXPECT_EQ(mine.find_tensor("blk.0.attn_qkv.weight")->type, GgmlType::Q6_K);
    }
    expect_same_metadata(mine, ref, m);
    const Comparison c = compare_files(mine, ref, master, m);
    EXPECT_EQ(static_cast<size_t>(c.n_tensors), ref.tensors().size()) << m;
    EXPECT_EQ(c.n_identical, c.n_tensors) << m;
    EXPECT_EQ(mine.file_size(), ref.file_size()) << m;
    std::printf("[ quantize ] %-14s Q4_K_M %2d/%2d tensors byte-identical, worst rms ratio %.6f\n", m.c_str(),
                c.n_identical, c.n_tensors, c.worst_ratio);
  }
}

// MXFP4_MOE (llama-quantize v0.5.0): Mixtral's merged experts MXFP4, the
// other matrices (token_embd and output included) Q8_0, router and norms
// F32; the whole file byte-identical to llama-quantize's.
TEST(QuantizeModel, MXFP4_MOEMatchesLlamaQuantize) {
  const gguf::File master = gguf::File::open(kModels + "tiny-mixtral-f32.gguf");
  QuantizeOptions opt;
  opt.ftype = FileType::MOSTLY_MXFP4_MOE;
  opt.n_threads = 2;
  std::vector<uint8_t> image;
  const gguf::File mine = quantize_in_memory(master, opt, &image);
  const std::string ref_path = kModels + "tiny-mixtral-mxfp4_moe.gguf";
  const gguf::File ref = gguf::File::open(ref_path);
  expect_same_metadata(mine, ref, "MXFP4_MOE");
  const Comparison c = compare_files(mine, ref, master, "MXFP4_MOE");
  EXPECT_EQ(static_cast<size_t>(c.n_tensors), ref.tensors().size());
  EXPECT_EQ(c.n_identical, c.n_tensors);
  EXPECT_EQ(mine.find_tensor("blk.0.ffn_down_exps.weight")->type, GgmlType::MXFP4);
  EXPECT_EQ(mine.find_tensor("blk.0.attn_v.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ(mine.find_tensor("output.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ(mine.find_tensor("blk.0.ffn_gate_inp.weight")->type, GgmlType::F32);
  EXPECT_EQ(mine.get_u32("general.file_type").value_or(0), 38u);
  std::printf("[ quantize ] MXFP4_MOE      %2d/%2d tensors byte-identical, worst rms ratio %.6f\n", c.n_identical,
              c.n_tensors, c.worst_ratio);
  EXPECT_TRUE(image == read_file(ref_path)) << "the file differs from llama-quantize's";
}

// Q8_0 of the Qwen3.5 hybrids (llama-quantize v0.5.0): every matrix Q8_0 but
// ssm_conv1d (never quantized), the router and the 1-D tensors (ssm_a,
// ssm_dt.bias, ffn_gate_inp_shexp) F32; the whole files byte-identical to
// llama-quantize's.
TEST(QuantizeModel, Qwen35Q8_0MatchesLlamaQuantize) {
  for (const char* m : {"tiny-qwen35", "tiny-qwen35moe"}) {
    const gguf::File master = gguf::File::open(kModels + m + "-f32.gguf");
    QuantizeOptions opt;
    opt.ftype = FileType::MOSTLY_Q8_0;
    opt.n_threads = 2;
    std::vector<uint8_t> image;
    const gguf::File mine = quantize_in_memory(master, opt, &image);
    const std::string ref_path = kModels + m + "-q8_0.gguf";
    const gguf::File ref = gguf::File::open(ref_path);
    expect_same_metadata(mine, ref, m);
    const Comparison c = compare_files(mine, ref, master, m);
    EXPECT_EQ(static_cast<size_t>(c.n_tensors), ref.tensors().size()) << m;
    EXPECT_EQ(c.n_identical, c.n_tensors) << m;
    EXPECT_EQ(mine.find_tensor("blk.0.ssm_conv1d.weight")->type, GgmlType::F32) << m;
    EXPECT_EQ(mine.find_tensor("blk.0.ssm_beta.weight")->type, GgmlType::Q8_0) << m;
    EXPECT_TRUE(image == read_file(ref_path)) << m << ": the file differs from llama-quantize's";
  }
}

// stories260K (64 columns, ffn_down 172): the reference files were made with
// the Q6_K and TQ2_0 mixes (general.file_type then overwritten). Q6_K falls
// back to Q8_0, TQ2_0 to Q4_0, and 172 columns fit no block: F16. The output
// (64 columns, not a multiple of 256) is Q8_0 by the output rule.
TEST(QuantizeModel, StoriesFallbacksMatchLlamaQuantize) {
  const gguf::File master = gguf::File::open(kModels + "stories260K.gguf");
  {
    QuantizeOptions opt;
    opt.ftype = FileType::MOSTLY_Q6_K;
    const gguf::File mine = quantize_in_memory(master, opt);
    const gguf::File ref = gguf::File::open(kModels + "stories260K-q8_0.gguf");
    expect_same_metadata(mine, ref, "stories Q6_K", /*compare_file_type=*/false);
    EXPECT_EQ(mine.get_u32("general.file_type"), 18u);
    const Comparison c = compare_files(mine, ref, master, "stories Q6_K");
    EXPECT_EQ(static_cast<size_t>(c.n_tensors), ref.tensors().size());
    EXPECT_EQ(c.n_identical, c.n_tensors);
    const auto plan = plan_quantization(master, opt);
    int n_fallback = 0;
    for (const TensorPlan& p : plan) n_fallback += p.fallback;
    EXPECT_EQ(n_fallback, 5 * 7 + 1) << "7 weights per layer and token_embd fall back (ffn_down to F16); the "
                                         "output takes Q8_0 by its own rule";
  }
  {
    // llama-quantize ran with --token-embedding-type q4_0, which synapse does
    // not have: its token_embd is TQ2_0's token_embd rule, Q4_K -> Q5_0.
    QuantizeOptions opt;
    opt.ftype = FileType::MOSTLY_TQ2_0;
    const gguf::File mine = quantize_in_memory(master, opt);
    const gguf::File ref = gguf::File::open(kModels + "stories260K-q4_0.gguf");
    const Comparison c = compare_files(mine, ref, master, "stories TQ2_0", "token_embd.weight");
    EXPECT_EQ(static_cast<size_t>(c.n_tensors), ref.tensors().size() - 1);
    EXPECT_EQ(c.n_identical, c.n_tensors);
    EXPECT_EQ(mine.find_tensor("token_embd.weight")->type, GgmlType::Q5_0);
    EXPECT_EQ(mine.find_tensor("blk.0.ffn_down.weight")->type, GgmlType::F16);
  }
}

// ---------------------------------------------------------------------------
// Synthetic models for the rules the reference files do not reach.

struct SynthTensor {
  std::string name;
  std::vector<int64_t> ne;
};

gguf::File synth_model(int n_layer, int n_head, int n_head_kv, int n_expert, const std::vector<SynthTensor>& extra,
                       int64_t n_embd = 256, int64_t n_ff = 512, float poison = 0) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", static_cast<uint32_t>(n_layer));
  w.set_u32("llama.attention.head_count", static_cast<uint32_t>(n_head));
  w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(n_head_kv));
  if (n_expert > 0) w.set_u32("llama.expert_count", static_cast<uint32_t>(n_expert));
  uint32_t seed = 1;
  auto add = [&](const std::string& name, std::vector<int64_t> ne) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) {
      seed = seed * 1664525u + 1013904223u;
      x = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
    }
    if (poison != 0 && name == "blk.0.attn_q.weight") v[7] = poison;
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    w.add_tensor(name, GgmlType::F32, ne, bytes);
  };
  add("token_embd.weight", {n_embd, 64});
  for (int l = 0; l < n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", {n_embd});
    add(b + "attn_q.weight", {n_embd, n_embd});
    add(b + "attn_v.weight", {n_embd, n_embd * n_head_kv / n_head});
    add(b + "ffn_down.weight", {n_ff, n_embd});
  }
  for (const SynthTensor& t : extra) add(t.name, t.ne);
  return gguf::File::from_bytes(w.bytes(), "synth");
}

GgmlType planned(const std::vector<TensorPlan>& plan, const std::string& name) {
  for (const TensorPlan& p : plan)
    if (p.name == name) return p.to;
  ADD_FAILURE() << name << " not in the plan";
  return GgmlType::F32;
}

// use_more_bits over 16 layers: layers 0, 1 (first eighth), 4, 7, 10, 13 and
// 14, 15 (last eighth) get Q6_K for attn_v and ffn_down under Q4_K_M; the
// tensor order is by layer number (blk.10 after blk.9), as llama.cpp sorts.
TEST(QuantizeModel, Q4_K_MUsesMoreBitsOnTheRightLayers) {
  const gguf::File f = synth_model(16, 4, 4, 0, {{"output.weight", {256, 64}}});
  QuantizeOptions opt;
  opt.ftype = FileType::MOSTLY_Q4_K_M;
  const auto plan = plan_quantization(f, opt);
  EXPECT_EQ(plan[0].name, "output.weight");
  EXPECT_EQ(plan[1].name, "token_embd.weight");
  EXPECT_EQ(plan[2].name, "blk.0.attn_norm.weight");
  EXPECT_EQ(plan.back().name, "blk.15.ffn_down.weight");
  const std::vector<int> more = {0, 1, 4, 7, 10, 13, 14, 15};
  for (int l = 0; l < 16; ++l) {
    const bool m = std::find(more.begin(), more.end(), l) != more.end();
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(planned(plan, b + "attn_v.weight"), m ? GgmlType::Q6_K : GgmlType::Q4_K) << l;
    EXPECT_EQ(planned(plan, b + "ffn_down.weight"), m ? GgmlType::Q6_K : GgmlType::Q4_K) << l;
    EXPECT_EQ(planned(plan, b + "attn_q.weight"), GgmlType::Q4_K) << l;
    EXPECT_EQ(planned(plan, b + "attn_norm.weight"), GgmlType::F32) << l;
  }
  EXPECT_EQ(planned(plan, "output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(planned(plan, "token_embd.weight"), GgmlType::Q4_K);
}

TEST(QuantizeModel, OtherMixes) {
  const gguf::File f = synth_model(16, 8, 2, 0, {});  // n_gqa 4, tied embeddings
  auto plan_for = [&](FileType ft) {
    QuantizeOptions opt;
    opt.ftype = ft;
    return plan_quantization(f, opt);
  };
  // Q3_K_M: attn_v Q5_K for the first two, then Q4_K; ffn_down Q5_K in the
  // first sixteenth, else Q4_K; tied token_embd as the output: Q6_K.
  auto p = plan_for(FileType::MOSTLY_Q3_K_M);
  EXPECT_EQ(planned(p, "blk.0.attn_v.weight"), GgmlType::Q5_K);
  EXPECT_EQ(planned(p, "blk.1.attn_v.weight"), GgmlType::Q5_K);
  EXPECT_EQ(planned(p, "blk.2.attn_v.weight"), GgmlType::Q4_K);
  EXPECT_EQ(planned(p, "blk.0.ffn_down.weight"), GgmlType::Q5_K);
  EXPECT_EQ(planned(p, "blk.1.ffn_down.weight"), GgmlType::Q4_K);
  EXPECT_EQ(planned(p, "blk.0.attn_q.weight"), GgmlType::Q3_K);
  EXPECT_EQ(planned(p, "token_embd.weight"), GgmlType::Q6_K);
  // Q2_K: attn_v Q4_K when n_gqa >= 4, ffn_down Q3_K.
  p = plan_for(FileType::MOSTLY_Q2_K);
  EXPECT_EQ(planned(p, "blk.3.attn_v.weight"), GgmlType::Q4_K);
  EXPECT_EQ(planned(p, "blk.3.ffn_down.weight"), GgmlType::Q3_K);
  EXPECT_EQ(planned(p, "blk.3.attn_q.weight"), GgmlType::Q2_K);
  // Q3_K_L: attn_v and ffn_down Q5_K. Q4_K_S: attn_v Q5_K for the first 4,
  // ffn_down Q5_K for the first eighth.
  p = plan_for(FileType::MOSTLY_Q3_K_L);
  EXPECT_EQ(planned(p, "blk.9.attn_v.weight"), GgmlType::Q5_K);
  EXPECT_EQ(planned(p, "blk.9.ffn_down.weight"), GgmlType::Q5_K);
  p = plan_for(FileType::MOSTLY_Q4_K_S);
  EXPECT_EQ(planned(p, "blk.3.attn_v.weight"), GgmlType::Q5_K);
  EXPECT_EQ(planned(p, "blk.4.attn_v.weight"), GgmlType::Q4_K);
  EXPECT_EQ(planned(p, "blk.1.ffn_down.weight"), GgmlType::Q5_K);
  EXPECT_EQ(planned(p, "blk.2.ffn_down.weight"), GgmlType::Q4_K);
  // IQ4_NL with n_gqa >= 4: attn_v Q5_K; ffn_down Q5_K in the first eighth.
  p = plan_for(FileType::MOSTLY_IQ4_NL);
  EXPECT_EQ(planned(p, "blk.5.attn_v.weight"), GgmlType::Q5_K);
  EXPECT_EQ(planned(p, "blk.0.ffn_down.weight"), GgmlType::Q5_K);
  EXPECT_EQ(planned(p, "blk.5.ffn_down.weight"), GgmlType::IQ4_NL);
  // Q4_0: the (tied) output rule gives Q6_K; --pure keeps Q4_0 everywhere.
  p = plan_for(FileType::MOSTLY_Q4_0);
  EXPECT_EQ(planned(p, "token_embd.weight"), GgmlType::Q6_K);
  EXPECT_EQ(planned(p, "blk.0.attn_v.weight"), GgmlType::Q4_0);
  QuantizeOptions pure;
  pure.ftype = FileType::MOSTLY_Q4_0;
  pure.pure = true;
  EXPECT_EQ(planned(plan_quantization(f, pure), "token_embd.weight"), GgmlType::Q4_0);
  // F16: every weight F16, nothing mixed.
  p = plan_for(FileType::MOSTLY_F16);
  EXPECT_EQ(planned(p, "token_embd.weight"), GgmlType::F16);
  EXPECT_EQ(planned(p, "blk.0.attn_v.weight"), GgmlType::F16);
  EXPECT_EQ(planned(p, "blk.0.attn_norm.weight"), GgmlType::F32);
}

// Eight experts: attn_v and attn_k Q8_0; merged expert tensors (3-D) are
// quantized expert by expert, the router is kept F32; the expert layer
// comes from the name.
TEST(QuantizeModel, ExpertsAndRouters) {
  const gguf::File f = synth_model(2, 4, 4, 8,
                                   {{"blk.0.ffn_gate_inp.weight", {256, 8}},
                                    {"blk.0.attn_k.weight", {256, 256}},
                                    {"blk.1.ffn_down_exps.weight", {512, 256, 8}},
                                    {"blk.0.ffn_up_exps.weight", {256, 512, 8}},
                                    {"rope_freqs.weight", {32}}},
                                   256, 512);
  QuantizeOptions opt;
  opt.ftype = FileType::MOSTLY_Q4_K_M;
  const gguf::File out = quantize_in_memory(f, opt);
  EXPECT_EQ(out.find_tensor("blk.0.attn_v.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ(out.find_tensor("blk.0.attn_k.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ(out.find_tensor("blk.0.ffn_gate_inp.weight")->type, GgmlType::F32);
  EXPECT_EQ(out.find_tensor("rope_freqs.weight")->type, GgmlType::F32);
  const gguf::TensorInfo* down = out.find_tensor("blk.1.ffn_down_exps.weight");
  EXPECT_EQ(down->type, GgmlType::Q6_K);  // layer 1 of 2: use_more_bits (the last eighth)
  EXPECT_EQ(down->n_dims, 3u);
  EXPECT_EQ(down->n_bytes, row_size(GgmlType::Q6_K, 512) * 256 * 8);
  EXPECT_EQ(out.find_tensor("blk.0.ffn_up_exps.weight")->type, GgmlType::Q4_K);
  EXPECT_EQ(out.find_tensor("blk.0.ffn_down.weight")->type, GgmlType::Q4_K);  // layer 0 of 2: no more bits
  // Expert 5's first row dequantizes close to the master's.
  const gguf::TensorInfo* src = f.find_tensor("blk.1.ffn_down_exps.weight");
  std::vector<float> row(512);
  quant::dequantize_row(GgmlType::Q6_K, down->data + row_size(GgmlType::Q6_K, 512) * 256 * 5, row.data(), 512);
  const auto* x = reinterpret_cast<const float*>(src->data) + 512 * 256 * 5;
  for (int j = 0; j < 512; ++j) EXPECT_NEAR(row[j], x[j], 0.02) << j;
}

// The MXFP4_MOE rules on a synthetic model: a tensor is an expert when its
// third dimension is above 1 (a merged expert tensor of one expert stays
// Q8_0, as llama.cpp's ne[2] > 1 has it); the tied token_embd takes the
// output's Q8_0; a row length no block fits falls back to F16; --pure
// makes every matrix MXFP4.
TEST(QuantizeModel, MXFP4_MOERules) {
  const gguf::File f = synth_model(2, 4, 4, 4,
                                   {{"blk.0.ffn_gate_inp.weight", {256, 4}},
                                    {"blk.0.ffn_up_exps.weight", {256, 512, 4}},
                                    {"blk.1.ffn_down_exps.weight", {512, 256, 4}},
                                    {"blk.1.ffn_gate_exps.weight", {256, 512, 1}},
                                    {"blk.1.ffn_up_exps.weight", {48, 64, 4}},
                                    {"blk.0.ffn_up_shexp.weight", {256, 512}}},
                                   256, 512);
  QuantizeOptions opt;
  opt.ftype = FileType::MOSTLY_MXFP4_MOE;
  const std::vector<TensorPlan> p = plan_quantization(f, opt);
  EXPECT_EQ(planned(p, "blk.0.ffn_up_exps.weight"), GgmlType::MXFP4);
  EXPECT_EQ(planned(p, "blk.1.ffn_down_exps.weight"), GgmlType::MXFP4);
  EXPECT_EQ(planned(p, "blk.1.ffn_gate_exps.weight"), GgmlType::Q8_0);
  EXPECT_EQ(planned(p, "blk.1.ffn_up_exps.weight"), GgmlType::F16);  // 48 columns
  EXPECT_EQ(planned(p, "blk.0.ffn_up_shexp.weight"), GgmlType::Q8_0);
  EXPECT_EQ(planned(p, "blk.0.ffn_gate_inp.weight"), GgmlType::F32);
  EXPECT_EQ(planned(p, "token_embd.weight"), GgmlType::Q8_0);  // tied: the output rule
  EXPECT_EQ(planned(p, "blk.0.attn_v.weight"), GgmlType::Q8_0);
  EXPECT_EQ(planned(p, "blk.1.ffn_down.weight"), GgmlType::Q8_0);
  EXPECT_EQ(planned(p, "blk.0.attn_norm.weight"), GgmlType::F32);
  opt.pure = true;
  const std::vector<TensorPlan> pure = plan_quantization(f, opt);
  EXPECT_EQ(planned(pure, "token_embd.weight"), GgmlType::MXFP4);
  EXPECT_EQ(planned(pure, "blk.0.attn_v.weight"), GgmlType::MXFP4);
  EXPECT_EQ(planned(pure, "blk.1.ffn_gate_exps.weight"), GgmlType::MXFP4);
  EXPECT_EQ(planned(pure, "blk.0.ffn_gate_inp.weight"), GgmlType::F32);
  // The experts quantize expert by expert: expert 3's first row is that
  // row of the master, quantized.
  QuantizeOptions mxfp4;
  mxfp4.ftype = FileType::MOSTLY_MXFP4_MOE;
  const gguf::File out = quantize_in_memory(f, mxfp4);
  const gguf::TensorInfo* up = out.find_tensor("blk.0.ffn_up_exps.weight");
  ASSERT_EQ(up->type, GgmlType::MXFP4);
  EXPECT_EQ(up->n_dims, 3u);
  const size_t rs = row_size(GgmlType::MXFP4, 256);
  EXPECT_EQ(up->n_bytes, rs * 512 * 4);
  std::vector<uint8_t> row(rs);
  quant::quantize_row(GgmlType::MXFP4,
                      reinterpret_cast<const float*>(f.find_tensor("blk.0.ffn_up_exps.weight")->data) + 256 * 512 * 3,
                      row.data(), 256);
  EXPECT_EQ(std::memcmp(row.data(), up->data + rs * 512 * 3, rs), 0);
}

// A row length that fits no block: K-types take llama.cpp's fallback table,
// the 32-block types (llama-quantize: "Unsupported tensor size") go to F16.
TEST(QuantizeModel, RowLengthFallbacks) {
  const gguf::File f = synth_model(1, 4, 4, 0, {{"blk.0.ffn_up.weight", {96, 64}}, {"blk.0.ffn_gate.weight", {48, 64}}},
                                   256, 96);
  auto to = [&](FileType ft, bool pure, const char* name) {
    QuantizeOptions opt;
    opt.ftype = ft;
    opt.pure = pure;
    return planned(plan_quantization(f, opt), name);
  };
  EXPECT_EQ(to(FileType::MOSTLY_Q4_K_S, true, "blk.0.ffn_up.weight"), GgmlType::Q5_0);
  EXPECT_EQ(to(FileType::MOSTLY_Q5_K_S, true, "blk.0.ffn_up.weight"), GgmlType::Q5_1);
  EXPECT_EQ(to(FileType::MOSTLY_Q6_K, true, "blk.0.ffn_up.weight"), GgmlType::Q8_0);
  EXPECT_EQ(to(FileType::MOSTLY_Q2_K, true, "blk.0.ffn_up.weight"), GgmlType::IQ4_NL);
  EXPECT_EQ(to(FileType::MOSTLY_Q3_K_S, true, "blk.0.ffn_up.weight"), GgmlType::IQ4_NL);
  EXPECT_EQ(to(FileType::MOSTLY_IQ4_XS, true, "blk.0.ffn_up.weight"), GgmlType::IQ4_NL);
  EXPECT_EQ(to(FileType::MOSTLY_TQ1_0, true, "blk.0.ffn_up.weight"), GgmlType::Q4_0);
  EXPECT_EQ(to(FileType::MOSTLY_Q4_K_S, true, "blk.0.ffn_gate.weight"), GgmlType::F16);
  EXPECT_EQ(to(FileType::MOSTLY_Q8_0, false, "blk.0.ffn_gate.weight"), GgmlType::F16);
  EXPECT_EQ(to(FileType::MOSTLY_Q8_0, false, "blk.0.ffn_up.weight"), GgmlType::Q8_0);
  // The mix first, then the fallback: Q4_K_M's ffn_down (96 columns) Q6_K -> Q8_0.
  EXPECT_EQ(to(FileType::MOSTLY_Q4_K_M, false, "blk.0.ffn_down.weight"), GgmlType::Q8_0);
  EXPECT_EQ(to(FileType::MOSTLY_F16, false, "blk.0.ffn_gate.weight"), GgmlType::F16);
}

TEST(QuantizeModel, BadInputIsAnError) {
  QuantizeOptions opt;
  opt.ftype = FileType::MOSTLY_Q8_0;
  // A NaN in a weight: the message names the tensor.
  const gguf::File nan_model = synth_model(1, 4, 4, 0, {}, 256, 512, NAN);
  try {
    quantize_model(nan_model, opt);
    ADD_FAILURE() << "NaN accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::format);
    EXPECT_NE(std::string(e.what()).find("blk.0.attn_q.weight"), std::string::npos) << e.what();
  }
  // A quantized input needs allow_requantize; with it, Q8_0 -> Q4_0 works.
  const gguf::File q8 = quantize_in_memory(synth_model(1, 4, 4, 0, {}), opt);
  opt.ftype = FileType::MOSTLY_Q4_0;
  opt.pure = true;
  EXPECT_THROW(quantize_model(q8, opt), Error);
  opt.allow_requantize = true;
  const gguf::File q4 = quantize_in_memory(q8, opt);
  EXPECT_EQ(q4.find_tensor("blk.0.attn_q.weight")->type, GgmlType::Q4_0);
  // Same type in and out: copied, not requantized (no flag needed).
  opt.ftype = FileType::MOSTLY_Q8_0;
  opt.allow_requantize = false;
  const gguf::File again = quantize_in_memory(q8, opt);
  const gguf::TensorInfo* a = again.find_tensor("blk.0.attn_q.weight");
  const gguf::TensorInfo* b = q8.find_tensor("blk.0.attn_q.weight");
  ASSERT_EQ(a->n_bytes, b->n_bytes);
  EXPECT_EQ(std::memcmp(a->data, b->data, a->n_bytes), 0);
  // No architecture: the rules cannot be applied.
  gguf::Writer w;
  w.set_u32("llama.block_count", 1);
  const gguf::File no_arch = gguf::File::from_bytes(w.bytes(), "no-arch");
  EXPECT_THROW(plan_quantization(no_arch, opt), Error);
}

// The types of model's synthetic models (model/synth.hpp, synth_plan) agree
// with this reproduction of llama-quantize (byte-identical with
// llama-quantize's files) on an F32 synthetic model: 16 layers so every
// use_more_bits case occurs, rows of 96 (no K-quant block fits: fallbacks)
// and of 256.
TEST(QuantizeModel, SynthTypesAgreeWithThePlan) {
  for (const int64_t n_embd : {96, 256}) {
    model::SynthPreset p = model::synth_preset("llama-3.2-1b");
    p.name = "tiny";
    p.n_layer = 16, p.n_embd = n_embd, p.n_head = n_embd / 32, p.n_head_kv = 1, p.n_ff = 256, p.n_vocab = 512;
    for (const bool tied : {true, false}) {
      p.tied = tied;
      const std::string path =
          ::testing::TempDir() + "synapse_quantize_synth_" + std::to_string(::getpid()) + "_f32.gguf";
      base::ThreadPool pool(2);
      model::synth_write(p, "F32", 3, path, pool);
      const gguf::File f = gguf::File::open(path);
      for (const char* type : {"Q4_K_M", "Q5_K_M", "Q4_0", "Q8_0", "Q6_K", "F16", "MXFP4_MOE"}) {
        QuantizeOptions opt;
        opt.ftype = parse_file_type(type);
        std::map<std::string, GgmlType> theirs;
        for (const TensorPlan& t : plan_quantization(f, opt)) theirs[t.name] = t.to;
        const auto mine = model::synth_plan(p, type);
        ASSERT_EQ(mine.size(), theirs.size());
        for (const model::SynthTensor& s : mine)
          EXPECT_EQ(type_name(s.type), type_name(theirs.at(s.name)))
              << type << " " << s.name << " n_embd " << n_embd << (tied ? " tied" : " untied");
      }
      std::remove(path.c_str());
    }
  }
}

// The width-shrunk 8-layer Qwen3.5 models of
// scripts/golden/qwen35_dry_run_input.cpp (the same shrink): n_embd 256,
// 4/1 attention heads of 64, DeltaNet 2 key heads and 4 value heads of 64,
// FFN 512 (dense) or 8 experts of 256 and a shared expert of 256.
model::SynthPreset qwen35_shape(const std::string& preset) {
  model::SynthPreset p = model::synth_preset(preset);
  p.n_layer = 8, p.n_vocab = 512, p.n_embd = 256, p.n_head = 4, p.n_head_kv = 1, p.head_dim = 64, p.n_rot = 16;
  p.rope_sections = {3, 3, 2, 0};
  p.ssm_state = 64, p.ssm_groups = 2, p.ssm_v_heads = 4;
  if (p.n_expert > 0) p.n_expert = 8, p.n_expert_used = 2, p.n_ff_exp = 256, p.n_ff_shexp = 256;
  else p.n_ff = 512;
  return p;
}

// Every tensor's type for every file type synapse writes, without and with
// an importance matrix, equals llama-quantize v0.5.0 --dry-run's on the
// Qwen3.5 hybrids (tests/data/quant/qwen35-dry-run.txt,
// scripts/golden/make_qwen35_dry_run.py): the DeltaNet layers' attn_qkv is
// an attn_v (category_is_attn_v), so under Q4_K_M the use_more_bits turns of
// the 8 attn_v-like matrices (0, 3, 6, 7: attn_qkv of layers 0 and 6, attn_v
// of layers 3 and 7) take Q6_K and the others Q4_K (no Q5_K); the MoE model's
// 8 experts give attn_qkv, attn_v and attn_k Q8_0.
TEST(QuantizeModel, Qwen35TypesMatchLlamaQuantizeDryRun) {
  std::ifstream in(std::string(SYNAPSE_TEST_DATA) + "/quant/qwen35-dry-run.txt");
  ASSERT_TRUE(in) << "tests/data/quant/qwen35-dry-run.txt";
  struct Tensor {
    std::string name;
    std::array<int64_t, 3> ne;
  };
  struct Case {
    std::string preset, ftype;
    bool imatrix;
    std::vector<std::string> types;
  };
  std::map<std::string, std::vector<Tensor>> tensors;
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "tensors") {
      std::string preset;
      size_t n = 0;
      ls >> preset >> n;
      auto& list = tensors[preset];
      for (size_t i = 0; i < n && std::getline(in, line); ++i) {
        std::istringstream ts(line);
        Tensor t;
        ts >> t.name >> t.ne[0] >> t.ne[1] >> t.ne[2];
        list.push_back(t);
      }
      ASSERT_EQ(list.size(), n) << preset;
    } else if (kind == "types") {
      Case c;
      std::string tag, t;
      ls >> c.preset >> tag >> c.ftype;
      c.imatrix = tag == "imatrix";
      while (ls >> t) c.types.push_back(t);
      cases.push_back(c);
    }
  }
  ASSERT_EQ(tensors.size(), 2u);
  ASSERT_EQ(cases.size(), 2u * 2u * 32u);
  const std::string imatrix = kModels + "tiny-llama.imatrix.gguf";
  int n_qkv_q6 = 0, n_qkv_q4 = 0;
  for (const auto& [preset, list] : tensors) {
    const std::string path =
        ::testing::TempDir() + "synapse_quantize_qwen35_" + std::to_string(::getpid()) + "_f32.gguf";
    base::ThreadPool pool(2);
    model::synth_write(qwen35_shape(preset), "F32", 3, path, pool);
    const gguf::File f = gguf::File::open(path);
    for (const Case& c : cases) {
      if (c.preset != preset) continue;
      SCOPED_TRACE(preset + " " + c.ftype + (c.imatrix ? " with an imatrix" : ""));
      QuantizeOptions opt;
      opt.ftype = parse_file_type(c.ftype);
      if (c.imatrix) opt.imatrix_file = imatrix;
      const auto plan = plan_quantization(f, opt);
      ASSERT_EQ(plan.size(), list.size());
      ASSERT_EQ(c.types.size(), list.size());
      for (size_t k = 0; k < plan.size(); ++k) {
        ASSERT_EQ(plan[k].name, list[k].name) << k;
        for (int d = 0; d < 3; ++d) ASSERT_EQ(plan[k].ne[static_cast<size_t>(d)], list[k].ne[static_cast<size_t>(d)]) << list[k].name;
        std::string mine(type_name(plan[k].to));
        std::string theirs = c.types[k];
        std::transform(mine.begin(), mine.end(), mine.begin(), ::tolower);
        std::transform(theirs.begin(), theirs.end(), theirs.begin(), ::tolower);
        EXPECT_EQ(mine, theirs) << list[k].name;
        if (c.ftype == "Q4_K_M" && !c.imatrix && preset == "qwen3.5-4b" &&
            list[k].name.find("attn_qkv") != std::string::npos)
          ++(plan[k].to == GgmlType::Q6_K ? n_qkv_q6 : n_qkv_q4);
      }
    }
    std::remove(path.c_str());
  }
  EXPECT_EQ(n_qkv_q6, 2);  // layers 0 and 6
  EXPECT_EQ(n_qkv_q4, 4);  // layers 1, 2, 4, 5

  // synth's own plans (model::synth_plan) of the dense shape agree for every
  // type synth writes: the IQ types as llama-quantize makes them with an
  // importance matrix (what synth models), the others without. (The MoE
  // shape's 8 experts take llama-quantize's Mixtral rules, which synth, whose
  // presets never have exactly 8 experts, leaves out.)
  int n_synth_types = 0;
  for (const std::string& type : model::synth_type_names()) {
    const bool iq = type.rfind("IQ", 0) == 0;
    const Case* ref = nullptr;
    for (const Case& c : cases)
      if (c.preset == "qwen3.5-4b" && c.ftype == type && c.imatrix == iq) ref = &c;
    ASSERT_NE(ref, nullptr) << type;
    std::map<std::string, std::string> theirs;
    const auto& list = tensors.at("qwen3.5-4b");
    for (size_t k = 0; k < list.size(); ++k) theirs[list[k].name] = ref->types[k];
    const auto mine = model::synth_plan(qwen35_shape("qwen3.5-4b"), type);
    ASSERT_EQ(mine.size(), theirs.size()) << type;
    for (const model::SynthTensor& t : mine) {
      std::string a(type_name(t.type)), b = theirs.at(t.name);
      std::transform(a.begin(), a.end(), a.begin(), ::tolower);
      std::transform(b.begin(), b.end(), b.begin(), ::tolower);
      EXPECT_EQ(a, b) << "synth " << type << " " << t.name;
    }
    ++n_synth_types;
  }
  EXPECT_EQ(n_synth_types, 24);
}

}  // namespace
}  // namespace synapse::runtime

// `synapse imatrix` against llama-imatrix v0.5.0 on the same model, text and
// settings (tests/data/PROVENANCE.md gives each reference file's command):
// the same matrices, the same token counts exactly, the sums within a
// relative bound (the activations differ from ggml's in their last bits);
// and the matrix is as good as llama-imatrix's for quantize --imatrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "cli_util.hpp"
#include "golden_util.hpp"
#include "model/forward.hpp"
#include "runtime/imatrix.hpp"
#include "runtime/quantize_model.hpp"

namespace synapse {
namespace {

using test::data_path;
using test::synapse_cli;
using test::sha256_of;
using test::tmp_path;

const std::string kText = data_path("text/wikitext-2-test.first100k.raw");

// The largest relative difference of two sums, |a - b| / |b|, over every
// column of every matrix; fails the test on a name, shape, count or
// metadata that differs.
double compare_imatrix(const runtime::Imatrix& mine, const runtime::Imatrix& ref, const std::string& label) {
  EXPECT_EQ(mine.chunk_count, ref.chunk_count) << label;
  EXPECT_EQ(mine.chunk_size, ref.chunk_size) << label;
  EXPECT_EQ(mine.entries.size(), ref.entries.size()) << label;
  double worst = 0;
  for (const auto& [name, r] : ref.entries) {
    const auto it = mine.entries.find(name);
    if (it == mine.entries.end()) {
      ADD_FAILURE() << label << ": no entry " << name;
      continue;
    }
    const runtime::ImatrixEntry& m = it->second;
    EXPECT_EQ(m.counts, r.counts) << label << ": " << name;
    if (m.sums.size() != r.sums.size()) {
      ADD_FAILURE() << label << ": " << name << " has " << m.sums.size() << " sums, llama-imatrix's " << r.sums.size();
      continue;
    }
    for (size_t i = 0; i < r.sums.size(); ++i) {
      EXPECT_GT(r.sums[i], 0) << label << ": " << name << "[" << i << "]";
      worst = std::max(worst, std::abs(static_cast<double>(m.sums[i]) - r.sums[i]) / r.sums[i]);
    }
  }
  return worst;
}

// Runs `synapse imatrix MODEL ARGS -o OUT` from the repository root with the
// text's path relative to it, as the reference files were made (llama-imatrix
// records the path as given, in imatrix.datasets).
test::CliResult imatrix_at_root(const std::string& model, const std::string& args, const std::string& out) {
  return synapse_cli("imatrix -m " + data_path("models/" + model) +
                         " -f tests/data/text/wikitext-2-test.first100k.raw " + args + " -o " + out,
                     "cd " + data_path("../..") + " &&");
}

// tiny-llama: llama-imatrix -c 128 --chunks 16 -t 1 --process-output (16
// chunks as 16 sequences of one batch, 4 ubatches of 512 rows): every dense
// matrix and output.weight. With flash attention off (the attention synapse
// computes) llama-imatrix's file is synapse's byte for byte: the same
// activations, summed in the same order. llama-imatrix's default (flash
// attention on for the CPU) rounds the attention otherwise: the sums after
// the first attention then differ by up to 5.2e-4 of their value here.
//
// --save-frequency 8: copies OUT.at_8 (after the second of the 4 ubatches:
// half the rows) and OUT.at_16 (the final file).
TEST(ImatrixCli, TinyLlamaEqualsLlamaImatrix) {
  const std::string out = tmp_path("tiny-llama.imatrix.gguf");
  const test::CliResult r =
      imatrix_at_root("tiny-llama-f32.gguf", "-c 128 --chunks 16 -t 2 --process-output --save-frequency 8", out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[16]"), std::string::npos) << r.out;  // the running perplexity, as llama-imatrix prints it
  EXPECT_NE(r.out.find("Final estimate: PPL = "), std::string::npos) << r.out;
  EXPECT_TRUE(test::slurp(out) == test::slurp(data_path("models/tiny-llama.fa-off.imatrix.gguf")))
      << "differs from llama-imatrix -fa off's file";
  EXPECT_TRUE(test::slurp(out + ".at_16") == test::slurp(out)) << "the last copy is the final file";
  const runtime::Imatrix half = runtime::load_imatrix(out + ".at_8");
  EXPECT_EQ(half.chunk_count, 8);
  EXPECT_EQ(half.entries.size(), 15u);
  EXPECT_EQ(half.entries.at("blk.0.attn_q.weight").counts, std::vector<int64_t>{1024});
  EXPECT_TRUE(test::slurp(out + ".at_4").empty() && test::slurp(out + ".at_12").empty()) << "copies at 8 and 16 only";
  std::remove((out + ".at_8").c_str());
  std::remove((out + ".at_16").c_str());

  const runtime::Imatrix mine = runtime::load_imatrix(out);
  const runtime::Imatrix ref = runtime::load_imatrix(data_path("models/tiny-llama.imatrix.gguf"));  // -fa auto
  EXPECT_EQ(mine.datasets, ref.datasets);
  EXPECT_EQ(ref.entries.size(), 15u);  // 2 layers x 7 matrices + output.weight
  EXPECT_EQ(ref.entries.at("blk.0.attn_q.weight").counts, std::vector<int64_t>{2048});
  const double worst = compare_imatrix(mine, ref, "tiny-llama");
  std::printf("[ imatrix ] tiny-llama: byte-identical to llama-imatrix -fa off; against its default (flash attention): "
              "%zu matrices, counts equal, largest relative difference of a sum %.3g\n",
              mine.entries.size(), worst);
  EXPECT_LT(worst, 1e-3);
  std::remove(out.c_str());
}

// tiny-mixtral: llama-imatrix -c 64 --chunks 8 -t 1 --process-output -fa off
// on the MoE model (4 experts, 2 per token): the experts' sums and token
// counts per expert, the router as a plain matrix. Counts equal; the sums
// of the experts and what follows them differ in the last bits (synapse's
// expert products round as its dense ones, not as ggml_mul_mat_id, issue
// 41; and a 512-row ubatch runs as two passes, whose experts' rows are
// summed slot by slot per pass, not over the whole ubatch): 8.7e-7 here.
TEST(ImatrixCli, TinyMixtralMatchesLlamaImatrix) {
  const std::string out = tmp_path("tiny-mixtral.imatrix.gguf");
  const test::CliResult r =
      imatrix_at_root("tiny-mixtral-f32.gguf", "-c 64 --chunks 8 -t 2 --process-output --no-ppl", out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("Final estimate"), std::string::npos) << "--no-ppl: " << r.out;
  const runtime::Imatrix mine = runtime::load_imatrix(out);
  const runtime::Imatrix ref = runtime::load_imatrix(data_path("models/tiny-mixtral.imatrix.gguf"));
  EXPECT_EQ(mine.datasets, ref.datasets);
  const std::vector<int64_t>& experts = ref.entries.at("blk.0.ffn_down_exps.weight").counts;
  ASSERT_EQ(experts.size(), 4u);
  int64_t routed = 0;
  for (int64_t c : experts) routed += c;
  EXPECT_EQ(routed, 2 * 8 * 64);  // every token's two experts
  const double worst = compare_imatrix(mine, ref, "tiny-mixtral");
  std::printf("[ imatrix ] tiny-mixtral: %zu matrices, counts equal (experts %lld %lld %lld %lld), "
              "largest relative difference of a sum %.3g\n",
              mine.entries.size(), static_cast<long long>(experts[0]), static_cast<long long>(experts[1]),
              static_cast<long long>(experts[2]), static_cast<long long>(experts[3]), worst);
  EXPECT_LT(worst, 5e-6);
  // The attention's inputs and outputs and the router's are before any expert: equal.
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.attn_output.weight", "blk.0.ffn_gate_inp.weight"})
    EXPECT_EQ(mine.entries.at(name).sums, ref.entries.at(name).sums) << name;
  std::remove(out.c_str());
}

// synapse's matrix weights quantize --imatrix as llama-imatrix's does: the
// IQ2_XXS model made with it is as close to the F32 golden logits as
// llama-quantize's tiny-llama-iq2_xxs.gguf (made with llama-imatrix's).
TEST(ImatrixCli, QuantizeWithSynapsesMatrixIsAsGood) {
  const std::string out = tmp_path("tiny-llama.quant.imatrix.gguf");
  const test::CliResult r = synapse_cli("imatrix -m " + data_path("models/tiny-llama-f32.gguf") + " -f " + kText +
                                        " -c 128 --chunks 16 -t 2 --process-output --no-ppl -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const nlohmann::json jf = test::read_json(data_path("golden/tiny-llama-f32.short.json"));
  const std::vector<float> gold = test::read_f32(data_path("golden/" + jf["logits_file"].get<std::string>()));
  const std::vector<token_id> ids = test::as_array(jf["input_ids"]).get<std::vector<token_id>>();
  const int64_t n_vocab = jf["n_vocab"].get<int64_t>();
  base::ThreadPool pool(2);
  const auto distance = [&](const model::Model& m) {  // the golden README's measure: worst position's relative RMS
    model::KvCache kv = model::make_kv_cache(m, static_cast<int64_t>(ids.size()));
    std::vector<float> logits;
    model::forward(m, kv, ids, true, logits, pool);
    double worst = 0;
    for (size_t p = 0; p < ids.size(); ++p)
      worst = std::max(worst, test::rel_rms(&logits[p * n_vocab], &gold[p * n_vocab], static_cast<size_t>(n_vocab)));
    return worst;
  };

  runtime::QuantizeOptions opt;  // llama-quantize --pure --imatrix F --token-embedding-type q2_K (PROVENANCE.md)
  opt.ftype = runtime::parse_file_type("IQ2_XXS");
  opt.pure = true;
  opt.n_threads = 2;
  opt.token_embedding_type = GgmlType::Q2_K;
  opt.imatrix_file = out;
  const gguf::Writer w = runtime::quantize_model(gguf::File::open(data_path("models/tiny-llama-f32.gguf")), opt);
  const auto m_mine = model::load_model(gguf::File::from_bytes(w.bytes(), "tiny-llama IQ2_XXS (synapse imatrix)"));
  const auto m_ref = model::load_model(data_path("models/tiny-llama-iq2_xxs.gguf"));
  const gguf::File &mine = m_mine->file, &ref = m_ref->file;
  int identical = 0, n = 0;
  for (const gguf::TensorInfo& t : ref.tensors()) {
    const gguf::TensorInfo* m = mine.find_tensor(t.name);
    ASSERT_NE(m, nullptr) << t.name;
    ++n;
    identical += m->n_bytes == t.n_bytes && std::memcmp(m->data, t.data, t.n_bytes) == 0;
  }
  const double d_mine = distance(*m_mine), d_ref = distance(*m_ref);
  std::printf("[ imatrix ] IQ2_XXS with synapse's imatrix: %d/%d tensors byte-identical to llama-quantize's with "
              "llama-imatrix's; logits vs F32 golden %.5f (llama's file %.5f, ratio %.3f)\n",
              identical, n, d_mine, d_ref, d_mine / d_ref);
  EXPECT_LE(d_mine, 1.05 * d_ref);
  std::remove(out.c_str());
}

// --in-file (combining, converting between GGUF and the legacy .dat) and
// --output-format dat, without a model run, against llama-imatrix v0.5.0 on
// the same files (scripts/golden/make_imatrix_files.py): every file byte
// for byte. From the repository root, as the references record the paths.
TEST(ImatrixCli, InFileCombinesAndConvertsAsLlamaImatrix) {
  std::map<std::string, std::string> expected;  // name -> sha256
  {
    std::ifstream f(data_path("models/imatrix-files.sha256"));
    std::string line;
    while (std::getline(f, line))
      if (line.size() > 66) expected[line.substr(66)] = line.substr(0, 64);
  }
  ASSERT_EQ(expected.size(), 5u);
  const std::string dir = tmp_path("imatrix-files");
  ASSERT_EQ(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()), 0);
  const std::string m = "tests/data/models/";
  const auto run = [&](const std::string& args, const std::string& out) {
    const test::CliResult r = synapse_cli("imatrix " + args + " -o " + dir + "/" + out, "cd " + data_path("../..") + " &&");
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
    return dir + "/" + out;
  };
  // GGUF -> .dat -> GGUF: llama-imatrix's .dat, then the GGUF file again.
  const std::string dat = run("--in-file " + m + "tiny-llama.fa-off.imatrix.gguf --output-format dat -c 128", "a.dat");
  EXPECT_TRUE(test::slurp(dat) == test::slurp(data_path("models/tiny-llama.fa-off.imatrix.dat")));
  const std::string back = run("--in-file " + m + "tiny-llama.fa-off.imatrix.dat -c 128", "b.gguf");
  EXPECT_TRUE(test::slurp(back) == test::slurp(data_path("models/tiny-llama.fa-off.imatrix.gguf")));
  // Two files, repeated or comma-separated; a legacy one among them; the
  // MoE file's partial experts in the .dat (1 * ncall) and a .dat's one
  // count broadcast to the experts of a per-expert file.
  const std::pair<std::string, std::string> cases[] = {
      {"--in-file " + m + "tiny-llama.fa-off.imatrix.gguf --in-file " + m + "tiny-llama.imatrix.gguf -c 128",
       "combined.gguf"},
      {"--in-file " + m + "tiny-llama.fa-off.imatrix.dat," + m + "tiny-llama.imatrix.gguf -c 128", "legacy+gguf.gguf"},
      {"--in-file " + m + "tiny-mixtral.imatrix.gguf --output-format dat -c 64", "mixtral.dat"},
      {"--in-file " + dir + "/mixtral.dat --in-file " + m + "tiny-mixtral.imatrix.gguf -c 64", "mixtral-dat+gguf.gguf"},
  };
  for (const auto& [args, name] : cases) EXPECT_EQ(sha256_of(run(args, name)), expected.at(name)) << name;
  // A run's .dat is the conversion's (the same matrices, chunk count and dataset).
  EXPECT_EQ(sha256_of(dat), expected.at("run.dat"));
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

// --show-statistics: llama-imatrix's two tables, text for text (its log
// prefixes removed), for a dense and an MoE file.
TEST(ImatrixCli, ShowStatisticsPrintsLlamaImatrixsTables) {
  for (const char* name : {"tiny-llama.fa-off.imatrix", "tiny-mixtral.imatrix"}) {
    const test::CliResult r = synapse_cli("imatrix --in-file tests/data/models/" + std::string(name) +
                                              ".gguf --show-statistics",
                                          "cd " + data_path("../..") + " &&");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, test::slurp(data_path("models/" + std::string(name) + ".stats.txt"))) << name;
  }
}

TEST(ImatrixCli, BadInputIsOneClearError) {
  const std::string m = "imatrix -m " + data_path("models/tiny-llama-f32.gguf") + " ";
  const std::string out = tmp_path("never.imatrix.gguf");
  const auto expect_error = [&](const std::string& args, const std::string& want) {
    const test::CliResult r = synapse_cli(m + args + " -o " + out);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.err.find(want), std::string::npos) << args << "\n" << r.err;
    EXPECT_TRUE(test::slurp(out).empty()) << args << ": wrote a file";
  };
  expect_error("-c 128", "-f FILE is required");
  expect_error("-f " + tmp_path("no-such-text.txt"), "cannot open the text");
  const std::string shrt = tmp_path("short.txt");
  test::spit(shrt, "Only a few words.\n");
  expect_error("-f " + shrt + " -c 64", "needs at least 128 (two chunks)");
  expect_error("-f " + kText + " --chunks 0", "--chunks");
  expect_error("-f " + kText + " -c 0", "-c must be at least 1");
  expect_error("-f " + kText + " -c 64 -b 2048 -ub 8", "-ub 8 is below the 32 sequences");
  expect_error("-f " + kText + " --output-format text", "--output-format must be gguf or dat, got \"text\"");
  expect_error("-f " + kText + " --output-frequency 0", "--output-frequency must be at least 1");
  expect_error("-f " + kText + " --save-frequency -1", "--save-frequency must be at least 0");
  expect_error("--in-file " + tmp_path("no-such.imatrix.gguf"), "cannot open");
  expect_error("--in-file " + data_path("models/tiny-llama.imatrix.gguf") + ",", "--in-file has an empty file name");
  expect_error("--show-statistics", "--show-statistics needs exactly one --in-file");
  expect_error("--in-file " + data_path("models/tiny-llama.imatrix.gguf") + " --in-file " +
                   data_path("models/tiny-mixtral.imatrix.gguf") + " --show-statistics",
               "--show-statistics needs exactly one --in-file");
  expect_error("--in-file " + data_path("models/tiny-llama.imatrix.gguf") + " --in-file " +
                   data_path("models/tiny-llama-f32.gguf"),
               "no NAME.in_sum2 / NAME.counts tensors (is it an importance matrix?)");
  std::remove(shrt.c_str());
}

}  // namespace
}  // namespace synapse

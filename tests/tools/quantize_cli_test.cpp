// `synapse quantize`: the quantized models give logits as close to the F32
// model's as llama-quantize's files do, and the command works end to end
// with one clear error line for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "cli_util.hpp"
#include "golden_util.hpp"
#include "model/forward.hpp"
#include "runtime/quantize_model.hpp"

namespace synapse {
namespace {

using test::data_path;

// Max over positions of the relative RMS distance between two [n_pos][n_vocab]
// logit arrays (the golden README's measure).
double max_rel_rms(const std::vector<float>& a, const std::vector<float>& b, int64_t n_vocab) {
  double worst = 0;
  for (size_t p = 0; p < a.size() / static_cast<size_t>(n_vocab); ++p)
    worst = std::max(worst, test::rel_rms(&a[p * n_vocab], &b[p * n_vocab], static_cast<size_t>(n_vocab)));
  return worst;
}

// For every file of the tiny-llama set: synapse's quantization of
// tiny-llama-f32.gguf, run by synapse on the golden input, is within 2x the
// distance from the F32 golden logits that llama.cpp measured on
// llama-quantize's file (its golden logits).
TEST(QuantizeLogits, WithinTwiceLlamaQuantizesDistance) {
  const nlohmann::json jf = test::read_json(data_path("golden/tiny-llama-f32.short.json"));
  const std::vector<float> gold_f32 = test::read_f32(data_path("golden/" + jf["logits_file"].get<std::string>()));
  const std::vector<token_id> ids = test::as_array(jf["input_ids"]).get<std::vector<token_id>>();
  const int64_t n_vocab = jf["n_vocab"].get<int64_t>();
  const gguf::File master = gguf::File::open(data_path("models/tiny-llama-f32.gguf"));
  base::ThreadPool pool(1);

  const struct {
    const char* type;
    const char* suffix;
  } cases[] = {{"F16", "f16"},       {"BF16", "bf16"},     {"Q8_0", "q8_0"},     {"Q4_0", "q4_0"},
               {"Q4_1", "q4_1"},     {"Q5_0", "q5_0"},     {"Q5_1", "q5_1"},     {"IQ4_NL", "iq4_nl"},
               {"Q2_K", "q2_k"},     {"Q3_K_S", "q3_k"},   {"Q4_K_S", "q4_k"},   {"Q5_K_S", "q5_k"},
               {"Q6_K", "q6_k"},     {"IQ4_XS", "iq4_xs"}, {"TQ1_0", "tq1_0"},   {"TQ2_0", "tq2_0"},
               {"Q4_K_M", "q4_k_m"}};
  for (const auto& c : cases) {
    const std::string gname = std::string("golden/tiny-llama-") + c.suffix + ".short.json";
    const nlohmann::json jq = test::read_json(data_path(gname));
    ASSERT_EQ(test::as_array(jq["input_ids"]).get<std::vector<token_id>>(), ids) << gname;
    const std::vector<float> gold_q = test::read_f32(data_path("golden/" + jq["logits_file"].get<std::string>()));
    ASSERT_EQ(gold_q.size(), gold_f32.size()) << gname;
    const double ref_dist = max_rel_rms(gold_q, gold_f32, n_vocab);

    runtime::QuantizeOptions opt;
    opt.ftype = runtime::parse_file_type(c.type);
    opt.pure = std::string(c.suffix) != "q4_k_m";
    const gguf::Writer w = runtime::quantize_model(master, opt);
    auto m = model::load_model(gguf::File::from_bytes(w.bytes(), std::string("tiny-llama ") + c.type));
    model::KvCache kv = model::make_kv_cache(*m, static_cast<int64_t>(ids.size()));
    std::vector<float> logits;
    model::forward(*m, kv, ids, true, logits, pool);
    ASSERT_EQ(logits.size(), gold_f32.size()) << c.type;
    const double dist = max_rel_rms(logits, gold_f32, n_vocab);
    std::printf("[ quantize ] %-7s%s logits vs F32 golden: synapse %.5f, llama-quantize (llama.cpp) %.5f, ratio %.3f\n",
                c.type, opt.pure ? " --pure" : "       ", dist, ref_dist, dist / ref_dist);
    EXPECT_GT(ref_dist, 0) << c.type;
    EXPECT_LE(dist, 2 * ref_dist) << c.type;
  }
}

// ---------------------------------------------------------------------------
// The command line.

using Result = test::CliResult;
using test::slurp;
using test::synapse_cli;
using test::tmp_path;

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(QuantizeCli, WritesAModelThatLoadsAndInfoLists) {
  const std::string out = tmp_path("q4_k_m.gguf");
  const Result r = synapse_cli("quantize " + data_path("models/tiny-llama-f32.gguf") + " " + out + " q4_k_m -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("blk.1.attn_v.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("21 tensors"), std::string::npos) << r.out;
  // The same bytes as llama-quantize's Q4_K_M file.
  EXPECT_TRUE(slurp(out) == slurp(data_path("models/tiny-llama-q4_k_m.gguf")));

  auto m = model::load_model(out);
  EXPECT_EQ(m->hp.n_vocab, 1024);
  const Result info = synapse_cli("info " + out);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  for (const char* want : {"general.file_type", "general.quantization_version", "output.weight", "Q6_K", "Q4_K",
                           "blk.0.attn_norm.weight"})
    EXPECT_NE(info.out.find(want), std::string::npos) << want << "\n" << info.out;
  std::remove(out.c_str());
}

TEST(QuantizeCli, BadTypeIsOneErrorLine) {
  const std::string out = tmp_path("bad.gguf");
  const Result r = synapse_cli("quantize " + data_path("models/tiny-llama-f32.gguf") + " " + out + " Q9_K");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("'Q9_K'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Q4_K_M"), std::string::npos) << r.err;
  EXPECT_TRUE(slurp(out).empty()) << "no output file for a bad type";
}

TEST(QuantizeCli, MissingInputIsOneErrorLine) {
  const std::string out = tmp_path("missing.gguf");
  const Result r = synapse_cli("quantize " + tmp_path("no-such-model.gguf") + " " + out + " Q8_0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("no-such-model.gguf"), std::string::npos) << r.err;
  EXPECT_TRUE(slurp(out).empty());
}

}  // namespace
}  // namespace synapse

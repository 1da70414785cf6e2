// `synapse bench` and `synapse synth` as a user runs them: the markdown table
// with one row per test, the JSON form, and clear errors for bad flags.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <algorithm>

#include "cli_util.hpp"
#include "synapse/gguf.hpp"
#include "golden_util.hpp"

namespace synapse {
namespace {

using test::data_path;

using Result = test::CliResult;
using test::synapse_cli;
using test::tmp_path;

// The table rows ("| ... |" lines after the header and the separator).
std::vector<std::string> table_rows(const std::string& out) {
  std::vector<std::string> rows;
  size_t pos = 0;
  int seen = 0;
  while (pos < out.size()) {
    const size_t nl = out.find('\n', pos);
    const std::string line = out.substr(pos, (nl == std::string::npos ? out.size() : nl) - pos);
    pos = nl == std::string::npos ? out.size() : nl + 1;
    if (line.rfind("| ", 0) == 0 && ++seen > 2) rows.push_back(line);
  }
  return rows;
}

TEST(BenchCli, PrintsATableWithPpAndTgRows) {
  const Result r = synapse_cli("bench -m " + data_path("models/stories260K.gguf") + " -p 16 -n 8 -r 1 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| model | size | params | threads | test | t/s | GB/s | int8 % |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("commit "), std::string::npos) << r.out;
  const auto rows = table_rows(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_NE(rows[0].find("| pp16 |"), std::string::npos) << rows[0];
  EXPECT_NE(rows[1].find("| tg8 |"), std::string::npos) << rows[1];
  // stories260K: 292,800 parameters, 1,171,200 bytes of F32 tensors.
  EXPECT_NE(rows[0].find("| 292.80 K |"), std::string::npos) << rows[0];
  EXPECT_NE(rows[0].find("| 1.12 MiB |"), std::string::npos) << rows[0];
  EXPECT_NE(rows[1].find(" ± "), std::string::npos) << rows[1];
}

// The header names the kernel table in use; SYNAPSE_ISA picks it, and a
// name that is no table is reported on stderr and ignored.
TEST(BenchCli, PrintsTheKernelTable) {
  const std::string args = "bench -m " + data_path("models/stories260K.gguf") + " -p 4 -n 2 -r 1 -t 1";
  ::setenv("SYNAPSE_ISA", "scalar", 1);
  const Result r = synapse_cli(args);
  ::setenv("SYNAPSE_ISA", "avx1024", 1);
  const Result bad = synapse_cli(args);
  ::unsetenv("SYNAPSE_ISA");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(", kernels scalar\n"), std::string::npos) << r.out;
  ASSERT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_NE(bad.err.find("SYNAPSE_ISA=avx1024 ignored"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.out.find(", kernels scalar\n"), std::string::npos) << bad.out;
}

TEST(BenchCli, JsonParsesWithOneResultPerTestAndRun) {
  const Result r = synapse_cli("bench -m " + data_path("models/stories260K.gguf") +
                               " -p 16 -n 8 -r 2 -t 1,2 --bw 10 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("commit"));
  const auto& res = j.at("results");
  ASSERT_EQ(res.size(), 4u);  // (pp16, tg8) x (t=1, t=2)
  const char* tests[] = {"pp16", "tg8", "pp16", "tg8"};
  const int threads[] = {1, 1, 2, 2};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(res[i].at("test"), tests[i]);
    EXPECT_EQ(res[i].at("threads"), threads[i]);
    EXPECT_EQ(res[i].at("samples_ts").size(), 2u);
    EXPECT_GT(res[i].at("avg_ts").get<double>(), 0.0);
    EXPECT_EQ(res[i].at("params"), 292800);
    EXPECT_EQ(res[i].at("size_bytes"), 1171200);
  }
  // Decode: bytes per token = the weights, of which the untied token_embd
  // (512 x 64 F32) only the one row looked up, plus the KV rows read: 5
  // layers x (32 + 32) x 2 bytes x 4.5 rows on average over 8 steps.
  const auto& tg = res[1];
  EXPECT_EQ(tg.at("weight_bytes_per_token"), 1171200 - 512 * 64 * 4 + 64 * 4);
  EXPECT_DOUBLE_EQ(tg.at("kv_bytes_per_token").get<double>(), 5 * 64 * 2 * 4.5);
  const double bytes = 1171200 - 512 * 64 * 4 + 64 * 4 + 5 * 64 * 2 * 4.5;
  EXPECT_NEAR(tg.at("bound_ts").get<double>(), 10e9 / bytes, 1e-6 * 10e9 / bytes);
  EXPECT_NEAR(tg.at("gbps").get<double>(), tg.at("avg_ts").get<double>() * bytes / 1e9, 1e-9);
  EXPECT_FALSE(res[0].contains("gbps"));
}

TEST(BenchCli, MoeDecodeReadsTheChosenExperts) {
  // tiny-gpt-oss-f32: 4 of 8 experts per token, so its expert tensors
  // (ffn_{gate,up,down}_exps weights and biases: 3170304 bytes) count half;
  // the rest 1065056 bytes, of which the untied token_embd (512 x 128 F32)
  // one 512-byte row (sizes read with gguf-py's GGUFReader).
  const Result r = synapse_cli("bench -m " + data_path("models/tiny-gpt-oss-f32.gguf") +
                               " -p 0 -n 2 -r 1 -t 1 --bw 10 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const auto& tg = j.at("results").at(0);
  EXPECT_EQ(tg.at("size_bytes"), 4496992);
  EXPECT_EQ(tg.at("weight_bytes_per_token"), 1065056 + 3170304 / 2);
}

TEST(BenchCli, BwAutoProbesAroundEveryRun) {
  // Three runs: a probe before the first and after each; each run's bound
  // from the mean of its two probes, the fraction the mean over the runs.
  const Result r = synapse_cli("bench -m " + data_path("models/stories260K.gguf") + " -p 0 -n 4 -r 3 -t 1 --bw auto --bw-probe-mib 16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("results").size(), 1u);
  const auto& tg = j["results"][0];
  const std::vector<double> probes = tg.at("bw_probes_gbps").get<std::vector<double>>();
  const std::vector<double> ts = tg.at("samples_ts").get<std::vector<double>>();
  ASSERT_EQ(ts.size(), 3u);
  ASSERT_EQ(probes.size(), 4u);
  for (double p : probes) EXPECT_GT(p, 0.0);
  EXPECT_EQ(tg.at("bw_before_gbps").get<double>(), probes.front());
  EXPECT_EQ(tg.at("bw_after_gbps").get<double>(), probes.back());
  const double bytes = tg.at("weight_bytes_per_token").get<double>() + tg.at("kv_bytes_per_token").get<double>();
  double bw = 0, fraction = 0;
  for (size_t i = 0; i < 3; ++i) {
    const double run_bw = (probes[i] + probes[i + 1]) / 2;
    bw += run_bw / 3;
    fraction += ts[i] * bytes / (run_bw * 1e9) / 3;
  }
  EXPECT_NEAR(tg.at("bw_gbps").get<double>(), bw, 1e-9 * bw);
  EXPECT_NEAR(tg.at("fraction_of_bound").get<double>(), fraction, 1e-9 * fraction);
  EXPECT_NEAR(tg.at("bound_ts").get<double>(), bw * 1e9 / bytes, 1e-9 * bw * 1e9 / bytes);
}

TEST(BenchCli, DepthRowsAreLabelled) {
  const Result r = synapse_cli("bench -m " + data_path("models/stories260K.gguf") + " -p 0 -n 4 -d 32 -r 1 -t 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("results").size(), 1u);
  EXPECT_EQ(j["results"][0].at("test"), "tg4 @ d32");
  EXPECT_EQ(j["results"][0].at("n_depth"), 32);
}

// A model with recurrent layers (tiny-qwen35: DeltaNet states that cannot be
// cut back) rewinds to its depth from a copy of the filled cache: every run,
// single and batched, at depth 16.
TEST(BenchCli, HybridModelRunsAtDepth) {
  const Result r = synapse_cli("bench -m " + data_path("models/tiny-qwen35-q8_0.gguf") +
                               " -p 4 -n 2 -d 16 -r 2 -t 1 --batch 1,2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("results").size(), 3u);
  EXPECT_EQ(j["results"][0].at("test"), "pp4 @ d16");
  EXPECT_EQ(j["results"][1].at("test"), "tg2 @ d16");
  EXPECT_EQ(j["results"][2].at("test"), "tg2 @ d16 x2");
}

// pp tests give the share of the int8 peak: int8 GOP per token (2 x the
// elements of the quantized matrices every token goes through, plus the
// output matrix's once per pass of P tokens) x t/s / (--peak GOPS per thread
// x threads). stories260K-q8_0 has Q8_0 matrices but F16 ffn_down (172
// columns: no Q8_0 row), which multiplies in float and does not count; its
// token_embd is a lookup (the file has output.weight).
TEST(BenchCli, Int8ShareOfThePeak) {
  const std::string model = data_path("models/stories260K-q8_0.gguf");
  const gguf::File f = gguf::File::open(model);
  ASSERT_NE(f.find_tensor("output.weight"), nullptr);
  double layers = 0, output = 0, f16 = 0;
  for (const auto& t : f.tensors()) {
    if (t.n_dims < 2 || t.name == "token_embd.weight") continue;
    const double elems = static_cast<double>(t.ne[0]) * static_cast<double>(t.ne[1]);
    if (t.type == GgmlType::F16) f16 += elems;
    else if (t.name == "output.weight") output += elems;
    else layers += elems;
  }
  // q and o (64 x 64), k and v (64 x 32: 4 KV heads of 8), gate and up (64 x 172) in 5 layers; down is F16.
  EXPECT_EQ(layers, 5 * (2 * 64 * 64 + 2 * 64 * 32 + 2 * 64 * 172));
  EXPECT_EQ(f16, 5 * 64 * 172);
  EXPECT_EQ(output, 512 * 64);

  const Result r = synapse_cli("bench -m " + model + " -p 16 -n 4 -r 2 -t 2 --peak 50 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const auto& pp = j.at("results").at(0);
  ASSERT_EQ(pp.at("test"), "pp16");
  const double gop = 2 * (layers + output / 16) / 1e9;
  EXPECT_DOUBLE_EQ(pp.at("gop_per_token").get<double>(), gop);
  EXPECT_DOUBLE_EQ(pp.at("int8_peak_gops").get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(pp.at("fraction_of_int8_peak").get<double>(), gop * pp.at("avg_ts").get<double>() / 100.0);
  EXPECT_FALSE(j["results"][1].contains("fraction_of_int8_peak"));  // tg4: bandwidth-bound, no share

  // Measured: the table's int8 % column and the peak it used, on an x86-64 CPU with AVX2 at least.
  const Result t = synapse_cli("bench -m " + model + " -p 16 -n 0 -r 1 -t 1");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const auto rows = table_rows(t.out);
  ASSERT_EQ(rows.size(), 1u) << t.out;
#if defined(__x86_64__)
  EXPECT_NE(rows[0].find("% |"), std::string::npos) << rows[0];
  EXPECT_NE(t.out.find("GOPS with 1 thread(s) (vp"), std::string::npos) << t.out;
#endif

  // An F32 model multiplies in float: no int8 share, "-" in the column.
  const Result f32 = synapse_cli("bench -m " + data_path("models/stories260K.gguf") + " -p 16 -n 0 -r 1 -t 1 --peak 50");
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  const auto f32_rows = table_rows(f32.out);
  ASSERT_EQ(f32_rows.size(), 1u) << f32.out;
  EXPECT_NE(f32_rows[0].find("| - |"), std::string::npos) << f32_rows[0];
}

TEST(BenchCli, BadFlagsGiveOneClearError) {
  const std::string m = " -m " + data_path("models/stories260K.gguf");
  Result r = synapse_cli("bench" + m + " -r 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("-r must be at least 1"), std::string::npos) << r.err;
  r = synapse_cli("bench" + m + " --bw fast");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--bw"), std::string::npos) << r.err;
  r = synapse_cli("bench" + m + " --peak -3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--peak must be the int8 peak in GOPS per thread"), std::string::npos) << r.err;
  r = synapse_cli("bench" + m + " -p 0 -n 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("nothing to run"), std::string::npos) << r.err;
  r = synapse_cli("bench -m /nonexistent/model.gguf -p 1 -n 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
}

TEST(SynthCli, WritesAModelThatBenchRuns) {
  const std::string path = tmp_path("synth.gguf");
  Result r = synapse_cli("synth --preset smollm2-135m --type q8_0 --layers 1 --vocab 512 -t 1 -o " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("smollm2-135m"), std::string::npos) << r.err;
  r = synapse_cli("bench -m " + path + " -p 4 -n 2 -r 1 -t 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("results").size(), 2u);
  EXPECT_EQ(j["results"][0].at("model"), "smollm2-135m Q8_0");
  std::remove(path.c_str());

  r = synapse_cli("synth --preset gpt-5 --type Q8_0 -o " + path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown preset 'gpt-5'"), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(path).good());
}

// llama-bench's -o formats: the same tests in each, parsed back.
std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::string line;
  for (char c : s) {
    if (c == '\n') out.push_back(line), line.clear();
    else line += c;
  }
  if (!line.empty()) out.push_back(line);
  return out;
}

// A CSV line of quoted or empty fields, as -o csv writes them.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> f;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') cur += '"', ++i;
    else if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) f.push_back(cur), cur.clear();
    else cur += c;
  }
  f.push_back(cur);
  return f;
}

TEST(BenchCli, OutputFormatsOfLlamaBench) {
  const std::string base = "bench -m " + data_path("models/stories260K.gguf") + " -p 16 -n 4 -pg 8,4 -r 2 -t 1";
  const Result json = synapse_cli(base + " -o json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json arr = nlohmann::json::parse(json.out);
  ASSERT_TRUE(arr.is_array());
  ASSERT_EQ(arr.size(), 3u) << json.out;
  std::vector<std::string> tests;
  for (const auto& t : arr) {
    tests.push_back(t.at("test"));
    EXPECT_EQ(t.at("model_filename"), "stories260K.gguf");
    EXPECT_EQ(t.at("n_threads"), 1);
    EXPECT_EQ(t.at("samples_ts").size(), 2u);
    EXPECT_EQ(t.at("samples_ns").size(), 2u);
    EXPECT_GT(t.at("avg_ts").get<double>(), 0.0);
    EXPECT_GT(t.at("avg_ns").get<double>(), 0.0);
    EXPECT_EQ(t.at("type_k"), "f16");
    EXPECT_EQ(t.at("test_time").get<std::string>().size(), 20u);  // 2025-01-02T03:04:05Z
    // avg_ts is the mean of the runs' t/s; a run's ns is its tokens / t/s.
    const double tokens = t.at("n_prompt").get<double>() + t.at("n_gen").get<double>();
    EXPECT_NEAR(t.at("samples_ns")[0].get<double>(), tokens / t.at("samples_ts")[0].get<double>() * 1e9,
                1e-3 * t.at("samples_ns")[0].get<double>() + 1);
  }
  EXPECT_EQ(tests, (std::vector<std::string>{"pp16", "pp8+tg4", "tg4"}));
  EXPECT_EQ(arr[1].at("n_prompt"), 8);
  EXPECT_EQ(arr[1].at("n_gen"), 4);

  const Result jsonl = synapse_cli(base + " -o jsonl");
  ASSERT_EQ(jsonl.exit_code, 0) << jsonl.err;
  const auto lines = split_lines(jsonl.out);
  ASSERT_EQ(lines.size(), 3u) << jsonl.out;
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(nlohmann::json::parse(lines[i]).at("test"), tests[i]);

  const Result csv = synapse_cli(base + " -o csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const auto rows = split_lines(csv.out);
  ASSERT_EQ(rows.size(), 4u) << csv.out;
  const auto header = csv_fields(rows[0]);
  const auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  ASSERT_LT(col("avg_ts"), header.size());
  ASSERT_LT(col("test"), header.size());
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto f = csv_fields(rows[i]);
    ASSERT_EQ(f.size(), header.size()) << rows[i];
    EXPECT_EQ(f[col("test")], tests[i - 1]);
    EXPECT_GT(std::stod(f[col("avg_ts")]), 0.0);
    EXPECT_EQ(f[col("n_threads")], "1");
  }

  const Result sql = synapse_cli(base + " -o sql");
  ASSERT_EQ(sql.exit_code, 0) << sql.err;
  EXPECT_EQ(sql.out.rfind("CREATE TABLE IF NOT EXISTS llama_bench (\n  build_commit TEXT,", 0), 0u) << sql.out;
  size_t inserts = 0;
  for (const auto& l : split_lines(sql.out)) inserts += l.rfind("INSERT INTO llama_bench (", 0) == 0;
  EXPECT_EQ(inserts, 3u);

  // md stays the default table; -oe writes a second format to stderr.
  const Result md = synapse_cli(base + " -o md -oe jsonl");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_EQ(table_rows(md.out).size(), 3u) << md.out;
  EXPECT_NE(md.err.find("{\"build_commit\""), std::string::npos) << md.err;
  // Errors: an unknown format, -pg without two counts, --json with -o.
  EXPECT_NE(synapse_cli(base + " -o xml").err.find("-o/-oe takes md, csv, json, jsonl or sql, got 'xml'"),
            std::string::npos);
  EXPECT_NE(synapse_cli(base + " -pg 8").err.find("-pg takes PROMPT,GEN"), std::string::npos);
  EXPECT_NE(synapse_cli(base + " --json -o csv").err.find("exclude each other"), std::string::npos);
}

TEST(BenchCli, BatchFlagsProgressAndNoWarmup) {
  const std::string base = "bench -m " + data_path("models/stories260K.gguf") + " -p 16 -n 0 -r 1 -t 1 -o jsonl";
  // One pass per prompt by default; passes of min(-b, -ub) rows when given (llama-bench's).
  const Result one = synapse_cli(base);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(nlohmann::json::parse(one.out).at("n_ubatch"), 16);
  const Result r = synapse_cli(base + " -b 8 -ub 4,8 --progress --no-warmup");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = split_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(nlohmann::json::parse(lines[0]).at("n_batch"), 8);
  EXPECT_EQ(nlohmann::json::parse(lines[0]).at("n_ubatch"), 4);
  EXPECT_EQ(nlohmann::json::parse(lines[1]).at("n_ubatch"), 8);
  EXPECT_NE(r.err.find("synapse bench: benchmark 1/2: starting pp16"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("synapse bench: benchmark 2/2: prompt run 1/1"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("warmup"), std::string::npos) << r.err;
  EXPECT_NE(synapse_cli(base + " --progress").err.find("warmup run"), std::string::npos);
  EXPECT_NE(synapse_cli(base + " -ub 0").err.find("-ub values must be at least 1"), std::string::npos);
}

}  // namespace
}  // namespace synapse

// `synapse perplexity` against llama-perplexity (llama.cpp v0.5.0): its
// printed figures on stories260K and stories260K-q8_0 over the first 10
// chunks of 256 tokens of WikiText-2, and the KL divergence of the Q8_0 model
// from the F32 one (golden/perplexity/, see its README), plus the base-file
// format, --json, and one clear error line for bad input.
//
// The figures are compared digit for digit: synapse's kernels follow llama.cpp
// v0.5.0's AVX-512 reduction orders (F32/F16 dots as tinyBLAS<16> or
// ggml_vec_dot_*, attention, soft_max, SwiGLU, RoPE, Q8_0 as
// tinyBLAS_Q0_AVX), so its logits equal the reference build's bit for bit
// and every printed value agrees (golden/perplexity/README.md has the build
// and the commands).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "golden_util.hpp"

namespace synapse {
namespace {

using test::data_path;
using test::synapse_cli;

const std::string kText = data_path("text/wikitext-2-test.first100k.raw");
const std::string kGolden = data_path("golden/perplexity/");
const std::string kBase = kGolden + "stories260K.wikitext2-c256-10chunks.kld-base.bin";

std::string model(const std::string& name) { return data_path("models/" + name + ".gguf"); }

// The running PPL values of a `[1]x,[2]y,...` line, in order (checks the indices).
std::vector<double> running_ppl(const std::string& out) {
  std::vector<double> v;
  static const std::regex item(R"(\[(\d+)\]([0-9.]+),)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), item); it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(std::stoi((*it)[1]), static_cast<int>(v.size()) + 1);
    v.push_back(std::stod((*it)[2]));
  }
  return v;
}

struct Figure {
  double value = NAN, unc = NAN;
};

Figure final_estimate(const std::string& out) {
  static const std::regex re(R"(Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+))");
  std::smatch m;
  if (!std::regex_search(out, m, re)) return {};
  return {std::stod(m[1]), std::stod(m[2])};
}

// The statistics lines "LABEL: value[%] [± unc [%]]" of the KL output, by
// label with runs of spaces collapsed ("Mean KLD", "99.9% Δp", "Same top p").
std::map<std::string, Figure> kld_statistics(const std::string& out, std::vector<std::string>* order = nullptr) {
  std::map<std::string, Figure> stats;
  static const std::regex re(R"(^\s*([^:]+?)\s*:\s*(-?[0-9.]+)\s*%?\s*(?:±\s*(-?[0-9.]+))?\s*%?\s*$)");
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, re)) continue;
    const std::string label = std::regex_replace(std::string(m[1]), std::regex(" +"), " ");
    stats[label] = {std::stod(m[2]), m[3].matched ? std::stod(m[3]) : NAN};
    if (order) order->push_back(label);
  }
  return stats;
}

// The per-chunk rows of the KL table: chunk, PPL ± , ln ratio ±, KLD ±, RMS Δp ±, same top ±.
std::vector<std::vector<double>> kld_rows(const std::string& out) {
  std::vector<std::vector<double>> rows;
  static const std::regex re(
      R"(^\s*(\d+)\s+([0-9.]+) ±\s+([0-9.]+)\s+(-?[0-9.]+) ±\s+([0-9.]+)\s+(-?[0-9.]+) ±\s+([0-9.]+)\s+([0-9.]+) ±\s+([0-9.]+) %\s+([0-9.]+) ±\s+([0-9.]+) %$)");
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, re)) continue;
    std::vector<double> r;
    for (size_t i = 1; i < m.size(); ++i) r.push_back(std::stod(m[i]));
    rows.push_back(r);
  }
  return rows;
}

const char* kArgs = " -c 256 -b 256 --chunks 10 -t 2";

// The figure lines of a llama-perplexity log or of synapse's output: every
// non-empty line but llama.cpp's log records ("0.08.158.093 I ...", whose
// final-estimate line keeps its text after the prefix).
std::vector<std::string> figure_lines(const std::string& out) {
  static const std::regex log_prefix(R"(^\d+\.\d+\.\d+\.\d+ [A-Z] )");
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, log_prefix)) {
      line = m.suffix();
      if (!line.starts_with("Final estimate:")) continue;
    }
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// The running `[i]` line and `Final estimate: PPL = X +/- Y` exactly as
// llama-perplexity prints them (the numbers are parsed too, to fail with a
// readable message).
void expect_ppl_matches(const std::string& name) {
  const test::CliResult r = synapse_cli("perplexity -m " + model(name) + " -f " + kText + kArgs);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string gold = test::slurp(kGolden + name + ".wikitext2-c256-10chunks.txt");
  const std::vector<double> want = running_ppl(gold), got = running_ppl(r.out);
  ASSERT_EQ(want.size(), 10u);
  ASSERT_EQ(got.size(), 10u) << r.out;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i], want[i]) << name << " [" << i + 1 << "] " << got[i] << " vs llama-perplexity " << want[i];
  const std::vector<std::string> want_lines = figure_lines(gold);
  ASSERT_EQ(want_lines.size(), 2u);
  EXPECT_EQ(figure_lines(r.out), want_lines) << r.out;
  // stdout holds the running line and the final estimate, nothing else.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
}

TEST(PerplexityCli, F32MatchesLlamaPerplexity) { expect_ppl_matches("stories260K"); }

TEST(PerplexityCli, Q8_0MatchesLlamaPerplexity) { expect_ppl_matches("stories260K-q8_0"); }

// -b and -t change how the rows are batched and split over threads, never a
// digit (DESIGN.md contract 2; the scoring sums in row order).
TEST(PerplexityCli, SameOutputForAnyBatchAndThreads) {
  const std::string base = "perplexity -m " + model("stories260K-q8_0") + " -f " + kText + " -c 128 --chunks 5";
  const test::CliResult a = synapse_cli(base + " -b 2048 -t 2");  // 5 chunks as 5 sequences of one batch
  const test::CliResult b = synapse_cli(base + " -b 48 -t 1");    // each chunk in 3 passes
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(running_ppl(a.out).size(), 5u);
}

// Q8_0 against llama-perplexity's own F32 base file: the output is
// llama-perplexity's line for line (the table header, the 10 per-chunk rows
// and every statistic, digit for digit); the rows and statistics are also
// parsed, to name what differs.
TEST(PerplexityCli, KlDivergenceMatchesLlamaPerplexity) {
  const test::CliResult r = synapse_cli("perplexity -m " + model("stories260K-q8_0") +
                                        " --kl-divergence-base " + kBase + " --kl-divergence -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string gold = test::slurp(kGolden + "stories260K-q8_0.wikitext2-c256-10chunks.kld.txt");
  const std::string header = "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence";
  EXPECT_NE(gold.find(header), std::string::npos);
  EXPECT_NE(r.out.find(header), std::string::npos) << r.out;
  const std::vector<std::string> want_lines = figure_lines(gold);
  ASSERT_EQ(want_lines.size(), 48u);  // header, 10 rows, 3 section titles, 34 statistics
  EXPECT_EQ(figure_lines(r.out), want_lines);

  const auto want_rows = kld_rows(gold), got_rows = kld_rows(r.out);
  ASSERT_EQ(want_rows.size(), 10u);
  ASSERT_EQ(got_rows.size(), 10u) << r.out;
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(got_rows[i], want_rows[i]) << "chunk " << i + 1;

  std::vector<std::string> want_order, got_order;
  const auto want = kld_statistics(gold, &want_order), got = kld_statistics(r.out, &got_order);
  // llama-perplexity's log lines ("... I Final ...") carry no ':'-separated figure; only statistics parse.
  ASSERT_EQ(want_order.size(), 34u);
  EXPECT_EQ(got_order, want_order);
  for (const auto& [label, w] : want) {
    ASSERT_TRUE(got.count(label)) << label;
    const Figure g = got.at(label);
    EXPECT_EQ(g.value, w.value) << label;
    if (!std::isnan(w.unc)) {
      EXPECT_EQ(g.unc, w.unc) << label << " ±";
    }
  }
}

// synapse's F32 logits against llama.cpp's, on all 1270 scored positions:
// the KL divergence from llama-perplexity's F32 base is nil and the top
// tokens agree.
TEST(PerplexityCli, F32AgreesWithLlamaCppBase) {
  const test::CliResult r = synapse_cli("perplexity -m " + model("stories260K") + " --kl-divergence-base " + kBase +
                                        " --kl-divergence -c 256 -f " + kText + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["n_scored"], 1270);
  EXPECT_EQ(j["chunks"].size(), 10u);
  EXPECT_LT(std::fabs(j["kld"]["mean"].get<double>()), 1e-5);
  EXPECT_LT(j["kld"]["max"].get<double>(), 1e-3);
  EXPECT_LT(j["delta_p"]["rms"].get<double>(), 5e-4);
  EXPECT_GE(j["same_top_p"].get<double>(), 0.998);
  EXPECT_NEAR(j["ppl"].get<double>(), 114.9362, 5e-5);  // llama-perplexity's F32 PPL, to its digits
  EXPECT_NEAR(j["ppl_base"].get<double>(), 110.387469, 1e-6);
}

// Reads a base file: header + tokens (bytes) and the log-probabilities of
// each record ([n_rec][n_vocab]).
struct Base {
  std::string head;
  std::vector<std::vector<float>> log_p;
};

Base read_base(const std::string& path, int n_vocab, int n_tokens) {
  const std::string s = test::slurp(path);
  Base b;
  const size_t head = 20 + 4 * static_cast<size_t>(n_tokens), rec = 2 * (2 * ((n_vocab + 1) / 2) + 4);
  if (s.size() < head || (s.size() - head) % rec != 0) return b;
  b.head = s.substr(0, head);
  for (size_t off = head; off < s.size(); off += rec) {
    float sc[2];
    std::memcpy(sc, s.data() + off, 8);
    std::vector<float> lp(static_cast<size_t>(n_vocab));
    for (int i = 0; i < n_vocab; ++i) {
      uint16_t code;
      std::memcpy(&code, s.data() + off + 8 + 2 * i, 2);
      lp[i] = sc[0] * code + sc[1];
    }
    b.log_p.push_back(lp);
  }
  return b;
}

// --kl-divergence-base writes llama-perplexity's file byte for byte (the
// same tokenization, chunking and log-probability codes of the same
// logits); the run prints the same PPL as a plain run.
TEST(PerplexityCli, WritesLlamaPerplexityBaseFile) {
  const std::string out = test::tmp_path("base.bin");
  const test::CliResult r = synapse_cli("perplexity -m " + model("stories260K") + " -f " + kText + kArgs +
                                        " --kl-divergence-base " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const test::CliResult plain = synapse_cli("perplexity -m " + model("stories260K") + " -f " + kText + kArgs);
  EXPECT_EQ(r.out, plain.out);

  const Base mine = read_base(out, 512, 2560), llama = read_base(kBase, 512, 2560);
  ASSERT_EQ(llama.log_p.size(), 1270u);
  ASSERT_EQ(mine.log_p.size(), 1270u);
  EXPECT_TRUE(mine.head == llama.head) << "header or tokens differ from llama-perplexity's";
  size_t differ = 0;
  for (size_t k = 0; k < mine.log_p.size(); ++k) differ += mine.log_p[k] != llama.log_p[k];
  EXPECT_EQ(differ, 0u) << "records whose log-probabilities differ from llama-perplexity's";
  const std::string bytes = test::slurp(out);
  std::remove(out.c_str());
  EXPECT_EQ(bytes.size(), 1320900u);
  EXPECT_TRUE(bytes == test::slurp(kBase)) << "the base file differs from llama-perplexity's";
}

// --json: one object with the same figures as the text output.
TEST(PerplexityCli, Json) {
  const test::CliResult t = synapse_cli("perplexity -m " + model("stories260K") + " -f " + kText + " -c 128 --chunks 3");
  const test::CliResult r = synapse_cli("perplexity -m " + model("stories260K") + " -f " + kText + " -c 128 --chunks 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["n_ctx"], 128);
  EXPECT_EQ(j["n_chunk"], 3);
  EXPECT_EQ(j["n_scored"], 3 * 63);
  const std::vector<double> running = running_ppl(t.out);
  ASSERT_EQ(j["chunks"].size(), running.size());
  for (size_t i = 0; i < running.size(); ++i) EXPECT_NEAR(j["chunks"][i]["ppl"].get<double>(), running[i], 5e-5);
  const Figure f = final_estimate(t.out);
  EXPECT_NEAR(j["ppl"].get<double>(), f.value, 5e-5);
  EXPECT_NEAR(j["ppl_uncertainty"].get<double>(), f.unc, 5e-6);
  EXPECT_GT(j["tokens_per_second"].get<double>(), 0);
}

// Bad input: exit 1, exactly one line on stderr, naming the problem.
void expect_error(const std::string& args, const std::string& needle) {
  const test::CliResult r = synapse_cli("perplexity " + args);
  EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("synapse: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << r.err;
  EXPECT_EQ(r.out, "") << args;
}

TEST(PerplexityCli, BadInputIsOneClearError) {
  const std::string m = " -m " + model("stories260K") + " ";
  expect_error(m + "-f /nonexistent/wiki.raw", "/nonexistent/wiki.raw: cannot open");
  const std::string empty = test::tmp_path("empty.txt"), shrt = test::tmp_path("short.txt");
  test::spit(empty, "\n");
  expect_error(m + "-f " + empty, "empty");
  test::spit(shrt, "Once upon a time there was a little girl.\n");
  expect_error(m + "-f " + shrt + " -c 256", "needs at least 512 (two chunks)");
  expect_error(m, "-f FILE is required");
  expect_error(m + "-f " + kText + " -c 2", "-c must be at least 4");
  expect_error(m + "-f " + kText + " --chunks 0", "--chunks");
  expect_error(m + "--kl-divergence", "--kl-divergence needs --kl-divergence-base");
  expect_error(m + "-f " + kText + " --kl-divergence-base /nonexistent/dir/base.bin", "cannot create");

  // Base files: not one, truncated, another vocabulary, another n_ctx, another text.
  expect_error(m + "--kl-divergence --kl-divergence-base " + kText, "no '_logits_' header");
  const std::string cut = test::tmp_path("cut.bin");
  test::spit(cut, test::slurp(kBase).substr(0, 50000));
  expect_error(m + "--kl-divergence --kl-divergence-base " + cut, "truncated");
  expect_error("-m " + model("llama-2-tiny-random") + " --kl-divergence --kl-divergence-base " + kBase,
               "over 512 tokens, the model has 32000");
  expect_error(m + "--kl-divergence --kl-divergence-base " + kBase + " -c 512", "computed with n_ctx 256, -c is 512");
  const std::string other = test::tmp_path("other.txt");
  test::spit(other, test::slurp(kText).substr(5000));
  expect_error(m + "--kl-divergence --kl-divergence-base " + kBase + " -f " + other, "differs from");
  for (const std::string& f : {empty, shrt, cut, other}) std::remove(f.c_str());
}

}  // namespace
}  // namespace synapse

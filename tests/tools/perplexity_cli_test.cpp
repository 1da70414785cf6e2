// `synapse perplexity` against llama-perplexity (llama.cpp v0.5.0): its
// printed figures on stories260K and stories260K-q8_0 over the first 10
// chunks of 256 tokens of WikiText-2, and the KL divergence of the Q8_0 model
// from the F32 one (golden/perplexity/, see its README), plus the base-file
// format, --json, and one clear error line for bad input.
//
// Why the per-chunk values are compared with a tolerance, not digit for
// digit: llama.cpp rounds q/K/V/probabilities to F16 (and Q8_0 activations to
// int8), so two correct engines whose float sums differ in the last bit
// round some value to the other neighbour now and then, and the change
// travels through the KV cache (golden/README.md "Tolerances"). llama.cpp
// v0.5.0's own AVX-512 build reproduces these files digit for digit, but
// synapse's kernels sum in their own (batch-invariant) orders, so its logits
// are not llama.cpp's bit for bit, and a chunk's 127 scored tokens move its
// running PPL by up to ~2e-4 relative on F32 and ~1% on Q8_0 (a flipped int8
// moves a logit by ~1e-2); the final figures, over 1270 tokens, agree within
// the issue's 0.1%.
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

// Per-chunk running PPL: F32 within 5e-4 relative; Q8_0 within 1%/sqrt(i)
// (the noise of i x 127 tokens, see the header comment). Final PPL and its
// uncertainty within 0.1%.
void expect_ppl_matches(const std::string& name, double chunk_tol, bool over_sqrt_i) {
  const test::CliResult r = synapse_cli("perplexity -m " + model(name) + " -f " + kText + kArgs);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string gold = test::slurp(kGolden + name + ".wikitext2-c256-10chunks.txt");
  const std::vector<double> want = running_ppl(gold), got = running_ppl(r.out);
  ASSERT_EQ(want.size(), 10u);
  ASSERT_EQ(got.size(), 10u) << r.out;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i] / want[i], 1.0, over_sqrt_i ? chunk_tol / std::sqrt(i + 1.0) : chunk_tol)
        << name << " [" << i + 1 << "] " << got[i] << " vs llama-perplexity " << want[i];
  const Figure g = final_estimate(gold), s = final_estimate(r.out);
  ASSERT_FALSE(std::isnan(s.value)) << r.out;
  EXPECT_NEAR(s.value / g.value, 1.0, 1e-3) << name << " PPL " << s.value << " vs " << g.value;
  EXPECT_NEAR(s.unc / g.unc, 1.0, 1e-3) << name << " +/- " << s.unc << " vs " << g.unc;
  // stdout holds the running line and the final estimate, nothing else.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
}

TEST(PerplexityCli, F32MatchesLlamaPerplexity) { expect_ppl_matches("stories260K", 5e-4, false); }

TEST(PerplexityCli, Q8_0MatchesLlamaPerplexity) { expect_ppl_matches("stories260K-q8_0", 1e-2, true); }

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

// Q8_0 against llama-perplexity's own F32 base file: every statistic that
// llama-perplexity states with a ± is within that ± of its value, PPL(Q)
// within 0.1%, PPL(base) (from the base file alone) equal to the digits
// shown, each ± within 20% of its own; the percentiles, driven by a few tokens, within 30% (+ 2e-6 for KLD,
// + 0.02 points for Δp); per chunk the KLD, RMS Δp and same-top within twice
// the row's ±. The layout is llama-perplexity's (same header, rows, labels in
// the same order).
TEST(PerplexityCli, KlDivergenceMatchesLlamaPerplexity) {
  const test::CliResult r = synapse_cli("perplexity -m " + model("stories260K-q8_0") +
                                        " --kl-divergence-base " + kBase + " --kl-divergence -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string gold = test::slurp(kGolden + "stories260K-q8_0.wikitext2-c256-10chunks.kld.txt");
  const std::string header = "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence";
  EXPECT_NE(gold.find(header), std::string::npos);
  EXPECT_NE(r.out.find(header), std::string::npos) << r.out;

  const auto want_rows = kld_rows(gold), got_rows = kld_rows(r.out);
  ASSERT_EQ(want_rows.size(), 10u);
  ASSERT_EQ(got_rows.size(), 10u) << r.out;
  for (size_t i = 0; i < 10; ++i) {
    const auto &w = want_rows[i], &g = got_rows[i];
    EXPECT_EQ(g[0], i + 1.0);
    EXPECT_NEAR(g[1] / w[1], 1.0, 1e-2 / std::sqrt(i + 1.0)) << "chunk " << i + 1 << " PPL";
    EXPECT_NEAR(g[5], w[5], 2 * w[6]) << "chunk " << i + 1 << " KLD";
    EXPECT_NEAR(g[7], w[7], 2 * w[8]) << "chunk " << i + 1 << " RMS dp";
    EXPECT_NEAR(g[9], w[9], 2 * w[10]) << "chunk " << i + 1 << " same top p";
  }

  std::vector<std::string> want_order, got_order;
  const auto want = kld_statistics(gold, &want_order), got = kld_statistics(r.out, &got_order);
  // llama-perplexity's log lines ("... I Final ...") carry no ':'-separated figure; only statistics parse.
  ASSERT_EQ(want_order.size(), 34u);
  EXPECT_EQ(got_order, want_order);
  for (const char* label : {"Mean PPL(Q)", "Mean ln(PPL(Q)/PPL(base))", "Mean PPL(Q)/PPL(base)",
                            "Mean PPL(Q)-PPL(base)", "Mean KLD", "Mean Δp", "RMS Δp", "Same top p"}) {
    ASSERT_TRUE(want.count(label) && got.count(label)) << label;
    const Figure w = want.at(label), g = got.at(label);
    EXPECT_NEAR(g.value, w.value, w.unc) << label;
    EXPECT_NEAR(g.unc / w.unc, 1.0, 0.2) << label << " ±";  // a statistic too (RMS Δp: of 4th powers)
  }
  EXPECT_NEAR(got.at("Mean PPL(Q)").value / want.at("Mean PPL(Q)").value, 1.0, 1e-3);
  EXPECT_NEAR(got.at("Mean PPL(base)").value, want.at("Mean PPL(base)").value, 1e-6);
  EXPECT_NEAR(got.at("Mean PPL(base)").unc, want.at("Mean PPL(base)").unc, 1e-6);
  EXPECT_NEAR(got.at("Cor(ln(PPL(Q)), ln(PPL(base)))").value, want.at("Cor(ln(PPL(Q)), ln(PPL(base)))").value, 0.5);
  for (const auto& [label, w] : want) {
    const bool kld = label.ends_with(" KLD"), dp = label.ends_with(" Δp");
    if ((!kld && !dp) || label.starts_with("Mean") || label.starts_with("RMS")) continue;
    EXPECT_NEAR(got.at(label).value, w.value, 0.3 * std::fabs(w.value) + (kld ? 2e-6 : 0.02)) << label;
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
  EXPECT_NEAR(j["ppl"].get<double>() / 114.9362, 1.0, 1e-3);  // llama-perplexity's F32 PPL
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

// --kl-divergence-base writes llama-perplexity's format: the header and the
// tokens byte for byte as llama.cpp's file (the same tokenization and
// chunking), every log-probability within 0.05 of llama.cpp's (F16 rounding
// flips, see the header comment); the run prints the same PPL as a plain run,
// and the Q8_0 model measured against synapse's base gives llama-perplexity's
// KLD within its ±.
TEST(PerplexityCli, WritesLlamaPerplexityBaseFormat) {
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
  double worst = 0;
  for (size_t k = 0; k < mine.log_p.size(); ++k)
    for (size_t i = 0; i < 512; ++i) worst = std::max<double>(worst, std::fabs(mine.log_p[k][i] - llama.log_p[k][i]));
  EXPECT_LT(worst, 0.05);

  const test::CliResult q = synapse_cli("perplexity -m " + model("stories260K-q8_0") + " --kl-divergence-base " +
                                        out + " --kl-divergence --json");
  std::remove(out.c_str());
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const nlohmann::json j = nlohmann::json::parse(q.out);
  EXPECT_NEAR(j["kld"]["mean"].get<double>(), 0.001909, 0.000061);
  EXPECT_NEAR(j["same_top_p"].get<double>(), 0.96378, 0.00524);
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

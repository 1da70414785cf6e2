// synapse bench -m MODEL [-p 512] [-n 128] [-pg P,N] [-t T] [-r 5] [-d 0] [-b N] [-ub N]
//                [-o md|csv|json|jsonl|sql] [--progress] [--no-warmup] [--delay S]
//                [--bw GBps|auto] [--peak GOPS] [--json]
//
// Speed of prefill and decode, measured as llama.cpp's llama-bench does:
//   ppP      a prompt of P tokens, timed (one forward pass, or passes of
//            min(-b, -ub) rows when either is given: llama-bench's defaults
//            are -b 2048 -ub 512, give them to measure as it does);
//   tgN      N decode steps of one token each, timed together;
//   ppP+tgN  (-pg P,N) a prompt of P tokens and then N decode steps, timed
//            together, t/s = (P + N) / time;
//   @ dD     each run after D tokens are already in the KV cache.
// Each test runs -r times after one untimed warm-up decode step
// (--no-warmup: none); the table gives the mean tokens/s ± the sample
// standard deviation over the runs. The tokens are pseudo-random ids (speed
// does not depend on them). -p, -n, -t, -d, -b, -ub, -ctk and -ctv take comma lists
// (-p 512,2048 -t 1,2) or repeat (-p 512 -p 2048), -pg and -m repeat; every
// combination runs.
//
// -o picks llama-bench's output format on stdout: md (this table, the
// default), csv, json (an array of test objects), jsonl (one a line) or sql
// (CREATE TABLE llama_bench + INSERTs), with llama-bench's field names where
// synapse has the quantity (build_commit, cpu_info, model_filename,
// model_type, model_size, model_n_params, n_batch, n_ubatch, n_threads,
// type_k, type_v, n_prompt, n_gen, n_depth, test_time, avg_ns, stddev_ns,
// avg_ts, stddev_ts; json and jsonl add samples_ns and samples_ts), then
// synapse's own (test, n_seq, gbps, bound_ts, ...). -oe writes a format to
// stderr too. --json is synapse's own JSON object (commit, kernels, results).
// --progress prints llama-bench's "benchmark i/N" lines on stderr.
//
// Decode streams the weights once per token, so for tg tests the table also
// gives the bytes streamed per second, GB/s = (weight bytes read per token +
// KV-cache bytes read per token) x t/s, and with --bw the bound
// t/s = bandwidth / bytes per token and the fraction of it reached (issue 6).
// Weight bytes per token: every tensor's data, except that an untied
// token_embd contributes one row only (the embedding lookup) and a MoE
// layer's expert tensors their expert_used_count of expert_count (a token
// reads the experts the router picks: issue 44's bound). KV bytes per
// token: the K and V rows attention reads (of the -ctk/-ctv types),
// averaged over the N steps.
// --bw auto measures the read bandwidth with the thread count of each test
// (bench/bandwidth.hpp, 1 GiB, best of 3) before a tg test's first run and
// after each of its runs; a run's bound comes from the mean of the probes
// right before and right after it, the test's fraction of the bound is the
// mean over its runs of t/s / bound, and "bw GB/s" the mean of the runs'
// bandwidths. Probes around each run, not one per test: a shared host's
// bandwidth moves by tens of percent within seconds (docs/PERFORMANCE.md,
// "Measurements moved out of the code").
//
// Prefill is bound by int8 arithmetic, so pp tests also give the share of
// the machine's int8 peak they reach: int8 GOP per token x t/s / the peak of
// the test's thread count, measured once per thread count before that
// thread count's Context starts (bench/int8_peak.hpp: vnni_peak.c's
// method), or --peak GOPS per thread times the threads. The int8 operations
// are 2 x the elements of the quantized weight matrices (F32/F16/BF16 ones
// multiply in float and are not counted) that a token goes through: every
// layer's (MoE experts counted for the expert_used_count of expert_count the
// router picks) per token, and the output matrix once per pass of P tokens
// (a pp test's pass computes the logits of its last row only, as
// llama-bench's does); an untied token_embd is a lookup. The attention's
// float work is not counted. A model with no quantized matrix gets no share.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../bench/bandwidth.hpp"
#include "../bench/int8_peak.hpp"
#include "commands.hpp"
#include "common_flags.hpp"
#include "progress.hpp"
#include "synapse/error.hpp"
#include "synapse/gguf.hpp"
#include "synapse/synapse.hpp"

#ifndef SYNAPSE_GIT_COMMIT
#define SYNAPSE_GIT_COMMIT "unknown"
#endif

namespace synapse::tools {
namespace {

struct BenchArgs {
  std::vector<std::string> models;
  std::vector<int> n_prompt{512};
  std::vector<int> n_gen{128};
  std::vector<std::string> pg;  // -pg P,N
  std::vector<int> threads;
  std::vector<int> depth{0};
  std::vector<int> batch{1};    // --batch: sequences decoded together (tg tests)
  std::vector<int> n_batch;     // -b: logical batch of a prompt; unset: the whole prompt
  std::vector<int> n_ubatch;    // -ub: physical batch; unset: the whole prompt
  int reps = 5;
  std::string bw;  // "", "auto" or GB/s
  std::optional<double> peak;  // int8 GOPS per thread; unset: measure
  int bw_probe_mib = 1024;     // --bw auto's buffer (hidden: tests shrink it)
  bool json = false;
  std::string output = "md";   // -o
  std::string output_err;      // -oe
  bool progress = false;
  bool warmup = true;
  int delay = 0;               // --delay: seconds between tests
  std::vector<std::string> ctk{"f16"}, ctv{"f16"};  // -ctk, -ctv: comma lists, every pair run
};

struct Result {
  std::string model, path;
  uint64_t size_bytes = 0, params = 0;
  uint64_t weight_bytes_per_token = 0;
  double kv_bytes_per_token = 0;
  std::string type_k = "f16", type_v = "f16";  // the KV cache's types (llama-bench's columns)
  int threads = 0;
  int n_prompt = 0, n_gen = 0, depth = 0;
  int batch = 1;  // sequences decoded together (tg tests)
  int n_batch = 0, n_ubatch = 0;  // rows per Context::decode of a prompt: min of the two (pp and pg tests)
  std::string test;
  std::string test_time;        // when the test started (RFC 3339, UTC), as llama-bench
  std::vector<double> samples;  // tokens/s per run
  double tokens_per_run = 0;    // the tokens a run times (samples_ns = tokens / t/s)
  double avg = 0, sd = 0;
  double bw_gbps = 0;           // 0 = no bandwidth given
  double gop_per_token = 0;     // pp tests: int8 operations per token of the pass (units of 1e9)
  double int8_peak_gops = 0;    // pp tests: the peak of `threads` threads (0: none)
  // --bw auto, tg tests: the probes before the first run and after each
  // run (samples.size() + 1 of them; run i lies between probes i and i + 1).
  std::vector<double> bw_probes;
};

// llama.cpp's llama_ftype names (general.file_type), for the model column.
std::string file_type_name(uint32_t ft) {
  static const std::map<uint32_t, const char*> names = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},
      {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},
      {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"}, {24, "IQ1_S"}, {25, "IQ4_NL"}, {26, "IQ3_S"},
      {27, "IQ3_M"},  {28, "IQ2_S"},  {29, "IQ2_M"},  {30, "IQ4_XS"}, {31, "IQ1_M"},  {32, "BF16"},
      {36, "TQ1_0"},  {37, "TQ2_0"},  {38, "MXFP4_MOE"}};
  const auto it = names.find(ft);
  return it == names.end() ? "ftype " + std::to_string(ft) : it->second;
}

std::string model_label(const Model& m, const std::string& path) {
  std::string name;
  try {
    name = m.gguf().get_string("general.name").value_or("");
  } catch (const Error&) {
  }
  if (name.empty()) {
    name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  }
  std::optional<uint32_t> ft;
  try {
    ft = m.gguf().get_u32("general.file_type");
  } catch (const Error&) {
  }
  return ft ? name + " " + file_type_name(*ft) : name;
}

// The share of a MoE layer's experts a token goes through,
// expert_used_count / expert_count (1 for a dense model).
double expert_share(const Model& m) {
  try {
    const std::string arch = m.gguf().get_string("general.architecture").value_or("");
    const auto n_used = m.gguf().get_u32(arch + ".expert_used_count");
    const auto n_all = m.gguf().get_u32(arch + ".expert_count");
    if (n_used && n_all && *n_all > 0) return static_cast<double>(*n_used) / *n_all;
  } catch (const Error&) {
  }
  return 1;
}

// A tensor holding every expert of a layer (ffn_gate_exps and the like, or
// Mixtral's older per-expert blk.N.ffn_gate.E).
bool is_expert_tensor(const std::string& name) {
  return name.find("_exps.") != std::string::npos ||
         (name.find(".ffn_") != std::string::npos && std::count(name.begin(), name.end(), '.') == 4);
}

// Weight bytes a decode step reads (see the header comment).
uint64_t weight_bytes_per_token(const Model& m) {
  const double share = expert_share(m);
  double n = 0;
  const bool untied = m.gguf().find_tensor("output.weight") != nullptr;
  for (const auto& t : m.gguf().tensors()) {
    if (untied && t.name == "token_embd.weight")
      n += static_cast<double>(t.n_bytes / static_cast<uint64_t>(std::max<int64_t>(1, t.ne[1])));
    else
      n += static_cast<double>(t.n_bytes) * (is_expert_tensor(t.name) ? share : 1.0);
  }
  return static_cast<uint64_t>(n);
}

// The int8 operations (2 per multiply-add, in units of 1e9) of the
// quantized matrix products (see the header comment): those every token
// goes through (`layers`) and the output matrix's (`output`, once per pass).
struct Int8Ops {
  double layers = 0, output = 0;
  // Per token of a pass of `p` tokens that computes one row of logits.
  double per_token(int p) const { return layers + output / std::max(p, 1); }
};

Int8Ops int8_ops(const Model& m) {
  const bool untied = m.gguf().find_tensor("output.weight") != nullptr;
  const double used = expert_share(m);
  Int8Ops ops;
  for (const auto& t : m.gguf().tensors()) {
    if (t.ne[1] <= 1 || !t.name.ends_with(".weight")) continue;  // norms, biases, vectors
    if (t.type == GgmlType::F32 || t.type == GgmlType::F16 || t.type == GgmlType::BF16) continue;  // float products
    const bool output = t.name == "output.weight" || (t.name == "token_embd.weight" && !untied);
    if (t.name == "token_embd.weight" && untied) continue;  // a lookup, not a product
    double elems = 1;
    for (int64_t d : t.ne) elems *= static_cast<double>(std::max<int64_t>(d, 1));
    (output ? ops.output : ops.layers) += 2 * (is_expert_tensor(t.name) ? elems * used : elems) / 1e9;
  }
  return ops;
}

// Pseudo-random token ids in [0, n_vocab) (xorshift64; fixed seed).
struct TokenStream {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  int64_t n_vocab;
  token_id next() {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return static_cast<token_id>(s % static_cast<uint64_t>(n_vocab));
  }
};

void finish(Result& r) {
  double sum = 0;
  for (double x : r.samples) sum += x;
  r.avg = sum / static_cast<double>(r.samples.size());
  double ss = 0;
  for (double x : r.samples) ss += (x - r.avg) * (x - r.avg);
  r.sd = r.samples.size() > 1 ? std::sqrt(ss / static_cast<double>(r.samples.size() - 1)) : 0.0;
}

double bytes_per_token(const Result& r) { return static_cast<double>(r.weight_bytes_per_token) + r.kv_bytes_per_token; }

// Run i's bandwidth in GB/s: the mean of the probes before and after it
// (i + 1 < probes.size()).
double run_bandwidth(const std::vector<double>& probes, size_t i) { return (probes[i] + probes[i + 1]) / 2; }

// A tg test's fraction of its bound (r.bw_gbps > 0): with probes around
// every run, the mean over the runs of t/s / (run_bandwidth / bytes per
// token); else avg t/s / (r.bw_gbps / bytes per token).
double fraction_of_bound(const Result& r) {
  const double bytes = bytes_per_token(r);
  if (r.bw_probes.size() != r.samples.size() + 1) return r.avg * bytes / (r.bw_gbps * 1e9);
  double sum = 0;
  for (size_t i = 0; i < r.samples.size(); ++i) sum += r.samples[i] * bytes / (run_bandwidth(r.bw_probes, i) * 1e9);
  return sum / static_cast<double>(r.samples.size());
}

// The mean of the runs' bandwidths.
double mean_run_bandwidth(const std::vector<double>& probes) {
  double sum = 0;
  for (size_t i = 0; i + 1 < probes.size(); ++i) sum += run_bandwidth(probes, i);
  return sum / static_cast<double>(probes.size() - 1);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string params_str(uint64_t n) {
  return n >= 1000000000ull ? fmt("%.2f B", n / 1e9) : n >= 1000000ull ? fmt("%.2f M", n / 1e6) : fmt("%.2f K", n / 1e3);
}

std::string size_str(uint64_t n) {
  return n >= (1ull << 30) ? fmt("%.2f GiB", n / 1073741824.0) : fmt("%.2f MiB", n / 1048576.0);
}

// A pp test's share of the int8 peak (0 when no peak is known).
double fraction_of_int8_peak(const Result& r) {
  return r.n_prompt > 0 && r.int8_peak_gops > 0 ? r.gop_per_token * r.avg / r.int8_peak_gops : 0.0;
}

void print_table(FILE* out, const std::vector<Result>& rs, bool with_bound) {
  // llama-bench's type_k/type_v columns, where a test ran with other than f16.
  const bool kv_cols =
      std::any_of(rs.begin(), rs.end(), [](const Result& r) { return r.type_k != "f16" || r.type_v != "f16"; });
  std::fprintf(out, "| model | size | params | threads |%s test | t/s | GB/s | int8 %% |%s\n",
               kv_cols ? " type_k | type_v |" : "", with_bound ? " bound t/s | % of bound |" : "");
  std::fprintf(out, "| --- | ---: | ---: | ---: |%s ---: | ---: | ---: | ---: |%s\n", kv_cols ? " ---: | ---: |" : "",
               with_bound ? " ---: | ---: |" : "");
  for (const Result& r : rs) {
    const bool tg = r.n_gen > 0;
    std::string gbps = "-", bound = "-", pct = "-";
    const std::string int8 = fraction_of_int8_peak(r) > 0 ? fmt("%.1f%%", 100 * fraction_of_int8_peak(r)) : "-";
    if (tg) {
      gbps = fmt("%.2f", bytes_per_token(r) * r.avg / 1e9);
      if (r.bw_gbps > 0) {
        const double b = r.bw_gbps * 1e9 / bytes_per_token(r);
        bound = fmt("%.2f", b);
        pct = fmt("%.0f%%", 100.0 * fraction_of_bound(r));
      }
    }
    std::fprintf(out, "| %s | %s | %s | %d |", r.model.c_str(), size_str(r.size_bytes).c_str(),
                 params_str(r.params).c_str(), r.threads);
    if (kv_cols) std::fprintf(out, " %s | %s |", r.type_k.c_str(), r.type_v.c_str());
    std::fprintf(out, " %s | %.2f ± %.2f | %s | %s |", r.test.c_str(), r.avg, r.sd, gbps.c_str(), int8.c_str());
    if (with_bound) std::fprintf(out, " %s | %s |", bound.c_str(), pct.c_str());
    std::fprintf(out, "\n");
  }
}

nlohmann::json to_json(const std::vector<Result>& rs) {
  nlohmann::json out;
  out["commit"] = SYNAPSE_GIT_COMMIT;
  out["kernels"] = kernel_isa();
  out["results"] = nlohmann::json::array();
  for (const Result& r : rs) {
    nlohmann::json j;
    j["model"] = r.model;
    j["model_path"] = r.path;
    j["size_bytes"] = r.size_bytes;
    j["params"] = r.params;
    j["threads"] = r.threads;
    j["type_k"] = r.type_k;
    j["type_v"] = r.type_v;
    j["test"] = r.test;
    j["n_prompt"] = r.n_prompt;
    j["n_gen"] = r.n_gen;
    j["batch"] = r.batch;
    j["n_depth"] = r.depth;
    j["samples_ts"] = r.samples;
    j["avg_ts"] = r.avg;
    j["stddev_ts"] = r.sd;
    if (r.n_prompt > 0) j["gop_per_token"] = r.gop_per_token;
    if (r.n_prompt > 0 && r.int8_peak_gops > 0) {
      j["int8_peak_gops"] = r.int8_peak_gops;
      j["fraction_of_int8_peak"] = fraction_of_int8_peak(r);
    }
    if (r.n_gen > 0) {
      j["weight_bytes_per_token"] = r.weight_bytes_per_token;
      j["kv_bytes_per_token"] = r.kv_bytes_per_token;
      j["gbps"] = bytes_per_token(r) * r.avg / 1e9;
      if (r.bw_gbps > 0) {
        const double b = r.bw_gbps * 1e9 / bytes_per_token(r);
        j["bw_gbps"] = r.bw_gbps;
        if (!r.bw_probes.empty()) {
          j["bw_probes_gbps"] = r.bw_probes;
          j["bw_before_gbps"] = r.bw_probes.front();
          j["bw_after_gbps"] = r.bw_probes.back();
        }
        j["bound_ts"] = b;
        j["fraction_of_bound"] = fraction_of_bound(r);
      }
    }
    out["results"].push_back(j);
  }
  return out;
}

// -o csv|json|jsonl|sql: llama-bench's fields that synapse has, in its
// order and with its names, then synapse's own. Type: 's' text, 'i'
// integer, 'f' real. A value synapse does not have for a test is null (an
// empty CSV field, JSON null, SQL NULL).
struct Field {
  const char* name;
  char type;
};
constexpr Field kFields[] = {
    {"build_commit", 's'}, {"cpu_info", 's'},     {"backends", 's'},    {"model_filename", 's'}, {"model_type", 's'},
    {"model_size", 'i'},   {"model_n_params", 'i'}, {"n_batch", 'i'},   {"n_ubatch", 'i'},       {"n_threads", 'i'},
    {"type_k", 's'},       {"type_v", 's'},       {"n_gpu_layers", 'i'}, {"n_prompt", 'i'},     {"n_gen", 'i'},
    {"n_depth", 'i'},      {"test_time", 's'},    {"avg_ns", 'i'},      {"stddev_ns", 'i'},      {"avg_ts", 'f'},
    {"stddev_ts", 'f'},    {"test", 's'},         {"n_seq", 'i'},       {"weight_bytes_per_token", 'i'},
    {"kv_bytes_per_token", 'f'}, {"gbps", 'f'},   {"bw_gbps", 'f'},     {"bound_ts", 'f'}, {"fraction_of_bound", 'f'},
    {"gop_per_token", 'f'}, {"int8_peak_gops", 'f'}, {"fraction_of_int8_peak", 'f'}};

// Each run's time in ns (llama-bench's samples_ns).
std::vector<double> samples_ns(const Result& r) {
  std::vector<double> ns;
  for (double ts : r.samples) ns.push_back(r.tokens_per_run / std::max(ts, 1e-12) * 1e9);
  return ns;
}

std::pair<double, double> mean_sd(const std::vector<double>& v) {
  double sum = 0, ss = 0;
  for (double x : v) sum += x;
  const double mean = v.empty() ? 0 : sum / static_cast<double>(v.size());
  for (double x : v) ss += (x - mean) * (x - mean);
  return {mean, v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0};
}

std::vector<std::optional<std::string>> field_values(const Result& r) {
  using V = std::optional<std::string>;
  const auto i = [](double x) -> V { return std::to_string(static_cast<long long>(std::llround(x))); };
  const auto f = [](double x) -> V { return fmt("%.6f", x); };
  const auto [avg_ns, sd_ns] = mean_sd(samples_ns(r));
  const std::string file = r.path.substr(r.path.find_last_of('/') == std::string::npos ? 0 : r.path.find_last_of('/') + 1);
  const bool tg = r.n_gen > 0 && r.n_prompt == 0;
  const bool bound = tg && r.bw_gbps > 0;
  return {V(SYNAPSE_GIT_COMMIT), V(system_info()), V("CPU"), V(file), V(r.model), i(static_cast<double>(r.size_bytes)),
          i(static_cast<double>(r.params)), i(r.n_batch), i(r.n_ubatch), i(r.threads), V(r.type_k), V(r.type_v), i(0),
          i(r.n_prompt), i(r.n_gen), i(r.depth), V(r.test_time), i(avg_ns), i(sd_ns), f(r.avg), f(r.sd), V(r.test),
          i(r.batch), tg ? i(static_cast<double>(r.weight_bytes_per_token)) : V(), tg ? f(r.kv_bytes_per_token) : V(),
          tg ? f(bytes_per_token(r) * r.avg / 1e9) : V(), bound ? f(r.bw_gbps) : V(),
          bound ? f(r.bw_gbps * 1e9 / bytes_per_token(r)) : V(), bound ? f(fraction_of_bound(r)) : V(),
          r.n_prompt > 0 && r.n_gen == 0 ? f(r.gop_per_token) : V(),
          r.int8_peak_gops > 0 ? f(r.int8_peak_gops) : V(), fraction_of_int8_peak(r) > 0 ? f(fraction_of_int8_peak(r)) : V()};
}

nlohmann::ordered_json test_json(const Result& r) {
  nlohmann::ordered_json j;
  const auto values = field_values(r);
  for (size_t k = 0; k < std::size(kFields); ++k) {
    const auto& v = values[k];
    if (!v) j[kFields[k].name] = nullptr;
    else if (kFields[k].type == 's') j[kFields[k].name] = *v;
    else if (kFields[k].type == 'i') j[kFields[k].name] = std::stoll(*v);
    else j[kFields[k].name] = std::stod(*v);
  }
  std::vector<long long> ns;
  for (double x : samples_ns(r)) ns.push_back(std::llround(x));
  j["samples_ns"] = ns;
  j["samples_ts"] = r.samples;
  return j;
}

std::string csv_quote(const std::string& v) {
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string sql_quote(const std::string& v) {
  std::string q = "'";
  for (char c : v) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

// Writes the results in format `fmt_name` (md, csv, json, jsonl, sql) to `out`.
void print_results(FILE* out, const std::string& fmt_name, const std::vector<Result>& rs, bool with_bound) {
  if (fmt_name == "md") {
    print_table(out, rs, with_bound);
  } else if (fmt_name == "csv") {
    for (size_t k = 0; k < std::size(kFields); ++k) std::fprintf(out, "%s%s", k ? "," : "", kFields[k].name);
    std::fprintf(out, "\n");
    for (const Result& r : rs) {
      const auto values = field_values(r);
      for (size_t k = 0; k < values.size(); ++k)
        std::fprintf(out, "%s%s", k ? "," : "", values[k] ? csv_quote(*values[k]).c_str() : "");
      std::fprintf(out, "\n");
    }
  } else if (fmt_name == "json") {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const Result& r : rs) arr.push_back(test_json(r));
    std::fprintf(out, "%s\n", arr.dump(2).c_str());
  } else if (fmt_name == "jsonl") {
    for (const Result& r : rs) std::fprintf(out, "%s\n", test_json(r).dump().c_str());
  } else if (fmt_name == "sql") {
    std::fprintf(out, "CREATE TABLE IF NOT EXISTS llama_bench (\n");
    for (size_t k = 0; k < std::size(kFields); ++k)
      std::fprintf(out, "  %s %s%s\n", kFields[k].name,
                   kFields[k].type == 's' ? "TEXT" : kFields[k].type == 'i' ? "INTEGER" : "REAL",
                   k + 1 < std::size(kFields) ? "," : "");
    std::fprintf(out, ");\n\n");
    for (const Result& r : rs) {
      std::fprintf(out, "INSERT INTO llama_bench (");
      for (size_t k = 0; k < std::size(kFields); ++k) std::fprintf(out, "%s%s", k ? ", " : "", kFields[k].name);
      std::fprintf(out, ") VALUES (");
      const auto values = field_values(r);
      for (size_t k = 0; k < values.size(); ++k)
        std::fprintf(out, "%s%s", k ? ", " : "", values[k] ? sql_quote(*values[k]).c_str() : "NULL");
      std::fprintf(out, ");\n");
    }
  }
}

// -pg "P,N" -> {P, N}. Throws Error naming the value.
std::pair<int, int> parse_pg(const std::string& v) {
  const size_t comma = v.find(',');
  int p = -1, n = -1;
  try {
    size_t a = 0, b = 0;
    if (comma != std::string::npos) {
      p = std::stoi(v.substr(0, comma), &a);
      n = std::stoi(v.substr(comma + 1), &b);
      if (a != comma || b != v.size() - comma - 1) p = -1;
    }
  } catch (const std::exception&) {
    p = -1;
  }
  if (p < 0 || n < 0) throw Error(Errc::invalid_argument, "bench: -pg takes PROMPT,GEN (two counts >= 0), got '" + v + "'");
  return {p, n};
}

void check_args(const BenchArgs& a) {
  const auto bad = [](const std::string& m) { throw Error(Errc::invalid_argument, "bench: " + m); };
  if (a.models.empty()) bad("-m MODEL is required");
  if (a.reps < 1) bad("-r must be at least 1");
  for (int p : a.n_prompt) if (p < 0) bad("-p values must be >= 0");
  for (int n : a.n_gen) if (n < 0) bad("-n values must be >= 0");
  for (int b : a.batch) if (b < 1 || b > 512) bad("--batch values must be in 1..512");
  for (int d : a.depth) if (d < 0) bad("-d values must be >= 0");
  for (int t : a.threads)
    if (t < 1 || t > max_threads) bad("-t values must be in [1, 512] (ggml's GGML_MAX_N_THREADS)");
  for (int b : a.n_batch) if (b < 1) bad("-b values must be at least 1");
  for (int b : a.n_ubatch) if (b < 1) bad("-ub values must be at least 1");
  if (a.delay < 0) bad("--delay must be >= 0");
  for (const std::string& f : {a.output, a.output_err})
    if (!f.empty() && f != "md" && f != "csv" && f != "json" && f != "jsonl" && f != "sql")
      bad("-o/-oe takes md, csv, json, jsonl or sql, got '" + f + "'");
  if (a.json && a.output != "md") bad("--json (synapse's JSON object) and -o " + a.output + " exclude each other");
  bool any_pg = false;
  for (const std::string& v : a.pg) {
    const auto [p, n] = parse_pg(v);
    any_pg = any_pg || p > 0 || n > 0;
  }
  const bool any_p = std::any_of(a.n_prompt.begin(), a.n_prompt.end(), [](int p) { return p > 0; });
  const bool any_n = std::any_of(a.n_gen.begin(), a.n_gen.end(), [](int n) { return n > 0; });
  if (!any_p && !any_n && !any_pg) bad("nothing to run: every -p and -n value is 0");
  if (!a.bw.empty() && a.bw != "auto") {
    char* end = nullptr;
    const double v = std::strtod(a.bw.c_str(), &end);
    if (end == a.bw.c_str() || *end != '\0' || !(v > 0) || !std::isfinite(v))
      bad("--bw must be a bandwidth in GB/s or 'auto', got '" + a.bw + "'");
  }
  if (a.peak && !(*a.peak > 0 && std::isfinite(*a.peak)))
    bad("--peak must be the int8 peak in GOPS per thread (> 0), got " + fmt("%g", *a.peak));
}

int run(BenchArgs a) {
  check_args(a);
  if (a.threads.empty()) a.threads.push_back(default_thread_count());
  const auto probe = [&](int threads) {
    std::fprintf(stderr, "synapse bench: measuring read bandwidth with %d thread(s)...\n", threads);
    return bench::read_bandwidth_gbps(threads, static_cast<size_t>(a.bw_probe_mib) << 20, 3);
  };
  // A bandwidth given in GB/s (--bw auto: each tg test probes around its runs, below).
  const double given_bw = a.bw.empty() || a.bw == "auto" ? 0.0 : std::strtod(a.bw.c_str(), nullptr);

  // The int8 peak per thread count: measured once each (when a pp test of
  // a quantized model runs), before that thread count's Context starts its
  // workers.
  std::map<int, double> peaks;
  const bool any_pp = std::any_of(a.n_prompt.begin(), a.n_prompt.end(), [](int p) { return p > 0; });
  const auto int8_peak = [&](int threads) {
    if (a.peak) return *a.peak * threads;
    auto it = peaks.find(threads);
    if (it == peaks.end()) {
      const bench::Int8Probe probe = bench::int8_probe();
      if (probe.run != nullptr)
        std::fprintf(stderr, "synapse bench: measuring the int8 peak (%s) with %d thread(s)...\n", probe.name, threads);
      it = peaks.emplace(threads, bench::int8_peak_gops(threads)).first;
    }
    return it->second;
  };

  std::vector<Result> results;
  // -ctk/-ctv pairs, as llama-bench runs them (every K type with every V type).
  std::vector<std::pair<std::string, std::string>> kv_pairs;
  for (const std::string& k : a.ctk)
    for (const std::string& v : a.ctv) kv_pairs.emplace_back(k, v);
  // -b/-ub pairs for the prompt tests ({0, 0}: the whole prompt in one pass).
  std::vector<std::pair<int, int>> batch_pairs;
  for (int nb : a.n_batch.empty() ? std::vector<int>{0} : a.n_batch)
    for (int nub : a.n_ubatch.empty() ? std::vector<int>{0} : a.n_ubatch) batch_pairs.emplace_back(nb, nub);
  // Tests in all, for --progress's "benchmark i/N".
  const auto count_if = [](const std::vector<int>& v) { return static_cast<int>(std::count_if(v.begin(), v.end(), [](int x) { return x > 0; })); };
  const int n_tests = static_cast<int>(a.models.size() * kv_pairs.size() * a.threads.size() * a.depth.size()) *
                      (count_if(a.n_prompt) * static_cast<int>(batch_pairs.size()) +
                       count_if(a.n_gen) * static_cast<int>(a.batch.size()) +
                       static_cast<int>(a.pg.size() * batch_pairs.size()));
  int test_no = 0;
  const auto begin_test = [&](Result& r) {
    if (test_no > 0 && a.delay > 0) std::this_thread::sleep_for(std::chrono::seconds(a.delay));
    ++test_no;
    if (a.progress) std::fprintf(stderr, "synapse bench: benchmark %d/%d: starting %s\n", test_no, n_tests, r.test.c_str());
    char buf[32];
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(buf, sizeof buf, "%FT%TZ", &tm);
    r.test_time = buf;
  };
  // A test's samples summed up, its line on stderr, and its row kept.
  const auto end_test = [&](Result& r) {
    finish(r);
    std::fprintf(stderr, "synapse bench: %s t=%d %s: %.2f t/s\n", r.model.c_str(), r.threads, r.test.c_str(), r.avg);
    results.push_back(std::move(r));
  };
  // The kernel table in use (SYNAPSE_ISA / SYNAPSE_NO_SIMD and cpuid).
  if (!a.json && a.output == "md")
    std::printf("synapse bench, commit %s, %s\n\n", SYNAPSE_GIT_COMMIT, system_info().c_str());
  for (const std::string& path : a.models) {
    const Model m = load_model(path);
    Result base;
    base.model = model_label(m, path);
    base.path = path;
    base.size_bytes = m.weight_bytes();
    base.params = m.n_params();
    base.weight_bytes_per_token = weight_bytes_per_token(m);
    const Int8Ops ops = int8_ops(m);
    int max_p = *std::max_element(a.n_prompt.begin(), a.n_prompt.end());
    const int max_n = *std::max_element(a.n_gen.begin(), a.n_gen.end());
    for (const std::string& v : a.pg) max_p = std::max(max_p, parse_pg(v).first + parse_pg(v).second);
    for (const auto& [ctk, ctv] : kv_pairs) {
      const GgmlType type_k = kv_cache_type_from_name(ctk), type_v = kv_cache_type_from_name(ctv);
      const uint64_t kv_row_bytes = m.kv_bytes_per_position(type_k, type_v);
      base.type_k = kv_type_label(type_k);
      base.type_v = kv_type_label(type_v);
      if (!a.json && a.output == "md")
        std::printf("%s: KV cache K %s, V %s: %llu bytes per token\n\n", base.model.c_str(), base.type_k.c_str(),
                    base.type_v.c_str(), static_cast<unsigned long long>(kv_row_bytes));
      TokenStream toks{.n_vocab = m.n_vocab()};
      for (int threads : a.threads) {
        // (No quantized matrix, no int8 share: nothing to measure the peak for.)
        const double peak = any_pp && ops.per_token(1) > 0 ? int8_peak(threads) : 0.0;
        Context ctx(m, threads);
        ctx.set_kv_types(type_k, type_v);
        for (int depth : a.depth) {
          // Each run rewinds it to `depth` (Sequence::truncate; a sliding-window
          // model whose window a run overruns cannot rewind, and says so; a
          // model with recurrent layers, whose state cannot be cut back, takes
          // a copy of the filled cache instead).
          Sequence kv = ctx.new_sequence(static_cast<int64_t>(depth) + std::max(max_p, max_n) + 1);
          std::optional<Sequence> at_depth;
          const auto rewind = [&](Sequence& s) {
            if (at_depth) s = at_depth->fork(depth);
            else s.truncate(depth);
          };
          if (depth > 0) {
            // Fill the cache to `depth` once (untimed); each run rewinds to it.
            const auto t0 = std::chrono::steady_clock::now();
            for (int done = 0; done < depth;) {
              const int chunk = std::min(512, depth - done);
              std::vector<token_id> batch(static_cast<size_t>(chunk));
              for (token_id& t : batch) t = toks.next();
              ctx.decode(kv, batch);
              done += chunk;
            }
            std::fprintf(stderr, "synapse bench: %s: filled %d tokens of context in %.1f s\n", base.model.c_str(),
                         depth, seconds_since(t0));
            if (m.has_recurrent_layers()) at_depth = kv.fork(depth);
          }
          // n decode steps of one token each on kv.
          const auto decode_steps = [&](int n) {
            for (int i = 0; i < n; ++i) {
              const token_id one[1] = {toks.next()};
              ctx.decode(kv, one);
            }
          };
          const auto warm_up = [&] {
            if (!a.warmup) return;
            if (a.progress) std::fprintf(stderr, "synapse bench: benchmark %d/%d: warmup run\n", test_no, n_tests);
            rewind(kv);
            decode_steps(1);
          };
          // A prompt of p tokens after `depth`, in passes of `rows` rows.
          const auto prompt = [&](int p, int rows) {
            std::vector<token_id> batch(static_cast<size_t>(p));
            for (token_id& t : batch) t = toks.next();
            for (int done = 0; done < p; done += rows)
              ctx.decode(kv, std::span<const token_id>(batch).subspan(static_cast<size_t>(done),
                                                                       static_cast<size_t>(std::min(rows, p - done))));
          };
          for (int p : a.n_prompt) {
            if (p == 0) continue;
            for (const auto& [nb, nub] : batch_pairs) {
            Result r = base;
            r.threads = threads, r.n_prompt = p, r.depth = depth, r.bw_gbps = given_bw;
            r.n_batch = nb > 0 ? nb : p, r.n_ubatch = nub > 0 ? nub : p;
            r.test = "pp" + std::to_string(p) + (depth ? " @ d" + std::to_string(depth) : "");
            r.gop_per_token = ops.per_token(p);
            r.int8_peak_gops = r.gop_per_token > 0 ? peak : 0.0;
            r.tokens_per_run = p;
            begin_test(r);
            warm_up();
            const int rows = std::min(r.n_batch, r.n_ubatch);
            for (int rep = 0; rep < a.reps; ++rep) {
              if (a.progress) std::fprintf(stderr, "synapse bench: benchmark %d/%d: prompt run %d/%d\n", test_no, n_tests, rep + 1, a.reps);
              rewind(kv);
              const auto t0 = std::chrono::steady_clock::now();
              prompt(p, rows);
              r.samples.push_back(p / std::max(seconds_since(t0), 1e-9));
            }
            end_test(r);
            }
          }
          // -pg P,N: a prompt and then N decode steps, timed together.
          for (const std::string& v : a.pg) {
            const auto [p, n] = parse_pg(v);
            if (p == 0 && n == 0) continue;
            for (const auto& [nb, nub] : batch_pairs) {
              Result r = base;
              r.threads = threads, r.n_prompt = p, r.n_gen = n, r.depth = depth, r.bw_gbps = 0;
              r.n_batch = nb > 0 ? nb : std::max(p, 1), r.n_ubatch = nub > 0 ? nub : std::max(p, 1);
              r.test = "pp" + std::to_string(p) + "+tg" + std::to_string(n) + (depth ? " @ d" + std::to_string(depth) : "");
              r.tokens_per_run = p + n;
              begin_test(r);
              warm_up();
              const int rows = std::min(r.n_batch, r.n_ubatch);
              for (int rep = 0; rep < a.reps; ++rep) {
                if (a.progress) std::fprintf(stderr, "synapse bench: benchmark %d/%d: run %d/%d\n", test_no, n_tests, rep + 1, a.reps);
                rewind(kv);
                const auto t0 = std::chrono::steady_clock::now();
                if (p > 0) prompt(p, rows);
                decode_steps(n);
                r.samples.push_back((p + n) / std::max(seconds_since(t0), 1e-9));
              }
              end_test(r);
            }
          }
          for (int n : a.n_gen) {
            if (n == 0) continue;
            for (int b : a.batch) {
            Result r = base;
            r.threads = threads, r.n_gen = n, r.depth = depth, r.bw_gbps = given_bw, r.batch = b;
            r.test = "tg" + std::to_string(n) + (depth ? " @ d" + std::to_string(depth) : "") +
                     (b > 1 ? " x" + std::to_string(b) : "");
            r.n_batch = r.n_ubatch = b;  // rows of each decode step
            r.tokens_per_run = static_cast<double>(n) * b;
            begin_test(r);
            // With B sequences a step streams the weights once for B tokens.
            r.weight_bytes_per_token = base.weight_bytes_per_token / static_cast<uint64_t>(b);
            // Attention reads positions 0..n_past at each step: on average
            // depth + (n + 1) / 2 rows (bounded by a sliding window's capacity).
            const double rows = std::min<double>(depth + (n + 1) / 2.0, static_cast<double>(kv.capacity()));
            r.kv_bytes_per_token = rows * static_cast<double>(kv_row_bytes);
            // --bw auto: a probe before the first run and after each; the
            // untimed warm-up step follows every probe but the last (a probe
            // flushes the caches), else it runs once before the first run.
            if (a.bw == "auto") r.bw_probes.push_back(probe(threads));
            warm_up();
            const auto probe_after = [&](int rep) {
              if (a.bw != "auto") return;
              r.bw_probes.push_back(probe(threads));
              if (rep + 1 < a.reps) warm_up();
            };
            if (b == 1) {
              for (int rep = 0; rep < a.reps; ++rep) {
                if (a.progress)
                  std::fprintf(stderr, "synapse bench: benchmark %d/%d: generation run %d/%d\n", test_no, n_tests, rep + 1, a.reps);
                rewind(kv);
                const auto t0 = std::chrono::steady_clock::now();
                decode_steps(n);
                r.samples.push_back(n / std::max(seconds_since(t0), 1e-9));
                probe_after(rep);
              }
            } else {
              // B sequences, each holding the same `depth` tokens (forks of the
              // filled cache), decode one token each per batched decode step;
              // t/s counts the tokens of all sequences (aggregate throughput).
              std::vector<Sequence> seqs;
              for (int s = 0; s < b; ++s) seqs.push_back(at_depth ? at_depth->fork(depth) : kv.fork(depth));
              Batch step;
              for (int rep = 0; rep < a.reps; ++rep) {
                for (auto& sq : seqs) rewind(sq);
                const auto t0 = std::chrono::steady_clock::now();
                for (int i = 0; i < n; ++i) {
                  step.clear();
                  for (int s = 0; s < b; ++s) step.add(seqs[static_cast<size_t>(s)], toks.next(), true);
                  ctx.decode(step);
                }
                r.samples.push_back(static_cast<double>(n) * b / std::max(seconds_since(t0), 1e-9));
                probe_after(rep);
              }
            }
            if (a.bw == "auto") r.bw_gbps = mean_run_bandwidth(r.bw_probes);
            end_test(r);
            }
          }
        }
      }
    }
  }
  if (!a.output_err.empty()) print_results(stderr, a.output_err, results, !a.bw.empty());
  if (a.json) {
    std::printf("%s\n", to_json(results).dump(2).c_str());
  } else if (a.output != "md") {
    print_results(stdout, a.output, results, !a.bw.empty());
  } else {
    print_table(stdout, results, !a.bw.empty());
    bool any_peak = false;
    for (const Result& r : results) any_peak = any_peak || r.int8_peak_gops > 0;
    if (any_peak) {
      std::printf("\nint8 %% = GOP per token x t/s / int8 peak:");
      if (a.peak) std::printf(" %.1f GOPS per thread (given)", *a.peak);
      else
        for (const auto& [t, g] : peaks) std::printf(" %.1f GOPS with %d thread(s) (%s, measured)", g, t, bench::int8_probe().name);
      for (const Result& r : results)
        if (r.int8_peak_gops > 0) std::printf("; %s %s %.3g GOP per token", r.model.c_str(), r.test.c_str(), r.gop_per_token);
      std::printf("\n");
    }
    if (!a.bw.empty()) {
      std::printf("\nbound t/s = read bandwidth / (weight + KV bytes per token); bandwidth:");
      if (a.bw == "auto") {
        std::printf(" measured before each tg run and after it; %% of bound = the mean over the runs of t/s /"
                    " bound from the mean of the run's two probes:");
        for (const Result& r : results) {
          if (r.bw_probes.empty()) continue;
          std::printf("\n  %s t=%d %s: probes", r.model.c_str(), r.threads, r.test.c_str());
          for (double p : r.bw_probes) std::printf(" %.1f", p);
          std::printf(" GB/s (runs' mean %.1f)", r.bw_gbps);
        }
      } else {
        std::printf(" %.2f GB/s (given)", given_bw);
      }
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  app.add_option("-m,--model", a->models, "GGUF model file (repeat for several)")->required();
  app.add_option("--cache-type-k", a->ctk,
                 "KV cache type for K (-ctk), comma list: f16 (default), bf16, q8_0, q4_0, q5_0, iq4_nl")
      ->delimiter(',')
      ->check(kv_type_name());
  app.add_option("--cache-type-v", a->ctv,
                 "KV cache type for V (-ctv), comma list: f16 (default), bf16, q8_0, q4_0, q5_0, iq4_nl")
      ->delimiter(',')
      ->check(kv_type_name());
  app.add_option("-p,--n-prompt", a->n_prompt, "prompt tokens per pp test, comma list (default 512; 0 = none)")
      ->delimiter(',');
  app.add_option("-n,--n-gen", a->n_gen, "tokens per tg test, comma list (default 128; 0 = none)")->delimiter(',');
  app.add_option("-t,--threads", a->threads, "threads, comma list (default: physical cores)")->delimiter(',');
  app.add_option("-d,--n-depth", a->depth, "tokens already in the KV cache, comma list (default 0)")->delimiter(',');
  app.add_option("--pg", a->pg, "a prompt of P tokens and then N generated, timed together: P,N (-pg; repeatable)");
  app.add_option("-b,--batch-size", a->n_batch,
                 "prompt rows per logical batch, comma list (default: the whole prompt; llama-bench's is 2048)")
      ->delimiter(',');
  app.add_option("--ubatch-size", a->n_ubatch,
                 "prompt rows per forward pass, comma list (-ub; default: the whole prompt; llama-bench's is 512)")
      ->delimiter(',');
  app.add_option("-r,--repetitions", a->reps, "runs per test (default 5)");
  app.add_option("-o,--output", a->output, "output format on stdout: md (default), csv, json, jsonl, sql");
  app.add_option("--output-err", a->output_err, "also print the results to stderr in this format (-oe)");
  app.add_flag("--progress", a->progress, "print test progress lines on stderr");
  app.add_flag("!--no-warmup", a->warmup, "skip the untimed warm-up step before each test");
  app.add_option("--delay", a->delay, "seconds to wait between tests (default 0)");
  app.add_option("--batch", a->batch,
                 "sequences decoded together in tg tests, comma list (default 1); t/s is the aggregate")
      ->delimiter(',');
  app.add_option("--bw", a->bw, "read bandwidth in GB/s for the decode bound, or 'auto' to measure it");
  app.add_option("--peak", a->peak, "int8 peak in GOPS per thread for the pp tests' int8 % (default: measured)");
  // A 1 GiB buffer is far past any cache; the CLI tests check the probes'
  // bookkeeping, not the bandwidth, with a small one (ASan reads 12 GiB slowly).
  app.add_option("--bw-probe-mib", a->bw_probe_mib, "--bw auto's buffer in MiB")->check(CLI::Range(1, 1 << 16))->group("");
  app.add_flag("--json", a->json, "print the results as synapse's JSON object (commit, kernels, results)");
  return [a] { return run(*a); };
}

}  // namespace synapse::tools

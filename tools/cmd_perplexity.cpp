// synapse perplexity -m MODEL -f FILE [-c 512] [-b 2048] [-t T] [--chunks N] [--json]
//                    [--kl-divergence-base BASE] [--kl-divergence]
//
// Perplexity of a model over a text, and the KL divergence of one model's
// token distributions from another's, computed as llama.cpp's
// llama-perplexity computes them (tools/perplexity/perplexity.cpp of
// llama.cpp v0.5.0: perplexity() and kl_divergence()):
//
//  * The file is read as bytes (one trailing '\n' dropped, as common's -f
//    does) and tokenized once, whole, with the model's BOS
//    (llama_tokenize(add_special = true, parse_special = false)).
//  * Chunk i is tokens [i*n_ctx, (i+1)*n_ctx); there are
//    min(--chunks, n_tokens / n_ctx) of them and the text must hold at least
//    two. Each chunk starts from an empty KV cache with its first token
//    replaced by BOS (when the model adds one).
//  * first = n_ctx/2: the logits at positions first .. n_ctx-2 are scored
//    against the tokens at first+1 .. n_ctx-1 (n_ctx - 1 - first tokens per
//    chunk); the NLL of a token is max + log(sum exp(l - max)) - l[token]
//    (the sum in double, as llama.cpp's log_softmax).
//  * [i] is exp(the mean NLL over chunks 1..i); the final estimate is
//    PPL = exp(mean NLL) +/- PPL * sqrt((mean(NLL^2) - mean(NLL)^2) / (count - 1)).
//  * -b N: rows per forward pass. N >= n_ctx runs max(1, N / n_ctx) chunks as
//    that many sequences of one batch; N < n_ctx splits each chunk into
//    ceil(n_ctx / N) passes. The numbers do not depend on it (DESIGN.md
//    contract 2), only the speed and the memory for logits do.
//
// --kl-divergence-base BASE (without --kl-divergence) also writes the
// scored positions' log-probabilities to BASE, in llama-perplexity's format
// (so either tool reads the other's files), little-endian:
//    char[8] "_logits_", int32 n_ctx, int32 n_vocab, int32 n_chunk,
//    int32 tokens[n_chunk * n_ctx]   (the text's tokens, before the BOS
//                                     replacement),
//    then per chunk, per scored position (n_ctx - 1 - n_ctx/2 of them), a
//    record of nv = 2*((n_vocab + 1)/2) + 4 uint16 words: float scale,
//    float min_log_prob, n_vocab uint16 codes (+ one zero word when n_vocab
//    is odd). log p(t) = scale * code[t] + min_log_prob over the range
//    [max logit - 16, max logit]; logits below it get code 0, i.e. they are
//    clamped up to min_log_prob.
// --kl-divergence --kl-divergence-base BASE runs the model on BASE's tokens
// and compares: per chunk the running PPL, ln(PPL(Q)/PPL(base)), KLD, RMS of
// Δp = p(token) - p_base(token) and the fraction of positions whose most
// likely token agrees ("Same top p"), then the distribution statistics.
// The base's PPL, NLLs and probabilities come from the stored (clamped)
// values, as in llama-perplexity; KLD terms with a base log-prob at or below
// -16 are skipped. -c, when given, must equal BASE's n_ctx; -f, when given,
// must tokenize to BASE's tokens; --chunks may shorten the run.
//
// Output: results on stdout — the `[1]x,[2]y,...` line then
// `Final estimate: PPL = X +/- Y` (llama-perplexity prints the latter on
// stderr), or the KL table and statistics in llama-perplexity's layout; with
// --json one JSON object instead: n_ctx, n_chunk, n_scored, chunks (the
// per-chunk running figures), ppl and ppl_uncertainty, tokens_per_second (of
// the forward passes); with --kl-divergence also ppl_base, ln_ppl_ratio,
// ppl_ratio, ppl_diff, same_top_p (each with _uncertainty), cor_ln_ppl,
// kld {mean, uncertainty, max, p99.9 .. min} and delta_p {mean, rms, ...};
// probabilities, Δp and same_top_p as fractions (the text prints percent).
// Progress and timings go to stderr.
// Per-row scoring runs on the thread pool, then the sums are taken in row
// order, so every figure is the same for any -t and -b.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common_flags.hpp"
#include "eval_text.hpp"
#include "progress.hpp"
#include "synapse/error.hpp"
#include "synapse/synapse.hpp"

namespace synapse::tools {
namespace {

struct PplArgs {
  std::string model, text_file, base_file;
  int n_ctx = 512;       // -c (llama-perplexity's default)
  int n_batch = 2048;    // -b (llama.cpp's default)
  int threads = 0;
  int n_chunks = -1;     // --chunks: -1 = all
  KvTypeFlags kv_types;  // -ctk, -ctv
  bool kl_divergence = false;
  bool json = false;
  const CLI::Option* n_ctx_opt = nullptr;  // set when -c was given
};

// ---- scoring one row of logits ([n_vocab] floats) ----

// Words of one base-file record (see the header comment).
int64_t record_words(int64_t n_vocab) { return 2 * ((n_vocab + 1) / 2) + 4; }

// Encodes one row as a base-file record (rec: record_words(n_vocab) words)
// and returns -log p(tok), computed in float as llama-perplexity's
// base-writing log_softmax does (so its PPL line matches that run's).
float encode_row(const float* logits, int64_t n_vocab, token_id tok, uint16_t* rec) {
  float max_logit = logits[0], min_logit = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) {
    max_logit = std::max(max_logit, logits[i]);
    min_logit = std::min(min_logit, logits[i]);
  }
  min_logit = std::max(min_logit, max_logit - 16);
  double sum_exp = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  const float head[2] = {(max_logit - min_logit) / 65535.f, min_logit - max_logit - log_sum_exp};
  std::memcpy(rec, head, sizeof head);
  uint16_t* code = rec + 4;
  const float scale = head[0];
  const float inv_scale = scale != 0 ? 1 / scale : 0;  // llama-perplexity multiplies by 1/scale (not / scale)
  for (int64_t i = 0; i < n_vocab; ++i)
    code[i] = scale != 0 && logits[i] > min_logit ? static_cast<uint16_t>(std::lrint(inv_scale * (logits[i] - min_logit))) : 0;
  for (int64_t i = n_vocab; i < record_words(n_vocab) - 4; ++i) code[i] = 0;
  return max_logit + log_sum_exp - logits[tok];
}

// One scored position compared against its base record.
struct KldRow {
  float nll = 0, nll_base = 0;  // -log p(token): this model, the base (from the record)
  double kld = 0;               // sum over t of p_base(t) * (log p_base(t) - log p(t)), log p_base(t) > -16
  float p_diff = 0;             // p(token) - p_base(token)
  bool same_top = false;        // argmax of the logits == argmax of the record (first index on ties)
};

// llama.cpp's kl_divergence log_softmax(n_vocab, logits, base_log_prob, tok, kld).
KldRow compare_row(const float* logits, int64_t n_vocab, const uint16_t* rec, token_id tok) {
  float max_logit = logits[0];
  int64_t imax = 0;
  for (int64_t i = 1; i < n_vocab; ++i)
    if (logits[i] > max_logit) max_logit = logits[i], imax = i;
  double sum_exp = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  float head[2];
  std::memcpy(head, rec, sizeof head);
  const float scale = head[0], min_log_prob = head[1];
  const uint16_t* code = rec + 4;

  KldRow r;
  r.nll = max_logit + log_sum_exp - logits[tok];
  r.nll_base = -(scale * code[tok] + min_log_prob);
  const float log_norm = max_logit + log_sum_exp;  // log p(t) = logits[t] - log_norm
  int64_t imax_base = 0;
  float log_p_base_max = 0;
  for (int64_t i = 0; i < n_vocab; ++i) {
    const float log_p_base = scale * code[i] + min_log_prob;
    if (i == 0 || log_p_base > log_p_base_max) log_p_base_max = log_p_base, imax_base = i;
    if (log_p_base > -16.f) r.kld += std::exp(log_p_base) * (log_p_base - logits[i] + log_norm);
  }
  r.same_top = imax == imax_base;
  r.p_diff = std::exp(-r.nll) - std::exp(-r.nll_base);
  return r;
}

// The running sums of llama-perplexity's kl_divergence_result.
struct KldSums {
  double nll = 0, nll2 = 0, nll_base = 0, nll_base2 = 0, nll_nll_base = 0;
  double kld = 0, kld2 = 0, p_diff = 0, p_diff2 = 0, p_diff4 = 0;
  size_t n_same_top = 0, count = 0;

  void add(const KldRow& r) {
    nll += r.nll, nll2 += r.nll * r.nll;
    nll_base += r.nll_base, nll_base2 += r.nll_base * r.nll_base;
    nll_nll_base += r.nll * r.nll_base;
    kld += r.kld, kld2 += r.kld * r.kld;
    const double d2 = static_cast<double>(r.p_diff) * r.p_diff;
    p_diff += r.p_diff, p_diff2 += d2, p_diff4 += d2 * d2;
    n_same_top += r.same_top;
    ++count;
  }
};

struct Estimate {
  double value = 0, uncertainty = 0;
};

// The mean of `count` values from their sum and sum of squares, and its
// standard error (0 with 10 values or fewer), as llama-perplexity's
// mean_and_uncertainty.
Estimate mean_and_uncertainty(double sum, double sum2, size_t count) {
  if (count < 1) return {};
  const double f = sum / static_cast<double>(count);
  const double var = sum2 / static_cast<double>(count) - f * f;
  return {f, var > 0 && count > 10 ? std::sqrt(var / static_cast<double>(count - 1)) : 0.0};
}

// The covariance of the two means (0 under 10 values), as llama-perplexity's.
double covariance(double suma, double sumb, double sumab, size_t count) {
  if (count < 10) return 0.0;
  const double n = static_cast<double>(count);
  return (sumab / n - (suma / n) * (sumb / n)) / (n - 1);
}

// The figures of llama-perplexity's KL table row and statistics, from sums.
struct KldFigures {
  Estimate log_ppl, log_ppl_base, log_ratio, kld, rms_p_diff, same_top, p_diff;
  double log_ppl_cov = 0;
};

KldFigures kld_figures(const KldSums& s) {
  KldFigures f;
  f.log_ppl = mean_and_uncertainty(s.nll, s.nll2, s.count);
  f.log_ppl_base = mean_and_uncertainty(s.nll_base, s.nll_base2, s.count);
  f.log_ppl_cov = covariance(s.nll, s.nll_base, s.nll_nll_base, s.count);
  f.log_ratio = {f.log_ppl.value - f.log_ppl_base.value,
                 std::sqrt(f.log_ppl.uncertainty * f.log_ppl.uncertainty +
                           f.log_ppl_base.uncertainty * f.log_ppl_base.uncertainty - 2.0 * f.log_ppl_cov)};
  f.kld = mean_and_uncertainty(s.kld, s.kld2, s.count);
  const Estimate mse = mean_and_uncertainty(s.p_diff2, s.p_diff4, s.count);
  f.rms_p_diff = {std::sqrt(mse.value), 0.5 / std::sqrt(mse.value) * mse.uncertainty};
  const double top = static_cast<double>(s.n_same_top) / static_cast<double>(s.count);
  f.same_top = {top, std::sqrt(top * (1 - top) / static_cast<double>(s.count - 1))};
  f.p_diff = mean_and_uncertainty(s.p_diff, s.p_diff2, s.count);
  return f;
}

// Sets j[key] and j[key + "_uncertainty"].
void put(nlohmann::json& j, const std::string& key, const Estimate& e) {
  j[key] = e.value;
  j[key + "_uncertainty"] = e.uncertainty;
}

// llama-perplexity's percentile of sorted values: linear interpolation
// between the two nearest ranks, in float.
float percentile(const std::vector<float>& sorted, float fraction) {
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  float p = fraction * static_cast<float>(sorted.size() - 1);
  const size_t ip = static_cast<size_t>(p);
  p -= static_cast<float>(ip);
  return (1 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

float median(const std::vector<float>& sorted) {
  const size_t n = sorted.size();
  return n % 2 == 0 ? 0.5f * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

// ---- input ----

// A base file's header and tokens, checked against the model; the stream is
// left at the first record.
struct BaseFile {
  std::ifstream in;
  int32_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
  std::vector<token_id> tokens;  // n_chunk * n_ctx
};

void open_base(const std::string& path, int64_t model_n_vocab, BaseFile& b) {
  b.in.open(path, std::ios::binary | std::ios::ate);
  if (!b.in) throw Error(Errc::io, path + ": cannot open the KL-divergence base (" + std::strerror(errno) + ")");
  const std::streamoff size = b.in.tellg();
  b.in.seekg(0);
  char magic[8] = {};
  int32_t head[3] = {};
  b.in.read(magic, sizeof magic);
  b.in.read(reinterpret_cast<char*>(head), sizeof head);
  if (!b.in || std::memcmp(magic, "_logits_", 8) != 0)
    throw Error(Errc::format, path + ": not a KL-divergence base file (no '_logits_' header)");
  b.n_ctx = head[0], b.n_vocab = head[1], b.n_chunk = head[2];
  if (b.n_ctx < 4 || b.n_vocab < 1 || b.n_chunk < 1)
    throw Error(Errc::format, path + ": bad header (n_ctx " + std::to_string(b.n_ctx) + ", n_vocab " +
                                  std::to_string(b.n_vocab) + ", n_chunk " + std::to_string(b.n_chunk) + ")");
  if (b.n_vocab != model_n_vocab)
    throw Error(Errc::invalid_argument, path + ": the base holds log-probabilities over " + std::to_string(b.n_vocab) +
                                            " tokens, the model has " + std::to_string(model_n_vocab) +
                                            " (a base from a model with another vocabulary)");
  const int64_t n_tok = int64_t{b.n_chunk} * b.n_ctx;
  const int64_t n_rec = int64_t{b.n_chunk} * (b.n_ctx - 1 - b.n_ctx / 2);
  const long double want = 20.0L + 4.0L * n_tok + 2.0L * n_rec * record_words(b.n_vocab);
  if (static_cast<long double>(size) != want)
    throw Error(Errc::format, path + ": " + std::to_string(size) + " bytes, but its header (n_ctx " +
                                  std::to_string(b.n_ctx) + ", n_vocab " + std::to_string(b.n_vocab) + ", " +
                                  std::to_string(b.n_chunk) + " chunks) needs " + std::to_string(static_cast<long long>(want)) + " (truncated or not a base file)");
  b.tokens.resize(static_cast<size_t>(n_tok));
  b.in.read(reinterpret_cast<char*>(b.tokens.data()), static_cast<std::streamsize>(n_tok * 4));
  if (!b.in) throw Error(Errc::io, path + ": read error in the tokens");
  for (int64_t i = 0; i < n_tok; ++i)
    if (b.tokens[i] < 0 || b.tokens[i] >= b.n_vocab)
      throw Error(Errc::format, path + ": token " + std::to_string(i) + " is " + std::to_string(b.tokens[i]) +
                                    ", outside the vocabulary [0, " + std::to_string(b.n_vocab) + ")");
}

// ---- the evaluation loop ----

// Runs chunks [0, n_chunk) of `tokens` (n_ctx each) through the model and
// calls score(chunk, logits, targets) per chunk with the logits of its
// positions first .. n_ctx-2 ([n_scored][n_vocab]) and the tokens they
// predict (targets[k] = the token at first + 1 + k). When stderr is a
// terminal and the results do not stream to one (progress_lines; there the
// running `[i]` line shows it), a progress line with the t/s and ETA is
// redrawn on stderr; piped, nothing is. Returns the seconds spent in forward
// passes.
template <typename Score>
double evaluate(const Model& m, const std::vector<token_id>& tokens, int n_ctx, int n_chunk, int n_batch_arg,
                Context& ctx, const char* what, bool progress_lines, Score&& score) {
  const int64_t n_vocab = m.n_vocab();
  const int n_seq = std::max(1, n_batch_arg / n_ctx);
  const int n_batch = std::min(n_batch_arg, n_seq * n_ctx);
  const int num_batches = (n_ctx + n_batch - 1) / n_batch;
  const int first = n_ctx / 2, n_scored = n_ctx - 1 - first;
  const Tokenizer& tok = m.tokenizer();
  const bool add_bos = tok.add_bos();
  if (add_bos && tok.bos() < 0) throw Error(Errc::format, "the model adds a BOS token but names none");

  std::fprintf(stderr, "%s: %d chunks, n_ctx=%d, batch_size=%d, n_seq=%d, %d threads\n", what, n_chunk, n_ctx,
               n_batch, n_seq, ctx.n_threads());
  std::vector<Sequence> caches;
  for (int s = 0; s < std::min(n_seq, n_chunk); ++s) caches.push_back(ctx.new_sequence(n_ctx));
  Batch rows;
  std::vector<float> chunk_logits;  // -b < -c: the logits of the chunk's batches, gathered
  std::span<const float> pass_logits;
  double t_eval = 0;
  const auto t_start = std::chrono::steady_clock::now();
  Progress progress(what, n_chunk);

  for (int i = 0; i < n_chunk; i += n_seq) {
    const int n_seq_batch = std::min(n_seq, n_chunk - i);
    const size_t start = static_cast<size_t>(i) * n_ctx;
    for (int s = 0; s < n_seq_batch; ++s) caches[s].clear();
    chunk_logits.clear();
    const auto t_pass = std::chrono::steady_clock::now();
    for (int j = 0; j < num_batches; ++j) {
      const int batch_size = std::min(n_ctx - j * n_batch, n_batch);
      rows.clear();
      for (int s = 0; s < n_seq_batch; ++s) {
        const size_t seq_start = start + static_cast<size_t>(s) * n_ctx + static_cast<size_t>(j) * n_batch;
        for (int k = 0; k < batch_size; ++k) {
          const int pos = j * n_batch + k;
          const token_id t = add_bos && pos == 0 ? tok.bos() : tokens[seq_start + k];
          rows.add(caches[s], t, pos >= first && pos < n_ctx - 1);
        }
      }
      const std::span<const float> out = ctx.decode(rows);  // logits of the wanted rows only, in row order
      // One batch per chunk (-b >= -c, the default): score the Context's own
      // logits, valid until the next decode, instead of copying them.
      if (num_batches == 1) pass_logits = out;
      else chunk_logits.insert(chunk_logits.end(), out.begin(), out.end());
    }
    if (num_batches > 1) pass_logits = chunk_logits;
    const double t = seconds_since(t_pass);
    t_eval += t;
    if (i == 0)
      std::fprintf(stderr, "%s: %.2f seconds per pass - ETA %.2f minutes\n", what, t,
                   t * n_chunk / n_seq_batch / 60.0);
    for (int s = 0; s < n_seq_batch; ++s) {
      const size_t chunk_start = start + static_cast<size_t>(s) * n_ctx;
      score(i + s, pass_logits.subspan(static_cast<size_t>(s) * n_scored * n_vocab, static_cast<size_t>(n_scored) * n_vocab),
            &tokens[chunk_start + first + 1]);
    }
    const int done = i + n_seq_batch;
    if (progress_lines && done < n_chunk) progress.update_chunks(done, n_ctx, seconds_since(t_start));
  }
  return t_eval;
}

bool progress_lines(const PplArgs& a) { return a.json || ::isatty(STDOUT_FILENO) == 0; }  // see evaluate()

// The scored rows of one chunk, in parallel (split by row).
template <typename Fn>
void for_rows(Context& ctx, int n_rows, Fn&& fn) {
  ctx.parallel_for(n_rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) fn(static_cast<int>(r));
  });
}

void print_timing(const char* what, int n_chunk, int n_ctx, double t_eval, double t_all) {
  const double n = static_cast<double>(n_chunk) * n_ctx;
  std::fprintf(stderr, "%s: %d tokens in %.2f s of forward passes (%.2f t/s), %.2f s in all (%.2f t/s)\n", what,
               static_cast<int>(n), t_eval, n / t_eval, t_all, n / t_all);
}

// ---- the two modes ----

int run_perplexity(const PplArgs& a, const Model& m, Context& ctx) {
  const auto t0 = std::chrono::steady_clock::now();
  const int n_ctx = a.n_ctx;
  const int64_t n_vocab = m.n_vocab();
  const std::string text = read_text(a.text_file);
  const auto t_tok = std::chrono::steady_clock::now();
  const std::vector<token_id> tokens = m.tokenizer().tokenize(text, /*add_special=*/true, /*parse_special=*/false);
  if (static_cast<int64_t>(tokens.size()) < 2 * int64_t{n_ctx})
    throw Error(Errc::invalid_argument,
                a.text_file + " tokenizes to " + std::to_string(tokens.size()) + " tokens; -c " + std::to_string(n_ctx) +
                    " needs at least " + std::to_string(2 * int64_t{n_ctx}) + " (two chunks): give a longer text or a smaller -c");
  const int n_chunk_max = static_cast<int>(tokens.size() / n_ctx);
  const int n_chunk = a.n_chunks < 0 ? n_chunk_max : std::min(a.n_chunks, n_chunk_max);
  const int first = n_ctx / 2, n_scored = n_ctx - 1 - first;

  // --kl-divergence-base: the header and tokens now, a record per scored row below.
  std::unique_ptr<FILE, int (*)(FILE*)> base(nullptr, &std::fclose);
  const int64_t nv = record_words(n_vocab);
  std::vector<uint16_t> records;
  const auto write_or_throw = [&](const void* p, size_t bytes) {
    if (std::fwrite(p, 1, bytes, base.get()) != bytes)
      throw Error(Errc::io, a.base_file + ": cannot write the KL-divergence base (" + std::strerror(errno) + ")");
  };
  if (!a.base_file.empty()) {
    base.reset(std::fopen(a.base_file.c_str(), "wb"));
    if (!base) throw Error(Errc::io, a.base_file + ": cannot create (" + std::strerror(errno) + ")");
    std::fprintf(stderr, "perplexity: saving the log-probabilities to %s\n", a.base_file.c_str());
    const int32_t head[3] = {n_ctx, static_cast<int32_t>(n_vocab), n_chunk};
    write_or_throw("_logits_", 8);
    write_or_throw(head, sizeof head);
    write_or_throw(tokens.data(), static_cast<size_t>(n_chunk) * n_ctx * sizeof(token_id));
    records.resize(static_cast<size_t>(n_scored * nv));
  }
  std::fprintf(stderr, "perplexity: %s: %zu tokens (tokenized in %.1f ms)\n", a.text_file.c_str(), tokens.size(),
               1e3 * seconds_since(t_tok));

  double nll = 0, nll2 = 0;
  int64_t count = 0;
  std::vector<double> row(static_cast<size_t>(n_scored));
  nlohmann::json chunks = nlohmann::json::array();
  const double t_eval = evaluate(m, tokens, n_ctx, n_chunk, a.n_batch, ctx, "perplexity", progress_lines(a),
                                 [&](int chunk, std::span<const float> logits, const token_id* targets) {
    for_rows(ctx, n_scored, [&](int r) {
      const float* l = logits.data() + static_cast<size_t>(r) * n_vocab;
      row[r] = base ? encode_row(l, n_vocab, targets[r], &records[static_cast<size_t>(r) * nv])
                    : row_nll(l, n_vocab, targets[r]);
    });
    if (base) write_or_throw(records.data(), records.size() * sizeof(uint16_t));
    for (double v : row) nll += v, nll2 += v * v;
    count += n_scored;
    const double running = std::exp(nll / static_cast<double>(count));
    chunks.push_back({{"chunk", chunk + 1}, {"ppl", running}});
    if (!a.json) {
      std::printf("[%d]%.4f,", chunk + 1, running);
      std::fflush(stdout);
    }
  });
  if (base && std::fclose(base.release()) != 0)
    throw Error(Errc::io, a.base_file + ": cannot write the KL-divergence base (" + std::strerror(errno) + ")");

  const double mean = nll / static_cast<double>(count);
  const double ppl = std::exp(mean);
  const double var = nll2 / static_cast<double>(count) - mean * mean;
  const double unc = var > 0 ? ppl * std::sqrt(var / static_cast<double>(count - 1)) : 0.0;
  if (a.json) {
    nlohmann::json j{{"model", a.model},     {"text_file", a.text_file}, {"n_ctx", n_ctx},
                     {"n_chunk", n_chunk},   {"n_tokens", tokens.size()}, {"n_scored", count},
                     {"chunks", chunks},     {"ppl", ppl},               {"ppl_uncertainty", unc},
                     {"seconds_forward", t_eval}, {"tokens_per_second", n_chunk * double{1} * n_ctx / t_eval}};
    if (!a.base_file.empty()) j["kl_divergence_base"] = a.base_file;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, unc);
  }
  print_timing("perplexity", n_chunk, n_ctx, t_eval, seconds_since(t0));
  return 0;
}

void print_kld_row(int chunk, const KldFigures& f) {
  const double ppl = std::exp(f.log_ppl.value);
  std::printf("%4d", chunk);
  std::printf("    %9.4f ± %9.4f", ppl, ppl * f.log_ppl.uncertainty);
  std::printf("    %10.5f ± %10.5f", f.log_ratio.value, f.log_ratio.uncertainty);
  std::printf("    %10.5f ± %10.5f", f.kld.value, f.kld.uncertainty);
  std::printf("    %6.3f ± %6.3f %%", 100.0 * f.rms_p_diff.value, 100.0 * f.rms_p_diff.uncertainty);
  std::printf("    %6.3f ± %6.3f %%\n", 100.0 * f.same_top.value, 100.0 * f.same_top.uncertainty);
  std::fflush(stdout);
}

// The percentiles llama-perplexity prints for KLD (label, fraction; a
// negative fraction is the median) and for Δp.
struct Quantile {
  const char* label;
  const char* key;
  float fraction;
};
constexpr Quantile kKldQuantiles[] = {{"Maximum", "max", 1},  {"99.9%  ", "p99.9", 0.999f}, {"99.0%  ", "p99", 0.990f},
                                      {"95.0%  ", "p95", 0.950f}, {"90.0%  ", "p90", 0.900f}, {"Median ", "median", -1},
                                      {"10.0%  ", "p10", 0.100f}, {" 5.0%  ", "p5", 0.050f},  {" 1.0%  ", "p1", 0.010f},
                                      {" 0.1%  ", "p0.1", 0.001f}, {"Minimum", "min", 0}};
constexpr Quantile kDpQuantiles[] = {{"Maximum", "max", 1},      {"99.9%  ", "p99.9", 0.999f}, {"99.0%  ", "p99", 0.990f},
                                     {"95.0%  ", "p95", 0.950f}, {"90.0%  ", "p90", 0.900f},   {"75.0%  ", "p75", 0.750f},
                                     {"Median ", "median", -1},  {"25.0%  ", "p25", 0.250f},   {"10.0%  ", "p10", 0.100f},
                                     {" 5.0%  ", "p5", 0.050f},  {" 1.0%  ", "p1", 0.010f},    {" 0.1%  ", "p0.1", 0.001f},
                                     {"Minimum", "min", 0}};

float quantile(const std::vector<float>& sorted, const Quantile& q) {
  return q.fraction < 0 ? median(sorted) : percentile(sorted, q.fraction);
}

int run_kl_divergence(const PplArgs& a, const Model& m, Context& ctx) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n_vocab = m.n_vocab();
  BaseFile b;
  open_base(a.base_file, n_vocab, b);
  const int n_ctx = b.n_ctx;
  if (a.n_ctx_opt && a.n_ctx_opt->count() > 0 && a.n_ctx != n_ctx)
    throw Error(Errc::invalid_argument, a.base_file + " was computed with n_ctx " + std::to_string(n_ctx) + ", -c is " +
                                            std::to_string(a.n_ctx) + " (give -c " + std::to_string(n_ctx) + " or omit it)");
  if (!a.text_file.empty()) {
    const std::vector<token_id> text = m.tokenizer().tokenize(read_text(a.text_file), true, false);
    const size_t n = std::min(text.size(), b.tokens.size());
    const size_t diff = std::mismatch(text.begin(), text.begin() + n, b.tokens.begin()).first - text.begin();
    if (diff < b.tokens.size())
      throw Error(Errc::invalid_argument, a.base_file + ": its token " + std::to_string(diff) + " differs from " +
                                              a.text_file + "'s tokens with this model (another text, or a model with another tokenizer)");
  }
  const int n_chunk = a.n_chunks < 0 ? b.n_chunk : std::min(a.n_chunks, b.n_chunk);
  const int first = n_ctx / 2, n_scored = n_ctx - 1 - first;
  const int64_t nv = record_words(n_vocab);

  std::vector<uint16_t> records(static_cast<size_t>(n_scored * nv));
  std::vector<KldRow> row(static_cast<size_t>(n_scored));
  std::vector<float> kld_values, p_diff_values;
  KldSums sums;
  nlohmann::json chunks = nlohmann::json::array();
  const double t_eval = evaluate(m, b.tokens, n_ctx, n_chunk, a.n_batch, ctx, "kl_divergence", progress_lines(a),
                                 [&](int chunk, std::span<const float> logits, const token_id* targets) {
    b.in.read(reinterpret_cast<char*>(records.data()), static_cast<std::streamsize>(records.size() * sizeof(uint16_t)));
    if (!b.in) throw Error(Errc::io, a.base_file + ": read error in chunk " + std::to_string(chunk + 1));
    for_rows(ctx, n_scored, [&](int r) {
      row[r] = compare_row(logits.data() + static_cast<size_t>(r) * n_vocab, n_vocab,
                           &records[static_cast<size_t>(r) * nv], targets[r]);
    });
    for (const KldRow& r : row) {
      sums.add(r);
      kld_values.push_back(static_cast<float>(r.kld));
      p_diff_values.push_back(r.p_diff);
    }
    const KldFigures f = kld_figures(sums);
    if (a.json) {
      nlohmann::json c{{"chunk", chunk + 1}};
      put(c, "ppl", {std::exp(f.log_ppl.value), std::exp(f.log_ppl.value) * f.log_ppl.uncertainty});
      put(c, "ln_ppl_ratio", f.log_ratio);
      put(c, "kld", f.kld);
      put(c, "rms_dp", f.rms_p_diff);
      put(c, "same_top_p", f.same_top);
      chunks.push_back(c);
      return;
    }
    if (chunk == 0)
      std::printf("\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              "
                  "Δp RMS            Same top p\n");
    print_kld_row(chunk + 1, f);
  });

  const KldFigures f = kld_figures(sums);
  const double ppl = std::exp(f.log_ppl.value), ppl_unc = ppl * f.log_ppl.uncertainty;
  const double ppl_base = std::exp(f.log_ppl_base.value), ppl_base_unc = ppl_base * f.log_ppl_base.uncertainty;
  const double cor = f.log_ppl_cov / (f.log_ppl.uncertainty * f.log_ppl_base.uncertainty);
  const double ratio = std::exp(f.log_ratio.value), ratio_unc = ratio * f.log_ratio.uncertainty;
  const double ppl_cov = ppl * ppl_base * f.log_ppl_cov;
  const double diff = ppl - ppl_base;
  const double diff_unc = std::sqrt(ppl_unc * ppl_unc + ppl_base_unc * ppl_base_unc - 2.0 * ppl_cov);
  std::sort(kld_values.begin(), kld_values.end());
  std::sort(p_diff_values.begin(), p_diff_values.end());
  // llama-perplexity prints no statistics over fewer than 100 positions.
  const bool stats = sums.count >= 100;

  if (a.json) {
    nlohmann::json j{{"model", a.model},   {"kl_divergence_base", a.base_file}, {"n_ctx", n_ctx},
                     {"n_chunk", n_chunk}, {"n_scored", sums.count},             {"chunks", chunks},
                     {"cor_ln_ppl", cor},  {"seconds_forward", t_eval},
                     {"tokens_per_second", n_chunk * double{1} * n_ctx / t_eval}};
    put(j, "ppl", {ppl, ppl_unc});
    put(j, "ppl_base", {ppl_base, ppl_base_unc});
    put(j, "ln_ppl_ratio", f.log_ratio);
    put(j, "ppl_ratio", {ratio, ratio_unc});
    put(j, "ppl_diff", {diff, diff_unc});
    put(j, "same_top_p", f.same_top);
    nlohmann::json kld{{"mean", f.kld.value}, {"uncertainty", f.kld.uncertainty}};
    nlohmann::json dp{{"mean", f.p_diff.value},
                      {"uncertainty", f.p_diff.uncertainty},
                      {"rms", f.rms_p_diff.value},
                      {"rms_uncertainty", f.rms_p_diff.uncertainty}};
    for (const Quantile& q : kKldQuantiles) kld[q.key] = quantile(kld_values, q);
    for (const Quantile& q : kDpQuantiles) dp[q.key] = quantile(p_diff_values, q);
    j["kld"] = kld;
    j["delta_p"] = dp;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("\n");
    if (stats) {
      std::printf("====== Perplexity statistics ======\n");
      std::printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl, ppl_unc);
      std::printf("Mean PPL(base)                : %10.6f ± %10.6f\n", ppl_base, ppl_base_unc);
      std::printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * cor);
      std::printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", f.log_ratio.value, f.log_ratio.uncertainty);
      std::printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", ratio, ratio_unc);
      std::printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n\n", diff, diff_unc);
      std::printf("====== KL divergence statistics ======\n");
      std::printf("Mean    KLD: %10.6f ± %10.6f\n", f.kld.value, f.kld.uncertainty);
      for (const Quantile& q : kKldQuantiles) std::printf("%s KLD: %10.6f\n", q.label, quantile(kld_values, q));
      std::printf("\n====== Token probability statistics ======\n");
      std::printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * f.p_diff.value, 100.0 * f.p_diff.uncertainty);
      for (const Quantile& q : kDpQuantiles) std::printf("%s Δp: %6.3f%%\n", q.label, 100.0 * quantile(p_diff_values, q));
      std::printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * f.rms_p_diff.value, 100.0 * f.rms_p_diff.uncertainty);
      std::printf("Same top p: %6.3f ± %5.3f %%\n", 100.0 * f.same_top.value, 100.0 * f.same_top.uncertainty);
    } else {
      std::fprintf(stderr, "kl_divergence: %zu scored positions: no statistics under 100 (as llama-perplexity)\n",
                   sums.count);
    }
  }
  print_timing("kl_divergence", n_chunk, n_ctx, t_eval, seconds_since(t0));
  return 0;
}

int run(const PplArgs& a) {
  const auto bad = [](const std::string& msg) { throw Error(Errc::invalid_argument, "perplexity: " + msg); };
  if (a.kl_divergence && a.base_file.empty()) bad("--kl-divergence needs --kl-divergence-base FILE (the base model's log-probabilities)");
  if (!a.kl_divergence && a.text_file.empty()) bad("-f FILE is required (the text to score)");
  if (a.n_ctx < 4) bad("-c must be at least 4, got " + std::to_string(a.n_ctx));
  if (a.n_batch < 1) bad("-b must be at least 1, got " + std::to_string(a.n_batch));
  if (a.n_chunks == 0 || a.n_chunks < -1) bad("--chunks must be -1 (all) or at least 1, got " + std::to_string(a.n_chunks));
  if (a.threads < 0 || a.threads > 1024) bad("-t must be in [1, 1024], got " + std::to_string(a.threads));
  if (!a.text_file.empty()) {  // before the model loads: a missing text fails fast
    std::ifstream f(a.text_file, std::ios::binary);
    if (!f) throw Error(Errc::io, a.text_file + ": cannot open the text (" + std::strerror(errno) + ")");
  }
  const Model m = load_model(a.model);
  if (m.tokenizer().add_eos())
    throw Error(Errc::unsupported, a.model + ": the tokenizer appends EOS (add_eos_token), which llama-perplexity rejects too");
  if (!a.kl_divergence && m.n_ctx_train() > 0 && a.n_ctx > m.n_ctx_train())
    std::fprintf(stderr, "perplexity: warning: the model was trained on %lld context tokens, -c is %d\n",
                 static_cast<long long>(m.n_ctx_train()), a.n_ctx);
  Context ctx(m, a.threads);
  apply_kv_types(ctx, a.kv_types);
  return a.kl_divergence ? run_kl_divergence(a, m, ctx) : run_perplexity(a, m, ctx);
}

}  // namespace

Runner add_perplexity(CLI::App& app) {
  auto a = std::make_shared<PplArgs>();
  app.add_option("-m,--model", a->model, "GGUF model file")->required();
  app.add_option("-f,--file", a->text_file, "the text to score (read as bytes)");
  a->n_ctx_opt = app.add_option("-c,--ctx-size", a->n_ctx, "tokens per chunk (default 512); the second half is scored");
  app.add_option("-b,--batch-size", a->n_batch,
                 "rows per forward pass (default 2048): several chunks as sequences of one batch, or a chunk in parts");
  app.add_option("-t,--threads", a->threads, "threads (default: physical cores)");
  app.add_option("--chunks", a->n_chunks, "chunks to score (default -1 = all)");
  add_kv_type_flags(app, a->kv_types);
  app.add_option("--kl-divergence-base,--save-all-logits", a->base_file,
                 "write the scored log-probabilities here (llama-perplexity's format); with --kl-divergence, read them");
  app.add_flag("--kl-divergence", a->kl_divergence,
               "compare this model against --kl-divergence-base (KLD, Δp, same top token, PPL ratio)");
  app.add_flag("--json", a->json, "print the results as one JSON object");
  return [a] { return run(*a); };
}

}  // namespace synapse::tools

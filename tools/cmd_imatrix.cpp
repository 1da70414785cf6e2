// synapse imatrix -m MODEL -f TEXT [-o imatrix.gguf] [-c 512] [--chunks N] [--process-output]
//                 [-b 2048] [-ub 512] [-t T] [--chunk N] [--parse-special] [--no-ppl]
//                 [--in-file F ...] [--output-format gguf|dat] [--output-frequency N] [--save-frequency N]
// synapse imatrix --in-file F [--in-file G ...] [-o OUT] [--output-format gguf|dat] [-c 512]
// synapse imatrix --in-file F --show-statistics
//
// The importance matrix of a model over a text, computed as llama.cpp's
// llama-imatrix computes it (tools/imatrix/imatrix.cpp of llama.cpp v0.5.0:
// compute_imatrix, IMatrixCollector) and written in its GGUF format, which
// `synapse quantize --imatrix` and llama-quantize read:
//
//  * The file is read as bytes (one trailing '\n' dropped) and tokenized
//    once, whole, with the model's BOS (parse_special only with
//    --parse-special); --chunk N drops the first N chunks' tokens.
//  * Chunk i is tokens [i*n_ctx, (i+1)*n_ctx), min(--chunks, n_tokens / n_ctx)
//    of them, at least two in the text; each starts from an empty KV cache
//    with its first token replaced by BOS (when the model adds one).
//  * -b N: max(1, N / n_ctx) chunks run as sequences of one llama.cpp batch
//    (n_seq), min(N, n_seq * n_ctx) tokens per batch; llama.cpp cuts each
//    batch into ubatches of -ub tokens (at most -b): one sequence in order,
//    several as equal slices of every sequence, sequence after sequence
//    (llama_batch_allocr::split_simple / split_equal). Each such ubatch is
//    one decode here, with its rows in that order, so that every matrix sees
//    its rows in llama-imatrix's order, and the rule "a plain product of a
//    ubatch under 16 tokens is not counted" applies to the same ubatches.
//  * Collection (synapse/imatrix.hpp): per matrix the sum of each input
//    column's squared activations and the tokens counted; experts per
//    expert. chunk_size is n_ctx; chunk_count the largest count / n_ctx.
//  * The perplexity of the second half of each chunk, as llama-imatrix
//    prints it ([i] running values on stdout, then the final estimate),
//    unless --no-ppl.
//  * --in-file (repeated, or comma-separated): files added first, as
//    llama-imatrix loads them (ImatrixCollector::load); with no -f they are
//    only combined (or converted: --output-format dat writes the legacy
//    file) and written to -o, and no model is loaded. --show-statistics
//    prints llama-imatrix's table for one --in-file and exits.
//  * --output-frequency N (default 10): the file is also written whenever
//    the chunk count passes a multiple of N; --save-frequency N: a copy
//    OUT.at_<chunks> then too. llama-imatrix writes at the same multiples
//    but from inside a ubatch (with the matrices of it collected so far);
//    these are written between ubatches.
//
// The numbers do not depend on -t; they equal llama-imatrix's up to the
// last bits of the activations (the products' rounding differs from
// ggml's), which is why a test compares them within a tolerance.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "commands.hpp"
#include "eval_text.hpp"
#include "progress.hpp"
#include "synapse/error.hpp"
#include "synapse/imatrix.hpp"
#include "synapse/synapse.hpp"

namespace synapse::tools {
namespace {

struct ImatrixArgs {
  std::string model, text_file, out_file = "imatrix.gguf";  // llama-imatrix's default -o
  std::vector<std::string> in_files;  // --in-file
  std::string output_format;          // --output-format: "gguf", "dat", or "" (gguf, unasked)
  int out_freq = 10;                  // --output-frequency (llama-imatrix's default)
  int save_freq = 0;                  // --save-frequency: 0 = never
  bool show_statistics = false;
  int n_ctx = 512;      // -c (llama-imatrix's default)
  int n_batch = 2048;   // -b (llama.cpp's default)
  int n_ubatch = 512;   // -ub (llama.cpp's default)
  int threads = 0;
  int n_chunks = -1;    // --chunks: -1 = all
  int from_chunk = 0;   // --chunk: chunks skipped at the start
  bool process_output = false;
  bool parse_special = false;
  bool ppl = true;
};

// One llama.cpp ubatch: `tokens` consecutive tokens of each of the sequences
// [0, n_seqs) from position `pos` of each chunk.
struct Ubatch {
  int pos, tokens;
};

// The ubatches llama.cpp cuts one batch of n_seqs sequences, n_tokens each
// from position pos0, into (see the header comment): split_simple when the
// context has one sequence (n_seq == 1), else split_equal, which takes
// n_ubatch / n_seqs tokens of every sequence at a time.
std::vector<Ubatch> ubatches(int n_seq, int n_seqs, int pos0, int n_tokens, int n_ubatch) {
  const int step = n_seq == 1 ? n_ubatch : std::max(1, n_ubatch / n_seqs);
  std::vector<Ubatch> out;
  for (int p = 0; p < n_tokens; p += step) out.push_back({pos0 + p, std::min(step, n_tokens - p)});
  return out;
}

// llama-imatrix --show-statistics' two tables, its format strings.
void print_statistics(const std::string& file, const ImatrixStatistics& st) {
  std::printf("\nComputing statistics for %s (%d tensors)\n", file.c_str(), static_cast<int>(st.tensors.size()));
  std::printf("\n%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", " Layer", "       Tensor",
              "          \u03a3(Act\u00b2)", "  Min", "            Max", "           \u03bc", "   \u03c3",
              " % Active", "N", "   Entropy", "E (norm)", "ZD", "  CosSim");
  std::printf("%s\n", std::string(169, '=').c_str());
  for (const ImatrixTensorStatistics& t : st.tensors) {
    const float entropy_norm = t.elements > 0 ? 100.0f * (t.entropy / std::log2(static_cast<float>(t.elements))) : 0.0f;
    std::printf("%5s\t%-20s\t%10.2f\t%8.4f\t%11.4f\t%6.2f\t%6.2f\t%8.2f%%\t%6d\t%10.4f\t%6.2f%%\t%10.2f%%\t%8.4f\n",
                t.layer.c_str(), t.name.c_str(), t.total_sqract, t.min_sqract, t.max_sqract, t.mean_sqract, t.stddev,
                t.active * 100.0f, t.elements, t.entropy, entropy_norm, 100.0f * t.zd, t.cossim);
  }
  std::printf("\nComputing weighted average statistics per layer (%d layers)\n", static_cast<int>(st.layers.size()));
  std::printf("\n%s\t%s\t%s\t%s\n", "  Layer", "     \u03bc\u03a3(Act\u00b2)", "      \u03bcZD", "\u03bcCosSim");
  std::printf("%s\n", std::string(48, '=').c_str());
  for (const ImatrixLayerStatistics& l : st.layers)
    std::printf("%5d\t%14.2f\t%10.4f%%\t%6.4f\n", l.layer, l.mean_total_sqract, 100.0f * l.mean_zd, l.mean_cossim);
  std::printf("\n");
}

// Writes the collector to `path` (and says so), in the asked format.
void save_as(const ImatrixCollector& imatrix, const ImatrixArgs& a, const std::string& path, int n_ctx) {
  const ImatrixFormat format = a.output_format == "dat" ? ImatrixFormat::dat : ImatrixFormat::gguf;
  std::vector<std::string> datasets;
  if (!a.text_file.empty()) datasets.push_back(a.text_file);
  const size_t n = imatrix.save(path, datasets, n_ctx, format);
  std::fprintf(stderr, "imatrix: saved %zu matrices to %s (%s, %d chunks of %d tokens)\n", n, path.c_str(),
               format == ImatrixFormat::dat ? "legacy .dat" : "GGUF", imatrix.chunk_count(n_ctx), n_ctx);
}

int run(const ImatrixArgs& a) {
  const auto bad = [](const std::string& msg) { throw Error(Errc::invalid_argument, "imatrix: " + msg); };
  if (a.n_ctx < 1) bad("-c must be at least 1, got " + std::to_string(a.n_ctx));
  if (!a.output_format.empty() && a.output_format != "gguf" && a.output_format != "dat")
    bad("--output-format must be gguf or dat, got \"" + a.output_format + "\"");
  if (a.out_freq < 1) bad("--output-frequency must be at least 1, got " + std::to_string(a.out_freq));
  if (a.save_freq < 0) bad("--save-frequency must be at least 0 (0: never), got " + std::to_string(a.save_freq));
  if (a.out_file.empty()) bad("-o needs a file name");
  std::vector<std::string> in_files;
  for (const std::string& f : a.in_files) {
    for (size_t at = 0;;) {  // llama.cpp's comma-separated list
      const size_t comma = f.find(',', at);
      const std::string one = f.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      if (one.empty()) bad("--in-file has an empty file name in \"" + f + "\"");
      in_files.push_back(one);
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  if (a.show_statistics) {
    if (in_files.size() != 1)
      bad("--show-statistics needs exactly one --in-file (the imatrix to describe), got " + std::to_string(in_files.size()));
    ImatrixCollector imatrix;
    imatrix.load(in_files[0], a.n_ctx);
    const ImatrixStatistics st = imatrix.statistics();
    if (st.tensors.empty()) throw Error(Errc::format, "imatrix " + in_files[0] + ": no matrix has a count to describe");
    print_statistics(in_files[0], st);
    return 0;
  }
  if (a.text_file.empty() && in_files.empty())
    bad("-f FILE is required (the text to collect the activations over), or --in-file to combine or convert files");
  if (a.output_format.empty() && !a.out_file.ends_with(".gguf"))
    std::fprintf(stderr,
                 "imatrix: warning: writing the GGUF format to %s, whose name does not end in .gguf "
                 "(--output-format dat writes the legacy one)\n",
                 a.out_file.c_str());
  if (a.text_file.empty()) {
    ImatrixCollector imatrix;
    for (const std::string& f : in_files) {
      std::fprintf(stderr, "imatrix: loading %s\n", f.c_str());
      imatrix.load(f, a.n_ctx);
    }
    save_as(imatrix, a, a.out_file, a.n_ctx);
    return 0;
  }
  if (a.model.empty()) bad("-m MODEL is required to collect over -f " + a.text_file);
  if (a.n_batch < 1) bad("-b must be at least 1, got " + std::to_string(a.n_batch));
  if (a.n_ubatch < 1) bad("-ub must be at least 1, got " + std::to_string(a.n_ubatch));
  if (a.n_chunks == 0 || a.n_chunks < -1) bad("--chunks must be -1 (all) or at least 1, got " + std::to_string(a.n_chunks));
  if (a.from_chunk < 0) bad("--chunk must be at least 0, got " + std::to_string(a.from_chunk));
  if (a.threads < 0 || a.threads > 1024) bad("-t must be in [1, 1024], got " + std::to_string(a.threads));
  if (a.out_file.empty()) bad("-o needs a file name");
  const std::string text = read_text(a.text_file);  // before the model loads: a missing text fails fast

  // llama-imatrix's main: n_seq chunks per batch, the batch at most the
  // n_seq * n_ctx positions of the context, ubatches at most a batch.
  const int n_ctx = a.n_ctx;
  const int n_seq = std::max(1, a.n_batch / n_ctx);
  const int n_batch = std::min(a.n_batch, n_seq * n_ctx);
  const int n_ubatch = std::min(a.n_ubatch, n_batch);
  if (n_seq > n_ubatch)
    bad("-ub " + std::to_string(n_ubatch) + " is below the " + std::to_string(n_seq) +
        " sequences of a batch (-b / -c): give -ub of at least " + std::to_string(n_seq) + " or a smaller -b");

  const Model m = load_model(a.model);
  if (m.tokenizer().add_eos())
    throw Error(Errc::unsupported, a.model + ": the tokenizer appends EOS (add_eos_token), which llama-imatrix rejects too");
  if (m.n_ctx_train() > 0 && int64_t{n_seq} * n_ctx > m.n_ctx_train())
    std::fprintf(stderr, "imatrix: warning: the model was trained on %lld context tokens, %d specified\n",
                 static_cast<long long>(m.n_ctx_train()), n_seq * n_ctx);

  const auto t_tok = std::chrono::steady_clock::now();
  std::vector<token_id> tokens = m.tokenizer().tokenize(text, /*add_special=*/true, a.parse_special);
  std::fprintf(stderr, "imatrix: %s: %zu tokens (tokenized in %.1f ms)\n", a.text_file.c_str(), tokens.size(),
               1e3 * seconds_since(t_tok));
  if (a.from_chunk > 0) {
    if (static_cast<size_t>(a.from_chunk + 2) * n_ctx >= tokens.size())
      bad("--chunk " + std::to_string(a.from_chunk) + " leaves too few tokens of the " + std::to_string(tokens.size()) +
          " (two chunks of " + std::to_string(n_ctx) + " must remain)");
    tokens.erase(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(a.from_chunk) * n_ctx);
  }
  if (static_cast<int64_t>(tokens.size()) < 2 * int64_t{n_ctx})
    bad(a.text_file + " tokenizes to " + std::to_string(tokens.size()) + " tokens; -c " + std::to_string(n_ctx) +
        " needs at least " + std::to_string(2 * int64_t{n_ctx}) + " (two chunks): give a longer text or a smaller -c");
  const int n_chunk_max = static_cast<int>(tokens.size() / n_ctx);
  const int n_chunk = a.n_chunks < 0 ? n_chunk_max : std::min(a.n_chunks, n_chunk_max);
  const int num_batches = (n_ctx + n_batch - 1) / n_batch;
  const int first = n_ctx / 2, n_scored = n_ctx - 1 - first;
  const int64_t n_vocab = m.n_vocab();
  const Tokenizer& tok = m.tokenizer();
  const bool add_bos = tok.add_bos();
  if (add_bos && tok.bos() < 0) throw Error(Errc::format, "the model adds a BOS token but names none");

  Context ctx(m, a.threads);
  ImatrixCollector imatrix(a.process_output);
  for (const std::string& f : in_files) {
    std::fprintf(stderr, "imatrix: loading %s\n", f.c_str());
    imatrix.load(f, n_ctx);
  }
  ctx.set_imatrix(&imatrix);
  std::fprintf(stderr, "imatrix: computing over %d chunks, n_ctx=%d, batch_size=%d, n_seq=%d, %d threads\n", n_chunk,
               n_ctx, n_batch, n_seq, ctx.n_threads());

  std::vector<Sequence> caches;
  for (int s = 0; s < std::min(n_seq, n_chunk); ++s) caches.push_back(ctx.new_sequence(n_ctx));
  Batch rows;
  std::vector<double> nll_rows;  // [n_seq][n_scored]: the scored positions' NLLs of the chunks in flight
  std::vector<int> wanted;       // per ubatch row with logits: its index into nll_rows
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  const bool progress_lines = !a.ppl || ::isatty(STDOUT_FILENO) == 0;  // else the [i] line shows it
  Progress progress("imatrix", n_chunk);
  const auto t_start = std::chrono::steady_clock::now();

  for (int i = 0; i < n_chunk; i += n_seq) {
    const int n_seq_batch = std::min(n_seq, n_chunk - i);
    const size_t start = static_cast<size_t>(i) * n_ctx;
    for (int s = 0; s < n_seq_batch; ++s) caches[s].clear();
    nll_rows.assign(static_cast<size_t>(n_seq_batch) * n_scored, 0.0);
    const auto t_pass = std::chrono::steady_clock::now();
    for (int j = 0; j < num_batches; ++j) {
      const int batch_size = std::min(n_ctx - j * n_batch, n_batch);
      for (const Ubatch& u : ubatches(n_seq, n_seq_batch, j * n_batch, batch_size, n_ubatch)) {
        rows.clear();
        wanted.clear();
        for (int s = 0; s < n_seq_batch; ++s) {
          const size_t chunk_start = start + static_cast<size_t>(s) * n_ctx;
          for (int pos = u.pos; pos < u.pos + u.tokens; ++pos) {
            const token_id t = add_bos && pos == 0 ? tok.bos() : tokens[chunk_start + pos];
            const bool scored = a.ppl && pos >= first && pos < n_ctx - 1;
            // llama-imatrix asks for every row's logits: output.weight sees them all.
            rows.add(caches[s], t, a.process_output || scored);
            if (a.process_output || scored) wanted.push_back(scored ? s * n_scored + pos - first : -1);
          }
        }
        imatrix.set_ubatch_tokens(u.tokens * n_seq_batch);
        const int chunks_before = imatrix.chunk_count(n_ctx);
        const std::span<const float> logits = ctx.decode(rows);
        // llama-imatrix's rule: write when the chunk count passes a multiple
        // of the frequency (step: how far this ubatch moved it); the last
        // ubatch's writes are the final ones below.
        const int chunks_now = imatrix.chunk_count(n_ctx), step = chunks_now - chunks_before;
        const bool last = i + n_seq_batch >= n_chunk && j + 1 == num_batches && u.pos + u.tokens >= j * n_batch + batch_size;
        if (step > 0 && !last) {
          if ((chunks_now % a.out_freq) / step == 0) save_as(imatrix, a, a.out_file, n_ctx);
          if (a.save_freq > 0 && (chunks_now % a.save_freq) / step == 0)
            save_as(imatrix, a, a.out_file + ".at_" + std::to_string(chunks_now), n_ctx);
        }
        if (!a.ppl) continue;
        ctx.parallel_for(static_cast<int64_t>(wanted.size()), 1, [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            if (wanted[r] < 0) continue;
            const int s = wanted[r] / n_scored, pos = first + wanted[r] % n_scored;
            nll_rows[wanted[r]] = row_nll(logits.data() + r * n_vocab, n_vocab,
                                          tokens[start + static_cast<size_t>(s) * n_ctx + pos + 1]);
          }
        });
      }
    }
    if (i == 0) {
      const double t = seconds_since(t_pass);
      std::fprintf(stderr, "imatrix: %.2f seconds per pass - ETA %.2f minutes\n", t,
                   t * ((n_chunk + n_seq - 1) / n_seq) / 60.0);
    }
    if (a.ppl) {
      for (int s = 0; s < n_seq_batch; ++s) {
        for (int r = 0; r < n_scored; ++r) {
          const double v = nll_rows[static_cast<size_t>(s) * n_scored + r];
          nll += v, nll2 += v * v;
        }
        count += n_scored;
        std::printf("[%d]%.4f,", i + s + 1, std::exp(nll / static_cast<double>(count)));
      }
      std::fflush(stdout);
    }
    const int done = i + n_seq_batch;
    if (progress_lines && done < n_chunk) progress.update_chunks(done, n_ctx, seconds_since(t_start));
  }
  progress.clear();
  ctx.set_imatrix(nullptr);
  if (a.ppl) {
    const double mean = nll / static_cast<double>(count), ppl = std::exp(mean);
    const double var = nll2 / static_cast<double>(count) - mean * mean;
    if (var > 0) std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, ppl * std::sqrt(var / static_cast<double>(count - 1)));
    else std::printf("\nUnexpected negative standard deviation of log(prob)\n");
  }

  const double t_all = seconds_since(t_start);
  if (a.save_freq > 0 && imatrix.chunk_count(n_ctx) % a.save_freq == 0)
    save_as(imatrix, a, a.out_file + ".at_" + std::to_string(imatrix.chunk_count(n_ctx)), n_ctx);
  save_as(imatrix, a, a.out_file, n_ctx);
  std::fprintf(stderr, "imatrix: %d tokens in %.2f s (%.2f t/s)\n", n_chunk * n_ctx, t_all,
               n_chunk * double{1} * n_ctx / t_all);
  return 0;
}

}  // namespace

Runner add_imatrix(CLI::App& app) {
  auto a = std::make_shared<ImatrixArgs>();
  app.add_option("-m,--model", a->model, "GGUF model file (not needed with --in-file alone)");
  app.add_option("-f,--file", a->text_file, "the text to collect the activations over (read as bytes)");
  app.add_option("--in-file", a->in_files,
                 "an imatrix file (GGUF or legacy .dat) to start from; repeat it or separate names by commas to "
                 "combine several; with no -f they are only combined and written to -o");
  app.add_option("--output-format", a->output_format, "the format of -o: gguf (default) or dat (the legacy one)");
  app.add_option("--output-frequency", a->out_freq, "write -o every N chunks too (default 10)");
  app.add_option("--save-frequency", a->save_freq, "write a copy OUT.at_<chunks> every N chunks (default 0: never)");
  app.add_flag("--show-statistics", a->show_statistics,
               "print llama-imatrix's statistics of one --in-file and exit");
  app.add_option("-o,--output,--output-file", a->out_file, "the importance matrix to write (default imatrix.gguf)");
  app.add_option("-c,--ctx-size", a->n_ctx, "tokens per chunk (default 512)");
  app.add_option("--chunks", a->n_chunks, "chunks to process (default -1 = all)");
  app.add_option("--chunk,--from-chunk", a->from_chunk, "skip this many chunks at the start of the text (default 0)");
  app.add_flag("--process-output", a->process_output, "collect output.weight too (default: only the blk.* matrices)");
  app.add_flag("--ppl,!--no-ppl", a->ppl, "print the perplexity of each chunk's second half (default on)");
  app.add_flag("--parse-special", a->parse_special, "tokenize special-token texts as their tokens (default: as text)");
  app.add_option("-b,--batch-size", a->n_batch,
                 "tokens per batch (default 2048): max(1, b / c) chunks run together as sequences");
  app.add_option("--ubatch-size", a->n_ubatch, "tokens per ubatch (-ub, default 512), as llama.cpp splits a batch");
  app.add_option("-t,--threads", a->threads, "threads (default: physical cores)");
  return [a] { return run(*a); };
}

}  // namespace synapse::tools

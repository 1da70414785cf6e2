// synapse imatrix -m MODEL -f TEXT [-o imatrix.gguf] [-c 512] [--chunks N] [--process-output]
//                 [-b 2048] [-ub 512] [-t T] [--chunk N] [--parse-special] [--no-ppl]
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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

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

int run(const ImatrixArgs& a) {
  const auto bad = [](const std::string& msg) { throw Error(Errc::invalid_argument, "imatrix: " + msg); };
  if (a.text_file.empty()) bad("-f FILE is required (the text to collect the activations over)");
  if (a.n_ctx < 1) bad("-c must be at least 1, got " + std::to_string(a.n_ctx));
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
  if (!a.out_file.ends_with(".gguf"))
    std::fprintf(stderr, "imatrix: warning: writing the GGUF format to %s, whose name does not end in .gguf\n",
                 a.out_file.c_str());

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
        const std::span<const float> logits = ctx.decode(rows);
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

  const size_t n_entries = imatrix.save(a.out_file, {a.text_file}, n_ctx);
  const double t_all = seconds_since(t_start);
  std::fprintf(stderr, "imatrix: saved %zu matrices to %s (%d chunks of %d tokens); %d tokens in %.2f s (%.2f t/s)\n",
               n_entries, a.out_file.c_str(), imatrix.chunk_count(n_ctx), n_ctx, n_chunk * n_ctx, t_all,
               n_chunk * double{1} * n_ctx / t_all);
  return 0;
}

}  // namespace

Runner add_imatrix(CLI::App& app) {
  auto a = std::make_shared<ImatrixArgs>();
  app.add_option("-m,--model", a->model, "GGUF model file")->required();
  app.add_option("-f,--file", a->text_file, "the text to collect the activations over (read as bytes)");
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

// synapse logits -m MODEL --ids 1,2,3 -o out.f32 [--greedy K] [-t T] [-b N] [-ub N]
// Runs the ids as one prompt (in forward passes of at most min(-b, -ub) rows,
// as `synapse run` does) and writes the logits of every position as
// little-endian float32, row-major [n_tokens][n_vocab]. --greedy K then
// prints the next K greedy ids (argmax, fed back one at a time), comma
// separated, on stdout.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "progress.hpp"
#include "base/strings.hpp"
#include "common_flags.hpp"
#include "synapse/error.hpp"
#include "synapse/sampling.hpp"
#include "synapse/synapse.hpp"

namespace synapse::tools {
namespace {

struct LogitsArgs {
  std::string model, ids, out;
  int greedy = 0, threads = 0, n_ctx = 0;
  int n_batch = 2048, n_ubatch = 512;  // -b, -ub: llama.cpp's defaults
};

std::vector<token_id> parse_ids(const std::string& s) {
  std::vector<token_id> ids;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    const std::string item = s.substr(i, j - i);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 0 || v > INT32_MAX)
      throw Error(Errc::invalid_argument, "--ids: '" + item + "' is not a token id");
    ids.push_back(static_cast<token_id>(v));
    i = j + 1;
  }
  if (ids.empty()) throw Error(Errc::invalid_argument, "--ids: no token ids given");
  return ids;
}

int run(const LogitsArgs& a) {
  const std::vector<token_id> ids = parse_ids(a.ids);
  const Model model = load_model(a.model);
  const int64_t n_ctx = a.n_ctx > 0 ? a.n_ctx : static_cast<int64_t>(ids.size()) + a.greedy;
  Context ctx(model, a.threads);
  Sequence seq = ctx.new_sequence(n_ctx);
  std::vector<float> logits;
  Batch batch;
  // Every op is per row (contract 2), so the split changes no bit.
  const size_t step = static_cast<size_t>(std::min(a.n_batch, a.n_ubatch));
  for (size_t i = 0; i < ids.size(); i += step) {
    batch.clear();
    for (size_t k = i; k < std::min(i + step, ids.size()); ++k) batch.add(seq, ids[k], true);
    const std::span<const float> chunk = ctx.decode(batch);
    logits.insert(logits.end(), chunk.begin(), chunk.end());
  }
  if (!a.out.empty()) {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(a.out.c_str(), "wb"), &std::fclose);
    if (!f || std::fwrite(logits.data(), sizeof(float), logits.size(), f.get()) != logits.size())
      throw Error(Errc::io, a.out + ": cannot write the logits");
  }
  if (a.greedy > 0) {
    const int64_t n_vocab = model.n_vocab();
    std::span<const float> last(logits.data() + (ids.size() - 1) * n_vocab, n_vocab);
    std::vector<token_id> greedy;
    for (int k = 0; k < a.greedy; ++k) {
      const token_id next = synapse::sample_greedy(last);
      greedy.push_back(next);
      if (k + 1 == a.greedy) break;
      const token_id one[1] = {next};
      last = ctx.decode(seq, one);
    }
    std::printf("%s\n", join(greedy, ",").c_str());
  }
  return 0;
}

}  // namespace

Runner add_logits(CLI::App& app) {
  auto a = std::make_shared<LogitsArgs>();
  app.add_option("-m,--model", a->model, "GGUF model file")->required();
  app.add_option("--ids", a->ids, "comma-separated token ids, run as one prompt")->required();
  app.add_option("-o,--output", a->out, "write [n_tokens][n_vocab] float32 logits here");
  app.add_option("--greedy", a->greedy, "then print the next K greedy ids")
      ->check(int_range(0, INT32_MAX / 2));
  add_threads_flag(app, a->threads);
  add_batch_flags(app, a->n_batch, a->n_ubatch);
  app.add_option("-c,--ctx-size", a->n_ctx, "context size (default: ids + K)");
  return [a] { return run(*a); };
}

}  // namespace synapse::tools

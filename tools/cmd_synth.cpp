// synapse synth --preset NAME --type TYPE -o FILE.gguf [-t T] [--seed S]
// Writes a model with random weights at the real shapes of a known model (see
// synapse/synth.hpp), for benchmarking without downloads. Prints the tensor
// count, parameters, tensor bytes and time to stderr.
//
// Hidden flags for tests: --layers N, --vocab N and --experts N shrink the
// preset.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "common_flags.hpp"
#include "progress.hpp"
#include "synapse/error.hpp"
#include "synapse/synapse.hpp"
#include "synapse/synth.hpp"

namespace synapse::tools {
namespace {

struct SynthArgs {
  std::string preset;
  std::string type = "Q8_0";
  std::string out;
  int threads = 0;
  uint64_t seed = 42;
  int64_t layers = 0;
  int64_t vocab = 0;
  int64_t experts = 0;
  bool list = false;
};

int run(const SynthArgs& a) {
  if (a.list) {
    std::printf("presets:");
    for (const std::string& n : synth_preset_names()) std::printf(" %s", n.c_str());
    std::printf("\ntypes:");
    for (const std::string& n : synth_type_names()) std::printf(" %s", n.c_str());
    std::printf("\n");
    return 0;
  }
  if (a.preset.empty()) throw Error(Errc::invalid_argument, "synth: --preset is required (--list shows the presets)");
  if (a.out.empty()) throw Error(Errc::invalid_argument, "synth: -o FILE.gguf is required");
  if (a.layers < 0 || a.vocab < 0 || a.experts < 0)
    throw Error(Errc::invalid_argument, "synth: --layers, --vocab and --experts must be positive");
  const int threads = a.threads > 0 ? a.threads : default_thread_count();
  Ticker ticker("synapse synth: writing " + a.out);  // on a terminal
  const SynthStats r = write_synthetic_model(
      a.out, {.preset = a.preset, .type = a.type, .seed = a.seed, .n_layer = a.layers, .n_vocab = a.vocab,
              .n_expert = a.experts, .n_threads = threads});
  ticker.stop();
  std::fprintf(stderr,
               "synapse synth: %s %s -> %s: %llu params, %.1f MB tensor data (%.2f MiB), %.1f MB file, "
               "%.1f s on %d threads\n",
               a.preset.c_str(), a.type.c_str(), a.out.c_str(), static_cast<unsigned long long>(r.n_params),
               r.tensor_bytes / 1e6, r.tensor_bytes / 1048576.0, r.file_bytes / 1e6, r.seconds, threads);
  return 0;
}

}  // namespace

Runner add_synth(CLI::App& app) {
  auto a = std::make_shared<SynthArgs>();
  app.add_option("--preset", a->preset,
                 "model shape: smollm2-135m, qwen2.5-0.5b, llama-3.2-1b, llama-3.1-8b, qwen3-30b-a3b, gpt-oss-20b, gemma-3-4b, "
                 "qwen3.5-4b, qwen3.5-35b-a3b");
  app.add_option("--type", a->type, "file type: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q6_K, Q4_K_M, Q5_K_M, IQ4_NL, IQ4_XS, MXFP4_MOE, "
                 "IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ3_XXS, IQ3_XS, IQ3_S, IQ3_M, IQ1_S, IQ1_M (IQ1-IQ3 tensors: random blocks)");
  app.add_option("-o,--output", a->out, "output GGUF file");
  add_threads_flag(app, a->threads);
  app.add_option("--seed", a->seed, "random seed (default 42)");
  app.add_flag("--list", a->list, "list the presets and types");
  app.add_option("--layers", a->layers, "override the layer count (tests)")->group("");
  app.add_option("--vocab", a->vocab, "override the vocabulary size (tests)")->group("");
  app.add_option("--experts", a->experts, "override an MoE preset's expert count (tests)")->group("");
  return [a] { return run(*a); };
}

}  // namespace synapse::tools

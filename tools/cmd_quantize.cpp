// synapse quantize IN.gguf OUT.gguf TYPE [--pure] [--allow-requantize] [-t T]
// Writes IN's weights requantized to TYPE with llama-quantize's per-tensor
// choice of types and metadata (synapse/quantize.hpp, src/runtime/quantize_model.hpp). Prints one line
// per tensor and the sizes before and after on stdout; errors are one line on
// stderr (main.cpp).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "commands.hpp"
#include "base/strings.hpp"
#include "common_flags.hpp"
#include "synapse/error.hpp"
#include "synapse/quantize.hpp"
#include "synapse/synapse.hpp"

namespace synapse::tools {
namespace {

struct QuantizeArgs {
  std::string in, out, type;
  bool pure = false, allow_requantize = false;
  int threads = 0;
};

std::string shape_of(const TensorPlan& p) {
  return join_in("[", std::span(p.ne.data(), p.n_dims), ", ", "]");
}

int run(const QuantizeArgs& a) {
  QuantizeParams opt;
  opt.ftype = parse_file_type(a.type);  // a bad name fails before any file is touched
  opt.pure = a.pure;
  opt.allow_requantize = a.allow_requantize;
  opt.nthread = a.threads > 0 ? a.threads : default_thread_count();
  std::error_code ec;
  if (std::filesystem::equivalent(a.in, a.out, ec))
    throw Error(Errc::invalid_argument, "output " + a.out + " is the input file; choose another path");

  std::printf("synapse: quantizing %s to %s as %s%s, threads: %d\n", a.in.c_str(), a.out.c_str(),
              std::string(file_type_name(opt.ftype)).c_str(), opt.pure ? " (pure)" : "", opt.nthread);
  uint64_t bytes_in = 0, bytes_out = 0;
  const auto plan = quantize_model(a.in, a.out, opt, [&](const TensorPlan& p) {
    bytes_in += p.bytes_in;
    bytes_out += p.bytes_out;
    std::printf("%-40s %-22s %-7s -> %-7s %10.3f MiB -> %10.3f MiB%s\n", p.name.c_str(), shape_of(p).c_str(),
                std::string(type_name(p.from)).c_str(), std::string(type_name(p.to)).c_str(),
                p.bytes_in / 1048576.0, p.bytes_out / 1048576.0, p.fallback ? "  (fallback: row length)" : "");
  });
  std::printf("%zu tensors: %.3f MiB -> %.3f MiB, written to %s\n", plan.size(), bytes_in / 1048576.0,
              bytes_out / 1048576.0, a.out.c_str());
  return 0;
}

}  // namespace

Runner add_quantize(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  app.add_option("input", a->in, "input GGUF file")->required();
  app.add_option("output", a->out, "output GGUF file")->required();
  app.add_option("type", a->type, "file type: " + file_type_names() + " (case-insensitive)")->required();
  app.add_flag("--pure", a->pure, "one type for every weight (no Q4_K_M-style mix; row-length fallbacks kept)");
  app.add_flag("--allow-requantize", a->allow_requantize, "accept already quantized input tensors");
  add_threads_flag(app, a->threads);
  return [a] { return run(*a); };
}

}  // namespace synapse::tools

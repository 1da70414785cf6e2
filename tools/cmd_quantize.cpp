// synapse quantize [flags] IN.gguf [OUT.gguf] TYPE [NTHREADS]
//   flags: --pure --allow-requantize --leave-output-tensor --output-tensor-type T
//          --token-embedding-type T --imatrix FILE -t T
// llama-quantize's command line: TYPE is a name (Q4_K_M, case-insensitive)
// or its number as llama-quantize lists them (15 = Q4_K_M); without OUT the
// output is IN's folder/ggml-model-TYPE.gguf; NTHREADS as -t. Writes IN's
// weights requantized with llama-quantize's per-tensor choice of types and
// metadata (synapse/quantize.hpp, src/runtime/quantize_model.hpp). The output
// path is checked (folder exists and is writable, not the input, not a
// folder) before any tensor is converted. Prints one line per tensor,
// "[  i/  N] name ...", and the sizes before and after on stdout; on a
// terminal with stdout elsewhere, a progress line on stderr. Errors are one
// line on stderr (main.cpp).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/strings.hpp"
#include "commands.hpp"
#include "common_flags.hpp"
#include "progress.hpp"
#include "synapse/error.hpp"
#include "synapse/gguf.hpp"
#include "synapse/quantize.hpp"
#include "synapse/synapse.hpp"

namespace synapse::tools {
namespace {

struct QuantizeArgs {
  std::vector<std::string> positional;  // IN [OUT] TYPE [NTHREADS]
  std::string output_tensor_type, token_embedding_type, imatrix;
  bool pure = false, allow_requantize = false, leave_output_tensor = false;
  int threads = 0;
};

std::string shape_of(const TensorPlan& p) {
  return join_in("[", std::span(p.ne.data(), p.n_dims), ", ", "]");
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// A file type by name or by llama_ftype number (llama-quantize's try_parse_ftype).
bool try_file_type(const std::string& s, FileType* ft) {
  if (all_digits(s)) {
    if (s.size() > 4) return false;
    const auto f = static_cast<FileType>(std::stoul(s));
    if (file_type_name(f) == "unknown") return false;
    *ft = f;
    return true;
  }
  try {
    *ft = parse_file_type(s);
    return true;
  } catch (const Error&) {
    return false;
  }
}

GgmlType parse_tensor_type(const std::string& flag, const std::string& name) {
  GgmlType t{};
  if (!type_from_name(name, t)) throw Error(Errc::invalid_argument, flag + ": unknown ggml type '" + name + "'");
  return t;
}

// The output path must be writable before hours of work go into it.
void check_output_path(const std::string& in, const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::equivalent(in, out, ec)) throw Error(Errc::invalid_argument, "output " + out + " is the input file; choose another path");
  if (fs::is_directory(out, ec)) throw Error(Errc::io, "output " + out + " is a directory; give a file name");
  const fs::path dir = fs::path(out).has_parent_path() ? fs::path(out).parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) throw Error(Errc::io, "output " + out + ": the folder " + dir.string() + " does not exist");
  if (fs::exists(out, ec) ? ::access(out.c_str(), W_OK) != 0 : ::access(dir.c_str(), W_OK) != 0)
    throw Error(Errc::io, "output " + out + ": not writable (" + (fs::exists(out, ec) ? "the file" : "the folder " + dir.string()) + ")");
}

int run(const QuantizeArgs& a) {
  const std::vector<std::string>& pos = a.positional;
  if (pos.size() < 2 || pos.size() > 4)
    throw Error(Errc::invalid_argument, "quantize: give IN.gguf [OUT.gguf] TYPE [NTHREADS]");
  const std::string in = pos[0];
  std::string out;
  QuantizeParams opt;
  size_t next = 1;
  if (try_file_type(pos[1], &opt.ftype)) {
    // llama-quantize IN TYPE: the output beside the input.
    const std::filesystem::path dir = std::filesystem::path(in).parent_path();
    out = (dir / ("ggml-model-" + std::string(file_type_name(opt.ftype)) + ".gguf")).string();
    next = 2;
  } else {
    if (pos.size() < 3) parse_file_type(pos[1]);  // IN TYPE with a bad TYPE: name it
    out = pos[1];
    if (!try_file_type(pos[2], &opt.ftype)) parse_file_type(pos[2]);  // throws, naming it and the valid names
    next = 3;
  }
  int threads = a.threads;
  if (next < pos.size()) {
    if (!all_digits(pos[next]) || pos[next].size() > 4 || std::stoi(pos[next]) > max_threads)
      throw Error(Errc::invalid_argument, "quantize: NTHREADS must be a number in [0, 512], got '" + pos[next] + "'");
    threads = std::stoi(pos[next]);
    ++next;
  }
  if (next != pos.size()) throw Error(Errc::invalid_argument, "quantize: unexpected argument '" + pos[next] + "'");
  opt.pure = a.pure;
  opt.allow_requantize = a.allow_requantize;
  opt.quantize_output_tensor = !a.leave_output_tensor;
  if (!a.output_tensor_type.empty()) opt.output_tensor_type = parse_tensor_type("--output-tensor-type", a.output_tensor_type);
  if (!a.token_embedding_type.empty())
    opt.token_embedding_type = parse_tensor_type("--token-embedding-type", a.token_embedding_type);
  opt.imatrix = a.imatrix;
  opt.nthread = threads > 0 ? threads : default_thread_count();
  check_output_path(in, out);
  const size_t n_tensors = gguf::File::open(in).tensors().size();  // the input is read before anything is written

  std::printf("synapse: quantizing %s to %s as %s%s, threads: %d\n", in.c_str(), out.c_str(),
              std::string(file_type_name(opt.ftype)).c_str(), opt.pure ? " (pure)" : "", opt.nthread);
  uint64_t bytes_in = 0, bytes_out = 0;
  size_t done = 0;
  // The lines on stdout are the progress when stdout is the terminal.
  Progress progress("synapse: quantizing", static_cast<int64_t>(n_tensors));
  const bool show = progress.active() && ::isatty(STDOUT_FILENO) == 0;
  const int width = static_cast<int>(std::to_string(n_tensors).size());
  const auto plan = quantize_model(in, out, opt, [&](const TensorPlan& p) {
    bytes_in += p.bytes_in;
    bytes_out += p.bytes_out;
    ++done;
    std::printf("[%*zu/%*zu] %-40s %-22s %-7s -> %-7s %10.3f MiB -> %10.3f MiB%s\n", width, done, width, n_tensors,
                p.name.c_str(), shape_of(p).c_str(), std::string(type_name(p.from)).c_str(),
                std::string(type_name(p.to)).c_str(), p.bytes_in / 1048576.0, p.bytes_out / 1048576.0,
                p.fallback ? "  (fallback: row length)" : "");
    if (show) {
      std::fflush(stdout);
      progress.update(static_cast<int64_t>(done), p.name);
    }
  });
  progress.clear();
  std::printf("%zu tensors: %.3f MiB -> %.3f MiB, written to %s\n", plan.size(), bytes_in / 1048576.0,
              bytes_out / 1048576.0, out.c_str());
  return 0;
}

}  // namespace

Runner add_quantize(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  app.add_option("args", a->positional,
                 "IN.gguf [OUT.gguf] TYPE [NTHREADS]: TYPE is a name (" + file_type_names() +
                     "; case-insensitive) or llama-quantize's number for it (15 = Q4_K_M); without OUT, "
                     "IN's folder/ggml-model-TYPE.gguf")
      ->required();
  app.add_flag("--pure", a->pure, "one type for every weight (no Q4_K_M-style mix; row-length fallbacks kept)");
  app.add_flag("--allow-requantize", a->allow_requantize, "accept already quantized input tensors");
  app.add_flag("--leave-output-tensor", a->leave_output_tensor, "copy output.weight as it is");
  app.add_option("--output-tensor-type", a->output_tensor_type, "ggml type for output.weight (e.g. q8_0, f16)");
  app.add_option("--token-embedding-type", a->token_embedding_type, "ggml type for token_embd.weight (e.g. q8_0)");
  app.add_option("--imatrix", a->imatrix,
                 "importance matrix (llama-imatrix's GGUF or .dat file) to weight the quantization by; needed for "
                 "IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ1_S, IQ1_M and IQ3_XXS tensors");
  add_threads_flag(app, a->threads);
  return [a] { return run(*a); };
}

}  // namespace synapse::tools

// llama.cpp's command lines, read as llama.cpp reads them. One table
// (llama_flags.cpp) says, per subcommand, what each llama.cpp flag that is
// not one of synapse's own does here:
//   map     rewritten to synapse's name for it (-ngl is not one, -ub is:
//           --ubatch-size); CLI11 reads one-dash names as one letter plus a
//           value or a bundle (-ub 8 would be -u -b 8), so multi-letter short
//           flags must be rewritten before it parses;
//   accept  dropped silently: it asks for what the subcommand does anyway
//           (-cnv for chat, -ctk f16);
//   ignore  dropped with its value, and named on one warning line: it has
//           no effect on a CPU engine without a network (-ngl 99, -fa on,
//           --mlock, --no-warmup, -dev, -sm, ...);
//   refuse  an error naming the flag and why (-hf: synapse downloads
//           nothing; --lora: not supported), unless its value is the one that
//           asks for what synapse does (--mirostat 0), which is accepted.
// A flag synapse's subcommand defines itself always keeps synapse's meaning.
// Sources: llama.cpp v0.5.0's common/arg.cpp, tools/llama-bench/llama-bench.cpp,
// tools/quantize/quantize.cpp (the --help of each tool).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace synapse::tools {

// What normalize_llama_flags made of a command line.
struct LlamaArgs {
  std::vector<std::string> args;     // for CLI11 (the subcommand name first)
  std::vector<std::string> ignored;  // "-ngl 99", "--mlock": the flags dropped with a warning
  // Synapse's long name -> the llama.cpp spelling the user typed ("--ubatch-size"
  // -> "-ub"), so that CLI11's error about the value names what was typed.
  std::vector<std::pair<std::string, std::string>> spelled;
};

// Rewrites args[1..] (args[0] is the subcommand's name, `sub` its CLI11 app
// with every option registered) by the table. Throws CLI::ValidationError
// naming the flag for a refused flag, a missing value, or a value
// llama.cpp would reject (-fa maybe).
LlamaArgs normalize_llama_flags(const CLI::App& sub, const std::vector<std::string>& args);

// The warning line for `ignored` (empty when none): "synapse run: ignoring
// flags that have no effect here (CPU only, no network): -ngl 99, --mlock".
std::string ignored_flags_warning(const std::string& command, const std::vector<std::string>& ignored);

// A footer for `synapse COMMAND --help`: llama.cpp's short flags it reads,
// and the classes of llama.cpp flags it ignores or refuses.
std::string llama_flags_footer(const std::string& command);

}  // namespace synapse::tools

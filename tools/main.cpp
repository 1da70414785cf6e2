// synapse: the command line. `synapse <command> --help` lists each command's flags.
#include <algorithm>
#include <cstdio>
#include <vector>
#include <map>
#include <string>

#include "commands.hpp"
#include "synapse/error.hpp"
#include "synapse/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"synapse: run GGUF Llama-family models on the CPU"};
  app.set_version_flag("--version", std::string("synapse ") + synapse::kVersion);
  app.require_subcommand(1);
  std::map<CLI::App*, synapse::tools::Runner> runners;
  auto add = [&](const char* name, const char* about, auto adder) {
    CLI::App* sub = app.add_subcommand(name, about);
    runners[sub] = adder(*sub);
  };
  add("run", "generate text from a prompt", synapse::tools::add_run);
  add("chat", "interactive multi-turn chat with the model's template", synapse::tools::add_chat);
  add("logits", "write the logits of every position of a token sequence", synapse::tools::add_logits);
  add("info", "list a GGUF file's metadata and tensors", synapse::tools::add_info);
  add("tokenize", "print the token ids of a text (like llama-tokenize)", synapse::tools::add_tokenize);
  add("synth", "write a random-weight model at a real model's shapes", synapse::tools::add_synth);
  add("bench", "measure prefill and decode speed (like llama-bench)", synapse::tools::add_bench);
  add("perplexity", "perplexity over a text and KL divergence against a base model (like llama-perplexity)",
      synapse::tools::add_perplexity);
  add("quantize", "requantize a GGUF file's weights (llama-quantize's types and mixes)", synapse::tools::add_quantize);
  add("serve", "OpenAI- and llama-server-compatible HTTP server", synapse::tools::add_serve);
  // llama.cpp spells a few long options with one dash (-sys, -cnv, -ub, -np, -to, -jf);
  // CLI11 takes one-dash names as single letters, so they are rewritten to
  // their long forms first.
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::string& a : args) {
    if (a == "-sys") a = "--system-prompt";
    else if (a == "-cnv") a = "--chat";
    else if (a == "-ub") a = "--ubatch-size";
    else if (a == "-np") a = "--parallel";
    else if (a == "-to") a = "--timeout";
    else if (a == "-jf") a = "--json-schema-file";
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const synapse::Error& e) {
    std::fprintf(stderr, "synapse: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "synapse: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "synapse: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}

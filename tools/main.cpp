// synapse: the command line. `synapse <command> --help` lists each command's flags.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "commands.hpp"
#include "llama_flags.hpp"
#include "synapse/error.hpp"
#include "synapse/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"synapse: run GGUF Llama-family models on the CPU"};
  app.set_version_flag("--version", std::string("synapse ") + synapse::kVersion);
  app.require_subcommand(1);
  // A flag given twice takes its last value, as in llama.cpp (list options,
  // such as --stop or bench's -p, keep every value).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::map<CLI::App*, synapse::tools::Runner> runners;
  auto add = [&](const char* name, const char* about, auto adder) {
    CLI::App* sub = app.add_subcommand(name, about);
    runners[sub] = adder(*sub);
    sub->footer(synapse::tools::llama_flags_footer(name));
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
  add("imatrix", "compute an importance matrix over a text for quantize --imatrix (like llama-imatrix)",
      synapse::tools::add_imatrix);
  add("quantize", "requantize a GGUF file's weights (llama-quantize's types and mixes)", synapse::tools::add_quantize);
#if SYNAPSE_HAS_SERVER
  add("serve", "OpenAI- and llama-server-compatible HTTP server", synapse::tools::add_serve);
#else
  // Built with -DSYNAPSE_BUILD_SERVER=OFF: the command says so, whatever its flags.
  add("serve", "(not in this build: configured with -DSYNAPSE_BUILD_SERVER=OFF)", [](CLI::App& app) {
    app.allow_extras();
    return synapse::tools::Runner([] {
      std::fprintf(stderr, "synapse serve: not in this build (configured with -DSYNAPSE_BUILD_SERVER=OFF)\n");
      return 1;
    });
  });
#endif

  // llama.cpp's flags the subcommand does not define are mapped, dropped or
  // refused by llama_flags.cpp's table before CLI11 parses.
  std::vector<std::string> args(argv + 1, argv + argc);
  synapse::tools::LlamaArgs llama;
  CLI::App* sub = nullptr;
  if (!args.empty())
    for (CLI::App* s : app.get_subcommands({}))
      if (s->get_name() == args[0]) sub = s;
  // CLI11 names an option by its long name: say it as the user spelled it
  // (-ub), or with its short name too (-c/--ctx-size).
  app.failure_message([&llama, &sub](const CLI::App* a, const CLI::Error& e) {
    std::string msg = CLI::FailureMessage::simple(a, e);
    const size_t colon = msg.find(':');
    if (msg.compare(0, 2, "--") != 0 || colon == std::string::npos) return msg;
    const std::string name = msg.substr(0, colon);
    for (const auto& [long_name, typed] : llama.spelled)
      if (long_name == name) return typed + " (" + name + ")" + msg.substr(colon);
    if (sub != nullptr)
      for (const CLI::Option* o : sub->get_options())
        if (!o->get_snames().empty() && !o->get_lnames().empty() && "--" + o->get_lnames().front() == name)
          return "-" + o->get_snames().front() + "/" + msg;
    return msg;
  });
  try {
    if (sub != nullptr) {
      llama = synapse::tools::normalize_llama_flags(*sub, args);
      args = llama.args;
    }
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!llama.ignored.empty())
    std::fprintf(stderr, "%s\n", synapse::tools::ignored_flags_warning(sub->get_name(), llama.ignored).c_str());
  // For the flag-table test: stop once the command line is read.
  if (std::getenv("SYNAPSE_CLI_PARSE_ONLY") != nullptr) return 0;
  try {
    for (auto& [s, run] : runners)
      if (s->parsed()) return run();
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

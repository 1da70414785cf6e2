// The `synapse` subcommands. Each registers its flags on a CLI11 subcommand
// and returns the function that runs it (exit code). Flags follow llama.cpp's.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace synapse::tools {

using Runner = std::function<int()>;

Runner add_run(CLI::App& app);     // generate text from a prompt
Runner add_chat(CLI::App& app);    // interactive multi-turn chat
Runner add_logits(CLI::App& app);  // logits of every position, for golden comparisons
Runner add_info(CLI::App& app);    // metadata and tensors of a GGUF file
Runner add_tokenize(CLI::App& app);  // text -> token ids, like llama-tokenize
Runner add_synth(CLI::App& app);   // random-weight model at a real model's shapes
Runner add_bench(CLI::App& app);   // prefill / decode speed, like llama-bench
Runner add_quantize(CLI::App& app);  // requantize a GGUF file like llama-quantize
Runner add_perplexity(CLI::App& app);  // perplexity and KL divergence, like llama-perplexity
Runner add_imatrix(CLI::App& app);  // importance matrix over a text, like llama-imatrix
Runner add_serve(CLI::App& app);   // OpenAI- and llama-server-compatible HTTP server (SYNAPSE_BUILD_SERVER)

}  // namespace synapse::tools

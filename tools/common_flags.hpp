// Flags that several subcommands share, with llama.cpp's names and one
// clear message for a value out of range: -t, -b, -ub, -c.
#pragma once

#include <cmath>
#include <string>

#include <CLI/CLI.hpp>

#include "synapse/synapse.hpp"

namespace synapse::tools {

// A CLI11 check that an integer flag lies in [lo, hi]; CLI11 puts the flag's
// name before the message ("--batch-size: must be at least 1, got 0").
inline CLI::Validator int_range(long long lo, long long hi, const std::string& why = "") {
  return CLI::Validator(
      [=](const std::string& v) -> std::string {
        long long x = 0;
        size_t used = 0;
        try {
          x = std::stoll(v, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != v.size()) return "'" + v + "' is not an integer";
        if (x < lo) return "must be at least " + std::to_string(lo) + why + ", got " + v;
        if (x > hi) return "must be at most " + std::to_string(hi) + why + ", got " + v;
        return "";
      },
      "", "");
}

// A CLI11 check that a number flag is finite and lies in [lo, hi].
inline CLI::Validator num_range(double lo, double hi) {
  return CLI::Validator(
      [=](const std::string& v) -> std::string {
        double x = 0;
        size_t used = 0;
        try {
          x = std::stod(v, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != v.size() || !std::isfinite(x)) return "'" + v + "' is not a finite number";
        char buf[96];
        if (x < lo) {
          std::snprintf(buf, sizeof buf, "must be at least %g, got %s", lo, v.c_str());
          return buf;
        }
        if (x > hi) {
          std::snprintf(buf, sizeof buf, "must be at most %g, got %s", hi, v.c_str());
          return buf;
        }
        return "";
      },
      "", "");
}

// -c/--ctx-size: 0 (the default) means the model's, at most 4096.
inline void add_ctx_flag(CLI::App& app, int& n_ctx) {
  app.add_option("-c,--ctx-size", n_ctx, "context size in tokens (default 0: the model's, at most 4096)")
      ->check(int_range(0, INT32_MAX));
}

// -t/--threads: 0 (the default) means one per physical core; at most
// synapse::max_threads (ggml's GGML_MAX_N_THREADS).
inline void add_threads_flag(CLI::App& app, int& threads) {
  app.add_option("-t,--threads", threads, "threads (default: physical cores; at most 512)")
      ->check(int_range(0, max_threads, " (ggml's GGML_MAX_N_THREADS)"));
}

// -b/--batch-size and -ub/--ubatch-size (llama_flags.cpp rewrites -ub): the prompt
// runs in forward passes of at most min(-b, -ub) rows. Both at least 1.
inline void add_batch_flags(CLI::App& app, int& n_batch, int& n_ubatch) {
  app.add_option("-b,--batch-size", n_batch, "logical batch size for the prompt (default 2048)")
      ->check(int_range(1, INT32_MAX));
  app.add_option("--ubatch-size", n_ubatch, "physical batch size, rows per forward pass (-ub, default 512)")
      ->check(int_range(1, INT32_MAX));
}

}  // namespace synapse::tools

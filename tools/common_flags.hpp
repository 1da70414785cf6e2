// Flags that several subcommands share, with llama.cpp's names and one
// clear message for a value out of range: -t, -b, -ub, -c, -ctk, -ctv.
#pragma once

#include <cctype>
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

// A CLI11 check that a flag's value names a KV cache type
// (synapse::kv_cache_type_from_name); the message names the value and the
// types allowed.
inline CLI::Validator kv_type_name() {
  return CLI::Validator(
      [](const std::string& v) -> std::string {
        try {
          kv_cache_type_from_name(v);
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      },
      "", "");
}

// -ctk/--cache-type-k and -ctv/--cache-type-v (llama_flags.cpp rewrites the
// short forms), by llama.cpp's names: f16 (default), bf16, q8_0, q4_0,
// q5_0, iq4_nl.
struct KvTypeFlags {
  std::string k = "f16", v = "f16";
};
inline void add_kv_type_flags(CLI::App& app, KvTypeFlags& f) {
  app.add_option("--cache-type-k", f.k, "KV cache type for K (-ctk): f16 (default), bf16, q8_0, q4_0, q5_0, iq4_nl")
      ->check(kv_type_name());
  app.add_option("--cache-type-v", f.v, "KV cache type for V (-ctv): f16 (default), bf16, q8_0, q4_0, q5_0, iq4_nl")
      ->check(kv_type_name());
}
// A type as llama.cpp prints it (ggml_type_name: "q8_0", "f16").
inline std::string kv_type_label(GgmlType t) {
  std::string s(type_name(t));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Gives ctx the flags' types (Context::set_kv_types; its error names a type
// the model's head size cannot take).
inline void apply_kv_types(Context& ctx, const KvTypeFlags& f) {
  ctx.set_kv_types(kv_cache_type_from_name(f.k), kv_cache_type_from_name(f.v));
}

}  // namespace synapse::tools

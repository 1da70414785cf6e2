// Synthetic models for benchmarks and tests: a GGUF file with random weights
// at the real shapes of a known Llama-family model, which synapse and
// llama.cpp load like the real thing. Speed depends only on the shapes and
// tensor types, never on the values, so benchmarks need no download; tests
// get a small valid model of any supported type (shrink it with n_layer and
// n_vocab). The file holds the architecture's metadata, a synthetic
// SentencePiece-style vocabulary, every tensor of the real model with the
// type llama-quantize gives it for the file type (llama.cpp
// llama_tensor_get_type), and weights drawn from an approximately normal
// distribution (sd 0.02; norms 1).
//
// Thread-safety: every function here is thread-safe; two calls writing the
// same path at once leave that file in an unspecified state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace synapse {

// The shape presets, real models' config.json values: "smollm2-135m",
// "qwen2.5-0.5b", "llama-3.2-1b", "llama-3.1-8b", "qwen3-30b-a3b" (Qwen3-MoE:
// 128 experts of which 8 are used; about 17 GB as Q4_K_M), "gpt-oss-20b"
// (32 experts of which 4 are used, biases, sinks, a sliding window; about
// 12 GB as MXFP4_MOE, the published file's types), "gemma-3-4b",
// "qwen3.5-4b" (Gated DeltaNet hybrid: 24 DeltaNet and 8 gated-attention
// layers), "qwen3.5-35b-a3b" (the same hybrid with 256 experts of which 8
// are used and a shared expert; about 19 GB as IQ4_XS).
std::vector<std::string> synth_preset_names();

// The file types write_synthetic_model takes (llama-quantize's names,
// case-insensitive): F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q6_K,
// Q4_K_M, Q5_K_M, IQ4_NL, IQ4_XS, MXFP4_MOE, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ3_XXS, IQ3_XS,
// IQ3_S, IQ3_M, IQ1_S, IQ1_M. The IQ file types (IQ4_NL and IQ4_XS too)
// take llama-quantize's per-tensor mixes with an importance matrix; their lattice-format tensors
// (IQ1/IQ2/IQ3, which have no quantizer) hold random blocks scaled to the
// other weights' size.
std::vector<std::string> synth_type_names();

struct SynthParams {
  std::string preset;         // one of synth_preset_names()
  std::string type = "Q8_0";  // one of synth_type_names()
  uint64_t seed = 42;         // the values depend only on it (never on n_threads)
  int64_t n_layer = 0;        // > 0: replaces the preset's layer count
  int64_t n_vocab = 0;        // > 0: replaces the preset's vocabulary size
  int64_t n_expert = 0;       // > 0: replaces an MoE preset's expert count (at least its experts used)
  int n_threads = 0;          // <= 0: default_thread_count() (synapse.hpp)
};

struct SynthStats {
  uint64_t n_params = 0;      // elements of all tensors
  uint64_t tensor_bytes = 0;  // bytes of tensor data (llama-bench's "size")
  uint64_t file_bytes = 0;    // bytes of the whole file
  double seconds = 0;         // wall time of the write
};

// Writes the synthetic model `params` describes to `path`, streaming tensor
// by tensor (memory: the largest tensor once), generating and quantizing
// rows on n_threads threads. Throws Error(invalid_argument) for an unknown
// preset or type (naming the known ones), a negative n_layer, n_vocab or
// n_expert, n_expert on a dense preset or below its experts used, a
// thread count above max_threads, or a shape the type cannot hold (a row
// length not a multiple of its block); Error(io) when the file cannot be
// written.
SynthStats write_synthetic_model(const std::string& path, const SynthParams& params);

}  // namespace synapse

// Collecting an importance matrix as llama.cpp's llama-imatrix does (v0.5.0
// tools/imatrix/imatrix.cpp): while a collector is attached to a Context
// (Context::set_imatrix), every decode adds, per weight matrix, the squares
// of the activations each input column of the matrix sees, and counts them;
// save() writes llama-imatrix's GGUF file, which `synapse quantize --imatrix`
// and llama-quantize read. `synapse imatrix` is this plus llama-imatrix's
// chunking of a text.
//
//   synapse::ImatrixCollector imatrix(/*process_output=*/false);
//   ctx.set_imatrix(&imatrix);
//   imatrix.set_ubatch_tokens(n);  // before each decode: see below
//   ctx.decode(batch);
//   imatrix.save("imatrix.gguf", {"text.txt"}, n_ctx);
//
// What is counted (llama-imatrix's rules): every product of a Mixture-of-
// Experts expert, per expert (its routed tokens); a plain matrix product
// only when its name starts with "blk." (or is "output.weight" with
// process_output) and the llama.cpp ubatch the decode stands for has at
// least 16 tokens.
//
// Thread-safety: a collector is fed by one Context's decodes at a time and
// must not be read (save, chunk_count) during one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace synapse {

class ImatrixCollector {
 public:
  // process_output: also collect output.weight's inputs (llama-imatrix
  // --process-output; a model whose output is tied to token_embd has none).
  explicit ImatrixCollector(bool process_output = false);
  ImatrixCollector(ImatrixCollector&&) noexcept;
  ImatrixCollector& operator=(ImatrixCollector&&) noexcept;
  ~ImatrixCollector();

  // The number of tokens of the llama.cpp ubatch that the next decodes stand
  // for: plain products of a ubatch under 16 tokens are not counted (as
  // llama-imatrix skips them). Default: counted.
  void set_ubatch_tokens(int64_t n_tokens);

  // llama-imatrix's chunk count: the largest count of any matrix over
  // chunk_size. Throws Error(invalid_argument) if chunk_size <= 0.
  int32_t chunk_count(int32_t chunk_size) const;

  // Writes llama-imatrix's GGUF file: imatrix.datasets = `datasets` (the
  // text files, as given), imatrix.chunk_count, imatrix.chunk_size, and per
  // matrix NAME.in_sum2 and NAME.counts. Returns the number of matrices.
  // Throws Error(invalid_argument) if chunk_size <= 0, Error(io) if the
  // file cannot be written.
  size_t save(const std::string& path, const std::vector<std::string>& datasets, int32_t chunk_size) const;

 private:
  friend class Context;
  struct Impl;  // the accumulator (src/runtime/imatrix.hpp)
  std::unique_ptr<Impl> impl_;
};

}  // namespace synapse

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
// A collector also starts from files (load: llama-imatrix --in-file), to
// combine them, convert between the GGUF and legacy .dat formats, or go on
// collecting over more text; statistics() is llama-imatrix
// --show-statistics' table.
//
// Thread-safety: a collector is fed by one Context's decodes at a time and
// must not be read (save, chunk_count, statistics) or loaded into during one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace synapse {

// The two file formats llama-imatrix writes (--output-format): its GGUF
// (per matrix NAME.in_sum2 and NAME.counts, and the datasets, chunk count and
// chunk size) and the legacy .dat (per matrix the mean squares times the
// number of chunks, then the chunk count and one dataset name).
enum class ImatrixFormat { gguf, dat };

// One matrix's row of llama-imatrix --show-statistics (compute_statistics,
// in floats as it computes them): over the mean squared activation of each
// input column (sums / count, per expert; experts that saw no token left
// out) of the weight `tensor`:
struct ImatrixTensorStatistics {
  std::string tensor;      // the weight's name, "blk.0.attn_q.weight"
  std::string layer;       // "0" from blk.0.; "-" for none
  std::string name;        // "attn_q": the name part before ".weight" (the whole name if none)
  float total_sqract = 0;  // Σ(Act²): their sum
  float min_sqract = 0, max_sqract = 0;
  float mean_sqract = 0;   // μ
  float stddev = 0;        // σ
  float active = 0;        // the fraction over 1e-5 in magnitude
  int elements = 0;        // N: how many
  float entropy = 0;       // of their distribution (value / total), bits
  float zd = 0;            // the fraction with a z-score over 1
  float cossim = 0;        // cosine similarity of the sums with the same matrix of the layer before (0 for none)
};

// The per-layer weighted averages of --show-statistics' second table
// (weights: each matrix's element count), for the layers numbered >= 0.
struct ImatrixLayerStatistics {
  int layer = 0;
  float mean_total_sqract = 0;  // μΣ(Act²)
  float mean_zd = 0;            // μZD (a fraction)
  float mean_cossim = 0;        // μCosSim
};

struct ImatrixStatistics {
  std::vector<ImatrixTensorStatistics> tensors;  // in llama's order: by name, then by Σ(Act²) descending
  std::vector<ImatrixLayerStatistics> layers;    // by layer number
};

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
  //
  // ImatrixFormat::dat writes llama-imatrix's legacy file instead
  // (save_imatrix_legacy): the matrices with any count, by name, each with
  // ncall = its largest count over chunk_size rounded up and the values
  // (sums / count) * ncall per expert (1 * ncall for an expert that saw no
  // token); then the chunk count and the last of the datasets (the loaded
  // files' and then `datasets`). Returns the number of matrices written.
  //
  // The datasets written are those of every loaded file, in order, then
  // `datasets`.
  size_t save(const std::string& path, const std::vector<std::string>& datasets, int32_t chunk_size,
              ImatrixFormat format = ImatrixFormat::gguf) const;

  // Adds the sums and counts of an imatrix file (GGUF or legacy, as
  // `synapse quantize --imatrix` reads them) to this collector's, as
  // llama-imatrix --in-file does (IMatrixCollector::load_imatrix): GGUF sums
  // and counts added as they are (a one-count entry broadcast to the
  // experts of a per-expert file); a legacy file's values and its ncall
  // times chunk_size (its mean squares back to sums). The file's datasets
  // are kept for save(). Throws Error(io) for a file that cannot be read,
  // Error(format) for a malformed one or one whose matrix sizes differ from
  // what was collected or loaded before, Error(invalid_argument) if
  // chunk_size <= 0. On a throw the collector may hold part of the file.
  void load(const std::string& path, int32_t chunk_size);

  // llama-imatrix --show-statistics' figures for every matrix with a
  // nonzero count. Empty when there is none.
  ImatrixStatistics statistics() const;

 private:
  friend class Context;
  struct Impl;  // the accumulator (src/runtime/imatrix.hpp)
  std::unique_ptr<Impl> impl_;
};

}  // namespace synapse

// Importance matrices: llama-imatrix's files, read as llama.cpp v0.5.0's
// common_imatrix_load reads them (common/imatrix-loader.cpp), and the
// per-column importance llama-quantize derives from them
// (tools/quantize/quantize.cpp, load_imatrix).
//
// Formats:
//   GGUF (llama-imatrix's default): per matrix NAME two F32 tensors,
//     NAME.in_sum2 [ne0, n_mat] (the sum over tokens of each input column's
//     squared activation, per expert for a 3-D expert tensor) and
//     NAME.counts [1, n_mat] (tokens seen per expert); keys
//     imatrix.datasets (string array), imatrix.chunk_count and
//     imatrix.chunk_size (u32).
//   legacy .dat: int32 n_entries, then per entry int32 name length, the
//     name, int32 ncall, int32 nval, nval floats (the mean squares times
//     ncall); optionally int32 chunk count, int32 length and the dataset
//     name.
//
// Collecting one (imatrix_collect.cpp): ImatrixAccumulator, an observer of
// the forward pass that sums what llama-imatrix's IMatrixCollector sums.
//
// Thread-safety: the functions are thread-safe; an Imatrix is a value. An
// ImatrixAccumulator is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/forward.hpp"
#include "synapse/imatrix.hpp"

namespace synapse::runtime {

struct ImatrixEntry {
  std::vector<float> sums;      // [n_mat * ne0]: in_sum2 (GGUF) or the legacy values
  std::vector<int64_t> counts;  // [n_mat]: tokens per matrix (GGUF, rounded as lround), [1]: ncall (legacy)
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by the weight's tensor name ("blk.0.attn_q.weight")
  std::vector<std::string> datasets;
  int32_t chunk_count = 0;
  int32_t chunk_size = 0;
  bool is_legacy = false;
  bool has_metadata = false;  // GGUF with imatrix.datasets, chunk_count and chunk_size
};

// Reads a GGUF or legacy imatrix file (GGUF when it starts with "GGUF").
// Throws Error(io) for a file that cannot be read, Error(format) naming
// the file and what is wrong: no entries (a GGUF file without a single
// in_sum2/counts pair, such as a model), a truncated legacy file, an
// in_sum2 without counts (or the reverse), a tensor that is not F32, counts
// whose length does not divide the sums.
Imatrix load_imatrix(const std::string& path);

// Writes `m` in llama-imatrix v0.5.0's GGUF format (IMatrixCollector::
// save_imatrix): general.type "imatrix", imatrix.datasets, chunk_count and
// chunk_size, then per entry in name order NAME.in_sum2 [ne0, n_mat] and
// NAME.counts [1, n_mat] (F32), dimensions as ggml_n_dims counts them. An
// entry with no sums or counts is left out, as llama-imatrix leaves it.
// Throws Error(invalid_argument) for an entry whose sums do not split into
// its counts, Error(io) for a file that cannot be written.
void write_imatrix(const Imatrix& m, const std::string& path);

// Writes `m` (raw sums and counts, as write_imatrix takes them) in
// llama-imatrix v0.5.0's legacy format (IMatrixCollector::save_imatrix_legacy):
// the entries with a nonzero count, in name order, each: name length and
// name, ncall = ceil(largest count / m.chunk_size), nval, then per value
// (sum / count of its matrix) * ncall (1 * ncall where the count is 0); then
// m.chunk_count and the last of m.datasets (length 0 for none). Returns the
// number of entries written. Throws Error(invalid_argument) for
// m.chunk_size <= 0 or an entry whose sums do not split into its counts,
// Error(io) for a file that cannot be written.
size_t write_imatrix_legacy(const Imatrix& m, const std::string& path);

// llama-quantize's importance of each column from one entry: GGUF sums /
// count per matrix (1 where a matrix saw no token), legacy sums / ncall
// (sums as they are for ncall 0). Returns [sums.size()] floats.
std::vector<float> imatrix_importance(const ImatrixEntry& e, bool is_legacy);

// llama-imatrix's collection (llama.cpp v0.5.0 tools/imatrix/imatrix.cpp,
// IMatrixCollector::collect_imatrix), fed by forward_batch's observer:
//  * an expert's product (ggml_mul_mat_id): always counted; per expert, the
//    sum over its routed (token, slot) rows of each input column's square,
//    and the number of such rows; summed slot by slot, each slot's rows in
//    token order (llama's loop: slot outside, token inside);
//  * a plain product: counted when the llama.cpp ubatch the batch stands for
//    has at least 16 tokens (set_ubatch_tokens) and the weight's name starts
//    with "blk." or is "output.weight" with process_output; the sums of the
//    squares of its rows in order and one count of rows.
// Each square is added to a float in that order, as llama-imatrix adds it
// (x * x, then the add: no fused multiply-add). Throws Error(format) naming
// the tensor when a sum is not finite (llama-imatrix exits there) or when a
// tensor's inputs change width, Error(invalid_argument) for an expert index
// outside its tensor.
class ImatrixAccumulator final : public model::ProductObserver {
 public:
  explicit ImatrixAccumulator(bool process_output) : process_output_(process_output) {}

  // The tokens of the llama.cpp ubatch the next batches stand for (llama
  // skips plain products of fewer than 16; default: counted).
  void set_ubatch_tokens(int64_t n_tokens) { dense_ = n_tokens >= 16; }

  void observe(const model::ProductInput& in) override;

  // Adds a loaded file's entries as llama-imatrix's load_imatrix does
  // (ImatrixCollector::load in synapse/imatrix.hpp). Throws Error(format)
  // naming the entry whose sizes differ from this accumulator's.
  void add(const Imatrix& file, int32_t chunk_size);

  // --show-statistics' figures (ImatrixCollector::statistics).
  ImatrixStatistics statistics() const;

  // llama-imatrix's m_last_chunk: the largest count of any entry divided by
  // chunk_size (> 0).
  int32_t chunk_count(int32_t chunk_size) const;

  // The file llama-imatrix writes: every entry, its sums and counts, the
  // datasets, chunk_count(chunk_size) and chunk_size.
  Imatrix result(std::vector<std::string> datasets, int32_t chunk_size) const;

 private:
  struct Stats {
    std::vector<float> values;    // [n_mat][n_in]
    std::vector<int64_t> counts;  // [n_mat]
  };
  Stats& entry(std::string_view tensor, int64_t n_in, int64_t n_mat);

  std::map<std::string, Stats, std::less<>> stats_;
  bool process_output_;
  bool dense_ = true;
  std::vector<int64_t> order_;  // an expert's rows in llama's order
};

}  // namespace synapse::runtime

// The public collector (synapse/imatrix.hpp) is this accumulator.
struct synapse::ImatrixCollector::Impl {
  explicit Impl(bool process_output) : acc(process_output) {}
  runtime::ImatrixAccumulator acc;
  std::vector<std::string> loaded_datasets;  // of the files load() added, in order
};

// Matrix products of a weight matrix with rows of activations, in the weight's
// own format: y[m][r] = dot(W[r, :], x[m, :]) (ggml_mul_mat with the weight as
// src0). The activation rows are converted once to the type the weight pairs
// with (quant::vec_dot_type: Q8_0, Q8_K, F16, ...) and reused for every weight
// of that type that reads the same input (Q, K, V; gate and up).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/huge_pages.hpp"
#include "base/thread_pool.hpp"
#include "quant/kernel_table.hpp"
#include "synapse/types.hpp"

namespace synapse::kernels {

// A 2-D weight view: n_out rows of n_in elements, in the mapped file or in
// an interleaved copy of it (interleave_weight).
struct WeightView {
  std::string name;  // tensor name, for errors
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0;    // ne[0]
  int64_t n_out = 0;   // ne[1]
  size_t row_bytes = 0;
  const uint8_t* data = nullptr;
  // Rows [0, grouped_rows()) are stored as groups of 8 interleaved rows
  // (quant/interleave.hpp, made by interleave_weight), group g at
  // group(g), group_bytes apart; the rows after the last whole group (fewer
  // than 8) stay plain, at row(r).
  bool interleaved = false;
  size_t group_bytes = 0;  // interleaved: quant::interleaved_group_bytes(type, n_in)

  static constexpr int64_t kGroupRows = 8;  // quant::kInterleave

  bool present() const { return data != nullptr; }
  // The rows that make whole groups of 8 (those an interleaved matrix keeps
  // interleaved): n_out rounded down to a multiple of 8.
  int64_t grouped_rows() const { return n_out / kGroupRows * kGroupRows; }
  // Row r of a plain matrix, or one of the plain last rows of an
  // interleaved one.
  const uint8_t* row(int64_t r) const {
    if (!interleaved) return data + static_cast<size_t>(r) * row_bytes;
    const int64_t grouped = grouped_rows();
    return group(grouped / kGroupRows) + static_cast<size_t>(r - grouped) * row_bytes;
  }
  const uint8_t* group(int64_t g) const { return data + static_cast<size_t>(g) * group_bytes; }
  // Rows [first, first + count) as a view (Phi-3's fused tensors, experts).
  // Throws Error(format) when they are outside the matrix, or, for an
  // interleaved matrix, do not start on a group of 8 and end on one or at
  // the matrix's end.
  WeightView rows(int64_t first, int64_t count, const std::string& view_name) const;
};

// The memory of interleaved weight copies, kept by the model as long as its
// views. Copies are placed one after another, each 64-byte aligned, in
// chunks of at least kChunkBytes on 2 MiB pages (base::huge_page_alloc); a
// copy larger than that has a chunk of its own. Why chunks: a MoE model has
// thousands of expert copies of a few MB (gpt-oss-20b: 2304 of 4.4 MB), and
// each one rounded up to whole 2 MiB pages held a third more memory than the
// file. Not thread-safe (the loader fills it from one thread).
class WeightStore {
 public:
  static constexpr size_t kChunkBytes = size_t{64} << 20;
  static constexpr size_t kAlign = 64;
  // `bytes` (> 0) bytes, kAlign-aligned, valid as long as the store (moves
  // keep them). Throws std::bad_alloc.
  uint8_t* take(size_t bytes);
  // Gives the block the last take() returned back, unused (p must be it).
  void give_back_last(const uint8_t* p) noexcept;
  // Bytes held by copies (not counting chunk ends left unused).
  size_t bytes() const noexcept { return bytes_; }
  bool empty() const noexcept { return bytes_ == 0; }

 private:
  struct Free {
    size_t size;
    void operator()(uint8_t* p) const noexcept { base::huge_page_free(p, size); }
  };
  struct Chunk {
    std::unique_ptr<uint8_t, Free> data;
    size_t used;
    size_t size() const noexcept { return data.get_deleter().size; }
  };
  std::vector<Chunk> chunks_;
  size_t bytes_ = 0, last_bytes_ = 0;
};

// When the kernels of `isa` read interleaved matrices of w's type
// (quant::interleave_pays: Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4, Q4_K and Q6_K under
// AVX2 and AVX-512; MoE experts alike, one view each), w has at
// least one group of 8 rows and they interleave exactly
// (quant::rows_interleave_exactly: no Q8_0 byte of -128), copies w's rows into a new buffer of `store`, its
// whole groups interleaved and the rest plain after them, and points w at
// it; returns whether it did (else w is unchanged). The products and rows
// of w stay bit for bit what they were. Memory: one more copy of w (n_out *
// row_bytes bytes, Q4_K 2.8% more; the caller may release the file's pages
// it was read from, gguf::File::release_pages). Throws std::bad_alloc.
bool interleave_weight(WeightView& w, WeightStore& store, quant::Isa isa);

// Byte buffers that Activations convert their rows into, kept from one
// product to the next (a model::ForwardScratch holds one), so that a
// forward pass allocates none: a fresh buffer of megabytes is a fresh mmap,
// and every page of it a page fault and a page of zeroes (prefill of 512 rows
// took ~42k page faults per pass without it). A buffer keeps the largest
// size it was taken at (the largest product's converted rows: a few MB) for
// the owner's lifetime. Several Activations may hold buffers at once; one
// thread at a time may take and give back (not thread-safe).
class ActivationBuffers {
 public:
  // A buffer of at least `bytes` bytes, its contents undefined (stale bytes
  // of an earlier product). Throws std::bad_alloc.
  std::vector<uint8_t> take(size_t bytes);
  // Returns a buffer taken here for later takes; never allocates (take
  // reserved its slot).
  void give(std::vector<uint8_t>&& buf) noexcept;

 private:
  std::vector<std::vector<uint8_t>> free_;
  size_t owned_ = 0;  // buffers made by take: free_'s capacity covers them all
};

// n_rows activation rows of n_cols floats, with their conversions cached per
// activation type. buffers: where the conversions' storage comes from and
// goes back to when this object is destroyed (it must outlive this object),
// or null (then each is a new allocation). The pointers as() and packed_for()
// return are valid until this object is destroyed. Neither copyable nor
// movable.
class Activations {
 public:
  Activations(const float* x, int64_t n_rows, int64_t n_cols, ActivationBuffers* buffers = nullptr)
      : x_(x), n_rows_(n_rows), n_cols_(n_cols), buffers_(buffers) {}
  // A gathered view of src (a mixture-of-experts layer's input, each row
  // once per expert it is routed to, grouped by expert): row m is src's row
  // rows[m]. Its conversions are src's (each made once, on first use, over
  // src's rows) with their rows copied in this order, never converted again:
  // the same bytes, as every conversion works row by row. src and rows must
  // outlive this object; rows[m] in [0, src.n_rows()) (not checked: the
  // caller made them).
  Activations(Activations& src, std::span<const int64_t> rows, ActivationBuffers* buffers = nullptr)
      : x_(nullptr),
        n_rows_(static_cast<int64_t>(rows.size())),
        n_cols_(src.n_cols()),
        buffers_(buffers),
        src_(&src),
        src_rows_(rows.data()) {}
  ~Activations();
  Activations(const Activations&) = delete;
  Activations& operator=(const Activations&) = delete;
  int64_t n_rows() const { return n_rows_; }
  int64_t n_cols() const { return n_cols_; }
  // Row stride in bytes and base pointer of the rows converted to `vt` by
  // kt's quantizer (converted on first use, rows split over the pool's
  // threads; every table's quantizers give the same bytes, so a conversion
  // is cached per type, not per table). Throws Error as
  // quant::quantize_row does (no quantizer for vt, n_cols not a multiple
  // of its block size), Error(invalid_argument) for a 17th conversion of
  // one input. One caller at a time (the cache is not locked).
  const uint8_t* as(GgmlType vt, const quant::KernelTable& kt, size_t& stride, base::ThreadPool& pool);
  // The rows as kt's multi-row kernels of weight type wt read them:
  // as(vec_dot_type(wt)) passed through kt.row(wt).gemm_pack, or for an
  // interleaved matrix its x8_pack, when that is not null (packed once per
  // weight type and layout: one Activations serves one table). stride:
  // bytes per row of the result. Throws as as() does; one caller at a time.
  const uint8_t* packed_for(GgmlType wt, bool interleaved, const quant::KernelTable& kt, size_t& stride,
                            base::ThreadPool& pool);

 private:
  // A gathered view's rows of src's conversion `a` (stride bytes a row) into dst.
  void gather(const uint8_t* a, size_t stride, uint8_t* dst, base::ThreadPool& pool) const;

  const float* x_;
  int64_t n_rows_, n_cols_;
  ActivationBuffers* buffers_;
  Activations* src_ = nullptr;          // a gathered view's source, or null
  const int64_t* src_rows_ = nullptr;   // its rows of src_
  // One conversion of the rows: to activation type `type` (packed false),
  // or packed for the kernels of weight type `type` (interleaved or not).
  struct Conversion {
    GgmlType type = GgmlType::F32;
    bool packed = false, interleaved = false;
    std::vector<uint8_t> buf;
  };
  // The conversion of that key, or null.
  std::vector<uint8_t>* find(GgmlType type, bool packed, bool interleaved);
  // A new conversion of that key with a buffer of `bytes`. Throws
  // Error(invalid_argument) past kMaxConversions.
  std::vector<uint8_t>& add(GgmlType type, bool packed, bool interleaved, size_t bytes);

  // Kept in place, not in a map, so that a product allocates nothing: an
  // input is read by a few weight types (Q/K/V's, gate/up's), each with an
  // activation type and a pack or two.
  static constexpr int kMaxConversions = 16;
  Conversion conv_[kMaxConversions];
  int n_conv_ = 0;
};

// One product of matmul_many: rows [row0, row0 + n_rows) of the input
// (n_rows -1: all of them) times w, y = [n_rows][w->n_out] floats. A range
// lets the experts of a mixture-of-experts layer, each over its own rows of
// one gathered input, run in one job.
struct MatmulOut {
  const WeightView* w;
  float* y;
  int64_t row0 = 0;
  int64_t n_rows = -1;
};

// y: [x.n_rows()][w.n_out] floats. Throws Error(invalid_argument) if
// x.n_cols() != w.n_in. Rows of W are split across the pool's threads; each
// output element is one vec_dot, so the result does not depend on the thread
// count or on the number of activation rows.
void matmul(const WeightView& w, Activations& x, float* y, base::ThreadPool& pool);

// Several products of the same input (Q, K and V; gate and up; every
// expert of a layer over its range of rows), each as matmul computes it over
// its rows, bit for bit, in ONE parallel job over their weight rows laid end
// to end: one hand-out and one wait instead of one per product. Throws as
// matmul does, and Error(invalid_argument) for a range outside x's rows
// (checked before anything is computed). Allocates nothing once a thread's
// first call with as many products has run (its product list is kept).
void matmul_many(std::span<const MatmulOut> outs, Activations& x, base::ThreadPool& pool);


// Dequantizes row r of w into out[w.n_in] (ggml_get_rows), interleaved or
// not. Throws Error(out_of_range) when r is outside [0, w.n_out).
void get_row(const WeightView& w, int64_t r, float* out);

}  // namespace synapse::kernels

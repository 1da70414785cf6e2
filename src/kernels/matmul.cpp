#include "kernels/matmul.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "quant/gemm.hpp"
#include "quant/interleave.hpp"
#include "quant/kernel_table.hpp"
#include "quant/quant.hpp"
#include "quant/simd.hpp"
#include "synapse/error.hpp"

namespace synapse::kernels {
static_assert(WeightView::kGroupRows == quant::kInterleave);
namespace {
// Below this many activation rows a product runs the decode kernel (each
// weight row is then re-read per activation row, which costs less than the
// gemm tiles' set-up for 1-3 rows).
constexpr int64_t kGemvMaxRows = 4;
// Weight rows per parallel_for grain: a multiple of the kernel's 4-row group.
constexpr int64_t kGemvGrain = 32;
}  // namespace

WeightView WeightView::rows(int64_t first, int64_t count, const std::string& view_name) const {
  if (first < 0 || count < 0 || first + count > n_out)
    throw Error(Errc::format, name + ": rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                                  ") are outside its " + std::to_string(n_out) + " rows");
  if (interleaved && (first % quant::kInterleave != 0 || (count % quant::kInterleave != 0 && first + count != n_out)))
    throw Error(Errc::format, name + ": rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                                  ") cut its groups of 8 interleaved rows");
  WeightView v = *this;
  v.name = view_name;
  v.n_out = count;
  v.data = interleaved ? group(first / quant::kInterleave) : row(first);
  return v;
}

std::vector<uint8_t> ActivationBuffers::take(size_t bytes) {
  std::vector<uint8_t> buf;
  if (!free_.empty()) {
    buf = std::move(free_.back());
    free_.pop_back();
  } else {
    free_.reserve(owned_ + 1);  // the slot give() will put it back into
    ++owned_;
  }
  if (buf.size() < bytes) buf.resize(bytes);
  return buf;
}

void ActivationBuffers::give(std::vector<uint8_t>&& buf) noexcept {
  if (buf.capacity() > 0 && free_.size() < free_.capacity()) free_.push_back(std::move(buf));
}

Activations::~Activations() {
  if (buffers_ == nullptr) return;
  for (int i = 0; i < n_conv_; ++i) buffers_->give(std::move(conv_[i].buf));
}

std::vector<uint8_t>* Activations::find(GgmlType type, bool packed, bool interleaved) {
  for (int i = 0; i < n_conv_; ++i)
    if (conv_[i].type == type && conv_[i].packed == packed && conv_[i].interleaved == interleaved) return &conv_[i].buf;
  return nullptr;
}

// The storage of a new conversion: from buffers_ when there is one (its size
// may exceed `bytes`; only the first `bytes` are written and read), else
// sized exactly.
std::vector<uint8_t>& Activations::add(GgmlType type, bool packed, bool interleaved, size_t bytes) {
  if (n_conv_ == kMaxConversions)
    throw Error(Errc::invalid_argument, "an input converted for more than " + std::to_string(kMaxConversions) +
                                            " activation types and packs (last: " + std::string(type_name(type)) +
                                            ")");
  Conversion& c = conv_[n_conv_];
  c.type = type;
  c.packed = packed;
  c.interleaved = interleaved;
  if (buffers_ != nullptr) c.buf = buffers_->take(bytes);
  else c.buf.resize(bytes);
  ++n_conv_;
  return c.buf;
}

void Activations::gather(const uint8_t* a, size_t stride, uint8_t* dst, base::ThreadPool& pool) const {
  pool.parallel_for(n_rows_, 16, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      std::memcpy(dst + static_cast<size_t>(m) * stride, a + static_cast<size_t>(src_rows_[m]) * stride, stride);
  });
}

const uint8_t* Activations::as(GgmlType vt, const quant::KernelTable& kt, size_t& stride, base::ThreadPool& pool) {
  stride = row_size(vt, n_cols_);
  if (const std::vector<uint8_t>* done = find(vt, false, false)) return done->data();
  if (src_ != nullptr) {
    size_t src_stride = 0;
    const uint8_t* a = src_->as(vt, kt, src_stride, pool);
    std::vector<uint8_t>& buf = add(vt, false, false, stride * static_cast<size_t>(n_rows_));
    gather(a, stride, buf.data(), pool);
    return buf.data();
  }
  std::vector<uint8_t>& buf = add(vt, false, false, stride * static_cast<size_t>(n_rows_));
  const size_t st = stride;
  pool.parallel_for(n_rows_, 1, [&](int64_t m0, int64_t m1) {  // row by row: any split gives the same bytes
    for (int64_t m = m0; m < m1; ++m)
      quant::quantize_row(kt, vt, x_ + m * n_cols_, buf.data() + static_cast<size_t>(m) * st, n_cols_);
  });
  return buf.data();
}

const uint8_t* Activations::packed_for(GgmlType wt, bool interleaved, const quant::KernelTable& kt, size_t& stride,
                                       base::ThreadPool& pool) {
  const quant::TypeKernels& k = kt.row(wt);
  const quant::GemmPackFn pack = interleaved ? k.x8_pack : k.gemm_pack;
  if (pack == nullptr) return as(quant::vec_dot_type(wt), kt, stride, pool);
  stride = interleaved ? quant::x8_packed_row_size(k, n_cols_) : quant::gemm_packed_row_size(k, n_cols_);
  if (const std::vector<uint8_t>* done = find(wt, true, interleaved)) return done->data();
  if (src_ != nullptr) {  // the packs are made row by row too
    size_t src_stride = 0;
    const uint8_t* a = src_->packed_for(wt, interleaved, kt, src_stride, pool);
    std::vector<uint8_t>& buf = add(wt, true, interleaved, stride * static_cast<size_t>(n_rows_));
    gather(a, stride, buf.data(), pool);
    return buf.data();
  }
  size_t src_stride = 0;
  const uint8_t* a = as(quant::vec_dot_type(wt), kt, src_stride, pool);
  std::vector<uint8_t>& buf = add(wt, true, interleaved, stride * static_cast<size_t>(n_rows_));
  const size_t ps = stride;
  pool.parallel_for(n_rows_, 1, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) pack(n_cols_, a + m * src_stride, buf.data() + m * ps);
  });
  return buf.data();
}

namespace {

// One product of a matmul_many call, with its kernels looked up and its
// activation rows in the layout they read.
struct Product {
  const WeightView* w;
  float* y;
  const uint8_t* a;  // the product's first activation row
  size_t stride;
  int64_t n_rows;  // activation rows
  quant::VecDotFn dot;
  quant::GemvFn gemv;  // decode kernel (a few activation rows), or null
  quant::GemmFn gemm;  // multi-row kernel, or null
  quant::GemmX8Fn x8;  // the kernel of an interleaved matrix (then gemv, gemm null)
  int64_t panel, tile;
  bool decode;  // few activation rows: split the rows in decode grains
  // Interleaved matrices: the plain activation rows for the rows after the
  // last whole group (fewer than 8, run by the vec_dot), or null.
  const uint8_t* tail_a = nullptr;
  size_t tail_stride = 0;
};

Product prepare(const MatmulOut& o, Activations& x, const quant::KernelTable& kt, base::ThreadPool& pool) {
  const WeightView& w = *o.w;
  if (x.n_cols() != w.n_in)
    throw Error(Errc::invalid_argument, w.name + ": input of " + std::to_string(x.n_cols()) +
                                            " columns, the weight has " + std::to_string(w.n_in));
  const int64_t n_rows = o.n_rows < 0 ? x.n_rows() - o.row0 : o.n_rows;
  if (o.row0 < 0 || n_rows < 0 || o.row0 + n_rows > x.n_rows())
    throw Error(Errc::invalid_argument, w.name + ": rows [" + std::to_string(o.row0) + ", " +
                                            std::to_string(o.row0 + n_rows) + ") of an input of " +
                                            std::to_string(x.n_rows()) + " rows");
  const quant::TypeKernels& k = kt.row(w.type);
  Product p{&w, o.y, nullptr, 0, n_rows, k.vec_dot, nullptr, nullptr, nullptr, 1, 1, false};
  if (w.interleaved) {
    // One kernel for any number of activation rows (quant/interleave.hpp).
    p.x8 = k.gemm_x8;
    if (p.x8 == nullptr)
      throw Error(Errc::unsupported, w.name + ": interleaved " + std::string(type_name(w.type)) + " has no kernel");
  } else {
    // Decode (a few activation rows): the decode kernel, which streams the
    // weight rows once per activation row (quant/gemm.hpp GemvFn).
    p.gemv = n_rows < kGemvMaxRows ? k.gemv : nullptr;
    p.gemm = p.gemv == nullptr && n_rows > 1 ? k.gemm : nullptr;
  }
  p.decode = p.gemv != nullptr || (p.x8 != nullptr && n_rows < kGemvMaxRows);
  if (p.gemv != nullptr || p.gemm != nullptr || p.x8 != nullptr) {
    // Activation rows in the kernels' layout (TypeKernels::gemm_pack,
    // x8_pack), once per input, weight type and layout.
    p.a = x.packed_for(w.type, p.x8 != nullptr, kt, p.stride, pool);
    if (p.x8 != nullptr && w.n_out % quant::kInterleave != 0)
      p.tail_a = x.as(quant::vec_dot_type(w.type), kt, p.tail_stride, pool) +
                 static_cast<size_t>(o.row0) * p.tail_stride;
  } else {
    p.a = x.as(quant::vec_dot_type(w.type), kt, p.stride, pool);
  }
  p.a += static_cast<size_t>(o.row0) * p.stride;
  // Blocked: a panel of weight rows (about kPanelBytes) against a tile of
  // activation rows (about kTileBytes), both resident in L2 while the
  // multi-row kernel unpacks each weight block once per few activation rows.
  // The tile of activation rows stays in L1 (32-48 KiB) while the panel's
  // weight rows stream past it from L2 (with larger tiles the activation
  // loads came from L2 and bounded the speed). Interleaved matrices take
  // their panels in groups of 8 rows, and larger tiles (64 KiB, in L2):
  // their kernels load each activation block once per group block rather
  // than keep a tile in registers. Measurements: docs/PERFORMANCE.md,
  // "Measurements behind the tuning constants".
  constexpr size_t kPanelBytes = 128 * 1024, kTileBytes = 24 * 1024, kTileBytesX8 = 64 * 1024;
  const size_t unit_bytes = p.x8 != nullptr ? w.group_bytes : w.row_bytes;
  const size_t tile_bytes = p.x8 != nullptr ? kTileBytesX8 : kTileBytes;
  p.panel = std::max<int64_t>(1, static_cast<int64_t>(kPanelBytes / std::max<size_t>(1, unit_bytes)));
  const int64_t fit = static_cast<int64_t>(tile_bytes / std::max<size_t>(1, p.stride));
  if (p.x8 != nullptr) {
    // Whole register tiles of the interleaved kernel
    // (quant::TypeKernels::x8_group_step, x8_tile_step): a panel or tile
    // that ends in a narrower one pays its weight unpacking for fewer rows.
    const int64_t gs = std::max<int64_t>(1, k.x8_group_step);
    const int64_t ts = std::max<int64_t>(1, k.x8_tile_step);
    p.panel = std::max(gs, p.panel / gs * gs);
    // At least kGemvMaxRows rows: with fewer the interleaved kernels run
    // their decode path too.
    p.tile = std::clamp<int64_t>(fit / ts * ts, (kGemvMaxRows - 1 + ts) / ts * ts, 64 / ts * ts);
    return p;
  }
  // A multiple of 4 rows: the kernels' register tiles take 4 activation rows.
  // A kernel that decodes its weight rows once per call asks for more
  // (quant::TypeKernels::gemm_rows).
  p.tile = std::max<int64_t>(std::clamp<int64_t>(fit / 4 * 4, 4, 64), k.gemm_rows);
  return p;
}

// Groups [g0, g0 + ng) of interleaved product p for all n_rows activation
// rows, output row 8 * (g - g0) + l of activation row m at y[m * ys + ...]:
// panels of p.panel groups against tiles of p.tile activation rows, as
// run_rows blocks the plain kernels.
void run_groups(const Product& p, int64_t n_rows, int64_t g0, int64_t ng, float* y, size_t ys) {
  const WeightView& w = *p.w;
  const int64_t tile = p.decode ? n_rows : p.tile;
  // Each panel reads all the activation rows again, so these go in chunks
  // of about kChunkBytes, which stay in L3 while the panels stream past
  // them (pp2048 on llama-3.2-1b Q8_0 has 9.4 MB of packed activation rows
  // per product, read again for every 128 KiB panel). Measurements:
  // docs/PERFORMANCE.md, "Measurements behind the tuning constants".
  constexpr size_t kChunkBytes = size_t{4} << 20;
  const int64_t chunk = p.decode ? n_rows
                                 : std::max<int64_t>(tile, static_cast<int64_t>(kChunkBytes / p.stride) / tile * tile);
  for (int64_t c0 = 0; c0 < n_rows; c0 += chunk) {
    const int64_t c1 = std::min(n_rows, c0 + chunk);
    for (int64_t q0 = 0; q0 < ng; q0 += p.panel) {
      const int64_t nq = std::min(p.panel, ng - q0);
      for (int64_t m0 = c0, mt = 0; m0 < c1; m0 += mt) {
        // A last tile of fewer than kGemvMaxRows rows would run the decode
        // path: it joins this one.
        mt = c1 - m0 - tile < kGemvMaxRows ? c1 - m0 : tile;
        p.x8(w.n_in, w.group(g0 + q0), nq, p.a + static_cast<size_t>(m0) * p.stride, p.stride, mt,
             y + static_cast<size_t>(m0) * ys + static_cast<size_t>(q0 * quant::kInterleave), ys);
      }
    }
  }
}

// Output rows [r0, r1) of interleaved product p: whole groups in place; a
// group cut by r0 or r1 (a thread's share need not end on a group) computed
// whole into a scratch block and only its rows in [r0, r1) copied out (each
// output is the same whichever rows it is computed with); the plain rows
// after the last group one vec_dot each.
void run_interleaved(const Product& p, int64_t n_rows, int64_t r0, int64_t r1) {
  constexpr int64_t G = quant::kInterleave;
  const WeightView& w = *p.w;
  const int64_t n_out = w.n_out, n_grouped = w.grouped_rows();
  for (int64_t r = std::max(r0, n_grouped); r < r1; ++r)
    for (int64_t m = 0; m < n_rows; ++m)
      p.y[m * n_out + r] = p.dot(w.n_in, w.row(r), p.tail_a + static_cast<size_t>(m) * p.tail_stride);
  r1 = std::min(r1, n_grouped);
  for (int64_t r = r0; r < r1;) {
    const int64_t g = r / G;
    if (r % G == 0 && r + G <= r1) {
      const int64_t ng = (r1 - r) / G;
      run_groups(p, n_rows, g, ng, p.y + r, static_cast<size_t>(n_out));
      r += ng * G;
      continue;
    }
    thread_local std::vector<float> part;  // kept: a step allocates no buffer
    part.resize(static_cast<size_t>(n_rows * G));
    run_groups(p, n_rows, g, 1, part.data(), G);
    const int64_t end = std::min(r1, (g + 1) * G);
    for (int64_t m = 0; m < n_rows; ++m)
      for (int64_t k = r; k < end; ++k) p.y[m * n_out + k] = part[static_cast<size_t>(m * G + k - g * G)];
    r = end;
  }
}

// Output rows [r0, r1) of product p for all n_rows activation rows.
void run_rows(const Product& p, int64_t n_rows, int64_t r0, int64_t r1) {
  const WeightView& w = *p.w;
  const int64_t n_out = w.n_out, n_in = w.n_in;
  if (p.x8 != nullptr) {
    run_interleaved(p, n_rows, r0, r1);
    return;
  }
  if (p.gemv != nullptr) {
    for (int64_t m = 0; m < n_rows; ++m)
      p.gemv(n_in, w.row(r0), w.row_bytes, r1 - r0, p.a + m * p.stride, p.y + m * n_out + r0);
    return;
  }
  if (p.gemm == nullptr) {
    // Each weight row is read once and dotted with every activation row
    // while it is in L1; each output element is one vec_dot over the row.
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* wr = w.row(r);
      for (int64_t m = 0; m < n_rows; ++m) p.y[m * n_out + r] = p.dot(n_in, wr, p.a + static_cast<size_t>(m) * p.stride);
    }
    return;
  }
  // Every output element is still exactly the vec_dot of its two rows
  // (quant/gemm.hpp), so the result is the same as the loop above.
  for (int64_t p0 = r0; p0 < r1; p0 += p.panel) {
    const int64_t p1 = std::min(r1, p0 + p.panel);
    for (int64_t m0 = 0; m0 < n_rows; m0 += p.tile) {
      const int64_t mt = std::min(p.tile, n_rows - m0);
      p.gemm(n_in, w.row(p0), w.row_bytes, p1 - p0, p.a + static_cast<size_t>(m0) * p.stride, p.stride, mt,
             p.y + m0 * n_out + p0, n_out);
    }
  }
}

}  // namespace

void matmul_many(std::span<const MatmulOut> outs, Activations& x, base::ThreadPool& pool) {
  // The one place the products read the process's kernel table
  // (quant::active_kernels); everything below takes it from here, and each
  // product's kernels are looked up once, not per row.
  const quant::KernelTable& kt = quant::active_kernels();
  // Kept per thread (a layer of experts has hundreds of products); nothing
  // below calls matmul_many again on this thread before the job ends. Named
  // through references: the job's workers must read this thread's copies.
  thread_local std::vector<Product> kept_products;
  thread_local std::vector<int64_t> kept_first;
  std::vector<Product>& ps = kept_products;
  std::vector<int64_t>& first = kept_first;
  ps.clear();
  for (const MatmulOut& o : outs) ps.push_back(prepare(o, x, kt, pool));
  // One job over the products' rows laid end to end: one hand-out and one
  // wait for all of them (a decode step has hundreds of small products).
  first.assign(ps.size() + 1, 0);
  bool decode = true;
  for (size_t j = 0; j < ps.size(); ++j) {
    first[j + 1] = first[j] + ps[j].w->n_out;
    decode = decode && ps[j].decode;
  }
  // Weight rows per grain: a multiple of the kernels' 4-row groups.
  pool.parallel_for(first.back(), decode ? kGemvGrain : 16, [&](int64_t g0, int64_t g1) {
    for (size_t j = 0; j < ps.size() && g0 < g1; ++j) {
      if (g0 >= first[j + 1]) continue;
      const int64_t end = std::min(g1, first[j + 1]);
      run_rows(ps[j], ps[j].n_rows, g0 - first[j], end - first[j]);
      g0 = end;
    }
  });
}

void matmul(const WeightView& w, Activations& x, float* y, base::ThreadPool& pool) {
  const MatmulOut one{&w, y};
  matmul_many({&one, 1}, x, pool);
}

void get_row(const WeightView& w, int64_t r, float* out) {
  if (r < 0 || r >= w.n_out)
    throw Error(Errc::out_of_range, w.name + ": row " + std::to_string(r) + " outside [0, " +
                                        std::to_string(w.n_out) + ")");
  if (w.interleaved && r < w.grouped_rows()) {
    quant::dequantize_interleaved_row(w.type, w.data, r, out, w.n_in);
    return;
  }
  quant::dequantize_row(w.type, w.row(r), out, w.n_in);
}

uint8_t* WeightStore::take(size_t bytes) {
  const size_t need = (bytes + kAlign - 1) / kAlign * kAlign;
  if (chunks_.empty() || chunks_.back().size() - chunks_.back().used < need) {
    const size_t size = std::max(need, kChunkBytes);
    chunks_.push_back({std::unique_ptr<uint8_t, Free>(static_cast<uint8_t*>(base::huge_page_alloc(size)), Free{size}), 0});
  }
  Chunk& c = chunks_.back();
  uint8_t* p = c.data.get() + c.used;
  c.used += need;
  bytes_ += bytes;
  last_bytes_ = bytes;
  return p;
}

void WeightStore::give_back_last(const uint8_t* p) noexcept {
  if (chunks_.empty() || last_bytes_ == 0) return;
  Chunk& c = chunks_.back();
  if (p < c.data.get() || p >= c.data.get() + c.used) return;
  c.used = static_cast<size_t>(p - c.data.get());
  bytes_ -= last_bytes_;
  last_bytes_ = 0;
}

bool interleave_weight(WeightView& w, WeightStore& store, quant::Isa isa) {
  const int64_t n_grouped = w.grouped_rows();
  if (w.interleaved || !w.present() || !quant::interleave_pays(w.type, isa) || !quant::can_interleave(w.type, n_grouped))
    return false;
  const size_t group_bytes = quant::interleaved_group_bytes(w.type, w.n_in);
  const size_t grouped_bytes = static_cast<size_t>(n_grouped / quant::kInterleave) * group_bytes;
  const size_t tail_bytes = static_cast<size_t>(w.n_out - n_grouped) * w.row_bytes;
  uint8_t* buf = store.take(grouped_bytes + tail_bytes);
  if (!quant::interleave_rows(w.type, w.n_in, w.data, w.row_bytes, n_grouped, buf)) {
    store.give_back_last(buf);  // rows the kernels cannot take exactly (quant::rows_interleave_exactly)
    return false;
  }
  std::memcpy(buf + grouped_bytes, w.row(n_grouped), tail_bytes);  // the plain last rows
  w.data = buf;
  w.interleaved = true;
  w.group_bytes = group_bytes;
  return true;
}

}  // namespace synapse::kernels

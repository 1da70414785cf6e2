#include "kernels/matmul.hpp"

#include <algorithm>
#include <vector>

#include "quant/gemm.hpp"
#include "quant/quant.hpp"
#include "quant/simd.hpp"
#include "synapse/error.hpp"

namespace synapse::kernels {
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
  WeightView v = *this;
  v.name = view_name;
  v.n_out = count;
  v.data = row(first);
  return v;
}

const uint8_t* Activations::as(GgmlType vt, size_t& stride) {
  stride = row_size(vt, n_cols_);
  auto it = cache_.find(vt);
  if (it != cache_.end()) return it->second.data();
  std::vector<uint8_t>& buf = cache_[vt];
  buf.resize(stride * static_cast<size_t>(n_rows_));
  for (int64_t m = 0; m < n_rows_; ++m)
    quant::quantize_row(vt, x_ + m * n_cols_, buf.data() + static_cast<size_t>(m) * stride, n_cols_);
  return buf.data();
}

void matmul(const WeightView& w, Activations& x, float* y, runtime::ThreadPool& pool) {
  if (x.n_cols() != w.n_in)
    throw Error(Errc::invalid_argument, w.name + ": input of " + std::to_string(x.n_cols()) +
                                            " columns, the weight has " + std::to_string(w.n_in));
  const GgmlType vt = quant::vec_dot_type(w.type);
  size_t stride = 0;
  const uint8_t* a = x.as(vt, stride);  // repointed below when packed
  const int64_t n_rows = x.n_rows(), n_out = w.n_out, n_in = w.n_in;
  // The kernels (AVX2 or scalar, quant/simd.hpp) are looked up once, not per row.
  const quant::Isa isa = quant::active_isa();
  const quant::VecDotFn dot = quant::vec_dot_kernel(w.type, isa);
  // Decode (a few activation rows): the weight-row-parallel kernel, whose
  // independent per-row chains hide the latency of each dot's accumulator.
  const quant::GemvFn gemv = n_rows < kGemvMaxRows ? quant::gemv_kernel(w.type, isa) : nullptr;
  if (gemv != nullptr) {
    std::vector<uint8_t> packed;
    if (const quant::GemmPackFn pack = quant::gemm_pack_kernel(w.type, isa)) {
      const size_t ps = quant::gemm_packed_row_size(w.type, isa, n_in);
      packed.resize(ps * static_cast<size_t>(n_rows));
      for (int64_t m = 0; m < n_rows; ++m) pack(n_in, a + m * stride, packed.data() + m * ps);
      a = packed.data();
      stride = ps;
    }
    const uint8_t* wd = w.data;
    pool.parallel_for(n_out, kGemvGrain, [&](int64_t r0, int64_t r1) {
      for (int64_t m = 0; m < n_rows; ++m)
        gemv(n_in, wd + static_cast<size_t>(r0) * w.row_bytes, w.row_bytes, r1 - r0, a + m * stride,
             y + m * n_out + r0);
    });
    return;
  }
  const quant::GemmFn gemm = n_rows > 1 ? quant::gemm_kernel(w.type, isa) : nullptr;
  if (gemm == nullptr) {
    // Each weight row is read once and dotted with every activation row
    // while it is in L1; each output element is one vec_dot over the row.
    pool.parallel_for(n_out, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* wr = w.row(r);
        for (int64_t m = 0; m < n_rows; ++m) y[m * n_out + r] = dot(n_in, wr, a + static_cast<size_t>(m) * stride);
      }
    });
    return;
  }
  // Blocked: a panel of weight rows (about kPanelBytes) against a tile of
  // activation rows (about kTileBytes), both resident in L2 while the
  // multi-row kernel unpacks each weight block once per few activation rows.
  // Every output element is still exactly the vec_dot of its two rows
  // (quant/gemm.hpp), so the result is the same as the loop above.
  // Activation rows in the kernel's layout (quant::gemm_pack_kernel), once
  // per product.
  std::vector<uint8_t> packed;
  if (const quant::GemmPackFn pack = quant::gemm_pack_kernel(w.type, isa)) {
    const size_t ps = quant::gemm_packed_row_size(w.type, isa, n_in);
    packed.resize(ps * static_cast<size_t>(n_rows));
    pool.parallel_for(n_rows, 1, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) pack(n_in, a + m * stride, packed.data() + m * ps);
    });
    a = packed.data();
    stride = ps;
  }
  // The tile of activation rows stays in L1 (32-48 KiB) while the panel's
  // weight rows stream past it from L2: with larger tiles the kernels'
  // activation loads came from L2 and bounded the speed (pp128 on
  // llama-3.2-1b Q8_0, 1 thread: 19.4 -> 23.8 t/s going from 128 to 24 KiB).
  constexpr size_t kPanelBytes = 128 * 1024, kTileBytes = 24 * 1024;
  const int64_t panel = std::max<int64_t>(1, static_cast<int64_t>(kPanelBytes / std::max<size_t>(1, w.row_bytes)));
  // A multiple of 4 rows: the kernels' register tiles take 4 activation rows.
  const int64_t tile = std::clamp<int64_t>(static_cast<int64_t>(kTileBytes / std::max<size_t>(1, stride)) / 4 * 4, 4, 64);
  pool.parallel_for(n_out, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t p0 = r0; p0 < r1; p0 += panel) {
      const int64_t p1 = std::min(r1, p0 + panel);
      for (int64_t m0 = 0; m0 < n_rows; m0 += tile) {
        const int64_t mt = std::min(tile, n_rows - m0);
        gemm(n_in, w.row(p0), w.row_bytes, p1 - p0, a + static_cast<size_t>(m0) * stride, stride, mt,
             y + m0 * n_out + p0, n_out);
      }
    }
  });
}

void get_row(const WeightView& w, int64_t r, float* out) {
  if (r < 0 || r >= w.n_out)
    throw Error(Errc::out_of_range, w.name + ": row " + std::to_string(r) + " outside [0, " +
                                        std::to_string(w.n_out) + ")");
  quant::dequantize_row(w.type, w.row(r), out, w.n_in);
}

}  // namespace synapse::kernels

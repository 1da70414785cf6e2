#include "kernels/matmul.hpp"

#include "quant/quant.hpp"
#include "quant/simd.hpp"
#include "synapse/error.hpp"

namespace synapse::kernels {

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
  const uint8_t* a = x.as(vt, stride);
  const int64_t n_rows = x.n_rows(), n_out = w.n_out, n_in = w.n_in;
  // The kernel (AVX2 or scalar, quant/simd.hpp) is looked up once, not per row.
  const quant::VecDotFn dot = quant::vec_dot_kernel(w.type, quant::active_isa());
  // Each weight row is read once and dotted with every activation row while
  // it is in L1; each output element is still one vec_dot over the row.
  pool.parallel_for(n_out, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* wr = w.row(r);
      for (int64_t m = 0; m < n_rows; ++m) y[m * n_out + r] = dot(n_in, wr, a + static_cast<size_t>(m) * stride);
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

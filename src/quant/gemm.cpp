// The multi-row dot kernels of each level, looked up in its kernel table
// (kernel_table.hpp), and the fallback that loops the single-row dot.
#include "quant/gemm.hpp"

#include "quant/interleave.hpp"
#include "quant/kernel_table.hpp"
#include "quant/quant.hpp"

#include <string>
#include <vector>

#include "synapse/error.hpp"

namespace synapse::quant {

GemmFn gemm_kernel(GgmlType t, Isa isa) noexcept { return kernel_table(isa).row(t).gemm; }

GemvFn gemv_kernel(GgmlType t, Isa isa) noexcept { return kernel_table(isa).row(t).gemv; }

GemmPackFn gemm_pack_kernel(GgmlType t, Isa isa) noexcept { return kernel_table(isa).row(t).gemm_pack; }

size_t gemm_packed_row_size(GgmlType t, Isa isa, int64_t n) noexcept {
  return gemm_packed_row_size(kernel_table(isa).row(t), n);
}

void gemm(GgmlType t, Isa isa, int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a,
          size_t a_stride, int64_t n_rows, float* y, size_t y_stride) {
  if (const GemmFn g = gemm_kernel(t, isa)) {
    if (const GemmPackFn pack = gemm_pack_kernel(t, isa)) {
      const size_t ps = gemm_packed_row_size(t, isa, n);
      std::vector<uint8_t> packed(ps * static_cast<size_t>(n_rows));
      for (int64_t m = 0; m < n_rows; ++m) pack(n, a + m * a_stride, packed.data() + m * ps);
      g(n, w, w_stride, n_w, packed.data(), ps, n_rows, y, y_stride);
    } else {
      g(n, w, w_stride, n_w, a, a_stride, n_rows, y, y_stride);
    }
    return;
  }
  const VecDotFn dot = vec_dot_kernel(t, isa);
  if (!dot) throw Error(Errc::unsupported, "no matrix product for tensor type " + std::string(type_name(t)));
  for (int64_t r = 0; r < n_w; ++r)
    for (int64_t m = 0; m < n_rows; ++m)
      y[static_cast<size_t>(m) * y_stride + r] = dot(n, w + r * w_stride, a + m * a_stride);
}

}  // namespace synapse::quant

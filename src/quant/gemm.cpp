// Dispatch of the multi-row dot kernels (gemm.hpp) and the fallback that
// loops the single-row dot.
#include "quant/gemm.hpp"

#include "quant/interleave.hpp"
#include "quant/quant.hpp"

#include <string>
#include <vector>

#include "synapse/error.hpp"

namespace synapse::quant {

GemmFn gemm_kernel(GgmlType t, Isa isa) noexcept {
#if defined(__x86_64__) || defined(_M_X64)
  if (runs_avx2(isa)) {
    switch (t) {
      case GgmlType::Q8_0: return avx2::gemm_q8_0_q8_0;
      case GgmlType::Q5_K: return avx2::gemm_q5_K_q8_K;
      case GgmlType::Q6_K: return avx2::gemm_q6_K_q8_K;
      case GgmlType::F16: return avx2::gemm_f16_f16;
      case GgmlType::F32: return avx2::gemm_f32_f32;
      case GgmlType::Q4_1: return avx2::gemm_q4_1_q8_1;
      case GgmlType::Q5_1: return avx2::gemm_q5_1_q8_1;
      case GgmlType::IQ4_NL: return avx2::gemm_iq4_nl_q8_0;
      case GgmlType::Q2_K: return avx2::gemm_q2_K_q8_K;
      case GgmlType::Q3_K: return avx2::gemm_q3_K_q8_K;
      case GgmlType::IQ4_XS: return avx2::gemm_iq4_xs_q8_K;
      case GgmlType::TQ2_0: return avx2::gemm_tq2_0_q8_K;
      default: return nullptr;
    }
  }
#endif
  (void)t;
  (void)isa;
  return nullptr;
}

GemvFn gemv_kernel(GgmlType t, Isa isa) noexcept {
#if defined(__x86_64__) || defined(_M_X64)
  if (runs_avx2(isa)) {
    switch (t) {
      case GgmlType::Q8_0: return avx2::gemv_q8_0_q8_0;
      case GgmlType::Q5_K: return avx2::gemv_q5_K_q8_K;
      case GgmlType::Q6_K: return avx2::gemv_q6_K_q8_K;
      case GgmlType::F16: return avx2::gemv_f16_f16;
      case GgmlType::F32: return avx2::gemv_f32_f32;
      default: return nullptr;
    }
  }
#endif
  (void)t;
  (void)isa;
  return nullptr;
}

GemmPackFn gemm_pack_kernel(GgmlType t, Isa isa) noexcept {
#if defined(__x86_64__) || defined(_M_X64)
  if (runs_avx2(isa) && t == GgmlType::Q8_0) return avx2::pack_q8_0_for_q8_0;
#endif
  (void)t;
  (void)isa;
  return nullptr;
}

size_t gemm_packed_row_size(GgmlType t, Isa isa, int64_t n) noexcept {
#if defined(__x86_64__) || defined(_M_X64)
  if (runs_avx2(isa) && t == GgmlType::Q8_0) return static_cast<size_t>(n / 32) * 96;
#endif
  return row_size(vec_dot_type(t), n);
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

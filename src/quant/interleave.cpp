// Interleaved Q4_0 matrices (interleave.hpp): the repack, the row lookup,
// the scalar reference kernel and the dispatch.
#include "quant/interleave.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "synapse/error.hpp"

namespace synapse::quant {
namespace {

// Index in block_q4_0x8::qs of byte k (0..15) of row l's block_q4_0 qs.
constexpr int x8_byte(int l, int k) { return 32 * (k / 4) + 4 * l + k % 4; }

const block_q4_0x8* group_blocks(const uint8_t* data, size_t row_bytes, int64_t g) {
  return reinterpret_cast<const block_q4_0x8*>(data + static_cast<size_t>(g) * kInterleave * row_bytes);
}

}  // namespace

bool can_interleave(GgmlType t, int64_t n_out) noexcept {
  return t == GgmlType::Q4_0 && n_out > 0 && n_out % kInterleave == 0;
}

bool interleave_pays(GgmlType t, Isa isa) noexcept {
#if defined(__x86_64__) || defined(_M_X64)
  return t == GgmlType::Q4_0 && isa == Isa::avx2;
#else
  (void)t;
  (void)isa;
  return false;
#endif
}

void interleave_rows(GgmlType t, int64_t n, const uint8_t* src, size_t row_bytes, int64_t n_out, uint8_t* dst) {
  if (!can_interleave(t, n_out))
    throw Error(Errc::invalid_argument, "interleave_rows: " + std::to_string(n_out) + " rows of " +
                                            std::string(type_name(t)) +
                                            " (only Q4_0 matrices with a multiple of 8 rows are interleaved)");
  if (n <= 0 || n % QK4_0 != 0 || row_bytes != row_size(t, n))
    throw Error(Errc::invalid_argument, "interleave_rows: rows of " + std::to_string(n) + " elements in " +
                                            std::to_string(row_bytes) + " bytes are not Q4_0 rows");
  const int64_t nb = n / QK4_0;
  for (int64_t g = 0; g < n_out / kInterleave; ++g) {
    auto* out = reinterpret_cast<block_q4_0x8*>(dst + static_cast<size_t>(g) * kInterleave * row_bytes);
    for (int l = 0; l < kInterleave; ++l) {
      const auto* row = reinterpret_cast<const block_q4_0*>(src + static_cast<size_t>(8 * g + l) * row_bytes);
      for (int64_t i = 0; i < nb; ++i) {
        out[i].d[l] = row[i].d;
        for (int k = 0; k < QK4_0 / 2; ++k) out[i].qs[x8_byte(l, k)] = row[i].qs[k];
      }
    }
  }
}

void dequantize_interleaved_row(GgmlType t, const uint8_t* data, size_t row_bytes, int64_t r, float* y, int64_t n) {
  if (t != GgmlType::Q4_0)
    throw Error(Errc::invalid_argument, "dequantize_interleaved_row: " + std::string(type_name(t)) +
                                            " matrices are never interleaved");
  const block_q4_0x8* b = group_blocks(data, row_bytes, r / kInterleave);
  const int l = static_cast<int>(r % kInterleave);
  for (int64_t i = 0; i < n / QK4_0; ++i, y += QK4_0) {
    const float d = fp16_to_fp32(b[i].d[l]);
    for (int k = 0; k < QK4_0 / 2; ++k) {
      const uint8_t q = b[i].qs[x8_byte(l, k)];
      y[k] = static_cast<float>((q & 0x0F) - 8) * d;
      y[k + QK4_0 / 2] = static_cast<float>((q >> 4) - 8) * d;
    }
  }
}

// The reference: per output, vec_dot_q4_0_q8_0's steps (legacy.cpp) with
// the weight bytes read from their interleaved places.
void scalar::gemm_q4_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                              int64_t n_rows, float* y, size_t y_stride) {
  const int64_t nb = n / QK4_0;
  const size_t row_bytes = static_cast<size_t>(nb) * sizeof(block_q4_0);
  for (int64_t g = 0; g < n_groups; ++g) {
    const block_q4_0x8* b = group_blocks(w, row_bytes, g);
    for (int64_t m = 0; m < n_rows; ++m) {
      const auto* x = reinterpret_cast<const block_q8_0*>(a + static_cast<size_t>(m) * a_stride);
      for (int l = 0; l < kInterleave; ++l) {
        float acc = 0.0f;
        for (int64_t i = 0; i < nb; ++i) {
          int32_t isum = 0;
          for (int k = 0; k < QK4_0 / 2; ++k) {
            const uint8_t q = b[i].qs[x8_byte(l, k)];
            isum += ((q & 0x0F) - 8) * x[i].qs[k] + ((q >> 4) - 8) * x[i].qs[k + QK4_0 / 2];
          }
          acc = std::fma(static_cast<float>(isum), fp16_to_fp32(b[i].d[l]) * fp16_to_fp32(x[i].d), acc);
        }
        y[static_cast<size_t>(m) * y_stride + static_cast<size_t>(8 * g + l)] = acc;
      }
    }
  }
}

GemmX8Fn gemm_x8_kernel(GgmlType t, Isa isa) noexcept {
  if (t != GgmlType::Q4_0) return nullptr;
#if defined(__x86_64__) || defined(_M_X64)
  if (isa == Isa::avx2) return avx2::gemm_q4_0x8_q8_0;
#endif
  (void)isa;
  return scalar::gemm_q4_0x8_q8_0;
}

}  // namespace synapse::quant

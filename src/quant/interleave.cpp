// Interleaved Q4_0 / Q5_0 / Q8_0 / IQ4_NL / MXFP4 / Q4_K / Q6_K matrices
// (interleave.hpp):
// the repack, the row lookup, the scalar reference kernels and the dispatch.
#include "quant/interleave.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "quant/formats.hpp"
#include "quant/kernel_table.hpp"
#include "quant/quant.hpp"
#include "synapse/error.hpp"

namespace synapse::quant {
namespace {

// Index in the interleaved qs of byte k (0..15; Q8_0 0..31) of row l's
// plain qs.
constexpr int x8_byte(int l, int k) { return 32 * (k / 4) + 4 * l + k % 4; }

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// The 4-bit formats (Q4_0, IQ4_NL, MXFP4; block_q4_0x8's byte placement):
// row l's nibble of element e (0..31), and row l's 16 plain bytes of
// nibbles written to their interleaved places.
template <class X8>
int nibble(const X8& b, int l, int e) {
  const uint8_t v = b.qs[x8_byte(l, e % 16)];
  return e < 16 ? (v & 0x0F) : (v >> 4);
}
void put_nibbles(const uint8_t* qs, int l, uint8_t* x8qs) {
  for (int c = 0; c < 4; ++c) std::memcpy(x8qs + x8_byte(l, 4 * c), qs + 4 * c, 4);
}

// Per type: the plain and interleaved blocks, q(b, l, e), the integer
// value (digit minus offset, or table value) of row l's element e (0..31),
// and dw(b, l), row l's block scale as a float; put() places row l's plain
// block in the interleaved one.
struct Q4 {
  using Plain = block_q4_0;
  using X8 = block_q4_0x8;
  static float dw(const X8& b, int l) { return fp16_to_fp32(b.d[l]); }
  static int q(const X8& b, int l, int e) { return nibble(b, l, e) - 8; }
  static void put(const Plain& p, int l, X8& b) {
    b.d[l] = p.d;
    put_nibbles(p.qs, l, b.qs);
  }
};

struct Q5 {
  using Plain = block_q5_0;
  using X8 = block_q5_0x8;
  static float dw(const X8& b, int l) { return fp16_to_fp32(b.d[l]); }
  // Row l's byte at k (0..15) of chunk c = k / 4: the whole 5-bit digit of
  // element k in bits 0..4, the low 3 bits of element 16 + k's above them;
  // that digit's top 2 bits in bits 2c, 2c + 1 of qh[4l + k % 4]
  // (interleave.hpp).
  static int q(const X8& b, int l, int e) {
    const int k = e % 16, c = k / 4;
    const uint8_t v = b.qs[x8_byte(l, k)];
    if (e < 16) return (v & 0x1F) - 16;
    return ((v >> 5) | (((b.qh[4 * l + k % 4] >> (2 * c)) & 3) << 3)) - 16;
  }
  static void put(const Plain& p, int l, X8& b) {
    b.d[l] = p.d;
    const uint32_t qh = load_u32(p.qh);
    // qh[4l + j] holds only row l's bits: written whole.
    uint8_t top[4] = {0, 0, 0, 0};
    for (int k = 0; k < 16; ++k) {
      const int lo = (p.qs[k] & 0x0F) | static_cast<int>(((qh >> k) & 1) << 4);
      const int hi = (p.qs[k] >> 4) | static_cast<int>(((qh >> (16 + k)) & 1) << 4);
      b.qs[x8_byte(l, k)] = static_cast<uint8_t>(lo | ((hi & 7) << 5));
      top[k % 4] = static_cast<uint8_t>(top[k % 4] | ((hi >> 3) << (2 * (k / 4))));
    }
    for (int j = 0; j < 4; ++j) b.qh[4 * l + j] = top[j];
  }
};

struct Q8 {
  using Plain = block_q8_0;
  using X8 = block_q8_0x8;
  static float dw(const X8& b, int l) { return fp16_to_fp32(b.d[l]); }
  static int q(const X8& b, int l, int e) { return b.qs[x8_byte(l, e)]; }
  static void put(const Plain& p, int l, X8& b) {
    b.d[l] = p.d;
    for (int c = 0; c < 8; ++c) std::memcpy(b.qs + x8_byte(l, 4 * c), p.qs + 4 * c, 4);
  }
};

struct IQ4NL {
  using Plain = block_iq4_nl;
  using X8 = block_iq4_nlx8;
  static float dw(const X8& b, int l) { return fp16_to_fp32(b.d[l]); }
  static int q(const X8& b, int l, int e) { return kvalues_iq4nl[nibble(b, l, e)]; }
  static void put(const Plain& p, int l, X8& b) {
    b.d[l] = p.d;
    put_nibbles(p.qs, l, b.qs);
  }
};

struct MXFP4 {
  using Plain = block_mxfp4;
  using X8 = block_mxfp4x8;
  static float dw(const X8& b, int l) { return kE8M0Half.v[b.e[l]]; }
  static int q(const X8& b, int l, int e) { return kvalues_mxfp4[nibble(b, l, e)]; }
  static void put(const Plain& p, int l, X8& b) {
    b.e[l] = p.e;
    put_nibbles(p.qs, l, b.qs);
  }
};

// Group g of an interleaved matrix with nb blocks per row.
template <class T>
const typename T::X8* group_blocks(const uint8_t* data, int64_t nb, int64_t g) {
  return reinterpret_cast<const typename T::X8*>(data + static_cast<size_t>(g * nb) * sizeof(typename T::X8));
}

// The repack of every type: T::put writes all of row l's bytes of an
// interleaved block (each byte of a block belongs to one row), so dst needs
// no clearing first.
template <class T>
void interleave(int64_t nb, const uint8_t* src, size_t row_bytes, int64_t n_out, uint8_t* dst) {
  for (int64_t g = 0; g < n_out / kInterleave; ++g) {
    auto* out = reinterpret_cast<typename T::X8*>(dst + static_cast<size_t>(g * nb) * sizeof(typename T::X8));
    for (int l = 0; l < kInterleave; ++l) {
      const auto* row = reinterpret_cast<const typename T::Plain*>(src + static_cast<size_t>(8 * g + l) * row_bytes);
      for (int64_t i = 0; i < nb; ++i) T::put(row[i], l, out[i]);
    }
  }
}

template <class T>
void dequantize(const uint8_t* data, int64_t r, float* y, int64_t n) {
  const auto* b = group_blocks<T>(data, n / 32, r / kInterleave);
  const int l = static_cast<int>(r % kInterleave);
  for (int64_t i = 0; i < n / 32; ++i, y += 32) {
    const float d = T::dw(b[i], l);
    for (int e = 0; e < 32; ++e) y[e] = static_cast<float>(T::q(b[i], l, e)) * d;
  }
}

// The reference of Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4: per output, vec_dot_<t>_q8_0's
// steps (legacy.cpp's Q4_0 order) with the weight bits read from their
// interleaved places.
template <class T>
void gemm_ref(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride, int64_t n_rows,
              float* y, size_t y_stride) {
  const int64_t nb = n / 32;
  for (int64_t g = 0; g < n_groups; ++g) {
    const auto* b = group_blocks<T>(w, nb, g);
    for (int64_t m = 0; m < n_rows; ++m) {
      const auto* x = reinterpret_cast<const block_q8_0*>(a + static_cast<size_t>(m) * a_stride);
      for (int l = 0; l < kInterleave; ++l) {
        float acc = 0.0f;
        for (int64_t i = 0; i < nb; ++i) {
          int32_t isum = 0;
          for (int e = 0; e < 32; ++e) isum += T::q(b[i], l, e) * x[i].qs[e];
          acc = std::fma(static_cast<float>(isum), T::dw(b[i], l) * fp16_to_fp32(x[i].d), acc);
        }
        y[static_cast<size_t>(m) * y_stride + static_cast<size_t>(8 * g + l)] = acc;
      }
    }
  }
}

// ---- Q4_K (block_q4_Kx8)

// Index in block_q4_Kx8::qs of byte k (0..127) of row l's plain qs.
constexpr int x8k_byte(int l, int k) { return 32 * (8 * (k / 32) + (k % 32) / 4) + 4 * l + k % 4; }

struct Q4K {
  using Plain = block_q4_K;
  using X8 = block_q4_Kx8;
  static void put(const Plain& p, int l, X8& b) {
    b.d[l] = p.d;
    b.dmin[l] = p.dmin;
    for (int j = 0; j < 8; ++j) get_scale_min_k4(j, p.scales, &b.sc[j][l], &b.mp[j / 2][l][j % 2]);
    for (int k = 0; k < QK_K / 2; k += 4) std::memcpy(b.qs + x8k_byte(l, k), p.qs + k, 4);
  }
};

// Row l's digit (0..15) of element e (0..255).
int q4_K_digit(const block_q4_Kx8& b, int l, int e) {
  const int g = e / 64, j = e % 64;
  const uint8_t v = b.qs[x8k_byte(l, 32 * g + j % 32)];
  return j < 32 ? (v & 0x0F) : (v >> 4);
}

int q4_K_min(const block_q4_Kx8& b, int l, int s) { return b.mp[s / 2][l][s % 2]; }

void dequantize_q4_K(const uint8_t* data, int64_t r, float* y, int64_t n) {
  const int64_t nb = n / QK_K;
  const auto* b = group_blocks<Q4K>(data, nb, r / kInterleave);
  const int l = static_cast<int>(r % kInterleave);
  for (int64_t i = 0; i < nb; ++i, y += QK_K) {
    // dequantize_row_q4_K's values: d * scale * q - dmin * min.
    const float d = fp16_to_fp32(b[i].d[l]), dmin = fp16_to_fp32(b[i].dmin[l]);
    for (int s = 0; s < 8; ++s) {
      const float ds = d * b[i].sc[s][l], ms = dmin * q4_K_min(b[i], l, s);
      for (int e = 32 * s; e < 32 * s + 32; ++e) y[e] = ds * static_cast<float>(q4_K_digit(b[i], l, e)) - ms;
    }
  }
}

}  // namespace

// k_quants.cpp's Q4_K order, with the weight bits read from their
// interleaved places.
void scalar::gemm_q4_Kx8_q8_K(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                              int64_t n_rows, float* y, size_t y_stride) {
  const int64_t nb = n / QK_K;
  for (int64_t g = 0; g < n_groups; ++g) {
    const auto* b = group_blocks<Q4K>(w, nb, g);
    for (int64_t m = 0; m < n_rows; ++m) {
      const auto* x = reinterpret_cast<const block_q8_K*>(a + static_cast<size_t>(m) * a_stride);
      for (int l = 0; l < kInterleave; ++l) {
        float acc = 0.0f, acc_min = 0.0f;
        for (int64_t i = 0; i < nb; ++i) {
          int32_t isum = 0, msum = 0;
          for (int s = 0; s < 8; ++s) {
            int32_t sub = 0;
            for (int e = 32 * s; e < 32 * s + 32; ++e) sub += q4_K_digit(b[i], l, e) * x[i].qs[e];
            isum += b[i].sc[s][l] * sub;
            const auto bsum = static_cast<int16_t>(x[i].bsums[2 * s] + x[i].bsums[2 * s + 1]);
            msum += q4_K_min(b[i], l, s) * bsum;
          }
          acc = std::fma(static_cast<float>(isum), fp16_to_fp32(b[i].d[l]) * x[i].d, acc);
          acc_min = std::fma(static_cast<float>(msum), fp16_to_fp32(b[i].dmin[l]) * x[i].d, acc_min);
        }
        y[static_cast<size_t>(m) * y_stride + static_cast<size_t>(8 * g + l)] = acc - acc_min;
      }
    }
  }
}

// ---- Q6_K (block_q6_Kx8)

namespace {

struct Q6K {
  using Plain = block_q6_K;
  using X8 = block_q6_Kx8;
  static void put(const Plain& p, int l, X8& b) {
    b.d[l] = p.d;
    for (int s = 0; s < 16; ++s) b.sc[s][l] = p.scales[s];
    // The digits (value + 32) in order.
    int8_t v[QK_K];
    unpack_q6_K(p, v);
    uint8_t u[QK_K];
    for (int e = 0; e < QK_K; ++e) u[e] = static_cast<uint8_t>(v[e] + 32);
    // Register (c, q) holds elements 32c + 4q + j at byte 4l + j.
    for (int c = 0; c < 8; ++c) {
      const uint8_t* uc = u + 32 * c;
      for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j) {
          int d[4];
          for (int f = 0; f < 4; ++f) d[f] = uc[4 * q6x8_register(h, f) + j];
          b.q[c][h][0][4 * l + j] = static_cast<uint8_t>(d[0] | (d[2] & 3) << 6);
          b.q[c][h][1][4 * l + j] = static_cast<uint8_t>(d[1] | (d[3] & 3) << 6);
          b.q[c][h][2][4 * l + j] = static_cast<uint8_t>(d[2] >> 2 | (d[3] >> 2) << 4);
        }
    }
  }
};


// Row l's digit (0..63, value + 32) of element e (0..255).
int q6_K_digit(const block_q6_Kx8& b, int l, int e) {
  const int c = e / 32, q = (e % 32) / 4, pos = 4 * l + e % 4, f = q6x8_digit(q);
  const uint8_t(&r)[3][32] = b.q[c][q6x8_half(q)];
  if (f < 2) return r[f][pos] & 0x3F;
  return r[f - 2][pos] >> 6 | ((r[2][pos] >> (4 * (f - 2))) & 0x0F) << 2;
}

void dequantize_q6_K(const uint8_t* data, int64_t r, float* y, int64_t n) {
  const int64_t nb = n / QK_K;
  const auto* b = group_blocks<Q6K>(data, nb, r / kInterleave);
  const int l = static_cast<int>(r % kInterleave);
  for (int64_t i = 0; i < nb; ++i, y += QK_K) {
    // dequantize_row_q6_K's values: (d * sc) * q.
    const float d = fp16_to_fp32(b[i].d[l]);
    for (int e = 0; e < QK_K; ++e) y[e] = d * b[i].sc[e / 16][l] * static_cast<float>(q6_K_digit(b[i], l, e) - 32);
  }
}

}  // namespace

// k_quants.cpp's 8-lane Q6_K order, with the weight bits read from their
// interleaved places.
void scalar::gemm_q6_Kx8_q8_K(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                              int64_t n_rows, float* y, size_t y_stride) {
  const int64_t nb = n / QK_K;
  for (int64_t g = 0; g < n_groups; ++g) {
    const auto* b = group_blocks<Q6K>(w, nb, g);
    for (int64_t m = 0; m < n_rows; ++m) {
      const auto* x = reinterpret_cast<const block_q8_K*>(a + static_cast<size_t>(m) * a_stride);
      for (int l = 0; l < kInterleave; ++l) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t i = 0; i < nb; ++i) {
          const float d = x[i].d * fp16_to_fp32(b[i].d[l]);
          for (int q = 0; q < 8; ++q) {
            int32_t lane = 0;
            for (int c = 0; c < 8; ++c) {
              int32_t s = 0;
              for (int e = 32 * c + 4 * q; e < 32 * c + 4 * q + 4; ++e) s += (q6_K_digit(b[i], l, e) - 32) * x[i].qs[e];
              lane += b[i].sc[2 * c + q / 4][l] * s;
            }
            acc[q] = std::fma(d, static_cast<float>(lane), acc[q]);
          }
        }
        y[static_cast<size_t>(m) * y_stride + static_cast<size_t>(8 * g + l)] = hsum_float_8(acc);
      }
    }
  }
}

size_t interleaved_group_bytes(GgmlType t, int64_t n) noexcept {
  if (t == GgmlType::Q4_K) return static_cast<size_t>(n / QK_K) * sizeof(block_q4_Kx8);
  return static_cast<size_t>(kInterleave) * row_size(t, n);
}

namespace {
bool interleaved_type(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q5_0 || t == GgmlType::Q8_0 || t == GgmlType::IQ4_NL ||
         t == GgmlType::MXFP4 || t == GgmlType::Q4_K || t == GgmlType::Q6_K;
}
}  // namespace

bool can_interleave(GgmlType t, int64_t n_out) noexcept {
  return interleaved_type(t) && n_out > 0 && n_out % kInterleave == 0;
}

bool rows_interleave_exactly(GgmlType t, int64_t n, const uint8_t* src, size_t row_bytes, int64_t n_rows) noexcept {
  if (t != GgmlType::Q8_0) return true;
  // 8 bytes at a time (model loading scans every Q8_0 matrix): a byte is
  // 0x80 when it is 0 after ^ 0x80, and (v - 0x01..01) & ~v & 0x80..80 is
  // nonzero exactly when some byte of v is 0.
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* b = reinterpret_cast<const block_q8_0*>(src + static_cast<size_t>(r) * row_bytes);
    uint64_t found = 0;
    for (int64_t i = 0; i < n / QK8_0; ++i) {
      for (int k = 0; k < 4; ++k) {
        uint64_t v;
        std::memcpy(&v, b[i].qs + 8 * k, 8);
        v ^= kHigh;
        found |= (v - kOnes) & ~v & kHigh;
      }
    }
    if (found != 0) return false;
  }
  return true;
}

bool interleave_pays(GgmlType t, Isa isa) noexcept { return kernel_table(isa).row(t).interleave; }

bool interleave_rows(GgmlType t, int64_t n, const uint8_t* src, size_t row_bytes, int64_t n_out, uint8_t* dst) {
  if (!can_interleave(t, n_out))
    throw Error(Errc::invalid_argument, "interleave_rows: " + std::to_string(n_out) + " rows of " +
                                            std::string(type_name(t)) +
                                            " (only Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4, Q4_K and Q6_K matrices with a multiple of 8 rows"
                                            " are interleaved)");
  if (n <= 0 || n % type_traits(t).block_size != 0 || row_bytes != row_size(t, n))
    throw Error(Errc::invalid_argument, "interleave_rows: rows of " + std::to_string(n) + " elements in " +
                                            std::to_string(row_bytes) + " bytes are not " +
                                            std::string(type_name(t)) + " rows");
  if (!rows_interleave_exactly(t, n, src, row_bytes, n_out)) return false;
  switch (t) {
    case GgmlType::Q4_0: interleave<Q4>(n / 32, src, row_bytes, n_out, dst); break;
    case GgmlType::Q5_0: interleave<Q5>(n / 32, src, row_bytes, n_out, dst); break;
    case GgmlType::Q8_0: interleave<Q8>(n / 32, src, row_bytes, n_out, dst); break;
    case GgmlType::IQ4_NL: interleave<IQ4NL>(n / 32, src, row_bytes, n_out, dst); break;
    case GgmlType::MXFP4: interleave<MXFP4>(n / 32, src, row_bytes, n_out, dst); break;
    case GgmlType::Q6_K: interleave<Q6K>(n / QK_K, src, row_bytes, n_out, dst); break;
    default: interleave<Q4K>(n / QK_K, src, row_bytes, n_out, dst); break;
  }
  return true;
}

void dequantize_interleaved_row(GgmlType t, const uint8_t* data, int64_t r, float* y, int64_t n) {
  switch (t) {
    case GgmlType::Q4_0: return dequantize<Q4>(data, r, y, n);
    case GgmlType::Q5_0: return dequantize<Q5>(data, r, y, n);
    case GgmlType::Q8_0: return dequantize<Q8>(data, r, y, n);
    case GgmlType::IQ4_NL: return dequantize<IQ4NL>(data, r, y, n);
    case GgmlType::MXFP4: return dequantize<MXFP4>(data, r, y, n);
    case GgmlType::Q4_K: return dequantize_q4_K(data, r, y, n);
    case GgmlType::Q6_K: return dequantize_q6_K(data, r, y, n);
    default:
      throw Error(Errc::invalid_argument, "dequantize_interleaved_row: " + std::string(type_name(t)) +
                                              " matrices are never interleaved");
  }
}

void scalar::gemm_q4_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                              int64_t n_rows, float* y, size_t y_stride) {
  gemm_ref<Q4>(n, w, n_groups, a, a_stride, n_rows, y, y_stride);
}

void scalar::gemm_q5_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                              int64_t n_rows, float* y, size_t y_stride) {
  gemm_ref<Q5>(n, w, n_groups, a, a_stride, n_rows, y, y_stride);
}

void scalar::gemm_q8_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                              int64_t n_rows, float* y, size_t y_stride) {
  gemm_ref<Q8>(n, w, n_groups, a, a_stride, n_rows, y, y_stride);
}

void scalar::gemm_iq4_nlx8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                                int64_t n_rows, float* y, size_t y_stride) {
  gemm_ref<IQ4NL>(n, w, n_groups, a, a_stride, n_rows, y, y_stride);
}

void scalar::gemm_mxfp4x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                               int64_t n_rows, float* y, size_t y_stride) {
  gemm_ref<MXFP4>(n, w, n_groups, a, a_stride, n_rows, y, y_stride);
}

GemmX8Fn gemm_x8_kernel(GgmlType t, Isa isa) noexcept { return kernel_table(isa).row(t).gemm_x8; }

GemmPackFn x8_pack_kernel(GgmlType t, Isa isa) noexcept { return kernel_table(isa).row(t).x8_pack; }

size_t x8_packed_row_size(GgmlType t, Isa isa, int64_t n) noexcept {
  return x8_packed_row_size(kernel_table(isa).row(t), n);
}

}  // namespace synapse::quant

// The lattice formats of ggml: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ1_S, IQ1_M (256-element blocks, Q8_K activations). Each group of 8 (IQ2,
// IQ1) or 4 (IQ3) values is an index into one of iq_grids.hpp's lattices;
// IQ2/IQ3 carry a sign per value, IQ1 a shift of +-1/8 per group of 8 or 16.
//
// Layouts: ggml-common.h's block_iq2_xxs ... block_iq1_m (formats.hpp); the
// bits of each field as ggml-quants.c's dequantize_row_* read them:
//   IQ2_XXS  per 32: two uint32 words; word 0 = 4 grid indices (8 bits, one
//            byte per group of 8), word 1 = 4 sign indices (7 bits each,
//            bits 7l..7l+6, into ksigns_iq2xs) and the scale in bits 28-31.
//   IQ2_XS   qs[32] uint16: grid index (low 9 bits) | sign index << 9;
//            scales[ib32]: low nibble for groups 0-1, high for groups 2-3.
//   IQ2_S    qs[0..32): grid index low 8 bits, qs[32..64): one sign byte per
//            group; qh[ib32] bits 2l..2l+1: index bits 8-9 of group l;
//            scales as IQ2_XS.
//   IQ3_XXS  qs[0..64): grid indices (8 bits, one per 4 values); then one
//            uint32 per 32 as IQ2_XXS's word 1.
//   IQ3_S    qs[64]: index low 8 bits; qh[ib32] bit k: index bit 8 of the
//            k-th group of 4; signs[32]: one bit per value; scales[4]: a
//            nibble per 32 (low nibble the even one).
//   IQ1_S    qs[32]: index low 8 bits; qh[ib32] uint16: bits 3l..3l+2 index
//            bits 8-10 of group l, bits 12-14 the scale, bit 15 the sign of
//            the shift.
//   IQ1_M    qs[32] as IQ1_S; qh[16]: one byte per two groups of 8 (low
//            nibble the even group: bits 0-2 index bits 8-10, bit 3 the sign
//            of its shift); scales: four uint16 words, 3-bit sub-block scales
//            in bits 0-11 (one per 16 values) and the block's F16 scale in
//            bits 12-15 of each word (word 0's are its low 4 bits).
// Every index is masked to its table's width (iq_grids.hpp), so no block,
// however malformed, reads outside the tables.
//
// Dequantize: ggml-quants.c's dequantize_row_*, the same float operations.
//
// Dots (the references the SIMD kernels equal bit for bit): ggml-cpu's
// generic ggml_vec_dot_<t>_q8_K. Per block one exact integer sum (the
// products of each 32 or 16 values times their sub-block scales), then one
// float step per block, sumf = fma(d, (float)bsum, sumf) with d = fp16(w.d)
// * a.d (IQ1: fma(d, fma(delta, sumi1, sumi), sumf)), as llama.cpp v0.5.0's
// x86 build compiles the generic code (GCC contracts it into vfmadd231ss);
// the result times 0.125 (IQ2) or 0.25 (IQ3_XXS). Every product is ggml's
// exact integer product (an activation of -128 included), so these are
// ggml's generic dots bit for bit for any input. That order is the fastest
// that keeps contract 2: the integer work in any order (the SIMD kernels
// multiply signed int8 weights by the activations, and the prefill GEMM
// decodes a matrix's rows to int8 once for many activation rows), one
// scalar fma per block and row.
#include <cmath>
#include <cstring>
#include <iterator>

#include "quant/formats.hpp"
#include "quant/iq_grids.hpp"

namespace synapse::quant {
namespace {

// The index widths the formats can express, against the tables' sizes.
static_assert(std::size(iq2xxs_grid) == 1u << 8 && std::size(iq2xs_grid) == 1u << 9);
static_assert(std::size(iq2s_grid) == 1u << 10 && std::size(iq3xxs_grid) == 1u << 8);
static_assert(std::size(iq3s_grid) == 1u << 9 && std::size(iq1s_grid) == 1u << 11);
static_assert(std::size(ksigns_iq2xs) == 1u << 7);

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline uint16_t load_u16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Byte j of a grid entry.
inline int grid_byte(uint64_t g, int j) { return static_cast<int>((g >> (8 * j)) & 0xFF); }
inline int grid_sbyte(uint64_t g, int j) { return static_cast<int8_t>((g >> (8 * j)) & 0xFF); }

// Sum over one group of 8 of magnitude byte j of g times activation j,
// negated where bit j of `signs` is set (ggml's grid[j] * q8[j] * (+-1)).
inline int32_t group8(uint64_t g, uint8_t signs, const int8_t* q8) {
  int32_t s = 0;
  for (int j = 0; j < 8; ++j) s += grid_byte(g, j) * q8[j] * ((signs >> j) & 1 ? -1 : 1);
  return s;
}

// Two IQ3 groups of 4 as one group of 8.
inline uint64_t grid_pair(uint32_t g1, uint32_t g2) { return g1 | static_cast<uint64_t>(g2) << 32; }

// IQ1 grid entries (int8 bytes -1, 0, 1) against 8 activations.
inline int32_t group8_signed(uint64_t g, const int8_t* q8) {
  int32_t s = 0;
  for (int j = 0; j < 8; ++j) s += grid_sbyte(g, j) * q8[j];
  return s;
}

// IQ2_S / IQ3_S index of group l of sub-block ib32.
inline uint32_t iq2s_index(const block_iq2_s& b, int ib32, int l) {
  return b.qs[4 * ib32 + l] | ((b.qh[ib32] << (8 - 2 * l)) & 0x300);
}
inline uint32_t iq3s_index(const block_iq3_s& b, int ib32, int k) {
  return b.qs[8 * ib32 + k] | ((b.qh[ib32] << (8 - k)) & 256);
}

// IQ1_S index of group l of sub-block ib; IQ1_M's of group l (0..3) of
// the sub-block whose two qh bytes are qh[0], qh[1].
inline uint32_t iq1s_index(const block_iq1_s& b, int ib, int l) {
  return b.qs[4 * ib + l] | (((b.qh[ib] >> 3 * l) & 7) << 8);
}
inline uint32_t iq1m_index(const uint8_t* qs, const uint8_t* qh, int l) {
  return qs[l] | ((static_cast<uint32_t>(qh[l / 2]) << (8 - 4 * (l % 2))) & 0x700);
}

// IQ1_M's F16 block scale: the top nibbles of its four scale words.
inline float iq1m_scale(const block_iq1_m& b) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof sc);
  const uint16_t h = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                           (sc[3] & 0xf000));
  return fp16_to_fp32(h);
}

// IQ1_M's 3-bit scale of half h (0, 1) of sub-block ib, as 2s + 1.
inline int iq1m_ls(const block_iq1_m& b, int ib, int h) {
  const uint16_t w = load_u16(b.scales + 2 * (ib / 2));
  return 2 * ((w >> (6 * (ib % 2) + 3 * h)) & 7) + 1;
}

}  // namespace

// ---------------------------------------------------------------- dequantize

void dequantize_row_iq2_xxs(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_iq2_xxs*>(vx);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      const uint32_t idx = load_u32(x[i].qs + 4 * ib32), sgn = load_u32(x[i].qs + 4 * ib32 + 2);
      const float db = d * (0.5f + static_cast<float>(sgn >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l) {
        const uint64_t g = iq2xxs_grid[(idx >> 8 * l) & 255];
        const uint8_t signs = ksigns_iq2xs[(sgn >> 7 * l) & 127];
        for (int j = 0; j < 8; ++j) y[j] = db * static_cast<float>(grid_byte(g, j)) * (signs & kmask_iq2xs[j] ? -1.f : 1.f);
        y += 8;
      }
    }
  }
}

void dequantize_row_iq2_xs(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_iq2_xs*>(vx);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      const float db[2] = {d * (0.5f + static_cast<float>(x[i].scales[ib32] & 0xf)) * 0.25f,
                           d * (0.5f + static_cast<float>(x[i].scales[ib32] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l) {
        const uint16_t q = x[i].qs[4 * ib32 + l];
        const uint64_t g = iq2xs_grid[q & 511];
        const uint8_t signs = ksigns_iq2xs[q >> 9];
        for (int j = 0; j < 8; ++j)
          y[j] = db[l / 2] * static_cast<float>(grid_byte(g, j)) * (signs & kmask_iq2xs[j] ? -1.f : 1.f);
        y += 8;
      }
    }
  }
}

void dequantize_row_iq2_s(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_iq2_s*>(vx);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const uint8_t* signs = x[i].qs + QK_K / 8;
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      const float db[2] = {d * (0.5f + static_cast<float>(x[i].scales[ib32] & 0xf)) * 0.25f,
                           d * (0.5f + static_cast<float>(x[i].scales[ib32] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l) {
        const float dl = db[l / 2];
        const uint64_t g = iq2s_grid[iq2s_index(x[i], ib32, l)];
        for (int j = 0; j < 8; ++j)
          y[j] = dl * static_cast<float>(grid_byte(g, j)) * (signs[4 * ib32 + l] & kmask_iq2xs[j] ? -1.f : 1.f);
        y += 8;
      }
    }
  }
}

void dequantize_row_iq3_xxs(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_iq3_xxs*>(vx);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const uint8_t* qs = x[i].qs;
    const uint8_t* scales_and_signs = qs + QK_K / 4;
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      const uint32_t aux32 = load_u32(scales_and_signs + 4 * ib32);
      const float db = d * (0.5f + static_cast<float>(aux32 >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l) {
        const uint8_t signs = ksigns_iq2xs[(aux32 >> 7 * l) & 127];
        const uint64_t g = grid_pair(iq3xxs_grid[qs[2 * l + 0]], iq3xxs_grid[qs[2 * l + 1]]);
        for (int j = 0; j < 8; ++j) y[j] = db * static_cast<float>(grid_byte(g, j)) * (signs & kmask_iq2xs[j] ? -1.f : 1.f);
        y += 8;
      }
      qs += 8;
    }
  }
}

void dequantize_row_iq3_s(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_iq3_s*>(vx);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      const float db = d * static_cast<float>(1 + 2 * ((x[i].scales[ib32 / 2] >> 4 * (ib32 % 2)) & 0xf));
      for (int l = 0; l < 4; ++l) {
        const uint64_t g = grid_pair(iq3s_grid[iq3s_index(x[i], ib32, 2 * l)], iq3s_grid[iq3s_index(x[i], ib32, 2 * l + 1)]);
        const uint8_t signs = x[i].signs[4 * ib32 + l];
        for (int j = 0; j < 8; ++j) y[j] = db * static_cast<float>(grid_byte(g, j)) * (signs & kmask_iq2xs[j] ? -1.f : 1.f);
        y += 8;
      }
    }
  }
}

void dequantize_row_iq1_s(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_iq1_s*>(vx);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const float dl = d * static_cast<float>(2 * ((x[i].qh[ib] >> 12) & 7) + 1);
      const float delta = x[i].qh[ib] & 0x8000 ? -kIq1sDelta : kIq1sDelta;
      for (int l = 0; l < 4; ++l) {
        const uint64_t g = iq1s_grid[iq1s_index(x[i], ib, l)];
        for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<float>(grid_sbyte(g, j)) + delta);
        y += 8;
      }
    }
  }
}

void dequantize_row_iq1_m(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_iq1_m*>(vx);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = iq1m_scale(x[i]);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const float dl[2] = {d * static_cast<float>(iq1m_ls(x[i], ib, 0)), d * static_cast<float>(iq1m_ls(x[i], ib, 1))};
      const uint8_t* qs = x[i].qs + 4 * ib;
      const uint8_t* qh = x[i].qh + 2 * ib;
      for (int l = 0; l < 4; ++l) {
        const uint64_t g = iq1s_grid[iq1m_index(qs, qh, l)];
        // ggml's dequantize_row_iq1_m uses IQ1S_DELTA (equal to IQ1M_DELTA).
        const float delta = qh[l / 2] & (l % 2 ? 0x80 : 0x08) ? -kIq1sDelta : kIq1sDelta;
        for (int j = 0; j < 8; ++j) y[j] = dl[l / 2] * (static_cast<float>(grid_sbyte(g, j)) + delta);
        y += 8;
      }
    }
  }
}

// ---------------------------------------------------------------- dots

float vec_dot_iq2_xxs_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_iq2_xxs*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d) * y[i].d;
    const int8_t* q8 = y[i].qs;
    int32_t bsum = 0;
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      const uint32_t idx = load_u32(x[i].qs + 4 * ib32), sgn = load_u32(x[i].qs + 4 * ib32 + 2);
      int32_t sumi = 0;
      for (int l = 0; l < 4; ++l, q8 += 8)
        sumi += group8(iq2xxs_grid[(idx >> 8 * l) & 255], ksigns_iq2xs[(sgn >> 7 * l) & 127], q8);
      bsum += sumi * static_cast<int32_t>(2 * (sgn >> 28) + 1);
    }
    sumf = std::fma(d, static_cast<float>(bsum), sumf);
  }
  return 0.125f * sumf;
}

float vec_dot_iq2_xs_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_iq2_xs*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d) * y[i].d;
    const int8_t* q8 = y[i].qs;
    int32_t bsum = 0;
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      for (int h = 0; h < 2; ++h) {
        int32_t sumi = 0;
        for (int l = 2 * h; l < 2 * h + 2; ++l, q8 += 8) {
          const uint16_t q = x[i].qs[4 * ib32 + l];
          sumi += group8(iq2xs_grid[q & 511], ksigns_iq2xs[q >> 9], q8);
        }
        bsum += sumi * (2 * ((x[i].scales[ib32] >> 4 * h) & 0xf) + 1);
      }
    }
    sumf = std::fma(d, static_cast<float>(bsum), sumf);
  }
  return 0.125f * sumf;
}

float vec_dot_iq2_s_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_iq2_s*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d) * y[i].d;
    const int8_t* q8 = y[i].qs;
    const uint8_t* signs = x[i].qs + QK_K / 8;
    int32_t bsum = 0;
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      for (int h = 0; h < 2; ++h) {
        int32_t sumi = 0;
        for (int l = 2 * h; l < 2 * h + 2; ++l, q8 += 8)
          sumi += group8(iq2s_grid[iq2s_index(x[i], ib32, l)], signs[4 * ib32 + l], q8);
        bsum += sumi * (2 * ((x[i].scales[ib32] >> 4 * h) & 0xf) + 1);
      }
    }
    sumf = std::fma(d, static_cast<float>(bsum), sumf);
  }
  return 0.125f * sumf;
}

float vec_dot_iq3_xxs_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_iq3_xxs*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d) * y[i].d;
    const uint8_t* q3 = x[i].qs;
    const uint8_t* gas = x[i].qs + QK_K / 4;
    const int8_t* q8 = y[i].qs;
    int32_t bsum = 0;
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32, q3 += 8) {
      const uint32_t aux32 = load_u32(gas + 4 * ib32);
      int32_t sumi = 0;
      for (int l = 0; l < 4; ++l, q8 += 8)
        sumi += group8(grid_pair(iq3xxs_grid[q3[2 * l]], iq3xxs_grid[q3[2 * l + 1]]),
                       ksigns_iq2xs[(aux32 >> 7 * l) & 127], q8);
      bsum += sumi * static_cast<int32_t>(2 * (aux32 >> 28) + 1);
    }
    sumf = std::fma(d, static_cast<float>(bsum), sumf);
  }
  return 0.25f * sumf;
}

float vec_dot_iq3_s_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_iq3_s*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d) * y[i].d;
    const int8_t* q8 = y[i].qs;
    int32_t bsum = 0;
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
      int32_t sumi = 0;
      for (int l = 0; l < 4; ++l, q8 += 8)
        sumi += group8(grid_pair(iq3s_grid[iq3s_index(x[i], ib32, 2 * l)], iq3s_grid[iq3s_index(x[i], ib32, 2 * l + 1)]),
                       x[i].signs[4 * ib32 + l], q8);
      bsum += sumi * (2 * ((x[i].scales[ib32 / 2] >> 4 * (ib32 % 2)) & 0xf) + 1);
    }
    sumf = std::fma(d, static_cast<float>(bsum), sumf);
  }
  return sumf;
}

// sumi: the grid products times the 3-bit scales; sumi1: the activations'
// sums (IQ1_S: Q8_K's bsums, as ggml) times scale and shift sign.
float vec_dot_iq1_s_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_iq1_s*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const int8_t* q8 = y[i].qs;
    int32_t sumi = 0, sumi1 = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const int32_t ls = 2 * ((x[i].qh[ib] >> 12) & 7) + 1;
      const int32_t delta = x[i].qh[ib] & 0x8000 ? -1 : 1;
      int32_t lsum = 0;
      for (int l = 0; l < 4; ++l, q8 += 8) lsum += group8_signed(iq1s_grid[iq1s_index(x[i], ib, l)], q8);
      sumi += ls * lsum;
      sumi1 += ls * delta * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]);
    }
    const float d = fp16_to_fp32(x[i].d) * y[i].d;
    sumf = std::fma(d, std::fma(kIq1sDelta, static_cast<float>(sumi1), static_cast<float>(sumi)), sumf);
  }
  return sumf;
}

// As IQ1_S, per 16 values: sumi1 the grid products, sumi2 the activations'
// sums of each group of 8 times its shift sign, both times the scale of
// their 16.
float vec_dot_iq1_m_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_iq1_m*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const int8_t* q8 = y[i].qs;
    int32_t sumi1 = 0, sumi2 = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const uint8_t* qs = x[i].qs + 4 * ib;
      const uint8_t* qh = x[i].qh + 2 * ib;
      int32_t sum1[2] = {0, 0}, sum2[2] = {0, 0};
      for (int l = 0; l < 4; ++l, q8 += 8) {
        sum1[l / 2] += group8_signed(iq1s_grid[iq1m_index(qs, qh, l)], q8);
        int32_t lsum2 = 0;
        for (int j = 0; j < 8; ++j) lsum2 += q8[j];
        sum2[l / 2] += qh[l / 2] & (l % 2 ? 0x80 : 0x08) ? -lsum2 : lsum2;
      }
      const int32_t ls1 = iq1m_ls(x[i], ib, 0), ls2 = iq1m_ls(x[i], ib, 1);
      sumi1 += sum1[0] * ls1 + sum1[1] * ls2;
      sumi2 += sum2[0] * ls1 + sum2[1] * ls2;
    }
    const float d = iq1m_scale(x[i]) * y[i].d;
    sumf = std::fma(d, std::fma(kIq1mDelta, static_cast<float>(sumi2), static_cast<float>(sumi1)), sumf);
  }
  return sumf;
}

}  // namespace synapse::quant

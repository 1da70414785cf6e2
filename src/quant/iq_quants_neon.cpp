// NEON (ARMv8.2 dotprod) dots of the lattice formats (IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) with Q8_K activations, in the order
// of iq_quants.cpp's references: one exact integer per block, then
// sumf = fma(d, (float)sum, sumf). Per 32-value chunk the grid entries are
// gathered with scalar loads into two int8x16_t (values 0..15, 16..31) and
// SDOT gives the exact sums of each group of 4 products of int8 weights and
// activations (ggml's products, -128 included):
//   IQ2/IQ3  the magnitudes (<= 62) negated where the value's sign bit is set;
//   IQ1      the int8 grid (-1..1); IQ1_M's shift term an SDOT of +-1 per
//            group of 8 against the activations.
// The int32 lanes times the sub-block scales add up exactly (within 2^31),
// so their order is free. Tested bit-equal to the scalar kernels
// (tests/cross/neon_check.cpp under qemu, scripts/cross-arm64.sh).
#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "quant/formats.hpp"
#include "quant/iq_grids.hpp"
#include "quant/neon_util.hpp"
#include "quant/simd.hpp"

namespace synapse::quant::neon {
namespace {

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Two grid entries of 8 as one int8x16_t (entry 0 in lanes 0..7).
inline int8x16_t grid2(uint64_t g0, uint64_t g1) { return vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(g0), vcreate_u64(g1))); }

// Four IQ3 entries of 4 as one int8x16_t.
inline int8x16_t grid4x4(uint32_t g0, uint32_t g1, uint32_t g2, uint32_t g3) {
  return grid2(g0 | static_cast<uint64_t>(g1) << 32, g2 | static_cast<uint64_t>(g3) << 32);
}

// Sign bytes b0 (values 0..7), b1 (8..15) -> a mask of 0xFF where the bit is set.
inline uint8x16_t sign_mask(uint8_t b0, uint8_t b1) {
  static const uint8_t kBits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  return vtstq_u8(vcombine_u8(vdup_n_u8(b0), vdup_n_u8(b1)), vld1q_u8(kBits));
}

// The 4 sign bytes of a word of four 7-bit ksigns_iq2xs indices.
inline uint32_t ksigns4(uint32_t w) {
  return ksigns_iq2xs[w & 127] | static_cast<uint32_t>(ksigns_iq2xs[(w >> 7) & 127]) << 8 |
         static_cast<uint32_t>(ksigns_iq2xs[(w >> 14) & 127]) << 16 |
         static_cast<uint32_t>(ksigns_iq2xs[(w >> 21) & 127]) << 24;
}

// One 32-value chunk of an IQ2/IQ3 block: magnitudes of values 0..15 and
// 16..31, their 32 sign bits, the scales of the two halves.
struct Chunk {
  int8x16_t q0, q1;
  uint32_t signs;
  int32_t s0, s1;
};

// sum over the chunk of scale * signed value * activation.
inline int32x4_t chunk_lanes(int32x4_t acc, const Chunk& c, const int8_t* a) {
  const uint8x16_t m0 = sign_mask(static_cast<uint8_t>(c.signs), static_cast<uint8_t>(c.signs >> 8));
  const uint8x16_t m1 = sign_mask(static_cast<uint8_t>(c.signs >> 16), static_cast<uint8_t>(c.signs >> 24));
  const int8x16_t w0 = vbslq_s8(m0, vnegq_s8(c.q0), c.q0), w1 = vbslq_s8(m1, vnegq_s8(c.q1), c.q1);
  acc = vmlaq_n_s32(acc, dot4(w0, vld1q_s8(a)), c.s0);
  return vmlaq_n_s32(acc, dot4(w1, vld1q_s8(a + 16)), c.s1);
}

Chunk iq2_xxs_chunk(const block_iq2_xxs& b, int ib32) {
  const uint32_t idx = load_u32(b.qs + 4 * ib32), sgn = load_u32(b.qs + 4 * ib32 + 2);
  const int32_t ls = static_cast<int32_t>(2 * (sgn >> 28) + 1);
  return {grid2(iq2xxs_grid[idx & 255], iq2xxs_grid[(idx >> 8) & 255]),
          grid2(iq2xxs_grid[(idx >> 16) & 255], iq2xxs_grid[idx >> 24]), ksigns4(sgn), ls, ls};
}

Chunk iq2_xs_chunk(const block_iq2_xs& b, int ib32) {
  const uint16_t* q = b.qs + 4 * ib32;
  const uint32_t signs = ksigns_iq2xs[q[0] >> 9] | static_cast<uint32_t>(ksigns_iq2xs[q[1] >> 9]) << 8 |
                         static_cast<uint32_t>(ksigns_iq2xs[q[2] >> 9]) << 16 |
                         static_cast<uint32_t>(ksigns_iq2xs[q[3] >> 9]) << 24;
  return {grid2(iq2xs_grid[q[0] & 511], iq2xs_grid[q[1] & 511]), grid2(iq2xs_grid[q[2] & 511], iq2xs_grid[q[3] & 511]),
          signs, 2 * (b.scales[ib32] & 0xf) + 1, 2 * (b.scales[ib32] >> 4) + 1};
}

Chunk iq2_s_chunk(const block_iq2_s& b, int ib32) {
  const uint8_t* qs = b.qs + 4 * ib32;
  const uint32_t qh = b.qh[ib32];
  return {grid2(iq2s_grid[qs[0] | ((qh << 8) & 0x300)], iq2s_grid[qs[1] | ((qh << 6) & 0x300)]),
          grid2(iq2s_grid[qs[2] | ((qh << 4) & 0x300)], iq2s_grid[qs[3] | ((qh << 2) & 0x300)]),
          load_u32(b.qs + QK_K / 8 + 4 * ib32), 2 * (b.scales[ib32] & 0xf) + 1, 2 * (b.scales[ib32] >> 4) + 1};
}

Chunk iq3_xxs_chunk(const block_iq3_xxs& b, int ib32) {
  const uint8_t* q3 = b.qs + 8 * ib32;
  const uint32_t sgn = load_u32(b.qs + QK_K / 4 + 4 * ib32);
  const int32_t ls = static_cast<int32_t>(2 * (sgn >> 28) + 1);
  return {grid4x4(iq3xxs_grid[q3[0]], iq3xxs_grid[q3[1]], iq3xxs_grid[q3[2]], iq3xxs_grid[q3[3]]),
          grid4x4(iq3xxs_grid[q3[4]], iq3xxs_grid[q3[5]], iq3xxs_grid[q3[6]], iq3xxs_grid[q3[7]]), ksigns4(sgn), ls, ls};
}

Chunk iq3_s_chunk(const block_iq3_s& b, int ib32) {
  const uint8_t* qs = b.qs + 8 * ib32;
  const uint32_t qh = b.qh[ib32];
  const auto g = [&](int k) { return iq3s_grid[qs[k] | ((qh << (8 - k)) & 256)]; };
  const int32_t ls = 2 * ((b.scales[ib32 / 2] >> 4 * (ib32 % 2)) & 0xf) + 1;
  return {grid4x4(g(0), g(1), g(2), g(3)), grid4x4(g(4), g(5), g(6), g(7)), load_u32(b.signs + 4 * ib32), ls, ls};
}

// IQ2/IQ3: the block's exact sum, then the reference's fma; out = 1/8, 1/4 or 1.
template <typename B, Chunk (*ChunkOf)(const B&, int)>
float signed_grid_dot(int64_t n, const void* vw, const void* va, float out) {
  const auto* x = static_cast<const B*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int32x4_t acc = vdupq_n_s32(0);
    for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) acc = chunk_lanes(acc, ChunkOf(x[i], ib32), y[i].qs + 32 * ib32);
    const float d = h2f(x[i].d) * y[i].d;
    sumf = std::fma(d, static_cast<float>(vaddvq_s32(acc)), sumf);
  }
  return out * sumf;
}

}  // namespace

float vec_dot_iq2_xxs_q8_K(int64_t n, const void* w, const void* a) {
  return signed_grid_dot<block_iq2_xxs, iq2_xxs_chunk>(n, w, a, 0.125f);
}
float vec_dot_iq2_xs_q8_K(int64_t n, const void* w, const void* a) {
  return signed_grid_dot<block_iq2_xs, iq2_xs_chunk>(n, w, a, 0.125f);
}
float vec_dot_iq2_s_q8_K(int64_t n, const void* w, const void* a) {
  return signed_grid_dot<block_iq2_s, iq2_s_chunk>(n, w, a, 0.125f);
}
float vec_dot_iq3_xxs_q8_K(int64_t n, const void* w, const void* a) {
  return signed_grid_dot<block_iq3_xxs, iq3_xxs_chunk>(n, w, a, 0.25f);
}
float vec_dot_iq3_s_q8_K(int64_t n, const void* w, const void* a) {
  return signed_grid_dot<block_iq3_s, iq3_s_chunk>(n, w, a, 1.0f);
}

// IQ1_S: sumi = sum ls * (grid . a), sumi1 = sum ls * delta * (bsums pair);
// fma(fp16(d) * a.d, fma(1/8, sumi1, sumi), sumf).
float vec_dot_iq1_s_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_iq1_s*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int32x4_t acc = vdupq_n_s32(0);
    int32_t sumi1 = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const uint32_t qh = x[i].qh[ib];
      const uint8_t* qs = x[i].qs + 4 * ib;
      const int32_t ls = static_cast<int32_t>(2 * ((qh >> 12) & 7) + 1);
      const int8x16_t g0 = grid2(iq1s_grid[qs[0] | ((qh << 8) & 0x700)], iq1s_grid[qs[1] | ((qh << 5) & 0x700)]);
      const int8x16_t g1 = grid2(iq1s_grid[qs[2] | ((qh << 2) & 0x700)], iq1s_grid[qs[3] | ((qh >> 1) & 0x700)]);
      const int8_t* a = y[i].qs + 32 * ib;
      acc = vmlaq_n_s32(acc, vaddq_s32(dot4(g0, vld1q_s8(a)), dot4(g1, vld1q_s8(a + 16))), ls);
      sumi1 += ls * (qh & 0x8000 ? -1 : 1) * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]);
    }
    const float d = h2f(x[i].d) * y[i].d;
    sumf = std::fma(d, std::fma(kIq1sDelta, static_cast<float>(sumi1), static_cast<float>(vaddvq_s32(acc))), sumf);
  }
  return sumf;
}

// IQ1_M: per 16 values scale ls; sumi1 = sum ls * (grid . a), sumi2 = sum
// ls * (+-1 per group of 8 . a).
float vec_dot_iq1_m_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_iq1_m*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    uint16_t sc[4];
    std::memcpy(sc, x[i].scales, sizeof sc);
    int32x4_t acc1 = vdupq_n_s32(0), acc2 = vdupq_n_s32(0);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const uint8_t* qs = x[i].qs + 4 * ib;
      const uint32_t qh0 = x[i].qh[2 * ib], qh1 = x[i].qh[2 * ib + 1];
      const int8x16_t g0 = grid2(iq1s_grid[qs[0] | ((qh0 << 8) & 0x700)], iq1s_grid[qs[1] | ((qh0 << 4) & 0x700)]);
      const int8x16_t g1 = grid2(iq1s_grid[qs[2] | ((qh1 << 8) & 0x700)], iq1s_grid[qs[3] | ((qh1 << 4) & 0x700)]);
      const auto delta = [](uint32_t bit) { return vdup_n_s8(static_cast<int8_t>(bit ? -1 : 1)); };
      const int8x16_t d0 = vcombine_s8(delta(qh0 & 0x08), delta(qh0 & 0x80));
      const int8x16_t d1 = vcombine_s8(delta(qh1 & 0x08), delta(qh1 & 0x80));
      const int w = sc[ib / 2] >> (6 * (ib % 2));
      const int32_t ls1 = 2 * (w & 7) + 1, ls2 = 2 * ((w >> 3) & 7) + 1;
      const int8x16_t a0 = vld1q_s8(y[i].qs + 32 * ib), a1 = vld1q_s8(y[i].qs + 32 * ib + 16);
      acc1 = vmlaq_n_s32(vmlaq_n_s32(acc1, dot4(g0, a0), ls1), dot4(g1, a1), ls2);
      acc2 = vmlaq_n_s32(vmlaq_n_s32(acc2, dot4(d0, a0), ls1), dot4(d1, a1), ls2);
    }
    const uint16_t h = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                             (sc[3] & 0xf000));
    const float d = h2f(h) * y[i].d;
    const float inner = std::fma(kIq1mDelta, static_cast<float>(vaddvq_s32(acc2)), static_cast<float>(vaddvq_s32(acc1)));
    sumf = std::fma(d, inner, sumf);
  }
  return sumf;
}

}  // namespace synapse::quant::neon
#elif defined(__aarch64__)
#error "the *_neon.cpp kernels need the dotprod extension: CMakeLists.txt builds them with -march=armv8.2-a+dotprod"
#endif

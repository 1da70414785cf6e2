// The quantizers of ggml's lattice formats, as llama-quantize runs them
// (ggml-quants.c, llama.cpp v0.5.0: quantize_row_iq3_xxs_impl,
// quantize_row_iq3_s_impl, ...): for each group of 32 (IQ3) or 16/32 (IQ2,
// IQ1) values a search over candidate scales, each value rounded to the
// nearest lattice level and a group off the grid moved to its best
// neighbour (iq_lattice.hpp), weighted by the importance matrix. The float
// operations are ggml's, in ggml's order (ggml-quants.c is built without
// FMA, as synapse builds this file), so the bytes are llama-quantize's.
//
// Importance weights: with an imatrix column c of the row, the weight of
// value x is c * sqrt(sigma2 + x^2) (sigma2 = mean x^2 over the block of 256,
// twice that for IQ3); without one x^2 (IQ3 and IQ1_M; ggml asserts one for
// IQ2_XXS, IQ2_XS and IQ1_S).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include "quant/formats.hpp"
#include "quant/fp16.hpp"
#include "quant/iq_lattice.hpp"
#include "quant/iq_quantize.hpp"
#include "quant/quant_search.hpp"
#include "synapse/error.hpp"

namespace synapse::quant {
namespace {

// ggml's iq2_find_best_neighbour / iq3_find_best_neighbour: among the
// neighbours of an off-grid group, the grid point with the least weighted
// squared error at `scale`; writes its levels to L and returns its index.
// G: the group size (8 or 4), a constant so the loop unrolls; the hot spot
// of these quantizers.
template <int G>
int find_best_neighbour_g(const Lattice& t, const uint16_t* neighbours, const float* xval, const float* weight,
                          float scale, int8_t* L) {
  const int num_neighbors = neighbours[0];
  float best_d2 = FLT_MAX;
  int grid_index = -1;
  for (int j = 1; j <= num_neighbors; ++j) {
    const float* pg = t.fpoint(neighbours[j]);
    float d2 = 0;
    for (int i = 0; i < G; ++i) {
      const float diff = scale * pg[i] - xval[i];
      d2 += weight[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      grid_index = neighbours[j];
    }
  }
  if (grid_index < 0) throw Error(Errc::format, "lattice quantizer: an off-grid point without neighbours");
  const int8_t* pg = t.point(grid_index);
  for (int i = 0; i < G; ++i) L[i] = static_cast<int8_t>((pg[i] - 1) / 2);
  return grid_index;
}

int find_best_neighbour(const Lattice& t, const uint16_t* neighbours, const float* xval, const float* weight,
                        float scale, int8_t* L) {
  return t.group == 8 ? find_best_neighbour_g<8>(t, neighbours, xval, weight, scale, L)
                      : find_best_neighbour_g<4>(t, neighbours, xval, weight, scale, L);
}

// The grid index of the levels L[0..group) (which must be on the grid).
int on_grid_index(const Lattice& t, const int8_t* L) {
  int u = 0;
  for (int i = 0; i < t.group; ++i) u |= L[i] << (t.bits * i);
  const int grid_index = t.map[static_cast<size_t>(u)];
  if (grid_index < 0) throw Error(Errc::format, "lattice quantizer: a point not on the grid");
  return grid_index;
}

// The importance weights of one sub-block (see the header comment).
void iq_weights(const float* xb, const float* qw, float sigma2, int n, float* weight) {
  if (qw != nullptr) {
    for (int i = 0; i < n; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
  } else {
    for (int i = 0; i < n; ++i) weight[i] = xb[i] * xb[i];
  }
}

// sigma2 of the importance weights: factor * mean x^2 over the block (ggml:
// factor 2 for IQ3, 1 for IQ2).
float block_sigma2(const float* xbl, float factor) {
  float sumx2 = 0;
  for (int i = 0; i < QK_K; ++i) sumx2 += xbl[i] * xbl[i];
  return factor * sumx2 / QK_K;
}

// The absolute values of one group of 8 and their sign bits, with even
// parity as IQ2_XXS, IQ2_XS and IQ3_XXS store it (7 bits, the 8th implied):
// an odd count of negatives flips the value of least weight * x^2 back.
uint8_t even_parity_signs(const float* xb, const float* weight, float* xval) {
  int nflip = 0;
  uint8_t s = 0;
  for (int i = 0; i < 8; ++i) {
    if (xb[i] >= 0) {
      xval[i] = xb[i];
    } else {
      xval[i] = -xb[i];
      ++nflip;
      s = static_cast<uint8_t>(s | (1 << i));
    }
  }
  if (nflip % 2) {
    int imin = 0;
    float min = weight[imin] * xb[imin] * xb[imin];
    for (int i = 1; i < 8; ++i) {
      const float ax = weight[i] * xb[i] * xb[i];
      if (ax < min) {
        min = ax;
        imin = i;
      }
    }
    xval[imin] = -xval[imin];
    s = static_cast<uint8_t>(s ^ (1 << imin));
  }
  return s & 127;
}

// The absolute values of one group of 8 and their sign bits (IQ3_S, IQ2_S).
uint8_t plain_signs(const float* xb, float* xval) {
  uint8_t s = 0;
  for (int i = 0; i < 8; ++i) {
    if (xb[i] >= 0) {
      xval[i] = xb[i];
    } else {
      xval[i] = -xb[i];
      s = static_cast<uint8_t>(s | (1 << i));
    }
  }
  return s;
}

// Rounds the absolute values of one group to levels 0..kmax-1 at inverse
// scale id (l = round((id * x - 1) / 2): the grid values are 2l + 1) and
// returns the packed map index.
int round_group(const Lattice& t, const float* xval, float id, int kmax, int8_t* L) {
  int u = 0;
  for (int i = 0; i < t.group; ++i) {
    const int l = nearest_int(0.5f * (id * xval[i] - 1));
    L[i] = static_cast<int8_t>(std::max(0, std::min(kmax - 1, l)));
    u |= L[i] << (t.bits * i);
  }
  return u;
}

// The weighted fit of levels L to xval: sum w x q and sum w q^2, q = 2l + 1.
void fit_sums(int bs, const float* weight, const float* xval, const int8_t* L, float& sumqx, float& sumq2) {
  sumqx = 0;
  sumq2 = 0;
  for (int i = 0; i < bs; ++i) {
    const float w = weight[i];
    const float q = 2 * L[i] + 1;
    sumqx += w * xval[i] * q;
    sumq2 += w * q * q;
  }
}

// The scale search of IQ2_XS, IQ3_XXS and IQ3_S for one sub-block of `bs`
// absolute values xval (groups of t.group), levels 0..kmax-1: tries the
// scales max / (2 kmax - 1 + is * step) for is in [-n_is, n_is], keeps the
// best weighted fit, then re-rounds at that scale the groups that needed a
// neighbour (every group for IQ3_S: refit_all) and refits the scale.
// Returns the scale; L gets the levels.
float lattice_search(const Lattice& t, int bs, int kmax, int n_is, float step, bool refit_all, const float* xval,
                     const float* weight, const float* waux, float max, int8_t* L) {
  int8_t Laux[32];
  bool is_on_grid[8], is_on_grid_aux[8];
  const int ng = bs / t.group;
  float best = 0;
  float scale = max / (2 * kmax - 1);
  // ggml starts IQ2_XS and IQ3_XXS with every group on the grid, IQ3_S with
  // none (which decides whether a sub-block no candidate improves is refit).
  for (int k = 0; k < ng; ++k) is_on_grid[k] = !refit_all;
  for (int is = -n_is; is <= n_is; ++is) {
    const float id = (2 * kmax - 1 + is * step) / max;
    const float this_scale = 1 / id;
    for (int k = 0; k < ng; ++k) {
      const int u = round_group(t, xval + t.group * k, id, kmax, Laux + t.group * k);
      is_on_grid_aux[k] = t.map[static_cast<size_t>(u)] >= 0;
      if (!is_on_grid_aux[k])
        find_best_neighbour(t, t.neighbours_of(u), xval + t.group * k, waux + t.group * k, this_scale,
                            Laux + t.group * k);
    }
    float sumqx, sumq2;
    fit_sums(bs, weight, xval, Laux, sumqx, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      for (int i = 0; i < bs; ++i) L[i] = Laux[i];
      for (int k = 0; k < ng; ++k) is_on_grid[k] = is_on_grid_aux[k];
    }
  }
  int n_not_ongrid = 0;
  for (int k = 0; k < ng; ++k)
    if (!is_on_grid[k]) ++n_not_ongrid;
  if (n_not_ongrid > 0 && scale > 0) {
    const float id = 1 / scale;
    for (int k = 0; k < ng; ++k) {
      if (!refit_all && is_on_grid[k]) continue;
      const int u = round_group(t, xval + t.group * k, id, kmax, L + t.group * k);
      if (t.map[static_cast<size_t>(u)] < 0)
        find_best_neighbour(t, t.neighbours_of(u), xval + t.group * k, waux + t.group * k, scale, L + t.group * k);
    }
    float sumqx, sumq2;
    fit_sums(bs, weight, xval, L, sumqx, sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  return scale;
}

// The 4-bit sub-block scale of ggml's lattice formats: round((s/d - 1)/2),
// clamped to [0, 15].
int scale_nibble(float id, float s) {
  const int l = nearest_int(0.5f * (id * s - 1));
  return std::max(0, std::min(15, l));
}

// Two 4-bit scales a byte, the even sub-block in the low nibble (IQ2_XS,
// IQ2_S, IQ3_S): n scales to n / 2 bytes.
void pack_scale_nibbles(float id, const float* scales, int n, uint8_t* out) {
  for (int ib = 0; ib < n; ib += 2)
    out[ib / 2] = static_cast<uint8_t>(scale_nibble(id, scales[ib]) | (scale_nibble(id, scales[ib + 1]) << 4));
}

// The start of every IQ2/IQ3 sub-block of n values: the weights' square
// roots (waux), the absolute values (xval) and a sign byte per 8 (with even
// parity, or plain), and the largest absolute value, which it returns.
float sub_block_signs(const float* xb, const float* weight, int n, bool even_parity, float* waux, float* xval,
                      uint8_t* signs) {
  for (int i = 0; i < n; ++i) waux[i] = std::sqrt(weight[i]);
  for (int k = 0; k < n / 8; ++k)
    signs[k] = even_parity ? even_parity_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k)
                           : plain_signs(xb + 8 * k, xval + 8 * k);
  float max = xval[0];
  for (int i = 1; i < n; ++i) max = std::max(max, xval[i]);
  return max;
}

// quantize_row_iq3_xxs_impl(256, ...): per 32 values 8 grid indices, 4 x 7
// sign bits (the 8th sign of each 8 implied by even parity: an odd count
// flips the value of least weight), a 4-bit scale.
void quantize_iq3_xxs_row(const float* x, void* vy, int64_t n, const float* quant_weights) {
  constexpr float kGroupMaxEps = 1e-8f;  // GROUP_MAX_EPS_IQ3_XXS
  const Lattice& t = lattice(LatticeId::iq3xxs);
  auto* y = static_cast<block_iq3_xxs*>(vy);
  float scales[QK_K / 32], weight[32], xval[32], waux[32];
  int8_t L[32];
  uint8_t block_signs[4];
  uint8_t q3[3 * (QK_K / 8) + QK_K / 32];
  uint8_t* qh_signs = q3 + QK_K / 4;  // one uint32 of signs and scale per 32
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    y[ibl].d = fp32_to_fp16(0.f);
    std::memset(q3, 0, sizeof(q3));
    uint32_t scales_and_signs[QK_K / 32] = {};
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = block_sigma2(xbl, 2);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const float* xb = xbl + 32 * ib;
      iq_weights(xb, quant_weights ? quant_weights + QK_K * ibl + 32 * ib : nullptr, sigma2, 32, weight);
      const float max = sub_block_signs(xb, weight, 32, true, waux, xval, block_signs);
      std::memset(L, 0, sizeof(L));
      if (max < kGroupMaxEps) {
        scales[ib] = 0;
        continue;
      }
      float scale = lattice_search(t, 32, 8, 15, 0.2f, false, xval, weight, waux, max, L);
      if (scale < 0) {  // ggml: "should never happen"; flips the scale and the signs
        scale = -scale;
        for (int k = 0; k < 4; ++k) block_signs[k] = static_cast<uint8_t>(~block_signs[k] & 127);
      }
      for (int k = 0; k < 8; ++k) q3[8 * ib + k] = static_cast<uint8_t>(on_grid_index(t, L + 4 * k));
      scales_and_signs[ib] = block_signs[0] | (block_signs[1] << 7) | (block_signs[2] << 14) |
                             (static_cast<uint32_t>(block_signs[3]) << 21);
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0) {
      std::memset(y[ibl].qs, 0, sizeof(y[ibl].qs));
      continue;
    }
    const float d = max_scale / 31;
    y[ibl].d = fp32_to_fp16(d * 1.0125f);  // ggml's fudge factor
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 32; ++ib) scales_and_signs[ib] |= static_cast<uint32_t>(scale_nibble(id, scales[ib])) << 28;
    std::memcpy(qh_signs, scales_and_signs, sizeof(scales_and_signs));
    std::memcpy(y[ibl].qs, q3, sizeof(y[ibl].qs));
  }
}

// quantize_row_iq3_s_impl(32, ...): per 32 values 8 9-bit grid indices, 32
// explicit sign bits, a 4-bit scale (two per byte).
void quantize_iq3_s_row(const float* x, void* vy, int64_t n, const float* quant_weights) {
  constexpr int bs = 32, bs4 = bs / 4, bs8 = bs / 8;  // IQ3S_BLOCK_SIZE
  const Lattice& t = lattice(LatticeId::iq3s);
  auto* y = static_cast<block_iq3_s*>(vy);
  float scales[QK_K / bs], weight[bs], xval[bs], waux[bs];
  int8_t L[bs];
  uint8_t block_signs[bs8];
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    std::memset(&y[ibl], 0, sizeof(block_iq3_s));
    y[ibl].d = fp32_to_fp16(0.f);
    uint8_t* qs = y[ibl].qs;
    uint8_t* qh = y[ibl].qh;
    uint8_t* signs = y[ibl].signs;
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = block_sigma2(xbl, 2);
    for (int ib = 0; ib < QK_K / bs; ++ib) {
      const float* xb = xbl + bs * ib;
      iq_weights(xb, quant_weights ? quant_weights + QK_K * ibl + bs * ib : nullptr, sigma2, bs, weight);
      const float max = sub_block_signs(xb, weight, bs, false, waux, xval, block_signs);
      std::memset(L, 0, sizeof(L));
      if (max == 0) {
        // ggml leaves qs and signs where they are here, so the next
        // sub-blocks' indices and signs land one sub-block early; kept.
        scales[ib] = 0;
        continue;
      }
      float scale = lattice_search(t, bs, 8, 9, 0.2f, true, xval, weight, waux, max, L);
      if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < bs8; ++k) block_signs[k] = static_cast<uint8_t>(~block_signs[k]);
      }
      for (int k = 0; k < bs4; ++k) {
        const int grid_index = on_grid_index(t, L + 4 * k);
        qs[k] = static_cast<uint8_t>(grid_index & 255);
        qh[(ib * bs4 + k) / 8] = static_cast<uint8_t>(qh[(ib * bs4 + k) / 8] | ((grid_index >> 8) << ((ib * bs4 + k) % 8)));
      }
      qs += bs4;
      for (int k = 0; k < bs8; ++k) signs[k] = block_signs[k];
      signs += bs8;
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0) continue;
    const float d = max_scale / 31;
    y[ibl].d = fp32_to_fp16(d * 1.033f);
    const float id = 1 / d;
    pack_scale_nibbles(id, scales, QK_K / bs, y[ibl].scales);
  }
}

// quantize_row_iq2_xxs_impl: per 32 values 4 8-bit indices into iq2xxs_grid
// (groups of 8), 4 x 7 even-parity sign bits and a 4-bit scale in two
// uint32. The start scale is make_qp_quants'; every group is re-rounded at
// the best scale.
void quantize_iq2_xxs_row(const float* x, void* vy, int64_t n, const float* quant_weights) {
  constexpr float kGroupMaxEps = 1e-15f;  // GROUP_MAX_EPS
  constexpr int kMaxQ = 3;
  const Lattice& t = lattice(LatticeId::iq2xxs);
  auto* y = static_cast<block_iq2_xxs*>(vy);
  float scales[QK_K / 32], weight[32], xval[32], waux[32];
  int8_t L[32], Laux[32];
  uint8_t block_signs[4];
  uint32_t q2[2 * (QK_K / 32)];
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    y[ibl].d = fp32_to_fp16(0.f);
    std::memset(q2, 0, sizeof(q2));
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = block_sigma2(xbl, 1);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const float* xb = xbl + 32 * ib;
      iq_weights(xb, quant_weights + QK_K * ibl + 32 * ib, sigma2, 32, weight);
      const float max = sub_block_signs(xb, weight, 32, true, waux, xval, block_signs);
      if (max < kGroupMaxEps) {
        scales[ib] = 0;
        std::memset(L, 0, sizeof(L));
        continue;
      }
      float scale = make_qp_quants(32, kMaxQ + 1, xval, reinterpret_cast<uint8_t*>(L), weight);
      const float eff_max = scale * kMaxQ;
      if (eff_max <= 0) {
        scales[ib] = 0;
        std::memset(L, 0, sizeof(L));
        continue;
      }
      float best = 0;
      for (int is = -6; is <= 6; ++is) {
        const float id = (2 * kMaxQ - 1 + is * 0.1f) / eff_max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 4; ++k) {
          const int u = round_group(t, xval + 8 * k, id, kMaxQ, Laux + 8 * k);
          if (t.map[static_cast<size_t>(u)] < 0)
            find_best_neighbour(t, t.neighbours_of(u), xval + 8 * k, waux + 8 * k, this_scale, Laux + 8 * k);
        }
        float sumqx, sumq2;
        fit_sums(32, weight, xval, Laux, sumqx, sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          std::memcpy(L, Laux, 32);
        }
      }
      if (scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 4; ++k) {
          const int u = round_group(t, xval + 8 * k, id, kMaxQ, L + 8 * k);
          if (t.map[static_cast<size_t>(u)] < 0)
            find_best_neighbour(t, t.neighbours_of(u), xval + 8 * k, waux + 8 * k, scale, L + 8 * k);
        }
        float sumqx, sumq2;
        fit_sums(32, weight, xval, L, sumqx, sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
      }
      if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 4; ++k) block_signs[k] = static_cast<uint8_t>(~block_signs[k] & 127);
      }
      for (int k = 0; k < 4; ++k) {
        q2[2 * ib + 0] |= static_cast<uint32_t>(on_grid_index(t, L + 8 * k)) << (8 * k);
        q2[2 * ib + 1] |= static_cast<uint32_t>(block_signs[k]) << (7 * k);
      }
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0) {
      std::memset(y[ibl].qs, 0, sizeof(y[ibl].qs));
      continue;
    }
    const float d = max_scale / 31;
    y[ibl].d = fp32_to_fp16(d);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 32; ++ib) q2[2 * ib + 1] |= static_cast<uint32_t>(scale_nibble(id, scales[ib])) << 28;
    std::memcpy(y[ibl].qs, q2, sizeof(y[ibl].qs));
  }
}

// One sub-block of 16 of IQ2_XS and IQ2_S: the signs (sub_block_signs),
// the scale search, and a negative best scale turned into flipped signs
// (sign_mask: the bits a sign byte stores). False for a sub-block whose
// largest value is below eps (then nothing is written).
bool iq2_sub_block16(const Lattice& t, const float* xb, const float* weight, bool even_parity, uint8_t sign_mask,
                     float eps, float* scale, int8_t* L, uint8_t* block_signs) {
  float xval[16], waux[16];
  const float max = sub_block_signs(xb, weight, 16, even_parity, waux, xval, block_signs);
  std::memset(L, 0, 16);
  if (max < eps) return false;
  *scale = lattice_search(t, 16, 3, 9, 0.1f, false, xval, weight, waux, max, L);
  if (*scale < 0) {
    *scale = -*scale;
    for (int k = 0; k < 2; ++k) block_signs[k] = static_cast<uint8_t>(~block_signs[k] & sign_mask);
  }
  return true;
}

// quantize_row_iq2_xs_impl: per 16 values two 9-bit indices into iq2xs_grid
// with 7 even-parity sign bits each (uint16), a 4-bit scale per 16.
void quantize_iq2_xs_row(const float* x, void* vy, int64_t n, const float* quant_weights) {
  constexpr float kGroupMaxEps = 1e-15f;  // GROUP_MAX_EPS
  const Lattice& t = lattice(LatticeId::iq2xs);
  auto* y = static_cast<block_iq2_xs*>(vy);
  float scales[QK_K / 16], weight[16];
  int8_t L[16];
  uint8_t block_signs[2];
  uint16_t q2[2 * (QK_K / 16)];
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    y[ibl].d = fp32_to_fp16(0.f);
    std::memset(q2, 0, sizeof(q2));
    std::memset(y[ibl].scales, 0, sizeof(y[ibl].scales));
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = block_sigma2(xbl, 1);
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      const float* xb = xbl + 16 * ib;
      iq_weights(xb, quant_weights + QK_K * ibl + 16 * ib, sigma2, 16, weight);
      float scale = 0;
      if (!iq2_sub_block16(t, xb, weight, true, 127, kGroupMaxEps, &scale, L, block_signs)) {
        scales[ib] = 0;
        continue;
      }
      for (int k = 0; k < 2; ++k)
        q2[2 * ib + k] = static_cast<uint16_t>(on_grid_index(t, L + 8 * k) | (block_signs[k] << 9));
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0) {
      std::memset(y[ibl].qs, 0, sizeof(y[ibl].qs));
      continue;
    }
    const float d = max_scale / 31;
    y[ibl].d = fp32_to_fp16(d);
    const float id = 1 / d;
    pack_scale_nibbles(id, scales, QK_K / 16, y[ibl].scales);
    std::memcpy(y[ibl].qs, q2, sizeof(y[ibl].qs));
  }
}

// quantize_row_iq2_s_impl: per 16 values two 10-bit indices into iq2s_grid
// (low 8 bits in qs, high 2 in qh), two explicit sign bytes, a 4-bit scale.
// Without an imatrix the weight is sigma2 / 4 + x^2.
void quantize_iq2_s_row(const float* x, void* vy, int64_t n, const float* quant_weights) {
  constexpr float kGroupMaxEps = 1e-8f;  // GROUP_MAX_EPS_IQ2_S
  const Lattice& t = lattice(LatticeId::iq2s);
  auto* y = static_cast<block_iq2_s*>(vy);
  float scales[QK_K / 16], weight[16];
  int8_t L[16];
  uint8_t block_signs[2];
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    std::memset(&y[ibl], 0, sizeof(block_iq2_s));
    y[ibl].d = fp32_to_fp16(0.f);
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = block_sigma2(xbl, 2);
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      const float* xb = xbl + 16 * ib;
      if (quant_weights != nullptr) {
        iq_weights(xb, quant_weights + QK_K * ibl + 16 * ib, sigma2, 16, weight);
      } else {
        for (int i = 0; i < 16; ++i) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
      }
      float scale = 0;
      if (!iq2_sub_block16(t, xb, weight, false, 255, kGroupMaxEps, &scale, L, block_signs)) {
        scales[ib] = 0;
        continue;
      }
      for (int k = 0; k < 2; ++k) {
        const int grid_index = on_grid_index(t, L + 8 * k);
        const int i8 = 2 * ib + k;
        y[ibl].qs[i8] = static_cast<uint8_t>(grid_index & 255);
        y[ibl].qh[i8 / 4] = static_cast<uint8_t>(y[ibl].qh[i8 / 4] | ((grid_index >> 8) << (2 * (i8 % 4))));
        y[ibl].qs[QK_K / 8 + i8] = block_signs[k];
      }
      scales[ib] = scale;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0) continue;
    const float d = max_scale / 31;
    y[ibl].d = fp32_to_fp16(d * 0.9875f);
    const float id = 1 / d;
    pack_scale_nibbles(id, scales, QK_K / 16, y[ibl].scales);
  }
}

// ggml's iq1_find_best_neighbour2: the neighbour of an off-grid IQ1 group
// whose values xg[level] * scale are nearest xval (weighted); writes its
// levels to L and returns its index. (ggml's fallback over the whole grid
// is never reached: every list has a neighbour and the inputs are finite.)
int iq1_find_best_neighbour(const Lattice& t, const uint16_t* neighbours, const float* xval, const float* weight,
                            float scale, const float* xg, int8_t* L) {
  const int num_neighbors = neighbours[0];
  float best_score = FLT_MAX;
  int grid_index = -1;
  for (int j = 1; j <= num_neighbors; ++j) {
    const int8_t* pg = t.point(neighbours[j]);
    float d2 = 0;
    for (int i = 0; i < 8; ++i) {
      const float q = xg[(pg[i] - 1) / 2];
      const float w = weight[i];
      const float diff = scale * q - xval[i];
      d2 += w * diff * diff;
    }
    if (d2 < best_score) {
      best_score = d2;
      grid_index = neighbours[j];
    }
  }
  if (grid_index < 0) throw Error(Errc::format, "IQ1 quantizer: no neighbour fits");
  const int8_t* pg = t.point(grid_index);
  for (int i = 0; i < 8; ++i) L[i] = static_cast<int8_t>((pg[i] - 1) / 2);
  return grid_index;
}

// The indices 0..n-1 ordered by xb ascending (ggml: qsort of (value, index)
// pairs with iq1_sort_helper, which compares the values only; a stable sort
// here, ggml's order for values that differ).
void sort_by_value(const float* xb, int n, int* idx) {
  for (int j = 0; j < n; ++j) idx[j] = j;
  std::stable_sort(idx, idx + n, [xb](int a, int b) { return xb[a] < xb[b]; });
}

constexpr float kIq1Delta = 0.125f;  // IQ1S_DELTA, IQ1M_DELTA

// quantize_row_iq1_s_impl: per 32 values 4 11-bit indices into iq1s_grid
// (values -1, 0, 1), a 3-bit scale and the sign of a +-1/8 shift. The
// levels come from an exhaustive search of the two split points of the
// sorted values, for both shifts.
void quantize_iq1_s_row(const float* x, void* vy, int64_t n, const float* quant_weights) {
  constexpr float kGroupMaxEps = 1e-12f;  // GROUP_MAX_EPS_IQ1_S
  constexpr int bs = 32;                  // IQ1S_BLOCK_SIZE
  const Lattice& t = lattice(LatticeId::iq1s);
  auto* y = static_cast<block_iq1_s*>(vy);
  const float x_p[3] = {-1 + kIq1Delta, kIq1Delta, 1 + kIq1Delta};
  const float x_m[3] = {-1 - kIq1Delta, -kIq1Delta, 1 - kIq1Delta};
  float scales[QK_K / bs], weight[bs], sumx[bs + 1], sumw[bs + 1];
  int8_t L[bs], shifts[QK_K / bs];
  int idx[bs];
  uint16_t index[bs / 8];
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    y[ibl].d = fp32_to_fp16(0.f);
    std::memset(y[ibl].qs, 0, sizeof(y[ibl].qs));
    std::memset(y[ibl].qh, 0, sizeof(y[ibl].qh));
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = block_sigma2(xbl, 2);
    for (int ib = 0; ib < QK_K / bs; ++ib) {
      const float* xb = xbl + bs * ib;
      iq_weights(xb, quant_weights + QK_K * ibl + bs * ib, sigma2, bs, weight);
      float max = std::fabs(xb[0]);
      for (int i = 1; i < bs; ++i) max = std::max(max, std::fabs(xb[i]));
      if (max < kGroupMaxEps) {
        scales[ib] = 0;
        shifts[ib] = 1;
        std::memset(L, 1, sizeof(L));
        continue;
      }
      sort_by_value(xb, bs, idx);
      sumx[0] = sumw[0] = 0;
      for (int j = 0; j < bs; ++j) {
        const int i = idx[j];
        sumx[j + 1] = sumx[j] + weight[i] * xb[i];
        sumw[j + 1] = sumw[j] + weight[i];
      }
      float best_score = -FLT_MAX, scale = max;
      int besti1 = -1, besti2 = -1, best_shift = 0;
      for (int i1 = 0; i1 <= bs; ++i1) {
        for (int i2 = i1; i2 <= bs; ++i2) {
          float sumqx = (sumx[i1] - sumx[0]) * x_p[0] + (sumx[i2] - sumx[i1]) * x_p[1] + (sumx[bs] - sumx[i2]) * x_p[2];
          float sumq2 = (sumw[i1] - sumw[0]) * x_p[0] * x_p[0] + (sumw[i2] - sumw[i1]) * x_p[1] * x_p[1] +
                        (sumw[bs] - sumw[i2]) * x_p[2] * x_p[2];
          if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
            scale = sumqx / sumq2;
            best_score = scale * sumqx;
            besti1 = i1, besti2 = i2, best_shift = 1;
          }
          sumqx = (sumx[i1] - sumx[0]) * x_m[0] + (sumx[i2] - sumx[i1]) * x_m[1] + (sumx[bs] - sumx[i2]) * x_m[2];
          sumq2 = (sumw[i1] - sumw[0]) * x_m[0] * x_m[0] + (sumw[i2] - sumw[i1]) * x_m[1] * x_m[1] +
                  (sumw[bs] - sumw[i2]) * x_m[2] * x_m[2];
          if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
            scale = sumqx / sumq2;
            best_score = scale * sumqx;
            besti1 = i1, besti2 = i2, best_shift = -1;
          }
        }
      }
      if (besti1 < 0 || besti2 < 0 || best_shift == 0) {
        scales[ib] = 0;
        shifts[ib] = 1;
        std::memset(L, 1, sizeof(L));
        continue;
      }
      for (int j = 0; j < besti1; ++j) L[idx[j]] = 0;
      for (int j = besti1; j < besti2; ++j) L[idx[j]] = 1;
      for (int j = besti2; j < bs; ++j) L[idx[j]] = 2;
      if (scale < 0) {
        for (int j = 0; j < bs; ++j) L[j] = static_cast<int8_t>(2 - L[j]);
        scale = -scale;
        best_shift = -best_shift;
      }
      bool all_on_grid = true;
      const float* xx = best_shift == 1 ? x_p : x_m;
      for (int k = 0; k < bs / 8; ++k) {
        int u = 0;
        for (int j = 0; j < 8; ++j) u |= L[8 * k + j] << (2 * j);
        int grid_index = t.map[static_cast<size_t>(u)];
        if (grid_index < 0) {
          all_on_grid = false;
          grid_index = iq1_find_best_neighbour(t, t.neighbours_of(u), xb + 8 * k, weight + 8 * k, scale, xx, L + 8 * k);
        }
        index[k] = static_cast<uint16_t>(grid_index);
      }
      if (!all_on_grid) {
        float sumqx = 0, sumq2 = 0;
        for (int k = 0; k < bs / 8; ++k) {
          const int8_t* pg = t.point(index[k]);
          for (int j = 0; j < 8; ++j) {
            const float w = weight[8 * k + j];
            const float q = xx[(pg[j] - 1) / 2];
            sumqx += w * q * xb[8 * k + j];
            sumq2 += w * q * q;
          }
        }
        if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
      }
      uint16_t h = 0;
      for (int k = 0; k < bs / 8; ++k) {
        y[ibl].qs[(bs / 8) * ib + k] = static_cast<uint8_t>(index[k] & 255);
        h = static_cast<uint16_t>(h | ((index[k] >> 8) << (3 * k)));
      }
      y[ibl].qh[ib] = h;
      scales[ib] = scale;
      shifts[ib] = static_cast<int8_t>(best_shift);
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0) continue;
    const float d = max_scale / 15;
    y[ibl].d = fp32_to_fp16(d * 1.125f);  // ggml's fudge factor
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / bs; ++ib) {
      int l = nearest_int(0.5f * (id * scales[ib] - 1));
      l = std::max(0, std::min(7, l));
      if (shifts[ib] == -1) l |= 8;
      y[ibl].qh[ib] = static_cast<uint16_t>(y[ibl].qh[ib] | (l << 12));
    }
  }
}

// quantize_row_iq1_m_impl: per 16 values 2 11-bit indices into iq1s_grid,
// a shift sign per 8, a 3-bit scale per 16 and the block's F16 scale
// spread over the scale words' top nibbles. The split search takes each
// half's shift separately (4 sign combinations).
void quantize_iq1_m_row(const float* x, void* vy, int64_t n, const float* quant_weights) {
  constexpr float kGroupMaxEps = 1e-7f;  // GROUP_MAX_EPS_IQ1_M
  constexpr int bs = 16;                 // IQ1M_BLOCK_SIZE
  const Lattice& t = lattice(LatticeId::iq1s);
  auto* y = static_cast<block_iq1_m*>(vy);
  const float x_p[3] = {-1 + kIq1Delta, kIq1Delta, 1 + kIq1Delta};
  const float x_m[3] = {-1 - kIq1Delta, -kIq1Delta, 1 - kIq1Delta};
  const uint8_t masks[4] = {0x00, 0x80, 0x08, 0x88};
  float scales[QK_K / bs], weight[bs];
  int8_t L[bs], shifts[QK_K / bs];
  int idx[bs];
  uint16_t index[bs / 8];
  // The shift of group k (0, 1) under combination c: 0 ++, 1 +-, 2 -+, 3 --.
  const auto shift_values = [&](int c, int k) { return (k == 0 ? c < 2 : c % 2 == 0) ? x_p : x_m; };
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    std::memset(y[ibl].qs, 0, sizeof(y[ibl].qs));
    std::memset(y[ibl].qh, 0, sizeof(y[ibl].qh));
    std::memset(y[ibl].scales, 0, sizeof(y[ibl].scales));
    float max_scale = 0;
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = block_sigma2(xbl, 2);
    const auto qw_of = [&](int ib) { return quant_weights ? quant_weights + QK_K * ibl + bs * ib : nullptr; };
    for (int ib = 0; ib < QK_K / bs; ++ib) {
      const float* xb = xbl + bs * ib;
      iq_weights(xb, qw_of(ib), sigma2, bs, weight);
      float max = std::fabs(xb[0]);
      for (int i = 1; i < bs; ++i) max = std::max(max, std::fabs(xb[i]));
      if (max < kGroupMaxEps) {
        scales[ib] = 0;
        shifts[ib] = 0;
        std::memset(L, 1, sizeof(L));
        continue;
      }
      sort_by_value(xb, bs, idx);
      float best_score = -FLT_MAX, scale = max;
      int besti1 = -1, besti2 = -1, best_k = -1;
      // Prefix sums per half of the 16 (each half has its own shift). With
      // v0 - v1 = v1 - v2 = -1 for both shifts, a split's sum of w x q is
      // T * v2 - px[i1] - px[i2].
      float px[2][bs + 1], pw[2][bs + 1];
      px[0][0] = px[1][0] = 0;
      pw[0][0] = pw[1][0] = 0;
      for (int j = 0; j < bs; ++j) {
        const int i = idx[j];
        const int h = i < bs / 2 ? 0 : 1;
        px[h][j + 1] = px[h][j] + weight[i] * xb[i];
        px[1 - h][j + 1] = px[1 - h][j];
        pw[h][j + 1] = pw[h][j] + weight[i];
        pw[1 - h][j + 1] = pw[1 - h][j];
      }
      const float txs[2] = {px[0][bs], px[1][bs]};
      const float tws[2] = {pw[0][bs], pw[1][bs]};
      const float p2 = x_p[2], m2 = x_m[2];
      const float cp1 = x_p[0] * x_p[0] - x_p[1] * x_p[1];
      const float cp2 = x_p[1] * x_p[1] - x_p[2] * x_p[2];
      const float cm1 = x_m[0] * x_m[0] - x_m[1] * x_m[1];
      const float cm2 = x_m[1] * x_m[1] - x_m[2] * x_m[2];
      for (int i1 = 0; i1 <= bs; ++i1) {
        for (int i2 = i1; i2 <= bs; ++i2) {
          float qx_p[2], qx_m[2], q2_p[2], q2_m[2];
          for (int h = 0; h < 2; ++h) {
            const float sx = px[h][i1] + px[h][i2];
            qx_p[h] = txs[h] * p2 - sx;
            qx_m[h] = txs[h] * m2 - sx;
            q2_p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
            q2_m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
          }
          const float sumqx[4] = {qx_p[0] + qx_p[1], qx_p[0] + qx_m[1], qx_m[0] + qx_p[1], qx_m[0] + qx_m[1]};
          const float sumq2[4] = {q2_p[0] + q2_p[1], q2_p[0] + q2_m[1], q2_m[0] + q2_p[1], q2_m[0] + q2_m[1]};
          for (int k = 0; k < 4; ++k) {
            if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
              scale = sumqx[k] / sumq2[k];
              best_score = scale * sumqx[k];
              besti1 = i1, besti2 = i2, best_k = k;
            }
          }
        }
      }
      if (besti1 < 0 || besti2 < 0 || best_k < 0) {
        scales[ib] = 0;
        shifts[ib] = 0;
        std::memset(L, 1, sizeof(L));
        continue;
      }
      for (int j = 0; j < besti1; ++j) L[idx[j]] = 0;
      for (int j = besti1; j < besti2; ++j) L[idx[j]] = 1;
      for (int j = besti2; j < bs; ++j) L[idx[j]] = 2;
      if (scale < 0) {
        for (int j = 0; j < bs; ++j) L[j] = static_cast<int8_t>(2 - L[j]);
        scale = -scale;
        best_k = 3 - best_k;  // ggml: 0 <-> 3, 1 <-> 2
      }
      bool all_on_grid = true;
      for (int k = 0; k < bs / 8; ++k) {
        int u = 0;
        for (int j = 0; j < 8; ++j) u |= L[8 * k + j] << (2 * j);
        int grid_index = t.map[static_cast<size_t>(u)];
        if (grid_index < 0) {
          all_on_grid = false;
          grid_index = iq1_find_best_neighbour(t, t.neighbours_of(u), xb + 8 * k, weight + 8 * k, scale,
                                               shift_values(best_k, k), L + 8 * k);
        }
        index[k] = static_cast<uint16_t>(grid_index);
      }
      if (!all_on_grid) {
        float sumqx_f = 0, sumq2_f = 0;
        for (int k = 0; k < bs / 8; ++k) {
          const float* xx = shift_values(best_k, k);
          const int8_t* pg = t.point(index[k]);
          for (int j = 0; j < 8; ++j) {
            const float w = weight[8 * k + j];
            const float q = xx[(pg[j] - 1) / 2];
            sumqx_f += w * q * xb[8 * k + j];
            sumq2_f += w * q * q;
          }
        }
        if (sumqx_f > 0 && sumq2_f > 0) scale = sumqx_f / sumq2_f;
      }
      y[ibl].qs[2 * ib + 0] = static_cast<uint8_t>(index[0] & 255);
      y[ibl].qs[2 * ib + 1] = static_cast<uint8_t>(index[1] & 255);
      y[ibl].qh[ib] = static_cast<uint8_t>((index[0] >> 8) | ((index[1] >> 8) << 4));
      scales[ib] = scale;
      shifts[ib] = static_cast<int8_t>(best_k);
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0) continue;
    uint16_t sc[4];
    std::memcpy(sc, y[ibl].scales, sizeof(sc));
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx_f = 0, sumq2_f = 0;
    for (int ib = 0; ib < QK_K / bs; ++ib) {
      int l = nearest_int(0.5f * (id * scales[ib + 0] - 1));
      l = std::max(0, std::min(7, l));
      sc[ib / 4] = static_cast<uint16_t>(sc[ib / 4] | (l << (3 * (ib % 4))));
      y[ibl].qh[ib] = static_cast<uint8_t>(y[ibl].qh[ib] | masks[shifts[ib]]);
      const float* xb = xbl + bs * ib;
      iq_weights(xb, qw_of(ib), sigma2, bs, weight);
      for (int k = 0; k < bs / 8; ++k) {
        const float* xx = shift_values(shifts[ib], k);
        const int8_t* pg = t.point(y[ibl].qs[2 * ib + k] + ((y[ibl].qh[ib] << (8 - 4 * k)) & 0x700));
        for (int j = 0; j < 8; ++j) {
          const float w = weight[8 * k + j];
          const float q = xx[(pg[j] - 1) / 2] * (2 * l + 1);
          sumqx_f += w * q * xb[8 * k + j];
          sumq2_f += w * q * q;
        }
      }
    }
    if (sumq2_f > 0) d = sumqx_f / sumq2_f;
    const uint16_t s = fp32_to_fp16(d * 1.1125f);  // ggml's fudge factor
    sc[0] = static_cast<uint16_t>(sc[0] | ((s & 0x000f) << 12));
    sc[1] = static_cast<uint16_t>(sc[1] | ((s & 0x00f0) << 8));
    sc[2] = static_cast<uint16_t>(sc[2] | ((s & 0x0f00) << 4));
    sc[3] = static_cast<uint16_t>(sc[3] | (s & 0xf000));
    std::memcpy(y[ibl].scales, sc, sizeof(sc));
  }
}

}  // namespace

void quantize_iq_row(GgmlType t, const float* x, void* y, int64_t n, const float* imatrix) {
  switch (t) {
    case GgmlType::IQ3_XXS: quantize_iq3_xxs_row(x, y, n, imatrix); return;
    case GgmlType::IQ3_S: quantize_iq3_s_row(x, y, n, imatrix); return;
    case GgmlType::IQ2_XXS: quantize_iq2_xxs_row(x, y, n, imatrix); return;
    case GgmlType::IQ2_XS: quantize_iq2_xs_row(x, y, n, imatrix); return;
    case GgmlType::IQ2_S: quantize_iq2_s_row(x, y, n, imatrix); return;
    case GgmlType::IQ1_S: quantize_iq1_s_row(x, y, n, imatrix); return;
    case GgmlType::IQ1_M: quantize_iq1_m_row(x, y, n, imatrix); return;
    default: break;
  }
  throw Error(Errc::unsupported, "quantize_iq_row: no lattice quantizer for type " + std::string(type_name(t)));
}

}  // namespace synapse::quant

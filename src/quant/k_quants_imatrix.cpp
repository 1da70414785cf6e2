// The K-quants with an importance matrix, as llama-quantize runs them
// (ggml-quants.c, llama.cpp v0.5.0: quantize_row_q2_K_impl,
// quantize_row_q4_K_impl, quantize_row_q5_K_impl; Q6_K's is k_quants.cpp's
// quantizer with weights), and make_qp_quants (quant_search.hpp). Each
// sub-block is fit with make_qkx3_quants (levels and a min; given weights
// it is make_qkx2_quants' search, k_quants.cpp's), weighted by
// qw * sqrt(sigma2 + x^2) (sigma2: twice the mean x^2 of the block, once
// for Q2_K), then the sub-block scales and mins themselves are quantized
// with make_qp_quants weighted by the sub-blocks' total weights, and the
// values rounded again at the stored scales. ggml's float operations in
// its order (no FMA, as this file is built), so the bytes are
// llama-quantize's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/formats.hpp"
#include "quant/fp16.hpp"
#include "quant/quant_search.hpp"

namespace synapse::quant {

float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* quant_weights) {
  constexpr float kGroupMaxEps = 1e-15f;  // GROUP_MAX_EPS
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = nmax / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
  const float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * L[i];
    const float w = quant_weights[i];
    best_mse += w * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * is + nmax) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale_is * x[i]);
      l = std::min(nmax, l);
      const float diff = x[i] - scale_is * l;
      const float w = quant_weights[i];
      mse += w * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::min(nmax, l);
    L[i] = static_cast<uint8_t>(l);
    const float w = quant_weights[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = quant_weights[i];
      float slx = sumlx - w * x[i] * L[i];
      float sl2 = suml2 - w * L[i] * L[i];
      if (slx > 0 && sl2 > 0) {
        int new_l = nearest_int(x[i] * sl2 / slx);
        new_l = std::min(nmax, new_l);
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

namespace {

// The shared part of quantize_row_q4_K_impl and quantize_row_q5_K_impl for
// one block of 256: 8 sub-blocks of 32 fit to levels 0..nmax, their scales
// and mins quantized to 6 bits (packed as get_scale_min_k4 reads them; Q5_K
// clamps them to 63 first), d and dmin; then every value rounded again at
// the stored scale. Writes L[256] and the block's scales, d and dmin.
template <class Block>
void fit_k4_block(const float* x, const float* qw, int nmax, bool clamp63, Block& y, uint8_t* L) {
  uint8_t Laux[32], Ls[QK_K / 32], Lm[QK_K / 32];
  float weights[32], sw[QK_K / 32], mins[QK_K / 32], scales[QK_K / 32];
  float sum_x2 = 0;
  for (int l = 0; l < QK_K; ++l) sum_x2 += x[l] * x[l];
  const float sigma2 = 2 * sum_x2 / QK_K;
  for (int j = 0; j < QK_K / 32; ++j) {
    for (int l = 0; l < 32; ++l) weights[l] = qw[32 * j + l] * std::sqrt(sigma2 + x[32 * j + l] * x[32 * j + l]);
    float sumw = 0;
    for (int l = 0; l < 32; ++l) sumw += weights[l];
    sw[j] = sumw;
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
  }
  const float d_block = make_qp_quants(QK_K / 32, 63, scales, Ls, sw);
  const float m_block = make_qp_quants(QK_K / 32, 63, mins, Lm, sw);
  for (int j = 0; j < QK_K / 32; ++j) {
    uint8_t ls = Ls[j];
    uint8_t lm = Lm[j];
    if (clamp63) {
      ls = std::min<uint8_t>(63, ls);
      lm = std::min<uint8_t>(63, lm);
    }
    if (j < 4) {
      y.scales[j] = ls;
      y.scales[j + 4] = lm;
    } else {
      y.scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      y.scales[j - 4] = static_cast<uint8_t>(y.scales[j - 4] | ((ls >> 4) << 6));
      y.scales[j - 0] = static_cast<uint8_t>(y.scales[j - 0] | ((lm >> 4) << 6));
    }
  }
  y.d = fp32_to_fp16(d_block);
  y.dmin = fp32_to_fp16(m_block);
  for (int j = 0; j < QK_K / 32; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, y.scales, &sc, &m);
    const float d = fp16_to_fp32(y.d) * sc;
    if (d == 0.f) continue;
    const float dm = fp16_to_fp32(y.dmin) * m;
    for (int ii = 0; ii < 32; ++ii) {
      int l = nearest_int((x[32 * j + ii] + dm) / d);
      l = std::max(0, std::min(nmax, l));
      L[32 * j + ii] = static_cast<uint8_t>(l);
    }
  }
}

}  // namespace

// quantize_row_q2_K_impl: 16 sub-blocks of 16, levels 0..3 and 4-bit
// scales and mins.
void quantize_q2_K_weighted(const float* x, void* vy, int64_t n, const float* quant_weights) {
  auto* y = static_cast<block_q2_K*>(vy);
  uint8_t L[QK_K], Laux[16], Ls[QK_K / 16], Lm[QK_K / 16];
  float mins[QK_K / 16], scales[QK_K / 16], sw[QK_K / 16], weight[16];
  for (int64_t i = 0; i < n / QK_K; ++i) {
    std::memset(sw, 0, sizeof(sw));
    float sumx2 = 0;
    for (int j = 0; j < QK_K; ++j) sumx2 += x[j] * x[j];
    const float sigma2 = sumx2 / QK_K;
    for (int j = 0; j < QK_K / 16; ++j) {
      const float* qw = quant_weights + QK_K * i + 16 * j;
      for (int l = 0; l < 16; ++l) weight[l] = qw[l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
      for (int l = 0; l < QK_K / 16; ++l) sw[j] += weight[l];
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
    float dm = make_qp_quants(QK_K / 16, 15, scales, Ls, sw);
    float mm = make_qp_quants(QK_K / 16, 15, mins, Lm, sw);
    y[i].d = fp32_to_fp16(dm);
    y[i].dmin = fp32_to_fp16(mm);
    dm = fp16_to_fp32(y[i].d);
    mm = fp16_to_fp32(y[i].dmin);
    for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = dm * (y[i].scales[j] & 0xF);
      if (d == 0.f) continue;
      const float m = mm * (y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        int l = nearest_int((x[16 * j + ii] + m) / d);
        l = std::max(0, std::min(3, l));
        L[16 * j + ii] = static_cast<uint8_t>(l);
      }
    }
    for (int j = 0; j < QK_K; j += 128)
      for (int l = 0; l < 32; ++l)
        y[i].qs[j / 4 + l] =
            static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    x += QK_K;
  }
}

// quantize_row_q4_K_impl: 8 sub-blocks of 32, levels 0..15.
void quantize_q4_K_weighted(const float* x, void* vy, int64_t n, const float* quant_weights) {
  auto* y = static_cast<block_q4_K*>(vy);
  uint8_t L[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i) {
    fit_k4_block(x, quant_weights + QK_K * i, 15, false, y[i], L);
    pack_q4_K_levels(L, y[i]);
    x += QK_K;
  }
}

// quantize_row_q5_K_impl: 8 sub-blocks of 32, levels 0..31 (the 5th bit in qh).
void quantize_q5_K_weighted(const float* x, void* vy, int64_t n, const float* quant_weights) {
  auto* y = static_cast<block_q5_K*>(vy);
  uint8_t L[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i) {
    fit_k4_block(x, quant_weights + QK_K * i, 31, true, y[i], L);
    pack_q5_K_levels(L, y[i]);
    x += QK_K;
  }
}

}  // namespace synapse::quant

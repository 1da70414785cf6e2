// The 256-element super-block formats of ggml ("k-quants"): Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, the activation type Q8_K, and IQ4_XS.
//
// Layouts are ggml-common.h's block_q2_K ... block_iq4_xs (formats.hpp).
// Quantizers are ggml-quants.c's reference quantizers without an importance
// matrix (what llama-quantize runs when no imatrix is given):
//   Q2_K  quantize_row_q2_K_ref  (make_qkx2_quants, 16 sub-blocks of 16)
//   Q3_K  quantize_row_q3_K_ref  (make_q3_quants, 16 sub-blocks of 16)
//   Q4_K  quantize_row_q4_K_ref  (make_qkx2_quants, 8 sub-blocks of 32)
//   Q5_K  quantize_row_q5_K_ref  (make_qkx2_quants, 8 sub-blocks of 32)
//   Q6_K  quantize_row_q6_K_ref  (make_qx_quants, 16 sub-blocks of 16)
//   IQ4_XS quantize_iq4_xs -> quantize_row_iq4_nl_impl(256, 32, ..., ntry 7)
//   Q8_K  quantize_row_q8_K_ref  (which is also what ggml-cpu's x86 build runs
//         for activations: quantize_row_q8_K there calls the reference)
// With an importance matrix Q3_K is quantize_row_q3_K_impl, Q6_K
// quantize_row_q6_K_impl and IQ4_XS quantize_iq4_xs with its weights
// (Q2_K, Q4_K, Q5_K: k_quants_imatrix.cpp).
// Every float expression keeps ggml's operand order and its divisions (x/d is
// not x*(1/d)): the reference quantizers are compiled without FMA contraction
// or fast-math, so the same order gives the same bits.
//
// Dot products: exact integer products per (sub-)block, then scaled by the
// block scales in float, in the order of the ggml kernel llama.cpp runs on
// x86 (AVX2): the AVX2 branches of ggml_vec_dot_<t>_q8_K (below, "The float
// order of ggml's AVX2 K-quant dots"). Q4_K is the exception: the block
// order of ggml's repacked q4_K_8x8 kernels (vec_dot_q4_K_q8_K: two exact
// integers and two fused multiply-adds per block), the one its interleaved
// kernels need (interleave.hpp): the fastest order that keeps contract 2
// (DESIGN.md), within the golden bounds for quantized types
// (docs/PERFORMANCE.md, "Measurements moved out of the code").
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "quant/formats.hpp"
#include "quant/quant_search.hpp"

namespace synapse::quant {
namespace {

// ggml's GROUP_MAX_EPS: a (sub-)block whose largest |x| is below it is zero.
constexpr float kGroupMaxEps = 1e-15f;


}  // namespace

float make_qx_quants(int n, int nmax, const float* x, int8_t* L, const float* qw) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = qw ? qw[i] : x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = qw ? qw[i] : x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

namespace {

// ggml's make_q3_quants with do_rmse = true: symmetric fit x ~ scale * l,
// l in [-nmax, nmax-1], refined by up to 5 passes of coordinate descent on
// the weighted (w = x^2) error. Writes L[i] = l + nmax, returns scale.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        int new_l = nearest_int(x[i] * sl2 / slx);
        new_l = std::max(-nmax, std::min(nmax - 1, new_l));
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace

// ggml's make_qkx2_quants: asymmetric fit x ~ scale * l - the_min with l in
// [0, nmax] and min <= 0, minimizing the weighted squared (or absolute, when
// use_mad) error over nstep+1 trial scales (rmin + rdelta*is + nmax)/(max-min),
// each refined by a weighted least-squares solve. Writes L, *the_min (>= 0)
// and returns scale. Laux: scratch of n bytes.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

namespace {

// Inverse of get_scale_min_k4 (formats.hpp): packs 6-bit scale ls and min lm of sub-block j.
// `scales` must be zeroed first (bits 6-7 of bytes 0-7 are or-ed in).
inline void set_scale_min_k4(int j, uint8_t ls, uint8_t lm, uint8_t* scales) {
  if (j < 4) {
    scales[j] = ls;
    scales[j + 4] = lm;
  } else {
    scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
    scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
    scales[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
  }
}

// The 6-bit scale of sub-block j (0..15) of a Q3_K block, minus 32 (-32..31).
// Low nibbles: bytes 0-7 (j < 8 low nibble, j >= 8 high nibble of byte j-8);
// top 2 bits: byte 8 + j%4, bits 2*(j/4).
inline int q3_K_scale(const uint8_t* scales, int j) {
  const int lo = j < 8 ? (scales[j] & 0xF) : (scales[j - 8] >> 4);
  const int hi = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// ---- The float order of ggml's AVX2 K-quant dots (ggml-cpu-quants.c,
// `#elif defined __AVX2__` branches of ggml_vec_dot_<t>_q8_K), which the
// x86 llama.cpp build runs and synapse reproduces (k_quants_avx2.cpp does it
// with the same instructions). Per 32-element chunk of a block,
// _mm256_maddubs_epi16 adds adjacent byte products in pairs and
// _mm256_madd_epi16 with the chunk's sub-block scale adds adjacent pairs, so
// int32 lane q (0..7) holds the chunk's elements 4q..4q+3; the lanes are
// summed over the block's 8 chunks (exact integers), converted to float and
// accumulated over the blocks with one fused multiply-add per lane.

// lane[q] += scale(q) * sum_{e<4} (u[4q+e] - off) * a[4q+e] for one chunk of
// 32: digits u (unsigned), activations a, scale(q) = sc_lo for q < 4
// (elements 0..15) and sc_hi for q >= 4 (Q4_K/Q5_K pass one scale twice).
// The SIMD form is exact, so plain integer arithmetic reproduces it:
// maddubs(u, a) pairs stay within int16 for digits <= 63 (|sum| <= 2*63*128
// = 16128; Q2_K <= 3, Q3_K <= 7, Q4_K <= 15, Q5_K <= 31, Q6_K <= 63
// whatever the bytes, and Q8_K bytes are any int8 including -128); the
// offsets (Q3_K 4, Q6_K 32) are a second maddubs subtracted (|off*(a0+a1)|
// <= 8192, difference <= 2*32*128); madd with a scale of at most 8 bits
// fits int32, and a block's lanes stay within 2^24 in magnitude.
inline void add_chunk(int32_t lane[8], const uint8_t* u, const int8_t* a, int sc_lo, int sc_hi, int off) {
  for (int q = 0; q < 8; ++q) {
    int s = 0;
    for (int e = 4 * q; e < 4 * q + 4; ++e) s += (u[e] - off) * a[e];
    lane[q] += (q < 4 ? sc_lo : sc_hi) * s;
  }
}

// The min term of ggml's AVX2 Q5_K dot: the 16 Q8_K bsums added in
// adjacent pairs as int16 (_mm_hadd_epi16, which wraps), then
// _mm_madd_epi16 with the 8 mins: prod[k] = m[2k]*s[2k] + m[2k+1]*s[2k+1].
inline void k4_min_prod(const int16_t* bsums, const uint8_t* mins, int32_t prod[4]) {
  int16_t s[8];
  for (int k = 0; k < 8; ++k)
    s[k] = static_cast<int16_t>(static_cast<uint16_t>(bsums[2 * k]) + static_cast<uint16_t>(bsums[2 * k + 1]));
  for (int k = 0; k < 4; ++k) prod[k] = mins[2 * k] * s[2 * k] + mins[2 * k + 1] * s[2 * k + 1];
}

// Packs 2-bit values L[0..256) into 64 bytes the way Q2_K and Q3_K store them:
// byte j/4 + l of each 128-value half holds values l, l+32, l+64, l+96 at
// bits 0, 2, 4, 6.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < QK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Q2_K: block_q2_K = 16 sub-blocks of 16; 4-bit scale and 4-bit min per
// sub-block (scales[j]: low nibble scale, high nibble min), F16 d and dmin;
// x = d*sc*q - dmin*m, q in 0..3.

// quantize_row_q2_K_ref.
void quantize_row_q2_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q2_K*>(vy);
  const int64_t nb = n / QK_K;
  uint8_t L[QK_K];
  uint8_t Laux[16];
  float weights[16];
  float mins[QK_K / 16];
  float scales[QK_K / 16];
  const float q4scale = 15.f;

  for (int64_t i = 0; i < nb; ++i) {
    float max_scale = 0;  // scales are >= 0: the min is taken out
    float max_min = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }

    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y[i].d = fp32_to_fp16(max_scale / q4scale);
    } else {
      for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = 0;
      y[i].d = fp32_to_fp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < QK_K / 16; ++j) {
        const int l = nearest_int(iscale * mins[j]);
        y[i].scales[j] = static_cast<uint8_t>(y[i].scales[j] | (l << 4));
      }
      y[i].dmin = fp32_to_fp16(max_min / q4scale);
    } else {
      y[i].dmin = fp32_to_fp16(0.f);
    }
    // Requantize against the stored (rounded) scales.
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = fp16_to_fp32(y[i].d) * (y[i].scales[j] & 0xF);
      if (d == 0.f) continue;
      const float dm = fp16_to_fp32(y[i].dmin) * (y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
      }
    }
    pack_2bit(L, y[i].qs);
    x += QK_K;
  }
}

// dequantize_row_q2_K.
void dequantize_row_q2_K(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_q2_K*>(vx);
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const float min = fp16_to_fp32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int half = 0; half < QK_K; half += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        uint8_t sc = x[i].scales[is++];
        float dl = d * (sc & 0xF), ml = min * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l] >> shift) & 3) - ml;
        sc = x[i].scales[is++];
        dl = d * (sc & 0xF);
        ml = min * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16] >> shift) & 3) - ml;
        shift += 2;
      }
      q += 32;
    }
  }
}

// ggml_vec_dot_q2_K_q8_K, the order of its AVX2 branch. w: n/256 block_q2_K,
// a: n/256 block_q8_K. Per block, with d = a.d * fp16(w.d) and
// dmin = -a.d * fp16(w.dmin): first the min term into the same 8 float lanes,
// acc[k] = fma(dmin, m[2k]*bsums[2k] + m[2k+1]*bsums[2k+1], acc[k])
// (_mm256_madd_epi16 of the 16 4-bit mins and bsums), then the integer lanes
// (add_chunk; digits 0..3, chunk c with the 4-bit scales of sub-blocks 2c
// and 2c + 1), acc[q] = fma(d, lane[q], acc[q]). Result: hsum_float_8(acc).
float vec_dot_q2_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q2_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const int64_t nb = n / QK_K;
  uint8_t u[QK_K];
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * fp16_to_fp32(x[i].d);
    const float dmin = -y[i].d * fp16_to_fp32(x[i].dmin);
    const uint8_t* sc = x[i].scales;
    int32_t prod[8];
    for (int k = 0; k < 8; ++k)
      prod[k] = (sc[2 * k] >> 4) * y[i].bsums[2 * k] + (sc[2 * k + 1] >> 4) * y[i].bsums[2 * k + 1];
    fma_lanes(acc, dmin, prod);
    for (int j = 0; j < QK_K / 128; ++j)  // element 128j + 32k + l: bits 2k of qs[32j + l]
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 32; ++l) u[128 * j + 32 * k + l] = (x[i].qs[32 * j + l] >> (2 * k)) & 3;
    int32_t lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int c = 0; c < QK_K / 32; ++c)
      add_chunk(lane, u + 32 * c, y[i].qs + 32 * c, sc[2 * c] & 0xF, sc[2 * c + 1] & 0xF, 0);
    fma_lanes(acc, d, lane);
  }
  return hsum_float_8(acc);
}

// ---------------------------------------------------------------------------
// Q3_K: block_q3_K = 16 sub-blocks of 16; signed 6-bit scales (12 bytes, see
// q3_K_scale), F16 d; q = low 2 bits (qs) + high bit (hmask), stored +4:
// x = d * (sc - 32) * (q - 4). hmask bit b of byte m holds value 32*b + m.

namespace {

// Stores the 6-bit scale index ls (0..63, the scale ls - 32) of sub-block j:
// low 4 bits in a nibble of scales[0..8), high 2 in scales[8 + j%4]. The
// 12 bytes must be zeroed first.
void set_q3_K_scale(int j, int ls, uint8_t* scales) {
  if (j < 8) {
    scales[j] = static_cast<uint8_t>(ls & 0xF);
  } else {
    scales[j - 8] = static_cast<uint8_t>(scales[j - 8] | ((ls & 0xF) << 4));
  }
  scales[j % 4 + 8] = static_cast<uint8_t>(scales[j % 4 + 8] | ((ls >> 4) << (2 * (j / 4))));
}

// The end both Q3_K quantizers share: every value rounded again at its
// stored scale d * (sc - 32) into L (0..7, sub-blocks of scale 0 keep the
// fit's levels), the high bits into hmask, the low two into qs.
void finish_q3_K_block(const float* x, int8_t* L, block_q3_K& y) {
  for (int j = 0; j < QK_K / 16; ++j) {
    const float d = fp16_to_fp32(y.d) * q3_K_scale(y.scales, j);
    if (d == 0.f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      int l = nearest_int(x[16 * j + ii] / d);
      l = std::max(-4, std::min(3, l));
      L[16 * j + ii] = static_cast<int8_t>(l + 4);
    }
  }
  // High bit of the first 32 values into bit 0 of hmask[0..32), the next
  // 32 into bit 1, ...
  std::memset(y.hmask, 0, QK_K / 8);
  int m = 0;
  uint8_t hm = 1;
  for (int j = 0; j < QK_K; ++j) {
    if (L[j] > 3) {
      y.hmask[m] |= hm;
      L[j] = static_cast<int8_t>(L[j] - 4);
    }
    if (++m == QK_K / 8) {
      m = 0;
      hm = static_cast<uint8_t>(hm << 1);
    }
  }
  pack_2bit(reinterpret_cast<const uint8_t*>(L), y.qs);
}

}  // namespace

// quantize_row_q3_K_ref.
void quantize_row_q3_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q3_K*>(vy);
  const int64_t nb = n / QK_K;
  int8_t L[QK_K];
  float scales[QK_K / 16];

  for (int64_t i = 0; i < nb; ++i) {
    float max_scale = 0;
    float amax = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
      scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }

    std::memset(y[i].scales, 0, 12);
    if (max_scale != 0.f) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < QK_K / 16; ++j) {
        const int l = static_cast<int8_t>(nearest_int(iscale * scales[j]));  // ggml's int8_t l
        set_q3_K_scale(j, std::max(-32, std::min(31, l)) + 32, y[i].scales);
      }
      y[i].d = fp32_to_fp16(1 / iscale);
    } else {
      y[i].d = fp32_to_fp16(0.f);
    }
    finish_q3_K_block(x, L, y[i]);
    x += QK_K;
  }
}

// quantize_row_q3_K_impl with an importance matrix (quant_weights: [n]):
// each sub-block of 16 fit by make_qx_quants (levels -4..3) weighted by
// qw * sqrt(sigma2 + x^2) (sigma2 twice the block's mean x^2), then the 16
// scales themselves by make_qx_quants (levels -32..31) weighted by the
// sub-blocks' total weights; d is that fit's scale.
void quantize_q3_K_weighted(const float* x, void* vy, int64_t n, const float* quant_weights) {
  auto* y = static_cast<block_q3_K*>(vy);
  const int64_t nb = n / QK_K;
  int8_t L[QK_K];
  int8_t Ls[QK_K / 16];
  float scales[QK_K / 16], weight[16], sw[QK_K / 16];
  for (int64_t i = 0; i < nb; ++i) {
    float sumx2 = 0;
    for (int j = 0; j < QK_K; ++j) sumx2 += x[j] * x[j];
    const float sigma2 = 2 * sumx2 / QK_K;
    for (int j = 0; j < QK_K / 16; ++j) {
      const float* qw = quant_weights + QK_K * i + 16 * j;
      for (int l = 0; l < 16; ++l) weight[l] = qw[l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
      float sumw = 0;
      for (int l = 0; l < 16; ++l) sumw += weight[l];
      sw[j] = sumw;
      scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, weight);
    }
    std::memset(y[i].scales, 0, 12);
    const float d_block = make_qx_quants(QK_K / 16, 32, scales, Ls, sw);
    for (int j = 0; j < QK_K / 16; ++j) set_q3_K_scale(j, Ls[j], y[i].scales);
    y[i].d = fp32_to_fp16(d_block);
    finish_q3_K_block(x, L, y[i]);
    x += QK_K;
  }
}

// dequantize_row_q3_K.
void dequantize_row_q3_K(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_q3_K*>(vx);
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d_all = fp16_to_fp32(x[i].d);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t m = 1;
    int is = 0;
    for (int half = 0; half < QK_K; half += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        float dl = d_all * q3_K_scale(x[i].scales, is++);
        for (int l = 0; l < 16; ++l) *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        dl = d_all * q3_K_scale(x[i].scales, is++);
        for (int l = 0; l < 16; ++l) *y++ = dl * (((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
        shift += 2;
        m = static_cast<uint8_t>(m << 1);
      }
      q += 32;
    }
  }
}

// ggml_vec_dot_q3_K_q8_K, the order of its AVX2 branch. w: n/256 block_q3_K,
// a: n/256 block_q8_K. Per block, d = a.d * fp16(w.d); the digits 0..7
// (value = digit - 4: ggml subtracts a second maddubs of 4 where the high
// bit is clear) form the integer lanes of add_chunk with the 6-bit scales
// minus 32 of sub-blocks 2c and 2c + 1; acc[q] = fma(d, lane[q], acc[q]).
// Result: hsum_float_8(acc).
float vec_dot_q3_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q3_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const int64_t nb = n / QK_K;
  uint8_t u[QK_K];
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * fp16_to_fp32(x[i].d);
    // element 128j + 32k + l: bits 2k of qs[32j + l], high bit 4j + k of hmask[l]
    for (int j = 0; j < QK_K / 128; ++j)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 32; ++l)
          u[128 * j + 32 * k + l] = static_cast<uint8_t>(((x[i].qs[32 * j + l] >> (2 * k)) & 3) |
                                                         (((x[i].hmask[l] >> (4 * j + k)) & 1) << 2));
    int32_t lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int c = 0; c < QK_K / 32; ++c)
      add_chunk(lane, u + 32 * c, y[i].qs + 32 * c, q3_K_scale(x[i].scales, 2 * c), q3_K_scale(x[i].scales, 2 * c + 1),
                4);
    fma_lanes(acc, d, lane);
  }
  return hsum_float_8(acc);
}

// ---------------------------------------------------------------------------
// Q4_K / Q5_K: 8 sub-blocks of 32; 6-bit scale and min per sub-block packed
// in 12 bytes (get_scale_min_k4), F16 d and dmin: x = d*sc*q - dmin*m with
// q in 0..15 (Q4_K) or 0..31 (Q5_K, high bit in qh).

namespace {

// The shared part of quantize_row_q4_K_ref and quantize_row_q5_K_ref: fits
// the 8 sub-blocks with make_qkx2_quants (weights av_x + |x|), writes d, dmin
// and the packed scales, and requantizes into L[0..256) (values 0..nmax).
template <typename Block>
void quantize_k_scale_min(const float* x, Block& y, uint8_t* L, int nmax, float rmin, float rdelta, int nstep) {
  uint8_t Laux[32];
  float weights[32];
  float mins[QK_K / 32];
  float scales[QK_K / 32];
  float max_scale = 0;  // scales are >= 0: the min is taken out
  float max_min = 0;
  for (int j = 0; j < QK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }

  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(y.scales, 0, K_SCALE_SIZE);
  for (int j = 0; j < QK_K / 32; ++j) {
    // ggml stores nearest_int into a uint8_t, then clamps to 63.
    uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    set_scale_min_k4(j, ls, lm, y.scales);
  }
  y.d = fp32_to_fp16(max_scale / 63.f);
  y.dmin = fp32_to_fp16(max_min / 63.f);

  // Requantize against the stored scales and mins.
  uint8_t sc, m;
  for (int j = 0; j < QK_K / 32; ++j) {
    get_scale_min_k4(j, y.scales, &sc, &m);
    const float d = fp16_to_fp32(y.d) * sc;
    if (d == 0.f) continue;
    const float dm = fp16_to_fp32(y.dmin) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

// The block part of ggml's AVX2 ggml_vec_dot_q5_K_q8_K: u the block's 256
// digits in order (0..31); adds the 8 integer lanes of the 8 chunks, each
// with its sub-block scale, to lane.
inline void k4_block_lanes(const uint8_t* u, const int8_t* q8, const uint8_t* scales, int32_t lane[8]) {
  for (int c = 0; c < QK_K / 32; ++c) add_chunk(lane, u + 32 * c, q8 + 32 * c, scales[c], scales[c], 0);
}

}  // namespace

void pack_q4_K_levels(const uint8_t* L, block_q4_K& y) {
  uint8_t* q = y.qs;
  for (int j = 0; j < QK_K; j += 64) {
    for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    q += 32;
  }
}

void pack_q5_K_levels(const uint8_t* L, block_q5_K& y) {
  uint8_t* qh = y.qh;
  uint8_t* ql = y.qs;
  std::memset(qh, 0, QK_K / 8);
  uint8_t m1 = 1, m2 = 2;
  for (int base = 0; base < QK_K; base += 64) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[base + j];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] |= m1;
      }
      int l2 = L[base + j + 32];
      if (l2 > 15) {
        l2 -= 16;
        qh[j] |= m2;
      }
      ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
    m1 = static_cast<uint8_t>(m1 << 2);
    m2 = static_cast<uint8_t>(m2 << 2);
    ql += 32;
  }
}

// quantize_row_q4_K_ref.
void quantize_row_q4_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q4_K*>(vy);
  const int64_t nb = n / QK_K;
  uint8_t L[QK_K];
  for (int64_t i = 0; i < nb; ++i) {
    quantize_k_scale_min(x, y[i], L, 15, -1.f, 0.1f, 20);
    pack_q4_K_levels(L, y[i]);
    x += QK_K;
  }
}

// dequantize_row_q4_K.
void dequantize_row_q4_K(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_q4_K*>(vx);
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = fp16_to_fp32(x[i].d);
    const float min = fp16_to_fp32(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    for (int j = 0; j < QK_K; j += 64) {
      get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

// ggml_vec_dot_q4_K_q8_K in a block order, that of the AVX2 branch of
// ggml's repacked q4_K_8x8 kernels (ggml-cpu/repack.cpp; synapse keeps
// Q4_K matrices as 8 interleaved rows, interleave.hpp): w [n/256]
// block_q4_K, a [n/256] block_q8_K. Per block, two exact integers: isum =
// sum over the 8 sub-blocks s of scale_s * (sum of q * a over its 32
// elements), and msum = sum_s min_s * bsum_s with bsum_s = the int16 sum
// a.bsums[2s] + a.bsums[2s+1] (wrapping as _mm256_hadd_epi16 does; never
// for real activations, |sum| <= 32 * 128); then acc = fma(float(isum),
// fp16(w.d) * a.d, acc) and acc_min = fma(float(msum), fp16(w.dmin) * a.d,
// acc_min), block after block from 0; the result acc - acc_min.
float vec_dot_q4_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q4_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const int64_t nb = n / QK_K;
  uint8_t scales[8], mins[8];
  float acc = 0.0f, acc_min = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    unpack_scale_min_k4(x[i].scales, scales, mins);
    int32_t isum = 0, msum = 0;
    for (int s = 0; s < 8; ++s) {
      const uint8_t* q4 = x[i].qs + 32 * (s / 2);
      const int8_t* q8 = y[i].qs + 32 * s;
      int32_t sub = 0;
      for (int l = 0; l < 32; ++l) sub += (s % 2 == 0 ? (q4[l] & 0xF) : (q4[l] >> 4)) * q8[l];
      isum += scales[s] * sub;
      msum += mins[s] * static_cast<int16_t>(y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]);
    }
    acc = std::fma(static_cast<float>(isum), fp16_to_fp32(x[i].d) * y[i].d, acc);
    acc_min = std::fma(static_cast<float>(msum), fp16_to_fp32(x[i].dmin) * y[i].d, acc_min);
  }
  return acc - acc_min;
}

// quantize_row_q5_K_ref.
void quantize_row_q5_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q5_K*>(vy);
  const int64_t nb = n / QK_K;
  uint8_t L[QK_K];
  for (int64_t i = 0; i < nb; ++i) {
    quantize_k_scale_min(x, y[i], L, 31, -0.5f, 0.1f, 15);
    pack_q5_K_levels(L, y[i]);
    x += QK_K;
  }
}

// dequantize_row_q5_K.
void dequantize_row_q5_K(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_q5_K*>(vx);
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    const float d = fp16_to_fp32(x[i].d);
    const float min = fp16_to_fp32(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < QK_K; j += 64) {
      get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
  }
}

// ggml_vec_dot_q5_K_q8_K, the order of its AVX2 branch. w: n/256 block_q5_K,
// a: n/256 block_q8_K. 8 integer lanes (add_chunk; digits 0..31, the fifth
// bit of element 64j + l in bit 2j of qh[l], of 64j + 32 + l in bit 2j + 1),
// acc[q] = fma(d, lane[q], acc[q]). The min term: the 4 lanes of k4_min_prod
// are added up as integers and summs = fma(dmin, that sum, summs) per block (the
// scalar `summs += dmin * hsum` of ggml's AVX2 branch; the compiler fuses it,
// as it fuses Q4_1's `summs += m * s`). Result: hsum_float_8(acc) + summs.
float vec_dot_q5_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q5_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const int64_t nb = n / QK_K;
  uint8_t u[QK_K];
  uint8_t scales[8], mins[8];
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float summs = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * fp16_to_fp32(x[i].d);
    const float dmin = -y[i].d * fp16_to_fp32(x[i].dmin);
    unpack_scale_min_k4(x[i].scales, scales, mins);
    int32_t prod[4];
    k4_min_prod(y[i].bsums, mins, prod);
    summs = std::fma(dmin, static_cast<float>((prod[0] + prod[1]) + (prod[2] + prod[3])), summs);
    const uint8_t* q5 = x[i].qs;
    const uint8_t* qh = x[i].qh;
    for (int j = 0; j < QK_K / 64; ++j, q5 += 32) {
      for (int l = 0; l < 32; ++l) {
        u[64 * j + l] = static_cast<uint8_t>((q5[l] & 0xF) | (((qh[l] >> (2 * j)) & 1) << 4));
        u[64 * j + l + 32] = static_cast<uint8_t>((q5[l] >> 4) | (((qh[l] >> (2 * j + 1)) & 1) << 4));
      }
    }
    int32_t lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    k4_block_lanes(u, y[i].qs, scales, lane);
    fma_lanes(acc, d, lane);
  }
  return hsum_float_8(acc) + summs;
}

// ---------------------------------------------------------------------------
// Q6_K: block_q6_K = 16 sub-blocks of 16; int8 scales, F16 d; 6-bit values
// (low 4 bits in ql, high 2 in qh) stored +32: x = d * sc * (q - 32).
// Per 128 values: ql[l] holds values l (low nibble) and l+64 (high nibble),
// ql[l+32] values l+32 and l+96; qh[l] bits 0,2,4,6: values l, l+32, l+64, l+96.

// quantize_row_q6_K_ref (quant_weights nullptr) and quantize_row_q6_K_impl
// (an importance matrix, [n] floats, as make_qx_quants' weights).
void quantize_q6_K_weighted(const float* x, void* vy, int64_t n, const float* quant_weights) {
  auto* y = static_cast<block_q6_K*>(vy);
  const int64_t nb = n / QK_K;
  int8_t L[QK_K];
  float scales[QK_K / 16];
  for (int64_t i = 0; i < nb; ++i) {
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib,
                                         quant_weights ? quant_weights + QK_K * i + 16 * ib : nullptr);
      scales[ib] = scale;
      const float abs_scale = std::fabs(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(block_q6_K));
      y[i].d = fp32_to_fp16(0.f);
      x += QK_K;
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    }
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = fp16_to_fp32(y[i].d) * y[i].scales[j];
      if (d == 0.f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        int l = nearest_int(x[16 * j + ii] / d);
        l = std::max(-32, std::min(31, l));
        L[16 * j + ii] = static_cast<int8_t>(l + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < QK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l + 0] & 0xF;
        const uint8_t q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF;
        const uint8_t q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                     ((L[j + l + 96] >> 4) << 6));
      }
      ql += 64;
      qh += 32;
    }
    x += QK_K;
  }
}

void quantize_row_q6_K(const float* x, void* vy, int64_t n) { quantize_q6_K_weighted(x, vy, n, nullptr); }

// dequantize_row_q6_K: y = (d * sc) * q.
void dequantize_row_q6_K(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_q6_K*>(vx);
  const int64_t nb = n / QK_K;
  int8_t a[QK_K];
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    unpack_q6_K(x[i], a);
    for (int j = 0; j < QK_K; ++j) *y++ = d * x[i].scales[j / 16] * a[j];
  }
}

// ggml_vec_dot_q6_K_q8_K, the order of its AVX2 branch. w: n/256 block_q6_K,
// a: n/256 block_q8_K. Per block, d = a.d * fp16(w.d); the digits (0..63,
// value = digit - 32) of chunk c (elements 32c..32c+31) form 8 integer lanes
// (add_chunk: lanes 0-3 elements 0..15 of the chunk with scale 2c, lanes
// 4-7 elements 16..31 with scale 2c + 1; the -32 comes from ggml's second
// maddubs of 32, subtracted), summed over the 8 chunks;
// acc[q] = fma(d, lane[q], acc[q]). Result: hsum_float_8(acc).
float vec_dot_q6_K_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_q6_K*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const int64_t nb = n / QK_K;
  int8_t v[QK_K];
  uint8_t u[QK_K];
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < nb; ++i) {
    const float d = y[i].d * fp16_to_fp32(x[i].d);
    unpack_q6_K(x[i], v);
    for (int j = 0; j < QK_K; ++j) u[j] = static_cast<uint8_t>(v[j] + 32);
    int32_t lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int c = 0; c < QK_K / 32; ++c)
      add_chunk(lane, u + 32 * c, y[i].qs + 32 * c, x[i].scales[2 * c], x[i].scales[2 * c + 1], 32);
    fma_lanes(acc, d, lane);
  }
  return hsum_float_8(acc);
}

// ---------------------------------------------------------------------------
// Q8_K: block_q8_K = float d, 256 int8 values, int16 sums of each 16 (bsums).

// quantize_row_q8_K_ref, which ggml-cpu's x86 quantize_row_q8_K calls: the
// value of largest |x| (first one on ties) keeps its sign in
// iscale = -127/max, q = min(127, nearest_int(iscale * x)), d = 1/iscale.
// So the extreme value maps to -127 and d < 0 when it is positive. An
// all-zero block gives d = 0 and q = 0 (bsums = 0).
void quantize_row_q8_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q8_K*>(vy);
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    float max = 0;
    float amax = 0;
    for (int j = 0; j < QK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.f) {
      y[i].d = 0;
      std::memset(y[i].qs, 0, QK_K);
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));  // ggml leaves them unwritten
      x += QK_K;
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_K; ++j) {
      const int v = nearest_int(iscale * x[j]);
      y[i].qs[j] = static_cast<int8_t>(std::min(127, v));
    }
    for (int j = 0; j < QK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
    x += QK_K;
  }
}

// dequantize_row_q8_K: y = d * q.
void dequantize_row_q8_K(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_q8_K*>(vx);
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    for (int j = 0; j < QK_K; ++j) *y++ = x[i].d * x[i].qs[j];
  }
}

// ---------------------------------------------------------------------------
// IQ4_XS: block_iq4_xs = 8 sub-blocks of 32; 6-bit scales stored +32 (low 4
// bits in scales_l, nibble ib%2 of byte ib/2; high 2 bits in scales_h, bits
// 2*ib), F16 d; 4-bit indices into kvalues_iq4nl: x = d * (ls - 32) * kvalues[q].
// Per sub-block, qs[16*ib + j] holds values j (low nibble) and j+16 (high).

namespace {

// ggml's best_index_int8: index of the entry of the sorted table val[0..n)
// nearest to x (ties to the lower index).
inline int best_index_int8(int n, const int8_t* val, float x) {
  if (x <= val[0]) return 0;
  if (x >= val[n - 1]) return n - 1;
  int ml = 0, mu = n - 1;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < val[mav]) {
      mu = mav;
    } else {
      ml = mav;
    }
  }
  return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

// quantize_row_iq4_nl_impl(super_block_size = 256, block_size = 32, ...,
// values = kvalues_iq4nl, quant_weights, ntry = 7) for one block. qw: the
// block's 256 importances (weights qw * sqrt(sigma2 + x^2), sigma2 twice
// the block's mean x^2), or nullptr (weights x^2).
void quantize_iq4_xs_block(const float* x, const float* qw, block_iq4_xs& y) {
  constexpr int kBlock = 32;
  constexpr int kNtry = 7;
  const int8_t* values = kvalues_iq4nl;
  uint8_t L[QK_K];
  float scales[QK_K / kBlock];
  float weight[kBlock];

  float sigma2 = 0;
  for (int j = 0; j < QK_K; ++j) sigma2 += x[j] * x[j];
  sigma2 *= 2.f / QK_K;

  std::memset(y.qs, 0, QK_K / 2);
  y.d = fp32_to_fp16(0.f);

  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < QK_K / kBlock; ++ib) {
    const float* xb = x + ib * kBlock;
    uint8_t* Lb = L + ib * kBlock;
    if (qw != nullptr) {
      const float* qwb = qw + ib * kBlock;
      for (int j = 0; j < kBlock; ++j) weight[j] = qwb[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
    } else {
      for (int j = 0; j < kBlock; ++j) weight[j] = xb[j] * xb[j];
    }
    float amax = 0, max = 0;
    for (int j = 0; j < kBlock; ++j) {
      const float ax = std::fabs(xb[j]);
      if (ax > amax) {
        amax = ax;
        max = xb[j];
      }
    }
    if (amax < kGroupMaxEps) {
      scales[ib] = 0;
      continue;
    }
    float d = -max / values[0];  // ntry > 0
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < kBlock; ++j) {
      const float al = id * xb[j];
      const int l = best_index_int8(16, values, al);
      Lb[j] = static_cast<uint8_t>(l);
      const float q = values[l];
      const float w = weight[j];
      sumqx += w * q * xb[j];
      sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -kNtry; itry <= kNtry; ++itry) {
      id = (itry + values[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < kBlock; ++j) {
        const float al = id * xb[j];
        const int l = best_index_int8(16, values, al);
        const float q = values[l];
        const float w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[ib] = d;
    const float abs_d = std::fabs(d);
    if (abs_d > amax_scale) {
      amax_scale = abs_d;
      max_scale = d;
    }
  }

  // Super-block scale d = -max_scale/32 (unrounded here, as in ggml), 6-bit
  // sub-block scales, and the values requantized against them.
  y.scales_h = 0;
  const float d = -max_scale / 32;
  y.d = fp32_to_fp16(d);
  const float id = d != 0.f ? 1 / d : 0.f;
  for (int ib = 0; ib < QK_K / kBlock; ++ib) {
    int l = nearest_int(id * scales[ib]);
    l = std::max(-32, std::min(31, l));
    const float dl = d * l;
    const float idl = dl != 0.f ? 1 / dl : 0.f;
    uint8_t* Lb = L + ib * kBlock;
    const float* xb = x + ib * kBlock;
    for (int j = 0; j < kBlock; ++j) Lb[j] = static_cast<uint8_t>(best_index_int8(16, values, idl * xb[j]));
    l += 32;
    const uint8_t l_l = l & 0xf;
    const uint8_t l_h = static_cast<uint8_t>(l >> 4);
    if (ib % 2 == 0) {
      y.scales_l[ib / 2] = l_l;
    } else {
      y.scales_l[ib / 2] = static_cast<uint8_t>(y.scales_l[ib / 2] | (l_l << 4));
    }
    y.scales_h = static_cast<uint16_t>(y.scales_h | (l_h << 2 * (ib % 8)));
  }
  for (int i = 0; i < QK_K / 32; ++i) {
    for (int j = 0; j < 16; ++j) y.qs[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
  }
}

}  // namespace

// quantize_iq4_xs (llama-quantize's path) with an importance matrix
// (quant_weights: [n]) or without (nullptr).
void quantize_iq4_xs_weighted(const float* x, void* vy, int64_t n, const float* quant_weights) {
  auto* y = static_cast<block_iq4_xs*>(vy);
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i)
    quantize_iq4_xs_block(x + QK_K * i, quant_weights ? quant_weights + QK_K * i : nullptr, y[i]);
}

void quantize_row_iq4_xs(const float* x, void* vy, int64_t n) { quantize_iq4_xs_weighted(x, vy, n, nullptr); }

// dequantize_row_iq4_xs: y = (d * (ls - 32)) * kvalues_iq4nl[q].
void dequantize_row_iq4_xs(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_iq4_xs*>(vx);
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* qs = x[i].qs;
    const float d = fp16_to_fp32(x[i].d);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
      const float dl = d * (ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j + 0] = dl * kvalues_iq4nl[qs[j] & 0xf];
        y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4];
      }
      y += 32;
      qs += 16;
    }
  }
}

// ggml_vec_dot_iq4_xs_q8_K, the order of its AVX2 branch. w: n/256
// block_iq4_xs, a: n/256 block_q8_K. Per block, d = fp16(w.d) * a.d;
// sub-block c of 32 (its kvalues_iq4nl values v, 6-bit scale ls - 32) gives
// lane[q] += (ls - 32) * sum_{e<4} sign_mul(v, a) over elements 4q..4q+3,
// and acc[q] = fma(d, lane[q], acc[q]). Result: hsum_float_8(acc).
// sign_mul is ggml's mul_add_epi8 per element, maddubs(|v|, sign(a, v)):
// v * a, except that an activation of -128 against a negative v gives
// |v| * -128 (_mm256_sign_epi8 cannot negate -128). Real Q8_K rows hold
// -127..127, where it is the plain product; the pairs never saturate
// (2 * 127 * 128 < 32768).
float vec_dot_iq4_xs_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_iq4_xs*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const int64_t nb = n / QK_K;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t ibl = 0; ibl < nb; ++ibl) {
    const float d = fp16_to_fp32(x[ibl].d) * y[ibl].d;
    int32_t lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int c = 0; c < QK_K / 32; ++c) {
      const int ls = ((x[ibl].scales_l[c / 2] >> 4 * (c % 2)) & 0xf) | (((x[ibl].scales_h >> 2 * c) & 3) << 4);
      const uint8_t* qs = x[ibl].qs + 16 * c;
      const int8_t* q8 = y[ibl].qs + 32 * c;
      for (int q = 0; q < 8; ++q) {
        int sum = 0;
        for (int e = 4 * q; e < 4 * q + 4; ++e) {
          const int v = kvalues_iq4nl[e < 16 ? (qs[e] & 0xf) : (qs[e - 16] >> 4)];
          const int a = q8[e];
          sum += v > 0 ? v * a : v < 0 ? -v * (a == -128 ? -128 : -a) : 0;
        }
        lane[q] += (ls - 32) * sum;
      }
    }
    fma_lanes(acc, d, lane);
  }
  return hsum_float_8(acc);
}

}  // namespace synapse::quant

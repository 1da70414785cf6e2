// The 32-element ggml block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
// IQ4_NL and MXFP4 (ggml-common.h's block_q4_0 ... block_mxfp4; layouts in
// formats.hpp).
//
// Element order inside a block (all 4-bit formats): byte j of qs holds element
// j in its low nibble and element j + 16 in its high nibble. Q5_0/Q5_1 keep
// the fifth bit of element j in bit j of qh (read as a little-endian uint32).
//
// Pairing with the activation row (ggml-cpu's vec_dot_type, see quant.cpp):
//   Q4_0, Q5_0, Q8_0, IQ4_NL,
//   MXFP4                     . Q8_0
//   Q4_1, Q5_1                . Q8_1 (its s = d * sum(qs) carries the offset m)
//   Q8_1                        activation only (no dot with it as weight)
//
// Quantizers:
//   * weights (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): what llama-quantize writes
//     without an importance matrix: ggml's quantize_row_<t>_ref, and for
//     IQ4_NL quantize_iq4_nl (quantize_row_iq4_nl_impl with ntry = 7), for
//     MXFP4 quantize_row_mxfp4_ref; with one (quantize_<t>_weighted),
//     ggml's quantize_row_<t>_impl and quantize_iq4_nl with its weights.
//   * activations (Q8_0, Q8_1): bit-identical to ggml's x86 AVX2
//     quantize_row_q8_0 / quantize_row_q8_1 (ggml-cpu/arch/x86/quants.c),
//     which differ from the _ref versions: id = 127/amax instead of 1/d, and
//     round half to even (_mm256_round_ps) instead of roundf.
//
// Dots (ggml_vec_dot_<t>_q8_0 / _q8_1): exact integer products, summed per
// group of 4 consecutive elements of a block into 8 int32 lanes (lane l holds
// elements 4l..4l+3, as _mm256_maddubs_epi16 + _mm256_madd_epi16 produce
// them); each lane is converted to float and accumulated over the blocks
// with a fused multiply-add by the block scale product d_w * d_a (fp16 ->
// fp32, multiplied in float); the 8 lanes are reduced as hsum_float_8. This
// is ggml's AVX2 vec_dot order and that of llamafile's tinyBLAS_Q0_AVX (one
// accumulator per output), so SIMD kernels reproduce it exactly and the order
// depends on nothing but the row (DESIGN.md contract 2).
//
// Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4 are the exception: per block the whole
// exact integer dot isum = sum_k (q_k - offset) * a_k (offset 8 or 16; Q8_0
// none; IQ4_NL and MXFP4 q_k their table values) is one int32, and the
// row's one float accumulator takes
// acc = fma(float(isum), d_w * d_a, acc) block after block (acc starts at
// 0). That is the order of ggml's repacked q4_0_8x8 GEMM and GEMV
// (ggml-cpu/repack.cpp: 8 weight rows interleaved, one lane per row), and
// it is what lets synapse keep these matrices as 8 interleaved rows
// (interleave.hpp): one fused multiply-add then serves 8 outputs instead of
// each output doing one per 4 elements (IQ4_NL and MXFP4: d_w * d_a is
// fp16(d_w) * fp16(d_a), and fp16(d_a) * 2^(e - 128)). For Q4_0 it is
// llama.cpp's own order on AVX2; for Q5_0, Q8_0, IQ4_NL and MXFP4 llama.cpp
// v0.5.0's AVX2 paths sum in other orders (Q8_0: tinyBLAS_Q0_AVX's 8 lanes;
// IQ4_NL and MXFP4 ggml's scalar vec_dots take this one, unfused), and the
// block order is kept because it
// is the fastest that keeps contract 2: synapse promises llama.cpp's
// roundings (the Q8_0 activation bytes, the F16 scales), not its float
// summation order (DESIGN.md contract 1; fidelity is checked with
// tolerances set by llama.cpp's own spread, tests/tools/perplexity_cli_test.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/formats.hpp"
#include "quant/quant_search.hpp"

namespace synapse::quant {
namespace {

inline uint32_t load_qh(const uint8_t qh[4]) {
  return static_cast<uint32_t>(qh[0]) | (static_cast<uint32_t>(qh[1]) << 8) |
         (static_cast<uint32_t>(qh[2]) << 16) | (static_cast<uint32_t>(qh[3]) << 24);
}

inline void store_qh(uint8_t qh[4], uint32_t v) {
  for (int b = 0; b < 4; ++b) qh[b] = static_cast<uint8_t>(v >> (8 * b));
}

// Levels L[0..32) into qs (element j low nibble, j + 16 high) and, for the
// 5-bit types, their bit 4 into qh (bit j for element j).
template <class L8>
void pack_levels(const L8* L, uint8_t* qs, uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < 16; ++j) {
    const uint8_t l0 = static_cast<uint8_t>(L[j]);
    const uint8_t l1 = static_cast<uint8_t>(L[j + 16]);
    qs[j] = static_cast<uint8_t>((l0 & 0x0F) | ((l1 & 0x0F) << 4));
    h |= static_cast<uint32_t>((l0 & 0x10u) >> 4) << j;
    h |= static_cast<uint32_t>((l1 & 0x10u) >> 4) << (j + 16);
  }
  if (qh != nullptr) store_qh(qh, h);
}

// C's (int8_t)(float) / (uint8_t)(float) for the in-range values the _ref
// quantizers produce: truncation toward zero (callers keep the low 8 bits).
// NaN and out-of-range values (from NaN/inf weights) give INT32_MIN, as
// x86's cvttss2si does, instead of undefined behaviour.
inline int trunc_to_int(float v) {
  return (v > -2147483648.0f && v < 2147483648.0f) ? static_cast<int>(v) : INT32_MIN;
}

// lane[l] = sum of w[k] * a[k] for k in 4l..4l+3 (exact in int32).
inline void int_lanes(const int w[32], const int8_t a[32], int32_t lane[8]) {
  for (int l = 0; l < 8; ++l) {
    int32_t s = 0;
    for (int k = 4 * l; k < 4 * l + 4; ++k) s += w[k] * a[k];
    lane[l] = s;
  }
}

// What _mm256_cvtps_epi32 followed by the saturating packs (epi32 -> epi16 ->
// epi8) make of an already rounded float: NaN and values outside int32 give
// INT32_MIN (-> -128); other values saturate to [-128, 127]. Returns the int32
// (for Q8_1's sum, taken before the packs) in `i32`.
inline int8_t cvt_pack_i8(float r, int32_t& i32) {
  if (!(r >= -2147483648.0f && r < 2147483648.0f)) {
    i32 = INT32_MIN;
    return -128;
  }
  i32 = static_cast<int32_t>(r);
  return static_cast<int8_t>(i32 < -128 ? -128 : (i32 > 127 ? 127 : i32));
}

// One activation block as ggml's AVX2 quantize_row_q8_0/q8_1 computes it:
// amax = max |x|, d = amax / 127, id = amax != 0 ? 127 / amax : 0,
// q = round_half_even(x * id). Returns d (unrounded) and the int32 sum of q.
inline float quantize_block_q8_avx2(const float* x, int8_t* qs, int32_t& sum) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(x[j]);
    amax = ax > amax ? ax : amax;
  }
  const float d = amax / 127.f;
  const float id = amax != 0.0f ? 127.f / amax : 0.0f;
  uint32_t s = 0;  // int32 adds wrap as _mm256_add_epi32 does
  for (int j = 0; j < 32; ++j) {
    int32_t i32 = 0;
    qs[j] = cvt_pack_i8(std::nearbyint(x[j] * id), i32);  // default rounding: half to even
    s += static_cast<uint32_t>(i32);
  }
  sum = static_cast<int32_t>(s);
  return d;
}

// ggml's best_index_int8: index of the level of the sorted `val[16]` nearest
// to x; at an exact midpoint the upper level wins. Midpoints compared as
// x + x >= val[j-1] + val[j], exact in float.
inline int best_index_iq4nl(float x) {
  const float x2 = x + x;
  int idx = 0;
  for (int step = 8; step > 0; step >>= 1) {
    const int j = idx + step;
    idx = (x2 >= static_cast<float>(kvalues_iq4nl[j - 1] + kvalues_iq4nl[j])) ? j : idx;
  }
  return idx;
}

}  // namespace

// ---------------------------------------------------------------- Q4_0
// block_q4_0: d (fp16), 16 bytes of 4-bit q; value = (q - 8) * d.

// Weight quantizer: ggml's quantize_row_q4_0_ref. d = max / -8 where max is
// the element of largest magnitude (first one on ties), q = min(15, trunc(x/d + 8.5)).
void quantize_row_q4_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q4_0*>(vy);
  const int64_t nb = n / QK4_0;
  for (int64_t i = 0; i < nb; ++i, x += QK4_0) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int L[QK4_0];
    for (int j = 0; j < QK4_0; ++j) L[j] = std::min(15, trunc_to_int(x[j] * id + 8.5f));
    pack_levels(L, y[i].qs, nullptr);
  }
}

// ggml's dequantize_row_q4_0.
void dequantize_row_q4_0(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_q4_0*>(vx);
  const int64_t nb = n / QK4_0;
  for (int64_t i = 0; i < nb; ++i, y += QK4_0) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + QK4_0 / 2] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

// ggml_vec_dot_q4_0_q8_0 in the order of ggml's q4_0_8x8 kernels (see the top
// of the file): w [n/32] block_q4_0, a [n/32] block_q8_0.
float vec_dot_q4_0_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q4_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j)
      isum += ((w[i].qs[j] & 0x0F) - 8) * a[i].qs[j] + ((w[i].qs[j] >> 4) - 8) * a[i].qs[j + 16];
    acc = std::fma(static_cast<float>(isum), fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d), acc);
  }
  return acc;
}

// ---------------------------------------------------------------- Q4_1
// block_q4_1: d, m (fp16), 16 bytes of 4-bit q; value = q * d + m.

// Weight quantizer: ggml's quantize_row_q4_1_ref. d = (max - min) / 15,
// m = min, q = min(15, trunc((x - min)/d + 0.5)).
void quantize_row_q4_1(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q4_1*>(vy);
  const int64_t nb = n / QK4_1;
  for (int64_t i = 0; i < nb; ++i, x += QK4_1) {
    float min = 3.402823466e+38f, max = -3.402823466e+38f;
    for (int j = 0; j < QK4_1; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    int L[QK4_1];
    for (int j = 0; j < QK4_1; ++j) L[j] = std::min(15, trunc_to_int((x[j] - min) * id + 0.5f));
    pack_levels(L, y[i].qs, nullptr);
  }
}

// ggml's dequantize_row_q4_1 (q * d, then + m: two roundings, no fma).
void dequantize_row_q4_1(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_q4_1*>(vx);
  const int64_t nb = n / QK4_1;
  for (int64_t i = 0; i < nb; ++i, y += QK4_1) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      const float p0 = static_cast<float>(x[i].qs[j] & 0x0F) * d;
      const float p1 = static_cast<float>(x[i].qs[j] >> 4) * d;
      y[j] = p0 + m;
      y[j + QK4_1 / 2] = p1 + m;
    }
  }
}

// ggml_vec_dot_q4_1_q8_1: w [n/32] block_q4_1, a [n/32] block_q8_1.
// sum_blocks d_w*d_a*sum(q_w*q_a) (lanes as above) + sum_blocks m_w*s_a, the
// second sum a separate float accumulated with a fused multiply-add block by
// block (ggml's `summs += m*s`, contracted by the compiler), added last.
float vec_dot_q4_1_q8_1(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q4_1*>(vw);
  const auto* a = static_cast<const block_q8_1*>(va);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float summs = 0.0f;
  int q[32];
  int32_t lane[8];
  for (int64_t i = 0; i < n / QK4_1; ++i) {
    summs = std::fma(fp16_to_fp32(w[i].m), fp16_to_fp32(a[i].s), summs);
    for (int j = 0; j < 16; ++j) {
      q[j] = w[i].qs[j] & 0x0F;
      q[j + 16] = w[i].qs[j] >> 4;
    }
    int_lanes(q, a[i].qs, lane);
    fma_lanes(acc, fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d), lane);
  }
  return hsum_float_8(acc) + summs;
}

// ---------------------------------------------------------------- Q5_0
// block_q5_0: d (fp16), qh (bit j = fifth bit of element j), 16 bytes of
// low nibbles; value = (q - 16) * d.

// Weight quantizer: ggml's quantize_row_q5_0_ref. d = max / -16,
// q = min(31, trunc(x/d + 16.5)).
void quantize_row_q5_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q5_0*>(vy);
  const int64_t nb = n / QK5_0;
  for (int64_t i = 0; i < nb; ++i, x += QK5_0) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK5_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int L[QK5_0];
    for (int j = 0; j < QK5_0; ++j) L[j] = std::min(31, trunc_to_int(x[j] * id + 16.5f));
    pack_levels(L, y[i].qs, y[i].qh);
  }
}

// ggml's dequantize_row_q5_0.
void dequantize_row_q5_0(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_q5_0*>(vx);
  const int64_t nb = n / QK5_0;
  for (int64_t i = 0; i < nb; ++i, y += QK5_0) {
    const float d = fp16_to_fp32(x[i].d);
    const uint32_t qh = load_qh(x[i].qh);
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const int q0 = (x[i].qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4);
      const int q1 = (x[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      y[j] = static_cast<float>(q0 - 16) * d;
      y[j + QK5_0 / 2] = static_cast<float>(q1 - 16) * d;
    }
  }
}

// ggml_vec_dot_q5_0_q8_0 in the Q4_0 order (see the top of the file): w [n/32]
// block_q5_0, a [n/32] block_q8_0.
float vec_dot_q5_0_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q5_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK5_0; ++i) {
    const uint32_t qh = load_qh(w[i].qh);
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = ((w[i].qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4)) - 16;
      const int q1 = ((w[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4)) - 16;
      isum += q0 * a[i].qs[j] + q1 * a[i].qs[j + 16];
    }
    acc = std::fma(static_cast<float>(isum), fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d), acc);
  }
  return acc;
}

// ---------------------------------------------------------------- Q5_1
// block_q5_1: d, m (fp16), qh, 16 bytes of low nibbles; value = q * d + m.

// Weight quantizer: ggml's quantize_row_q5_1_ref. d = (max - min) / 31,
// q = trunc((x - min)/d + 0.5) as uint8_t, no clamp (a value that rounds to
// 32 stores 0, exactly as ggml does).
void quantize_row_q5_1(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q5_1*>(vy);
  const int64_t nb = n / QK5_1;
  for (int64_t i = 0; i < nb; ++i, x += QK5_1) {
    float min = 3.402823466e+38f, max = -3.402823466e+38f;
    for (int j = 0; j < QK5_1; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    int L[QK5_1];
    for (int j = 0; j < QK5_1; ++j) L[j] = trunc_to_int((x[j] - min) * id + 0.5f);
    pack_levels(L, y[i].qs, y[i].qh);
  }
}

// ggml's dequantize_row_q5_1 (q * d, then + m).
void dequantize_row_q5_1(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_q5_1*>(vx);
  const int64_t nb = n / QK5_1;
  for (int64_t i = 0; i < nb; ++i, y += QK5_1) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    const uint32_t qh = load_qh(x[i].qh);
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const int q0 = (x[i].qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4);
      const int q1 = (x[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      const float p0 = static_cast<float>(q0) * d;
      const float p1 = static_cast<float>(q1) * d;
      y[j] = p0 + m;
      y[j + QK5_1 / 2] = p1 + m;
    }
  }
}

// ggml_vec_dot_q5_1_q8_1: w [n/32] block_q5_1, a [n/32] block_q8_1; the
// m * s term as in vec_dot_q4_1_q8_1.
float vec_dot_q5_1_q8_1(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q5_1*>(vw);
  const auto* a = static_cast<const block_q8_1*>(va);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float summs = 0.0f;
  int q[32];
  int32_t lane[8];
  for (int64_t i = 0; i < n / QK5_1; ++i) {
    summs = std::fma(fp16_to_fp32(w[i].m), fp16_to_fp32(a[i].s), summs);
    const uint32_t qh = load_qh(w[i].qh);
    for (int j = 0; j < 16; ++j) {
      q[j] = (w[i].qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4);
      q[j + 16] = (w[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
    }
    int_lanes(q, a[i].qs, lane);
    fma_lanes(acc, fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d), lane);
  }
  return hsum_float_8(acc) + summs;
}

// ---------------------------------------------------------------- Q8_0
// block_q8_0: d (fp16), 32 int8 q; value = q * d.

// Activation quantizer: ggml's x86 AVX2 quantize_row_q8_0, bit for bit.
// llama-quantize's weights take quantize_row_q8_0_ref below (id = 1/d,
// roundf), which can differ from it by one step at some elements. Scalar reference here; the AVX2 version (legacy_avx2.cpp)
// is the AVX2 kernel table's.
void quantize_row_q8_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q8_0*>(vy);
  const int64_t nb = n / QK8_0;
  for (int64_t i = 0; i < nb; ++i, x += QK8_0) {
    int32_t sum = 0;
    const float d = quantize_block_q8_avx2(x, y[i].qs, sum);
    y[i].d = fp32_to_fp16(d);
  }
}

// ggml's quantize_row_q8_0_ref, what llama-quantize writes for Q8_0
// weights: d = amax / 127, q = roundf(x * (1/d)).
void quantize_row_q8_0_ref(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q8_0*>(vy);
  for (int64_t i = 0; i < n / QK8_0; ++i, x += QK8_0) {
    float amax = 0;
    for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

// ggml's dequantize_row_q8_0.
void dequantize_row_q8_0(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_q8_0*>(vx);
  const int64_t nb = n / QK8_0;
  for (int64_t i = 0; i < nb; ++i, y += QK8_0) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < QK8_0; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

// ggml_vec_dot_q8_0_q8_0 in the Q4_0 order (see the top of the file): w, a
// [n/32] block_q8_0.
float vec_dot_q8_0_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_q8_0*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < 32; ++j) isum += w[i].qs[j] * a[i].qs[j];
    acc = std::fma(static_cast<float>(isum), fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d), acc);
  }
  return acc;
}

// ---------------------------------------------------------------- Q8_1
// block_q8_1: d (fp16), s (fp16) = d * sum(q), 32 int8 q; value = q * d.

// Activation quantizer: ggml's x86 AVX2 quantize_row_q8_1, bit for bit:
// as Q8_0, and s = fp16(d * (float)sum(q)) with the unrounded float d.
// Scalar reference; AVX2 version as for Q8_0.
void quantize_row_q8_1(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_q8_1*>(vy);
  const int64_t nb = n / QK8_1;
  for (int64_t i = 0; i < nb; ++i, x += QK8_1) {
    int32_t sum = 0;
    const float d = quantize_block_q8_avx2(x, y[i].qs, sum);
    y[i].d = fp32_to_fp16(d);
    y[i].s = fp32_to_fp16(d * static_cast<float>(sum));
  }
}

// ggml's dequantize_row_q8_1 (s is not needed to decode).
void dequantize_row_q8_1(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_q8_1*>(vx);
  const int64_t nb = n / QK8_1;
  for (int64_t i = 0; i < nb; ++i, y += QK8_1) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < QK8_1; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

// ------------------------------------------- Q4_0 ... Q5_1, imatrix
// llama-quantize with an importance matrix: ggml's quantize_row_<t>_impl.
// Each block of 32 is fit weighted by qw * sqrt(sigma2 + x^2), sigma2 the
// mean x^2 of the whole row (n is one row): Q4_0/Q5_0 symmetric by
// make_qx_quants (levels -8..7 / -16..15, stored +8 / +16), Q4_1/Q5_1 with
// a min by make_qkx3_quants (with weights, make_qkx2_quants' search; levels
// 0..15 / 0..31, m = -min). d and m are the fits' values rounded to F16;
// the levels are the fits' (not rounded again at the F16 scale).

namespace {

float row_sigma2(const float* x, int64_t n) {
  float sum_x2 = 0;
  for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
  return sum_x2 / n;
}

void block_weights(const float* xb, const float* qw, float sigma2, float* weight) {
  for (int j = 0; j < 32; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
}

// quantize_row_q4_0_impl / quantize_row_q5_0_impl: d = make_qx_quants(32, nmax, ...).
template <class Block>
void quantize_symmetric_weighted(const float* x, Block* y, int64_t n, const float* quant_weights, int nmax) {
  const float sigma2 = row_sigma2(x, n);
  float weight[32];
  int8_t L[32];
  for (int64_t ib = 0; ib < n / 32; ++ib) {
    const float* xb = x + 32 * ib;
    block_weights(xb, quant_weights + 32 * ib, sigma2, weight);
    const float d = make_qx_quants(32, nmax, xb, L, weight);
    y[ib].d = fp32_to_fp16(d);
    if constexpr (requires { y[ib].qh; }) {
      pack_levels(L, y[ib].qs, y[ib].qh);
    } else {
      pack_levels(L, y[ib].qs, nullptr);
    }
  }
}

// quantize_row_q4_1_impl / quantize_row_q5_1_impl: make_qkx3_quants(32, nmax, ..., -0.9, 0.05, 36).
template <class Block>
void quantize_offset_weighted(const float* x, Block* y, int64_t n, const float* quant_weights, int nmax) {
  const float sigma2 = row_sigma2(x, n);
  float weight[32];
  uint8_t L[32], Laux[32];
  for (int64_t ib = 0; ib < n / 32; ++ib) {
    const float* xb = x + 32 * ib;
    block_weights(xb, quant_weights + 32 * ib, sigma2, weight);
    float min = 0;
    const float d = make_qkx2_quants(32, nmax, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false);
    y[ib].d = fp32_to_fp16(d);
    y[ib].m = fp32_to_fp16(-min);
    if constexpr (requires { y[ib].qh; }) {
      pack_levels(L, y[ib].qs, y[ib].qh);
    } else {
      pack_levels(L, y[ib].qs, nullptr);
    }
  }
}

}  // namespace

void quantize_q4_0_weighted(const float* x, void* y, int64_t n, const float* quant_weights) {
  quantize_symmetric_weighted(x, static_cast<block_q4_0*>(y), n, quant_weights, 8);
}

void quantize_q5_0_weighted(const float* x, void* y, int64_t n, const float* quant_weights) {
  quantize_symmetric_weighted(x, static_cast<block_q5_0*>(y), n, quant_weights, 16);
}

void quantize_q4_1_weighted(const float* x, void* y, int64_t n, const float* quant_weights) {
  quantize_offset_weighted(x, static_cast<block_q4_1*>(y), n, quant_weights, 15);
}

void quantize_q5_1_weighted(const float* x, void* y, int64_t n, const float* quant_weights) {
  quantize_offset_weighted(x, static_cast<block_q5_1*>(y), n, quant_weights, 31);
}

// ---------------------------------------------------------------- IQ4_NL
// block_iq4_nl: d (fp16), 16 bytes of 4-bit indices into kvalues_iq4nl;
// value = kvalues_iq4nl[q] * d.

// Weight quantizer: what llama-quantize does without an importance matrix,
// ggml's quantize_iq4_nl -> quantize_row_iq4_nl_impl(QK4_NL, 32, 16, ...,
// ntry = 7). Per block, weights w_j = x_j^2; start from d = max/127 and
// refine d = sum(w q x)/sum(w q^2) (the least-squares scale for the chosen
// levels); then try the 15 inverse scales (itry - 127)/max, itry in [-7, 7],
// keeping the one whose levels maximise sum(w q x)^2 / sum(w q^2); finally
// re-pick the levels for the kept d. A block with max |x| < 1e-15 gets d = 0
// (its levels are then all index 8, as ggml writes them).
void quantize_row_iq4_nl(const float* x, void* vy, int64_t n) { quantize_iq4_nl_weighted(x, vy, n, nullptr); }

// The same with an importance matrix (quantize_iq4_nl with quant_weights):
// weights qw * sqrt(sigma2 + x^2), sigma2 twice the block's mean x^2.
void quantize_iq4_nl_weighted(const float* x, void* vy, int64_t n, const float* quant_weights) {
  auto* y = static_cast<block_iq4_nl*>(vy);
  const int64_t nb = n / QK4_NL;
  constexpr int ntry = 7;
  for (int64_t i = 0; i < nb; ++i, x += QK4_NL) {
    float weight[QK4_NL];
    if (quant_weights != nullptr) {
      float sigma2 = 0;
      for (int j = 0; j < QK4_NL; ++j) sigma2 += x[j] * x[j];
      sigma2 *= 2.f / QK4_NL;
      block_weights(x, quant_weights + QK4_NL * i, sigma2, weight);
    } else {
      for (int j = 0; j < QK4_NL; ++j) weight[j] = x[j] * x[j];
    }
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK4_NL; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    float d = 0.0f;
    if (amax >= 1e-15f) {  // GROUP_MAX_EPS
      const float v0 = static_cast<float>(kvalues_iq4nl[0]);
      d = -max / v0;
      float id = 1 / d;
      float sumqx = 0, sumq2 = 0;
      for (int j = 0; j < QK4_NL; ++j) {
        const float q = kvalues_iq4nl[best_index_iq4nl(id * x[j])];
        const float w = weight[j];
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
      }
      d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
      float best = d * sumqx;
      for (int itry = -ntry; itry <= ntry; ++itry) {
        id = static_cast<float>(itry + kvalues_iq4nl[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < QK4_NL; ++j) {
          const float q = kvalues_iq4nl[best_index_iq4nl(id * x[j])];
          const float w = weight[j];
          sumqx += w * q * x[j];
          sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          d = sumqx / sumq2;
          best = d * sumqx;
        }
      }
    }
    y[i].d = fp32_to_fp16(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    uint8_t L[QK4_NL];
    for (int j = 0; j < QK4_NL; ++j) L[j] = static_cast<uint8_t>(best_index_iq4nl(id * x[j]));
    for (int j = 0; j < QK4_NL / 2; ++j) y[i].qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
  }
}

// ggml's dequantize_row_iq4_nl.
void dequantize_row_iq4_nl(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_iq4_nl*>(vx);
  const int64_t nb = n / QK4_NL;
  for (int64_t i = 0; i < nb; ++i, y += QK4_NL) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < QK4_NL / 2; ++j) {
      y[j] = d * static_cast<float>(kvalues_iq4nl[x[i].qs[j] & 0x0F]);
      y[j + QK4_NL / 2] = d * static_cast<float>(kvalues_iq4nl[x[i].qs[j] >> 4]);
    }
  }
}

// ggml_vec_dot_iq4_nl_q8_0: w [n/32] block_iq4_nl, a [n/32] block_q8_0,
// in the Q4_0 order (the top of this file): per block the exact integer dot
// of the table values with the activation bytes, then
// acc = fma(float(isum), d_w * d_a, acc). That is ggml's own scalar
// ggml_vec_dot_iq4_nl_q8_0 (which adds d * isum unfused) and the order of
// its repacked iq4_nl_8x8 kernels; ggml's AVX2 vec_dot keeps lanes instead
// (not promised: DESIGN.md contract 1). It lets IQ4_NL matrices be kept as
// 8 interleaved rows (block_iq4_nlx8, interleave.hpp).
float vec_dot_iq4_nl_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_iq4_nl*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK4_NL; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j)
      isum += kvalues_iq4nl[w[i].qs[j] & 0x0F] * a[i].qs[j] + kvalues_iq4nl[w[i].qs[j] >> 4] * a[i].qs[j + 16];
    acc = std::fma(static_cast<float>(isum), fp16_to_fp32(w[i].d) * fp16_to_fp32(a[i].d), acc);
  }
  return acc;
}

// ---------------------------------------------------------------- MXFP4
// block_mxfp4 (OCP microscaling MXFP4, ggml v0.5.0): e, an E8M0 exponent
// byte, and 16 bytes of 4-bit E2M1 codes (byte j: element j low, j + 16
// high); value = kvalues_mxfp4[code] * 2^(e - 128) (the doubled E2M1 value
// times the halved scale, GGML_E8M0_TO_FP32_HALF). IQ4_NL's layout with
// another table and an exponent for a scale.

namespace {

// ggml's best_index_mxfp4: the first index i of kvalues_mxfp4 whose
// |kvalues_mxfp4[i] * d - x| is smallest (so 0 before 8, both zero; NaN x
// gives 0). The products are exact (small integers times a power of two).
inline uint8_t best_index_mxfp4(float x, float d) {
  uint8_t best = 0;
  float best_err = std::fabs(static_cast<float>(kvalues_mxfp4[0]) * d - x);
  for (uint8_t i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kvalues_mxfp4[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

// ggml's quantize_row_mxfp4_ref, what llama-quantize writes (MXFP4 takes no
// importance matrix): per block amax = max |x| (NaN skipped), e =
// floor(log2(amax)) - 2 + 127 (0 for an all-zero block), each element the
// nearest level of kvalues_mxfp4 * 2^(e - 128). The float -> uint8_t of e
// goes through int32 as x86's cvttss2si does (blocks with amax < 2^-125
// wrap, as ggml's do; an infinite amax gives e = 0); log2f is the C
// library's, as ggml calls it.
void quantize_row_mxfp4(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_mxfp4*>(vy);
  const int64_t nb = n / QK_MXFP4;
  for (int64_t i = 0; i < nb; ++i, x += QK_MXFP4) {
    float amax = 0.0f;
    for (int j = 0; j < QK_MXFP4; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    const uint8_t e = amax > 0.0f ? static_cast<uint8_t>(trunc_to_int(std::floor(std::log2(amax)) - 2.0f + 127.0f)) : 0;
    const float d = kE8M0Half.v[e];
    y[i].e = e;
    for (int j = 0; j < QK_MXFP4 / 2; ++j)
      y[i].qs[j] = static_cast<uint8_t>(best_index_mxfp4(x[j], d) | (best_index_mxfp4(x[j + QK_MXFP4 / 2], d) << 4));
  }
}

// ggml's dequantize_row_mxfp4: y = kvalues_mxfp4[code] * 2^(e - 128), exact.
void dequantize_row_mxfp4(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_mxfp4*>(vx);
  const int64_t nb = n / QK_MXFP4;
  for (int64_t i = 0; i < nb; ++i, y += QK_MXFP4) {
    const float d = kE8M0Half.v[x[i].e];
    for (int j = 0; j < QK_MXFP4 / 2; ++j) {
      y[j] = static_cast<float>(kvalues_mxfp4[x[i].qs[j] & 0x0F]) * d;
      y[j + QK_MXFP4 / 2] = static_cast<float>(kvalues_mxfp4[x[i].qs[j] >> 4]) * d;
    }
  }
}

// ggml_vec_dot_mxfp4_q8_0: w [n/32] block_mxfp4, a [n/32] block_q8_0, in
// the Q4_0 order as IQ4_NL above: per block the exact integer dot with the
// table values, then acc = fma(float(isum), d, acc) with d = fp16(d_a) *
// 2^(e - 128) (GGML_E8M0_TO_FP32_HALF). ggml's scalar
// ggml_vec_dot_mxfp4_q8_0 takes the same integers and scale (adding d *
// isum unfused), as does its repacked 8-row GEMM (the path llama.cpp v0.5.0
// takes for dense MXFP4 matrices on AVX2); its AVX2 vec_dot splits even
// and odd blocks over two accumulators (not promised: DESIGN.md contract 1).
// It lets MXFP4 matrices, gpt-oss's experts above all, be kept as 8
// interleaved rows (block_mxfp4x8, interleave.hpp).
float vec_dot_mxfp4_q8_0(int64_t n, const void* vw, const void* va) {
  const auto* w = static_cast<const block_mxfp4*>(vw);
  const auto* a = static_cast<const block_q8_0*>(va);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / QK_MXFP4; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j)
      isum += kvalues_mxfp4[w[i].qs[j] & 0x0F] * a[i].qs[j] + kvalues_mxfp4[w[i].qs[j] >> 4] * a[i].qs[j + 16];
    acc = std::fma(static_cast<float>(isum), fp16_to_fp32(a[i].d) * kE8M0Half.v[w[i].e], acc);
  }
  return acc;
}

}  // namespace synapse::quant

// Per-format kernels behind quant.hpp's dispatch (quant.cpp). One set per ggml
// type, named as ggml names them:
//   quantize_row_<t>(x, y, n)     n floats -> n/QK blocks
//   dequantize_row_<t>(x, y, n)   n/QK blocks -> n floats
//   vec_dot_<t>_<vt>(n, w, a)     weight row (type t) . activation row (type vt)
// n is a multiple of the type's block size (callers check). Block layouts are
// ggml-common.h's block_* structs, byte for byte.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "quant/fp16.hpp"

namespace synapse::quant {

inline constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK8_1 = 32;
inline constexpr int QK4_NL = 32;
inline constexpr int QK_MXFP4 = 32;
inline constexpr int QK_K = 256;
inline constexpr int K_SCALE_SIZE = 12;

struct block_q4_0 { ggml_fp16_t d; uint8_t qs[QK4_0 / 2]; };
struct block_q4_1 { ggml_fp16_t d; ggml_fp16_t m; uint8_t qs[QK4_1 / 2]; };
struct block_q5_0 { ggml_fp16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; };
struct block_q5_1 { ggml_fp16_t d; ggml_fp16_t m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; };
struct block_q8_0 { ggml_fp16_t d; int8_t qs[QK8_0]; };
struct block_q8_1 { ggml_fp16_t d; ggml_fp16_t s; int8_t qs[QK8_1]; };  // s = d * sum(qs)
struct block_iq4_nl { ggml_fp16_t d; uint8_t qs[QK4_NL / 2]; };
struct block_mxfp4 { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; };  // e: E8M0 exponent; qs: E2M1 codes
struct block_q2_K { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; ggml_fp16_t d; ggml_fp16_t dmin; };
struct block_q3_K { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; ggml_fp16_t d; };
struct block_q4_K { ggml_fp16_t d; ggml_fp16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; };
struct block_q5_K { ggml_fp16_t d; ggml_fp16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };
struct block_q6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; ggml_fp16_t d; };
struct block_q8_K { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };
struct block_iq4_xs { ggml_fp16_t d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; };
struct block_tq1_0 { uint8_t qs[(QK_K - 4 * QK_K / 64) / 5]; uint8_t qh[QK_K / 64]; ggml_fp16_t d; };
struct block_tq2_0 { uint8_t qs[QK_K / 4]; ggml_fp16_t d; };
// The IQ1/IQ2/IQ3 formats: indices into the lattices of iq_grids.hpp, signs,
// and 3- or 4-bit sub-block scales (iq_quants.cpp says where each field's
// bits go). IQ1_M has no d field: its F16 scale is the top 4 bits of each
// of the four uint16 words of `scales`.
struct block_iq2_xxs { ggml_fp16_t d; uint16_t qs[QK_K / 8]; };
struct block_iq2_xs { ggml_fp16_t d; uint16_t qs[QK_K / 8]; uint8_t scales[QK_K / 32]; };
struct block_iq2_s { ggml_fp16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t scales[QK_K / 32]; };
struct block_iq3_xxs { ggml_fp16_t d; uint8_t qs[3 * QK_K / 8]; };
struct block_iq3_s {
  ggml_fp16_t d;
  uint8_t qs[QK_K / 4];
  uint8_t qh[QK_K / 32];
  uint8_t signs[QK_K / 8];
  uint8_t scales[QK_K / 64];
};
struct block_iq1_s { ggml_fp16_t d; uint8_t qs[QK_K / 8]; uint16_t qh[QK_K / 32]; };
struct block_iq1_m { uint8_t qs[QK_K / 8]; uint8_t qh[QK_K / 16]; uint8_t scales[QK_K / 32]; };

static_assert(sizeof(block_q4_0) == 18 && sizeof(block_q4_1) == 20 && sizeof(block_q5_0) == 22);
static_assert(sizeof(block_q5_1) == 24 && sizeof(block_q8_0) == 34 && sizeof(block_q8_1) == 36);
static_assert(sizeof(block_iq4_nl) == 18 && sizeof(block_q2_K) == 84 && sizeof(block_q3_K) == 110);
static_assert(sizeof(block_q4_K) == 144 && sizeof(block_q5_K) == 176 && sizeof(block_q6_K) == 210);
static_assert(sizeof(block_q8_K) == 292 && sizeof(block_iq4_xs) == 136);
static_assert(sizeof(block_tq1_0) == 54 && sizeof(block_tq2_0) == 66);
static_assert(sizeof(block_mxfp4) == 17);
static_assert(sizeof(block_iq2_xxs) == 66 && sizeof(block_iq2_xs) == 74 && sizeof(block_iq2_s) == 82);
static_assert(sizeof(block_iq3_xxs) == 98 && sizeof(block_iq3_s) == 110);
static_assert(sizeof(block_iq1_s) == 50 && sizeof(block_iq1_m) == 56);

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7) of
// a Q4_K/Q5_K block from its 12 packed bytes. Bytes 0-3 hold scales 0-3 (low
// 6 bits), bytes 4-7 mins 0-3; bytes 8-11 hold the low nibbles of scale and
// min 4-7, whose top 2 bits sit in bits 6-7 of bytes 0-3 (scales) and 4-7 (mins).
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

// The 8 scales and 8 mins of a Q4_K/Q5_K block (get_scale_min_k4 of each
// sub-block).
inline void unpack_scale_min_k4(const uint8_t* packed, uint8_t* scales, uint8_t* mins) {
  for (int j = 0; j < QK_K / 32; ++j) get_scale_min_k4(j, packed, &scales[j], &mins[j]);
}

// The 256 signed 6-bit values (-32..31) of a Q6_K block, in order
// (dequantize_row_q6_K's unpacking: per 128-element half, ql's low then
// high nibbles of bytes 0..63 with the 2-bit fields of qh's 32 bytes).
inline void unpack_q6_K(const block_q6_K& b, int8_t* a) {
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  for (int j = 0; j < QK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      a[l + 0] = static_cast<int8_t>(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      a[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      a[l + 64] = static_cast<int8_t>(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      a[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
    a += 128;
    ql += 64;
    qh += 32;
  }
}

// One block's step of the 8-lane dot orders: acc[l] = fma(d, lane[l],
// acc[l]) for the 8 exact int32 lanes (_mm256_fmadd_ps(vd,
// _mm256_cvtepi32_ps(lanes), acc) lane by lane).
inline void fma_lanes(float acc[8], float d, const int32_t lane[8]) {
  for (int l = 0; l < 8; ++l) acc[l] = std::fma(d, static_cast<float>(lane[l]), acc[l]);
}

// ggml's hsum_float_8 (arch/x86/quants.c: high half + low half, then movehl,
// then movehdup), the last step of the 8-lane dot orders the scalar
// references follow: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
inline float hsum_float_8(const float a[8]) {
  const float r0 = a[4] + a[0], r1 = a[5] + a[1], r2 = a[6] + a[2], r3 = a[7] + a[3];
  return (r0 + r2) + (r1 + r3);
}

// _mm512_reduce_add_ps as GCC 12 expands it (the compiler of the llama.cpp
// v0.5.0 reference build: avx512fintrin.h, __MM512_REDUCE_OP): the high 8
// lanes plus the low 8, then hsum_float_8's tree on those 8 sums. This is
// the horizontal sum of llamafile's tinyBLAS on AVX-512 and of ggml's
// AVX-512 vec_dot / soft_max loops.
inline float hsum_float_16(const float a[16]) {
  float h[8];
  for (int i = 0; i < 8; ++i) h[i] = a[i + 8] + a[i];
  return hsum_float_8(h);
}

// The 16 non-uniform levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                             1,    13,   25,  38,  53,  69,  89,  113};

// The 16 E2M1 values of MXFP4 doubled (ggml's kvalues_mxfp4: 0, 0.5, 1, 1.5,
// 2, 3, 4, 6 and their negatives, times 2), so they are int8; the block
// scale is halved to match (kE8M0Half).
inline constexpr int8_t kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// ggml's GGML_E8M0_TO_FP32_HALF (ggml-impl.h) for every exponent byte e:
// 2^(e - 128), e = 0 and 1 as the subnormals 2^-128 and 2^-127, e = 255 as
// 2^127 (ggml gives no NaN). A table (ggml_table_f32_e8m0_half) because the
// kernels read it per block; data, so any translation unit may use it.
struct E8M0HalfTable {
  float v[256];
};
inline constexpr E8M0HalfTable kE8M0Half = [] {
  E8M0HalfTable t{};
  for (uint32_t e = 0; e < 256; ++e) t.v[e] = std::bit_cast<float>(e < 2 ? 0x00200000u << e : (e - 1) << 23);
  return t;
}();

#define SYNAPSE_DECLARE_FORMAT(t)                                  \
  void quantize_row_##t(const float* x, void* y, int64_t n);       \
  void dequantize_row_##t(const void* x, float* y, int64_t n);

// float.cpp
SYNAPSE_DECLARE_FORMAT(f32)
SYNAPSE_DECLARE_FORMAT(f16)
SYNAPSE_DECLARE_FORMAT(bf16)
float vec_dot_f32_f32(int64_t n, const void* w, const void* a);
// ggml_vec_dot_f32 itself as the AVX-512 reference build runs it (4 x 16
// fused lanes over the multiples of 64, their sum, then the tail), where an op
// calls it directly (ggml_gated_delta_net) rather than through a matrix
// product (vec_dot_f32_f32's order for n % 16 == 0 is the product's).
// Thread-safe (pure).
float vec_dot_f32_ggml(int64_t n, const float* x, const float* y);
float vec_dot_f16_f16(int64_t n, const void* w, const void* a);
float vec_dot_bf16_bf16(int64_t n, const void* w, const void* a);

// legacy.cpp: 32-element blocks
SYNAPSE_DECLARE_FORMAT(q4_0)
SYNAPSE_DECLARE_FORMAT(q4_1)
SYNAPSE_DECLARE_FORMAT(q5_0)
SYNAPSE_DECLARE_FORMAT(q5_1)
SYNAPSE_DECLARE_FORMAT(q8_0)
void quantize_row_q8_0_ref(const float* x, void* y, int64_t n);  // weights (llama-quantize)
SYNAPSE_DECLARE_FORMAT(q8_1)
SYNAPSE_DECLARE_FORMAT(iq4_nl)
SYNAPSE_DECLARE_FORMAT(mxfp4)
// With an importance matrix (quant_weights: [n], one row: the row's mean
// square sets sigma2; ggml's quantize_row_<t>_impl, quantize_iq4_nl).
void quantize_q4_0_weighted(const float* x, void* y, int64_t n, const float* quant_weights);
void quantize_q4_1_weighted(const float* x, void* y, int64_t n, const float* quant_weights);
void quantize_q5_0_weighted(const float* x, void* y, int64_t n, const float* quant_weights);
void quantize_q5_1_weighted(const float* x, void* y, int64_t n, const float* quant_weights);
void quantize_iq4_nl_weighted(const float* x, void* y, int64_t n, const float* quant_weights);
float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_q4_1_q8_1(int64_t n, const void* w, const void* a);
float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_q5_1_q8_1(int64_t n, const void* w, const void* a);
float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_iq4_nl_q8_0(int64_t n, const void* w, const void* a);
float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* a);

// k_quants.cpp: 256-element super-blocks
SYNAPSE_DECLARE_FORMAT(q2_K)
SYNAPSE_DECLARE_FORMAT(q3_K)
SYNAPSE_DECLARE_FORMAT(q4_K)
SYNAPSE_DECLARE_FORMAT(q5_K)
SYNAPSE_DECLARE_FORMAT(q6_K)
// With an importance matrix (quant_weights: [n]; ggml's quantize_row_<t>_impl;
// k_quants.cpp and k_quants_imatrix.cpp).
void quantize_q2_K_weighted(const float* x, void* y, int64_t n, const float* quant_weights);
void quantize_q4_K_weighted(const float* x, void* y, int64_t n, const float* quant_weights);
void quantize_q5_K_weighted(const float* x, void* y, int64_t n, const float* quant_weights);
void quantize_q3_K_weighted(const float* x, void* y, int64_t n, const float* quant_weights);
void quantize_q6_K_weighted(const float* x, void* y, int64_t n, const float* quant_weights);
SYNAPSE_DECLARE_FORMAT(q8_K)
SYNAPSE_DECLARE_FORMAT(iq4_xs)
// quantize_iq4_xs with an importance matrix ([n] floats) or without (nullptr).
void quantize_iq4_xs_weighted(const float* x, void* y, int64_t n, const float* quant_weights);
float vec_dot_q2_K_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_q3_K_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_q4_K_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_q5_K_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_q6_K_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_iq4_xs_q8_K(int64_t n, const void* w, const void* a);

// ternary.cpp
SYNAPSE_DECLARE_FORMAT(tq1_0)
SYNAPSE_DECLARE_FORMAT(tq2_0)
float vec_dot_tq1_0_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_tq2_0_q8_K(int64_t n, const void* w, const void* a);

// iq_quants.cpp: the IQ1/IQ2/IQ3 formats (no quantizer: dequantize and dot).
// The activation rows are quantize_row_q8_K's, whose values lie in
// [-127, 127]: the SIMD dots of IQ2/IQ3 (AVX2, AVX-512) move the weights'
// signs onto the activations and equal these references only there (a
// negated -128 stays -128); the IQ1 ones are exact for every byte.
void dequantize_row_iq2_xxs(const void* x, float* y, int64_t n);
void dequantize_row_iq2_xs(const void* x, float* y, int64_t n);
void dequantize_row_iq2_s(const void* x, float* y, int64_t n);
void dequantize_row_iq3_xxs(const void* x, float* y, int64_t n);
void dequantize_row_iq3_s(const void* x, float* y, int64_t n);
void dequantize_row_iq1_s(const void* x, float* y, int64_t n);
void dequantize_row_iq1_m(const void* x, float* y, int64_t n);
float vec_dot_iq2_xxs_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_iq2_xs_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_iq2_s_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_iq3_xxs_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_iq3_s_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_iq1_s_q8_K(int64_t n, const void* w, const void* a);
float vec_dot_iq1_m_q8_K(int64_t n, const void* w, const void* a);

#undef SYNAPSE_DECLARE_FORMAT

}  // namespace synapse::quant

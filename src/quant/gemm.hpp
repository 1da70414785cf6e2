// Multi-row dot kernels: several weight rows against several activation
// rows (the prefill / batched-decode matrix product, kernels::matmul), each
// weight block unpacked (nibbles, high bits, scales) once for a few
// activation rows and each activation block loaded once for a few weight
// rows; and the decode kernels, several weight rows against one activation
// row.
//
// Contract (DESIGN.md contract 2): y[m * y_stride + r] is bit-identical to
// vec_dot_kernel(t, isa)(n, w + r * w_stride, a + m * a_stride) for every
// r, m — the same integer products and the same float operations in the
// same order per output element — so the result does not depend on how many
// rows are dotted together or how they are tiled (tests/quant/gemm_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/simd.hpp"
#include "synapse/types.hpp"

namespace synapse::quant {

struct IqDecoded;  // iq_decoded.hpp

// n: elements per row (a multiple of t's block size). w: n_w weight rows of
// type t, w_stride bytes apart. a: n_rows activation rows of type
// vec_dot_type(t), a_stride bytes apart, each passed through
// gemm_pack_kernel(t, isa) when that is not null. y: the output of weight
// row r and activation row m goes to y[m * y_stride + r].
using GemmFn = void (*)(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                        int64_t n_rows, float* y, size_t y_stride);

// The multi-row kernel of weight type t for `isa`, or nullptr when `isa` has
// none for t (callers then loop the vec_dot kernel: gemm() below does).
// Isa::avx2 kernels exist on x86-64 for every weight type but BF16, TQ1_0
// and the interleaved formats Q4_0, Q5_0 and Q4_K (their matrices run
// interleave.hpp's gemm_x8_kernel; a plain row of theirs loops the
// vec_dot; Q8_0, Q6_K, IQ4_NL and MXFP4 matrices are interleaved too, but
// keep these kernels for the matrices that stay plain); Isa::avx512 has the
// AVX2 ones, with its own for Q4_1, Q5_1, Q2_K, Q3_K, Q5_K and IQ4_XS
// (gemm_avx512.cpp) and the lattice formats (iq_gemm_avx512.cpp); Isa::scalar
// has none (the scalar vec_dot loop is the reference).
GemmFn gemm_kernel(GgmlType t, Isa isa) noexcept;

// Converts one activation row of n elements (type vec_dot_type(t), src) to
// the layout gemm_kernel(t, isa) and gemv_kernel(t, isa) read,
// gemm_packed_row_size(t, isa, n) bytes at dst, or nullptr when the kernels
// read the rows as they are (AVX2 Q5_K/Q6_K read plain Q8_K rows). The
// interleaved kernels have their own (interleave.hpp x8_pack_kernel).
using GemmPackFn = void (*)(int64_t n, const void* src, void* dst);
GemmPackFn gemm_pack_kernel(GgmlType t, Isa isa) noexcept;

// Bytes of one packed activation row of n elements (what gemm_pack_kernel
// writes, and the stride the kernels are given): row_size(vec_dot_type(t), n)
// unless the pack changes the size. AVX2 Q8_0: 96 bytes per 32 elements
// (gemm_packs.hpp's PackedQ8_0: the activation block's float scale and its
// int16-widened bytes).
size_t gemm_packed_row_size(GgmlType t, Isa isa, int64_t n) noexcept;

// Decode-side multi-row kernel: several weight rows against ONE activation
// row. y[r] = vec_dot_kernel(t, isa)(n, w + r * w_stride, a) for
// r = 0..n_w-1, bit for bit (the same contract as GemmFn). Per weight type
// the kernel runs one row at a time (the matrix read as one sequential
// stream, software-prefetched ahead) or, where a block holds too little work
// to cover its fused multiply-add chain's latency (F16, F32), a few
// rows side by side (gemm_tiles.hpp, by_row_groups).
// a: one activation row of type vec_dot_type(t), passed through
// gemm_pack_kernel(t, isa) when that is not null (the same layout as GemmFn).
using GemvFn = void (*)(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, float* y);

// The decode kernel of weight type t for `isa`, or nullptr when there is
// none (callers then loop the vec_dot kernel).
GemvFn gemv_kernel(GgmlType t, Isa isa) noexcept;

// y[m * y_stride + r] = vec_dot_kernel(t, isa)(n, w + r * w_stride, a + m * a_stride)
// for r = 0..n_w-1, m = 0..n_rows-1 (a: plain rows, packed here when the
// kernel needs it), through gemm_kernel(t, isa) when there is one, else by
// looping the vec_dot kernel. Throws Error(unsupported) when t has no dot.
void gemm(GgmlType t, Isa isa, int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a,
          size_t a_stride, int64_t n_rows, float* y, size_t y_stride);

namespace avx2 {
// Defined in gemm_avx2.cpp (x86-64 only; the K-quants in gemm_k_avx2.cpp).
// Same contract as GemmFn, each equal per output to the avx2::vec_dot_*
// kernel of the same type.
void pack_q8_0_for_q8_0(int64_t n, const void* src, void* dst);
void gemm_q8_0_q8_0(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                    int64_t n_rows, float* y, size_t y_stride);
void gemm_q5_K_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                    int64_t n_rows, float* y, size_t y_stride);
void gemm_q6_K_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                    int64_t n_rows, float* y, size_t y_stride);
// legacy_dot_avx2.cpp / k_quants_avx2.cpp: one weight row against tiles of
// 4 activation rows (no packing), the same tile code as the vec_dot.
void gemm_q4_1_q8_1(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                    int64_t n_rows, float* y, size_t y_stride);
void gemm_q5_1_q8_1(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                    int64_t n_rows, float* y, size_t y_stride);
void gemm_iq4_nl_q8_0(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                      int64_t n_rows, float* y, size_t y_stride);
void gemm_mxfp4_q8_0(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                     int64_t n_rows, float* y, size_t y_stride);
void gemm_q2_K_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                    int64_t n_rows, float* y, size_t y_stride);
void gemm_q3_K_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                    int64_t n_rows, float* y, size_t y_stride);
void gemm_iq4_xs_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                      int64_t n_rows, float* y, size_t y_stride);
void gemm_tq2_0_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                     int64_t n_rows, float* y, size_t y_stride);
// iq_quants_avx2.cpp: the lattice formats. Fewer than 8 activation rows:
// one weight row against tiles of up to 4, the same tile code as their
// vec_dot; more: the weight rows decoded to int8 once per call
// (iq_decoded.hpp) and run in register tiles of 2 weight rows x 4
// activation rows (TypeKernels::gemm_rows asks matmul for 64 a call).
// decode_<t>_rows writes n_w rows' nb blocks each, row r at out + r * nb
// (the AVX-512 GEMMs decode with it).
#define SYNAPSE_DECLARE_IQ_GEMM(t)                                                                            \
  void gemm_##t##_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a,          \
                       size_t a_stride, int64_t n_rows, float* y, size_t y_stride);                          \
  void decode_##t##_rows(const uint8_t* w, size_t w_stride, int64_t n_w, int64_t nb, IqDecoded* out);
SYNAPSE_DECLARE_IQ_GEMM(iq2_xxs)
SYNAPSE_DECLARE_IQ_GEMM(iq2_xs)
SYNAPSE_DECLARE_IQ_GEMM(iq2_s)
SYNAPSE_DECLARE_IQ_GEMM(iq3_xxs)
SYNAPSE_DECLARE_IQ_GEMM(iq3_s)
SYNAPSE_DECLARE_IQ_GEMM(iq1_s)
SYNAPSE_DECLARE_IQ_GEMM(iq1_m)
#undef SYNAPSE_DECLARE_IQ_GEMM
void gemm_f16_f16(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                  int64_t n_rows, float* y, size_t y_stride);
void gemm_f32_f32(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                  int64_t n_rows, float* y, size_t y_stride);
// Same contract as GemvFn, each equal per row to the avx2::vec_dot_* kernel.
void gemv_q8_0_q8_0(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, float* y);
void gemv_f16_f16(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, float* y);
void gemv_f32_f32(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, float* y);
// Defined in gemm_k_avx2.cpp: one weight row at a time against one plain
// Q8_K row; per row the order of
// avx2::vec_dot_<t>_q8_K (ggml's AVX2 ggml_vec_dot_<t>_q8_K).
void gemv_q5_K_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, float* y);
void gemv_q6_K_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, float* y);
}  // namespace avx2
namespace avx512 {
// gemm_avx512.cpp: plain Q4_1 / Q5_1 / Q2_K / Q3_K / Q5_K / IQ4_XS
// rows two at a time per 512-bit register, the same contract and bits as
// the avx2:: kernels of the type.
void gemm_q2_K_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                    int64_t n_rows, float* y, size_t y_stride);
void gemm_q3_K_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                    int64_t n_rows, float* y, size_t y_stride);
void gemm_q4_1_q8_1(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                    int64_t n_rows, float* y, size_t y_stride);
void gemm_q5_1_q8_1(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                    int64_t n_rows, float* y, size_t y_stride);
void gemm_q5_K_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                    int64_t n_rows, float* y, size_t y_stride);
void gemm_iq4_xs_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a, size_t a_stride,
                      int64_t n_rows, float* y, size_t y_stride);
// iq_gemm_avx512.cpp: the lattice formats' GEMMs (8 activation rows or
// more: weight rows decoded by avx2::decode_<t>_rows, 4 x 4 VNNI tiles;
// fewer: IQ2/IQ3 a block's signs as masks and 64 values a step, IQ1 the
// avx2:: kernel), and the IQ2/IQ3 dots (the few-rows kernel on one row).
#define SYNAPSE_DECLARE_IQ_GEMM512(t)                                                                         \
  void gemm_##t##_q8_K(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a,          \
                       size_t a_stride, int64_t n_rows, float* y, size_t y_stride);
#define SYNAPSE_DECLARE_IQ_DOT512(t) float vec_dot_##t##_q8_K(int64_t n, const void* w, const void* a);
SYNAPSE_DECLARE_IQ_GEMM512(iq2_xxs)
SYNAPSE_DECLARE_IQ_GEMM512(iq2_xs)
SYNAPSE_DECLARE_IQ_GEMM512(iq2_s)
SYNAPSE_DECLARE_IQ_GEMM512(iq3_xxs)
SYNAPSE_DECLARE_IQ_GEMM512(iq3_s)
SYNAPSE_DECLARE_IQ_GEMM512(iq1_s)
SYNAPSE_DECLARE_IQ_GEMM512(iq1_m)
SYNAPSE_DECLARE_IQ_DOT512(iq2_xxs)
SYNAPSE_DECLARE_IQ_DOT512(iq2_xs)
SYNAPSE_DECLARE_IQ_DOT512(iq2_s)
SYNAPSE_DECLARE_IQ_DOT512(iq3_xxs)
SYNAPSE_DECLARE_IQ_DOT512(iq3_s)
// The IQ3 forms for CPUs with AVX-512 VBMI (cpu_has_avx512_vbmi): the grid
// entries of a block looked up with vpermi2b; the same results.
void gemm_iq3_xxs_q8_K_vbmi(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a,
                            size_t a_stride, int64_t n_rows, float* y, size_t y_stride);
void gemm_iq3_s_q8_K_vbmi(int64_t n, const uint8_t* w, size_t w_stride, int64_t n_w, const uint8_t* a,
                          size_t a_stride, int64_t n_rows, float* y, size_t y_stride);
float vec_dot_iq3_xxs_q8_K_vbmi(int64_t n, const void* w, const void* a);
float vec_dot_iq3_s_q8_K_vbmi(int64_t n, const void* w, const void* a);
#undef SYNAPSE_DECLARE_IQ_GEMM512
#undef SYNAPSE_DECLARE_IQ_DOT512
}  // namespace avx512

}  // namespace synapse::quant

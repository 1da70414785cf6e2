// Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4, Q4_K and Q6_K matrices kept as groups of
// 8 interleaved rows (block_q4_0x8, block_q5_0x8, block_q8_0x8,
// block_iq4_nlx8, block_mxfp4x8, block_q4_Kx8, block_q6_Kx8), made once
// when a model is loaded (MoE experts included: each expert's matrix is
// interleaved on its own), and the matrix-product kernels that read them.
//
// Why: in the block order Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 and Q4_K use
// (legacy.cpp's Q4_0 order for the 32-element formats, k_quants.cpp for
// Q4_K) each output takes, per block,
// the block's whole exact integer dot and one fused multiply-add (Q4_K:
// two, the scales' and the mins'; Q6_K keeps 8 lanes: chunk c of a block
// is then lane c of the 8 rows, one cvt + mul + fma per chunk). With 8 rows
// interleaved, one 256-bit register holds 4 consecutive elements of each of
// 8 rows (one int32 lane per row), so the integer dots of 8 rows come out in
// the 8 lanes of one register and a single cvt + mul + fma serves 8
// outputs; and the 8 rows are one sequential stream through memory. (ggml-cpu's repack.cpp does the same
// for its q4_0_8x8 and q4_K_8x8 kernels; the byte placement here is
// synapse's own, chosen for AVX2.)
//
// block_q4_0x8 (144 bytes, the size of 8 block_q4_0): d[l] is row l's
// block scale; for chunk c = 0..3, byte qs[32c + 4l + j] is byte 4c + j of
// row l's block_q4_0 qs, i.e. element 4c + j in its low nibble and element
// 16 + 4c + j in its high nibble. Group g (rows 8g..8g+7) of a matrix of
// n elements per row holds its n/32 blocks one after the other, at byte
// 8 * g * row_bytes: for Q4_0 and Q5_0 the interleaved matrix has the plain
// one's size and every group starts where its first row did (Q4_K's groups
// are 32 bytes per block larger: interleaved_group_bytes).
//
// block_q5_0x8 (176 bytes, the size of 8 block_q5_0): d as in block_q4_0x8;
// for chunk c = 0..3, byte qs[32c + 4l + j] holds row l's element 4c + j
// as its whole 5-bit digit (bits 0..4: low nibble and fifth bit) and the
// low 3 bits of its element 16 + 4c + j (bits 5..7); qh[4l + j] holds in
// bits 2c, 2c + 1 the top 2 bits of that element 16 + 4c + j. One mask
// gives a chunk's first 16 digits, a shift, two masks and an or its other
// 16 (the layout before, nibbles in qs and the fifth bits in qh, took 4 and
// 5 operations).
//
// block_iq4_nlx8 (144 bytes, the size of 8 block_iq4_nl) and block_mxfp4x8
// (136 bytes, the size of 8 block_mxfp4): block_q4_0x8's layout, the
// nibbles indices into kvalues_iq4nl / kvalues_mxfp4; d[l] row l's F16
// scale, e[l] row l's E8M0 exponent (scale 2^(e - 128)). The AVX2 MXFP4
// kernel looks up the levels plus 12 (0..24, unsigned) and takes 12 * (sum
// of the activation bytes) off, as Q4_0's takes 8; the AVX2 IQ4_NL kernel
// multiplies the signed levels with Q8_0's sign trick (no level is -128).
// The AVX-512 kernels look up the levels plus 12 (MXFP4) or plus 128
// (IQ4_NL, taken off as Q8_0's bytes plus 128 are) for vpdpbusd.
//
// block_q8_0x8 (272 bytes, the size of 8 block_q8_0): d[l] row l's block
// scale; for chunk c = 0..7, qs[32c + 4l + j] = row l's byte 4c + j. Q8_0
// takes legacy.cpp's Q4_0 order (one exact int32 per block and row, one
// fused multiply-add), so chunk c of the 8 rows adds lane c's 4 products to
// the 8 rows' block sums. The AVX2 kernel multiplies with
// _mm256_sign_epi8(w, a) against |a|, exact unless a weight byte is -128
// (its negation overflows): rows_interleave_exactly says whether a matrix
// may be interleaved.
//
// Every kernel here gives, per output, exactly vec_dot_<t>_<vt> of the
// plain row (the same exact integers per block, the same float operations in
// the same order), so an interleaved matrix and a plain one give the same
// bits (tests/quant/interleave_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/formats.hpp"
#include "quant/gemm.hpp"
#include "quant/simd.hpp"
#include "synapse/types.hpp"

namespace synapse::quant {

inline constexpr int64_t kInterleave = 8;  // rows per group

struct block_q4_0x8 {
  ggml_fp16_t d[8];
  uint8_t qs[128];
};
static_assert(sizeof(block_q4_0x8) == 8 * sizeof(block_q4_0));

struct block_q5_0x8 {
  ggml_fp16_t d[8];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(block_q5_0x8) == 8 * sizeof(block_q5_0));

struct block_q8_0x8 {
  ggml_fp16_t d[8];
  int8_t qs[256];
};
static_assert(sizeof(block_q8_0x8) == 8 * sizeof(block_q8_0));

struct block_iq4_nlx8 {
  ggml_fp16_t d[8];
  uint8_t qs[128];
};
static_assert(sizeof(block_iq4_nlx8) == 8 * sizeof(block_iq4_nl));

struct block_mxfp4x8 {
  uint8_t e[8];
  uint8_t qs[128];
};
static_assert(sizeof(block_mxfp4x8) == 8 * sizeof(block_mxfp4));

// block_q4_Kx8 (1184 bytes, 32 more than 8 block_q4_K: the 6-bit scales
// and mins unpacked to bytes): d[l], dmin[l] row l's super-block scales;
// sc[s][l] row l's scale of sub-block s (0..7); mp[t][l] = row l's mins of
// sub-blocks 2t and 2t+1; for each 64-element group g = 0..3 and chunk
// c = 0..7, qs[32 (8g + c) + 4l + j] = byte 32g + 4c + j of row l's qs
// (low nibble: element 64g + 4c + j, of sub-block 2g; high nibble: element
// 64g + 32 + 4c + j, of sub-block 2g + 1).
struct block_q4_Kx8 {
  ggml_fp16_t d[8];
  ggml_fp16_t dmin[8];
  uint8_t sc[8][8];
  uint8_t mp[4][8][2];
  uint8_t qs[1024];
};
static_assert(sizeof(block_q4_Kx8) == 1184);

// block_q6_Kx8 (1680 bytes, the size of 8 block_q6_K): keeps k_quants.cpp's
// 8-lane Q6_K order (lane q of chunk c =
// elements 32c + 4q .. +3, scale of sub-block 2c + q / 4; per lane one
// exact int32 over the block's 8 chunks, one float accumulator, then
// hsum_float_8). Register (c, q) = those 4 elements of the 8 rows, byte
// 4l + j = row l's element 32c + 4q + j. d[l] row l's scale, sc[s][l] its
// int8 scale of sub-block s. The 6-bit digits (value + 32) of chunk c's
// registers q6x8_register(h, f) (f = 0..3; half h = 0, 1) are the bytes
// q[c][h][0..2][4l + j]: with d_f the digit of register (h, f),
//   q[c][h][0] = d_0 | (d_2 & 3) << 6,  q[c][h][1] = d_1 | (d_3 & 3) << 6,
//   q[c][h][2] = d_2 >> 2 | (d_3 >> 2) << 4,
// so one mask gives d_0 (d_1) and a shift, two masks and an or d_2 (d_3):
// 12 vector operations per half chunk (nibbles and a field of top bits,
// the layout before, took 17).
struct block_q6_Kx8 {
  ggml_fp16_t d[8];
  int8_t sc[16][8];
  uint8_t q[8][2][3][32];
};
static_assert(sizeof(block_q6_Kx8) == 8 * sizeof(block_q6_K));

// The register q (0..7) of a chunk that is digit f (0..3) of half h, and
// back: q = 2h + f % 2 + 4 (f / 2).
constexpr int q6x8_register(int h, int f) { return 2 * h + f % 2 + 4 * (f / 2); }
constexpr int q6x8_half(int q) { return (q % 4) / 2; }
constexpr int q6x8_digit(int q) { return q % 2 + 2 * (q / 4); }

// Bytes of one interleaved group of 8 rows of n elements of type t: 8 *
// row_size(t, n) for Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 and Q6_K, n / 256 *
// 1184 for Q4_K. An
// interleaved matrix of n_out rows takes (n_out / 8) groups, then its
// n_out % 8 last rows plain (row_size(t, n) each).
size_t interleaved_group_bytes(GgmlType t, int64_t n) noexcept;

// True when a matrix of weight type t with n_out rows can be interleaved:
// t is Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4, Q4_K or Q6_K and n_out is a
// positive multiple of 8.
bool can_interleave(GgmlType t, int64_t n_out) noexcept;

// True when the interleaved kernels of every ISA give vec_dot's bits for
// these n_rows rows of type t (n elements, row_bytes apart): always, except
// for Q8_0 rows holding a weight byte of -128 (block_q8_0x8 above; ggml's
// quantizer never writes one, as it rounds to [-127, 127]). interleave_rows
// refuses rows for which this is false.
bool rows_interleave_exactly(GgmlType t, int64_t n, const uint8_t* src, size_t row_bytes, int64_t n_rows) noexcept;

// True when `isa` has a kernel of its own for interleaved matrices of type t
// (AVX2 and AVX-512 for Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4, Q4_K and Q6_K):
// model loading interleaves only then, since elsewhere the
// plain rows run as fast through the vec_dot kernels and need no copy.
bool interleave_pays(GgmlType t, Isa isa) noexcept;

// Writes the n_out rows of src (type t, n elements each, row_bytes apart)
// as n_out / 8 interleaved groups into dst (n_out / 8 *
// interleaved_group_bytes(t, n) bytes; must not overlap src) and returns
// true; returns false, writing nothing, when
// !rows_interleave_exactly(t, n, src, row_bytes, n_out) (the rows must stay
// plain). Throws Error(invalid_argument) when !can_interleave(t, n_out) or
// row_bytes is not row_size(t, n).
bool interleave_rows(GgmlType t, int64_t n, const uint8_t* src, size_t row_bytes, int64_t n_out, uint8_t* dst);

// Row r (any row of a whole group, not only a group's first; r and n are
// not checked: callers pass r < the matrix's grouped rows and its n) of an
// interleaved matrix whose group 0 starts at `data`: its n elements as
// floats into y, the values dequantize_row_<t> gives for the plain row
// (ggml_get_rows). Throws Error(invalid_argument) for a type that is never
// interleaved.
void dequantize_interleaved_row(GgmlType t, const uint8_t* data, int64_t r, float* y, int64_t n);

// The product of n_groups interleaved groups (starting at w,
// interleaved_group_bytes(t, n) apart) with n_rows activation rows
// (a_stride bytes apart, of type vt = vec_dot_type(t), passed through
// x8_pack_kernel(t, isa) when that is not null): y[m * y_stride + 8 * g +
// l] = vec_dot_<t>_<vt> of row 8g + l and activation row m, bit for bit.
// n: elements per row (a multiple of t's block size, 32 or 256). Used for
// decode (n_rows 1) and prefill alike.
using GemmX8Fn = void (*)(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                          int64_t n_rows, float* y, size_t y_stride);

// The kernel for interleaved matrices of type t on `isa`: its own where
// interleave_pays(t, isa), else the scalar reference (so every ISA can run
// a matrix interleaved under another); nullptr when t cannot be interleaved.
GemmX8Fn gemm_x8_kernel(GgmlType t, Isa isa) noexcept;

// Converts one activation row of n elements (type vec_dot_type(t), src) to
// the layout gemm_x8_kernel(t, isa) reads, x8_packed_row_size(t, isa, n)
// bytes at dst; nullptr when the kernel reads the rows as they are (the
// scalar references).
GemmPackFn x8_pack_kernel(GgmlType t, Isa isa) noexcept;

// Bytes of one row x8_pack_kernel(t, isa) writes, the stride the kernel is
// given: row_size(vec_dot_type(t), n) when there is no pack, else per block
// of the activation type the sizes below.
size_t x8_packed_row_size(GgmlType t, Isa isa, int64_t n) noexcept;

// The AVX2 packs' bytes per block (x8_packs.hpp asserts its structs'
// sizes against these): Q4_0 / Q5_0 / MXFP4 40 per 32 elements
// (PackedQ8x8: the bytes, the float scale, the offset term), Q8_0 and
// IQ4_NL 72 (PackedQ8x8 with the
// offset 128, then PackedQ8x8m: |bytes|), Q4_K 288 per 256 (PackedQ8Kx8: the float scale,
// the int16 sums of 32 bytes, the bytes), Q6_K 528 per 256 (PackedQ8Kx8o:
// the float scale, the bytes, the offset term 32 * (a0 + a1) per byte pair).
inline constexpr size_t kPackQ4_0x8 = 40, kPackQ8_0x8 = 72, kPackQ4_Kx8 = 288, kPackQ6_Kx8 = 528;

// The GemmX8Fn kernels every ISA with its own provides (one per
// interleaved type), declared in its namespace.
#define SYNAPSE_DECLARE_X8_KERNELS()                                                                        \
  void gemm_q4_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride, \
                        int64_t n_rows, float* y, size_t y_stride);                                         \
  void gemm_q5_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride, \
                        int64_t n_rows, float* y, size_t y_stride);                                         \
  void gemm_q8_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride, \
                        int64_t n_rows, float* y, size_t y_stride);                                         \
  void gemm_q4_Kx8_q8_K(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride, \
                        int64_t n_rows, float* y, size_t y_stride);                                         \
  void gemm_q6_Kx8_q8_K(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride, \
                        int64_t n_rows, float* y, size_t y_stride);                                         \
  void gemm_iq4_nlx8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride, \
                          int64_t n_rows, float* y, size_t y_stride);                                       \
  void gemm_mxfp4x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,  \
                         int64_t n_rows, float* y, size_t y_stride);

namespace scalar {
SYNAPSE_DECLARE_X8_KERNELS()
}  // namespace scalar
namespace avx2 {
// interleave_avx2.cpp: activation rows in x8_pack_kernel(t, avx2)'s
// layout (pack_q8_0_for_q4_0x8 / _q5_0x8, 40 bytes per block;
// pack_q8_0_for_q8_0x8, 72, also for IQ4_NL; pack_q8_0_for_mxfp4x8, 40).
SYNAPSE_DECLARE_X8_KERNELS()
void pack_q8_0_for_q4_0x8(int64_t n, const void* src, void* dst);
void pack_q8_0_for_mxfp4x8(int64_t n, const void* src, void* dst);
void pack_q8_0_for_q5_0x8(int64_t n, const void* src, void* dst);
void pack_q8_0_for_q8_0x8(int64_t n, const void* src, void* dst);
// Q8_K rows for gemm_q4_Kx8_q8_K: 288 bytes per 256 elements (the float d,
// the 8 sums of 32 bytes as int16, the bytes).
void pack_q8_K_for_q4_Kx8(int64_t n, const void* src, void* dst);
// Q8_K rows for gemm_q6_Kx8_q8_K: 528 bytes per 256 elements.
void pack_q8_K_for_q6_Kx8(int64_t n, const void* src, void* dst);
}  // namespace avx2
namespace avx512 {
// interleave_avx512.cpp: the AVX-512 VNNI kernels, reading the AVX2 packs
// (x8_pack_kernel(t, Isa::avx512) is x8_pack_kernel(t, Isa::avx2)).
SYNAPSE_DECLARE_X8_KERNELS()
}  // namespace avx512

}  // namespace synapse::quant

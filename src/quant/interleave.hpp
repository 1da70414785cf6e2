// Q4_0 and Q5_0 matrices kept as groups of 8 interleaved rows
// (block_q4_0x8, block_q5_0x8), made once when a model is loaded, and the
// matrix-product kernels that read them.
//
// Why: in legacy.cpp's Q4_0 order (Q5_0's too) each output takes, per
// 32-element block, the block's whole exact integer dot and one fused
// multiply-add. With 8
// rows interleaved, one 256-bit register holds 4 consecutive elements of
// each of 8 rows (one int32 lane per row), so the integer dots of 8 rows
// come out in the 8 lanes of one register and a single cvt + mul + fma
// serves 8 outputs; and the 8 rows are one sequential stream through
// memory. (ggml-cpu's repack.cpp does the same for its q4_0_8x8 kernels;
// the byte placement here is synapse's own, chosen for AVX2.)
//
// block_q4_0x8 (144 bytes, the size of 8 block_q4_0): d[l] is row l's
// block scale; for chunk c = 0..3, byte qs[32c + 4l + j] is byte 4c + j of
// row l's block_q4_0 qs, i.e. element 4c + j in its low nibble and element
// 16 + 4c + j in its high nibble. Group g (rows 8g..8g+7) of a matrix of
// n elements per row holds its n/32 blocks one after the other, at byte
// 8 * g * row_bytes: the interleaved matrix has the plain one's size and
// every group starts where its first row did.
//
// block_q5_0x8 (176 bytes, the size of 8 block_q5_0): d and qs as in
// block_q4_0x8; qh as 8 little-endian uint32 words, word 2c bit 4l + j =
// the fifth bit of row l's element 4c + j, word 2c + 1 bit 4l + j = that
// of its element 16 + 4c + j (the bits of each chunk's low and high
// nibbles, in the chunk's byte order).
//
// Every kernel here gives, per output, exactly vec_dot_<t>_q8_0 of the
// plain row (the same exact integer per block, the same float operations in
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

// True when a matrix of weight type t with n_out rows can be interleaved:
// t is Q4_0 or Q5_0 and n_out is a positive multiple of 8.
bool can_interleave(GgmlType t, int64_t n_out) noexcept;

// True when `isa` has a kernel of its own for interleaved matrices of type t
// (AVX2 for Q4_0 and Q5_0): model loading interleaves only then, since elsewhere the
// plain rows run as fast through the vec_dot kernels and need no copy.
bool interleave_pays(GgmlType t, Isa isa) noexcept;

// Writes the n_out rows of src (type t, n elements each, row_bytes apart)
// as n_out / 8 interleaved groups into dst (n_out * row_bytes bytes; must
// not overlap src). Throws Error(invalid_argument) when !can_interleave(t,
// n_out) or row_bytes is not row_size(t, n).
void interleave_rows(GgmlType t, int64_t n, const uint8_t* src, size_t row_bytes, int64_t n_out, uint8_t* dst);

// Row r (any row of a whole group, not only a group's first; r and n are
// not checked: callers pass r < the matrix's grouped rows and its n) of an
// interleaved matrix whose group 0 starts at `data`: its n elements as
// floats into y, the values
// dequantize_row_<t> gives for the plain row (ggml_get_rows). Throws
// Error(invalid_argument) for a type that is never interleaved.
void dequantize_interleaved_row(GgmlType t, const uint8_t* data, size_t row_bytes, int64_t r, float* y, int64_t n);

// The product of n_groups interleaved groups (starting at w, 8 * row_bytes
// apart) with n_rows activation rows (a_stride bytes apart, of type
// vec_dot_type(t), passed through gemm_pack_kernel(t, isa) when that is not
// null): y[m * y_stride + 8 * g + l] = vec_dot_<t>_q8_0 of row 8g + l and
// activation row m, bit for bit. n: elements per row (a multiple of 32).
// Used for decode (n_rows 1) and prefill alike.
using GemmX8Fn = void (*)(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                          int64_t n_rows, float* y, size_t y_stride);

// The kernel for interleaved matrices of type t on `isa`: its own where
// interleave_pays(t, isa), else the scalar reference (so every ISA can run
// a matrix interleaved under another); nullptr when t cannot be interleaved.
GemmX8Fn gemm_x8_kernel(GgmlType t, Isa isa) noexcept;

namespace scalar {
void gemm_q4_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                      int64_t n_rows, float* y, size_t y_stride);
void gemm_q5_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                      int64_t n_rows, float* y, size_t y_stride);
}  // namespace scalar
namespace avx2 {
// interleave_avx2.cpp: activation rows in gemm_pack_kernel(t, avx2)'s
// layout (pack_q8_0_for_q4_0x8 / _q5_0x8, 40 bytes per block).
void gemm_q4_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                      int64_t n_rows, float* y, size_t y_stride);
void gemm_q5_0x8_q8_0(int64_t n, const uint8_t* w, int64_t n_groups, const uint8_t* a, size_t a_stride,
                      int64_t n_rows, float* y, size_t y_stride);
void pack_q8_0_for_q4_0x8(int64_t n, const void* src, void* dst);
void pack_q8_0_for_q5_0x8(int64_t n, const void* src, void* dst);
}  // namespace avx2

}  // namespace synapse::quant

// One table of quant kernels per instruction-set level (scalar reference,
// x86 AVX2, x86 AVX-512 VNNI, ARM NEON), the process's choice among them
// made once (active_isa, cpu.hpp), and every quant dispatch a look-up in it:
// vec_dot_kernel, quantize_kernel (simd.hpp), gemm_kernel, gemv_kernel,
// gemm_pack_kernel (gemm.hpp), gemm_x8_kernel, x8_pack_kernel,
// interleave_pays (interleave.hpp) read kernel_table(isa). The layer above
// (kernels) keeps its own table for attention and the element-wise ops
// (kernels/ops_table.hpp), chosen from the same active_isa().
//
// How the levels share kernels (docs/PERFORMANCE.md, "Kernel tables"):
// every table starts as a copy of the level below and replaces the entries
// it has kernels of its own for, type by type (quant.cpp). scalar < avx2 <
// avx512 on x86-64; scalar < neon on ARM64. The AVX-512 table keeps the
// AVX2 dots, decode kernels, quantizers and packs, and replaces the prefill
// GEMMs: the interleaved ones (interleave_avx512.cpp: two 8-row groups
// per zmm register, across outputs, with vpdpbusd) and the plain ones of Q4_1, Q5_1, Q2_K,
// Q3_K, Q5_K and IQ4_XS (gemm_avx512.cpp: two weight rows per zmm register)
// and of the lattice formats IQ1_S ... IQ3_S (iq_gemm_avx512.cpp: rows
// decoded to int8 by the AVX2 decoder, 4 x 4 vpdpwssd tiles). Those are
// genuinely different kernels, not the AVX2 source recompiled wider (VNNI
// replaces most maddubs + madd pairs, and the operands are laid out for it), so
// compiling one x86 source once per level (or Highway's fixed-width tags)
// would not have given them. The dots and decode kernels have no AVX-512
// version (decode is memory-bound: wider registers are not where its time
// goes), nor have the plain GEMMs of TQ2_0, F16, F32, and of Q8_0 and Q6_K
// matrices left plain (not interleaved). A table entry
// that a level does not replace points to the level below, so every entry
// of every table is a kernel its CPU runs.
//
// Generic code only: no instruction-set translation unit includes this
// header (its inline code would be compiled with their flags, LAYERS.md).
//
// Thread-safety: the tables are built once, on first use (function-local
// statics), and never change; any thread may read them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/cpu.hpp"
#include "quant/gemm.hpp"
#include "quant/interleave.hpp"
#include "quant/simd.hpp"
#include "synapse/types.hpp"

namespace synapse::quant {

// Everything one level runs for one ggml type t: a row of the table. A new
// weight format is one row of the scalar table (quant.cpp) and, where a
// level has kernels of its own for it, one line of that level's table.
// Null: t has no such kernel on any level (vec_dot, quantize, dequantize),
// or this level has none and callers take the fallback each field names.
struct TypeKernels {
  // ggml's vec_dot_type(t): the type activation rows are converted to
  // before a dot with weight type t (the same on every level).
  GgmlType vec_dot_type = GgmlType::F32;
  DequantizeFn dequantize = nullptr;  // row of t -> floats
  QuantizeFn quantize = nullptr;      // floats -> row of t
  VecDotFn vec_dot = nullptr;         // ggml_vec_dot_<t>_<vec_dot_type> (null: t is no weight type)
  GemmFn gemm = nullptr;              // plain multi-row kernel (null: loop vec_dot)
  // Activation rows per call of gemm the kernel wants at least (0: matmul's
  // own tile, the rows that fit 24 KiB): the lattice formats' GEMMs decode
  // their weight rows to int8 once per call, so the more rows a call has,
  // the less the decoding costs a row. Never changes a result.
  uint8_t gemm_rows = 0;
  GemvFn gemv = nullptr;              // decode kernel (null: loop vec_dot)
  GemmPackFn gemm_pack = nullptr;     // activation pack gemm/gemv read (null: plain rows)
  uint16_t gemm_pack_bytes = 0;       // bytes of gemm_pack's output per block of vec_dot_type (0: no pack)
  GemmX8Fn gemm_x8 = nullptr;         // interleaved-matrix kernel (null: never interleaved)
  GemmPackFn x8_pack = nullptr;       // activation pack gemm_x8 reads (null: plain rows)
  uint16_t x8_pack_bytes = 0;         // per block of vec_dot_type, as gemm_pack_bytes
  bool interleave = false;            // interleave_pays: gemm_x8 is this level's own
  // Shape of gemm_x8's register tile, which kernels::matmul blocks for:
  // groups of 8 weight rows per panel a multiple of x8_group_step (AVX-512:
  // 4 for the kernels that take two pairs of groups, else 2: a zmm holds two
  // groups, a lone group runs the AVX2 kernel), activation rows per tile a
  // multiple of x8_tile_step (the rows of the kernel's main tile, so no
  // tile ends in a narrower one; for the AVX2 and AVX-512 Q6_K kernels,
  // which unpack each weight block once for all the rows of a call, their 32
  // rows per call); both set (1 to 64) wherever gemm_x8 is.
  // Never changes a result (every output keeps its own reduction order).
  uint8_t x8_group_step = 0;
  uint8_t x8_tile_step = 0;
};

// One row per type id (GgmlType value); ids without kernels (removed,
// integer and IQ types) hold an empty row.
struct KernelTable {
  Isa isa = Isa::scalar;
  TypeKernels rows[kGgmlTypeCount] = {};

  // The row of t; an empty one for an id outside the enum (a file's
  // unknown type id).
  const TypeKernels& row(GgmlType t) const noexcept {
    static constexpr TypeKernels kNone{};
    const auto i = static_cast<size_t>(t);
    return i < kGgmlTypeCount ? rows[i] : kNone;
  }
};

// Bytes of one activation row of n elements as row.gemm_pack /
// row.x8_pack writes it (the stride the kernels are given):
// row_size(row.vec_dot_type, n) when there is no pack, else n / (block size
// of vec_dot_type) * the pack's bytes per block. n: a multiple of t's block
// size.
size_t gemm_packed_row_size(const TypeKernels& row, int64_t n) noexcept;
size_t x8_packed_row_size(const TypeKernels& row, int64_t n) noexcept;

// The table of `isa`. Every level has one on every target; a level whose
// kernels this build does not carry (neon on x86-64, avx2 / avx512 on
// ARM64) is the scalar table under its own name. Its entries may need
// instructions this CPU lacks: check cpu_runs(isa) before calling them.
const KernelTable& kernel_table(Isa isa) noexcept;

// kernel_table(active_isa()): the table the forward pass runs.
const KernelTable& active_kernels() noexcept;

// The levels whose kernels this binary carries, lowest first: scalar, then
// avx2 and avx512 on x86-64, or neon on ARM64 (what the table tests
// iterate). n_out: how many.
const Isa* compiled_isas(size_t* n_out) noexcept;

}  // namespace synapse::quant

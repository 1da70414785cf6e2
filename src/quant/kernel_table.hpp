// One table of quant kernels per instruction-set level (scalar reference,
// x86 AVX2, x86 AVX-512 VNNI, ARM NEON), the process's choice among them
// made once (active_isa, simd.hpp), and every quant dispatch a look-up in it:
// vec_dot_kernel, quantize_kernel (simd.hpp), gemm_kernel, gemv_kernel,
// gemm_pack_kernel (gemm.hpp), gemm_x8_kernel, x8_pack_kernel,
// interleave_pays (interleave.hpp) read kernel_table(isa). The layer above
// (kernels) keeps its own table for attention and the element-wise ops
// (kernels/ops_table.hpp), chosen from the same active_isa().
//
// How the levels share kernels (docs/PERFORMANCE.md, "Kernel tables"):
// every table starts as a copy of the level below and replaces the entries
// it has kernels of its own for. scalar < avx2 < avx512 on x86-64; scalar <
// neon on ARM64. The AVX-512 table keeps the AVX2 dots, decode kernels,
// quantizers and packs, and replaces the prefill GEMMs: the interleaved ones
// (interleave_avx512.cpp: two 8-row groups per zmm register, across
// outputs, with vpdpbusd) and the plain ones of Q4_1, Q5_1, IQ4_NL, Q2_K, Q3_K,
// Q5_K and IQ4_XS (gemm_k_avx512.cpp: two weight rows per zmm register). Those are
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
// Thread-safety: the tables are built once, on first use (function-local
// statics), and never change; any thread may read them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/gemm.hpp"
#include "quant/interleave.hpp"
#include "quant/simd.hpp"
#include "synapse/types.hpp"

namespace synapse::quant {

// Entries per type-indexed array: GgmlType values 0 .. 35 (TQ2_0).
inline constexpr size_t kTypeSlots = 36;

struct KernelTable {
  Isa isa = Isa::scalar;
  // Per weight type t (index static_cast<size_t>(t)); null where t has none.
  VecDotFn vec_dot[kTypeSlots] = {};       // ggml_vec_dot_<t>_<vec_dot_type(t)>
  QuantizeFn quantize[kTypeSlots] = {};    // row converter to type t
  GemmFn gemm[kTypeSlots] = {};            // plain multi-row kernel (null: loop vec_dot)
  GemvFn gemv[kTypeSlots] = {};            // decode kernel (null: loop vec_dot)
  GemmPackFn gemm_pack[kTypeSlots] = {};   // activation pack gemm/gemv read (null: plain rows)
  // Bytes of gemm_pack's output per block of vec_dot_type(t) (0: no pack).
  uint16_t gemm_pack_bytes[kTypeSlots] = {};
  GemmX8Fn gemm_x8[kTypeSlots] = {};       // interleaved-matrix kernel (null: never interleaved)
  GemmPackFn x8_pack[kTypeSlots] = {};     // activation pack gemm_x8 reads (null: plain rows)
  uint16_t x8_pack_bytes[kTypeSlots] = {};  // per block of vec_dot_type(t), as gemm_pack_bytes
  bool interleave[kTypeSlots] = {};        // interleave_pays: gemm_x8 is this level's own
  // Shape of gemm_x8[t]'s register tile, which kernels::matmul blocks for:
  // groups of 8 weight rows per panel a multiple of x8_group_step[t] (AVX-512:
  // 4 for the kernels that take two pairs of groups, else 2: a zmm holds two
  // groups, a lone group runs the AVX2 kernel), activation rows per tile a
  // multiple of x8_tile_step[t] (the rows of the kernel's main tile, so no
  // tile ends in a narrower one; for the AVX2 and AVX-512 Q6_K kernels,
  // which unpack each weight block once for all the rows of a call, their 32
  // rows per call); both set (1 to 64) wherever gemm_x8[t] is.
  // Never changes a result (every output keeps its own reduction order).
  uint8_t x8_group_step[kTypeSlots] = {};
  uint8_t x8_tile_step[kTypeSlots] = {};
};

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

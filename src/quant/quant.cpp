// The kernel table of each level (kernel_table.hpp): the scalar rows, one
// line per type (kScalarRows: its activation type and the references of
// formats.hpp), each SIMD level's own kernels laid over the level below,
// and the look-ups into them (quant.hpp, simd.hpp). Which level runs is
// chosen in cpu.cpp.
#include "quant/quant.hpp"

#include <cstdlib>
#include <new>
#include <string>

#include "quant/formats.hpp"
#include "quant/gemm_packs.hpp"
#include "quant/iq_quantize.hpp"
#include "quant/kernel_table.hpp"
#include "quant/simd.hpp"
#include "synapse/error.hpp"

namespace synapse::quant {
namespace {

using G = GgmlType;

size_t index(GgmlType t) { return static_cast<size_t>(t); }

// The scalar row of one type: ggml's vec_dot_type pairing, the converters
// and the dot of formats.hpp, and for the types kept interleaved the
// scalar kernel of their interleaved matrices (interleave.cpp), so that a
// matrix interleaved under one table runs under any other.
struct ScalarRow {
  GgmlType type, vec_dot_type;
  DequantizeFn dequantize;
  QuantizeFn quantize;
  VecDotFn vec_dot;
  GemmX8Fn gemm_x8;
};

// vec_dot_type: ggml/src/ggml-cpu/ggml-cpu.c, type_traits_cpu[] (llama.cpp
// c392e509; MXFP4: v0.5.0). Q8_1 and Q8_K are activation types only (no dot
// as a weight).
constexpr ScalarRow kScalarRows[] = {
    {G::F32, G::F32, dequantize_row_f32, quantize_row_f32, vec_dot_f32_f32, nullptr},
    {G::F16, G::F16, dequantize_row_f16, quantize_row_f16, vec_dot_f16_f16, nullptr},
    {G::BF16, G::BF16, dequantize_row_bf16, quantize_row_bf16, vec_dot_bf16_bf16, nullptr},
    {G::Q4_0, G::Q8_0, dequantize_row_q4_0, quantize_row_q4_0, vec_dot_q4_0_q8_0, scalar::gemm_q4_0x8_q8_0},
    {G::Q4_1, G::Q8_1, dequantize_row_q4_1, quantize_row_q4_1, vec_dot_q4_1_q8_1, nullptr},
    {G::Q5_0, G::Q8_0, dequantize_row_q5_0, quantize_row_q5_0, vec_dot_q5_0_q8_0, scalar::gemm_q5_0x8_q8_0},
    {G::Q5_1, G::Q8_1, dequantize_row_q5_1, quantize_row_q5_1, vec_dot_q5_1_q8_1, nullptr},
    {G::Q8_0, G::Q8_0, dequantize_row_q8_0, quantize_row_q8_0, vec_dot_q8_0_q8_0, scalar::gemm_q8_0x8_q8_0},
    {G::Q8_1, G::Q8_1, dequantize_row_q8_1, quantize_row_q8_1, nullptr, nullptr},
    {G::IQ4_NL, G::Q8_0, dequantize_row_iq4_nl, quantize_row_iq4_nl, vec_dot_iq4_nl_q8_0, scalar::gemm_iq4_nlx8_q8_0},
    {G::Q2_K, G::Q8_K, dequantize_row_q2_K, quantize_row_q2_K, vec_dot_q2_K_q8_K, nullptr},
    {G::Q3_K, G::Q8_K, dequantize_row_q3_K, quantize_row_q3_K, vec_dot_q3_K_q8_K, nullptr},
    {G::Q4_K, G::Q8_K, dequantize_row_q4_K, quantize_row_q4_K, vec_dot_q4_K_q8_K, scalar::gemm_q4_Kx8_q8_K},
    {G::Q5_K, G::Q8_K, dequantize_row_q5_K, quantize_row_q5_K, vec_dot_q5_K_q8_K, nullptr},
    {G::Q6_K, G::Q8_K, dequantize_row_q6_K, quantize_row_q6_K, vec_dot_q6_K_q8_K, scalar::gemm_q6_Kx8_q8_K},
    {G::Q8_K, G::Q8_K, dequantize_row_q8_K, quantize_row_q8_K, nullptr, nullptr},
    {G::IQ4_XS, G::Q8_K, dequantize_row_iq4_xs, quantize_row_iq4_xs, vec_dot_iq4_xs_q8_K, nullptr},
    {G::TQ1_0, G::Q8_K, dequantize_row_tq1_0, quantize_row_tq1_0, vec_dot_tq1_0_q8_K, nullptr},
    {G::TQ2_0, G::Q8_K, dequantize_row_tq2_0, quantize_row_tq2_0, vec_dot_tq2_0_q8_K, nullptr},
    {G::MXFP4, G::Q8_0, dequantize_row_mxfp4, quantize_row_mxfp4, vec_dot_mxfp4_q8_0, scalar::gemm_mxfp4x8_q8_0},
    // The lattice formats (iq_quants.cpp): no row quantizer here (ggml's
    // needs an importance matrix for most of them); quantize_weights runs
    // them (iq_quantize.cpp).
    {G::IQ2_XXS, G::Q8_K, dequantize_row_iq2_xxs, nullptr, vec_dot_iq2_xxs_q8_K, nullptr},
    {G::IQ2_XS, G::Q8_K, dequantize_row_iq2_xs, nullptr, vec_dot_iq2_xs_q8_K, nullptr},
    {G::IQ2_S, G::Q8_K, dequantize_row_iq2_s, nullptr, vec_dot_iq2_s_q8_K, nullptr},
    {G::IQ3_XXS, G::Q8_K, dequantize_row_iq3_xxs, nullptr, vec_dot_iq3_xxs_q8_K, nullptr},
    {G::IQ3_S, G::Q8_K, dequantize_row_iq3_s, nullptr, vec_dot_iq3_s_q8_K, nullptr},
    {G::IQ1_S, G::Q8_K, dequantize_row_iq1_s, nullptr, vec_dot_iq1_s_q8_K, nullptr},
    {G::IQ1_M, G::Q8_K, dequantize_row_iq1_m, nullptr, vec_dot_iq1_m_q8_K, nullptr},
};

KernelTable make_scalar_table() {
  KernelTable k;
  k.isa = Isa::scalar;
  for (const ScalarRow& s : kScalarRows) {
    TypeKernels& r = k.rows[index(s.type)];
    r.vec_dot_type = s.vec_dot_type;
    r.dequantize = s.dequantize;
    r.quantize = s.quantize;
    r.vec_dot = s.vec_dot;
    r.gemm_x8 = s.gemm_x8;
    // The reference's tiles, and the AVX2 kernels' unless their rows say
    // otherwise: any groups, 4 activation rows.
    if (s.gemm_x8 != nullptr) {
      r.x8_group_step = 1;
      r.x8_tile_step = 4;
    }
  }
  return k;
}

// Writes the kernels a level has of its own for type t (the fields set in
// `own`: not null, not 0) over t's row of k, a copy of the level below; the
// other fields keep the level below's. vec_dot_type is ggml's pairing, the
// same on every level, and is never overwritten.
[[maybe_unused]] void overlay(KernelTable& k, GgmlType t, const TypeKernels& own) {
  TypeKernels& r = k.rows[index(t)];
  const auto take = [](auto& to, auto from) {
    if (from) to = from;
  };
  take(r.dequantize, own.dequantize);
  take(r.quantize, own.quantize);
  take(r.vec_dot, own.vec_dot);
  take(r.gemm, own.gemm);
  take(r.gemm_rows, own.gemm_rows);
  take(r.gemv, own.gemv);
  take(r.gemm_pack, own.gemm_pack);
  take(r.gemm_pack_bytes, own.gemm_pack_bytes);
  take(r.gemm_x8, own.gemm_x8);
  take(r.x8_pack, own.x8_pack);
  take(r.x8_pack_bytes, own.x8_pack_bytes);
  take(r.interleave, own.interleave);
  take(r.x8_group_step, own.x8_group_step);
  take(r.x8_tile_step, own.x8_tile_step);
}

#if defined(__x86_64__) || defined(_M_X64)
// AVX2 (*_avx2.cpp): the scalar table with its dots, converters, plain and
// decode GEMMs, interleaved kernels and their activation packs
// (x8_packs.hpp; gemm_packs.hpp for the plain Q8_0 GEMM).
KernelTable make_avx2_table() {
  KernelTable k = make_scalar_table();
  k.isa = Isa::avx2;
  overlay(k, G::F32, {.vec_dot = avx2::vec_dot_f32_f32, .gemm = avx2::gemm_f32_f32, .gemv = avx2::gemv_f32_f32});
  overlay(k, G::F16,
          {.quantize = avx2::quantize_row_f16,
           .vec_dot = avx2::vec_dot_f16_f16,
           .gemm = avx2::gemm_f16_f16,
           .gemv = avx2::gemv_f16_f16});
  overlay(k, G::BF16, {.vec_dot = avx2::vec_dot_bf16_bf16});
  overlay(k, G::Q4_0,
          {.vec_dot = avx2::vec_dot_q4_0_q8_0,
           .gemm_x8 = avx2::gemm_q4_0x8_q8_0,
           .x8_pack = avx2::pack_q8_0_for_q4_0x8,
           .x8_pack_bytes = kPackQ4_0x8,
           .interleave = true});
  overlay(k, G::Q4_1, {.vec_dot = avx2::vec_dot_q4_1_q8_1, .gemm = avx2::gemm_q4_1_q8_1});
  overlay(k, G::Q5_0,
          {.vec_dot = avx2::vec_dot_q5_0_q8_0,
           .gemm_x8 = avx2::gemm_q5_0x8_q8_0,
           .x8_pack = avx2::pack_q8_0_for_q5_0x8,
           .x8_pack_bytes = kPackQ4_0x8,
           .interleave = true});
  overlay(k, G::Q5_1, {.vec_dot = avx2::vec_dot_q5_1_q8_1, .gemm = avx2::gemm_q5_1_q8_1});
  // Q8_0 matrices left plain (a weight byte of -128) run the plain GEMM on
  // activation rows packed as PackedQ8_0 (the float scale, the
  // int16-widened bytes). The interleaved kernel's prefill takes two groups
  // at a time (q8_0x8_tile<2, ...>), so its panels are whole pairs.
  overlay(k, G::Q8_0,
          {.quantize = avx2::quantize_row_q8_0,
           .vec_dot = avx2::vec_dot_q8_0_q8_0,
           .gemm = avx2::gemm_q8_0_q8_0,
           .gemv = avx2::gemv_q8_0_q8_0,
           .gemm_pack = avx2::pack_q8_0_for_q8_0,
           .gemm_pack_bytes = sizeof(avx2::PackedQ8_0),
           .gemm_x8 = avx2::gemm_q8_0x8_q8_0,
           .x8_pack = avx2::pack_q8_0_for_q8_0x8,
           .x8_pack_bytes = kPackQ8_0x8,
           .interleave = true,
           .x8_group_step = 2});
  overlay(k, G::Q8_1, {.quantize = avx2::quantize_row_q8_1});
  // IQ4_NL and MXFP4 matrices left plain (a number of rows that is not a
  // multiple of 8) run the plain GEMM; the interleaved kernels read Q8_0's
  // pack (IQ4_NL: the sign trick's magnitudes) and the offset pack of 12.
  overlay(k, G::IQ4_NL,
          {.vec_dot = avx2::vec_dot_iq4_nl_q8_0,
           .gemm = avx2::gemm_iq4_nl_q8_0,
           .gemm_x8 = avx2::gemm_iq4_nlx8_q8_0,
           .x8_pack = avx2::pack_q8_0_for_q8_0x8,
           .x8_pack_bytes = kPackQ8_0x8,
           .interleave = true});
  overlay(k, G::Q2_K, {.vec_dot = avx2::vec_dot_q2_K_q8_K, .gemm = avx2::gemm_q2_K_q8_K});
  overlay(k, G::Q3_K, {.vec_dot = avx2::vec_dot_q3_K_q8_K, .gemm = avx2::gemm_q3_K_q8_K});
  overlay(k, G::Q4_K,
          {.vec_dot = avx2::vec_dot_q4_K_q8_K,
           .gemm_x8 = avx2::gemm_q4_Kx8_q8_K,
           .x8_pack = avx2::pack_q8_K_for_q4_Kx8,
           .x8_pack_bytes = kPackQ4_Kx8,
           .interleave = true});
  overlay(k, G::Q5_K,
          {.vec_dot = avx2::vec_dot_q5_K_q8_K, .gemm = avx2::gemm_q5_K_q8_K, .gemv = avx2::gemv_q5_K_q8_K});
  // q6_Kx8_many unpacks each weight block once for all the rows of its call
  // (up to 32) and reads their activation blocks as it goes, so its tile is
  // 32 rows rather than the rows that fit 64 KiB (4 at 8192 columns).
  overlay(k, G::Q6_K,
          {.vec_dot = avx2::vec_dot_q6_K_q8_K,
           .gemm = avx2::gemm_q6_K_q8_K,
           .gemv = avx2::gemv_q6_K_q8_K,
           .gemm_x8 = avx2::gemm_q6_Kx8_q8_K,
           .x8_pack = avx2::pack_q8_K_for_q6_Kx8,
           .x8_pack_bytes = kPackQ6_Kx8,
           .interleave = true,
           .x8_tile_step = 32});
  overlay(k, G::Q8_K, {.quantize = avx2::quantize_row_q8_K});
  overlay(k, G::IQ4_XS, {.vec_dot = avx2::vec_dot_iq4_xs_q8_K, .gemm = avx2::gemm_iq4_xs_q8_K});
  overlay(k, G::TQ1_0, {.vec_dot = avx2::vec_dot_tq1_0_q8_K});
  overlay(k, G::TQ2_0, {.vec_dot = avx2::vec_dot_tq2_0_q8_K, .gemm = avx2::gemm_tq2_0_q8_K});
  overlay(k, G::MXFP4,
          {.vec_dot = avx2::vec_dot_mxfp4_q8_0,
           .gemm = avx2::gemm_mxfp4_q8_0,
           .gemm_x8 = avx2::gemm_mxfp4x8_q8_0,
           .x8_pack = avx2::pack_q8_0_for_mxfp4x8,
           .x8_pack_bytes = kPackQ4_0x8,
           .interleave = true});
  overlay(k, G::IQ2_XXS, {.vec_dot = avx2::vec_dot_iq2_xxs_q8_K, .gemm = avx2::gemm_iq2_xxs_q8_K, .gemm_rows = 64});
  overlay(k, G::IQ2_XS, {.vec_dot = avx2::vec_dot_iq2_xs_q8_K, .gemm = avx2::gemm_iq2_xs_q8_K, .gemm_rows = 64});
  overlay(k, G::IQ2_S, {.vec_dot = avx2::vec_dot_iq2_s_q8_K, .gemm = avx2::gemm_iq2_s_q8_K, .gemm_rows = 64});
  overlay(k, G::IQ3_XXS, {.vec_dot = avx2::vec_dot_iq3_xxs_q8_K, .gemm = avx2::gemm_iq3_xxs_q8_K, .gemm_rows = 64});
  overlay(k, G::IQ3_S, {.vec_dot = avx2::vec_dot_iq3_s_q8_K, .gemm = avx2::gemm_iq3_s_q8_K, .gemm_rows = 64});
  overlay(k, G::IQ1_S, {.vec_dot = avx2::vec_dot_iq1_s_q8_K, .gemm = avx2::gemm_iq1_s_q8_K, .gemm_rows = 64});
  overlay(k, G::IQ1_M, {.vec_dot = avx2::vec_dot_iq1_m_q8_K, .gemm = avx2::gemm_iq1_m_q8_K, .gemm_rows = 64});
  return k;
}

// AVX-512 VNNI: the AVX2 table with the interleaved prefill kernels of
// interleave_avx512.cpp, which read the AVX2 packs (x8_packs.hpp), and the
// plain prefill GEMMs of gemm_avx512.cpp (plain activation rows, as the
// AVX2 ones read). Its dots, decode kernels and quantizers are AVX2's
// (kernel_table.hpp says why). The interleaved kernels' tiles: Q4_0 / Q5_0 /
// Q8_0 / IQ4_NL / MXFP4 two pairs of groups by 5 rows, Q4_K two pairs by 3, Q6_K one pair by
// 32 rows (q6_many, for the reason make_avx2_table gives).
KernelTable make_avx512_table() {
  KernelTable k = make_avx2_table();
  k.isa = Isa::avx512;
  overlay(k, G::Q4_0, {.gemm_x8 = avx512::gemm_q4_0x8_q8_0, .x8_group_step = 4, .x8_tile_step = 5});
  overlay(k, G::Q4_1, {.gemm = avx512::gemm_q4_1_q8_1});
  overlay(k, G::Q5_0, {.gemm_x8 = avx512::gemm_q5_0x8_q8_0, .x8_group_step = 4, .x8_tile_step = 5});
  overlay(k, G::Q5_1, {.gemm = avx512::gemm_q5_1_q8_1});
  overlay(k, G::Q8_0, {.gemm_x8 = avx512::gemm_q8_0x8_q8_0, .x8_group_step = 4, .x8_tile_step = 5});
  overlay(k, G::IQ4_NL, {.gemm_x8 = avx512::gemm_iq4_nlx8_q8_0, .x8_group_step = 4, .x8_tile_step = 5});
  overlay(k, G::Q2_K, {.gemm = avx512::gemm_q2_K_q8_K});
  overlay(k, G::Q3_K, {.gemm = avx512::gemm_q3_K_q8_K});
  overlay(k, G::Q4_K, {.gemm_x8 = avx512::gemm_q4_Kx8_q8_K, .x8_group_step = 4, .x8_tile_step = 3});
  overlay(k, G::Q5_K, {.gemm = avx512::gemm_q5_K_q8_K});
  overlay(k, G::Q6_K, {.gemm_x8 = avx512::gemm_q6_Kx8_q8_K, .x8_group_step = 2, .x8_tile_step = 32});
  overlay(k, G::MXFP4, {.gemm_x8 = avx512::gemm_mxfp4x8_q8_0, .x8_group_step = 4, .x8_tile_step = 5});
  overlay(k, G::IQ4_XS, {.gemm = avx512::gemm_iq4_xs_q8_K});
  overlay(k, G::IQ2_XXS, {.vec_dot = avx512::vec_dot_iq2_xxs_q8_K, .gemm = avx512::gemm_iq2_xxs_q8_K});
  overlay(k, G::IQ2_XS, {.vec_dot = avx512::vec_dot_iq2_xs_q8_K, .gemm = avx512::gemm_iq2_xs_q8_K});
  overlay(k, G::IQ2_S, {.vec_dot = avx512::vec_dot_iq2_s_q8_K, .gemm = avx512::gemm_iq2_s_q8_K});
  overlay(k, G::IQ3_XXS, {.vec_dot = avx512::vec_dot_iq3_xxs_q8_K, .gemm = avx512::gemm_iq3_xxs_q8_K});
  overlay(k, G::IQ3_S, {.vec_dot = avx512::vec_dot_iq3_s_q8_K, .gemm = avx512::gemm_iq3_s_q8_K});
  overlay(k, G::IQ1_S, {.gemm = avx512::gemm_iq1_s_q8_K});
  overlay(k, G::IQ1_M, {.gemm = avx512::gemm_iq1_m_q8_K});
  if (cpu_has_avx512_vbmi()) {
    overlay(k, G::IQ3_XXS, {.vec_dot = avx512::vec_dot_iq3_xxs_q8_K_vbmi, .gemm = avx512::gemm_iq3_xxs_q8_K_vbmi});
    overlay(k, G::IQ3_S, {.vec_dot = avx512::vec_dot_iq3_s_q8_K_vbmi, .gemm = avx512::gemm_iq3_s_q8_K_vbmi});
  }
  return k;
}
#endif

#if defined(__aarch64__)
// NEON (ARMv8.2 dotprod, *_neon.cpp): the scalar table with its dots.
KernelTable make_neon_table() {
  KernelTable k = make_scalar_table();
  k.isa = Isa::neon;
  overlay(k, G::F32, {.vec_dot = neon::vec_dot_f32_f32});
  overlay(k, G::F16, {.vec_dot = neon::vec_dot_f16_f16});
  overlay(k, G::BF16, {.vec_dot = neon::vec_dot_bf16_bf16});
  overlay(k, G::Q4_0, {.vec_dot = neon::vec_dot_q4_0_q8_0});
  overlay(k, G::Q4_1, {.vec_dot = neon::vec_dot_q4_1_q8_1});
  overlay(k, G::Q5_0, {.vec_dot = neon::vec_dot_q5_0_q8_0});
  overlay(k, G::Q5_1, {.vec_dot = neon::vec_dot_q5_1_q8_1});
  overlay(k, G::Q8_0, {.vec_dot = neon::vec_dot_q8_0_q8_0});
  overlay(k, G::IQ4_NL, {.vec_dot = neon::vec_dot_iq4_nl_q8_0});
  overlay(k, G::Q2_K, {.vec_dot = neon::vec_dot_q2_K_q8_K});
  overlay(k, G::Q3_K, {.vec_dot = neon::vec_dot_q3_K_q8_K});
  overlay(k, G::Q4_K, {.vec_dot = neon::vec_dot_q4_K_q8_K});
  overlay(k, G::Q5_K, {.vec_dot = neon::vec_dot_q5_K_q8_K});
  overlay(k, G::Q6_K, {.vec_dot = neon::vec_dot_q6_K_q8_K});
  overlay(k, G::IQ4_XS, {.vec_dot = neon::vec_dot_iq4_xs_q8_K});
  overlay(k, G::TQ1_0, {.vec_dot = neon::vec_dot_tq1_0_q8_K});
  overlay(k, G::TQ2_0, {.vec_dot = neon::vec_dot_tq2_0_q8_K});
  overlay(k, G::MXFP4, {.vec_dot = neon::vec_dot_mxfp4_q8_0});
  overlay(k, G::IQ2_XXS, {.vec_dot = neon::vec_dot_iq2_xxs_q8_K});
  overlay(k, G::IQ2_XS, {.vec_dot = neon::vec_dot_iq2_xs_q8_K});
  overlay(k, G::IQ2_S, {.vec_dot = neon::vec_dot_iq2_s_q8_K});
  overlay(k, G::IQ3_XXS, {.vec_dot = neon::vec_dot_iq3_xxs_q8_K});
  overlay(k, G::IQ3_S, {.vec_dot = neon::vec_dot_iq3_s_q8_K});
  overlay(k, G::IQ1_S, {.vec_dot = neon::vec_dot_iq1_s_q8_K});
  overlay(k, G::IQ1_M, {.vec_dot = neon::vec_dot_iq1_m_q8_K});
  return k;
}
#endif

// A level this build carries no kernels for: the scalar table, renamed.
KernelTable renamed_scalar(Isa isa) {
  KernelTable k = make_scalar_table();
  k.isa = isa;
  return k;
}

// Bytes of n elements of activation type vt packed as `bytes` per block
// (0: the plain row, row_size(vt, n)).
size_t packed_row_size(GgmlType vt, size_t bytes, int64_t n) {
  if (bytes == 0) return row_size(vt, n);
  return static_cast<size_t>(n / type_traits(vt).block_size) * bytes;
}

void check_row(GgmlType t, int64_t n, const char* what) {
  const TypeTraits& tt = type_traits(t);
  if (!tt.known) throw Error(Errc::unsupported, std::string(what) + ": unknown tensor type");
  if (n < 0 || n % tt.block_size != 0)
    throw Error(Errc::invalid_argument, std::string(what) + ": row of " + std::to_string(n) +
                                            " elements is not a multiple of " + std::string(tt.name) +
                                            "'s block size " + std::to_string(tt.block_size));
}

}  // namespace

GgmlType vec_dot_type(GgmlType t) {
  const TypeKernels& r = kernel_table(Isa::scalar).row(t);
  if (!r.vec_dot)
    throw Error(Errc::unsupported, "no matrix product for tensor type " + std::string(type_name(t)));
  return r.vec_dot_type;
}

bool is_supported_weight(GgmlType t) noexcept { return kernel_table(Isa::scalar).row(t).vec_dot != nullptr; }

void quantize_row(const KernelTable& k, GgmlType t, const float* x, void* y, int64_t n) {
  check_row(t, n, "quantize_row");
  const QuantizeFn q = k.row(t).quantize;
  if (!q) throw Error(Errc::unsupported, "no quantizer for tensor type " + std::string(type_name(t)));
  q(x, y, n);
}

void quantize_row(GgmlType t, const float* x, void* y, int64_t n) { quantize_row(active_kernels(), t, x, y, n); }

bool requires_imatrix(GgmlType t) noexcept {
  return t == G::IQ2_XXS || t == G::IQ2_XS || t == G::IQ1_S;
}

namespace {
// The lattice types synapse quantizes (iq_quantize.cpp).
bool is_lattice_quantizer(GgmlType t) {
  switch (t) {
    case G::IQ2_XXS: case G::IQ2_XS: case G::IQ2_S: case G::IQ3_XXS: case G::IQ3_S: case G::IQ1_S: case G::IQ1_M:
      return true;
    default: return false;
  }
}
}  // namespace

void quantize_weights(GgmlType t, const float* x, void* y, int64_t n, const float* imatrix) {
  check_row(t, n, "quantize_weights");
  if (imatrix == nullptr && requires_imatrix(t))
    throw Error(Errc::invalid_argument, "quantizing to " + std::string(type_name(t)) + " needs an importance matrix");
  if (is_lattice_quantizer(t)) {
    quantize_iq_row(t, x, y, n, imatrix);
    return;
  }
  if (t == G::Q8_0) {
    quantize_row_q8_0_ref(x, y, n);
    return;
  }
  if (imatrix != nullptr) {
    switch (t) {
      case G::Q2_K: quantize_q2_K_weighted(x, y, n, imatrix); return;
      case G::Q3_K: quantize_q3_K_weighted(x, y, n, imatrix); return;
      case G::Q4_K: quantize_q4_K_weighted(x, y, n, imatrix); return;
      case G::Q5_K: quantize_q5_K_weighted(x, y, n, imatrix); return;
      case G::Q6_K: quantize_q6_K_weighted(x, y, n, imatrix); return;
      case G::Q4_0: quantize_q4_0_weighted(x, y, n, imatrix); return;
      case G::Q4_1: quantize_q4_1_weighted(x, y, n, imatrix); return;
      case G::Q5_0: quantize_q5_0_weighted(x, y, n, imatrix); return;
      case G::Q5_1: quantize_q5_1_weighted(x, y, n, imatrix); return;
      case G::IQ4_NL: quantize_iq4_nl_weighted(x, y, n, imatrix); return;
      case G::IQ4_XS: quantize_iq4_xs_weighted(x, y, n, imatrix); return;
      // ggml's quantizers of these ignore the importance matrix.
      case G::F32: case G::F16: case G::BF16: case G::TQ1_0: case G::TQ2_0: case G::MXFP4: break;
      default:
        throw Error(Errc::unsupported, "quantizing to " + std::string(type_name(t)) +
                                           " with an importance matrix: not a weight type");
    }
  }
  quantize_row(t, x, y, n);
}

void dequantize_row(GgmlType t, const void* x, float* y, int64_t n) {
  check_row(t, n, "dequantize_row");
  // The scalar row's: every level's dequantizer is the same (no level has
  // its own), so the result depends on no table.
  const DequantizeFn d = kernel_table(Isa::scalar).row(t).dequantize;
  if (!d) throw Error(Errc::unsupported, "no dequantizer for tensor type " + std::string(type_name(t)));
  d(x, y, n);
}

float vec_dot(GgmlType t, int64_t n, const void* w, const void* act) {
  return active_kernels().row(t).vec_dot(n, w, act);
}

void* thread_scratch(size_t bytes) {
  struct Buffer {
    void* p = nullptr;
    size_t size = 0;
    ~Buffer() { std::free(p); }
  };
  thread_local Buffer b;
  if (b.size < bytes) {
    const size_t size = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, size);
    if (p == nullptr) throw std::bad_alloc();
    std::free(b.p);
    b.p = p;
    b.size = size;
  }
  return b.p;
}

const KernelTable& kernel_table(Isa isa) noexcept {
  static const KernelTable scalar = make_scalar_table();
#if defined(__x86_64__) || defined(_M_X64)
  static const KernelTable avx2 = make_avx2_table();
  static const KernelTable avx512 = make_avx512_table();
  static const KernelTable neon = renamed_scalar(Isa::neon);
#elif defined(__aarch64__)
  static const KernelTable avx2 = renamed_scalar(Isa::avx2);
  static const KernelTable avx512 = renamed_scalar(Isa::avx512);
  static const KernelTable neon = make_neon_table();
#else
  static const KernelTable avx2 = renamed_scalar(Isa::avx2);
  static const KernelTable avx512 = renamed_scalar(Isa::avx512);
  static const KernelTable neon = renamed_scalar(Isa::neon);
#endif
  switch (isa) {
    case Isa::avx2: return avx2;
    case Isa::avx512: return avx512;
    case Isa::neon: return neon;
    default: return scalar;
  }
}

const KernelTable& active_kernels() noexcept {
  static const KernelTable& table = kernel_table(active_isa());
  return table;
}

const Isa* compiled_isas(size_t* n_out) noexcept {
#if defined(__x86_64__) || defined(_M_X64)
  static constexpr Isa kCompiled[] = {Isa::scalar, Isa::avx2, Isa::avx512};
#elif defined(__aarch64__)
  static constexpr Isa kCompiled[] = {Isa::scalar, Isa::neon};
#else
  static constexpr Isa kCompiled[] = {Isa::scalar};
#endif
  *n_out = sizeof(kCompiled) / sizeof(kCompiled[0]);
  return kCompiled;
}

size_t gemm_packed_row_size(const TypeKernels& row, int64_t n) noexcept {
  return packed_row_size(row.vec_dot_type, row.gemm_pack_bytes, n);
}

size_t x8_packed_row_size(const TypeKernels& row, int64_t n) noexcept {
  return packed_row_size(row.vec_dot_type, row.x8_pack_bytes, n);
}

VecDotFn vec_dot_kernel(GgmlType t, Isa isa) noexcept { return kernel_table(isa).row(t).vec_dot; }

QuantizeFn quantize_kernel(GgmlType t, Isa isa) noexcept { return kernel_table(isa).row(t).quantize; }

bool has_vec_dot(GgmlType t, Isa isa) noexcept {
  const VecDotFn f = vec_dot_kernel(t, isa);
  return f != nullptr && (isa == Isa::scalar || f != vec_dot_kernel(t, Isa::scalar));
}

bool has_quantize(GgmlType t, Isa isa) noexcept {
  const QuantizeFn f = quantize_kernel(t, isa);
  return f != nullptr && (isa == Isa::scalar || f != quantize_kernel(t, Isa::scalar));
}

}  // namespace synapse::quant

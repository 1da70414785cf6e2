// The single-row kernels' function types, the look-ups of each level's dot
// and quantizer, and the declarations of the SIMD kernels (DESIGN.md:
// kernels come in pairs, the scalar one defines the result including every
// reduction order, the SIMD one is tested equal to it bit for bit:
// tests/quant/simd_test.cpp).
//
// On x86-64 the AVX2 kernels (files *_avx2.cpp, built with -mavx2 -mfma
// -mf16c) run on CPUs with AVX2, FMA and F16C; on ARM64 the NEON kernels
// (files *_neon.cpp, built with -march=armv8.2-a+dotprod) on CPUs with the
// dot-product instructions, types without a NEON kernel taking the scalar
// one; everywhere else the scalar reference. Which level runs is decided
// once (active_isa, cpu.hpp: the CPU, SYNAPSE_ISA, SYNAPSE_NO_SIMD) and
// selects one kernel table per layer (quant/kernel_table.hpp,
// kernels/ops_table.hpp); every dispatch is a look-up in it. The functions
// below read the tables of any level, for tests and benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/cpu.hpp"
#include "synapse/types.hpp"

namespace synapse::quant {

using VecDotFn = float (*)(int64_t n, const void* w, const void* act);
using QuantizeFn = void (*)(const float* x, void* y, int64_t n);
using DequantizeFn = void (*)(const void* x, float* y, int64_t n);

// The dot kernel of weight type t for `isa`, or nullptr when synapse has no
// dot for t at all. For an ISA without a specialised kernel for t this is the
// scalar reference (so it is never null when the type is supported).
// Isa::avx2 on a CPU without AVX2 still returns the AVX2 kernel: callers
// check cpu_has_avx2() first (tests do); likewise Isa::neon and
// cpu_has_neon_dotprod(). Isa::neon on x86-64 (no NEON kernels built) and
// Isa::avx2 on ARM64 give the scalar references.
VecDotFn vec_dot_kernel(GgmlType t, Isa isa) noexcept;
// Same for the row converter of type t (activation quantizers and weight
// quantizers); nullptr when t has none.
QuantizeFn quantize_kernel(GgmlType t, Isa isa) noexcept;

// True when `isa` has its own kernel (not the scalar fallback) for the dot
// of weight type t / the quantizer of type t.
bool has_vec_dot(GgmlType t, Isa isa) noexcept;
bool has_quantize(GgmlType t, Isa isa) noexcept;

// A buffer of at least `bytes` bytes, 64-byte aligned, owned by the calling
// thread and valid until its next call (it grows, never shrinks). For the
// instruction-set kernels' scratch: they use no STL container (their
// template code would be compiled with their flags, LAYERS.md), so the
// allocation lives here, in generic code. Throws std::bad_alloc.
void* thread_scratch(size_t bytes);

// The 25 vec_dot kernels every SIMD instruction set provides, declared in
// its namespace (each the same contract as the scalar kernel of formats.hpp
// with the same name).
#define SYNAPSE_DECLARE_SIMD_DOTS()                                         \
  float vec_dot_f32_f32(int64_t n, const void* w, const void* a);          \
  float vec_dot_f16_f16(int64_t n, const void* w, const void* a);          \
  float vec_dot_bf16_bf16(int64_t n, const void* w, const void* a);        \
  float vec_dot_q4_0_q8_0(int64_t n, const void* w, const void* a);        \
  float vec_dot_q4_1_q8_1(int64_t n, const void* w, const void* a);        \
  float vec_dot_q5_0_q8_0(int64_t n, const void* w, const void* a);        \
  float vec_dot_q5_1_q8_1(int64_t n, const void* w, const void* a);        \
  float vec_dot_q8_0_q8_0(int64_t n, const void* w, const void* a);        \
  float vec_dot_iq4_nl_q8_0(int64_t n, const void* w, const void* a);      \
  float vec_dot_mxfp4_q8_0(int64_t n, const void* w, const void* a);       \
  float vec_dot_q2_K_q8_K(int64_t n, const void* w, const void* a);        \
  float vec_dot_q3_K_q8_K(int64_t n, const void* w, const void* a);        \
  float vec_dot_q4_K_q8_K(int64_t n, const void* w, const void* a);        \
  float vec_dot_q5_K_q8_K(int64_t n, const void* w, const void* a);        \
  float vec_dot_q6_K_q8_K(int64_t n, const void* w, const void* a);        \
  float vec_dot_iq4_xs_q8_K(int64_t n, const void* w, const void* a);      \
  float vec_dot_tq1_0_q8_K(int64_t n, const void* w, const void* a);       \
  float vec_dot_tq2_0_q8_K(int64_t n, const void* w, const void* a);       \
  float vec_dot_iq2_xxs_q8_K(int64_t n, const void* w, const void* a);     \
  float vec_dot_iq2_xs_q8_K(int64_t n, const void* w, const void* a);      \
  float vec_dot_iq2_s_q8_K(int64_t n, const void* w, const void* a);       \
  float vec_dot_iq3_xxs_q8_K(int64_t n, const void* w, const void* a);     \
  float vec_dot_iq3_s_q8_K(int64_t n, const void* w, const void* a);       \
  float vec_dot_iq1_s_q8_K(int64_t n, const void* w, const void* a);       \
  float vec_dot_iq1_m_q8_K(int64_t n, const void* w, const void* a);

// The AVX2 kernels (defined in *_avx2.cpp on x86-64 only; the dispatch
// table in quant.cpp references them only there).
namespace avx2 {
SYNAPSE_DECLARE_SIMD_DOTS()
// The activation quantizers, bit for bit the scalar ones of the same name
// (legacy_avx2.cpp, k_quants_avx2.cpp, float_avx2.cpp).
void quantize_row_q8_0(const float* x, void* y, int64_t n);
void quantize_row_q8_1(const float* x, void* y, int64_t n);
void quantize_row_q8_K(const float* x, void* y, int64_t n);
void quantize_row_f16(const float* x, void* y, int64_t n);
}  // namespace avx2

// The NEON kernels (defined in *_neon.cpp on ARM64 only; the dispatch table in
// quant.cpp references them only there).
namespace neon {
SYNAPSE_DECLARE_SIMD_DOTS()
}  // namespace neon

}  // namespace synapse::quant

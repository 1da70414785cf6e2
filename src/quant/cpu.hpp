// The instruction-set levels quant's kernel tables exist for, what this CPU
// runs (cpuid / getauxval, checked once), and the process's one choice
// among them (active_isa). Defined in cpu.cpp, which is compiled with the
// target's baseline flags only: these functions run before anything knows
// whether the CPU has AVX2, so none of them may be compiled with -mavx2.
//
// Thread-safety: every function here is thread-safe (each answer is a
// function-local static, computed on first call).
#pragma once

#include <cstdint>

namespace synapse::quant {

// The instruction sets a kernel may be taken from, one kernel table each
// (quant/kernel_table.hpp, kernels/ops_table.hpp). avx512 (AVX-512
// F/BW/DQ/VL + VNNI, on top of AVX2/FMA/F16C) is a level above avx2: its
// table has its own kernels where they pay (the interleaved prefill GEMMs,
// interleave_avx512.cpp) and the AVX2 kernels everywhere else.
enum class Isa { scalar, avx2, neon, avx512 };

// The level the forward pass runs in this process, decided once on first
// call: scalar when SYNAPSE_NO_SIMD is set (not empty, not "0"); else
// SYNAPSE_ISA when set to scalar, avx2, avx512 or neon and the CPU runs it
// (cpu_runs; otherwise one line on stderr says it is ignored); else the
// highest level the CPU runs: avx512, avx2, neon, scalar.
Isa active_isa() noexcept;
// "scalar", "avx2", "avx512", "neon" (what SYNAPSE_ISA takes).
const char* isa_name(Isa isa) noexcept;

// True when this CPU can execute the kernels of `isa`.
bool cpu_runs(Isa isa) noexcept;

// True when this CPU can run the AVX2 kernels (AVX2, FMA and F16C).
bool cpu_has_avx2() noexcept;
// True when this CPU (and OS) runs the AVX-512 VNNI kernels: AVX2, FMA,
// F16C, AVX-512 F, BW, DQ, VL and VNNI (cpuid and XCR0).
bool cpu_has_avx512_vnni() noexcept;
// True when cpu_has_avx512_vnni and the CPU has AVX-512 VBMI (byte
// permutes): the avx512 table then takes the IQ3 kernels that look up their
// grids with vpermi2b (same results). Thread-safe (cached on first use).
bool cpu_has_avx512_vbmi() noexcept;
// True when this CPU can run the NEON kernels (ARM64 with the ASIMD
// dot-product instructions, HWCAP_ASIMDDP); false on every other target.
bool cpu_has_neon_dotprod() noexcept;

// True on an Intel x86-64 CPU (cpuid vendor): the tuning that differs
// between the cores measured here (prefetch distance, Q4_K prefill tile)
// keys on it. Never changes a result.
bool cpu_is_intel() noexcept;

// How many bytes ahead of the block it is reading a decode kernel asks for
// the weight stream with a software prefetch into L1 (_MM_HINT_T0), and how
// far ahead with a second one into L2 (_MM_HINT_T1; 0: none), per CPU
// vendor; quant/gemm_tiles.hpp issues them. Intel: 1024 into L1 + 4096 into
// L2; everything else: 8192 into L1, none into L2, the fastest measured on
// each (docs/PERFORMANCE.md, "Measurements behind the tuning constants").
// Never changes a result.
int64_t prefetch_ahead_bytes() noexcept;
int64_t prefetch_far_bytes() noexcept;

}  // namespace synapse::quant

// CPU feature detection and the choice of instruction-set level (cpu.hpp).
// Built with the target's baseline flags (never -mavx2: this is the code
// that decides whether AVX2 code may run at all).
#include "quant/cpu.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace synapse::quant {
namespace {

Isa decide_isa() noexcept {
  const char* off = std::getenv("SYNAPSE_NO_SIMD");
  if (off != nullptr && off[0] != '\0' && std::strcmp(off, "0") != 0) return Isa::scalar;
  if (const char* want = std::getenv("SYNAPSE_ISA"); want != nullptr && want[0] != '\0') {
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::neon}) {
      if (std::strcmp(want, isa_name(isa)) != 0) continue;
      if (cpu_runs(isa)) return isa;
      std::fprintf(stderr, "synapse: SYNAPSE_ISA=%s ignored: this CPU cannot run it\n", want);
      want = nullptr;
      break;
    }
    if (want != nullptr)
      std::fprintf(stderr, "synapse: SYNAPSE_ISA=%s ignored: not one of scalar, avx2, avx512, neon\n", want);
  }
  if (cpu_has_avx512_vnni()) return Isa::avx512;
  if (cpu_has_avx2()) return Isa::avx2;
  if (cpu_has_neon_dotprod()) return Isa::neon;
  return Isa::scalar;
}

}  // namespace

Isa active_isa() noexcept {
  static const Isa isa = decide_isa();
  return isa;
}

const char* isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::neon: return "neon";
    default: return "scalar";
  }
}

bool cpu_runs(Isa isa) noexcept {
  switch (isa) {
    case Isa::avx2: return cpu_has_avx2();
    case Isa::avx512: return cpu_has_avx512_vnni();
    case Isa::neon: return cpu_has_neon_dotprod();
    default: return true;
  }
}

bool cpu_has_avx2() noexcept {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
#if defined(__clang__) && __clang_major__ < 16
  // clang before 16 does not know "f16c" here (the fuzz build uses clang 14);
  // every CPU with AVX2 has F16C (Intel since Ivy Bridge, AMD since Piledriver).
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c");
#endif
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() noexcept {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
  // (libgcc sets the avx512 bits only when XCR0 says the OS saves the
  // ZMM state.)
  static const bool has = cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512_vbmi() noexcept {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
  static const bool has = cpu_has_avx512_vnni() && __builtin_cpu_supports("avx512vbmi");
  return has;
#else
  return false;
#endif
}

bool cpu_has_neon_dotprod() noexcept {
#if defined(__aarch64__) && defined(__linux__)
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)  // Linux arch/arm64 uapi hwcap.h
#endif
  static const bool has = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  return has;
#else
  return false;
#endif
}

bool cpu_is_intel() noexcept {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
  static const bool intel = __builtin_cpu_is("intel");
  return intel;
#else
  return false;
#endif
}

int64_t prefetch_ahead_bytes() noexcept { return cpu_is_intel() ? 1024 : 8192; }
int64_t prefetch_far_bytes() noexcept { return cpu_is_intel() ? 4096 : 0; }

}  // namespace synapse::quant

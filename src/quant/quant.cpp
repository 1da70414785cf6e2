// Dispatch from a ggml type to its kernels (formats.hpp), the table of which
// activation type each weight type is paired with, and the run-time choice
// of the SIMD kernels (simd.hpp).
#include "quant/quant.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "quant/formats.hpp"
#include "quant/legacy_avx2.hpp"
#include "quant/simd.hpp"
#include "synapse/error.hpp"

namespace synapse::quant {
namespace {

using DequantizeFn = void (*)(const void*, float*, int64_t);

struct Kernels {
  QuantizeFn quantize = nullptr;
  DequantizeFn dequantize = nullptr;
  VecDotFn vec_dot = nullptr;
  GgmlType vec_dot_type = GgmlType::F32;
};

// vec_dot_type per weight type. Source: ggml/src/ggml-cpu/ggml-cpu.c,
// type_traits_cpu[] (llama.cpp c392e509): F32->F32, F16->F16, BF16->BF16,
// Q4_0/Q5_0/Q8_0/IQ4_NL->Q8_0, Q4_1/Q5_1->Q8_1, Q2_K..Q6_K/IQ4_XS/TQ1_0/TQ2_0->Q8_K.
Kernels kernels_of(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return {quantize_row_f32, dequantize_row_f32, vec_dot_f32_f32, GgmlType::F32};
    case GgmlType::F16: return {quantize_row_f16, dequantize_row_f16, vec_dot_f16_f16, GgmlType::F16};
    case GgmlType::BF16: return {quantize_row_bf16, dequantize_row_bf16, vec_dot_bf16_bf16, GgmlType::BF16};
    case GgmlType::Q4_0: return {quantize_row_q4_0, dequantize_row_q4_0, vec_dot_q4_0_q8_0, GgmlType::Q8_0};
    case GgmlType::Q4_1: return {quantize_row_q4_1, dequantize_row_q4_1, vec_dot_q4_1_q8_1, GgmlType::Q8_1};
    case GgmlType::Q5_0: return {quantize_row_q5_0, dequantize_row_q5_0, vec_dot_q5_0_q8_0, GgmlType::Q8_0};
    case GgmlType::Q5_1: return {quantize_row_q5_1, dequantize_row_q5_1, vec_dot_q5_1_q8_1, GgmlType::Q8_1};
    case GgmlType::Q8_0: return {detail::quantize_row_q8_0_scalar, dequantize_row_q8_0, vec_dot_q8_0_q8_0, GgmlType::Q8_0};
    case GgmlType::Q8_1: return {detail::quantize_row_q8_1_scalar, dequantize_row_q8_1, nullptr, GgmlType::Q8_1};
    case GgmlType::IQ4_NL: return {quantize_row_iq4_nl, dequantize_row_iq4_nl, vec_dot_iq4_nl_q8_0, GgmlType::Q8_0};
    case GgmlType::Q2_K: return {quantize_row_q2_K, dequantize_row_q2_K, vec_dot_q2_K_q8_K, GgmlType::Q8_K};
    case GgmlType::Q3_K: return {quantize_row_q3_K, dequantize_row_q3_K, vec_dot_q3_K_q8_K, GgmlType::Q8_K};
    case GgmlType::Q4_K: return {quantize_row_q4_K, dequantize_row_q4_K, vec_dot_q4_K_q8_K, GgmlType::Q8_K};
    case GgmlType::Q5_K: return {quantize_row_q5_K, dequantize_row_q5_K, vec_dot_q5_K_q8_K, GgmlType::Q8_K};
    case GgmlType::Q6_K: return {quantize_row_q6_K, dequantize_row_q6_K, vec_dot_q6_K_q8_K, GgmlType::Q8_K};
    case GgmlType::Q8_K: return {quantize_row_q8_K, dequantize_row_q8_K, nullptr, GgmlType::Q8_K};
    case GgmlType::IQ4_XS: return {quantize_row_iq4_xs, dequantize_row_iq4_xs, vec_dot_iq4_xs_q8_K, GgmlType::Q8_K};
    case GgmlType::TQ1_0: return {quantize_row_tq1_0, dequantize_row_tq1_0, vec_dot_tq1_0_q8_K, GgmlType::Q8_K};
    case GgmlType::TQ2_0: return {quantize_row_tq2_0, dequantize_row_tq2_0, vec_dot_tq2_0_q8_K, GgmlType::Q8_K};
    default: return {};
  }
}

// The AVX2 kernels that replace the scalar ones of kernels_of (null fields:
// no AVX2 version, the scalar one is used).
struct SimdKernels {
  QuantizeFn quantize = nullptr;
  VecDotFn vec_dot = nullptr;
};

SimdKernels avx2_kernels_of(GgmlType t) {
#if defined(__x86_64__) || defined(_M_X64)
  switch (t) {
    case GgmlType::F32: return {nullptr, avx2::vec_dot_f32_f32};
    case GgmlType::F16: return {avx2::quantize_row_f16, avx2::vec_dot_f16_f16};
    case GgmlType::BF16: return {nullptr, avx2::vec_dot_bf16_bf16};
    case GgmlType::Q4_0: return {nullptr, avx2::vec_dot_q4_0_q8_0};
    case GgmlType::Q4_1: return {nullptr, avx2::vec_dot_q4_1_q8_1};
    case GgmlType::Q5_0: return {nullptr, avx2::vec_dot_q5_0_q8_0};
    case GgmlType::Q5_1: return {nullptr, avx2::vec_dot_q5_1_q8_1};
    case GgmlType::Q8_0: return {detail::quantize_row_q8_0_avx2, avx2::vec_dot_q8_0_q8_0};
    case GgmlType::Q8_1: return {detail::quantize_row_q8_1_avx2, nullptr};
    case GgmlType::IQ4_NL: return {nullptr, avx2::vec_dot_iq4_nl_q8_0};
    case GgmlType::Q2_K: return {nullptr, avx2::vec_dot_q2_K_q8_K};
    case GgmlType::Q3_K: return {nullptr, avx2::vec_dot_q3_K_q8_K};
    case GgmlType::Q4_K: return {nullptr, avx2::vec_dot_q4_K_q8_K};
    case GgmlType::Q5_K: return {nullptr, avx2::vec_dot_q5_K_q8_K};
    case GgmlType::Q6_K: return {nullptr, avx2::vec_dot_q6_K_q8_K};
    case GgmlType::Q8_K: return {avx2::quantize_row_q8_K, nullptr};
    case GgmlType::IQ4_XS: return {nullptr, avx2::vec_dot_iq4_xs_q8_K};
    case GgmlType::TQ1_0: return {nullptr, avx2::vec_dot_tq1_0_q8_K};
    case GgmlType::TQ2_0: return {nullptr, avx2::vec_dot_tq2_0_q8_K};
    default: return {};
  }
#else
  (void)t;
  return {};
#endif
}

// The NEON (ARMv8.2 dotprod) kernels that replace the scalar ones, as above.
SimdKernels neon_kernels_of(GgmlType t) {
#if defined(__aarch64__)
  switch (t) {
    case GgmlType::F32: return {nullptr, neon::vec_dot_f32_f32};
    case GgmlType::F16: return {nullptr, neon::vec_dot_f16_f16};
    case GgmlType::BF16: return {nullptr, neon::vec_dot_bf16_bf16};
    case GgmlType::Q4_0: return {nullptr, neon::vec_dot_q4_0_q8_0};
    case GgmlType::Q4_1: return {nullptr, neon::vec_dot_q4_1_q8_1};
    case GgmlType::Q5_0: return {nullptr, neon::vec_dot_q5_0_q8_0};
    case GgmlType::Q5_1: return {nullptr, neon::vec_dot_q5_1_q8_1};
    case GgmlType::Q8_0: return {nullptr, neon::vec_dot_q8_0_q8_0};
    case GgmlType::IQ4_NL: return {nullptr, neon::vec_dot_iq4_nl_q8_0};
    case GgmlType::Q2_K: return {nullptr, neon::vec_dot_q2_K_q8_K};
    case GgmlType::Q3_K: return {nullptr, neon::vec_dot_q3_K_q8_K};
    case GgmlType::Q4_K: return {nullptr, neon::vec_dot_q4_K_q8_K};
    case GgmlType::Q5_K: return {nullptr, neon::vec_dot_q5_K_q8_K};
    case GgmlType::Q6_K: return {nullptr, neon::vec_dot_q6_K_q8_K};
    case GgmlType::IQ4_XS: return {nullptr, neon::vec_dot_iq4_xs_q8_K};
    case GgmlType::TQ1_0: return {nullptr, neon::vec_dot_tq1_0_q8_K};
    case GgmlType::TQ2_0: return {nullptr, neon::vec_dot_tq2_0_q8_K};
    default: return {};
  }
#else
  (void)t;
  return {};
#endif
}

SimdKernels simd_kernels_of(GgmlType t, Isa isa) {
  switch (isa) {
    case Isa::avx2:
    case Isa::avx512: return avx2_kernels_of(t);  // (no AVX-512 dot or quantizer of its own)
    case Isa::neon: return neon_kernels_of(t);
    default: return {};
  }
}

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
  const Kernels k = kernels_of(t);
  if (!k.vec_dot)
    throw Error(Errc::unsupported, "no matrix product for tensor type " + std::string(type_name(t)));
  return k.vec_dot_type;
}

bool is_supported_weight(GgmlType t) noexcept { return kernels_of(t).vec_dot != nullptr; }

void quantize_row(GgmlType t, const float* x, void* y, int64_t n) {
  check_row(t, n, "quantize_row");
  const QuantizeFn q = quantize_kernel(t, active_isa());
  if (!q) throw Error(Errc::unsupported, "no quantizer for tensor type " + std::string(type_name(t)));
  q(x, y, n);
}

void dequantize_row(GgmlType t, const void* x, float* y, int64_t n) {
  check_row(t, n, "dequantize_row");
  const Kernels k = kernels_of(t);
  if (!k.dequantize)
    throw Error(Errc::unsupported, "no dequantizer for tensor type " + std::string(type_name(t)));
  k.dequantize(x, y, n);
}

float vec_dot(GgmlType t, int64_t n, const void* w, const void* act) {
  return vec_dot_kernel(t, active_isa())(n, w, act);
}

bool cpu_has_avx2() noexcept { return detail::cpu_has_avx2(); }

bool cpu_has_avx512_vnni() noexcept {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
  // (libgcc sets the avx512 bits only when XCR0 says the OS saves the
  // ZMM state.)
  static const bool has = detail::cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has;
#else
  return false;
#endif
}

bool cpu_runs(Isa isa) noexcept {
  switch (isa) {
    case Isa::avx2: return cpu_has_avx2();
    case Isa::avx512: return cpu_has_avx512_vnni();
    case Isa::neon: return cpu_has_neon_dotprod();
    default: return true;
  }
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

VecDotFn vec_dot_kernel(GgmlType t, Isa isa) noexcept {
  if (const VecDotFn f = simd_kernels_of(t, isa).vec_dot) return f;
  return kernels_of(t).vec_dot;
}

QuantizeFn quantize_kernel(GgmlType t, Isa isa) noexcept {
  if (const QuantizeFn f = simd_kernels_of(t, isa).quantize) return f;
  return kernels_of(t).quantize;
}

bool has_vec_dot(GgmlType t, Isa isa) noexcept {
  return isa == Isa::scalar ? kernels_of(t).vec_dot != nullptr : simd_kernels_of(t, isa).vec_dot != nullptr;
}

bool has_quantize(GgmlType t, Isa isa) noexcept {
  return isa == Isa::scalar ? kernels_of(t).quantize != nullptr : simd_kernels_of(t, isa).quantize != nullptr;
}

}  // namespace synapse::quant

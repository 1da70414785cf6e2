// Dispatch from a ggml type to its kernels (formats.hpp), the table of which
// activation type each weight type is paired with, and the kernel table of
// each level (kernel_table.hpp); the level itself is chosen in cpu.cpp.
#include "quant/quant.hpp"

#include <cstdlib>
#include <new>
#include <string>

#include "quant/formats.hpp"
#include "quant/kernel_table.hpp"
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
    case GgmlType::Q8_0: return {quantize_row_q8_0, dequantize_row_q8_0, vec_dot_q8_0_q8_0, GgmlType::Q8_0};
    case GgmlType::Q8_1: return {quantize_row_q8_1, dequantize_row_q8_1, nullptr, GgmlType::Q8_1};
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

size_t slot(GgmlType t) { return static_cast<size_t>(t); }

constexpr GgmlType kAllTypes[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,   GgmlType::Q5_0,
    GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,
    GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::TQ1_0,
    GgmlType::TQ2_0};

// The scalar references: kernels_of's dots and converters, and the scalar
// interleaved kernels (interleave.cpp), so that a matrix interleaved under
// one table runs under any other.
KernelTable make_scalar_table() {
  KernelTable k;
  k.isa = Isa::scalar;
  for (GgmlType t : kAllTypes) {
    k.vec_dot[slot(t)] = kernels_of(t).vec_dot;
    k.quantize[slot(t)] = kernels_of(t).quantize;
  }
  k.gemm_x8[slot(GgmlType::Q4_0)] = scalar::gemm_q4_0x8_q8_0;
  k.gemm_x8[slot(GgmlType::Q5_0)] = scalar::gemm_q5_0x8_q8_0;
  k.gemm_x8[slot(GgmlType::Q8_0)] = scalar::gemm_q8_0x8_q8_0;
  k.gemm_x8[slot(GgmlType::Q4_K)] = scalar::gemm_q4_Kx8_q8_K;
  k.gemm_x8[slot(GgmlType::Q6_K)] = scalar::gemm_q6_Kx8_q8_K;
  // The reference and the AVX2 kernels' tiles: any groups, 4 activation rows.
  for (size_t t = 0; t < kTypeSlots; ++t) {
    if (k.gemm_x8[t] == nullptr) continue;
    k.x8_group_step[t] = 1;
    k.x8_tile_step[t] = 4;
  }
  return k;
}

// The weight types of the 17 dots every SIMD level has
// (SYNAPSE_DECLARE_SIMD_DOTS, simd.hpp), in the order SYNAPSE_SIMD_DOTS
// lists its kernels.
constexpr GgmlType kSimdDotTypes[17] = {
    GgmlType::F32,  GgmlType::F16,    GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,   GgmlType::Q5_0,
    GgmlType::Q5_1, GgmlType::Q8_0,   GgmlType::IQ4_NL, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
    GgmlType::Q5_K, GgmlType::Q6_K,   GgmlType::IQ4_XS, GgmlType::TQ1_0, GgmlType::TQ2_0};
#define SYNAPSE_SIMD_DOTS(ns)                                                                                   \
  {ns::vec_dot_f32_f32,    ns::vec_dot_f16_f16,   ns::vec_dot_bf16_bf16, ns::vec_dot_q4_0_q8_0,               \
   ns::vec_dot_q4_1_q8_1,  ns::vec_dot_q5_0_q8_0, ns::vec_dot_q5_1_q8_1, ns::vec_dot_q8_0_q8_0,               \
   ns::vec_dot_iq4_nl_q8_0, ns::vec_dot_q2_K_q8_K, ns::vec_dot_q3_K_q8_K, ns::vec_dot_q4_K_q8_K,             \
   ns::vec_dot_q5_K_q8_K,  ns::vec_dot_q6_K_q8_K, ns::vec_dot_iq4_xs_q8_K, ns::vec_dot_tq1_0_q8_K,           \
   ns::vec_dot_tq2_0_q8_K}

[[maybe_unused]] void set_simd_dots(KernelTable& k, const VecDotFn (&dots)[17]) {
  for (int i = 0; i < 17; ++i) k.vec_dot[slot(kSimdDotTypes[i])] = dots[i];
}

#if defined(__x86_64__) || defined(_M_X64)
// AVX2 (*_avx2.cpp): the scalar table with its dots, converters, plain and
// decode GEMMs, interleaved kernels and their activation packs.
KernelTable make_avx2_table() {
  KernelTable k = make_scalar_table();
  k.isa = Isa::avx2;
  set_simd_dots(k, SYNAPSE_SIMD_DOTS(avx2));
  k.quantize[slot(GgmlType::F16)] = avx2::quantize_row_f16;
  k.quantize[slot(GgmlType::Q8_0)] = avx2::quantize_row_q8_0;
  k.quantize[slot(GgmlType::Q8_1)] = avx2::quantize_row_q8_1;
  k.quantize[slot(GgmlType::Q8_K)] = avx2::quantize_row_q8_K;

  const auto gemm = [&](GgmlType t, GemmFn f) { k.gemm[slot(t)] = f; };
  gemm(GgmlType::Q8_0, avx2::gemm_q8_0_q8_0);
  gemm(GgmlType::Q5_K, avx2::gemm_q5_K_q8_K);
  gemm(GgmlType::Q6_K, avx2::gemm_q6_K_q8_K);
  gemm(GgmlType::F16, avx2::gemm_f16_f16);
  gemm(GgmlType::F32, avx2::gemm_f32_f32);
  gemm(GgmlType::Q4_1, avx2::gemm_q4_1_q8_1);
  gemm(GgmlType::Q5_1, avx2::gemm_q5_1_q8_1);
  gemm(GgmlType::IQ4_NL, avx2::gemm_iq4_nl_q8_0);
  gemm(GgmlType::Q2_K, avx2::gemm_q2_K_q8_K);
  gemm(GgmlType::Q3_K, avx2::gemm_q3_K_q8_K);
  gemm(GgmlType::IQ4_XS, avx2::gemm_iq4_xs_q8_K);
  gemm(GgmlType::TQ2_0, avx2::gemm_tq2_0_q8_K);
  k.gemv[slot(GgmlType::Q8_0)] = avx2::gemv_q8_0_q8_0;
  k.gemv[slot(GgmlType::Q5_K)] = avx2::gemv_q5_K_q8_K;
  k.gemv[slot(GgmlType::Q6_K)] = avx2::gemv_q6_K_q8_K;
  k.gemv[slot(GgmlType::F16)] = avx2::gemv_f16_f16;
  k.gemv[slot(GgmlType::F32)] = avx2::gemv_f32_f32;
  // gemm_avx2.cpp's PackedQ8_0: the float scale and the int16-widened bytes.
  k.gemm_pack[slot(GgmlType::Q8_0)] = avx2::pack_q8_0_for_q8_0;
  k.gemm_pack_bytes[slot(GgmlType::Q8_0)] = 96;

  const auto x8 = [&](GgmlType t, GemmX8Fn f, GemmPackFn pack, size_t bytes) {
    k.gemm_x8[slot(t)] = f;
    k.x8_pack[slot(t)] = pack;
    k.x8_pack_bytes[slot(t)] = static_cast<uint16_t>(bytes);
    k.interleave[slot(t)] = true;
  };
  x8(GgmlType::Q4_0, avx2::gemm_q4_0x8_q8_0, avx2::pack_q8_0_for_q4_0x8, kPackQ4_0x8);
  x8(GgmlType::Q5_0, avx2::gemm_q5_0x8_q8_0, avx2::pack_q8_0_for_q5_0x8, kPackQ4_0x8);
  x8(GgmlType::Q8_0, avx2::gemm_q8_0x8_q8_0, avx2::pack_q8_0_for_q8_0x8, kPackQ8_0x8);
  x8(GgmlType::Q4_K, avx2::gemm_q4_Kx8_q8_K, avx2::pack_q8_K_for_q4_Kx8, kPackQ4_Kx8);
  x8(GgmlType::Q6_K, avx2::gemm_q6_Kx8_q8_K, avx2::pack_q8_K_for_q6_Kx8, kPackQ6_Kx8);
  // q6_Kx8_many unpacks each weight block once for all the rows of its call
  // (up to 32) and reads their activation blocks as it goes, so its tile is
  // 32 rows rather than the rows that fit 64 KiB (4 at 8192 columns).
  k.x8_tile_step[slot(GgmlType::Q6_K)] = 32;
  return k;
}

// AVX-512 VNNI: the AVX2 table with the interleaved prefill kernels of
// interleave_avx512.cpp, which read the AVX2 packs (x8_packs.hpp), and the
// plain prefill GEMMs of gemm_k_avx512.cpp (plain activation rows, as the
// AVX2 ones read). Its dots, decode kernels and quantizers are AVX2's
// (kernel_table.hpp says why).
KernelTable make_avx512_table() {
  KernelTable k = make_avx2_table();
  k.isa = Isa::avx512;
  // interleave_avx512.cpp's kernels and their tiles: Q4_0 / Q5_0 two pairs
  // of groups by 5 rows, Q4_K two pairs by 3, Q8_0 one pair by 3, Q6_K one
  // pair by 32 rows (q6_many, for the reason make_avx2_table gives).
  const auto x8 = [&](GgmlType t, GemmX8Fn f, uint8_t groups, uint8_t rows) {
    k.gemm_x8[slot(t)] = f;
    k.x8_group_step[slot(t)] = groups;
    k.x8_tile_step[slot(t)] = rows;
  };
  x8(GgmlType::Q4_0, avx512::gemm_q4_0x8_q8_0, 4, 5);
  x8(GgmlType::Q5_0, avx512::gemm_q5_0x8_q8_0, 4, 5);
  x8(GgmlType::Q8_0, avx512::gemm_q8_0x8_q8_0, 2, 3);
  x8(GgmlType::Q4_K, avx512::gemm_q4_Kx8_q8_K, 4, 3);
  x8(GgmlType::Q6_K, avx512::gemm_q6_Kx8_q8_K, 2, 32);
  k.gemm[slot(GgmlType::Q5_K)] = avx512::gemm_q5_K_q8_K;
  k.gemm[slot(GgmlType::IQ4_XS)] = avx512::gemm_iq4_xs_q8_K;
  k.gemm[slot(GgmlType::Q4_1)] = avx512::gemm_q4_1_q8_1;
  k.gemm[slot(GgmlType::Q5_1)] = avx512::gemm_q5_1_q8_1;
  k.gemm[slot(GgmlType::IQ4_NL)] = avx512::gemm_iq4_nl_q8_0;
  k.gemm[slot(GgmlType::Q2_K)] = avx512::gemm_q2_K_q8_K;
  k.gemm[slot(GgmlType::Q3_K)] = avx512::gemm_q3_K_q8_K;
  return k;
}
#endif

#if defined(__aarch64__)
// NEON (ARMv8.2 dotprod, *_neon.cpp): the scalar table with its dots.
KernelTable make_neon_table() {
  KernelTable k = make_scalar_table();
  k.isa = Isa::neon;
  set_simd_dots(k, SYNAPSE_SIMD_DOTS(neon));
  return k;
}
#endif

// A level this build carries no kernels for: the scalar table, renamed.
KernelTable renamed_scalar(Isa isa) {
  KernelTable k = make_scalar_table();
  k.isa = isa;
  return k;
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
  const QuantizeFn q = slot(t) < kTypeSlots ? active_kernels().quantize[slot(t)] : nullptr;
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
  return active_kernels().vec_dot[slot(t)](n, w, act);
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

VecDotFn vec_dot_kernel(GgmlType t, Isa isa) noexcept {
  return slot(t) < kTypeSlots ? kernel_table(isa).vec_dot[slot(t)] : nullptr;
}

QuantizeFn quantize_kernel(GgmlType t, Isa isa) noexcept {
  return slot(t) < kTypeSlots ? kernel_table(isa).quantize[slot(t)] : nullptr;
}

bool has_vec_dot(GgmlType t, Isa isa) noexcept {
  const VecDotFn f = vec_dot_kernel(t, isa);
  return f != nullptr && (isa == Isa::scalar || f != vec_dot_kernel(t, Isa::scalar));
}

bool has_quantize(GgmlType t, Isa isa) noexcept {
  const QuantizeFn f = quantize_kernel(t, isa);
  return f != nullptr && (isa == Isa::scalar || f != quantize_kernel(t, Isa::scalar));
}

}  // namespace synapse::quant

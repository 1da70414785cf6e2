// IEEE half (F16) and bfloat16 (BF16) conversions, bit-exact with the x86
// F16C instructions ggml uses (vcvtps2ph with round-to-nearest-even) and with
// ggml's ggml_compute_fp32_to_bf16 (round-to-nearest-even, NaN kept quiet).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace synapse::quant {

using ggml_fp16_t = uint16_t;
using ggml_bf16_t = uint16_t;

// F16 bits -> float (exact).
inline float fp16_to_fp32(ggml_fp16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {  // subnormal: normalize
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

// float -> F16 bits, round to nearest even (F16C's _MM_FROUND_TO_NEAREST_INT).
inline ggml_fp16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or nan
    return static_cast<ggml_fp16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? (0x200u | ((ax >> 13) & 0x3ffu)) : 0u));
  }
  if (ax >= 0x477ff000u) return static_cast<ggml_fp16_t>(sign | 0x7c00u);  // rounds to inf
  if (ax < 0x38800000u) {  // result is subnormal or zero
    if (ax < 0x33000000u) return static_cast<ggml_fp16_t>(sign);  // < half of smallest subnormal
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<ggml_fp16_t>(sign | h);
  }
  uint32_t h = ((ax - 0x38000000u) >> 13);
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<ggml_fp16_t>(sign | h);
}

// BF16 bits -> float (exact).
inline float bf16_to_fp32(ggml_bf16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// float -> BF16 bits as ggml_compute_fp32_to_bf16: nan -> quiet nan, else
// round to nearest even.
inline ggml_bf16_t fp32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<ggml_bf16_t>((u >> 16) | 64);
  return static_cast<ggml_bf16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

// Rounds a float through F16 and back (what storing it in an F16 tensor does).
inline float round_fp16(float f) { return fp16_to_fp32(fp32_to_fp16(f)); }

}  // namespace synapse::quant

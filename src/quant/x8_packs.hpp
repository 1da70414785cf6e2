// The activation blocks the interleaved kernels (interleave.hpp) read, made
// once per matrix product by the x8_pack_kernel packs (interleave_avx2.cpp).
// One layout per type serves the AVX2 and the AVX-512 kernels alike: the
// AVX-512 table packs with the AVX2 functions (its CPUs run them) and hands
// decode and a lone group to the AVX2 kernels, so both read the same rows.
// Plain structs only (no inline code): included by instruction-set
// translation units of different levels.
#pragma once

#include <cstdint>

#include "quant/interleave.hpp"

namespace synapse::quant::x8 {

// Q4_0 / Q5_0 (and the first array of Q8_0's pack): the bytes, the F16
// scale as float, and the offset term (8 for Q4_0, 16 for Q5_0, 128 for
// Q8_0) * sum(qs).
struct PackedQ8x8 {
  int8_t qs[32];
  float d;
  int32_t off;
};
static_assert(sizeof(PackedQ8x8) == kPackQ4_0x8);

// Q8_0: a row of nb = n / 32 blocks is two arrays, nb PackedQ8x8 (the
// bytes, the F16 scale as float, and 128 * sum(qs): the AVX-512 kernel
// multiplies the bytes by weight byte + 128 and takes that term off) then
// nb PackedQ8x8m (the bytes' magnitudes, |-128| = 128 fitting a uint8: the
// AVX2 kernel's sign trick, which reads the bytes and the scale from the
// first array). The AVX-512 kernel reads only the first array, 40
// contiguous bytes per block; the AVX2 kernel finds a row's PackedQ8x8m at
// the row start + nb * sizeof(PackedQ8x8).
struct PackedQ8x8m {
  uint8_t mag[32];
};
static_assert(sizeof(PackedQ8x8) + sizeof(PackedQ8x8m) == kPackQ8_0x8);

// Q4_K: d, the 8 sums of 32 bytes as int16 (the int16 sums of bsums pairs,
// as k_quants.cpp's order takes them), the bytes.
struct PackedQ8Kx8 {
  float d;
  int16_t bsum[8];
  int8_t qs[256];
  uint8_t pad[12];
};
static_assert(sizeof(PackedQ8Kx8) == kPackQ4_Kx8);

// Q6_K: d, the bytes, and for each register (c, q) the offset term of
// k_quants.cpp's Q6_K order as ggml's second maddubs makes it, 32 * (a0 +
// a1) and 32 * (a2 + a3) of its 4 bytes (int16).
struct PackedQ8Kx8o {
  float d;
  uint8_t pad[12];
  int8_t qs[256];
  int16_t off[128];
};
static_assert(sizeof(PackedQ8Kx8o) == kPackQ6_Kx8);

}  // namespace synapse::quant::x8

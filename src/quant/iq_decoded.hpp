// One 256-value block of a lattice-format weight row (IQ2_XXS ... IQ1_M)
// decoded to int8 for the prefill GEMMs: iq_quants_avx2.cpp decodes a few
// weight rows once per call of the GEMM, and its int8 tiles (AVX2, and the
// AVX-512 VNNI ones of iq_gemm_avx512.cpp) run them against many activation
// rows. The products are exact integers, so every output keeps the
// reference's order (iq_quants.cpp: one exact integer per block, one fma).
//
// The activations enter the unsigned x signed byte products as a + 128 (a
// byte XOR 0x80), so sum (a + 128) * w * s = sum a * w * s + bias: `bias`
// is the correction 128 * sum_j w[j] * s(j), s(j) the scale of value j.
//
// A plain struct shared with the instruction-set files (no code, LAYERS.md).
#pragma once

#include <cstdint>

namespace synapse::quant {

struct alignas(64) IqDecoded {
  int8_t w[256];      // the values: IQ2/IQ3 +-grid magnitudes (|w| <= 62), IQ1 the grid (-1, 0, 1)
  int16_t sc[8][16];  // chunk c (values 32c..32c+31): words 0..7 the scale of its values 0..15, 8..15 of 16..31
  int8_t w2[256];     // IQ1_M: the shift sign (+1 / -1) of each value's group of 8
  int16_t coef[16];   // IQ1_S: scale * shift sign of each Q8_K bsum (sum of 16 activations)
  int32_t bias;       // 128 * sum_j w[j] * s(j)
  int32_t bias2;      // IQ1_M: 128 * sum_j w2[j] * s(j)
  float d;            // the block's F16 scale (IQ1_M: assembled from its 4 nibbles)
};

}  // namespace synapse::quant

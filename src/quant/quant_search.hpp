// Pieces ggml's weight quantizers share (ggml-quants.c): the rounding they
// all use, make_qx_quants and make_qkx2_quants (defined in k_quants.cpp) and make_qp_quants
// (k_quants_imatrix.cpp), the searches that the K-quants and the lattice
// quantizers (iq_quantize.cpp) run. Internal to quant.
//
// Thread-safety: pure functions.
#pragma once

#include <bit>
#include <cstdint>

#include "quant/formats.hpp"

namespace synapse::quant {

// ggml's nearest_int: adds 1.5 * 2^23 so the FPU's round-to-nearest-even
// leaves the integer in the low mantissa bits. Valid for |fval| <= 4194303;
// ties go to the even integer (nearest_int(2.5f) == 2).
inline int nearest_int(float fval) {
  const float val = fval + 12582912.f;
  const int32_t i = std::bit_cast<int32_t>(val);
  return (i & 0x007fffff) - 0x00400000;
}

// ggml's make_qx_quants with rmse_type 1 (k_quants.cpp), the only case the
// weight quantizers use: symmetric fit x[0..n) ~ scale * l, l in
// [-nmax, nmax-1], weighted by qw[i] (an importance matrix's weights) or,
// qw nullptr, by x^2; the scale of 19 trial inverse scales -(nmax + 0.1 is)
// / max (is in [-9, 9]) of the largest sum(w x l)^2 / sum(w l^2). Writes
// L[i] = l + nmax and returns the scale (0 for a block below 1e-15).
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, const float* qw);

// ggml's make_qkx2_quants (k_quants.cpp): asymmetric fit x ~ scale * l -
// the_min, l in [0, nmax], weighted; writes L and *the_min, returns scale.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);

// ggml's make_qp_quants: levels 0..nmax for x[0..n) (all >= 0) at the scale
// of least weighted (quant_weights[n]) squared error among max/nmax and 8
// neighbours of it, then up to 5 passes moving single levels while the fit
// improves. Returns the scale; L gets the levels.
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* quant_weights);

// Q4_K's value layout (k_quants.cpp): levels L[0..256) (0..15) into y.qs,
// 64 values per 32 bytes, the first 32 in the low nibbles.
void pack_q4_K_levels(const uint8_t* L, block_q4_K& y);

// Q5_K's value layout (k_quants.cpp): levels L[0..256) (0..31); low 4 bits
// as in Q4_K, bit 4 of value 64p + j (j < 32) at bit 2p of y.qh[j], of value
// 64p + 32 + j at bit 2p + 1.
void pack_q5_K_levels(const uint8_t* L, block_q5_K& y);

}  // namespace synapse::quant

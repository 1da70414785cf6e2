// The ternary formats of ggml (BitNet b1.58 and TriLMs): TQ1_0 and TQ2_0.
// 256 values in {-1, 0, 1} times one F16 scale d = max |x| per block.
//
// Layouts: ggml-common.h's block_tq1_0 and block_tq2_0 (formats.hpp).
// Quantizers: ggml-quants.c's quantize_row_tq1_0_ref / quantize_row_tq2_0_ref
// (llama-quantize never uses an importance matrix for them): each value is
// lroundf(x / d) (half away from zero), d = max |x|.
// Dot products mirror ggml-cpu's scalar ggml_vec_dot_tq{1,2}_0_q8_K: one
// integer sum per block, then sumf += sum * (d_w * d_8).
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "quant/formats.hpp"

namespace synapse::quant {
namespace {

// TQ1_0 packing: 5 trits t0..t4 (each 0..2, t0 most significant) form
// v = sum t_k 3^(4-k) in 0..242, stored as the byte ceil(v * 256 / 243): the
// byte is then a fixed-point fraction of 3^5, so multiplying it by 3^k
// (mod 256) brings trit k to the top and (byte * 3) >> 8 extracts it.
// ggml's qh bytes carry 4 trits with a fifth, zero, least-significant one.
constexpr uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};

inline uint8_t pack_trits(uint32_t v) { return static_cast<uint8_t>((v * 256 + (243 - 1)) / 243); }

// Trit k (0..4) of a TQ1_0 byte, as a value -1, 0 or 1.
inline int unpack_trit(uint8_t byte, int k) {
  const uint8_t q = static_cast<uint8_t>(byte * kPow3[k]);
  return ((static_cast<uint16_t>(q) * 3) >> 8) - 1;
}

// Per-block scale as ggml: d = amax, id = 1/d (0 for an all-zero block).
inline float block_amax(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < QK_K; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

// -1, 0, 1 -> 0, 1, 2 (lroundf: half away from zero, as ggml).
inline int trit_of(float x, float id) { return static_cast<int>(std::lround(x * id)) + 1; }

// Value order of a TQ1_0 block: qs[0..32) hold values m + 32*k of the first
// 160 (k = 0..4); qs[32..48) values 160 + m + 16*k; qh[0..4) values
// 240 + j + 4*k (k = 0..3).
constexpr size_t kQs = sizeof(block_tq1_0::qs);         // 48
constexpr size_t kQs32 = kQs - kQs % 32;                // 32
constexpr size_t kQh = sizeof(block_tq1_0::qh);         // 4

}  // namespace

// ---------------------------------------------------------------------------
// TQ1_0: block_tq1_0 = 48 bytes of 5 trits, 4 bytes of 4 trits, F16 d
// (1.6875 bits per weight).

// quantize_row_tq1_0_ref.
void quantize_row_tq1_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_tq1_0*>(vy);
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = block_amax(x);
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (size_t j = 0; j < kQs32; j += 32) {
      for (size_t m = 0; m < 32; ++m) {
        uint32_t q = 0;
        for (size_t k = 0; k < 5; ++k) q = q * 3 + static_cast<uint32_t>(trit_of(x[m + k * 32], id));
        y[i].qs[j + m] = pack_trits(q);
      }
      x += 5 * 32;
    }
    for (size_t j = kQs32; j < kQs; j += 16) {
      for (size_t m = 0; m < 16; ++m) {
        uint32_t q = 0;
        for (size_t k = 0; k < 5; ++k) q = q * 3 + static_cast<uint32_t>(trit_of(x[m + k * 16], id));
        y[i].qs[j + m] = pack_trits(q);
      }
      x += 5 * 16;
    }
    for (size_t j = 0; j < kQh; ++j) {
      uint32_t q = 0;
      for (size_t k = 0; k < 4; ++k) q = q * 3 + static_cast<uint32_t>(trit_of(x[j + k * kQh], id));
      y[i].qh[j] = pack_trits(q * 3);  // the fifth trit is 0
    }
    x += 4 * kQh;
  }
}

// dequantize_row_tq1_0: y = (float)t * d, t in {-1, 0, 1}.
void dequantize_row_tq1_0(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_tq1_0*>(vx);
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (size_t j = 0; j < kQs32; j += 32) {
      for (int k = 0; k < 5; ++k) {
        for (size_t m = 0; m < 32; ++m) *y++ = static_cast<float>(unpack_trit(x[i].qs[j + m], k)) * d;
      }
    }
    for (size_t j = kQs32; j < kQs; j += 16) {
      for (int k = 0; k < 5; ++k) {
        for (size_t m = 0; m < 16; ++m) *y++ = static_cast<float>(unpack_trit(x[i].qs[j + m], k)) * d;
      }
    }
    for (int k = 0; k < 4; ++k) {
      for (size_t j = 0; j < kQh; ++j) *y++ = static_cast<float>(unpack_trit(x[i].qh[j], k)) * d;
    }
  }
}

// ggml_vec_dot_tq1_0_q8_K (scalar).
float vec_dot_tq1_0_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_tq1_0*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const int64_t nb = n / QK_K;
  float sumf = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const int8_t* q8 = y[i].qs;
    int sum = 0;
    for (size_t j = 0; j < kQs32; j += 32) {
      for (int k = 0; k < 5; ++k) {
        for (size_t m = 0; m < 32; ++m) sum += unpack_trit(x[i].qs[j + m], k) * q8[j * 5 + k * 32 + m];
      }
    }
    for (size_t j = kQs32; j < kQs; j += 16) {
      for (int k = 0; k < 5; ++k) {
        for (size_t m = 0; m < 16; ++m) sum += unpack_trit(x[i].qs[j + m], k) * q8[j * 5 + k * 16 + m];
      }
    }
    for (int k = 0; k < 4; ++k) {
      for (size_t j = 0; j < kQh; ++j) sum += unpack_trit(x[i].qh[j], k) * q8[kQs * 5 + k * kQh + j];
    }
    sumf += static_cast<float>(sum) * (fp16_to_fp32(x[i].d) * y[i].d);
  }
  return sumf;
}

// ---------------------------------------------------------------------------
// TQ2_0: block_tq2_0 = 64 bytes of 4 two-bit values (stored t + 1), F16 d.
// Byte j + m of each 32-byte group holds values 4j + 32k + m at bits 2k.

// quantize_row_tq2_0_ref.
void quantize_row_tq2_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<block_tq2_0*>(vy);
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = block_amax(x);
    const float id = d != 0.f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (size_t j = 0; j < sizeof(y->qs); j += 32) {
      for (size_t m = 0; m < 32; ++m) {
        uint32_t q = 0;
        for (size_t k = 0; k < 4; ++k) q += static_cast<uint32_t>(trit_of(x[m + k * 32], id) & 3) << (2 * k);
        y[i].qs[j + m] = static_cast<uint8_t>(q);
      }
      x += 4 * 32;
    }
  }
}

// dequantize_row_tq2_0: y = (float)(q - 1) * d.
void dequantize_row_tq2_0(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const block_tq2_0*>(vx);
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (size_t j = 0; j < sizeof(x->qs); j += 32) {
      for (int k = 0; k < 4; ++k) {
        for (size_t m = 0; m < 32; ++m) *y++ = static_cast<float>(((x[i].qs[j + m] >> (2 * k)) & 3) - 1) * d;
      }
    }
  }
}

// ggml_vec_dot_tq2_0_q8_K (scalar).
float vec_dot_tq2_0_q8_K(int64_t n, const void* vw, const void* va) {
  const auto* x = static_cast<const block_tq2_0*>(vw);
  const auto* y = static_cast<const block_q8_K*>(va);
  const int64_t nb = n / QK_K;
  float sumf = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t sumi = 0;
    for (size_t j = 0; j < sizeof(x->qs); j += 32) {
      for (int k = 0; k < 4; ++k) {
        for (size_t m = 0; m < 32; ++m) sumi += y[i].qs[j * 4 + k * 32 + m] * (((x[i].qs[j + m] >> (2 * k)) & 3) - 1);
      }
    }
    const float d = y[i].d * fp16_to_fp32(x[i].d);
    sumf += static_cast<float>(sumi) * d;
  }
  return sumf;
}

}  // namespace synapse::quant

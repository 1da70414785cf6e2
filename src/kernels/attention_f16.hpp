// The F16 helpers both SIMD attention kernels use (attention_avx2.cpp,
// attention_avx512.cpp): cached K/V rows (F16) loaded as floats, and floats
// rounded through F16 (llama.cpp rounds q and the probabilities). F16 ->
// F32 is exact and F32 -> F16 rounds to nearest even at any register
// width, so each file gets these at its own width: where it is compiled
// with AVX-512 (F, BW) 16 lanes and a masked tail, else 8 lanes (F16C) and
// the tail one value at a time. Include only from instruction-set
// translation units (built with -mf16c at least).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "quant/fp16.hpp"

namespace synapse::kernels {
// Internal linkage (an anonymous namespace, as ops_avx2.hpp): these helpers
// are compiled with the including file's instruction-set flags, so no copy
// may be shared with another translation unit (scripts/check-isa-objects.sh).
namespace {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// The first n lanes (0 <= n <= 16) of a 16-lane mask.
inline __mmask16 first_n(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
#endif

// F16 -> F32 of n values: src [n] -> dst [n].
inline void load_f16(const quant::ggml_fp16_t* src, float* dst, int64_t n) {
  int64_t d = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  for (; d + 16 <= n; d += 16)
    _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + d))));
  if (d < n) {
    const __mmask16 m = first_n(n - d);
    _mm512_mask_storeu_ps(dst + d, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + d)));
  }
#else
  for (; d + 8 <= n; d += 8)
    _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + d))));
  for (; d < n; ++d) dst[d] = _cvtsh_ss(src[d]);
#endif
}

// Rounds n floats through F16 in place (round to nearest even, as
// quant::fp32_to_fp16).
inline void round_f16(float* x, int64_t n) {
  int64_t d = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  for (; d + 16 <= n; d += 16)
    _mm512_storeu_ps(x + d, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + d), _MM_FROUND_TO_NEAREST_INT)));
  if (d < n) {
    const __mmask16 m = first_n(n - d);
    _mm512_mask_storeu_ps(
        x + d, m, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + d), _MM_FROUND_TO_NEAREST_INT)));
  }
#else
  for (; d + 8 <= n; d += 8)
    _mm256_storeu_ps(x + d, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + d), _MM_FROUND_TO_NEAREST_INT)));
  for (; d < n; ++d) x[d] = _cvtsh_ss(_cvtss_sh(x[d], _MM_FROUND_TO_NEAREST_INT));
#endif
}

// x[0 .. n) = f16(x * inv), a product and a rounding to nearest even per
// value (the softmax's scaling and the probabilities' rounding).
inline void scale_round_f16(float* x, int64_t n, float inv) {
  int64_t d = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  const __m512 iv = _mm512_set1_ps(inv);
  for (; d + 16 <= n; d += 16)
    _mm512_storeu_ps(x + d, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(_mm512_loadu_ps(x + d), iv),
                                                            _MM_FROUND_TO_NEAREST_INT)));
  if (d < n) {
    const __mmask16 m = first_n(n - d);
    _mm512_mask_storeu_ps(x + d, m,
                          _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + d), iv),
                                                          _MM_FROUND_TO_NEAREST_INT)));
  }
#else
  const __m256 iv = _mm256_set1_ps(inv);
  for (; d + 8 <= n; d += 8)
    _mm256_storeu_ps(x + d, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + d), iv),
                                                             _MM_FROUND_TO_NEAREST_INT)));
  for (; d < n; ++d) x[d] = _cvtsh_ss(_cvtss_sh(x[d] * inv, _MM_FROUND_TO_NEAREST_INT));
#endif
}

// The cache rows of one KV group are hd F16 values every k_stride: a strided
// stream, so the lines of the row kRowsAhead positions on are asked for
// while this one is converted (a prefetch never changes a result).
constexpr int64_t kRowsAhead = 16;

// The cached row of position p in a paged view (kernels/attention.hpp):
// offset and stride are the K or the V ones.
inline const quant::ggml_fp16_t* kv_row(const quant::ggml_fp16_t* const* pages, int page_shift, int64_t offset,
                                        int64_t stride, int64_t p) {
  return pages[p >> page_shift] + offset + (p & ((int64_t{1} << page_shift) - 1)) * stride;
}

// Positions [j0, j1) of one KV group as floats: row j is the n F16 values at
// kv_row(pages, page_shift, offset, stride, j), converted into
// blk[(j - j0) * n ..]; the row kRowsAhead positions on (at most j1 - 1, so
// no page outside the call's range is looked up) is prefetched.
inline void load_rows_f16(const quant::ggml_fp16_t* const* pages, int page_shift, int64_t offset, int64_t stride,
                          int64_t j0, int64_t j1, int64_t n, float* blk) {
  for (int64_t j = j0; j < j1; ++j) {
    const int64_t ahead = j + kRowsAhead < j1 ? j + kRowsAhead : j1 - 1;
    const char* p = reinterpret_cast<const char*>(kv_row(pages, page_shift, offset, stride, ahead));
    for (int64_t off = 0; off < n * 2; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
    load_f16(kv_row(pages, page_shift, offset, stride, j), blk + (j - j0) * n, n);
  }
}

}  // namespace
}  // namespace synapse::kernels

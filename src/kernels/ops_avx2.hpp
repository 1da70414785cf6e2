// AVX2+FMA forms of the ggml exp (include only from *_avx2.cpp files, which
// are built with -mavx2 -mfma).
#pragma once

#include <immintrin.h>

#include <cmath>

namespace synapse::kernels {
// Internal linkage (an anonymous namespace, as neon_util.hpp): these helpers
// are compiled with the including file's instruction-set flags, so no copy
// may be shared with another translation unit (scripts/check-isa-objects.sh).
namespace {

// ggml_v_expf's AVX-512 version (kernels::expf_ggml) in 8 lanes; each lane
// equals kernels::expf_ggml bit for bit. _mm512_scalef_ps(j, n) = j * 2^n
// rounded once: for |n| <= 126 one multiply by 2^n (a normal float); for
// 126 < |n| <= 192 two, by 2^(n -+ 100) (exact: the product stays normal)
// and then by 2^(+-100) (the one rounding); beyond, 0 (n <= 0) or inf.
inline __m256 expf_ggml_avx2(__m256 x) {
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b =
      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
  const __m256i ni = _mm256_cvtps_epi32(n);  // n is integral (or NaN / huge: blended away or NaN through j)
  const __m256 k = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
  const __m256 fast = _mm256_mul_ps(j, k);
  const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 c = _mm256_cmp_ps(an, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  if (!_mm256_movemask_ps(c)) return fast;
  const __m256 le0 = _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ);
  const __m256i sh = _mm256_blendv_epi8(_mm256_set1_epi32(100), _mm256_set1_epi32(-100), _mm256_castps_si256(le0));
  const __m256 k1 = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, sh), _mm256_set1_epi32(127)), 23));
  const __m256 k2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(sh, _mm256_set1_epi32(127)), 23));
  const __m256 mid = _mm256_mul_ps(_mm256_mul_ps(j, k1), k2);
  const __m256 d = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  const __m256 big = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(), le0);
  return _mm256_blendv_ps(_mm256_blendv_ps(fast, mid, c), big, d);
}

}  // namespace
}  // namespace synapse::kernels

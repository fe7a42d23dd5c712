// x86 helpers shared by the CPU ops (ops.cpp) and attention (attention.cpp). Internal.
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/cpu_features.h"

namespace boltrt::cpu::x86 {

// Checked once: these run per row and per attention job, cpu_features() is not free.
inline bool have_avx2_fma() {
  static const bool yes = cpu_features().avx2 && cpu_features().fma;
  return yes;
}

// exp(x) of 4 doubles, accurate to a few units in the last place of a double: x = k ln2 + r
// (Cody-Waite, |r| <= ln2/2), exp(r) by its Taylor series to r^13 (truncation < 4e-18
// relative), times 2^k put into the exponent bits. x is clamped to [-708, 709] (2^k stays a
// normal double; exp(-708) is 0 once rounded to float); NaN stays NaN. Rounded to float, the
// result is the correctly rounded expf(x) except within ~1e-15 of a rounding boundary, so it
// agrees with libm's expf (itself within 0.502 ulp) but runs 4 values at a time.
__attribute__((target("avx2,fma"))) inline __m256d exp_pd_avx2(__m256d x) {
  x = _mm256_min_pd(_mm256_set1_pd(709.0), _mm256_max_pd(_mm256_set1_pd(-708.0), x));
  const __m256d k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634074)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(6.93147180369123816490e-01), x);  // ln2 high
  r = _mm256_fnmadd_pd(k, _mm256_set1_pd(1.90821492927058770002e-10), r);          // ln2 low
  // 1/n! for n = 13 .. 0
  static constexpr double kInvFactorial[] = {1.0 / 6227020800.0,
                                             1.0 / 479001600.0,
                                             1.0 / 39916800.0,
                                             1.0 / 3628800.0,
                                             1.0 / 362880.0,
                                             1.0 / 40320.0,
                                             1.0 / 5040.0,
                                             1.0 / 720.0,
                                             1.0 / 120.0,
                                             1.0 / 24.0,
                                             1.0 / 6.0,
                                             0.5,
                                             1.0,
                                             1.0};
  __m256d p = _mm256_set1_pd(kInvFactorial[0]);
  for (int i = 1; i < 14; ++i) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(kInvFactorial[i]));
  // 2^k: k + 1023 in the low bits of (k + 1.5 * 2^52), shifted into the exponent field
  const __m256i bits = _mm256_castpd_si256(_mm256_add_pd(k, _mm256_set1_pd(6755399441055744.0)));
  const __m256i pow2k = _mm256_slli_epi64(_mm256_add_epi64(bits, _mm256_set1_epi64x(1023)), 52);
  return _mm256_mul_pd(p, _mm256_castsi256_pd(pow2k));
}

}  // namespace boltrt::cpu::x86
#endif

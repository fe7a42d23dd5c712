// AVX-512 activation quantizers for matmul (matmul.cpp routes convert_activation_row here at the
// AVX-512 level): f32 activation rows to the Q8_K and Q8_0 blocks the weight kernels take, bit for
// bit what the scalar quantizers of matmul_scalar.cpp write (tests/test_matmul.cpp compares them).
// GCC 12's AVX-512 headers build some results from _mm512_undefined_* and then warn about their
// own self-initialised vector (a known false positive, as in matmul_avx512.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/matmul_internal.h"

namespace boltrt::cpu {

// Bit-identical to the scalar quantize_act_q8_k (matmul_scalar.cpp): the same max search (first
// element of the largest magnitude gives the sign), the same float products, and vcvtps2dq
// under the default round-to-nearest-even equals ggml's nearest_int for |v| <= 127.
void avx512_quantize_act_q8_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<ActQ8_K*>(dst);
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    __m512 vmax = _mm512_setzero_ps();
    for (int j = 0; j < 256; j += 16)
      vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
    const float amax = _mm512_reduce_max_ps(vmax);
    if (!(amax > 0.0f)) {
      std::memset(&y[b], 0, sizeof(ActQ8_K));
      continue;
    }
    float max = 0.0f;
    const __m512 target = _mm512_set1_ps(amax);
    for (int j = 0; j < 256; j += 16) {
      const __mmask16 hit =
          _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + j)), target, _CMP_EQ_OQ);
      if (hit != 0) {
        max = x[j + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 vs = _mm512_set1_ps(iscale);
    const __m512i cap = _mm512_set1_epi32(127);
    alignas(64) int16_t sums[16];
    for (int g = 0; g < 16; ++g) {
      const __m512i q =
          _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * g))), cap);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16 * g), _mm512_cvtepi32_epi8(q));
      sums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    std::memcpy(y[b].bsums, sums, sizeof sums);
    y[b].d = 1.0f / iscale;
  }
}

// Bit-identical to the scalar quantize_act_q8_0 (matmul_scalar.cpp): the maximum is exact in
// any order, d and 127 / amax are the same float operations, fp16(d) rounds to nearest even as
// fp32_to_fp16 does, and vcvtps2dq under the default round-to-nearest-even equals nearest_int
// for |v| <= 127. A small model quantizes ~35 activation rows per token (a tenth of a verify).
void avx512_quantize_act_q8_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<ActQ8_0*>(dst);
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    const __m512 vid = _mm512_set1_ps(id);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs),
                     _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, vid))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16),
                     _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, vid))));
  }
}

}  // namespace boltrt::cpu

#include "backend/cpu/ops.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul.h"
#include "runtime/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define BOLTRT_OPS_X86 1
#endif

namespace boltrt::cpu {

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: mantissa * 2^-24
      const float v = std::ldexp(static_cast<float>(mantissa), -24);
      return sign ? -v : v;
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t fp32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mantissa = x & 0x7fffffu;
  const int32_t exponent = static_cast<int32_t>((x >> 23) & 0xffu);
  if (exponent == 0xff) {  // inf / nan (keep nan quiet)
    return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u | (mantissa >> 13) : 0u));
  }
  const int32_t e = exponent - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {  // half subnormal (or zero): value = full_mantissa >> (14 - e) units of 2^-24
    if (e < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    const int shift = 14 - e;
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // a carry rounds up to inf
  return static_cast<uint16_t>(sign | half);
}

#if BOLTRT_OPS_X86
namespace {

// Checked once: these run per row and per attention job, cpu_features() is not free.
bool have_f16c() {
  static const bool yes = cpu_features().f16c && cpu_features().avx;
  return yes;
}

__attribute__((target("avx,f16c"))) void fp16_to_fp32_f16c(const uint16_t* src, float* dst,
                                                           int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

__attribute__((target("avx,f16c"))) void fp32_to_fp16_f16c(const float* src, uint16_t* dst,
                                                           int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

bool have_avx2_fma() {
  static const bool yes = cpu_features().avx2 && cpu_features().fma;
  return yes;
}

// Sum of squares of n floats (each square rounded to float, as the scalar loop does), summed
// in double over 8 lanes: rms_norm runs ~15 times per token and layer, and the scalar chain of
// double adds was a tenth of a small model's forward pass.
__attribute__((target("avx2,fma"))) double sum_squares_avx2(const float* x, int64_t n) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sq = _mm256_mul_ps(v, v);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(s0, s1));
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

// y = (x * scale) * w (w null: x * scale), the scalar loop's roundings.
__attribute__((target("avx2,fma"))) void scale_row_avx2(const float* x, const float* w, float scale,
                                                        int64_t n, float* y) {
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), s);
    if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(y + i, v);
  }
  for (; i < n; ++i) y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

// acc[d] += sum_j e[j] * v_j[d] (v_j = v + j * stride), d < n (a multiple of 8). 64 dims at a
// time keep 8 independent fma chains in flight (one chain per 8 dims was latency bound).
__attribute__((target("avx2,fma"))) void weighted_sum_avx2(const float* e, const float* v,
                                                           int64_t stride, int64_t count,
                                                           float* acc, int64_t n) {
  int64_t d = 0;
  for (; d + 64 <= n; d += 64) {
    __m256 a[8];
    for (int k = 0; k < 8; ++k) a[k] = _mm256_loadu_ps(acc + d + 8 * k);
    for (int64_t j = 0; j < count; ++j) {
      const __m256 w = _mm256_set1_ps(e[j]);
      const float* vj = v + j * stride + d;
      for (int k = 0; k < 8; ++k) a[k] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 8 * k), a[k]);
    }
    for (int k = 0; k < 8; ++k) _mm256_storeu_ps(acc + d + 8 * k, a[k]);
  }
  for (; d < n; d += 8) {
    __m256 a = _mm256_loadu_ps(acc + d);
    for (int64_t j = 0; j < count; ++j)
      a = _mm256_fmadd_ps(_mm256_set1_ps(e[j]), _mm256_loadu_ps(v + j * stride + d), a);
    _mm256_storeu_ps(acc + d, a);
  }
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  }
  const __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// dot_avx2(q, k) for head_dim kN (a multiple of 16) with q held in registers: the same
// operations in the same order as dot_avx2, two keys at a time.
template <int kN>
__attribute__((target("avx2,fma"), always_inline)) inline void dot2_fixed(const __m256* qv,
                                                                          const float* k0,
                                                                          const float* k1,
                                                                          float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
  for (int i = 0; i < kN / 8; i += 2) {
    a0 = _mm256_fmadd_ps(qv[i], _mm256_loadu_ps(k0 + 8 * i), a0);
    a1 = _mm256_fmadd_ps(qv[i + 1], _mm256_loadu_ps(k0 + 8 * i + 8), a1);
    b0 = _mm256_fmadd_ps(qv[i], _mm256_loadu_ps(k1 + 8 * i), b0);
    b1 = _mm256_fmadd_ps(qv[i + 1], _mm256_loadu_ps(k1 + 8 * i + 8), b1);
  }
  const __m256 acc[2] = {_mm256_add_ps(a0, a1), _mm256_add_ps(b0, b1)};
  for (int j = 0; j < 2; ++j) {
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    out[j] = _mm_cvtss_f32(t);
  }
}

template <int kN>
__attribute__((target("avx2,fma"))) void scores_fixed(const float* q, const float* k,
                                                      int64_t stride, int64_t count, float* out) {
  __m256 qv[kN / 8];
  for (int i = 0; i < kN / 8; ++i) qv[i] = _mm256_loadu_ps(q + 8 * i);
  int64_t j = 0;
  for (; j + 2 <= count; j += 2) dot2_fixed<kN>(qv, k + j * stride, k + (j + 1) * stride, out + j);
  if (j < count) {
    float pair[2];
    dot2_fixed<kN>(qv, k + j * stride, k + j * stride, pair);
    out[j] = pair[0];
  }
}

// exp(x) of 8 floats: x = n ln2 + r, |r| <= ln2/2, exp(r) by its Taylor series to r^7 (relative
// error < 2e-8 before rounding), times 2^n; x is clamped to [-87, 88] (2^n stays normal).
__attribute__((target("avx2,fma"))) __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);  // ln2, high bits
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);  // ln2, the rest
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  for (const float c : {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f})
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  const __m256i pow2n =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2n));
}

// exp(x) of 4 doubles, accurate to a few units in the last place of a double: x = k ln2 + r
// (Cody-Waite, |r| <= ln2/2), exp(r) by its Taylor series to r^13 (truncation < 4e-18
// relative), times 2^k put into the exponent bits. x is clamped to [-708, 709] (2^k stays a
// normal double; exp(-708) is 0 once rounded to float); NaN stays NaN. Rounded to float, the
// result is the correctly rounded expf(x) except within ~1e-15 of a rounding boundary, so it
// agrees with libm's expf (itself within 0.502 ulp) but runs 4 values at a time.
__attribute__((target("avx2,fma"))) __m256d exp_pd_avx2(__m256d x) {
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

// tanh of 4 doubles (from floats), accurate to ~1e-15 relative: |y| < 1/64 by its odd series to
// y^9, else (e - 1) / (e + 1) with e = exp(2|y|) (|y| clamped at 20, where tanh is 1 in float
// and double alike); the sign of y put back. NaN stays NaN.
__attribute__((target("avx2,fma"))) __m256d tanh_pd_avx2(__m256d y) {
  const __m256d sign = _mm256_and_pd(y, _mm256_set1_pd(-0.0));
  const __m256d a = _mm256_min_pd(_mm256_set1_pd(20.0), _mm256_andnot_pd(_mm256_set1_pd(-0.0), y));
  const __m256d e = exp_pd_avx2(_mm256_add_pd(a, a));
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256d big = _mm256_div_pd(_mm256_sub_pd(e, one), _mm256_add_pd(e, one));
  const __m256d a2 = _mm256_mul_pd(a, a);
  __m256d s = _mm256_set1_pd(62.0 / 2835.0);
  s = _mm256_fmadd_pd(s, a2, _mm256_set1_pd(-17.0 / 315.0));
  s = _mm256_fmadd_pd(s, a2, _mm256_set1_pd(2.0 / 15.0));
  s = _mm256_fmadd_pd(s, a2, _mm256_set1_pd(-1.0 / 3.0));
  const __m256d small = _mm256_fmadd_pd(_mm256_mul_pd(s, a2), a, a);
  const __m256d is_small = _mm256_cmp_pd(a, _mm256_set1_pd(0.015625), _CMP_LT_OQ);
  return _mm256_or_pd(_mm256_blendv_pd(big, small, is_small), sign);
}

// softcap of 8 floats: tanh(x * inv) * cap, each step rounded to float as the scalar loop does.
__attribute__((target("avx2,fma"))) __m256 softcap8_avx2(__m256 x, __m256 inv, __m256 cap) {
  const __m256 y = _mm256_mul_ps(x, inv);
  const __m128 lo = _mm256_cvtpd_ps(tanh_pd_avx2(_mm256_cvtps_pd(_mm256_castps256_ps128(y))));
  const __m128 hi = _mm256_cvtpd_ps(tanh_pd_avx2(_mm256_cvtps_pd(_mm256_extractf128_ps(y, 1))));
  return _mm256_mul_ps(_mm256_set_m128(hi, lo), cap);
}

// The whole row through softcap8_avx2 (the tail padded), so every element gets the same
// arithmetic wherever it sits.
__attribute__((target("avx2,fma"))) void softcap_avx2(float* x, int64_t n, float cap) {
  const __m256 inv = _mm256_set1_ps(1.0f / cap), c = _mm256_set1_ps(cap);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, softcap8_avx2(_mm256_loadu_ps(x + i), inv, c));
  if (i < n) {
    alignas(32) float tail[8] = {};
    std::memcpy(tail, x + i, static_cast<size_t>(n - i) * sizeof(float));
    _mm256_store_ps(tail, softcap8_avx2(_mm256_load_ps(tail), inv, c));
    std::memcpy(x + i, tail, static_cast<size_t>(n - i) * sizeof(float));
  }
}

// Softmax weights of attention scores: s[j] = float(exp(s[j] - max)) for j < n (the subtraction
// in float, as the scalar loop does), returning the sum of the rounded weights in double (four
// lanes, then pairs). Every element goes through exp_pd_avx2 (the tail padded with -inf, which
// gives 0), so a key's weight does not depend on where the visible keys start.
__attribute__((target("avx2,fma"))) inline __m128 softmax_weights4_avx2(__m128 v, __m128 max,
                                                                        __m256d& sum) {
  const __m128 e = _mm256_cvtpd_ps(exp_pd_avx2(_mm256_cvtps_pd(_mm_sub_ps(v, max))));
  sum = _mm256_add_pd(sum, _mm256_cvtps_pd(e));
  return e;
}

__attribute__((target("avx2,fma"))) double softmax_weights_avx2(float* s, int64_t n, float max) {
  const __m128 m = _mm_set1_ps(max);
  __m256d sum = _mm256_setzero_pd();
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    _mm_storeu_ps(s + j, softmax_weights4_avx2(_mm_loadu_ps(s + j), m, sum));
  if (j < n) {
    alignas(16) float tail[4];
    for (int k = 0; k < 4; ++k)
      tail[k] = j + k < n ? s[j + k] : -std::numeric_limits<float>::infinity();
    _mm_store_ps(tail, softmax_weights4_avx2(_mm_load_ps(tail), m, sum));
    std::memcpy(s + j, tail, static_cast<size_t>(n - j) * sizeof(float));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, sum);
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

__attribute__((target("avx2,fma"))) int64_t silu_mul_avx2(const float* gate, const float* up,
                                                          float* out, int64_t n) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(
        out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  return i;
}

__attribute__((target("avx2,fma"))) float max_avx2(const float* x, int64_t n) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float max = lanes[0];
  for (int k = 1; k < 8; ++k) max = std::max(max, lanes[k]);
  for (; i < n; ++i) max = std::max(max, x[i]);
  return max;
}
}  // namespace
#endif

namespace {

float dot(const float* a, const float* b, int64_t n) {
#if BOLTRT_OPS_X86
  if (have_avx2_fma()) return dot_avx2(a, b, n);
#endif
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
#if BOLTRT_OPS_X86
  if (have_f16c()) return fp16_to_fp32_f16c(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
#if BOLTRT_OPS_X86
  if (have_f16c()) return fp32_to_fp16_f16c(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
#if BOLTRT_OPS_X86
  if (have_avx2_fma()) {
    const float mean = static_cast<float>(sum_squares_avx2(x, n) / static_cast<double>(n));
    scale_row_avx2(x, w, 1.0f / std::sqrt(mean + eps), n, y);
    return;
  }
#endif
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void rms_norm_rows(float* x, int64_t rows, int64_t n, const float* w, float eps) {
  for (int64_t r = 0; r < rows; ++r) rms_norm(x + r * n, w, n, eps, x + r * n);
}

void rope_angles(int64_t pos, int64_t n_rot, float base, const float* freq_factors, float* cos_out,
                 float* sin_out) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const float ff = freq_factors ? freq_factors[i] : 1.0f;
    const float angle = theta / ff;
    cos_out[i] = std::cos(angle);
    sin_out[i] = std::sin(angle);
    theta *= theta_scale;
  }
}

void rope_neox(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cos_in,
               const float* sin_in) {
  const int64_t half = n_rot / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float a = v[i];
      const float b = v[i + half];
      v[i] = a * cos_in[i] - b * sin_in[i];
      v[i + half] = a * sin_in[i] + b * cos_in[i];
    }
  }
}

float gelu_exact(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

namespace {

// gelu of every f16 value, rounded to f16 (what ggml's CPU backend tabulates at start-up).
const float* gelu_table() {
  static const std::unique_ptr<float[]> table = [] {
    auto t = std::make_unique<float[]>(65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      t[i] = fp16_to_fp32(fp32_to_fp16(gelu_exact(fp16_to_fp32(static_cast<uint16_t>(i)))));
    }
    return t;
  }();
  return table.get();
}

}  // namespace

float gelu(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return gelu_table()[fp32_to_fp16(x)];
}

void geglu(const float* gate, const float* up, float* out, int64_t n) {
  const float* table = gelu_table();
  uint16_t half[256];
  for (int64_t begin = 0; begin < n; begin += 256) {
    const int64_t m = std::min<int64_t>(256, n - begin);
    fp32_to_fp16_row(gate + begin, half, m);
    for (int64_t j = 0; j < m; ++j) {
      const float g = gate[begin + j];
      const float a = g <= -10.0f ? 0.0f : g >= 10.0f ? g : table[half[j]];
      out[begin + j] = a * up[begin + j];
    }
  }
}

void gelu_inplace(float* x, int64_t n) {
  const float* table = gelu_table();
  uint16_t half[256];
  for (int64_t begin = 0; begin < n; begin += 256) {
    const int64_t m = std::min<int64_t>(256, n - begin);
    fp32_to_fp16_row(x + begin, half, m);
    for (int64_t j = 0; j < m; ++j) {
      const float g = x[begin + j];
      x[begin + j] = g <= -10.0f ? 0.0f : g >= 10.0f ? g : table[half[j]];
    }
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
#if BOLTRT_OPS_X86
  if (have_avx2_fma()) i = silu_mul_avx2(gate, up, out, n);
#endif
  for (; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

int64_t argmax(const float* x, int64_t n) {
#if BOLTRT_OPS_X86
  if (have_avx2_fma() && n > 0) {
    // the maximum in 8 lanes, then its first position
    const float max = max_avx2(x, n);
    for (int64_t i = 0; i < n; ++i) {
      if (x[i] == max) return i;
    }
  }
#endif
  return std::max_element(x, x + n) - x;
}

// tanh(x * (1/cap)) * cap with each step rounded to float, as llama.cpp's scale, tanh, scale;
// the tanh itself in double, so it is the correctly rounded tanhf (libm's float tanhf is 1 ulp
// off for ~5 % of inputs) and every platform and SIMD level gives the same logits.
void softcap(float* x, int64_t n, float cap) {
#if BOLTRT_OPS_X86
  // (a vocabulary of 262,144 logits per row: libm's tanhf took 2.3 ms of every E4B token)
  if (have_avx2_fma()) return softcap_avx2(x, n, cap);
#endif
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(std::tanh(static_cast<double>(x[i] * inv))) * cap;
  }
}

void softmax(float* x, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void route_top_k(const float* logits, int64_t n_expert, int64_t k, int32_t* selected,
                 float* weights) {
  std::vector<float> probs(logits, logits + n_expert);
  softmax(probs.data(), n_expert);
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    selected[i] = order[static_cast<size_t>(i)];
    weights[i] = probs[static_cast<size_t>(order[static_cast<size_t>(i)])];
    sum += weights[i];
  }
  sum = std::max(sum, 6.103515625e-5f);
  for (int64_t i = 0; i < k; ++i) weights[i] /= sum;
}

void AttentionAccumulator::begin(int64_t n_tokens, int64_t n_head, int64_t head_dim) {
  n_tokens_ = n_tokens;
  n_head_ = n_head;
  head_dim_ = head_dim;
  const size_t jobs = static_cast<size_t>(n_tokens * n_head);
  max_.assign(jobs, -std::numeric_limits<float>::infinity());
  sum_.assign(jobs, 0.0);
  acc_.assign(jobs * static_cast<size_t>(head_dim), 0.0f);
}

namespace {

// The three passes of attention over one run of keys, at the best level the CPU (and
// simd_level(), for tests) allows. Each level has one arithmetic per (query, key) dot product
// and per output element, whatever the blocking, batching or threading around it, so a query
// row gets the same bits alone as in a batch (decode = verify = prefill).
struct AttentionKernels {
  bool vector = false;  // AVX2 (or AVX-512) softmax weights and weighted sum
  bool avx512 = false;  // AVX-512 dots and weighted sums (head_dim a multiple of 16)
  bool avx2_dots = false;

  explicit AttentionKernels(int64_t head_dim) {
#if BOLTRT_OPS_X86
    avx2_dots = have_avx2_fma();
    vector = avx2_dots && head_dim % 8 == 0;
    avx512 = vector && head_dim % 16 == 0 && simd_level() == SimdLevel::Avx512;
#else
    (void)head_dim;
#endif
  }

  // out[j] = q . k_j (unscaled), j < count
  void dots(const float* q, const float* k, int64_t stride, int64_t count, int64_t head_dim,
            float* out) const {
#if BOLTRT_OPS_X86
    if (avx512) return detail::attention_dots_avx512(q, k, stride, count, head_dim, out);
    if (avx2_dots) {
      if (head_dim == 64) return scores_fixed<64>(q, k, stride, count, out);
      if (head_dim == 128) return scores_fixed<128>(q, k, stride, count, out);
      for (int64_t j = 0; j < count; ++j) out[j] = dot_avx2(q, k + j * stride, head_dim);
      return;
    }
#endif
    for (int64_t j = 0; j < count; ++j) out[j] = dot(q, k + j * stride, head_dim);
  }

  // s[j] = exp(s[j] - max), returning the sum of the weights (in double)
  double weights(float* s, int64_t n, float max) const {
#if BOLTRT_OPS_X86
    // exp in double, 4 at a time: within rounding of std::exp
    if (vector) return softmax_weights_avx2(s, n, max);
#endif
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      s[j] = std::exp(s[j] - max);
      sum += static_cast<double>(s[j]);
    }
    return sum;
  }

  // acc[d] += sum_j e[j] * v_j[d]; with e1/acc1, a second query over the same keys
  void weighted_sum(const float* e, const float* e1, const float* v, int64_t stride, int64_t count,
                    float* acc, float* acc1, int64_t head_dim) const {
#if BOLTRT_OPS_X86
    if (avx512) {
      if (e1) {
        return detail::attention_weighted_sum_pair_avx512(e, e1, v, stride, count, acc, acc1,
                                                          head_dim);
      }
      return detail::attention_weighted_sum_avx512(e, v, stride, count, acc, head_dim);
    }
    if (vector) {
      weighted_sum_avx2(e, v, stride, count, acc, head_dim);
      if (e1) weighted_sum_avx2(e1, v, stride, count, acc1, head_dim);
      return;
    }
#endif
    for (const auto& [w, a] : {std::pair{e, acc}, std::pair{e1, acc1}}) {
      if (!w) continue;
      for (int64_t j = 0; j < count; ++j) {
        const float* vj = v + j * stride;
        for (int64_t d = 0; d < head_dim; ++d) a[d] += w[j] * vj[d];
      }
    }
  }
};

}  // namespace

// The jobs (token t, query head h) that read one KV head form units: a unit walks its keys in
// blocks small enough to stay in L1 (K for the dot products, then V for the weighted sums)
// while every job of the unit uses them, instead of each job streaming all keys from L2. A
// one-token step of a GQA model shares each key among its query heads; a verify or prefill
// batch among all its rows too.
void AttentionAccumulator::add(const float* q, int64_t q_pos0, const float* k, const float* v,
                               int64_t n_kv, int64_t kv_pos0, int64_t n_head_kv, int64_t window,
                               float scale, ThreadPool* pool) {
  const int64_t n_head = n_head_, head_dim = head_dim_, n_tokens = n_tokens_;
  const int64_t group = n_head / n_head_kv;
  const int64_t q_stride = n_head * head_dim;
  const int64_t kv_stride = n_head_kv * head_dim;
  const AttentionKernels kern(head_dim);
  // ~16 KB of keys per block, a multiple of 8 keys (the AVX-512 dot kernel's step)
  const int64_t block = std::max<int64_t>(8, (16384 / (head_dim * 4)) / 8 * 8);

  // Units: KV head x a run of tokens x a run of the KV head's query heads; at most ~64 jobs
  // (their scores stay small), and with threads enough units to share.
  const int64_t jobs = n_tokens * n_head;
  // below ~64K multiply-adds a thread hand-off costs more than it saves
  const bool parallel = pool && pool->size() > 1 && jobs > 1 && jobs * n_kv * head_dim >= (1 << 16);
  int64_t unit_tokens = std::clamp<int64_t>(64 / group, 1, n_tokens);
  int64_t unit_heads = group;
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  if (parallel) {
    const int64_t want = 2 * pool->size();
    while (unit_tokens > 1 && n_head_kv * ceil_div(n_tokens, unit_tokens) < want) {
      unit_tokens = ceil_div(unit_tokens, 2);
    }
    const int64_t units = n_head_kv * ceil_div(n_tokens, unit_tokens);
    if (units < want) unit_heads = std::max<int64_t>(1, group * units / want);
  }
  const int64_t token_runs = ceil_div(n_tokens, unit_tokens);
  const int64_t head_runs = ceil_div(group, unit_heads);
  const int64_t n_units = n_head_kv * token_runs * head_runs;

  struct Job {
    int64_t id, j0, j1;  // (token, head) index; visible key rows [j0, j1) of this chunk
    float* s;            // scores, then weights, of rows j0 .. j1 - 1 (s[j])
  };
  auto run_unit = [&](int64_t unit) {
    const int64_t kvh = unit / (token_runs * head_runs);
    const int64_t t_begin = (unit / head_runs) % token_runs * unit_tokens;
    const int64_t t_end = std::min(n_tokens, t_begin + unit_tokens);
    const int64_t h_begin = kvh * group + unit % head_runs * unit_heads;
    const int64_t h_end = std::min((kvh + 1) * group, h_begin + unit_heads);
    // per thread, kept between calls (a verify step has ~16 attention calls)
    thread_local std::vector<float> score_buffer;
    thread_local std::vector<Job> unit_jobs;
    unit_jobs.clear();
    int64_t lo = n_kv, hi = 0;
    for (int64_t t = t_begin; t < t_end; ++t) {
      const int64_t pos = q_pos0 + t;
      const int64_t first = window > 0 ? pos - window + 1 : 0;
      const int64_t j0 = std::max<int64_t>(0, first - kv_pos0);
      const int64_t j1 = std::min<int64_t>(n_kv, pos - kv_pos0 + 1);
      if (j1 <= j0) continue;
      for (int64_t h = h_begin; h < h_end; ++h) unit_jobs.push_back({t * n_head + h, j0, j1, {}});
      lo = std::min(lo, j0);
      hi = std::max(hi, j1);
    }
    if (unit_jobs.empty()) return;
    const size_t need = unit_jobs.size() * static_cast<size_t>(n_kv);
    if (score_buffer.size() < need) score_buffer.resize(need);
    for (size_t i = 0; i < unit_jobs.size(); ++i) {
      unit_jobs[i].s = score_buffer.data() + i * static_cast<size_t>(n_kv);
    }
    const float* k_head = k + kvh * head_dim;
    const float* v_head = v + kvh * head_dim;

    // 1. dot products, a block of keys at a time for every job
    for (int64_t b = lo; b < hi; b += block) {
      const int64_t e = std::min(hi, b + block);
      for (const Job& job : unit_jobs) {
        const int64_t r0 = std::max(job.j0, b), r1 = std::min(job.j1, e);
        if (r0 >= r1) continue;
        kern.dots(q + job.id / n_head * q_stride + job.id % n_head * head_dim,
                  k_head + r0 * kv_stride, kv_stride, r1 - r0, head_dim, job.s + r0);
      }
    }
    // 2. per job: scale, maximum, rescale of earlier chunks, softmax weights
    for (const Job& job : unit_jobs) {
      float chunk_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = job.j0; j < job.j1; ++j) {
        job.s[j] *= scale;
        chunk_max = std::max(chunk_max, job.s[j]);
      }
      float& max = max_[static_cast<size_t>(job.id)];
      double& sum = sum_[static_cast<size_t>(job.id)];
      float* acc = acc_.data() + job.id * head_dim;
      if (chunk_max > max) {  // rescale what earlier chunks added
        if (sum > 0.0) {
          const float c = std::exp(max - chunk_max);
          sum *= static_cast<double>(c);
          for (int64_t d = 0; d < head_dim; ++d) acc[d] *= c;
        }
        max = chunk_max;
      }
      sum += kern.weights(job.s + job.j0, job.j1 - job.j0, max);
    }
    // 3. weighted sums of the values, a block of keys at a time; neighbouring jobs with the
    //    same visible keys (the query heads of one token) in pairs
    for (int64_t b = lo; b < hi; b += block) {
      const int64_t e = std::min(hi, b + block);
      for (size_t i = 0; i < unit_jobs.size(); ++i) {
        const Job& job = unit_jobs[i];
        const int64_t r0 = std::max(job.j0, b), r1 = std::min(job.j1, e);
        if (r0 >= r1) continue;
        const Job* pair = i + 1 < unit_jobs.size() && unit_jobs[i + 1].j0 == job.j0 &&
                                  unit_jobs[i + 1].j1 == job.j1
                              ? &unit_jobs[i + 1]
                              : nullptr;
        kern.weighted_sum(job.s + r0, pair ? pair->s + r0 : nullptr, v_head + r0 * kv_stride,
                          kv_stride, r1 - r0, acc_.data() + job.id * head_dim,
                          pair ? acc_.data() + pair->id * head_dim : nullptr, head_dim);
        if (pair) ++i;
      }
    }
  };
  if (parallel && n_units > 1) {
    // Units from a shared counter (run_shared): a worker the OS has not scheduled is not waited
    // for. With parallel_for a verify step's attention waited a whole time slice (~6 ms)
    // whenever the other core was busy.
    std::atomic<int64_t> next{0};
    pool->run_shared([&](int) {
      for (int64_t u = next.fetch_add(1); u < n_units; u = next.fetch_add(1)) run_unit(u);
    });
  } else {
    for (int64_t u = 0; u < n_units; ++u) run_unit(u);
  }
}

void AttentionAccumulator::finish(float* out) const {
  for (int64_t job = 0; job < n_tokens_ * n_head_; ++job) {
    const double sum = sum_[static_cast<size_t>(job)];
    const float inv = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
    const float* acc = acc_.data() + job * head_dim_;
    float* o = out + job * head_dim_;
    for (int64_t d = 0; d < head_dim_; ++d) o[d] = acc[d] * inv;
  }
}

void attention(const float* q, int64_t n_tokens, int64_t q_pos0, const float* k, const float* v,
               int64_t n_kv, int64_t kv_pos0, int64_t n_head, int64_t n_head_kv, int64_t head_dim,
               int64_t window, float scale, float* out, ThreadPool* pool) {
  AttentionAccumulator acc;
  acc.begin(n_tokens, n_head, head_dim);
  acc.add(q, q_pos0, k, v, n_kv, kv_pos0, n_head_kv, window, scale, pool);
  acc.finish(out);
}

}  // namespace boltrt::cpu

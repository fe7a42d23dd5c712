#include "backend/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/ops_x86.h"

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

using x86::exp_pd_avx2;
using x86::have_avx2_fma;

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

}  // namespace boltrt::cpu

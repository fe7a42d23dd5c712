// IQ4_NL and IQ4_XS quantizers as llama-quantize runs them (ggml_quantize_chunk without an
// imatrix; quant-formats.md §6.1-6.2): per 32-element sub-block a search over 15 candidate scales
// against the non-linear code book, weights x^2.
#include <cmath>
#include <cstring>

#include "quant/fp16.h"
#include "quant/quant_search.h"
#include "quant/quantize_impl.h"
#include "quant/unpack.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace boltrt::quant_detail {
namespace {

constexpr int kTries = 7;

// Best signed scale of one 32-element sub-block (0 for an all-zero one); codes go to L.
// Weights: x^2, or with importance qw: qw * sqrt(sigma2 + x^2).
float search_sub_block(const float* x, uint8_t* L, const float* qw, float sigma2) {
  float weight[32];
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    weight[j] = qw ? qw[j] * std::sqrt(sigma2 + x[j] * x[j]) : x[j] * x[j];
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  const float first = static_cast<float>(kIQ4NLValues[0]);
  float d = -max / first;
  float id = 1.0f / d;
  float sumqx = 0.0f, sumq2 = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const int l = best_index_iq4nl(id * x[j]);
    L[j] = static_cast<uint8_t>(l);
    const float q = static_cast<float>(kIQ4NLValues[l]);
    sumqx += weight[j] * q * x[j];
    sumq2 += weight[j] * q * q;
  }
  d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int t = -kTries; t <= kTries; ++t) {
    id = static_cast<float>(t + kIQ4NLValues[0]) / max;
    sumqx = sumq2 = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float q = static_cast<float>(kIQ4NLValues[best_index_iq4nl(id * x[j])]);
      sumqx += weight[j] * q * x[j];
      sumq2 += weight[j] * q * q;
    }
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | L[j + 16] << 4);
}

// 2 * mean square of the super-block (the imatrix weights' sigma term).
float sigma2_of(const float* x, int n) {
  float sigma2 = 0.0f;
  for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
  return sigma2 * (2.0f / static_cast<float>(n));
}

}  // namespace

void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n, const float* qw) {
  uint8_t L[32];
  for (int64_t i = 0; i < n / QK4_NL; ++i, x += QK4_NL) {
    const float* qwb = qw ? qw + i * QK4_NL : nullptr;
    const float d = search_sub_block(x, L, qwb, qwb ? sigma2_of(x, QK4_NL) : 0.0f);
    y[i].d = fp32_to_fp16(d);
    // The codes are recomputed with the fp32 scale (an all-zero block gets code 8 everywhere).
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(best_index_iq4nl(id * x[j]));
    pack_nibbles(L, y[i].qs);
  }
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n, const float* qw) {
  uint8_t L[32];
  float scales[QK_K / 32];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    const float* qwb = qw ? qw + i * QK_K : nullptr;
    const float sigma2 = qwb ? sigma2_of(x, QK_K) : 0.0f;
    float max_scale = 0.0f, amax_scale = 0.0f;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      scales[ib] = search_sub_block(x + 32 * ib, L, qwb ? qwb + 32 * ib : nullptr, sigma2);
      if (std::fabs(scales[ib]) > amax_scale) {
        amax_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    const float d = -max_scale / 32.0f;
    y[i].d = fp32_to_fp16(d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].scales_h = 0;
    std::memset(y[i].scales_l, 0, sizeof y[i].scales_l);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      int l = nearest_int(id * scales[ib]);
      l = l < -32 ? -32 : (l > 31 ? 31 : l);
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
      for (int j = 0; j < 32; ++j)
        L[j] = static_cast<uint8_t>(best_index_iq4nl(idl * x[32 * ib + j]));
      pack_nibbles(L, y[i].qs + 16 * ib);
      l += 32;
      y[i].scales_l[ib / 2] =
          static_cast<uint8_t>(y[i].scales_l[ib / 2] | (l & 15) << (4 * (ib % 2)));
      y[i].scales_h = static_cast<uint16_t>(y[i].scales_h | (l >> 4) << (2 * ib));
    }
  }
}

}  // namespace boltrt::quant_detail

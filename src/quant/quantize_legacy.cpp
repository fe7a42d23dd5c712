// Reference quantizers of the 32-element block types (quant-formats.md §3 and §6.3).
// Float -> integer casts go through truncate_to_*() (see quant_search.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "quant/fp16.h"
#include "quant/quant_search.h"
#include "quant/quantize_impl.h"
#include "quant/unpack.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace boltrt::quant_detail {
namespace {

// The signed element of largest magnitude (first one wins ties) and its magnitude.
struct SignedMax {
  float max = 0.0f;
  float amax = 0.0f;
};
SignedMax signed_max(const float* x, int n) {
  SignedMax m;
  for (int j = 0; j < n; ++j) {
    if (m.amax < std::fabs(x[j])) {
      m.amax = std::fabs(x[j]);
      m.max = x[j];
    }
  }
  return m;
}

struct Range {
  float min = 0.0f;
  float max = 0.0f;
};
Range value_range(const float* x, int n) {
  Range r{std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
  for (int j = 0; j < n; ++j) {
    if (x[j] < r.min) r.min = x[j];
    if (x[j] > r.max) r.max = x[j];
  }
  return r;
}

void store_u32_le(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t i = 0; i < n / QK4_0; ++i, x += QK4_0) {
    const SignedMax m = signed_max(x, QK4_0);
    const float d = m.max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(truncate_to_int8(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(truncate_to_int8(x[j + 16] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(static_cast<uint8_t>(lo) | static_cast<uint8_t>(hi << 4));
    }
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t n) {
  for (int64_t i = 0; i < n / QK4_1; ++i, x += QK4_1) {
    const Range r = value_range(x, QK4_1);
    const float d = (r.max - r.min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(r.min);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(truncate_to_int8((x[j] - r.min) * id + 0.5f)));
      const int hi =
          std::min(15, static_cast<int>(truncate_to_int8((x[j + 16] - r.min) * id + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>(static_cast<uint8_t>(lo) | static_cast<uint8_t>(hi << 4));
    }
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t n) {
  for (int64_t i = 0; i < n / QK5_0; ++i, x += QK5_0) {
    const SignedMax m = signed_max(x, QK5_0);
    const float d = m.max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const auto lo =
          static_cast<uint8_t>(std::min(31, static_cast<int>(truncate_to_int8(x[j] * id + 16.5f))));
      const auto hi = static_cast<uint8_t>(
          std::min(31, static_cast<int>(truncate_to_int8(x[j + 16] * id + 16.5f))));
      y[i].qs[j] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
      qh |= static_cast<uint32_t>((lo & 0x10u) >> 4) << j;
      qh |= static_cast<uint32_t>((hi & 0x10u) >> 4) << (j + 16);
    }
    store_u32_le(y[i].qh, qh);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t n) {
  for (int64_t i = 0; i < n / QK5_1; ++i, x += QK5_1) {
    const Range r = value_range(x, QK5_1);
    const float d = (r.max - r.min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(r.min);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_1 / 2; ++j) {
      // No clamp, as in the reference: (x - min) * id <= 31 + rounding for finite input.
      const uint8_t lo = truncate_to_uint8((x[j] - r.min) * id + 0.5f);
      const uint8_t hi = truncate_to_uint8((x[j + 16] - r.min) * id + 0.5f);
      y[i].qs[j] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
      qh |= static_cast<uint32_t>((lo & 0x10u) >> 4) << j;
      qh |= static_cast<uint32_t>((hi & 0x10u) >> 4) << (j + 16);
    }
    store_u32_le(y[i].qh, qh);
  }
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t i = 0; i < n / QK8_0; ++i, x += QK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) y[i].qs[j] = truncate_to_int8(std::round(x[j] * id));
  }
}

void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t i = 0; i < n / QK8_1; ++i, x += QK8_1) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_1; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < QK8_1 / 2; ++j) {
      y[i].qs[j] = truncate_to_int8(std::round(x[j] * id));
      y[i].qs[j + 16] = truncate_to_int8(std::round(x[j + 16] * id));
      sum += y[i].qs[j] + y[i].qs[j + 16];
    }
    y[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
  }
}

namespace {

// Weights of the imatrix paths of the 32-element types: qw * sqrt(sigma2 + x^2), with sigma2 the
// mean square of the whole row.
float row_sigma2(const float* x, int64_t n) {
  float sum_x2 = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
  return sum_x2 / static_cast<float>(n);
}

void block_weights(const float* x, const float* qw, float sigma2, float* w) {
  for (int j = 0; j < 32; ++j) w[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

template <typename Block>
void pack_q5(const uint8_t* L, Block& b) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    b.qs[j] = static_cast<uint8_t>((L[j] & 15) | (L[j + 16] & 15) << 4);
    qh |= static_cast<uint32_t>((L[j] & 0x10u) >> 4) << j;
    qh |= static_cast<uint32_t>((L[j + 16] & 0x10u) >> 4) << (j + 16);
  }
  store_u32_le(b.qh, qh);
}

}  // namespace

void quantize_q4_0_weighted(const float* x, BlockQ4_0* y, int64_t n, const float* qw) {
  const float sigma2 = row_sigma2(x, n);
  float w[32];
  int8_t L[32];
  for (int64_t i = 0; i < n / QK4_0; ++i) {
    const float* xb = x + 32 * i;
    block_weights(xb, qw + 32 * i, sigma2, w);
    y[i].d = fp32_to_fp16(make_qx_quants(32, 8, xb, L, w));
    for (int j = 0; j < 16; ++j) y[i].qs[j] = static_cast<uint8_t>(L[j] | L[j + 16] << 4);
  }
}

void quantize_q5_0_weighted(const float* x, BlockQ5_0* y, int64_t n, const float* qw) {
  const float sigma2 = row_sigma2(x, n);
  float w[32];
  int8_t L[32];
  uint8_t codes[32];
  for (int64_t i = 0; i < n / QK5_0; ++i) {
    const float* xb = x + 32 * i;
    block_weights(xb, qw + 32 * i, sigma2, w);
    y[i].d = fp32_to_fp16(make_qx_quants(32, 16, xb, L, w));
    for (int j = 0; j < 32; ++j) codes[j] = static_cast<uint8_t>(L[j]);
    pack_q5(codes, y[i]);
  }
}

void quantize_q4_1_weighted(const float* x, BlockQ4_1* y, int64_t n, const float* qw) {
  const float sigma2 = row_sigma2(x, n);
  float w[32], min;
  uint8_t L[32], Laux[32];
  for (int64_t i = 0; i < n / QK4_1; ++i) {
    const float* xb = x + 32 * i;
    block_weights(xb, qw + 32 * i, sigma2, w);
    const float d = make_qkx3_quants(32, 15, xb, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(-min);
    for (int j = 0; j < 16; ++j) y[i].qs[j] = static_cast<uint8_t>(L[j] | L[j + 16] << 4);
  }
}

void quantize_q5_1_weighted(const float* x, BlockQ5_1* y, int64_t n, const float* qw) {
  const float sigma2 = row_sigma2(x, n);
  float w[32], min;
  uint8_t L[32], Laux[32];
  for (int64_t i = 0; i < n / QK5_1; ++i) {
    const float* xb = x + 32 * i;
    block_weights(xb, qw + 32 * i, sigma2, w);
    const float d = make_qkx3_quants(32, 31, xb, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(-min);
    pack_q5(L, y[i]);
  }
}

namespace {

// Nearest doubled-E2M1 code to v at scale d; the first minimum wins, so ties go to the code
// with the smaller magnitude and 0 maps to +0.
int best_index_mxfp4(float v, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMXFP4Values[0]) * d - v);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMXFP4Values[i]) * d - v);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t n) {
  for (int64_t i = 0; i < n / QK_MXFP4; ++i, x += QK_MXFP4) {
    float amax = 0.0f;
    for (int j = 0; j < QK_MXFP4; ++j) {
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    }
    // log2f rounds before the floor (quant-formats.md §6.3); amax < 2^-125 gives a negative
    // exponent that wraps like ggml's x86 build does.
    const uint8_t e =
        amax > 0.0f ? truncate_to_uint8(std::floor(std::log2(amax)) - 2.0f + 127.0f) : 0;
    const float d = e8m0_to_fp32_half(e);
    y[i].e = e;
    for (int j = 0; j < QK_MXFP4 / 2; ++j) {
      y[i].qs[j] =
          static_cast<uint8_t>(best_index_mxfp4(x[j], d) | best_index_mxfp4(x[j + 16], d) << 4);
    }
  }
}

}  // namespace boltrt::quant_detail

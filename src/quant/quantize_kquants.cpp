// Reference quantizers of the K-quants and Q8_K (quant-formats.md §5): a per-group scale search,
// 4/6/8-bit quantization of the group scales against a super-block scale, then a re-pass that
// recomputes the codes from the stored (fp16-rounded) scales.
#include <algorithm>
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

inline int clamp_int(int v, int lo, int hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// Packs 256 2-bit codes: byte l of each 32-byte chunk c holds elements 128c + l + 32k at bits 2k.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int c = 0; c < QK_K; c += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[c / 4 + l] = static_cast<uint8_t>(L[c + l] | L[c + l + 32] << 2 | L[c + l + 64] << 4 |
                                           L[c + l + 96] << 6);
    }
  }
}

// Q4_K/Q5_K: packs eight 6-bit scales and mins into 12 bytes (inverse of k4_scale_min).
void pack_k4_scales(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
  for (int j = 0; j < QK_K / 32; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 15) | (lm[j] & 15) << 4);
      scales[j - 4] = static_cast<uint8_t>(scales[j - 4] | (ls[j] >> 4) << 6);
      scales[j] = static_cast<uint8_t>(scales[j] | (lm[j] >> 4) << 6);
    }
  }
}

// Shared by Q4_K and Q5_K: per-32 affine search, 6-bit scales/mins, re-pass. Fills L (codes
// 0..nmax) and the d/dmin/scales fields.
void quantize_k4_like(const float* x, int nmax, float rmin, float rdelta, int nstep, uint8_t* L,
                      uint16_t& d_out, uint16_t& dmin_out, uint8_t* packed_scales) {
  float scales[QK_K / 32], mins[QK_K / 32], weights[QK_K];
  for (int j = 0; j < QK_K / 32; ++j) {
    const float* xj = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xj[l] * xj[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[32 * j + l] = av_x + std::fabs(xj[l]);
  }
  // make_qkx2_quants(32, nmax, ...) for all eight sub-blocks at once.
  make_qkx2_quants_x8(nmax, x, weights, L, scales, mins, rmin, rdelta, nstep);
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < QK_K / 32; ++j) {
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t ls[QK_K / 32], lm[QK_K / 32];
  for (int j = 0; j < QK_K / 32; ++j) {
    // uint8_t wrap then min(63), exactly as the reference stores nearest_int into a uint8_t.
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  std::memset(packed_scales, 0, K_SCALE_SIZE);
  pack_k4_scales(ls, lm, packed_scales);
  d_out = fp32_to_fp16(max_scale / 63.0f);
  dmin_out = fp32_to_fp16(max_min / 63.0f);
  for (int j = 0; j < QK_K / 32; ++j) {
    int sc, m;
    k4_scale_min(j, packed_scales, sc, m);
    const float d = fp16_to_fp32(d_out) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = fp16_to_fp32(dmin_out) * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      L[32 * j + l] =
          static_cast<uint8_t>(clamp_int(nearest_int((x[32 * j + l] + dm) / d), 0, nmax));
    }
  }
}

// Q3_K after d and the scales are stored: re-pass with the stored scales, then the hmask bits
// and the 2-bit packing. L holds the search codes (l + 4) of groups the re-pass skips.
void finish_q3_k(const float* x, int8_t* L, BlockQ3_K& b) {
  for (int j = 0; j < QK_K / 16; ++j) {
    const int sc = q3k_scale(j, b.scales) - 32;
    const float d = fp16_to_fp32(b.d) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    for (int l = 0; l < 16; ++l) {
      L[16 * j + l] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + l] / d), -4, 3) + 4);
    }
  }
  // hmask bit (e / 32) of byte (e % 32) is set for codes >= 4, which then keep only 2 bits.
  std::memset(b.hmask, 0, sizeof b.hmask);
  uint8_t low[QK_K];
  for (int e = 0; e < QK_K; ++e) {
    int code = L[e];
    if (code > 3) {
      b.hmask[e % 32] = static_cast<uint8_t>(b.hmask[e % 32] | 1 << (e / 32));
      code -= 4;
    }
    low[e] = static_cast<uint8_t>(code);
  }
  pack_2bit(low, b.qs);
}

// Chunk c (64 elements): byte l holds element 64c + l (low) and 64c + l + 32 (high).
void pack_q4_k(const uint8_t* L, BlockQ4_K& b) {
  for (int c = 0; c < QK_K / 64; ++c) {
    for (int l = 0; l < 32; ++l) {
      b.qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | L[64 * c + l + 32] << 4);
    }
  }
}

// Low nibbles as Q4_K; the 5th bit of element 64c + l (+32) is bit 2c (2c+1) of qh[l].
void pack_q5_k(const uint8_t* L, BlockQ5_K& b) {
  std::memset(b.qh, 0, sizeof b.qh);
  for (int c = 0; c < QK_K / 64; ++c) {
    for (int l = 0; l < 32; ++l) {
      int lo = L[64 * c + l], hi = L[64 * c + l + 32];
      if (lo > 15) {
        lo -= 16;
        b.qh[l] = static_cast<uint8_t>(b.qh[l] | 1 << (2 * c));
      }
      if (hi > 15) {
        hi -= 16;
        b.qh[l] = static_cast<uint8_t>(b.qh[l] | 2 << (2 * c));
      }
      b.qs[32 * c + l] = static_cast<uint8_t>(lo | hi << 4);
    }
  }
}

// Q6_K; qw (nullable) are the raw importance weights of the imatrix path.
void quantize_q6_k_impl(const float* x, BlockQ6_K* y, int64_t n, const float* qw) {
  int8_t L[QK_K];
  float scales[QK_K / 16];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    const float* qwb = qw ? qw + i * QK_K : nullptr;
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int g = 0; g < QK_K / 16; ++g) {
      scales[g] = make_qx_quants(16, 32, x + 16 * g, L + 16 * g, qwb ? qwb + 16 * g : nullptr);
      const float abs_scale = std::fabs(scales[g]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[g];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    y[i].d = fp32_to_fp16(1.0f / iscale);
    for (int g = 0; g < QK_K / 16; ++g) {
      y[i].scales[g] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[g])));
    }
    for (int g = 0; g < QK_K / 16; ++g) {
      const float d = fp16_to_fp32(y[i].d) * static_cast<float>(y[i].scales[g]);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        L[16 * g + l] =
            static_cast<int8_t>(clamp_int(nearest_int(x[16 * g + l] / d), -32, 31) + 32);
      }
    }
    // Chunk c (128 elements): ql[64c + l] holds elements l (low) and l+64 (high),
    // ql[64c + 32 + l] holds l+32 and l+96; qh[32c + l] holds their top 2 bits at 0, 2, 4, 6.
    for (int c = 0; c < QK_K / 128; ++c) {
      const int8_t* Lc = L + 128 * c;
      for (int l = 0; l < 32; ++l) {
        y[i].ql[64 * c + l] = static_cast<uint8_t>((Lc[l] & 15) | (Lc[l + 64] & 15) << 4);
        y[i].ql[64 * c + l + 32] = static_cast<uint8_t>((Lc[l + 32] & 15) | (Lc[l + 96] & 15) << 4);
        y[i].qh[32 * c + l] = static_cast<uint8_t>(Lc[l] >> 4 | (Lc[l + 32] >> 4) << 2 |
                                                   (Lc[l + 64] >> 4) << 4 | (Lc[l + 96] >> 4) << 6);
      }
    }
  }
}

}  // namespace

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t n) {
  uint8_t L[QK_K], Laux[16];
  float weights[16], mins[QK_K / 16], scales[QK_K / 16];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < QK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                   0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0.0f) {
      const float iscale = 15.0f / max_scale;
      for (int j = 0; j < QK_K / 16; ++j) {
        y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      }
      y[i].d = fp32_to_fp16(max_scale / 15.0f);
    } else {
      std::memset(y[i].scales, 0, sizeof y[i].scales);
      y[i].d = fp32_to_fp16(0.0f);
    }
    if (max_min > 0.0f) {
      const float iscale = 15.0f / max_min;
      for (int j = 0; j < QK_K / 16; ++j) {
        y[i].scales[j] = static_cast<uint8_t>(y[i].scales[j] | nearest_int(iscale * mins[j]) << 4);
      }
      y[i].dmin = fp32_to_fp16(max_min / 15.0f);
    } else {
      y[i].dmin = fp32_to_fp16(0.0f);
    }
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = fp16_to_fp32(y[i].d) * static_cast<float>(y[i].scales[j] & 15);
      if (d == 0.0f) continue;
      const float dm = fp16_to_fp32(y[i].dmin) * static_cast<float>(y[i].scales[j] >> 4);
      for (int l = 0; l < 16; ++l) {
        L[16 * j + l] =
            static_cast<uint8_t>(clamp_int(nearest_int((x[16 * j + l] + dm) / d), 0, 3));
      }
    }
    pack_2bit(L, y[i].qs);
  }
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t n) {
  int8_t L[QK_K];
  float scales[QK_K / 16];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    float max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < QK_K / 16; ++j) {
      scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, sizeof y[i].scales);
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < QK_K / 16; ++j) {
        // The reference keeps nearest_int's result in an int8_t before clamping.
        const int8_t rounded = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        const int l = clamp_int(rounded, -32, 31) + 32;
        if (j < 8) {
          y[i].scales[j] = static_cast<uint8_t>(l & 15);
        } else {
          y[i].scales[j - 8] = static_cast<uint8_t>(y[i].scales[j - 8] | (l & 15) << 4);
        }
        y[i].scales[j % 4 + 8] =
            static_cast<uint8_t>(y[i].scales[j % 4 + 8] | (l >> 4) << (2 * (j / 4)));
      }
      y[i].d = fp32_to_fp16(1.0f / iscale);
    } else {
      y[i].d = fp32_to_fp16(0.0f);
    }
    finish_q3_k(x, L, y[i]);
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t n) {
  uint8_t L[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    uint16_t d, dmin;
    quantize_k4_like(x, 15, -1.0f, 0.1f, 20, L, d, dmin, y[i].scales);
    y[i].d = d;
    y[i].dmin = dmin;
    pack_q4_k(L, y[i]);
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t n) {
  uint8_t L[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    uint16_t d, dmin;
    quantize_k4_like(x, 31, -0.5f, 0.1f, 15, L, d, dmin, y[i].scales);
    y[i].d = d;
    y[i].dmin = dmin;
    pack_q5_k(L, y[i]);
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t n) {
  quantize_q6_k_impl(x, y, n, nullptr);
}

void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < QK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      // The reference leaves bsums unwritten here; zeros keep the output deterministic.
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < QK_K; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    }
    for (int g = 0; g < QK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

// ---- importance-matrix variants (llama-quantize --imatrix; §5.2-5.6 "With an imatrix") ----

namespace {

// sum(x^2) over the super-block, times `factor` (1 for Q2_K, 2 for the others), divided by 256.
float super_block_sigma2(const float* x, float factor) {
  float sum_x2 = 0.0f;
  for (int l = 0; l < QK_K; ++l) sum_x2 += x[l] * x[l];
  return factor * sum_x2 / static_cast<float>(QK_K);
}

// Q4_K/Q5_K with weights: per-32 qkx3 search, then make_qp_quants for the 6-bit scales and mins.
void quantize_k4_like_weighted(const float* x, const float* qw, int nmax, bool clamp_codes,
                               uint8_t* L, uint16_t& d_out, uint16_t& dmin_out,
                               uint8_t* packed_scales) {
  float scales[QK_K / 32], mins[QK_K / 32], sw[QK_K / 32], weights[32];
  uint8_t Laux[32], Ls[QK_K / 32], Lm[QK_K / 32];
  const float sigma2 = super_block_sigma2(x, 2.0f);
  for (int j = 0; j < QK_K / 32; ++j) {
    for (int l = 0; l < 32; ++l) {
      weights[l] = qw[32 * j + l] * std::sqrt(sigma2 + x[32 * j + l] * x[32 * j + l]);
    }
    float sumw = 0.0f;
    for (int l = 0; l < 32; ++l) sumw += weights[l];
    sw[j] = sumw;
    scales[j] = make_qkx3_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f,
                                 0.05f, 36, false);
  }
  const float d_block = make_qp_quants(QK_K / 32, 63, scales, Ls, sw);
  const float m_block = make_qp_quants(QK_K / 32, 63, mins, Lm, sw);
  if (clamp_codes) {  // Q5_K clamps the codes to 63 again; Q4_K does not
    for (int j = 0; j < QK_K / 32; ++j) {
      Ls[j] = std::min<uint8_t>(63, Ls[j]);
      Lm[j] = std::min<uint8_t>(63, Lm[j]);
    }
  }
  std::memset(packed_scales, 0, K_SCALE_SIZE);
  pack_k4_scales(Ls, Lm, packed_scales);
  d_out = fp32_to_fp16(d_block);
  dmin_out = fp32_to_fp16(m_block);
  for (int j = 0; j < QK_K / 32; ++j) {
    int sc, m;
    k4_scale_min(j, packed_scales, sc, m);
    const float d = fp16_to_fp32(d_out) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = fp16_to_fp32(dmin_out) * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      L[32 * j + l] =
          static_cast<uint8_t>(clamp_int(nearest_int((x[32 * j + l] + dm) / d), 0, nmax));
    }
  }
}

}  // namespace

void quantize_q2_k_weighted(const float* x, BlockQ2_K* y, int64_t n, const float* qw) {
  uint8_t L[QK_K], Laux[16], Ls[QK_K / 16], Lm[QK_K / 16];
  float weight[16], mins[QK_K / 16], scales[QK_K / 16], sw[QK_K / 16];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K, qw += QK_K) {
    const float sigma2 = super_block_sigma2(x, 1.0f);
    for (int j = 0; j < QK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) {
        weight[l] = qw[16 * j + l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
      }
      sw[j] = 0.0f;
      for (int l = 0; l < 16; ++l) sw[j] += weight[l];
      scales[j] = make_qkx3_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f,
                                   0.05f, 36, false);
    }
    const float dm = make_qp_quants(QK_K / 16, 15, scales, Ls, sw);
    const float mm = make_qp_quants(QK_K / 16, 15, mins, Lm, sw);
    y[i].d = fp32_to_fp16(dm);
    y[i].dmin = fp32_to_fp16(mm);
    for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = static_cast<uint8_t>(Ls[j] | Lm[j] << 4);
    const float d_all = fp16_to_fp32(y[i].d), m_all = fp16_to_fp32(y[i].dmin);
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = d_all * static_cast<float>(y[i].scales[j] & 15);
      if (d == 0.0f) continue;
      const float m = m_all * static_cast<float>(y[i].scales[j] >> 4);
      for (int l = 0; l < 16; ++l) {
        L[16 * j + l] = static_cast<uint8_t>(clamp_int(nearest_int((x[16 * j + l] + m) / d), 0, 3));
      }
    }
    pack_2bit(L, y[i].qs);
  }
}

void quantize_q3_k_weighted(const float* x, BlockQ3_K* y, int64_t n, const float* qw) {
  int8_t L[QK_K], Ls[QK_K / 16];
  float scales[QK_K / 16], weight[16], sw[QK_K / 16];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K, qw += QK_K) {
    const float sigma2 = super_block_sigma2(x, 2.0f);
    for (int j = 0; j < QK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) {
        weight[l] = qw[16 * j + l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
      }
      float sumw = 0.0f;
      for (int l = 0; l < 16; ++l) sumw += weight[l];
      sw[j] = sumw;
      scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, weight);
    }
    std::memset(y[i].scales, 0, sizeof y[i].scales);
    const float d_block = make_qx_quants(QK_K / 16, 32, scales, Ls, sw);
    for (int j = 0; j < QK_K / 16; ++j) {
      const int l = Ls[j];
      if (j < 8) {
        y[i].scales[j] = static_cast<uint8_t>(l & 15);
      } else {
        y[i].scales[j - 8] = static_cast<uint8_t>(y[i].scales[j - 8] | (l & 15) << 4);
      }
      y[i].scales[j % 4 + 8] =
          static_cast<uint8_t>(y[i].scales[j % 4 + 8] | (l >> 4) << (2 * (j / 4)));
    }
    y[i].d = fp32_to_fp16(d_block);
    finish_q3_k(x, L, y[i]);
  }
}

void quantize_q4_k_weighted(const float* x, BlockQ4_K* y, int64_t n, const float* qw) {
  uint8_t L[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K, qw += QK_K) {
    uint16_t d, dmin;
    quantize_k4_like_weighted(x, qw, 15, false, L, d, dmin, y[i].scales);
    y[i].d = d;
    y[i].dmin = dmin;
    pack_q4_k(L, y[i]);
  }
}

void quantize_q5_k_weighted(const float* x, BlockQ5_K* y, int64_t n, const float* qw) {
  uint8_t L[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K, qw += QK_K) {
    uint16_t d, dmin;
    quantize_k4_like_weighted(x, qw, 31, true, L, d, dmin, y[i].scales);
    y[i].d = d;
    y[i].dmin = dmin;
    pack_q5_k(L, y[i]);
  }
}

void quantize_q6_k_weighted(const float* x, BlockQ6_K* y, int64_t n, const float* qw) {
  quantize_q6_k_impl(x, y, n, qw);
}

}  // namespace boltrt::quant_detail

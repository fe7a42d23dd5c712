// Scalar reference: activation conversion and one dot product per weight type.
//
// The dot products mirror the arithmetic of ggml's generic CPU kernels (ggml-cpu/quants.c,
// shared/docs/quant-formats.md §7): integer sums per block, then one float multiply-add per block
// in the same order, so for a given activation row the result equals ggml's generic path.
// Every SIMD kernel is tested against these.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/matmul_internal.h"
#include "quant/unpack.h"

namespace boltrt::cpu {
namespace {

// ---- activation conversion ------------------------------------------------------------------

// ggml's nearest_int: round to nearest even through the fp32 mantissa.
inline int nearest_int(float v) {
  float val = v + 12582912.0f;
  int i;
  std::memcpy(&i, &val, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Q8_0 as ggml's AVX/AVX2 quantize_row_q8_0 does it: d = amax/127, codes = RNE(x * 127/amax).
void quantize_act_q8_0(const float* x, ActQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < 32; ++j) y[b].qs[j] = static_cast<int8_t>(nearest_int(x[j] * id));
  }
}

// Q8_1: the Q8_0 codes plus s = fp16(d * sum(codes)), d the fp32 scale.
void quantize_act_q8_1(const float* x, ActQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      y[b].qs[j] = static_cast<int8_t>(nearest_int(x[j] * id));
      sum += y[b].qs[j];
    }
    y[b].s = fp32_to_fp16(static_cast<float>(sum) * d);
  }
}

// Q8_K, ggml's reference quantizer: d = max/-127 (signed), codes RNE(x * -127/max) capped at 127.
void quantize_act_q8_k(const float* x, ActQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(ActQ8_K));  // ggml leaves bsums unwritten; d = 0 hides them
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < 256; ++j) {
      y[b].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[b].qs[16 * g + l];
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
    y[b].d = 1.0f / iscale;
  }
}

// ---- dot products ---------------------------------------------------------------------------

float dot_f32(int64_t n, const float* x, const float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * y[i]);
  return static_cast<float>(sum);
}

// F16/BF16 activations arrive already rounded to the 16-bit format but stored as f32 (see
// convert_activation_row), so the products equal ggml's fp16 x fp16 products.
float dot_f16(int64_t n, const uint16_t* x, const float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(x[i]) * y[i]);
  return static_cast<float>(sum);
}

float dot_bf16(int64_t n, const uint16_t* x, const float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(x[i]) * y[i]);
  return static_cast<float>(sum);
}

float dot_q4_0(int64_t n, const BlockQ4_0* x, const ActQ8_0* y) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < 16; ++j) {
      sumi0 += ((x[b].qs[j] & 0x0f) - 8) * y[b].qs[j];
      sumi1 += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + 16];
    }
    sumf += static_cast<float>(sumi0 + sumi1) * fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d);
  }
  return sumf;
}

float dot_q4_1(int64_t n, const BlockQ4_1* x, const ActQ8_1* y) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < 16; ++j) {
      sumi0 += (x[b].qs[j] & 0x0f) * y[b].qs[j];
      sumi1 += (x[b].qs[j] >> 4) * y[b].qs[j + 16];
    }
    sumf += (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d)) * static_cast<float>(sumi0 + sumi1) +
            fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
  }
  return sumf;
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

float dot_q5_0(int64_t n, const BlockQ5_0* x, const ActQ8_0* y) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint32_t qh = load_u32(x[b].qh);
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < 16; ++j) {
      const int x0 = ((x[b].qs[j] & 0x0f) | (((qh >> j) & 1) << 4)) - 16;
      const int x1 = ((x[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
      sumi0 += x0 * y[b].qs[j];
      sumi1 += x1 * y[b].qs[j + 16];
    }
    sumf += (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d)) * static_cast<float>(sumi0 + sumi1);
  }
  return sumf;
}

float dot_q5_1(int64_t n, const BlockQ5_1* x, const ActQ8_1* y) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint32_t qh = load_u32(x[b].qh);
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < 16; ++j) {
      const int x0 = (x[b].qs[j] & 0x0f) | (((qh >> j) & 1) << 4);
      const int x1 = (x[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      sumi0 += x0 * y[b].qs[j];
      sumi1 += x1 * y[b].qs[j + 16];
    }
    sumf += (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d)) * static_cast<float>(sumi0 + sumi1) +
            fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
  }
  return sumf;
}

float dot_q8_0(int64_t n, const BlockQ8_0* x, const ActQ8_0* y) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    int sumi = 0;
    for (int j = 0; j < 32; ++j) sumi += x[b].qs[j] * y[b].qs[j];
    sumf += static_cast<float>(sumi) * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
  }
  return sumf;
}

float dot_iq4_nl(int64_t n, const BlockIQ4_NL* x, const ActQ8_0* y) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = fp16_to_fp32(y[b].d) * fp16_to_fp32(x[b].d);
    int sumi1 = 0, sumi2 = 0;
    for (int j = 0; j < 16; ++j) {
      sumi1 += y[b].qs[j] * kIQ4NLValues[x[b].qs[j] & 0x0f];
      sumi2 += y[b].qs[j + 16] * kIQ4NLValues[x[b].qs[j] >> 4];
    }
    sumf += d * static_cast<float>(sumi1 + sumi2);
  }
  return sumf;
}

float dot_mxfp4(int64_t n, const BlockMXFP4* x, const ActQ8_0* y) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = fp16_to_fp32(y[b].d) * e8m0_to_fp32_half(x[b].e);
    int sumi1 = 0, sumi2 = 0;
    for (int j = 0; j < 16; ++j) {
      sumi1 += y[b].qs[j] * kMXFP4Values[x[b].qs[j] & 0x0f];
      sumi2 += y[b].qs[j + 16] * kMXFP4Values[x[b].qs[j] >> 4];
    }
    sumf += d * static_cast<float>(sumi1 + sumi2);
  }
  return sumf;
}

float dot_q2_k(int64_t n, const BlockQ2_K* x, const ActQ8_K* y) {
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    const uint8_t* sc = x[i].scales;
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);
    const float dall = y[i].d * fp16_to_fp32(x[i].d);
    const float dmin = y[i].d * fp16_to_fp32(x[i].dmin);
    int isum = 0, is = 0;
    for (int k = 0; k < 2; ++k) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const int d = sc[is++] & 0x0f;
          int isuml = 0;
          for (int l = 16 * half; l < 16 * half + 16; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
          isum += d * isuml;
        }
        q8 += 32;
      }
      q2 += 32;
    }
    sumf += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sumf;
}

// The generic k-quant kernels expand codes into aux8 and accumulate per 8 lanes; mirror that
// layout so the float rounding matches.
float dot_q3_k(int64_t n, const BlockQ3_K* x, const ActQ8_K* y) {
  int8_t aux8[256];
  float sums[8] = {};
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* q3 = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    int8_t* a = aux8;
    uint8_t m = 1;
    for (int j = 0; j < 256; j += 128) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int l = 0; l < 32; ++l) {
          a[l] = static_cast<int8_t>(((q3[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        }
        a += 32;
        m = static_cast<uint8_t>(m << 1);
      }
      q3 += 32;
    }
    const uint8_t* b = x[i].scales;
    int8_t scales[16];
    for (int g = 0; g < 16; ++g) {
      const int low = (g < 8 ? b[g] : b[g - 8] >> 4) & 15;
      const int high = (b[8 + (g & 3)] >> (2 * (g >> 2))) & 3;
      scales[g] = static_cast<int8_t>((low | (high << 4)) - 32);
    }
    int32_t aux32[8] = {};
    const int8_t* q8 = y[i].qs;
    a = aux8;
    for (int g = 0; g < 16; ++g) {
      for (int l = 0; l < 16; ++l) aux32[l & 7] += scales[g] * (q8[l] * a[l]);
      q8 += 16;
      a += 16;
    }
    const float d = fp16_to_fp32(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
  }
  float sumf = 0.0f;
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

// The 12-byte 6-bit scale/min packing of Q4_K and Q5_K (quant-formats.md §5.1).
inline void unpack_k4_scales(const uint8_t* b, uint8_t* sc, uint8_t* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = b[j] & 63;
    mn[j] = b[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((b[j + 4] & 15) | ((b[j - 4] >> 6) << 4));
    mn[j] = static_cast<uint8_t>((b[j + 4] >> 4) | ((b[j] >> 6) << 4));
  }
}

// Q4_K (bits = 4) and Q5_K (bits = 5) share everything but the fifth bit.
template <typename Block, bool kFifthBit>
float dot_q45_k(int64_t n, const Block* x, const ActQ8_K* y) {
  int8_t aux8[256];
  float sums[8] = {};
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* q4 = x[i].qs;
    int8_t* a = aux8;
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(q4[l] & 0x0f);
      for (int l = 0; l < 32; ++l) a[l + 32] = static_cast<int8_t>(q4[l] >> 4);
      if constexpr (kFifthBit) {
        for (int l = 0; l < 32; ++l) {
          a[l] = static_cast<int8_t>(a[l] + (((x[i].qh[l] >> (2 * j)) & 1) << 4));
          a[l + 32] = static_cast<int8_t>(a[l + 32] + (((x[i].qh[l] >> (2 * j + 1)) & 1) << 4));
        }
      }
      a += 64;
      q4 += 32;
    }
    uint8_t sc[8], mn[8];
    unpack_k4_scales(x[i].scales, sc, mn);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += y[i].bsums[j] * mn[j / 2];
    int32_t aux32[8] = {};
    const int8_t* q8 = y[i].qs;
    a = aux8;
    for (int s = 0; s < 8; ++s) {
      for (int l = 0; l < 32; ++l) aux32[l & 7] += sc[s] * (q8[l] * a[l]);
      q8 += 32;
      a += 32;
    }
    const float d = fp16_to_fp32(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
    const float dmin = fp16_to_fp32(x[i].dmin) * y[i].d;
    sumf -= dmin * static_cast<float>(sumi);
  }
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

float dot_q6_k(int64_t n, const BlockQ6_K* x, const ActQ8_K* y) {
  int8_t aux8[256];
  float sums[8] = {};
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    int8_t* a = aux8;
    for (int j = 0; j < 256; j += 128) {
      for (int l = 0; l < 32; ++l) {
        a[l + 0] = static_cast<int8_t>(((ql[l + 0] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
        a[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
        a[l + 64] = static_cast<int8_t>(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        a[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
      a += 128;
      ql += 64;
      qh += 32;
    }
    int32_t aux32[8] = {};
    const int8_t* q8 = y[i].qs;
    a = aux8;
    for (int g = 0; g < 16; ++g) {
      for (int l = 0; l < 16; ++l) aux32[l & 7] += x[i].scales[g] * (q8[l] * a[l]);
      q8 += 16;
      a += 16;
    }
    const float d = fp16_to_fp32(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
  }
  float sumf = 0.0f;
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

float dot_iq4_xs(int64_t n, const BlockIQ4_XS* x, const ActQ8_K* y) {
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / 256; ++i) {
    const float d4d8 = fp16_to_fp32(x[i].d) * y[i].d;
    const uint8_t* qs = x[i].qs;
    const int8_t* q8 = y[i].qs;
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((x[i].scales_l[ib / 2] >> (4 * (ib & 1))) & 15) |
                     (((x[i].scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d4d8 * static_cast<float>(ls - 32);
      int sumi1 = 0, sumi2 = 0;
      for (int j = 0; j < 16; ++j) {
        sumi1 += q8[j] * kIQ4NLValues[qs[j] & 0x0f];
        sumi2 += q8[j + 16] * kIQ4NLValues[qs[j] >> 4];
      }
      sumf += dl * static_cast<float>(sumi1 + sumi2);
      qs += 16;
      q8 += 32;
    }
  }
  return sumf;
}

void gemm_by_dot(const GemmTile& t) {
  for (int64_t b = 0; b < t.n_act; ++b) {
    const uint8_t* a = t.a + b * t.a_stride;
    for (int64_t r = 0; r < t.n_rows; ++r) {
      t.y[b * t.y_stride + r] = scalar_vec_dot(t.type, t.cols, t.w + r * t.w_stride, a);
    }
  }
}

}  // namespace

bool matmul_supported(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
    case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
}

ActFormat activation_format(GgmlType type) {
  switch (type) {
    case GgmlType::F16:
      return ActFormat::F16;
    case GgmlType::BF16:
      return ActFormat::BF16;
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4:
      return ActFormat::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return ActFormat::Q8_1;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS:
      return ActFormat::Q8_K;
    default:
      return ActFormat::F32;
  }
}

size_t activation_row_bytes(ActFormat format, int64_t cols) {
  const auto n = static_cast<size_t>(cols);
  switch (format) {
    case ActFormat::F32:
    case ActFormat::F16:
    case ActFormat::BF16:
      return n * 4;
    case ActFormat::Q8_0:
      return n / 32 * sizeof(ActQ8_0);
    case ActFormat::Q8_1:
      return n / 32 * sizeof(ActQ8_1);
    case ActFormat::Q8_K:
      return n / 256 * sizeof(ActQ8_K);
  }
  return 0;
}

void convert_activation_row(ActFormat format, const float* x, void* dst, int64_t n) {
  switch (format) {
    case ActFormat::F32:
      std::memcpy(dst, x, static_cast<size_t>(n) * 4);
      break;
    case ActFormat::F16: {
      auto* y = static_cast<float*>(dst);
      for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
      break;
    }
    case ActFormat::BF16: {
      auto* y = static_cast<float*>(dst);
      for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
      break;
    }
    case ActFormat::Q8_0:
      quantize_act_q8_0(x, static_cast<ActQ8_0*>(dst), n);
      break;
    case ActFormat::Q8_1:
      quantize_act_q8_1(x, static_cast<ActQ8_1*>(dst), n);
      break;
    case ActFormat::Q8_K:
      quantize_act_q8_k(x, static_cast<ActQ8_K*>(dst), n);
      break;
  }
}

float scalar_vec_dot(GgmlType type, int64_t n, const void* w, const void* a) {
  const auto* a0 = static_cast<const ActQ8_0*>(a);
  const auto* a1 = static_cast<const ActQ8_1*>(a);
  const auto* ak = static_cast<const ActQ8_K*>(a);
  switch (type) {
    case GgmlType::F32:
      return dot_f32(n, static_cast<const float*>(w), static_cast<const float*>(a));
    case GgmlType::F16:
      return dot_f16(n, static_cast<const uint16_t*>(w), static_cast<const float*>(a));
    case GgmlType::BF16:
      return dot_bf16(n, static_cast<const uint16_t*>(w), static_cast<const float*>(a));
    case GgmlType::Q4_0:
      return dot_q4_0(n, static_cast<const BlockQ4_0*>(w), a0);
    case GgmlType::Q4_1:
      return dot_q4_1(n, static_cast<const BlockQ4_1*>(w), a1);
    case GgmlType::Q5_0:
      return dot_q5_0(n, static_cast<const BlockQ5_0*>(w), a0);
    case GgmlType::Q5_1:
      return dot_q5_1(n, static_cast<const BlockQ5_1*>(w), a1);
    case GgmlType::Q8_0:
      return dot_q8_0(n, static_cast<const BlockQ8_0*>(w), a0);
    case GgmlType::IQ4_NL:
      return dot_iq4_nl(n, static_cast<const BlockIQ4_NL*>(w), a0);
    case GgmlType::MXFP4:
      return dot_mxfp4(n, static_cast<const BlockMXFP4*>(w), a0);
    case GgmlType::Q2_K:
      return dot_q2_k(n, static_cast<const BlockQ2_K*>(w), ak);
    case GgmlType::Q3_K:
      return dot_q3_k(n, static_cast<const BlockQ3_K*>(w), ak);
    case GgmlType::Q4_K:
      return dot_q45_k<BlockQ4_K, false>(n, static_cast<const BlockQ4_K*>(w), ak);
    case GgmlType::Q5_K:
      return dot_q45_k<BlockQ5_K, true>(n, static_cast<const BlockQ5_K*>(w), ak);
    case GgmlType::Q6_K:
      return dot_q6_k(n, static_cast<const BlockQ6_K*>(w), ak);
    case GgmlType::IQ4_XS:
      return dot_iq4_xs(n, static_cast<const BlockIQ4_XS*>(w), ak);
    default:
      return 0.0f;
  }
}

GemmFn scalar_gemm(GgmlType type) {
  // One tile function for every type: scalar_vec_dot dispatches on the type per row.
  return matmul_supported(type) ? &gemm_by_dot : nullptr;
}

}  // namespace boltrt::cpu

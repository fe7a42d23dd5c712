// aarch64 matmul kernels without the dot-product extension (see matmul_neon_kernels.h), and the
// NEON activation quantizers, which give the scalar reference's bytes exactly (same fp32 scale
// arithmetic; vcvtnq rounds to nearest even like ggml's nearest_int for |v| < 2^22).
#define BOLTRT_NEON_DOTPROD 0
#include <cmath>

#include "backend/cpu/matmul_neon_kernels.h"

namespace boltrt::cpu {
namespace {

// The largest |x| of n floats (n a multiple of 16).
inline float abs_max(const float* x, int n) {
  float32x4_t m0 = vdupq_n_f32(0.0f), m1 = m0, m2 = m0, m3 = m0;
  for (int j = 0; j < n; j += 16) {
    m0 = vmaxq_f32(m0, vabsq_f32(vld1q_f32(x + j)));
    m1 = vmaxq_f32(m1, vabsq_f32(vld1q_f32(x + j + 4)));
    m2 = vmaxq_f32(m2, vabsq_f32(vld1q_f32(x + j + 8)));
    m3 = vmaxq_f32(m3, vabsq_f32(vld1q_f32(x + j + 12)));
  }
  return vmaxvq_f32(vmaxq_f32(vmaxq_f32(m0, m1), vmaxq_f32(m2, m3)));
}

// 16 codes RNE(x[j] * scale), capped at 127 (the values are within [-127, 127.5] by construction).
inline int8x16_t quantize16(const float* x, float scale) {
  const int32x4_t c127 = vdupq_n_s32(127);
  int32x4_t q[4];
  for (int k = 0; k < 4; ++k) {
    q[k] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 4 * k), scale)), c127);
  }
  const int16x8_t lo = vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]));
  const int16x8_t hi = vcombine_s16(vqmovn_s32(q[2]), vqmovn_s32(q[3]));
  return vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi));
}

template <typename Block, bool kSum>
void quantize_q8_0_like(const float* x, Block* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    const float amax = abs_max(x, 32);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = fp32_to_fp16(d);
    const int8x16_t q0 = quantize16(x, id), q1 = quantize16(x + 16, id);
    vst1q_s8(y[b].qs, q0);
    vst1q_s8(y[b].qs + 16, q1);
    if constexpr (kSum) {
      const int sum = vaddlvq_s8(q0) + vaddlvq_s8(q1);
      y[b].s = fp32_to_fp16(static_cast<float>(sum) * d);
    }
  }
}

void quantize_q8_k(const float* x, ActQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    const float amax = abs_max(x, 256);
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(ActQ8_K));
      continue;
    }
    // The signed value of the first element of largest magnitude, as the reference picks it.
    float max = amax;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(x[j]) == amax) {
        max = x[j];
        break;
      }
    }
    const float iscale = -127.0f / max;
    for (int g = 0; g < 16; ++g) {
      const int8x16_t q = quantize16(x + 16 * g, iscale);
      vst1q_s8(y[b].qs + 16 * g, q);
      y[b].bsums[g] = vaddlvq_s8(q);
    }
    y[b].d = 1.0f / iscale;
  }
}

}  // namespace

GemmFn neon_gemm(GgmlType type) {
  return neon_kernels(type);
}

void neon_convert_activation_row(ActFormat format, const float* x, void* dst, int64_t n) {
  switch (format) {
    case ActFormat::Q8_0:
      quantize_q8_0_like<ActQ8_0, false>(x, static_cast<ActQ8_0*>(dst), n);
      break;
    case ActFormat::Q8_1:
      quantize_q8_0_like<ActQ8_1, true>(x, static_cast<ActQ8_1*>(dst), n);
      break;
    case ActFormat::Q8_K:
      quantize_q8_k(x, static_cast<ActQ8_K*>(dst), n);
      break;
    default:  // float formats: a copy or a rounding, not worth a kernel
      convert_activation_row(format, x, dst, n);
      break;
  }
}

}  // namespace boltrt::cpu

// __nv_bfloat16 and its conversions for the CPU emulator build (round to nearest even, as the
// toolkit's __float2bfloat16_rn; bits from src/quant/fp16.h).
#pragma once
#include <cstdint>

#include "cuda_runtime.h"
#include "quant/fp16.h"

struct alignas(2) __nv_bfloat16 {
  uint16_t bits_;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16{boltrt::fp32_to_bf16(f)};
}
inline __nv_bfloat16 __float2bfloat16(float f) {
  return __float2bfloat16_rn(f);
}
inline float __bfloat162float(__nv_bfloat16 h) {
  return boltrt::bf16_to_fp32(h.bits_);
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) {
  return h.bits_;
}
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
  return __nv_bfloat16{u};
}

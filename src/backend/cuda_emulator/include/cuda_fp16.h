// __half and the conversions boltrt's kernels use, for the CPU emulator build. Conversions are
// the toolkit's: float -> half rounds to nearest even (keeping subnormals, overflow to inf),
// half -> float is exact; the bits come from src/quant/fp16.h, which is bit-exact with ggml.
#pragma once
#include <cstdint>
#include <cstring>

#include "cuda_runtime.h"
#include "quant/fp16.h"

struct alignas(2) __half {
  uint16_t bits_;
  __half() = default;
  __half(float f) : bits_(boltrt::fp32_to_fp16(f)) {}
  operator float() const { return boltrt::fp16_to_fp32(bits_); }
};
struct alignas(4) __half2 {
  __half x, y;
};

inline __half __float2half_rn(float f) {
  __half h;
  h.bits_ = boltrt::fp32_to_fp16(f);
  return h;
}
inline __half __float2half(float f) {
  return __float2half_rn(f);
}
inline float __half2float(__half h) {
  return boltrt::fp16_to_fp32(h.bits_);
}
inline unsigned short __half_as_ushort(__half h) {
  return h.bits_;
}
inline __half __ushort_as_half(unsigned short u) {
  __half h;
  h.bits_ = u;
  return h;
}
inline __half2 __floats2half2_rn(float lo, float hi) {
  return __half2{__float2half_rn(lo), __float2half_rn(hi)};
}
inline __half2 __float2half2_rn(float f) {
  return __floats2half2_rn(f, f);
}
inline float2 __half22float2(__half2 h) {
  return make_float2(__half2float(h.x), __half2float(h.y));
}
inline float __low2float(__half2 h) {
  return __half2float(h.x);
}
inline float __high2float(__half2 h) {
  return __half2float(h.y);
}

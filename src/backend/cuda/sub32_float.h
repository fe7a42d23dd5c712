// Sub32 (quant/dequant_sub32.h) for the unquantized weight types F32, F16 and BF16, so the
// CUDA GEMV and embedding kernels handle them with the same per-lane code path as the block
// formats: "block" = 32 consecutive values. Checked on the CPU by test_cuda_math.
#pragma once
#include <cstdint>

#include "quant/dequant_sub32.h"
#include "quant/fp16.h"

namespace boltrt {

struct BlockF32x32 {
  float v[32];
};
struct BlockF16x32 {
  uint16_t v[32];
};
struct BlockBF16x32 {
  uint16_t v[32];
};

template <>
struct Sub32<BlockF32x32> {
  static constexpr int kPerBlock = 1;
  BOLTRT_HD static void dequantize(const uint8_t* row, int64_t s, float* y) {
    const auto& b = reinterpret_cast<const BlockF32x32*>(row)[s];
    for (int e = 0; e < 32; ++e) y[e] = b.v[e];
  }
};

template <>
struct Sub32<BlockF16x32> {
  static constexpr int kPerBlock = 1;
  BOLTRT_HD static void dequantize(const uint8_t* row, int64_t s, float* y) {
    const auto& b = reinterpret_cast<const BlockF16x32*>(row)[s];
    for (int e = 0; e < 32; ++e) y[e] = fp16_to_fp32(b.v[e]);
  }
};

template <>
struct Sub32<BlockBF16x32> {
  static constexpr int kPerBlock = 1;
  BOLTRT_HD static void dequantize(const uint8_t* row, int64_t s, float* y) {
    const auto& b = reinterpret_cast<const BlockBF16x32*>(row)[s];
    for (int e = 0; e < 32; ++e) y[e] = bf16_to_fp32(b.v[e]);
  }
};

}  // namespace boltrt

// Dequantization of one 32-element sub-block of a weight row: the unit of work of the CUDA
// GEMV kernels (a lane unpacks 32 weights into registers and dots them with the activations).
// Built only from quant/unpack.h's BOLTRT_HD helpers, so the CPU test (test_dequant_sub32)
// proves the exact code the GPU runs: sub-block s of a row equals elements [32s, 32s+32) of
// dequantize_row, bit for bit.
#pragma once
#include <cstdint>

#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/unpack.h"

namespace boltrt {

// Sub-block s (0-based, counted along the row) of a row whose blocks start at `row`.
template <typename Block>
struct Sub32;

template <>
struct Sub32<BlockQ4_0> {
  static constexpr int kPerBlock = 1;
  BOLTRT_HD static void dequantize(const uint8_t* row, int64_t s, float* y) {
    const auto& b = reinterpret_cast<const BlockQ4_0*>(row)[s];
    const float d = fp16_to_fp32(b.d);
    for (int e = 0; e < 32; ++e) y[e] = static_cast<float>(nibble32(b.qs, e) - 8) * d;
  }
};

template <>
struct Sub32<BlockQ8_0> {
  static constexpr int kPerBlock = 1;
  BOLTRT_HD static void dequantize(const uint8_t* row, int64_t s, float* y) {
    const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[s];
    const float d = fp16_to_fp32(b.d);
    for (int e = 0; e < 32; ++e) y[e] = static_cast<float>(b.qs[e]) * d;
  }
};

template <>
struct Sub32<BlockQ4_K> {
  static constexpr int kPerBlock = 8;
  BOLTRT_HD static void dequantize(const uint8_t* row, int64_t s, float* y) {
    const auto& b = reinterpret_cast<const BlockQ4_K*>(row)[s / kPerBlock];
    const int j = static_cast<int>(s % kPerBlock);
    int scale, min;
    k4_scale_min(j, b.scales, scale, min);
    const float dl = fp16_to_fp32(b.d) * static_cast<float>(scale);
    const float ml = fp16_to_fp32(b.dmin) * static_cast<float>(min);
    for (int e = 0; e < 32; ++e) y[e] = dl * static_cast<float>(q4k_code(b.qs, 32 * j + e)) - ml;
  }
};

template <>
struct Sub32<BlockQ5_K> {
  static constexpr int kPerBlock = 8;
  BOLTRT_HD static void dequantize(const uint8_t* row, int64_t s, float* y) {
    const auto& b = reinterpret_cast<const BlockQ5_K*>(row)[s / kPerBlock];
    const int j = static_cast<int>(s % kPerBlock);
    int scale, min;
    k4_scale_min(j, b.scales, scale, min);
    const float dl = fp16_to_fp32(b.d) * static_cast<float>(scale);
    const float ml = fp16_to_fp32(b.dmin) * static_cast<float>(min);
    for (int e = 0; e < 32; ++e) y[e] = dl * static_cast<float>(q5k_code(b, 32 * j + e)) - ml;
  }
};

template <>
struct Sub32<BlockQ6_K> {
  static constexpr int kPerBlock = 8;
  BOLTRT_HD static void dequantize(const uint8_t* row, int64_t s, float* y) {
    const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[s / kPerBlock];
    const int j = static_cast<int>(s % kPerBlock);
    const float d = fp16_to_fp32(b.d);
    // Two 16-element scale groups per 32-element sub-block.
    for (int half = 0; half < 2; ++half) {
      const float dl = d * static_cast<float>(b.scales[2 * j + half]);
      for (int e = 16 * half; e < 16 * half + 16; ++e) {
        y[e] = dl * static_cast<float>(q6k_code(b, 32 * j + e) - 32);
      }
    }
  }
};

}  // namespace boltrt

// One warp's dot products of one weight row with 1..kBatch activation rows: the inner loop of the
// decode GEMV (gemv_quant.cu) and the expert GEMV (gemv_experts.cu). Two ways to split the row
// among the 32 lanes:
// - coalesced (kCoalesced; WarpDecode in src/backend/cuda/gemv_decode.h: Q4_0, Q8_0, Q4_K, Q6_K,
//   F32, F16, BF16): lane l decodes elements [e + l * kPer, + kPer) of each 32 * kPer-element
//   step, so every load instruction of the warp reads one contiguous span of codes and of x.
//   The first kernels gave each lane a whole sub-block instead, and ran at 6-15 % of an H200's
//   bandwidth: every load touched 32 addresses a block apart (bench/RESULTS.md, 2026-12-04);
// - per sub-block: lane l unpacks the 32-element sub-blocks l, l+32, ... (Sub32<Block>), for
//   the other types and for rows not aligned for the coalesced loads.
// fp32 accumulation per activation row in a fixed order, then a warp-shuffle sum: a row's result
// does not depend on kBatch, so decode and verify rows have the same bits.
//   w_row: cols weights   x: kBatch rows of cols f32, x_stride floats apart (16-byte aligned)
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/gemv_decode.h"
#include "backend/cuda/sub32_float.h"
#include "portable.cuh"
#include "quant/dequant_sub32.h"

namespace boltrt::kernels {

// True when rows at w (row_stride and, for experts, expert_stride bytes apart) suit the
// coalesced loads of WarpDecode<Block>.
template <typename Block>
bool gemv_coalesced_fits(const void* w, size_t row_stride, size_t expert_stride = 0) {
  if constexpr (WarpDecode<Block>::kSupported) {
    constexpr size_t kAlign = WarpDecode<Block>::kAlign;
    return reinterpret_cast<uintptr_t>(w) % kAlign == 0 && row_stride % kAlign == 0 &&
           expert_stride % kAlign == 0;
  } else {
    return false;
  }
}

// acc[b] += v[0..kN) . x[b * x_stride + e0 ..]: one lane's step, 4 products at a time, in the
// same association order for both splits.
template <int kBatch, int kN>
__device__ inline void gemv_step(const float* v, const float* __restrict__ x, int64_t x_stride,
                                 int64_t e0, float* acc) {
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    const float4* xb = reinterpret_cast<const float4*>(x + b * x_stride + e0);
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < kN / 4; ++q) {
      const float4 xv = xb[q];
      sum += v[4 * q] * xv.x + v[4 * q + 1] * xv.y + v[4 * q + 2] * xv.z + v[4 * q + 3] * xv.w;
    }
    acc[b] += sum;
  }
}

// acc[b] = sum_k W[k] * x[b * x_stride + k], summed over the warp (lane 0 holds the sums).
template <typename Block, int kBatch, bool kCoalesced>
__device__ inline void gemv_row_dot(const uint8_t* __restrict__ w_row, int64_t cols,
                                    const float* __restrict__ x, int64_t x_stride, int lane,
                                    float* acc) {
#pragma unroll
  for (int b = 0; b < kBatch; ++b) acc[b] = 0.0f;
  if constexpr (kCoalesced) {
    constexpr int kPer = WarpDecode<Block>::kPer;
    // cols is a multiple of 32 and kPer divides 32: a lane's elements are all in the row or all
    // past its end.
    // Unrolled so that the loads of several steps are in flight together (a row of E4B's 2560
    // columns is 10 steps of 256 elements for the K-quants).
#pragma unroll 4
    for (int64_t e0 = static_cast<int64_t>(lane) * kPer; e0 < cols; e0 += 32 * kPer) {
      float v[kPer];
      WarpDecode<Block>::decode(w_row, e0, v);
      gemv_step<kBatch, kPer>(v, x, x_stride, e0, acc);
    }
  } else {
    for (int64_t s = lane; s < cols / 32; s += 32) {
      float v[32];
      Sub32<Block>::dequantize(w_row, s, v);
      gemv_step<kBatch, 32>(v, x, x_stride, s * 32, acc);
    }
  }
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    for (int offset = 16; offset > 0; offset >>= 1) {
      acc[b] += __shfl_down_sync(0xffffffffu, acc[b], offset);
    }
  }
}

}  // namespace boltrt::kernels

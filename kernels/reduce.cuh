// Warp and block sums shared by the normalisation and attention kernels.
#pragma once
#include <cuda_runtime.h>

#include "portable.cuh"

namespace boltrt::kernels {

__device__ inline float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `scratch` holds 32 floats of shared memory.
__device__ inline float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int n_warps = static_cast<int>(blockDim.x >> 5);
  v = lane < n_warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

}  // namespace boltrt::kernels

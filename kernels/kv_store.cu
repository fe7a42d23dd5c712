// KV cache write: f32 K/V rows of new positions -> F16 cells (round to nearest even, as the
// CPU cache's fp32_to_fp16 does), or Q8_0 cells (one thread per 32-value block, the CPU
// cache's quantizer, cuda::quantize_q8_0_block).
#include <cuda_fp16.h>

#include "backend/cuda/gemma4_math.h"
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void kv_store_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                int64_t row, int64_t pos0_arg, const int64_t* pos0_dev,
                                int64_t cells, uint16_t* k_cache, uint16_t* v_cache) {
  const int64_t pos0 = pos0_dev ? *pos0_dev : pos0_arg;
  const int64_t t = blockIdx.y;
  const int64_t cell = (pos0 + t) % cells;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < row;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    k_cache[cell * row + i] = __half_as_ushort(__float2half_rn(k[t * row + i]));
    v_cache[cell * row + i] = __half_as_ushort(__float2half_rn(v[t * row + i]));
  }
}

// grid (block groups, tokens); thread i of the grid row quantizes block i of the token's K and
// V rows (row / 32 blocks) into its cell
__global__ void kv_store_q8_0_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                     int64_t row, int64_t pos0_arg, const int64_t* pos0_dev,
                                     int64_t cells, uint8_t* k_cache, uint8_t* v_cache) {
  const int64_t pos0 = pos0_dev ? *pos0_dev : pos0_arg;
  const int64_t t = blockIdx.y;
  const int64_t cell = (pos0 + t) % cells;
  const int64_t n_blocks = row / cuda::kQ8_0Values;
  const int64_t row_bytes = cuda::q8_0_row_bytes(row);
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < n_blocks;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t src = t * row + b * cuda::kQ8_0Values;
    const int64_t dst = cell * row_bytes + b * cuda::kQ8_0Bytes;
    cuda::quantize_q8_0_block(k + src, k_cache + dst);
    cuda::quantize_q8_0_block(v + src, v_cache + dst);
  }
}

}  // namespace

cudaError_t launch_kv_store_q8_0(const float* k, const float* v, int64_t n_tokens, int64_t row,
                                 int64_t pos0, int64_t cells, uint8_t* k_cache, uint8_t* v_cache,
                                 cudaStream_t stream, const int64_t* device_pos0) {
  if (n_tokens <= 0) return cudaSuccess;
  if (row % cuda::kQ8_0Values != 0 || n_tokens > 65535) return cudaErrorInvalidValue;
  const int64_t blocks = (row / cuda::kQ8_0Values + 63) / 64;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(n_tokens));
  BOLTRT_LAUNCH(grid, 64, 0, stream, kv_store_q8_0_kernel)
  (k, v, row, pos0, device_pos0, cells, k_cache, v_cache);
  return cudaGetLastError();
}

cudaError_t launch_kv_store(const float* k, const float* v, int64_t n_tokens, int64_t row,
                            int64_t pos0, int64_t cells, uint16_t* k_cache, uint16_t* v_cache,
                            cudaStream_t stream, const int64_t* device_pos0) {
  if (n_tokens <= 0) return cudaSuccess;
  const int64_t blocks = (row + 255) / 256;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(n_tokens));
  BOLTRT_LAUNCH(grid, 256, 0, stream, kv_store_kernel)
  (k, v, row, pos0, device_pos0, cells, k_cache, v_cache);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

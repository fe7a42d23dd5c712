// KV cache write: f32 K/V rows of new positions -> F16 cells (round to nearest even, as the
// CPU cache's fp32_to_fp16 does).
#include <cuda_fp16.h>

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

}  // namespace

cudaError_t launch_kv_store(const float* k, const float* v, int64_t n_tokens, int64_t row,
                            int64_t pos0, int64_t cells, uint16_t* k_cache, uint16_t* v_cache,
                            cudaStream_t stream, const int64_t* device_pos0) {
  if (n_tokens <= 0) return cudaSuccess;
  const int64_t blocks = (row + 255) / 256;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(n_tokens));
  kv_store_kernel<<<grid, 256, 0, stream>>>(k, v, row, pos0, device_pos0, cells, k_cache, v_cache);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

// f32 activations -> f16 or bf16 (round to nearest even), the B operand of the cuBLAS GEMM over
// F16/BF16 weight matrices (cublasGemmEx takes A and B of one type). Elementwise.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops.cuh"

namespace boltrt::kernels {
namespace {

template <bool kBf16>
__global__ void convert_activations_kernel(const float* __restrict__ x, int64_t n,
                                           uint16_t* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (kBf16) {
      out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
    } else {
      out[i] = __half_as_ushort(__float2half_rn(x[i]));
    }
  }
}

}  // namespace

cudaError_t launch_convert_activations(const float* x, int64_t n, bool bf16, uint16_t* out,
                                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int64_t blocks = (n + 255) / 256;
  const unsigned grid = static_cast<unsigned>(blocks < 4096 ? blocks : 4096);
  if (bf16) {
    BOLTRT_LAUNCH(grid, 256, 0, stream, convert_activations_kernel<true>)(x, n, out);
  } else {
    BOLTRT_LAUNCH(grid, 256, 0, stream, convert_activations_kernel<false>)(x, n, out);
  }
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

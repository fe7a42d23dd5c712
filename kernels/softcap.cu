// Final-logit soft-cap: x = cap * tanh(x / cap).
#include "backend/cuda/gemma4_math.h"
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = cuda::softcap(x[i], cap);
  }
}

}  // namespace

cudaError_t launch_softcap(float* x, int64_t n, float cap, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int64_t blocks = (n + 255) / 256;
  BOLTRT_LAUNCH(static_cast<unsigned>(blocks < 4096 ? blocks : 4096), 256, 0, stream,
                softcap_kernel)
  (x, n, cap);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

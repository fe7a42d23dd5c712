// Residual add: y += x elementwise.
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void add_kernel(const float* __restrict__ x, int64_t n, float* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += x[i];
  }
}

}  // namespace

cudaError_t launch_add(const float* x, int64_t n, float* y, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  BOLTRT_LAUNCH(static_cast<unsigned>(blocks < 4096 ? blocks : 4096), threads, 0, stream,
                add_kernel)
  (x, n, y);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

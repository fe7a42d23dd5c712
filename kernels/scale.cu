// x *= s (a matrix's scale2 multiplier, the layer output scale).
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void scale_kernel(float* x, int64_t n, float s) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] *= s;
  }
}

}  // namespace

cudaError_t launch_scale(float* x, int64_t n, float s, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int64_t blocks = (n + 255) / 256;
  BOLTRT_LAUNCH(static_cast<unsigned>(blocks < 4096 ? blocks : 4096), 256, 0, stream, scale_kernel)
  (x, n, s);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

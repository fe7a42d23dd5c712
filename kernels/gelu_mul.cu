// GELU-tanh gating: out = gelu_tanh(x) * y, elementwise over rows with a strided y.
#include "backend/cuda/gemma4_math.h"
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void gelu_mul_kernel(const float* x, const float* __restrict__ y, int64_t y_stride,
                                int64_t n, float* out) {
  const int64_t r = blockIdx.y;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[r * n + i] = cuda::gelu_tanh(x[r * n + i]) * y[r * y_stride + i];
  }
}

}  // namespace

cudaError_t launch_gelu_mul(const float* x, const float* y, int64_t y_stride, int64_t rows,
                            int64_t n, float* out, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  const dim3 grid(static_cast<unsigned>(blocks < 1024 ? blocks : 1024),
                  static_cast<unsigned>(rows));
  BOLTRT_LAUNCH(grid, threads, 0, stream, gelu_mul_kernel)(x, y, y_stride, n, out);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

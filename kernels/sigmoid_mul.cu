// Sigmoid gating: x *= 1 / (1 + e^-gate) elementwise (the output gate of Qwen3.5's gated
// attention, applied to the attention result before the out-projection).
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void sigmoid_mul_kernel(const float* __restrict__ gate, int64_t n, float* x) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] *= 1.0f / (1.0f + expf(-gate[i]));
  }
}

}  // namespace

cudaError_t launch_sigmoid_mul(const float* gate, int64_t n, float* x, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  BOLTRT_LAUNCH(static_cast<unsigned>(blocks < 4096 ? blocks : 4096), threads, 0, stream,
                sigmoid_mul_kernel)
  (gate, n, x);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

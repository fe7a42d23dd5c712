// SiLU gating: out = silu(gate) * x elementwise, silu(g) = g / (1 + e^-g) as the CPU writes it.
// The SwiGLU FFN (gate, up) and the gate of the GDN layers' RMSNorm (z, normed output).
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void silu_mul_kernel(const float* gate, const float* x, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * x[i];
  }
}

}  // namespace

cudaError_t launch_silu_mul(const float* gate, const float* x, int64_t n, float* out,
                            cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  BOLTRT_LAUNCH(static_cast<unsigned>(blocks < 4096 ? blocks : 4096), threads, 0, stream,
                silu_mul_kernel)
  (gate, x, n, out);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

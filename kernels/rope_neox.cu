// NEOX RoPE in place, one block per (token, head), one thread per rotated pair.
#include "backend/cuda/gemma4_math.h"
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void rope_neox_kernel(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                                 int64_t pos0_arg, const int64_t* pos0_dev, float theta_scale,
                                 const float* __restrict__ freq_factors) {
  const int64_t pos0 = pos0_dev ? *pos0_dev : pos0_arg;
  const int64_t t = blockIdx.x / n_heads;
  float* v = x + static_cast<int64_t>(blockIdx.x) * head_dim;
  const int64_t half = n_rot / 2;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = cuda::rope_angle(pos0 + t, static_cast<int>(i), theta_scale, freq_factors);
    float s, c;
    sincosf(angle, &s, &c);
    cuda::rope_rotate(v[i], v[i + half], c, s);
  }
}

}  // namespace

cudaError_t launch_rope_neox(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                             int64_t n_rot, int64_t pos0, float theta_scale,
                             const float* freq_factors, cudaStream_t stream,
                             const int64_t* device_pos0) {
  if (n_tokens <= 0 || n_rot <= 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(n_tokens * n_heads);
  const int threads = n_rot / 2 >= 128 ? 128 : 64;
  BOLTRT_LAUNCH(blocks, threads, 0, stream, rope_neox_kernel)
  (x, n_heads, head_dim, n_rot, pos0, device_pos0, theta_scale, freq_factors);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

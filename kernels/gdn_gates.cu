// The per-(token, value head) gates of a Gated DeltaNet layer (cpu::gdn_gates):
//   gamma = softplus(alpha + dt_bias) * ssm_a   (log-decay)      beta = sigmoid(beta_in)
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void gdn_gates_kernel(const float* __restrict__ alpha, const float* __restrict__ beta_in,
                                 const float* __restrict__ dt_bias, const float* __restrict__ ssm_a,
                                 int64_t count, int64_t heads, float* gamma, float* beta) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const int64_t h = i % heads;
  const float x = alpha[i] + dt_bias[h];
  const float softplus = x > 20.0f ? x : log1pf(expf(x));
  gamma[i] = softplus * ssm_a[h];
  beta[i] = 1.0f / (1.0f + expf(-beta_in[i]));
}

}  // namespace

cudaError_t launch_gdn_gates(const float* alpha, const float* beta_in, const float* dt_bias,
                             const float* ssm_a, int64_t n_tokens, int64_t heads, float* gamma,
                             float* beta, cudaStream_t stream) {
  const int64_t count = n_tokens * heads;
  if (count <= 0) return cudaSuccess;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>((count + threads - 1) / threads);
  BOLTRT_LAUNCH(blocks, threads, 0, stream, gdn_gates_kernel)
  (alpha, beta_in, dt_bias, ssm_a, count, heads, gamma, beta);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

// Mixture-of-experts combination: each token's expert outputs weighted by its routing weights
// and summed, out[t][i] = sum_j weights[t][j] * y[t * k + j][i] (y: the down projections of
// the token's k selected experts, rows in routing order, from launch_gemv_experts).
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void moe_combine_kernel(const float* __restrict__ y, const float* __restrict__ weights,
                                   int k, int64_t n, float* __restrict__ out) {
  const int64_t t = blockIdx.y;
  const float* wt = weights + t * k;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += y[(t * k + j) * n + i] * wt[j];
    out[t * n + i] = sum;
  }
}

}  // namespace

cudaError_t launch_moe_combine(const float* y, const float* weights, int64_t n_tokens, int k,
                               int64_t n, float* out, cudaStream_t stream) {
  if (n_tokens <= 0 || n <= 0) return cudaSuccess;
  if (n_tokens > 65535 || k < 1) return cudaErrorInvalidValue;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  const dim3 grid(static_cast<unsigned>(blocks < 1024 ? blocks : 1024),
                  static_cast<unsigned>(n_tokens));
  BOLTRT_LAUNCH(grid, threads, 0, stream, moe_combine_kernel)(y, weights, k, n, out);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

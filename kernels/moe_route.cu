// Mixture-of-experts routing (shared/docs/gemma4.md §5.7): one thread per token runs
// cuda::moe_route_top_k (gemma4_math.h, checked bit for bit against cpu::route_top_k by
// test_cuda_math) over its row of router logits.
//   logits [n_tokens][n_expert] -> selected, weights [n_tokens][k]
#include "backend/cuda/gemma4_math.h"
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void moe_route_kernel(const float* __restrict__ logits, int64_t n_tokens, int n_expert,
                                 int k, int32_t* __restrict__ selected,
                                 float* __restrict__ weights) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= n_tokens) return;
  cuda::moe_route_top_k(logits + t * n_expert, n_expert, k, selected + t * k, weights + t * k);
}

}  // namespace

cudaError_t launch_moe_route(const float* logits, int64_t n_tokens, int n_expert, int k,
                             int32_t* selected, float* weights, cudaStream_t stream) {
  if (n_tokens <= 0) return cudaSuccess;
  if (k < 1 || k > n_expert) return cudaErrorInvalidValue;
  const int threads = 64;
  const int64_t blocks = (n_tokens + threads - 1) / threads;
  BOLTRT_LAUNCH(static_cast<unsigned>(blocks), threads, 0, stream, moe_route_kernel)
  (logits, n_tokens, n_expert, k, selected, weights);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

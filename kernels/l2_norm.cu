// L2 normalisation of head rows in place (the q and k heads of Qwen3.5 GDN layers), one block per
// (token, head): y = x / max(||x||_2, eps). The sum of squares is a float block sum (the CPU
// reference sums in double; the difference is float rounding).
#include "ops.cuh"
#include "reduce.cuh"

namespace boltrt::kernels {
namespace {

constexpr int kThreads = 128;

__global__ void l2_norm_kernel(float* x, int64_t heads, int64_t n, int64_t token_stride,
                               float eps) {
  BOLTRT_SHARED(float, scratch, [32]);
  const int64_t t = blockIdx.x / heads, h = blockIdx.x % heads;
  float* row = x + t * token_stride + h * n;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) sum += row[i] * row[i];
  sum = block_sum(sum, scratch);
  const float scale = 1.0f / fmaxf(sqrtf(sum), eps);
  for (int64_t i = threadIdx.x; i < n; i += kThreads) row[i] *= scale;
}

}  // namespace

cudaError_t launch_l2_norm_heads(float* x, int64_t n_tokens, int64_t heads, int64_t n,
                                 int64_t token_stride, float eps, cudaStream_t stream) {
  if (n_tokens <= 0 || heads <= 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>(n_tokens * heads);
  BOLTRT_LAUNCH(blocks, kThreads, 0, stream, l2_norm_kernel)(x, heads, n, token_stride, eps);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

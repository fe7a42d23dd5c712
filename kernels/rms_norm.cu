// RMSNorm, one block per row: y = x / sqrt(mean(x^2) + eps) * w, or h += that (residual
// post-norms). The sum of squares is accumulated in f32 per thread then tree-reduced (the CPU
// reference sums in double; the difference is float rounding).
#include "ops.cuh"
#include "reduce.cuh"

namespace boltrt::kernels {
namespace {

constexpr int kThreads = 256;

template <bool kAdd>
__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, int64_t n,
                                float eps, float* y) {
  BOLTRT_SHARED(float, scratch, [32]);
  const float* xr = x + blockIdx.x * n;
  float* yr = y + blockIdx.x * n;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i] * xr[i];
  sum = block_sum(sum, scratch);
  const float inv = rsqrtf(sum / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = xr[i] * inv * (w ? w[i] : 1.0f);
    if constexpr (kAdd) {
      yr[i] += v;
    } else {
      yr[i] = v;
    }
  }
}

}  // namespace

cudaError_t launch_rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps,
                            float* y, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  BOLTRT_LAUNCH(static_cast<unsigned>(rows), kThreads, 0, stream, rms_norm_kernel<false>)
  (x, w, n, eps, y);
  return cudaGetLastError();
}

cudaError_t launch_rms_norm_add(const float* x, const float* w, int64_t rows, int64_t n, float eps,
                                float* h, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  BOLTRT_LAUNCH(static_cast<unsigned>(rows), kThreads, 0, stream, rms_norm_kernel<true>)
  (x, w, n, eps, h);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

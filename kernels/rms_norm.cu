// RMSNorm, one block per row: y = x / sqrt(mean(x^2) + eps) * w, or h += that (residual
// post-norms). The sum of squares is accumulated in f32 per thread then tree-reduced (the CPU
// reference sums in double; the difference is float rounding).
//
// Rows of up to kThreads * kPer values (E4B's 2560) are held in registers: every load of the row
// is issued before the first is used, and the row is read once. The first version looped over the
// row twice with one load in flight per thread, and took 6-10 us a row on an H200, 23 % of a
// decode step (ncu, bench/RESULTS.md 2026-12-04). Longer rows loop (kPer = 0).
// x may be y (q/k/v norms run in place): each thread reads its elements before writing them.
#include "ops.cuh"
#include "reduce.cuh"

namespace boltrt::kernels {
namespace {

constexpr int kThreads = 256;

template <bool kAdd>
__device__ inline void rms_norm_store(float* yr, int64_t i, float v) {
  if constexpr (kAdd) {
    yr[i] += v;
  } else {
    yr[i] = v;
  }
}

template <bool kAdd, int kPer>
__global__ void rms_norm_kernel(const float* x, const float* __restrict__ w, int64_t n, float eps,
                                float* y) {
  BOLTRT_SHARED(float, scratch, [32]);
  const float* xr = x + blockIdx.x * n;
  float* yr = y + blockIdx.x * n;
  if constexpr (kPer > 0) {
    float v[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kThreads;
      v[k] = i < n ? xr[i] : 0.0f;
    }
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) sum += v[k] * v[k];
    sum = block_sum(sum, scratch);
    const float inv = rsqrtf(sum / static_cast<float>(n) + eps);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kThreads;
      if (i < n) rms_norm_store<kAdd>(yr, i, v[k] * inv * (w ? w[i] : 1.0f));
    }
  } else {
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) sum += xr[i] * xr[i];
    sum = block_sum(sum, scratch);
    const float inv = rsqrtf(sum / static_cast<float>(n) + eps);
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
      rms_norm_store<kAdd>(yr, i, xr[i] * inv * (w ? w[i] : 1.0f));
    }
  }
}

template <bool kAdd>
cudaError_t launch_rows(const float* x, const float* w, int64_t rows, int64_t n, float eps,
                        float* y, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  const auto grid = static_cast<unsigned>(rows);
  if (n <= kThreads) {
    BOLTRT_LAUNCH(grid, kThreads, 0, stream, rms_norm_kernel<kAdd, 1>)(x, w, n, eps, y);
  } else if (n <= 4 * kThreads) {
    BOLTRT_LAUNCH(grid, kThreads, 0, stream, rms_norm_kernel<kAdd, 4>)(x, w, n, eps, y);
  } else if (n <= 16 * kThreads) {
    BOLTRT_LAUNCH(grid, kThreads, 0, stream, rms_norm_kernel<kAdd, 16>)(x, w, n, eps, y);
  } else {
    BOLTRT_LAUNCH(grid, kThreads, 0, stream, rms_norm_kernel<kAdd, 0>)(x, w, n, eps, y);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps,
                            float* y, cudaStream_t stream) {
  return launch_rows<false>(x, w, rows, n, eps, y, stream);
}

cudaError_t launch_rms_norm_add(const float* x, const float* w, int64_t rows, int64_t n, float eps,
                                float* h, cudaStream_t stream) {
  return launch_rows<true>(x, w, rows, n, eps, h, stream);
}

}  // namespace boltrt::kernels

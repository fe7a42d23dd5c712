// Splits rows of two halves apart: x [rows][2][n] -> a [rows][n], b [rows][n]. Qwen3.5's query
// projection writes each head as [q_h | gate_h]; attention wants the queries packed. One block
// per row.
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void split_halves_kernel(const float* __restrict__ x, int64_t n, float* a, float* b) {
  const int64_t r = blockIdx.x;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    a[r * n + i] = x[(2 * r) * n + i];
    b[r * n + i] = x[(2 * r + 1) * n + i];
  }
}

}  // namespace

cudaError_t launch_split_halves(const float* x, int64_t rows, int64_t n, float* a, float* b,
                                cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  BOLTRT_LAUNCH(static_cast<unsigned>(rows), 128, 0, stream, split_halves_kernel)(x, n, a, b);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

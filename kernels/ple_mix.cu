// Per-layer embedding mix (shared/docs/gemma4.md §5.2), one block per (token, layer) row of P:
//   proj = (rms_norm(proj * proj_scale) * w + tok * tok_scale) * mix_scale
#include "ops.cuh"
#include "reduce.cuh"

namespace boltrt::kernels {
namespace {

__global__ void ple_mix_kernel(float* proj, const float* __restrict__ tok,
                               const float* __restrict__ w, int64_t P, float proj_scale,
                               float tok_scale, float mix_scale, float eps) {
  BOLTRT_SHARED(float, scratch, [32]);
  float* x = proj + static_cast<int64_t>(blockIdx.x) * P;
  const float* t = tok + static_cast<int64_t>(blockIdx.x) * P;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < P; i += blockDim.x) {
    const float v = x[i] * proj_scale;
    sum += v * v;
  }
  sum = block_sum(sum, scratch);
  const float inv = rsqrtf(sum / static_cast<float>(P) + eps);
  for (int64_t i = threadIdx.x; i < P; i += blockDim.x) {
    x[i] = ((x[i] * proj_scale) * inv * w[i] + t[i] * tok_scale) * mix_scale;
  }
}

}  // namespace

cudaError_t launch_ple_mix(float* proj, const float* tok, const float* w, int64_t rows, int64_t P,
                           float proj_scale, float tok_scale, float mix_scale, float eps,
                           cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  BOLTRT_LAUNCH(static_cast<unsigned>(rows), 128, 0, stream, ple_mix_kernel)
  (proj, tok, w, P, proj_scale, tok_scale, mix_scale, eps);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

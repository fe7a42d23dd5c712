// Mixture-of-experts batches: the (token, slot) pairs ordered by expert, so the expert GEMVs of a
// prefill chunk (launch_gemv_experts with `order`) run the pairs of one expert back to back and
// its weights are read from DRAM about once, then from L2, instead of once per pair.
// One block: counts per expert in shared memory, an exclusive scan, then each pair takes the
// next slot of its expert (the order within an expert is arbitrary; every pair still writes
// its own output row, so the result does not depend on it).
//   selected [pairs] in [0, n_expert) -> order [pairs], a permutation of 0..pairs-1 with the
//   pairs of expert 0 first, then expert 1, ...
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

__global__ void moe_group_kernel(const int32_t* __restrict__ selected, int pairs, int n_expert,
                                 int32_t* __restrict__ order) {
  BOLTRT_DYNAMIC_SHARED(int, next);  // [n_expert]: counts, then each expert's next free slot
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) next[e] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) atomicAdd(&next[selected[p]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int start = 0;
    for (int e = 0; e < n_expert; ++e) {
      const int count = next[e];
      next[e] = start;
      start += count;
    }
  }
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    order[atomicAdd(&next[selected[p]], 1)] = p;
  }
}

}  // namespace

cudaError_t launch_moe_group(const int32_t* selected, int64_t pairs, int n_expert, int32_t* order,
                             cudaStream_t stream) {
  if (pairs <= 0) return cudaSuccess;
  if (n_expert < 1 || n_expert > 4096 || pairs > 65535) return cudaErrorInvalidValue;
  BOLTRT_LAUNCH(1, 512, static_cast<size_t>(n_expert) * sizeof(int), stream, moe_group_kernel)
  (selected, static_cast<int>(pairs), n_expert, order);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

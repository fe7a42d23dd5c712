// Mixture-of-experts GEMV: for each (token, routing slot) pair p, y[p] = W_e x (times the
// expert's scale), e = selected[p], over a stack of n_expert matrices stored back to back
// (expert_stride bytes apart, as in the GGUF's [cols, rows, n_expert] *_exps tensors). One
// launch covers every pair of a batch: grid.y = pairs, grid.x = row groups, so a decode step
// reads only its k experts' slices (26B-A4B: 8 of 128) and no host round trip is needed to
// learn which. Per row the same warp-per-row dot product as gemv_quant.cu (gemv_row_dot). Prefill
// chunks pass `order` (launch_moe_group): the grid visits one expert's pairs back to back, so its
// weights come from L2 after the first pair.
//   x: [pairs / x_pairs_per_row][cols] f32 (x_pairs_per_row = k: the token's normed hidden
//      state shared by its k slots; 1: one input row per pair, e.g. the GEGLU activations)
//   y: [pairs][rows] f32
#include <type_traits>

#include "gemv_quant.cuh"
#include "gemv_row.cuh"
#include "sub32_dispatch.cuh"

namespace boltrt::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

template <typename Block, bool kCoalesced>
__global__ void gemv_experts_kernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                                    size_t row_stride, size_t expert_stride,
                                    const int32_t* __restrict__ selected,
                                    const float* __restrict__ x, int x_pairs_per_row,
                                    const float* __restrict__ expert_scale,
                                    const int32_t* __restrict__ order, float* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int64_t pair = order ? order[blockIdx.y] : blockIdx.y;
  const int32_t e = selected[pair];
  const uint8_t* w_row = w + static_cast<size_t>(e) * expert_stride + row * row_stride;
  const float* xr = x + (pair / x_pairs_per_row) * cols;
  float acc[1];
  gemv_row_dot<Block, 1, kCoalesced>(w_row, cols, xr, cols, lane, acc);
  if (lane == 0) y[pair * rows + row] = expert_scale ? acc[0] * expert_scale[e] : acc[0];
}

}  // namespace

cudaError_t launch_gemv_experts(uint32_t ggml_type, const void* w, int64_t rows, int64_t cols,
                                size_t row_stride, size_t expert_stride, const int32_t* selected,
                                int64_t pairs, const float* x, int x_pairs_per_row,
                                const float* expert_scale, float* y, cudaStream_t stream,
                                const int32_t* order) {
  if (rows <= 0 || pairs <= 0) return cudaSuccess;
  if (pairs > 65535 || x_pairs_per_row < 1 || cols % 32 != 0) return cudaErrorInvalidValue;
  return with_sub32_block(ggml_type, [&](auto* tag) {
    using Block = std::remove_pointer_t<decltype(tag)>;
    const dim3 grid(static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                    static_cast<unsigned>(pairs));
    const dim3 block(32 * kWarpsPerBlock);
    const auto* wb = static_cast<const uint8_t*>(w);
    if constexpr (WarpDecode<Block>::kSupported) {
      if (gemv_coalesced_fits<Block>(w, row_stride, expert_stride)) {
        BOLTRT_LAUNCH(grid, block, 0, stream, gemv_experts_kernel<Block, true>)
        (wb, rows, cols, row_stride, expert_stride, selected, x, x_pairs_per_row, expert_scale,
         order, y);
        return cudaGetLastError();
      }
    }
    BOLTRT_LAUNCH(grid, block, 0, stream, gemv_experts_kernel<Block, false>)
    (wb, rows, cols, row_stride, expert_stride, selected, x, x_pairs_per_row, expert_scale, order,
     y);
    return cudaGetLastError();
  });
}

}  // namespace boltrt::kernels

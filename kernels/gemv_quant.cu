// Decode GEMV: y = W x for 1..8 activation rows, W in a ggml block format or F32/F16/BF16.
//
// Decode reads every weight once per token, so this kernel's job is to stream W at memory
// speed: one warp per weight row, each weight byte read once for the whole batch (every
// activation row is dotted with the decoded weights in registers): gemv_row_dot in gemv_row.cuh,
// with the coalesced split where the type and alignment allow it.
//
//   W: rows x cols (row_stride bytes apart)   x: batch x cols f32   y: batch x rows f32
#include <type_traits>

#include "gemv_quant.cuh"
#include "gemv_row.cuh"
#include "sub32_dispatch.cuh"

namespace boltrt::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

template <typename Block, int kBatch, bool kCoalesced>
__global__ void gemv_quant_kernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                                  size_t row_stride, const float* __restrict__ x,
                                  float* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= rows) return;
  float acc[kBatch];
  gemv_row_dot<Block, kBatch, kCoalesced>(w + row * row_stride, cols, x, cols, lane, acc);
  if (lane == 0) {
#pragma unroll
    for (int b = 0; b < kBatch; ++b) y[b * rows + row] = acc[b];
  }
}

template <typename Block, int kBatch>
void launch_batch(const uint8_t* w, int64_t rows, int64_t cols, size_t row_stride, const float* x,
                  float* y, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock));
  const dim3 block(32 * kWarpsPerBlock);
  if constexpr (WarpDecode<Block>::kSupported) {
    if (gemv_coalesced_fits<Block>(w, row_stride)) {
      BOLTRT_LAUNCH(grid, block, 0, stream, gemv_quant_kernel<Block, kBatch, true>)
      (w, rows, cols, row_stride, x, y);
      return;
    }
  }
  BOLTRT_LAUNCH(grid, block, 0, stream, gemv_quant_kernel<Block, kBatch, false>)
  (w, rows, cols, row_stride, x, y);
}

template <typename Block>
cudaError_t launch_for_block(const void* w, int64_t rows, int64_t cols, size_t row_stride,
                             const float* x, int batch, float* y, cudaStream_t stream) {
  const auto* wb = static_cast<const uint8_t*>(w);
  switch (batch) {
    case 1:
      launch_batch<Block, 1>(wb, rows, cols, row_stride, x, y, stream);
      break;
    case 2:
      launch_batch<Block, 2>(wb, rows, cols, row_stride, x, y, stream);
      break;
    case 3:
      launch_batch<Block, 3>(wb, rows, cols, row_stride, x, y, stream);
      break;
    case 4:
      launch_batch<Block, 4>(wb, rows, cols, row_stride, x, y, stream);
      break;
    case 5:
      launch_batch<Block, 5>(wb, rows, cols, row_stride, x, y, stream);
      break;
    case 6:
      launch_batch<Block, 6>(wb, rows, cols, row_stride, x, y, stream);
      break;
    case 7:
      launch_batch<Block, 7>(wb, rows, cols, row_stride, x, y, stream);
      break;
    case 8:
      launch_batch<Block, 8>(wb, rows, cols, row_stride, x, y, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

bool gemv_quant_supported(uint32_t ggml_type) {
  return has_sub32_block(ggml_type);
}

cudaError_t launch_gemv_quant(uint32_t ggml_type, const void* w, int64_t rows, int64_t cols,
                              size_t row_stride, const float* x, int batch, float* y,
                              cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  return with_sub32_block(ggml_type, [&](auto* tag) {
    using Block = std::remove_pointer_t<decltype(tag)>;
    return launch_for_block<Block>(w, rows, cols, row_stride, x, batch, y, stream);
  });
}

}  // namespace boltrt::kernels

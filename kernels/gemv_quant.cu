// Decode GEMV: y = W x for 1..8 activation rows, W in a ggml block format or F32/F16/BF16.
//
// Decode reads every weight once per token, so this kernel's job is to stream W at memory
// speed: each weight byte is read once for the whole batch (every activation row is dotted with
// the decoded weights in registers): gemv_row_dot in gemv_row.cuh, with the coalesced split where
// the type and alignment allow it. A block's 4 warps take 4 rows, or split fewer rows among them
// (split-K: n_parts warps per row, each every n_parts-th step of 32 * kPer elements, partial sums
// added in warp order): a matrix of few rows then still fills the GPU with warps (the H200's
// profile of 2048-row matrices, one warp per row: 15 warps per SM, 22 % occupancy). n_parts
// depends on the matrix shape only, never on the batch, so a row has the same bits at every
// batch size.
//
//   W: rows x cols (row_stride bytes apart)   x: batch x cols f32   y: batch x rows f32
#include <type_traits>

#include "gemv_quant.cuh"
#include "gemv_row.cuh"
#include "sub32_dispatch.cuh"

namespace boltrt::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

// Warps per row: 4 for up to 4096 rows, 2 up to 12288, else 1.
int gemv_parts(int64_t rows) {
  return rows <= 4096 ? 4 : rows <= 12288 ? 2 : 1;
}

template <typename Block, int kBatch, bool kCoalesced>
__global__ void gemv_quant_kernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                                  size_t row_stride, const float* __restrict__ x,
                                  float* __restrict__ y, int n_parts) {
  BOLTRT_SHARED(float, partial, [kWarpsPerBlock * kBatch]);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row =
      static_cast<int64_t>(blockIdx.x) * (kWarpsPerBlock / n_parts) + warp / n_parts;
  const int part = warp % n_parts;
  float acc[kBatch];
#pragma unroll
  for (int b = 0; b < kBatch; ++b) acc[b] = 0.0f;
  if (row < rows) {  // the same for the whole warp
    gemv_row_dot<Block, kBatch, kCoalesced>(w + row * row_stride, cols, x, cols, lane, part,
                                            n_parts, acc);
  }
  if (n_parts == 1) {
    if (row < rows && lane == 0) {
#pragma unroll
      for (int b = 0; b < kBatch; ++b) y[b * rows + row] = acc[b];
    }
    return;
  }
  // n_parts is the same for every thread of the launch, so every thread reaches the barrier.
  if (lane == 0) {
#pragma unroll
    for (int b = 0; b < kBatch; ++b) partial[warp * kBatch + b] = acc[b];
  }
  __syncthreads();
  if (part == 0 && lane == 0 && row < rows) {
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      float sum = partial[warp * kBatch + b];
      for (int p = 1; p < n_parts; ++p) sum += partial[(warp + p) * kBatch + b];
      y[b * rows + row] = sum;
    }
  }
}

template <typename Block, int kBatch>
void launch_batch(const uint8_t* w, int64_t rows, int64_t cols, size_t row_stride, const float* x,
                  float* y, cudaStream_t stream) {
  const int n_parts = gemv_parts(rows);
  const int64_t rows_per_block = kWarpsPerBlock / n_parts;
  const dim3 grid(static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block));
  const dim3 block(32 * kWarpsPerBlock);
  if constexpr (WarpDecode<Block>::kSupported) {
    if (gemv_coalesced_fits<Block>(w, row_stride)) {
      BOLTRT_LAUNCH(grid, block, 0, stream, gemv_quant_kernel<Block, kBatch, true>)
      (w, rows, cols, row_stride, x, y, n_parts);
      return;
    }
  }
  BOLTRT_LAUNCH(grid, block, 0, stream, gemv_quant_kernel<Block, kBatch, false>)
  (w, rows, cols, row_stride, x, y, n_parts);
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

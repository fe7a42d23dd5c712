// Decode GEMV: y = W x for 1..8 activation rows, W in a ggml block format or F32/F16/BF16.
//
// Decode reads every weight once per token, so this kernel's job is to stream W at memory
// speed: one warp per weight row; lane l unpacks the 32-element sub-blocks l, l+32, l+64, ...
// of the row into registers (Sub32<Block>::dequantize — the same BOLTRT_HD code that
// test_dequant_sub32 checks on the CPU) and dots them with every activation row of the batch,
// so each weight byte is read once for the whole batch. fp32 accumulation, then a warp-shuffle
// reduction.
//
//   W: rows x cols (row_stride bytes apart)   x: batch x cols f32   y: batch x rows f32
#include <type_traits>

#include "gemv_quant.cuh"
#include "sub32_dispatch.cuh"

namespace boltrt::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

template <typename Block, int kBatch>
__global__ void gemv_quant_kernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                                  size_t row_stride, const float* __restrict__ x,
                                  float* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= rows) return;
  const uint8_t* w_row = w + row * row_stride;
  const int64_t n_sub = cols / 32;

  float acc[kBatch];
#pragma unroll
  for (int b = 0; b < kBatch; ++b) acc[b] = 0.0f;

  for (int64_t s = lane; s < n_sub; s += 32) {
    float v[32];
    Sub32<Block>::dequantize(w_row, s, v);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const float4* xb = reinterpret_cast<const float4*>(x + b * cols + s * 32);
      float sum = 0.0f;
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const float4 xv = xb[q];
        sum += v[4 * q] * xv.x + v[4 * q + 1] * xv.y + v[4 * q + 2] * xv.z + v[4 * q + 3] * xv.w;
      }
      acc[b] += sum;
    }
  }
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    float sum = acc[b];
    for (int offset = 16; offset > 0; offset >>= 1) {
      sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    if (lane == 0) y[b * rows + row] = sum;
  }
}

template <typename Block, int kBatch>
void launch_batch(const uint8_t* w, int64_t rows, int64_t cols, size_t row_stride, const float* x,
                  float* y, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock));
  const dim3 block(32 * kWarpsPerBlock);
  BOLTRT_LAUNCH(grid, block, 0, stream, gemv_quant_kernel<Block, kBatch>)
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

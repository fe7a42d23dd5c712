// Embedding lookup: rows of a (quantized) table unpacked with Sub32 and scaled. One block per
// token; each thread unpacks whole 32-value sub-blocks.
#include <type_traits>

#include "ops.cuh"
#include "sub32_dispatch.cuh"

namespace boltrt::kernels {
namespace {

template <typename Block>
__global__ void embed_rows_kernel(const uint8_t* __restrict__ table, size_t row_stride,
                                  int64_t cols, const int32_t* __restrict__ tokens, float scale,
                                  float* out) {
  const uint8_t* row = table + static_cast<size_t>(tokens[blockIdx.x]) * row_stride;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * cols;
  for (int64_t s = threadIdx.x; s < cols / 32; s += blockDim.x) {
    float v[32];
    Sub32<Block>::dequantize(row, s, v);
#pragma unroll
    for (int e = 0; e < 32; ++e) dst[s * 32 + e] = v[e] * scale;
  }
}

}  // namespace

cudaError_t launch_embed_rows(uint32_t type, const void* table, size_t row_stride, int64_t cols,
                              const int32_t* tokens, int64_t n, float scale, float* out,
                              cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (cols % 32 != 0) return cudaErrorInvalidValue;
  return with_sub32_block(type, [&](auto* tag) {
    using Block = std::remove_pointer_t<decltype(tag)>;
    BOLTRT_LAUNCH(static_cast<unsigned>(n), 128, 0, stream, embed_rows_kernel<Block>)
    (static_cast<const uint8_t*>(table), row_stride, cols, tokens, scale, out);
    return cudaGetLastError();
  });
}

}  // namespace boltrt::kernels

// Prefill / DFlash-verify GEMM: y[n][rows] = x[n][cols] W^T on tensor cores, for batches of
// more than kGemvMaxBatch activation rows, W in a ggml block format or F32/F16/BF16.
//
// Why f16 mma.sync.m16n8k16 with f32 accumulation (and not int8 mma on 8-bit activations):
// - every weight format we read dequantizes to a small integer code times an f16 scale (minus
//   an f16 min), which f16 holds to within 2^-11 relative, so one Sub32<Block>::dequantize (the
//   BOLTRT_HD code test_dequant_sub32 checks against dequantize_row on the CPU) serves all
//   types; int8 mma would need a per-format path to keep codes and scales apart (Q4_K's 6-bit
//   scales and mins, Q6_K's 16-element groups) or a second quantization of the weights;
// - activations rounded to f16 keep 11 significant bits, more than the CPU backend's Q8
//   activations (7 bits + sign per 32- or 256-element block), so the CPU matmul stays a valid
//   reference; the inputs of every Gemma 4 projection are RMS-normalised or GELU-gated rows,
//   far inside f16's range (65504);
// - m16n8k16 f16 exists on every architecture we build (sm_80 .. sm_120).
// Prefill is compute-bound for 512-token chunks; f16 mma runs at half the int8 rate on these
// chips, which is still far above what the dequantization to shared memory feeds.
//
// Tiling: a block of 8 warps computes a 128 (weight rows) x 64 (tokens) tile of y, stepping
// over k in 64-wide slices. Per slice, each of the 256 threads dequantizes one 32-element
// sub-block (row tid % 128, sub-block tid / 128 of the slice) into shared memory as f16, and the
// threads convert the 64 x 64 f32 activation slice to f16. Warp w owns rows 32 (w % 4) .. +32 and
// tokens 32 (w / 4) .. +32: 2 x 4 mma tiles of 16 x 8, 32 f32 accumulators per thread.
// Rows of the shared tiles are padded by 8 halves (72 halves = 36 words) so the fragment loads
// (8 rows x 4 words per warp) hit 32 distinct banks.
//
//   W: rows x cols (row_stride bytes apart)   x: n x cols f32   y: n x rows f32
#include <cuda_fp16.h>

#include <type_traits>

#include "gemm_quant.cuh"
#include "sub32_dispatch.cuh"

namespace boltrt::kernels {
namespace {

constexpr int kTileM = 128;  // weight rows per block
constexpr int kTileN = 64;   // tokens per block
constexpr int kTileK = 64;   // k per shared-memory slice (two 32-element sub-blocks)
constexpr int kPad = 8;      // halves of padding per shared row
constexpr int kLd = kTileK + kPad;
constexpr int kThreads = 256;
constexpr int kWarpM = 32, kWarpN = 32;  // per-warp tile: 2 x 16 rows, 4 x 8 tokens
static_assert(kTileM * (kTileK / 32) == kThreads, "one sub-block per thread per slice");
static_assert((kTileM / kWarpM) * (kTileN / kWarpN) * 32 == kThreads, "8 warps cover the tile");

__device__ inline uint32_t pack_half2(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);  // a in the low half (lower address / column)
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ inline uint32_t load_u32(const __half* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// D = A B + D for one m16n8k16 tile: A 16x16 row-major f16 (4 regs), B 16x8 column-major f16
// (2 regs), D 16x8 f32 (4 regs). Fragment layout (PTX ISA, "mma.m16n8k16"): with g = lane / 4,
// c = lane % 4, A regs hold (row g, k 2c..2c+1), (row g+8, k 2c..), (row g, k 2c+8..),
// (row g+8, k 2c+8..); B regs hold (k 2c..2c+1, col g), (k 2c+8.., col g); D holds (row g,
// cols 2c, 2c+1) and (row g+8, cols 2c, 2c+1).
__device__ inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(BOLTRT_CUDA_EMULATOR)
  ::boltrt::emu::mma_m16n8k16(d, a, b0, b1, /*bf16=*/false);  // the same instruction, emulated
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

BOLTRT_DECLARE_LAUNCH_BOUNDS(gemm_quant_kernel, kThreads);
template <typename Block>
__global__ void __launch_bounds__(kThreads)
    gemm_quant_kernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols, size_t row_stride,
                      const float* __restrict__ x, int64_t n, float* __restrict__ y) {
  BOLTRT_SHARED_ALIGNED(16, __half, s_w, [kTileM][kLd]);
  BOLTRT_SHARED_ALIGNED(16, __half, s_x, [kTileN][kLd]);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int warp_m = (warp % (kTileM / kWarpM)) * kWarpM;
  const int warp_n = (warp / (kTileM / kWarpM)) * kWarpN;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kTileM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kTileN;
  const int64_t n_sub = cols / 32;

  // this thread's weight sub-block within each slice
  const int load_row = tid % kTileM, load_sub = tid / kTileM;
  const int64_t w_row = m0 + load_row;
  const uint8_t* w_ptr = w + (w_row < rows ? w_row : 0) * row_stride;

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  for (int64_t k0 = 0; k0 < cols; k0 += kTileK) {
    // --- weights: one 32-element sub-block per thread, as f16 (zeros past the matrix)
    {
      const int64_t s = k0 / 32 + load_sub;
      uint32_t packed[16];
      if (w_row < rows && s < n_sub) {
        float v[32];
        Sub32<Block>::dequantize(w_ptr, s, v);
#pragma unroll
        for (int e = 0; e < 16; ++e) packed[e] = pack_half2(v[2 * e], v[2 * e + 1]);
      } else {
#pragma unroll
        for (int e = 0; e < 16; ++e) packed[e] = 0u;
      }
      uint4* dst = reinterpret_cast<uint4*>(&s_w[load_row][load_sub * 32]);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        dst[q] = make_uint4(packed[4 * q], packed[4 * q + 1], packed[4 * q + 2], packed[4 * q + 3]);
      }
    }
    // --- activations: 64 tokens x 64 k as float4 groups (16 per token), as f16
    for (int i = tid; i < kTileN * (kTileK / 4); i += kThreads) {
      const int tok = i / (kTileK / 4), k4 = i % (kTileK / 4);
      const int64_t t = n0 + tok, k = k0 + 4 * k4;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (t < n && k < cols) v = *reinterpret_cast<const float4*>(x + t * cols + k);
      uint2* dst = reinterpret_cast<uint2*>(&s_x[tok][4 * k4]);
      *dst = make_uint2(pack_half2(v.x, v.y), pack_half2(v.z, v.w));
    }
    __syncthreads();

#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      uint32_t a[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = warp_m + 16 * i + g;
        a[i][0] = load_u32(&s_w[r][kk + 2 * c]);
        a[i][1] = load_u32(&s_w[r + 8][kk + 2 * c]);
        a[i][2] = load_u32(&s_w[r][kk + 2 * c + 8]);
        a[i][3] = load_u32(&s_w[r + 8][kk + 2 * c + 8]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        // Token tiles wholly past the batch hold zeros and are never stored: skip their mma.
        // The condition is the same on every lane of the warp (mma.sync stays converged). A
        // 12-token DFlash verify batch runs 16 of the block's 64 mma per 16-wide k step, a
        // 40-token prompt 40.
        if (n0 + warp_n + 8 * j >= n) break;
        const int tok = warp_n + 8 * j + g;
        const uint32_t b0 = load_u32(&s_x[tok][kk + 2 * c]);
        const uint32_t b1 = load_u32(&s_x[tok][kk + 2 * c + 8]);
#pragma unroll
        for (int i = 0; i < 2; ++i) mma_16816(acc[i][j], a[i], b0, b1);
      }
    }
    __syncthreads();  // the next slice overwrites the tiles
  }

  // D element (row g (+8), col 2c (+1)) of tile (i, j) is y[token][weight row]
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t r = m0 + warp_m + 16 * i + g + (e >= 2 ? 8 : 0);
        const int64_t t = n0 + warp_n + 8 * j + 2 * c + (e & 1);
        if (r < rows && t < n) y[t * rows + r] = acc[i][j][e];
      }
    }
  }
}

}  // namespace

bool gemm_quant_supported(uint32_t ggml_type) {
  return has_sub32_block(ggml_type);
}

cudaError_t launch_gemm_quant(uint32_t ggml_type, const void* w, int64_t rows, int64_t cols,
                              size_t row_stride, const float* x, int64_t n, float* y,
                              cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  if (cols <= 0 || cols % 32 != 0) return cudaErrorInvalidValue;
  const int64_t grid_m = (rows + kTileM - 1) / kTileM, grid_n = (n + kTileN - 1) / kTileN;
  if (grid_m > 0x7fffffff || grid_n > 65535) return cudaErrorInvalidValue;
  return with_sub32_block(ggml_type, [&](auto* tag) {
    using Block = std::remove_pointer_t<decltype(tag)>;
    const dim3 grid(static_cast<unsigned>(grid_m), static_cast<unsigned>(grid_n));
    BOLTRT_LAUNCH(grid, kThreads, 0, stream, gemm_quant_kernel<Block>)
    (static_cast<const uint8_t*>(w), rows, cols, row_stride, x, n, y);
    return cudaGetLastError();
  });
}

}  // namespace boltrt::kernels

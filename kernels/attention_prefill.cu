// Prefill (flash) attention over an F16 or Q8_0 KV cache: many queries per launch, causal and
// sliding-window masks, GQA, online softmax; the scores never leave registers.
//
// Grid (row tile, KV head). The query rows of one KV head are its (token, head) pairs in the
// order r = t * group + (h % group), group = n_head / n_head_kv, so a block's rows are the
// consecutive query heads and tokens that read the same keys. A block of 4 warps stages
// kKeys keys (K and V rows as stored: f16, or Q8_0 blocks dequantized when read, see
// kv_load.cuh) of its KV head in shared memory at a time, over the union of
// the visible ranges of its rows, [first_visible_key(first token), last token]; every staged
// key is then read by all of the block's rows (group x tokens-per-block of reuse instead of the
// decode kernel's one global read per query).
//
// Warp w owns kRowsPerWarp rows. Lane l holds dims (2l + 64i, 2l + 64i + 1), i < head_dim / 64,
// of each row's query and value accumulator (the decode kernel's layout), so a key row in
// shared memory is read as one run of half2 per warp. Per tile and row: the tile's scores (dot
// + warp_sum; every lane ends with every score), masked keys dropped, one rescale of the
// accumulator to the tile's maximum (SoftmaxState::rescale, checked on the CPU by
// test_cuda_math), then the weighted values.
//
// SIMT, not mma: head sizes of 256 and 512 need large K/V fragments per warp, and prefill time
// is dominated by the projections (the GEMM); this keeps K/V traffic per block at one read.
#include <cuda_fp16.h>

#include <type_traits>

#include "backend/cuda/gemma4_math.h"
#include "kv_load.cuh"
#include "ops.cuh"
#include "reduce.cuh"

namespace boltrt::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kKeys = 16;  // keys per shared-memory tile

BOLTRT_DECLARE_LAUNCH_BOUNDS(attention_prefill_kernel, kWarps * 32);
template <int kPairs, int kRowsPerWarp, KvFormat kFormat>  // head_dim / 64
__global__ void __launch_bounds__(kWarps * 32)
    attention_prefill_kernel(const float* __restrict__ q, const uint8_t* __restrict__ k_cache,
                             const uint8_t* __restrict__ v_cache, int64_t n_tokens, int64_t pos0,
                             int64_t cells, int64_t n_head, int64_t n_head_kv, int64_t window,
                             float scale, float cap, float* __restrict__ out) {
  constexpr int kHeadDim = kPairs * 64;
  constexpr int kRows = kWarps * kRowsPerWarp;
  // a key row's bytes, copied in uint4 units (F16: 16-byte aligned rows) or uint16 units (Q8_0:
  // 34-byte blocks, rows only 2-byte aligned)
  constexpr int kHeadBytes = kv_head_bytes<kFormat>(kHeadDim);
  using Unit = std::conditional_t<kFormat == KvFormat::kF16, uint4, uint16_t>;
  constexpr int kVecPerRow = kHeadBytes / static_cast<int>(sizeof(Unit));
  static_assert(kHeadBytes % sizeof(Unit) == 0);
  BOLTRT_SHARED_ALIGNED(16, uint8_t, s_k, [kKeys][kHeadBytes]);
  BOLTRT_SHARED_ALIGNED(16, uint8_t, s_v, [kKeys][kHeadBytes]);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t group = n_head / n_head_kv;
  const int64_t kv = blockIdx.y;
  const int64_t n_rows = n_tokens * group;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const cuda::KeyRange keys = cuda::prefill_block_keys(r0, kRows, n_rows, group, pos0, window);
  const int64_t kb = keys.first, ke = keys.last;  // inclusive
  const int64_t row = n_head_kv * kHeadDim;       // values per cell

  // this warp's rows: query, value accumulator, softmax state, visible range
  float2 qv[kRowsPerWarp][kPairs], acc[kRowsPerWarp][kPairs];
  cuda::SoftmaxState state[kRowsPerWarp];
  int64_t row_first[kRowsPerWarp], row_pos[kRowsPerWarp];
  bool row_valid[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t r = r0 + warp * kRowsPerWarp + i;
    row_valid[i] = r < n_rows;
    const int64_t t = row_valid[i] ? r / group : 0;
    const int64_t h = kv * group + (row_valid[i] ? r % group : 0);
    row_pos[i] = pos0 + t;
    row_first[i] = cuda::first_visible_key(row_pos[i], window);
    const float* qh = q + (t * n_head + h) * kHeadDim;
#pragma unroll
    for (int p = 0; p < kPairs; ++p) {
      qv[i][p] = row_valid[i] ? make_float2(qh[2 * lane + 64 * p], qh[2 * lane + 64 * p + 1])
                              : make_float2(0.0f, 0.0f);
      acc[i][p] = make_float2(0.0f, 0.0f);
    }
  }

  for (int64_t j0 = kb; j0 <= ke; j0 += kKeys) {
    __syncthreads();  // every warp is done with the previous tile
    for (int i = threadIdx.x; i < kKeys * kVecPerRow; i += kWarps * 32) {
      const int key = i / kVecPerRow, vec = i % kVecPerRow;
      const int64_t j = j0 + key;
      Unit kx{}, vx{};  // zeros past the range: masked keys, and Q8_0 zeros read as 0
      if (j <= ke) {
        const int64_t base = kv_head_offset<kFormat>(j % cells, row, kv, kHeadDim);
        kx = reinterpret_cast<const Unit*>(k_cache + base)[vec];
        vx = reinterpret_cast<const Unit*>(v_cache + base)[vec];
      }
      reinterpret_cast<Unit*>(&s_k[key][0])[vec] = kx;
      reinterpret_cast<Unit*>(&s_v[key][0])[vec] = vx;
    }
    __syncthreads();

#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      if (!row_valid[i]) continue;  // warp-uniform
      float s[kKeys];
      float tile_max = -INFINITY;
#pragma unroll
      for (int key = 0; key < kKeys; ++key) {
        float dot = 0.0f;
#pragma unroll
        for (int p = 0; p < kPairs; ++p) {
          const float2 kf = kv_pair<kFormat>(&s_k[key][0], 2 * lane + 64 * p);
          dot += qv[i][p].x * kf.x + qv[i][p].y * kf.y;
        }
        dot = warp_sum(dot) * scale;
        if (cap > 0.0f) dot = cuda::softcap(dot, cap);
        const int64_t j = j0 + key;
        s[key] = j >= row_first[i] && j <= row_pos[i] ? dot : -INFINITY;
        tile_max = fmaxf(tile_max, s[key]);
      }
      if (tile_max == -INFINITY) continue;  // no visible key in this tile for this row
      const float correction = state[i].rescale(tile_max);
#pragma unroll
      for (int p = 0; p < kPairs; ++p) {
        acc[i][p].x *= correction;
        acc[i][p].y *= correction;
      }
#pragma unroll
      for (int key = 0; key < kKeys; ++key) {
        if (s[key] == -INFINITY) continue;  // masked (warp-uniform)
        const float w = expf(s[key] - state[i].m);
        state[i].l += w;
#pragma unroll
        for (int p = 0; p < kPairs; ++p) {
          const float2 vf = kv_pair<kFormat>(&s_v[key][0], 2 * lane + 64 * p);
          acc[i][p].x += w * vf.x;
          acc[i][p].y += w * vf.y;
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    if (!row_valid[i]) continue;
    const int64_t r = r0 + warp * kRowsPerWarp + i;
    const int64_t t = r / group, h = kv * group + r % group;
    float* dst = out + (t * n_head + h) * kHeadDim;
    const float inv_l = 1.0f / state[i].l;  // l >= 1: every row sees its own position
#pragma unroll
    for (int p = 0; p < kPairs; ++p) {
      dst[2 * lane + 64 * p] = acc[i][p].x * inv_l;
      dst[2 * lane + 64 * p + 1] = acc[i][p].y * inv_l;
    }
  }
}

template <int kPairs>
cudaError_t launch_for_pairs(const float* q, const void* k_cache, const void* v_cache,
                             int64_t n_tokens, int64_t pos0, int64_t cells, int64_t n_head,
                             int64_t n_head_kv, int64_t window, float scale, float cap, float* out,
                             cudaStream_t stream, KvFormat format) {
  // registers: 2 x kRowsPerWarp x kPairs float2 (query, accumulator) per lane
  constexpr int kRowsPerWarp = kPairs <= 4 ? 4 : 2;
  constexpr int kRows = kWarps * kRowsPerWarp;
  const int64_t n_rows = n_tokens * (n_head / n_head_kv);
  const int64_t tiles = (n_rows + kRows - 1) / kRows;
  if (tiles > 0x7fffffff || n_head_kv > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(n_head_kv));
  const auto* kc = static_cast<const uint8_t*>(k_cache);
  const auto* vc = static_cast<const uint8_t*>(v_cache);
  if (format == KvFormat::kQ8_0) {
    BOLTRT_LAUNCH(grid, kWarps * 32, 0, stream,
                  attention_prefill_kernel<kPairs, kRowsPerWarp, KvFormat::kQ8_0>)
    (q, kc, vc, n_tokens, pos0, cells, n_head, n_head_kv, window, scale, cap, out);
  } else {
    BOLTRT_LAUNCH(grid, kWarps * 32, 0, stream,
                  attention_prefill_kernel<kPairs, kRowsPerWarp, KvFormat::kF16>)
    (q, kc, vc, n_tokens, pos0, cells, n_head, n_head_kv, window, scale, cap, out);
  }
  return cudaGetLastError();
}

}  // namespace

bool attention_prefill_head_dim_supported(int64_t head_dim) {
  switch (head_dim) {  // the cases of launch_attention_prefill below
    case 64:
    case 128:
    case 192:
    case 256:
    case 512:
      return true;
    default:
      return false;
  }
}

cudaError_t launch_attention_prefill(const float* q, const void* k_cache, const void* v_cache,
                                     int64_t n_tokens, int64_t pos0, int64_t cells, int64_t n_head,
                                     int64_t n_head_kv, int64_t head_dim, int64_t window,
                                     float scale, float cap, float* out, cudaStream_t stream,
                                     KvFormat format) {
  if (n_tokens <= 0) return cudaSuccess;
  if (n_head_kv <= 0 || n_head % n_head_kv != 0 || cells <= 0) return cudaErrorInvalidValue;
  switch (head_dim) {
#define BOLTRT_PREFILL_CASE(pairs)                                                                \
  case pairs * 64:                                                                                \
    return launch_for_pairs<pairs>(q, k_cache, v_cache, n_tokens, pos0, cells, n_head, n_head_kv, \
                                   window, scale, cap, out, stream, format);
    // The head sizes the tests run (CudaOps.AttentionPrefillMatchesCpu): Gemma 4's 256 and 512,
    // the tiny models' 64 and 128, and 192 for a pair count that is not a power of two. 320,
    // 384 and 448 were 6 of 16 never-run kernels in the largest compile of the CUDA build
    // (16 kernels x 5 architectures: 271 CPU-s with nvcc on the CI machine).
    BOLTRT_PREFILL_CASE(1)
    BOLTRT_PREFILL_CASE(2)
    BOLTRT_PREFILL_CASE(3)
    BOLTRT_PREFILL_CASE(4)
    BOLTRT_PREFILL_CASE(8)
#undef BOLTRT_PREFILL_CASE
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace boltrt::kernels

// Decode attention over an F16 or Q8_0 KV cache (split-KV with a merge step).
//
// Grid (head, token, split). A block of 4 warps takes one query head of one token and one
// contiguous slice of its visible keys; warp w takes keys w, w+4, ... of the slice. Lane l holds
// the dims (2l + 64i, 2l + 64i + 1), i < head_dim/64, of the query and of its value
// accumulator, so each key row is read as one coalesced run of half2 per warp. Scores use the
// online softmax of gemma4_math.h (SoftmaxState). The four warps' states are merged in shared
// memory; with several splits the block writes its unnormalised state [m, l, acc[head_dim]] to
// `partials` and attention_merge_kernel combines the splits.
#include <cuda_fp16.h>

#include "backend/cuda/gemma4_math.h"
#include "kv_load.cuh"
#include "ops.cuh"
#include "reduce.cuh"

namespace boltrt::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxSplit = 64;

BOLTRT_DECLARE_LAUNCH_BOUNDS(attention_decode_kernel, kWarps * 32);
template <int kPairs, KvFormat kFormat>  // head_dim / 64
__global__ void __launch_bounds__(kWarps * 32)
    attention_decode_kernel(const float* __restrict__ q, const uint8_t* __restrict__ k_cache,
                            const uint8_t* __restrict__ v_cache, int64_t pos0_arg,
                            const int64_t* __restrict__ pos0_dev, int64_t cells, int64_t n_head,
                            int64_t n_head_kv, int64_t window, float scale, float cap, int n_split,
                            float* partials, float* out) {
  constexpr int kHeadDim = kPairs * 64;
  BOLTRT_SHARED(float, s_m, [kWarps]);
  BOLTRT_SHARED(float, s_l, [kWarps]);
  BOLTRT_SHARED(float, s_acc, [kWarps][kHeadDim]);

  const int64_t pos0 = pos0_dev ? *pos0_dev : pos0_arg;
  const int64_t h = blockIdx.x, t = blockIdx.y;
  const int split = static_cast<int>(blockIdx.z);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t pos = pos0 + t;
  const int64_t first = cuda::first_visible_key(pos, window);
  const int64_t n_keys = pos - first + 1;
  const int64_t per_split = (n_keys + n_split - 1) / n_split;
  const int64_t kb = first + split * per_split;
  const int64_t ke = kb + per_split < pos + 1 ? kb + per_split : pos + 1;
  const int64_t g = h / (n_head / n_head_kv);
  const int64_t row = n_head_kv * kHeadDim;

  const float* qh = q + (t * n_head + h) * kHeadDim;
  float2 qv[kPairs], acc[kPairs];
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    qv[i] = make_float2(qh[2 * lane + 64 * i], qh[2 * lane + 64 * i + 1]);
    acc[i] = make_float2(0.0f, 0.0f);
  }
  cuda::SoftmaxState state;
  for (int64_t j = kb + warp; j < ke; j += kWarps) {
    const int64_t cell = j % cells;
    const int64_t head = kv_head_offset<kFormat>(cell, row, g, kHeadDim);
    const uint8_t* kr = k_cache + head;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const float2 kf = kv_pair<kFormat>(kr, 2 * lane + 64 * i);
      s += qv[i].x * kf.x + qv[i].y * kf.y;
    }
    s = warp_sum(s) * scale;
    if (cap > 0.0f) s = cuda::softcap(s, cap);
    float p;
    const float correction = state.add(s, &p);
    const uint8_t* vr = v_cache + head;
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const float2 vf = kv_pair<kFormat>(vr, 2 * lane + 64 * i);
      acc[i].x = acc[i].x * correction + p * vf.x;
      acc[i].y = acc[i].y * correction + p * vf.y;
    }
  }
  if (lane == 0) {
    s_m[warp] = state.m;
    s_l[warp] = state.l;
  }
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    s_acc[warp][2 * lane + 64 * i] = acc[i].x;
    s_acc[warp][2 * lane + 64 * i + 1] = acc[i].y;
  }
  __syncthreads();

  // merge the warps: factor_w = exp(m_w - M) (0 for a warp that saw no key)
  cuda::SoftmaxState merged;
  float factor[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    cuda::SoftmaxState other;
    other.m = s_m[w];
    other.l = s_l[w];
    float self_factor;
    merged.merge(other, &self_factor, &factor[w]);
    for (int u = 0; u < w; ++u) factor[u] *= self_factor;
  }
  if (n_split == 1) {
    float* dst = out + (t * n_head + h) * kHeadDim;
    const float inv_l = 1.0f / merged.l;
    for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x) {
      float v = 0.0f;
      for (int w = 0; w < kWarps; ++w) v += s_acc[w][d] * factor[w];
      dst[d] = v * inv_l;
    }
  } else {
    float* dst = partials + ((t * n_head + h) * n_split + split) * (kHeadDim + 2);
    if (threadIdx.x == 0) {
      dst[0] = merged.m;
      dst[1] = merged.l;
    }
    for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x) {
      float v = 0.0f;
      for (int w = 0; w < kWarps; ++w) v += s_acc[w][d] * factor[w];
      dst[2 + d] = v;
    }
  }
}

// out[t][h] = sum_s acc_s * exp(m_s - M) / sum_s l_s * exp(m_s - M)
__global__ void attention_merge_kernel(const float* __restrict__ partials, int64_t n_head,
                                       int64_t head_dim, int n_split, float* out) {
  const int64_t t = blockIdx.y, h = blockIdx.x;
  const float* base = partials + (t * n_head + h) * n_split * (head_dim + 2);
  cuda::SoftmaxState merged;
  float factor[kMaxSplit];
  for (int s = 0; s < n_split; ++s) {
    cuda::SoftmaxState other;
    other.m = base[s * (head_dim + 2)];
    other.l = base[s * (head_dim + 2) + 1];
    float self_factor;
    merged.merge(other, &self_factor, &factor[s]);
    for (int u = 0; u < s; ++u) factor[u] *= self_factor;
  }
  const float inv_l = 1.0f / merged.l;
  float* dst = out + (t * n_head + h) * head_dim;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float v = 0.0f;
    for (int s = 0; s < n_split; ++s) v += base[s * (head_dim + 2) + 2 + d] * factor[s];
    dst[d] = v * inv_l;
  }
}

template <int kPairs>
void launch_for_pairs(const float* q, const void* k_cache, const void* v_cache, int64_t n_tokens,
                      int64_t pos0, int64_t cells, int64_t n_head, int64_t n_head_kv,
                      int64_t window, float scale, float cap, int n_split, float* partials,
                      float* out, cudaStream_t stream, const int64_t* device_pos0,
                      KvFormat format) {
  const dim3 grid(static_cast<unsigned>(n_head), static_cast<unsigned>(n_tokens),
                  static_cast<unsigned>(n_split));
  const auto* kc = static_cast<const uint8_t*>(k_cache);
  const auto* vc = static_cast<const uint8_t*>(v_cache);
  if (format == KvFormat::kQ8_0) {
    BOLTRT_LAUNCH(grid, kWarps * 32, 0, stream, attention_decode_kernel<kPairs, KvFormat::kQ8_0>)
    (q, kc, vc, pos0, device_pos0, cells, n_head, n_head_kv, window, scale, cap, n_split, partials,
     out);
  } else {
    BOLTRT_LAUNCH(grid, kWarps * 32, 0, stream, attention_decode_kernel<kPairs, KvFormat::kF16>)
    (q, kc, vc, pos0, device_pos0, cells, n_head, n_head_kv, window, scale, cap, n_split, partials,
     out);
  }
}

}  // namespace

int attention_split_count(int64_t max_keys, int64_t n_tokens, int64_t n_head) {
  // Enough blocks to fill a large GPU (~512), but at least 64 keys per split.
  const int64_t by_keys = (max_keys + 63) / 64;
  const int64_t by_blocks = 512 / (n_tokens * n_head > 0 ? n_tokens * n_head : 1);
  int64_t n = by_keys < by_blocks ? by_keys : by_blocks;
  if (n > kMaxSplit) n = kMaxSplit;
  return n < 1 ? 1 : static_cast<int>(n);
}

size_t attention_partials_floats(int64_t n_tokens, int64_t n_head, int64_t head_dim, int n_split) {
  return n_split <= 1 ? 0 : static_cast<size_t>(n_tokens * n_head * n_split * (head_dim + 2));
}

cudaError_t launch_attention_decode(const float* q, const void* k_cache, const void* v_cache,
                                    int64_t n_tokens, int64_t pos0, int64_t cells, int64_t n_head,
                                    int64_t n_head_kv, int64_t head_dim, int64_t window,
                                    float scale, float cap, int n_split, float* partials,
                                    float* out, cudaStream_t stream, const int64_t* device_pos0,
                                    KvFormat format) {
  if (n_tokens <= 0) return cudaSuccess;
  if (n_split < 1 || n_split > kMaxSplit || n_head_kv <= 0 || n_head % n_head_kv != 0 ||
      (n_split > 1 && partials == nullptr)) {
    return cudaErrorInvalidValue;
  }
  switch (head_dim) {
#define BOLTRT_ATTENTION_CASE(pairs)                                                               \
  case pairs * 64:                                                                                 \
    launch_for_pairs<pairs>(q, k_cache, v_cache, n_tokens, pos0, cells, n_head, n_head_kv, window, \
                            scale, cap, n_split, partials, out, stream, device_pos0, format);      \
    break;
    BOLTRT_ATTENTION_CASE(1)
    BOLTRT_ATTENTION_CASE(2)
    BOLTRT_ATTENTION_CASE(3)
    BOLTRT_ATTENTION_CASE(4)
    BOLTRT_ATTENTION_CASE(5)
    BOLTRT_ATTENTION_CASE(6)
    BOLTRT_ATTENTION_CASE(7)
    BOLTRT_ATTENTION_CASE(8)
#undef BOLTRT_ATTENTION_CASE
    default:
      return cudaErrorInvalidValue;
  }
  if (cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  if (n_split > 1) {
    const dim3 grid(static_cast<unsigned>(n_head), static_cast<unsigned>(n_tokens));
    BOLTRT_LAUNCH(grid, 128, 0, stream, attention_merge_kernel)
    (partials, n_head, head_dim, n_split, out);
  }
  return cudaGetLastError();
}

}  // namespace boltrt::kernels

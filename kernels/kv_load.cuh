// Reading the KV cache in the attention kernels (attention_decode.cu, attention_prefill.cu) for
// both cache formats: F16 rows, or Q8_0 rows of 34-byte blocks (32 values each; --kv-type q8_0,
// block math in backend/cuda/gemma4_math.h, checked on the CPU by test_cuda_math). A cache is
// [cells][n_head_kv * head_dim] values; head g of a cell is a contiguous run of
// kv_head_bytes(head_dim) bytes (head_dim a multiple of 64, so Q8_0 blocks never straddle heads).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/gemma4_math.h"
#include "ops.cuh"

namespace boltrt::kernels {

template <KvFormat kFormat>
__host__ __device__ constexpr int kv_head_bytes(int head_dim) {
  return kFormat == KvFormat::kQ8_0 ? head_dim / cuda::kQ8_0Values * cuda::kQ8_0Bytes
                                    : head_dim * 2;
}

// Byte offset of KV head g in cell `cell` of a cache whose rows hold `row` values.
template <KvFormat kFormat>
__device__ inline int64_t kv_head_offset(int64_t cell, int64_t row, int64_t g, int head_dim) {
  if constexpr (kFormat == KvFormat::kQ8_0) {
    return cell * cuda::q8_0_row_bytes(row) + cuda::q8_0_row_bytes(g * head_dim);
  } else {
    return (cell * row + g * head_dim) * 2;
  }
}

// Values dim and dim + 1 (dim even) of one head's row starting at `head`.
template <KvFormat kFormat>
__device__ inline float2 kv_pair(const uint8_t* head, int dim) {
  if constexpr (kFormat == KvFormat::kQ8_0) {
    // cuda::q8_0_value for both values with one scale load: d * q, d the exact f32 of the f16
    // scale. Blocks start at even bytes and dim is even, so the scale and the pair of int8 are
    // aligned 2-byte loads.
    const uint8_t* block = head + (dim >> 5) * cuda::kQ8_0Bytes;
    const float d = __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(block)));
    const char2 q = *reinterpret_cast<const char2*>(block + 2 + (dim & 31));
    return make_float2(d * static_cast<float>(q.x), d * static_cast<float>(q.y));
  } else {
    return __half22float2(reinterpret_cast<const __half2*>(head)[dim >> 1]);
  }
}

}  // namespace boltrt::kernels

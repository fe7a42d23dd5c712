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
    const uint8_t* block = head + (dim >> 5) * cuda::kQ8_0Bytes;
    return make_float2(cuda::q8_0_value(block, dim & 31), cuda::q8_0_value(block, (dim & 31) + 1));
  } else {
    return __half22float2(reinterpret_cast<const __half2*>(head)[dim >> 1]);
  }
}

}  // namespace boltrt::kernels

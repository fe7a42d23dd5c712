// AVX-512 kernels of cpu::attention (attention_avx512.cpp), called by ops.cpp when the CPU and
// simd_level() allow. Each has the arithmetic of the AVX2 kernel it replaces, bit for bit, so
// results do not depend on which one ran. head_dim must be a multiple of 16.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/ops.h"

namespace boltrt::cpu::detail {

// out[j] = q . k_j for the keys k_j = k + j * stride, j < count (unscaled).
void attention_dots_avx512(const float* q, const float* k, int64_t stride, int64_t count,
                           int64_t head_dim, float* out);

// acc[d] += sum_j e[j] * v_j[d], j in order, v_j = v + j * stride.
void attention_weighted_sum_avx512(const float* e, const float* v, int64_t stride, int64_t count,
                                   float* acc, int64_t head_dim);

// The same for two queries over the same keys (each value row read once for both).
void attention_weighted_sum_pair_avx512(const float* e0, const float* e1, const float* v,
                                        int64_t stride, int64_t count, float* acc0, float* acc1,
                                        int64_t head_dim);

// The same kernels over keys / values in a cache format (rows `stride` bytes apart, each a head
// of head_dim values; head_dim a multiple of 32 for the block formats), turned into f32 in
// registers: bit for bit the results of the f32 kernels on the converted rows. e1 / acc1 null:
// one query.
void attention_dots_kv_avx512(KvFormat format, const float* q, const uint8_t* k, size_t stride,
                              int64_t count, int64_t head_dim, float* out);
void attention_weighted_sum_kv_avx512(KvFormat format, const float* e0, const float* e1,
                                      const uint8_t* v, size_t stride, int64_t count, float* acc0,
                                      float* acc1, int64_t head_dim);

}  // namespace boltrt::cpu::detail

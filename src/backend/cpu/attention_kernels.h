// AVX-512 kernels of cpu::attention (attention_avx512.cpp), called by attention.cpp when the CPU
// and simd_level() allow. Each has the arithmetic of the AVX2 kernel it replaces, bit for bit,
// so results do not depend on which one ran. head_dim must be a multiple of 16.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/ops.h"

namespace boltrt::cpu::detail {

// Over `count` key / value rows `stride` bytes apart in a cache format (each starting with the
// head's head_dim values; head_dim a multiple of 32 for the block formats), turned into f32 in
// registers: bit for bit the results of the f32 kernels on the converted rows. n jobs (queries)
// over the same rows at once, each row read once for all of them (n >= 1, any n). prefetch:
// bring the `count` rows after these (the next block) into L2 meanwhile.

// out[c][j] = q[c] . k_j (unscaled), j < count, c < n.
void attention_dots_avx512(KvFormat format, const float* const* q, int n, const uint8_t* k,
                           size_t stride, int64_t count, int64_t head_dim, float* const* out,
                           bool prefetch);

// acc[c][d] += sum_j e[c][j] * v_j[d], j in order, c < n.
void attention_weighted_sum_avx512(KvFormat format, const float* const* e, int n, const uint8_t* v,
                                   size_t stride, int64_t count, float* const* acc,
                                   int64_t head_dim, bool prefetch);

}  // namespace boltrt::cpu::detail

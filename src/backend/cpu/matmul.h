// CPU matrix multiplication on quantized weights: the op where decode spends its time.
//
//   y[b, r] = sum_k W[r, k] * x[b, k]     W: rows x cols of `type`, row-major, row_stride bytes
//                                         x: batch x cols f32, y: batch x rows f32
//
// Activations are quantized once per call to the 8-bit block type ggml pairs with W's type
// (Q8_0 for legacy blocks, Q8_K for k-quants) exactly as llama.cpp's x86 path does, so results
// match llama.cpp's; float weights (F32/F16/BF16) multiply f32 activations directly.
// The SIMD level (scalar / AVX2 / AVX-512) is chosen once at run time; BOLTRT_SIMD=scalar|avx2|
// avx512 overrides it (tests use this to compare levels).
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/ggml_type.h"

namespace boltrt {

class ThreadPool;

struct WeightView {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_stride = 0;  // bytes between rows (row_size(type, cols) when packed)
};

enum class SimdLevel { Scalar, Avx2, Avx512 };
SimdLevel simd_level();                // the level in use
void set_simd_level(SimdLevel level);  // for tests and benchmarks; clamps to what the CPU has
const char* simd_level_name(SimdLevel level);

// y = W x for `batch` activation rows. pool may be null (single thread).
void matmul(const WeightView& w, const float* x, int64_t batch, float* y, ThreadPool* pool);

// Same, for a subset of weight rows [row_begin, row_end) (MoE experts, vocab slices):
// y[b * (row_end - row_begin) + (r - row_begin)].
void matmul_rows(const WeightView& w, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t batch, float* y, ThreadPool* pool);

}  // namespace boltrt

// Decode GEMV over quantized weights (batch 1..8): see gemv_quant.cu.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "portable.cuh"

namespace boltrt::kernels {

inline constexpr int kGemvMaxBatch = 8;

// True for the ggml type ids the kernel handles (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, F32, F16, BF16).
bool gemv_quant_supported(uint32_t ggml_type);

// y[b * rows + r] = sum_k W[r, k] * x[b * cols + k]; all pointers in device memory.
cudaError_t launch_gemv_quant(uint32_t ggml_type, const void* w, int64_t rows, int64_t cols,
                              size_t row_stride, const float* x, int batch, float* y,
                              cudaStream_t stream);

// gemv_experts.cu: y[p * rows + r] = scale_e * sum_k W_e[r, k] * x[(p / x_pairs_per_row) * cols
// + k] for p < pairs (<= 65535), e = selected[p] (device int32), W_e at w + e * expert_stride;
// scale_e = expert_scale[e] (device f32 [n_expert]) or 1 when expert_scale is null. cols a
// multiple of 32. Same types as launch_gemv_quant. order (device int32 [pairs], a permutation,
// e.g. from launch_moe_group) or null: the sequence in which the grid visits the pairs (the
// same expert's pairs back to back share its weights in L2); it does not change the result.
cudaError_t launch_gemv_experts(uint32_t ggml_type, const void* w, int64_t rows, int64_t cols,
                                size_t row_stride, size_t expert_stride, const int32_t* selected,
                                int64_t pairs, const float* x, int x_pairs_per_row,
                                const float* expert_scale, float* y, cudaStream_t stream,
                                const int32_t* order = nullptr);

}  // namespace boltrt::kernels

// Prefill / verify GEMM over quantized weights on tensor cores: see gemm_quant_mma.cu.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "portable.cuh"

namespace boltrt::kernels {

// Batches above this many activation rows go to the tensor-core GEMM; up to it the decode
// GEMV (gemv_quant.cu) is faster, since it reads each weight once and needs no tile padding.
inline constexpr int kGemmMinBatch = 9;

// True for the ggml type ids the kernel handles (the GEMV's: Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, F32,
// F16, BF16).
bool gemm_quant_supported(uint32_t ggml_type);

// y[b * rows + r] = sum_k W[r, k] * x[b * cols + k] for b < n (any n >= 1), all pointers in
// device memory; x 16-byte aligned, cols a multiple of 32. Weights and activations are rounded
// to f16 and multiplied on tensor cores with fp32 accumulation.
cudaError_t launch_gemm_quant(uint32_t ggml_type, const void* w, int64_t rows, int64_t cols,
                              size_t row_stride, const float* x, int64_t n, float* y,
                              cudaStream_t stream);

}  // namespace boltrt::kernels

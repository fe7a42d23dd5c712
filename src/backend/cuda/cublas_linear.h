// y[n][rows] = x[n][cols] W^T for F16 and BF16 weight matrices through cuBLAS (cublasGemmEx,
// fp32 accumulation, tensor cores): the prefill/verify batches of models that keep matrices in
// F16/BF16 (and of the matrices the runtime converts to F16). The f32 activations are rounded to
// the weights' type first (cublasGemmEx takes A and B of one type), like the quantized GEMM's
// f16 activations. Plain C++ header (no CUDA types beyond cudaStream_t).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "quant/ggml_type.h"

namespace boltrt::cuda {

class CublasLinear {
 public:
  CublasLinear();  // throws boltrt::Error when cuBLAS cannot start
  ~CublasLinear();
  CublasLinear(const CublasLinear&) = delete;
  CublasLinear& operator=(const CublasLinear&) = delete;

  static bool supports(GgmlType type) { return type == GgmlType::F16 || type == GgmlType::BF16; }
  // Bytes of the activation scratch run() needs for n rows of `cols`.
  static size_t scratch_bytes(int64_t n, int64_t cols) { return static_cast<size_t>(n * cols) * 2; }
  // W: rows x cols of `type` (F16 or BF16), row_stride bytes apart (an even number of
  // elements' worth); x, y, scratch in device memory; queued on `stream`. Throws boltrt::Error
  // naming the cuBLAS status.
  void run(GgmlType type, const void* w, int64_t rows, int64_t cols, size_t row_stride,
           const float* x, int64_t n, float* y, void* scratch, cudaStream_t stream);

 private:
  void* handle_ = nullptr;  // cublasHandle_t
};

}  // namespace boltrt::cuda

#include "backend/cuda/cublas_linear.h"

#include <cublas_v2.h>

#include "ops.cuh"
#include "util/error.h"

namespace boltrt::cuda {

namespace {
cublasHandle_t as_handle(void* h) {
  return static_cast<cublasHandle_t>(h);
}
}  // namespace

CublasLinear::CublasLinear() {
  cublasHandle_t h = nullptr;
  if (cublasStatus_t st = cublasCreate(&h); st != CUBLAS_STATUS_SUCCESS) {
    fail("cuBLAS: cublasCreate failed: {}", cublasGetStatusString(st));
  }
  handle_ = h;
}

CublasLinear::~CublasLinear() {
  if (handle_) cublasDestroy(as_handle(handle_));
}

void CublasLinear::run(GgmlType type, const void* w, int64_t rows, int64_t cols, size_t row_stride,
                       const float* x, int64_t n, float* y, void* scratch, cudaStream_t stream) {
  if (!supports(type)) fail("cuBLAS linear: type {} is not F16 or BF16", type_traits(type).name);
  if (rows <= 0 || n <= 0) return;
  const bool bf16 = type == GgmlType::BF16;
  auto* xh = static_cast<uint16_t*>(scratch);
  if (cudaError_t e = kernels::launch_convert_activations(x, n * cols, bf16, xh, stream);
      e != cudaSuccess) {
    fail("CUDA activation conversion: {}", cudaGetErrorString(e));
  }
  cublasHandle_t h = as_handle(handle_);
  if (cublasStatus_t st = cublasSetStream(h, stream); st != CUBLAS_STATUS_SUCCESS) {
    fail("cuBLAS: cublasSetStream failed: {}", cublasGetStatusString(st));
  }
  // Column-major view: W (row-major rows x cols) is a cols x rows matrix with ld = row_stride/2,
  // x a cols x n matrix (ld cols), y a rows x n matrix (ld rows): y = W^T x.
  const cudaDataType_t ab = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st =
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                   static_cast<int>(cols), &alpha, w, ab, static_cast<int>(row_stride / 2), xh, ab,
                   static_cast<int>(cols), &beta, y, CUDA_R_32F, static_cast<int>(rows),
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    fail("cuBLAS: cublasGemmEx ({} x {} x {}) failed: {}", rows, n, cols,
         cublasGetStatusString(st));
  }
}

}  // namespace boltrt::cuda

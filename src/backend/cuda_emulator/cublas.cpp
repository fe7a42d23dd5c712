// cuBLAS GemmEx for the CPU emulator, as boltrt calls it (cublas_linear.cpp): column-major
// C = alpha op(A) op(B) + beta C with A, B in f16 or bf16 and C in f32, compute 32F. The
// reference decodes every input exactly, multiplies exactly and sums in double, then rounds
// once to f32 (cuBLAS's own order and algorithm are unspecified, so tests keep K-proportional
// tolerances). Parameter checks and status codes follow cublas_api.h; the work is queued on the
// handle's stream like any other device work, and C is not read when beta = 0.
#include <cublas_v2.h>

#include <vector>

#include "backend/cuda_emulator/emu_internal.h"
#include "quant/fp16.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace {

float decode(const void* base, size_t index, cudaDataType_t type) {
  const uint16_t bits = static_cast<const uint16_t*>(base)[index];
  return type == CUDA_R_16BF ? boltrt::bf16_to_fp32(bits) : boltrt::fp16_to_fp32(bits);
}

bool on_device(const void* p, size_t bytes) {
  boltrt::emu::Allocation a;
  return boltrt::emu::find_allocation(p, bytes, &a) && a.kind == boltrt::emu::MemKind::kDevice;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C,
                            cudaDataType_t Ctype, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo) {
  (void)algo;
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || !alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) ||
      (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const int rows_a = transa == CUBLAS_OP_N ? m : k, rows_b = transb == CUBLAS_OP_N ? k : n;
  if (lda < std::max(1, rows_a) || ldb < std::max(1, rows_b) || ldc < std::max(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const bool f16 = Atype == CUDA_R_16F && Btype == CUDA_R_16F;
  const bool bf16 = Atype == CUDA_R_16BF && Btype == CUDA_R_16BF;
  if ((!f16 && !bf16) || Ctype != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  // The matrices as stored: A has (transa == N ? k : m) columns of lda elements, and so on.
  const size_t cols_a = transa == CUBLAS_OP_N ? k : m, cols_b = transb == CUBLAS_OP_N ? n : k;
  const size_t a_elems = (cols_a - 1) * lda + rows_a, b_elems = (cols_b - 1) * ldb + rows_b;
  const size_t c_elems = static_cast<size_t>(n - 1) * ldc + m;
  if ((k > 0 && (!on_device(A, a_elems * 2) || !on_device(B, b_elems * 2))) ||
      !on_device(C, c_elems * 4)) {
    return CUBLAS_STATUS_INVALID_VALUE;  // cuBLAS would fault; the call's arguments are wrong
  }
  const float a_scale = *static_cast<const float*>(alpha);  // host pointer mode
  const float b_scale = *static_cast<const float*>(beta);
  auto work = [=] {
    auto* c = static_cast<float*>(C);
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        double sum = 0.0;
        for (int p = 0; p < k; ++p) {
          const size_t ai = transa == CUBLAS_OP_N ? static_cast<size_t>(p) * lda + i
                                                  : static_cast<size_t>(i) * lda + p;
          const size_t bi = transb == CUBLAS_OP_N ? static_cast<size_t>(j) * ldb + p
                                                  : static_cast<size_t>(p) * ldb + j;
          sum += static_cast<double>(decode(A, ai, Atype)) * decode(B, bi, Btype);
        }
        float& out = c[static_cast<size_t>(j) * ldc + i];
        const double prior = b_scale == 0.0f ? 0.0 : static_cast<double>(b_scale) * out;
        out = static_cast<float>(a_scale * sum + prior);
      }
    }
  };
  if (boltrt::emu::enqueue(handle->stream, work) != cudaSuccess) {
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "an error was detected when checking the current licensing";
  }
  return "unknown cuBLAS status";
}

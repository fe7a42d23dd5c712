// AVX2 + FMA + F16C matmul kernels (see matmul_x86_kernels.h).
#define BOLTRT_X86_VNNI 0
#include "backend/cpu/matmul_x86_kernels.h"

namespace boltrt::cpu {
GemmFn avx2_gemm(GgmlType type) {
  return x86_gemm(type);
}
}  // namespace boltrt::cpu

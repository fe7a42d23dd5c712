// aarch64 matmul kernels with the ARMv8.2 dot-product extension (SDOT); the driver picks them
// only where the kernel reports HWCAP_ASIMDDP (see matmul_neon_kernels.h).
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)
// clang's arm_neon.h declares SDOT only when the whole file is compiled for it
// (-march=...+dotprod), which this file is not: no kernels here, and the driver falls back to plain
// NEON.
#include "backend/cpu/matmul_internal.h"

namespace boltrt::cpu {
GemmFn neon_dotprod_gemm(GgmlType) {
  return nullptr;
}
}  // namespace boltrt::cpu
#else
#define BOLTRT_NEON_DOTPROD 1
#include "backend/cpu/matmul_neon_kernels.h"

namespace boltrt::cpu {
GemmFn neon_dotprod_gemm(GgmlType type) {
  return neon_kernels(type);
}
}  // namespace boltrt::cpu
#endif

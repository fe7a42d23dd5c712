// AVX-512 level: the x86 kernels with AVX512-VNNI dot products (vpdpbusd / vpdpwssd on 256-bit
// vectors through AVX512-VL), see matmul_x86_kernels.h.
#define BOLTRT_X86_VNNI 1
#include "backend/cpu/matmul_x86_kernels.h"

namespace boltrt::cpu {
GemmFn avx512_gemm(GgmlType type) {
  return x86_gemm(type);
}
}  // namespace boltrt::cpu

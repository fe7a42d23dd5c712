// What this x86-64 or aarch64 CPU can run, asked once. One place for the questions, because
// compilers differ in what __builtin_cpu_supports knows (clang 14 rejects "f16c" at compile time).
#pragma once

namespace boltrt {

struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false;
  bool neon = false, dotprod = false;  // aarch64: Advanced SIMD, SDOT/UDOT (HWCAP_ASIMDDP)
  // x86 vendor "AuthenticAMD": kernels whose speed (never their results) differs between AMD's
  // and Intel's prefetchers pick their memory walk by it (gemv_avx512.cpp, Q4_K decode).
  bool amd = false;
};

// All false on other architectures.
const CpuFeatures& cpu_features();

}  // namespace boltrt

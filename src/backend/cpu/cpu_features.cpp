#include "backend/cpu/cpu_features.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1ul << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1ul << 20)
#endif
#endif

namespace boltrt {

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) || defined(_M_X64)
    __builtin_cpu_init();
    f.avx = __builtin_cpu_supports("avx");
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.bmi2 = __builtin_cpu_supports("bmi2");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512dq = __builtin_cpu_supports("avx512dq");
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    // CPUID.0: the vendor string in EBX, EDX, ECX ("Auth" "enti" "cAMD")
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx))
      f.amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) f.f16c = (ecx & (1u << 29)) != 0;  // CPUID.1:ECX.29
    if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) f.avx512bf16 = (eax & (1u << 5)) != 0;
#elif defined(__aarch64__) && defined(__linux__)
    const unsigned long hwcap = getauxval(AT_HWCAP);
    f.neon = (hwcap & HWCAP_ASIMD) != 0;
    f.dotprod = f.neon && (hwcap & HWCAP_ASIMDDP) != 0;
#elif defined(__aarch64__)
    f.neon = true;  // mandatory in AArch64; the dot product is only trusted from Linux's HWCAP
#endif
    return f;
  }();
  return features;
}

}  // namespace boltrt

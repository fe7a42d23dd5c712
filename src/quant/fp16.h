// Scalar conversions between fp32 and the 16-bit float formats stored in GGUF files (fp16, bf16)
// plus the E8M0 scale of MXFP4, bit-exact with ggml (shared/docs/quant-formats.md §0):
//   fp16 -> fp32: exact, keeps subnormals, NaN stays NaN (quietened, payload kept).
//   fp32 -> fp16: round to nearest-even, keeps subnormals, |x| >= 65520 -> inf,
//                 NaN -> 0x7E00 | sign (payload dropped).
//   bf16 -> fp32: bits << 16.
//   fp32 -> bf16: round to nearest-even; NaN -> (bits >> 16) | 0x40 (forced quiet).
// Every function is inline and BOLTRT_HD so the CPU and CUDA code share one definition.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define BOLTRT_HD __host__ __device__
#else
#define BOLTRT_HD
#endif

namespace boltrt {

BOLTRT_HD inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

BOLTRT_HD inline float float_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

BOLTRT_HD inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) {
    // inf stays inf; NaN keeps its payload and becomes quiet, like ggml's (and F16C's) result.
    return float_from_bits(sign | 0x7F800000u | (mantissa << 13) |
                           (mantissa != 0 ? 0x400000u : 0u));
  }
  if (exponent != 0) {
    // Normal: rebias the exponent from 15 to 127.
    return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  // Zero or subnormal: mantissa * 2^-24 is exact in fp32.
  const float magnitude = static_cast<float>(mantissa) * float_from_bits(0x33800000u);  // 2^-24
  return float_from_bits(sign | float_bits(magnitude));
}

BOLTRT_HD inline uint16_t fp32_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs_bits = u & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return sign | 0x7E00u;   // NaN: canonical quiet NaN
  if (abs_bits >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds to inf (and inf)
  if (abs_bits >= 0x38800000u) {
    // Normal fp16 range (>= 2^-14): drop 13 mantissa bits with round-to-nearest-even; a carry
    // out of the mantissa correctly bumps the exponent.
    const uint32_t rebased = abs_bits - (112u << 23);
    const uint32_t round = 0xFFFu + ((rebased >> 13) & 1u);
    return sign | static_cast<uint16_t>((rebased + round) >> 13);
  }
  if (abs_bits < 0x33000000u) return sign;  // < 2^-25 (half the smallest subnormal): +-0
  // Subnormal fp16: value = m * 2^-24 with m in [0, 1024]; shift the full 24-bit significand.
  const uint32_t exponent = abs_bits >> 23;  // 102..112
  const uint32_t significand = (abs_bits & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - exponent;  // 14..24
  const uint32_t kept = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  const uint32_t rounded = kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
  return sign | static_cast<uint16_t>(rounded);
}

BOLTRT_HD inline float bf16_to_fp32(uint16_t h) {
  return float_from_bits(static_cast<uint32_t>(h) << 16);
}

BOLTRT_HD inline uint16_t fp32_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// MXFP4 block scale: 2^(e-127). e = 0 gives the subnormal 2^-127; e = 255 is not special-cased
// (ggml never produces it and does not treat it as NaN; it decodes to inf bits).
BOLTRT_HD inline float e8m0_to_fp32(uint8_t e) {
  return float_from_bits(e == 0 ? 0x00400000u : static_cast<uint32_t>(e) << 23);
}

// Half of e8m0_to_fp32(e): ggml's MXFP4 code table holds doubled E2M1 values, so dequantization
// multiplies by this instead.
BOLTRT_HD inline float e8m0_to_fp32_half(uint8_t e) {
  return float_from_bits(e < 2 ? (0x00200000u << e) : static_cast<uint32_t>(e - 1) << 23);
}

}  // namespace boltrt

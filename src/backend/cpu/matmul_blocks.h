// TEMPORARY: weight block layouts and fp16/bf16 conversions used by the matmul kernels until
// quant/blocks.h and quant/fp16.h land on main (layouts per shared/docs/quant-formats.md).
#pragma once
#include <cstdint>
#include <cstring>

namespace boltrt::cpu {

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
};
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ2_K) == 84 &&
              sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 &&
              sizeof(BlockQ6_K) == 210 && sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136 &&
              sizeof(BlockMXFP4) == 17);

inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// E2M1 values doubled (the scale is halved to compensate).
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

inline float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        man <<= 1;
        ++e;
      } while (!(man & 0x400));
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | ((man & 0x3ff) << 13);
    }
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7fffffff;
  if (ax > 0x7f800000) return sign | 0x7e00;   // NaN
  if (ax >= 0x477ff000) return sign | 0x7c00;  // rounds to inf (|x| >= 65520)
  if (ax < 0x38800000) {                       // fp16 subnormal or zero
    if (ax < 0x33000000) return sign;          // < half the smallest subnormal
    const uint32_t e = ax >> 23, man = (ax & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // 14 + (113 - e)
    uint32_t q = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return sign | static_cast<uint16_t>(q);
  }
  uint32_t r = ax - 0x38000000;             // rebias exponent 127 -> 15
  r = (r + 0xfff + ((r >> 13) & 1)) >> 13;  // round to nearest even
  return sign | static_cast<uint16_t>(r);
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

// MXFP4 scale 2^(e-128), i.e. half of the E8M0 value 2^(e-127).
inline float e8m0_to_f32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace boltrt::cpu

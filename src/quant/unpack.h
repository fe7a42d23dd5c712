// Bit unpacking and scale math of the quantized block formats, shared by the scalar
// dequantizers, the CPU SIMD kernels and the CUDA kernels (every function is BOLTRT_HD).
// Element e of a block is always counted from 0 in the order of the dequantized row.
// Layouts: shared/docs/quant-formats.md §3, §5, §6.
#pragma once
#include <cstdint>

#include "quant/blocks.h"
#include "quant/fp16.h"

namespace boltrt {

// Non-linear code books: IQ4_NL/IQ4_XS values, and MXFP4's E2M1 values doubled (the block scale
// is halved to match, see e8m0_to_fp32_half).
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
inline constexpr int8_t kMXFP4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

BOLTRT_HD inline int iq4nl_value(int code) {
  constexpr int8_t values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};
  return values[code & 15];
}

BOLTRT_HD inline int mxfp4_value(int code) {
  constexpr int8_t values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  return values[code & 15];
}

BOLTRT_HD inline uint32_t load_u32_le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

// 4-bit code of element e (0..31) in the shared nibble layout of Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL/
// MXFP4: qs[j] holds element j in its low nibble and element j+16 in its high nibble.
BOLTRT_HD inline int nibble32(const uint8_t* qs, int e) {
  return e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4);
}

// 5-bit code (0..31) of Q5_0/Q5_1 element e: the 5th bit is bit e of the little-endian qh word.
BOLTRT_HD inline int q5_code(const uint8_t* qs, const uint8_t* qh, int e) {
  return nibble32(qs, e) | static_cast<int>((load_u32_le(qh) >> e) & 1u) << 4;
}

// Q4_K/Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
BOLTRT_HD inline void k4_scale_min(int j, const uint8_t* scales, int& scale, int& min) {
  if (j < 4) {
    scale = scales[j] & 63;
    min = scales[j + 4] & 63;
  } else {
    scale = (scales[j + 4] & 15) | ((scales[j - 4] >> 6) << 4);
    min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Q4_K/Q5_K: all 8 scales (sc) and 8 mins (mn) at once, the word-parallel form of k4_scale_min
// the SIMD kernels use (quant-formats.md §5.1, "fast unpack").
BOLTRT_HD inline void k4_scales_mins(const uint8_t* packed, uint8_t* sc, uint8_t* mn) {
  const uint32_t w0 = load_u32_le(packed), w1 = load_u32_le(packed + 4),
                 w2 = load_u32_le(packed + 8);
  const uint32_t s0 = w0 & 0x3f3f3f3f;
  const uint32_t s1 = (w2 & 0x0f0f0f0f) | (((w0 >> 6) & 0x03030303) << 4);
  const uint32_t m0 = w1 & 0x3f3f3f3f;
  const uint32_t m1 = ((w2 >> 4) & 0x0f0f0f0f) | (((w1 >> 6) & 0x03030303) << 4);
  for (int k = 0; k < 4; ++k) {
    sc[k] = static_cast<uint8_t>(s0 >> (8 * k));
    sc[k + 4] = static_cast<uint8_t>(s1 >> (8 * k));
    mn[k] = static_cast<uint8_t>(m0 >> (8 * k));
    mn[k + 4] = static_cast<uint8_t>(m1 >> (8 * k));
  }
}

// Q3_K: the 6-bit scale code (0..63, value = code - 32) of 16-element group g (0..15).
BOLTRT_HD inline int q3k_scale(int g, const uint8_t* scales) {
  const int low = (g < 8 ? scales[g] : scales[g - 8] >> 4) & 15;
  const int high = (scales[8 + (g & 3)] >> (2 * (g >> 2))) & 3;
  return low | high << 4;
}

// Q3_K: the 16 group scales minus 32 (their values), as the SIMD kernels use them.
BOLTRT_HD inline void q3k_scale_values(const uint8_t* scales, int16_t* out) {
  for (int g = 0; g < 16; ++g) out[g] = static_cast<int16_t>(q3k_scale(g, scales) - 32);
}

// IQ4_XS: the 6-bit scale code (0..63, value = code - 32) of 32-element sub-block ib (0..7).
BOLTRT_HD inline int iq4xs_scale(int ib, const BlockIQ4_XS& b) {
  const int low = (b.scales_l[ib >> 1] >> (4 * (ib & 1))) & 15;
  const int high = (b.scales_h >> (2 * ib)) & 3;
  return low | high << 4;
}

// K-quant code accessors for element e (0..255) of a super-block.
// Q2_K: 2-bit code 0..3. One byte holds elements l, l+32, l+64, l+96 of its 128-element half.
BOLTRT_HD inline int q2k_code(const uint8_t* qs, int e) {
  return (qs[32 * (e >> 7) + (e & 31)] >> (2 * ((e >> 5) & 3))) & 3;
}
// Q3_K: signed code -4..3 (low 2 bits as Q2_K; a clear hmask bit subtracts 4).
BOLTRT_HD inline int q3k_code(const BlockQ3_K& b, int e) {
  const int high_set = (b.hmask[e & 31] >> (e >> 5)) & 1;
  return q2k_code(b.qs, e) - (high_set ? 0 : 4);
}
// Q4_K: 4-bit code; byte qs[32*(e/64) + e%32], low nibble for even sub-blocks, high for odd.
BOLTRT_HD inline int q4k_code(const uint8_t* qs, int e) {
  const uint8_t byte = qs[32 * (e >> 6) + (e & 31)];
  return ((e >> 5) & 1) ? (byte >> 4) : (byte & 15);
}
// Q5_K: 5-bit code; the 5th bit is bit (e/32) of qh[e%32].
BOLTRT_HD inline int q5k_code(const BlockQ5_K& b, int e) {
  return q4k_code(b.qs, e) | ((b.qh[e & 31] >> (e >> 5)) & 1) << 4;
}
// Q6_K: 6-bit code 0..63 (value = code - 32).
BOLTRT_HD inline int q6k_code(const BlockQ6_K& b, int e) {
  const int c = e >> 7, k = (e >> 5) & 3, l = e & 31;
  const uint8_t low_byte = b.ql[64 * c + 32 * (k & 1) + l];
  const int low = k < 2 ? (low_byte & 15) : (low_byte >> 4);
  const int high = (b.qh[32 * c + l] >> (2 * k)) & 3;
  return low | high << 4;
}

// ---- whole-block dequantization (ggml's association order, so even the sign of zero matches) ----

BOLTRT_HD inline void dequantize_block(const BlockQ4_0& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int e = 0; e < QK4_0; ++e) y[e] = static_cast<float>(nibble32(b.qs, e) - 8) * d;
}

BOLTRT_HD inline void dequantize_block(const BlockQ4_1& b, float* y) {
  const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
  for (int e = 0; e < QK4_1; ++e) y[e] = static_cast<float>(nibble32(b.qs, e)) * d + m;
}

BOLTRT_HD inline void dequantize_block(const BlockQ5_0& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int e = 0; e < QK5_0; ++e) y[e] = static_cast<float>(q5_code(b.qs, b.qh, e) - 16) * d;
}

BOLTRT_HD inline void dequantize_block(const BlockQ5_1& b, float* y) {
  const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
  for (int e = 0; e < QK5_1; ++e) y[e] = static_cast<float>(q5_code(b.qs, b.qh, e)) * d + m;
}

BOLTRT_HD inline void dequantize_block(const BlockQ8_0& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int e = 0; e < QK8_0; ++e) y[e] = static_cast<float>(b.qs[e]) * d;
}

BOLTRT_HD inline void dequantize_block(const BlockQ2_K& b, float* y) {
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  for (int g = 0; g < QK_K / 16; ++g) {
    const float dl = d * static_cast<float>(b.scales[g] & 15);
    const float ml = dmin * static_cast<float>(b.scales[g] >> 4);
    for (int e = 16 * g; e < 16 * g + 16; ++e) {
      y[e] = dl * static_cast<float>(q2k_code(b.qs, e)) - ml;
    }
  }
}

BOLTRT_HD inline void dequantize_block(const BlockQ3_K& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int g = 0; g < QK_K / 16; ++g) {
    const float dl = d * static_cast<float>(q3k_scale(g, b.scales) - 32);
    for (int e = 16 * g; e < 16 * g + 16; ++e) y[e] = dl * static_cast<float>(q3k_code(b, e));
  }
}

BOLTRT_HD inline void dequantize_block(const BlockQ4_K& b, float* y) {
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  for (int j = 0; j < QK_K / 32; ++j) {
    int scale, min;
    k4_scale_min(j, b.scales, scale, min);
    const float dl = d * static_cast<float>(scale), ml = dmin * static_cast<float>(min);
    for (int e = 32 * j; e < 32 * j + 32; ++e) {
      y[e] = dl * static_cast<float>(q4k_code(b.qs, e)) - ml;
    }
  }
}

BOLTRT_HD inline void dequantize_block(const BlockQ5_K& b, float* y) {
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  for (int j = 0; j < QK_K / 32; ++j) {
    int scale, min;
    k4_scale_min(j, b.scales, scale, min);
    const float dl = d * static_cast<float>(scale), ml = dmin * static_cast<float>(min);
    for (int e = 32 * j; e < 32 * j + 32; ++e) y[e] = dl * static_cast<float>(q5k_code(b, e)) - ml;
  }
}

BOLTRT_HD inline void dequantize_block(const BlockQ6_K& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int g = 0; g < QK_K / 16; ++g) {
    const float dl = d * static_cast<float>(b.scales[g]);
    for (int e = 16 * g; e < 16 * g + 16; ++e) y[e] = dl * static_cast<float>(q6k_code(b, e) - 32);
  }
}

BOLTRT_HD inline void dequantize_block(const BlockQ8_K& b, float* y) {
  for (int e = 0; e < QK_K; ++e) y[e] = b.d * static_cast<float>(b.qs[e]);
}

BOLTRT_HD inline void dequantize_block(const BlockIQ4_NL& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int e = 0; e < QK4_NL; ++e) y[e] = d * static_cast<float>(iq4nl_value(nibble32(b.qs, e)));
}

BOLTRT_HD inline void dequantize_block(const BlockIQ4_XS& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int ib = 0; ib < QK_K / 32; ++ib) {
    const float dl = d * static_cast<float>(iq4xs_scale(ib, b) - 32);
    const uint8_t* qs = b.qs + 16 * ib;
    for (int e = 0; e < 32; ++e) {
      y[32 * ib + e] = dl * static_cast<float>(iq4nl_value(nibble32(qs, e)));
    }
  }
}

BOLTRT_HD inline void dequantize_block(const BlockMXFP4& b, float* y) {
  const float d = e8m0_to_fp32_half(b.e);
  for (int e = 0; e < QK_MXFP4; ++e) y[e] = static_cast<float>(mxfp4_value(nibble32(b.qs, e))) * d;
}

}  // namespace boltrt

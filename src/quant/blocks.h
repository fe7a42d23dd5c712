// Block layouts of ggml's quantized types, defined once for the whole engine (CPU and CUDA).
// Layouts, sizes and element order: shared/docs/quant-formats.md §3, §5, §6.
//
// Blocks inside a GGUF row are packed back to back with no padding, so a block can start at
// any byte address (MXFP4 blocks are 17 bytes). The weight block structs are therefore declared
// packed (alignment 1): member reads compile to unaligned-safe loads, and casting any byte
// pointer to a block pointer is valid. fp16 fields are raw IEEE binary16 bits (see fp16.h).
// Q8_K is the exception: it only lives in buffers boltrt allocates (activations), keeps its
// natural 4-byte alignment, and must be stored 4-byte aligned.
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(_MSC_VER) && !defined(__clang__)
#error "blocks.h relies on __attribute__((packed))"
#endif
#define BOLTRT_PACKED __attribute__((packed))

namespace boltrt {

// Elements per block.
inline constexpr int QK4_0 = 32;
inline constexpr int QK4_1 = 32;
inline constexpr int QK5_0 = 32;
inline constexpr int QK5_1 = 32;
inline constexpr int QK8_0 = 32;
inline constexpr int QK8_1 = 32;
inline constexpr int QK4_NL = 32;
inline constexpr int QK_MXFP4 = 32;
inline constexpr int QK_K = 256;         // every K-quant super-block, IQ4_XS and Q8_K
inline constexpr int K_SCALE_SIZE = 12;  // packed 6-bit scales/mins of Q4_K and Q5_K

// ---- legacy 32-element blocks (byte qs[j]: element j in the low nibble, j+16 in the high) ----

// y = (q - 8) * d
struct BOLTRT_PACKED BlockQ4_0 {
  uint16_t d;             // fp16 scale
  uint8_t qs[QK4_0 / 2];  // 4-bit codes
};

// y = q * d + m
struct BOLTRT_PACKED BlockQ4_1 {
  uint16_t d;  // fp16 scale
  uint16_t m;  // fp16 minimum
  uint8_t qs[QK4_1 / 2];
};

// y = (q - 16) * d, q = nibble | (bit e of qh) << 4
struct BOLTRT_PACKED BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // 5th bits, little-endian u32, bit e = element e
  uint8_t qs[QK5_0 / 2];
};

// y = q * d + m
struct BOLTRT_PACKED BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[QK5_1 / 2];
};

// y = qs * d
struct BOLTRT_PACKED BlockQ8_0 {
  uint16_t d;
  int8_t qs[QK8_0];
};

// Activation partner of Q4_1/Q5_1: s = f16(d * sum(qs)).
struct BOLTRT_PACKED BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[QK8_1];
};

// ---- K-quants: 256-element super-blocks ----

// 16 sub-blocks of 16: y = d * (scales[i] & 15) * q - dmin * (scales[i] >> 4), q in 0..3
struct BOLTRT_PACKED BlockQ2_K {
  uint8_t scales[QK_K / 16];  // low nibble scale, high nibble min
  uint8_t qs[QK_K / 4];       // 2-bit codes
  uint16_t d;                 // fp16 super-scale of the scales
  uint16_t dmin;              // fp16 super-scale of the mins
};

// 16 sub-blocks of 16: y = d * (scale6 - 32) * (q2 | hbit << 2 - 4)
struct BOLTRT_PACKED BlockQ3_K {
  uint8_t hmask[QK_K / 8];  // high bit of each 3-bit code
  uint8_t qs[QK_K / 4];     // low 2 bits
  uint8_t scales[12];       // 16 6-bit scales, packed
  uint16_t d;
};

// 8 sub-blocks of 32: y = d * sc * q - dmin * m, sc/m 6-bit packed in scales
struct BOLTRT_PACKED BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qs[QK_K / 2];
};

struct BOLTRT_PACKED BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qh[QK_K / 8];  // 5th bits
  uint8_t qs[QK_K / 2];  // low 4 bits
};

// 16 sub-blocks of 16: y = d * scales[i] * (q6 - 32)
struct BOLTRT_PACKED BlockQ6_K {
  uint8_t ql[QK_K / 2];  // low 4 bits
  uint8_t qh[QK_K / 4];  // high 2 bits
  int8_t scales[QK_K / 16];
  uint16_t d;
};

// Activation format of the K-quant dot products. Not packed: see the header comment.
struct BlockQ8_K {
  float d;  // fp32 scale
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];  // sum of qs over each group of 16
};

// ---- non-linear 4-bit types ----

// y = d * kvalues_iq4nl[nibble]
struct BOLTRT_PACKED BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[QK4_NL / 2];
};

// 8 sub-blocks of 32, 6-bit scales (low 4 bits in scales_l nibbles, high 2 in scales_h):
// y = d * (scale6 - 32) * kvalues_iq4nl[nibble]
struct BOLTRT_PACKED BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[QK_K / 64];
  uint8_t qs[QK_K / 2];
};

// y = e8m0_half(e) * kvalues_mxfp4[nibble] (ggml nibble order, not OCP pair order)
struct BOLTRT_PACKED BlockMXFP4 {
  uint8_t e;  // E8M0 shared exponent
  uint8_t qs[QK_MXFP4 / 2];
};

static_assert(sizeof(BlockQ4_0) == 18 && alignof(BlockQ4_0) == 1);
static_assert(sizeof(BlockQ4_1) == 20 && alignof(BlockQ4_1) == 1);
static_assert(sizeof(BlockQ5_0) == 22 && alignof(BlockQ5_0) == 1);
static_assert(sizeof(BlockQ5_1) == 24 && alignof(BlockQ5_1) == 1);
static_assert(sizeof(BlockQ8_0) == 34 && alignof(BlockQ8_0) == 1);
static_assert(sizeof(BlockQ8_1) == 36 && alignof(BlockQ8_1) == 1);
static_assert(sizeof(BlockQ2_K) == 84 && alignof(BlockQ2_K) == 1);
static_assert(sizeof(BlockQ3_K) == 110 && alignof(BlockQ3_K) == 1);
static_assert(sizeof(BlockQ4_K) == 144 && alignof(BlockQ4_K) == 1);
static_assert(sizeof(BlockQ5_K) == 176 && alignof(BlockQ5_K) == 1);
static_assert(sizeof(BlockQ6_K) == 210 && alignof(BlockQ6_K) == 1);
static_assert(sizeof(BlockQ8_K) == 292 && alignof(BlockQ8_K) == 4);
static_assert(sizeof(BlockIQ4_NL) == 18 && alignof(BlockIQ4_NL) == 1);
static_assert(sizeof(BlockIQ4_XS) == 136 && alignof(BlockIQ4_XS) == 1);
static_assert(sizeof(BlockMXFP4) == 17 && alignof(BlockMXFP4) == 1);

// Field offsets are part of the file format (quant-formats.md).
static_assert(offsetof(BlockQ2_K, d) == 80 && offsetof(BlockQ3_K, scales) == 96);
static_assert(offsetof(BlockQ5_K, qh) == 16 && offsetof(BlockQ5_K, qs) == 48);
static_assert(offsetof(BlockQ6_K, scales) == 192 && offsetof(BlockQ6_K, d) == 208);
static_assert(offsetof(BlockQ8_K, bsums) == 260 && offsetof(BlockIQ4_XS, qs) == 8);

}  // namespace boltrt

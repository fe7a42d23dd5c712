// Coalesced weight decoding for the decode GEMV (kernels/gemv_quant.cu). BOLTRT_HD code with no
// CUDA types, so test_dequant_sub32 checks it on the CPU against Sub32 bit for bit.
//
// Why: the first GEMV gave each lane a whole 32-element sub-block, so the 32 lanes of a warp read
// 32 addresses one block apart in every load instruction (byte loads of the codes, float4 loads of
// the activations 128 bytes apart): on an H200 that ran at 6-15 % of the memory bandwidth
// (2026-12-04, bench_cuda_gemv), limited by the L1's wavefronts per instruction, not by DRAM. Here
// a lane takes kPer consecutive elements and the warp covers 32 * kPer consecutive elements per
// step, so each load instruction of the warp reads one contiguous span of codes and of activations.
//
// WarpDecode<Block>::decode(row, e0, v) writes the kPer weights W[row, e0 .. e0 + kPer) to v, with
// the arithmetic of Sub32<Block>::dequantize (quant/dequant_sub32.h) for each element; e0 is a
// multiple of kPer and the kPer elements lie in one block. kAlign: the byte alignment the loads
// need of the row start (the launcher falls back to the sub-block kernel otherwise).
#pragma once
#include <cstdint>
#include <cstring>

#include "backend/cuda/sub32_float.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/unpack.h"

namespace boltrt {

template <typename Block>
struct WarpDecode {
  static constexpr bool kSupported = false;
};

namespace gemv_detail {
struct alignas(8) U32x2 {
  uint32_t x, y;
};
struct alignas(16) F32x4 {
  float x, y, z, w;
};
// One load of a T at p, which the caller has aligned for T (one wide load instruction on the
// device; memcpy on the host, where the kernels are also compiled for the emulator and the tests).
template <typename T>
BOLTRT_HD inline T load(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const T*>(p);
#else
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}
// Four bytes at an even address, little endian, as two 2-byte loads (the block formats' fields
// are 2-byte aligned when the row is; the launcher checks kAlign).
BOLTRT_HD inline uint32_t load_u32_even(const uint8_t* p) {
  return static_cast<uint32_t>(load<uint16_t>(p)) | static_cast<uint32_t>(load<uint16_t>(p + 2))
                                                        << 16;
}
}  // namespace gemv_detail

// Q4_K: 256-element super-blocks of 144 bytes; a lane decodes 8 elements of one 32-element
// sub-block j: the 8 code bytes are one aligned 8-byte load (qs of sub-blocks 2g and 2g+1 share
// 32 bytes: low nibbles for the even one, high for the odd one).
template <>
struct WarpDecode<BlockQ4_K> {
  static constexpr bool kSupported = true;
  static constexpr int kPer = 8;
  static constexpr int kAlign = 16;
  BOLTRT_HD static void decode(const uint8_t* row, int64_t e0, float* v) {
    const uint8_t* b = row + (e0 / QK_K) * sizeof(BlockQ4_K);
    const int r = static_cast<int>(e0 % QK_K), j = r / 32, o = r % 32;
    const auto& blk = *reinterpret_cast<const BlockQ4_K*>(b);
    int scale, min;
    k4_scale_min(j, blk.scales, scale, min);
    const float dl = fp16_to_fp32(blk.d) * static_cast<float>(scale);
    const float ml = fp16_to_fp32(blk.dmin) * static_cast<float>(min);
    const auto q = gemv_detail::load<gemv_detail::U32x2>(blk.qs + 32 * (j / 2) + o);
    const int shift = 4 * (j & 1);
    for (int i = 0; i < 8; ++i) {
      const uint32_t word = i < 4 ? q.x : q.y;
      const int code = static_cast<int>((word >> (8 * (i & 3) + shift)) & 15u);
      v[i] = dl * static_cast<float>(code) - ml;
    }
  }
};

// Q6_K: 256-element super-blocks of 210 bytes (2-byte aligned); a lane decodes 8 elements of one
// 32-element sub-block, which share one 16-element scale.
template <>
struct WarpDecode<BlockQ6_K> {
  static constexpr bool kSupported = true;
  static constexpr int kPer = 8;
  static constexpr int kAlign = 2;
  BOLTRT_HD static void decode(const uint8_t* row, int64_t e0, float* v) {
    using gemv_detail::load_u32_even;
    const uint8_t* b = row + (e0 / QK_K) * sizeof(BlockQ6_K);
    const int r = static_cast<int>(e0 % QK_K), j = r / 32, o = r % 32;
    const int c = j / 4, k = j % 4;
    const auto& blk = *reinterpret_cast<const BlockQ6_K*>(b);
    const float dl = fp16_to_fp32(blk.d) * static_cast<float>(blk.scales[r / 16]);
    const uint8_t* ql = blk.ql + 64 * c + 32 * (k & 1) + o;
    const uint8_t* qh = blk.qh + 32 * c + o;
    const uint32_t l0 = load_u32_even(ql), l1 = load_u32_even(ql + 4);
    const uint32_t h0 = load_u32_even(qh), h1 = load_u32_even(qh + 4);
    const int low_shift = k < 2 ? 0 : 4;
    for (int i = 0; i < 8; ++i) {
      const int byte_shift = 8 * (i & 3);
      const int low = static_cast<int>(((i < 4 ? l0 : l1) >> (byte_shift + low_shift)) & 15u);
      const int high = static_cast<int>(((i < 4 ? h0 : h1) >> (byte_shift + 2 * k)) & 3u);
      v[i] = dl * static_cast<float>((low | high << 4) - 32);
    }
  }
};

// Q8_0: 32-element blocks of 34 bytes; a lane decodes 4 elements.
template <>
struct WarpDecode<BlockQ8_0> {
  static constexpr bool kSupported = true;
  static constexpr int kPer = 4;
  static constexpr int kAlign = 2;
  BOLTRT_HD static void decode(const uint8_t* row, int64_t e0, float* v) {
    const auto& blk = *reinterpret_cast<const BlockQ8_0*>(row + (e0 / QK8_0) * sizeof(BlockQ8_0));
    const int o = static_cast<int>(e0 % QK8_0);
    const float d = fp16_to_fp32(blk.d);
    const uint32_t q = gemv_detail::load_u32_even(reinterpret_cast<const uint8_t*>(blk.qs) + o);
    for (int i = 0; i < 4; ++i) {
      v[i] = static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(q >> (8 * i)))) * d;
    }
  }
};

// Q4_0: 32-element blocks of 18 bytes; element e < 16 is the low nibble of qs[e], e >= 16 the
// high nibble of qs[e - 16]; a lane decodes 4 elements from 4 code bytes.
template <>
struct WarpDecode<BlockQ4_0> {
  static constexpr bool kSupported = true;
  static constexpr int kPer = 4;
  static constexpr int kAlign = 2;
  BOLTRT_HD static void decode(const uint8_t* row, int64_t e0, float* v) {
    const auto& blk = *reinterpret_cast<const BlockQ4_0*>(row + (e0 / QK4_0) * sizeof(BlockQ4_0));
    const int o = static_cast<int>(e0 % QK4_0);
    const float d = fp16_to_fp32(blk.d);
    const uint32_t q = gemv_detail::load_u32_even(blk.qs + (o % 16));
    const int shift = o < 16 ? 0 : 4;
    for (int i = 0; i < 4; ++i) {
      v[i] = static_cast<float>(static_cast<int>((q >> (8 * i + shift)) & 15u) - 8) * d;
    }
  }
};

// F32 / F16 / BF16 rows: 4 elements per lane, one 16- or 8-byte load.
template <>
struct WarpDecode<BlockF32x32> {
  static constexpr bool kSupported = true;
  static constexpr int kPer = 4;
  static constexpr int kAlign = 16;
  BOLTRT_HD static void decode(const uint8_t* row, int64_t e0, float* v) {
    const auto q = gemv_detail::load<gemv_detail::F32x4>(row + 4 * e0);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  }
};

template <>
struct WarpDecode<BlockF16x32> {
  static constexpr bool kSupported = true;
  static constexpr int kPer = 4;
  static constexpr int kAlign = 8;
  BOLTRT_HD static void decode(const uint8_t* row, int64_t e0, float* v) {
    const auto q = gemv_detail::load<gemv_detail::U32x2>(row + 2 * e0);
    v[0] = fp16_to_fp32(static_cast<uint16_t>(q.x)),
    v[1] = fp16_to_fp32(static_cast<uint16_t>(q.x >> 16));
    v[2] = fp16_to_fp32(static_cast<uint16_t>(q.y)),
    v[3] = fp16_to_fp32(static_cast<uint16_t>(q.y >> 16));
  }
};

template <>
struct WarpDecode<BlockBF16x32> {
  static constexpr bool kSupported = true;
  static constexpr int kPer = 4;
  static constexpr int kAlign = 8;
  BOLTRT_HD static void decode(const uint8_t* row, int64_t e0, float* v) {
    const auto q = gemv_detail::load<gemv_detail::U32x2>(row + 2 * e0);
    v[0] = bf16_to_fp32(static_cast<uint16_t>(q.x)),
    v[1] = bf16_to_fp32(static_cast<uint16_t>(q.x >> 16));
    v[2] = bf16_to_fp32(static_cast<uint16_t>(q.y)),
    v[3] = bf16_to_fp32(static_cast<uint16_t>(q.y >> 16));
  }
};

}  // namespace boltrt

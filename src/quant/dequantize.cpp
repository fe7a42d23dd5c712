// Row dequantization: one loop over the blocks of a row per type (see unpack.h for the math).
#include "quant/dequantize.h"

#include <cstring>

#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/unpack.h"
#include "util/error.h"

namespace boltrt {
namespace {

template <typename Block, int kBlockSize>
void dequantize_blocks(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / kBlockSize; ++i) dequantize_block(blocks[i], dst + i * kBlockSize);
}

}  // namespace

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  const TypeTraits& traits = type_traits(type);
  if (!traits.known) fail("dequantize_row: unknown ggml type id {}", static_cast<uint32_t>(type));
  if (n < 0 || n % traits.block_size != 0) {
    fail("dequantize_row: {} elements is not a multiple of the {} block size {}", n, traits.name,
         traits.block_size);
  }
  switch (type) {
    // Float rows are read with memcpy: src need not be aligned.
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16: {
      const auto* x = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, x + 2 * i, 2);
        dst[i] = fp16_to_fp32(h);
      }
      return;
    }
    case GgmlType::BF16: {
      const auto* x = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, x + 2 * i, 2);
        dst[i] = bf16_to_fp32(h);
      }
      return;
    }
    case GgmlType::Q4_0:
      return dequantize_blocks<BlockQ4_0, QK4_0>(src, dst, n);
    case GgmlType::Q4_1:
      return dequantize_blocks<BlockQ4_1, QK4_1>(src, dst, n);
    case GgmlType::Q5_0:
      return dequantize_blocks<BlockQ5_0, QK5_0>(src, dst, n);
    case GgmlType::Q5_1:
      return dequantize_blocks<BlockQ5_1, QK5_1>(src, dst, n);
    case GgmlType::Q8_0:
      return dequantize_blocks<BlockQ8_0, QK8_0>(src, dst, n);
    case GgmlType::Q2_K:
      return dequantize_blocks<BlockQ2_K, QK_K>(src, dst, n);
    case GgmlType::Q3_K:
      return dequantize_blocks<BlockQ3_K, QK_K>(src, dst, n);
    case GgmlType::Q4_K:
      return dequantize_blocks<BlockQ4_K, QK_K>(src, dst, n);
    case GgmlType::Q5_K:
      return dequantize_blocks<BlockQ5_K, QK_K>(src, dst, n);
    case GgmlType::Q6_K:
      return dequantize_blocks<BlockQ6_K, QK_K>(src, dst, n);
    case GgmlType::Q8_K:
      return dequantize_blocks<BlockQ8_K, QK_K>(src, dst, n);
    case GgmlType::IQ4_NL:
      return dequantize_blocks<BlockIQ4_NL, QK4_NL>(src, dst, n);
    case GgmlType::IQ4_XS:
      return dequantize_blocks<BlockIQ4_XS, QK_K>(src, dst, n);
    case GgmlType::MXFP4:
      return dequantize_blocks<BlockMXFP4, QK_MXFP4>(src, dst, n);
    default:
      fail("dequantize_row: type {} is not supported by boltrt", traits.name);
  }
}

}  // namespace boltrt

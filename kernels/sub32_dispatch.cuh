// Maps a ggml type id to the block struct whose Sub32<Block> unpacks it on the device, for the
// kernels that read weight rows (gemv_quant.cu, embed_rows.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/sub32_float.h"
#include "quant/dequant_sub32.h"
#include "quant/ggml_type.h"

namespace boltrt::kernels {

// Calls f(static_cast<Block*>(nullptr)) for the block type of `ggml_type`; returns
// cudaErrorInvalidValue for a type without a Sub32 unpacker.
template <typename F>
cudaError_t with_sub32_block(uint32_t ggml_type, F&& f) {
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::Q4_0:
      return f(static_cast<BlockQ4_0*>(nullptr));
    case GgmlType::Q8_0:
      return f(static_cast<BlockQ8_0*>(nullptr));
    case GgmlType::Q4_K:
      return f(static_cast<BlockQ4_K*>(nullptr));
    case GgmlType::Q5_K:
      return f(static_cast<BlockQ5_K*>(nullptr));
    case GgmlType::Q6_K:
      return f(static_cast<BlockQ6_K*>(nullptr));
    case GgmlType::F32:
      return f(static_cast<BlockF32x32*>(nullptr));
    case GgmlType::F16:
      return f(static_cast<BlockF16x32*>(nullptr));
    case GgmlType::BF16:
      return f(static_cast<BlockBF16x32*>(nullptr));
    default:
      return cudaErrorInvalidValue;
  }
}

inline bool has_sub32_block(uint32_t ggml_type) {
  return with_sub32_block(ggml_type, [](auto*) { return cudaSuccess; }) == cudaSuccess;
}

}  // namespace boltrt::kernels

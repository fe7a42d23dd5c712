// quantize_row(): input checks, dispatch to the per-type reference quantizers, and the output
// validation llama-quantize applies (ggml_validate_row_data: no inf/NaN scale may be written).
#include "quant/quantize.h"

#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/quantize_impl.h"
#include "util/error.h"

namespace boltrt {
namespace {

using namespace quant_detail;

bool fp16_finite(uint16_t h) {
  return (h & 0x7C00u) != 0x7C00u;
}

// The fp16 scale fields of each block type (checked after quantizing). Q8_1's s = d * sum(q)
// may overflow for large activations without harm to d and the codes; it is not checked.
template <typename Block>
bool scales_finite(const Block& b) {
  if constexpr (requires { b.m; }) {
    if (!fp16_finite(b.m)) return false;
  }
  if constexpr (requires { b.dmin; }) {
    if (!fp16_finite(b.dmin)) return false;
  }
  return fp16_finite(b.d);
}

template <typename Block>
void check_scales(GgmlType type, const void* dst, int64_t n, int64_t block_size) {
  const auto* blocks = static_cast<const Block*>(dst);
  for (int64_t i = 0; i < n / block_size; ++i) {
    if (!scales_finite(blocks[i])) {
      fail("quantize {}: block {} (elements {}..{}) is too large for its fp16 scale",
           type_traits(type).name, i, i * block_size, (i + 1) * block_size - 1);
    }
  }
}

bool uses_importance(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q8_1:
    case GgmlType::Q8_K:
    case GgmlType::MXFP4:
      return false;
    default:
      return true;
  }
}

}  // namespace

bool can_quantize(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q8_1:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::Q8_K:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
    case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
}

size_t quantize_row(GgmlType type, const float* src, void* dst, int64_t n,
                    const float* importance) {
  const TypeTraits& traits = type_traits(type);
  if (!can_quantize(type)) {
    fail("quantize: no quantizer for type {} (id {})", traits.known ? traits.name : "unknown",
         static_cast<uint32_t>(type));
  }
  if (n < 0 || n % traits.block_size != 0) {
    fail("quantize {}: {} elements is not a multiple of the block size {}", traits.name, n,
         traits.block_size);
  }
  // Types without an imatrix variant ignore the importance, as ggml_quantize_chunk does.
  const float* qw = uses_importance(type) ? importance : nullptr;
  const size_t bytes = row_size(type, n);
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, bytes);
      return bytes;
    case GgmlType::F16: {
      auto* y = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(y + 2 * i, &h, 2);
      }
      return bytes;
    }
    case GgmlType::BF16: {
      auto* y = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_bf16(src[i]);
        std::memcpy(y + 2 * i, &h, 2);
      }
      return bytes;
    }
    default:
      break;
  }
  // Quantized types: the reference has undefined behaviour for NaN/Inf, so reject them before
  // any float -> integer conversion.
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(src[i])) {
      fail("quantize {}: non-finite input {} at element {}", traits.name, src[i], i);
    }
  }
  if (qw != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(qw[i]) || qw[i] < 0.0f) {
        fail("quantize {}: importance weight {} at element {} is not a finite non-negative value",
             traits.name, qw[i], i);
      }
    }
  }
  switch (type) {
    case GgmlType::Q4_0:
      qw ? quantize_q4_0_weighted(src, static_cast<BlockQ4_0*>(dst), n, qw)
         : quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n);
      check_scales<BlockQ4_0>(type, dst, n, QK4_0);
      break;
    case GgmlType::Q4_1:
      qw ? quantize_q4_1_weighted(src, static_cast<BlockQ4_1*>(dst), n, qw)
         : quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), n);
      check_scales<BlockQ4_1>(type, dst, n, QK4_1);
      break;
    case GgmlType::Q5_0:
      qw ? quantize_q5_0_weighted(src, static_cast<BlockQ5_0*>(dst), n, qw)
         : quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), n);
      check_scales<BlockQ5_0>(type, dst, n, QK5_0);
      break;
    case GgmlType::Q5_1:
      qw ? quantize_q5_1_weighted(src, static_cast<BlockQ5_1*>(dst), n, qw)
         : quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), n);
      check_scales<BlockQ5_1>(type, dst, n, QK5_1);
      break;
    case GgmlType::Q8_0:
      quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
      check_scales<BlockQ8_0>(type, dst, n, QK8_0);
      break;
    case GgmlType::Q8_1:
      quantize_q8_1(src, static_cast<BlockQ8_1*>(dst), n);
      check_scales<BlockQ8_1>(type, dst, n, QK8_1);
      break;
    case GgmlType::Q2_K:
      qw ? quantize_q2_k_weighted(src, static_cast<BlockQ2_K*>(dst), n, qw)
         : quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), n);
      check_scales<BlockQ2_K>(type, dst, n, QK_K);
      break;
    case GgmlType::Q3_K:
      qw ? quantize_q3_k_weighted(src, static_cast<BlockQ3_K*>(dst), n, qw)
         : quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), n);
      check_scales<BlockQ3_K>(type, dst, n, QK_K);
      break;
    case GgmlType::Q4_K:
      qw ? quantize_q4_k_weighted(src, static_cast<BlockQ4_K*>(dst), n, qw)
         : quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), n);
      check_scales<BlockQ4_K>(type, dst, n, QK_K);
      break;
    case GgmlType::Q5_K:
      qw ? quantize_q5_k_weighted(src, static_cast<BlockQ5_K*>(dst), n, qw)
         : quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), n);
      check_scales<BlockQ5_K>(type, dst, n, QK_K);
      break;
    case GgmlType::Q6_K:
      qw ? quantize_q6_k_weighted(src, static_cast<BlockQ6_K*>(dst), n, qw)
         : quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), n);
      check_scales<BlockQ6_K>(type, dst, n, QK_K);
      break;
    case GgmlType::Q8_K:
      // Q8_K's scale is fp32 (finite for finite input); the buffer must be 4-byte aligned.
      quantize_q8_k(src, static_cast<BlockQ8_K*>(dst), n);
      break;
    case GgmlType::IQ4_NL:
      quantize_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), n, qw);
      check_scales<BlockIQ4_NL>(type, dst, n, QK4_NL);
      break;
    case GgmlType::IQ4_XS:
      quantize_iq4_xs(src, static_cast<BlockIQ4_XS*>(dst), n, qw);
      check_scales<BlockIQ4_XS>(type, dst, n, QK_K);
      break;
    case GgmlType::MXFP4:
      quantize_mxfp4(src, static_cast<BlockMXFP4*>(dst), n);
      // e = 0xFF (invalid) only comes from the exponent wrapping for amax in [2^-126, 2^-125).
      for (int64_t i = 0; i < n / QK_MXFP4; ++i) {
        if (static_cast<const BlockMXFP4*>(dst)[i].e == 0xFF) {
          fail("quantize mxfp4: block {} is too small for an E8M0 scale", i);
        }
      }
      break;
    default:
      fail("quantize: no quantizer for type {}", traits.name);
  }
  return bytes;
}

}  // namespace boltrt

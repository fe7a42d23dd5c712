// ggml_validate_row_data's checks, per type.
#include "quant/validate.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/fp16.h"
#include "util/error.h"

namespace boltrt {
namespace {

std::optional<std::string> check_half(uint16_t h, int64_t block, const char* field) {
  if ((h & 0x7C00u) != 0x7C00u) return std::nullopt;
  return fmt::format("block {}: scale {} is {}", block, field, (h & 0x3FFu) ? "NaN" : "inf");
}

// Reads the fp16 field at byte `offset` of each `block_bytes`-byte block.
std::optional<std::string> check_scales(const uint8_t* p, int64_t blocks, size_t block_bytes,
                                        size_t offset, const char* field) {
  for (int64_t i = 0; i < blocks; ++i) {
    uint16_t h;
    std::memcpy(&h, p + static_cast<size_t>(i) * block_bytes + offset, 2);
    if (auto e = check_half(h, i, field)) return e;
  }
  return std::nullopt;
}

template <typename Bits>
std::optional<std::string> check_floats(const uint8_t* p, int64_t n, Bits exponent_mask,
                                        Bits mantissa_mask, const char* type) {
  for (int64_t i = 0; i < n; ++i) {
    Bits v;
    std::memcpy(&v, p + static_cast<size_t>(i) * sizeof(Bits), sizeof(Bits));
    if ((v & exponent_mask) == exponent_mask) {
      return fmt::format("element {}: {} {}", i, type, (v & mantissa_mask) ? "NaN" : "inf");
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> validate_row(GgmlType type, const void* data, int64_t n) {
  const TypeTraits& t = type_traits(type);
  if (!t.known) return fmt::format("unknown type id {}", static_cast<uint32_t>(type));
  if (n < 0 || n % t.block_size != 0) {
    return fmt::format("{} elements is not a multiple of the {} block size {}", n, t.name,
                       t.block_size);
  }
  const auto* p = static_cast<const uint8_t*>(data);
  const int64_t blocks = n / t.block_size;
  const size_t size = t.type_size;
  switch (type) {
    case GgmlType::F32:
      return check_floats<uint32_t>(p, n, 0x7F800000u, 0x007FFFFFu, "f32");
    case GgmlType::F16:
      return check_floats<uint16_t>(p, n, uint16_t{0x7C00}, uint16_t{0x03FF}, "f16");
    case GgmlType::BF16:
      return check_floats<uint16_t>(p, n, uint16_t{0x7F80}, uint16_t{0x007F}, "bf16");
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
    case GgmlType::IQ2_XXS:
    case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S:
    case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S:
    case GgmlType::IQ1_S:
    case GgmlType::TQ1_0:
    case GgmlType::TQ2_0:
    case GgmlType::Q1_0:
    case GgmlType::Q2_0: {
      // d is the first field of all of these except TQ1_0/TQ2_0, where it is the last.
      const size_t offset = (type == GgmlType::TQ1_0 || type == GgmlType::TQ2_0) ? size - 2 : 0;
      return check_scales(p, blocks, size, offset, "d");
    }
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      if (auto e = check_scales(p, blocks, size, 0, "d")) return e;
      return check_scales(p, blocks, size, 2,
                          type == GgmlType::Q4_1 || type == GgmlType::Q5_1 ? "m" : "dmin");
    }
    case GgmlType::Q2_K: {
      if (auto e = check_scales(p, blocks, size, offsetof(BlockQ2_K, d), "d")) return e;
      return check_scales(p, blocks, size, offsetof(BlockQ2_K, dmin), "dmin");
    }
    case GgmlType::Q3_K:
      return check_scales(p, blocks, size, offsetof(BlockQ3_K, d), "d");
    case GgmlType::Q6_K:
      return check_scales(p, blocks, size, offsetof(BlockQ6_K, d), "d");
    case GgmlType::Q8_K:
      for (int64_t i = 0; i < blocks; ++i) {
        float d;
        std::memcpy(&d, p + static_cast<size_t>(i) * size, 4);
        if (!std::isfinite(d)) return fmt::format("block {}: scale d is not finite", i);
      }
      return std::nullopt;
    case GgmlType::MXFP4:
      for (int64_t i = 0; i < blocks; ++i) {
        if (p[static_cast<size_t>(i) * size] == 0xFF) {
          return fmt::format("block {}: E8M0 scale is 0xFF (NaN)", i);
        }
      }
      return std::nullopt;
    default:
      return std::nullopt;  // integer types, F64, IQ1_M's split scale, NVFP4, Q8_1
  }
}

}  // namespace boltrt

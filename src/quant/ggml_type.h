// Tensor element types as ggml numbers them in GGUF files (ids are part of the file format).
// One table (ggml_type.cpp) says, for every id, its name, block size and bytes per block, and
// whether boltrt can compute with it. Block layouts themselves live in quant/blocks.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace boltrt {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  // 4, 5: removed (Q4_2, Q4_3)
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  // 31..33: removed (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8)
  TQ1_0 = 34,
  TQ2_0 = 35,
  // 36..38: removed (IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8)
  MXFP4 = 39,
  NVFP4 = 40,  // known to the format, not computable by boltrt
  Q1_0 = 41,
  Q2_0 = 42,
};

// Number of ids llama.cpp v0.4.0 defines (GGML_TYPE_COUNT); ids >= this are unknown.
inline constexpr uint32_t kGgmlTypeCount = 43;

struct TypeTraits {
  std::string_view name;    // "q4_K", as llama.cpp prints it
  int64_t block_size = 0;   // elements per block (1 for float types)
  size_t type_size = 0;     // bytes per block
  bool known = false;       // an id this version of the format defines
  bool removed = false;     // an id llama.cpp has retired (files using it are rejected)
  bool computable = false;  // boltrt can dequantize / multiply it
};

// Traits for a raw id from a file; unknown ids return {known = false}.
const TypeTraits& type_traits(uint32_t id);
inline const TypeTraits& type_traits(GgmlType t) {
  return type_traits(static_cast<uint32_t>(t));
}

// Bytes for n elements of type t; n must be a multiple of the block size.
size_t row_size(GgmlType t, int64_t n);

// "q4_K", "Q4_K", "q4_k" all parse; nullopt when unknown.
std::optional<GgmlType> type_from_name(std::string_view name);

}  // namespace boltrt

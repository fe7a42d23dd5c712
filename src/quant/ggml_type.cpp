// The ggml type table of llama.cpp v0.4.0 (shared/docs/gguf.md §6, quant-formats.md §1).
#include "quant/ggml_type.h"

#include <array>
#include <cctype>

#include "util/error.h"

namespace boltrt {
namespace {

constexpr TypeTraits type(std::string_view name, int64_t block_size, size_t type_size,
                          bool computable) {
  return TypeTraits{name, block_size, type_size, true, false, computable};
}
constexpr TypeTraits removed_type(std::string_view name) {
  return TypeTraits{name, 0, 0, false, true, false};
}

// Indexed by id. Names are llama.cpp's type names (ggml_type_name), except that removed ids get
// their former name.
constexpr std::array<TypeTraits, kGgmlTypeCount> kTable = {
    type("f32", 1, 4, true),          // 0
    type("f16", 1, 2, true),          // 1
    type("q4_0", 32, 18, true),       // 2
    type("q4_1", 32, 20, true),       // 3
    removed_type("q4_2"),             // 4
    removed_type("q4_3"),             // 5
    type("q5_0", 32, 22, true),       // 6
    type("q5_1", 32, 24, true),       // 7
    type("q8_0", 32, 34, true),       // 8
    type("q8_1", 32, 36, false),      // 9: activation-only (gguf-py's 40 is wrong)
    type("q2_K", 256, 84, true),      // 10
    type("q3_K", 256, 110, true),     // 11
    type("q4_K", 256, 144, true),     // 12
    type("q5_K", 256, 176, true),     // 13
    type("q6_K", 256, 210, true),     // 14
    type("q8_K", 256, 292, false),    // 15: activation-only (dequantize_row handles it)
    type("iq2_xxs", 256, 66, false),  // 16
    type("iq2_xs", 256, 74, false),   // 17
    type("iq3_xxs", 256, 98, false),  // 18
    type("iq1_s", 256, 50, false),    // 19
    type("iq4_nl", 32, 18, true),     // 20
    type("iq3_s", 256, 110, false),   // 21
    type("iq2_s", 256, 82, false),    // 22
    type("iq4_xs", 256, 136, true),   // 23
    type("i8", 1, 1, false),          // 24
    type("i16", 1, 2, false),         // 25
    type("i32", 1, 4, false),         // 26
    type("i64", 1, 8, false),         // 27
    type("f64", 1, 8, false),         // 28
    type("iq1_m", 256, 56, false),    // 29
    type("bf16", 1, 2, true),         // 30
    removed_type("q4_0_4_4"),         // 31
    removed_type("q4_0_4_8"),         // 32
    removed_type("q4_0_8_8"),         // 33
    type("tq1_0", 256, 54, false),    // 34
    type("tq2_0", 256, 66, false),    // 35
    removed_type("iq4_nl_4_4"),       // 36
    removed_type("iq4_nl_4_8"),       // 37
    removed_type("iq4_nl_8_8"),       // 38
    type("mxfp4", 32, 17, true),      // 39
    type("nvfp4", 64, 36, false),     // 40
    type("q1_0", 128, 18, false),     // 41
    type("q2_0", 64, 18, false),      // 42
};

constexpr TypeTraits kUnknown{"unknown", 0, 0, false, false, false};

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

const TypeTraits& type_traits(uint32_t id) {
  return id < kTable.size() ? kTable[id] : kUnknown;
}

size_t row_size(GgmlType t, int64_t n) {
  const TypeTraits& traits = type_traits(t);
  if (!traits.known)
    fail("row_size: ggml type id {} is not a known type", static_cast<uint32_t>(t));
  if (n < 0 || n % traits.block_size != 0) {
    fail("row_size: {} elements is not a multiple of the {} block size {}", n, traits.name,
         traits.block_size);
  }
  return static_cast<size_t>(n / traits.block_size) * traits.type_size;
}

std::optional<GgmlType> type_from_name(std::string_view name) {
  for (uint32_t id = 0; id < kTable.size(); ++id) {
    if (kTable[id].known && equal_ignoring_case(kTable[id].name, name)) {
      return static_cast<GgmlType>(id);
    }
  }
  return std::nullopt;
}

}  // namespace boltrt

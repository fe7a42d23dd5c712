// Dequantization of one row of any computable type to f32, bit-exact with ggml's
// dequantize_row_* (shared/docs/quant-formats.md). n must be a multiple of the block size.
#pragma once
#include <cstdint>

#include "quant/ggml_type.h"

namespace boltrt {

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

}  // namespace boltrt

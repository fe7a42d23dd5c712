// Reference quantizers, byte-identical with ggml's quantize_row_*_ref / ggml_quantize_chunk
// (shared/docs/quant-formats.md §4-6). n must be a multiple of the block size.
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/ggml_type.h"

namespace boltrt {

// Quantizes n floats into dst (row_size(type, n) bytes). `importance` (n weights, may be null)
// is used the way ggml uses an imatrix. Returns the bytes written.
// Throws boltrt::Error for a type without a quantizer or a non-finite input.
size_t quantize_row(GgmlType type, const float* src, void* dst, int64_t n,
                    const float* importance = nullptr);

bool can_quantize(GgmlType type);

}  // namespace boltrt

// Reference quantizers, byte-identical with ggml's quantize_row_*_ref / ggml_quantize_chunk
// (shared/docs/quant-formats.md §4-6). n must be a multiple of the block size.
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/ggml_type.h"

namespace boltrt {

// Quantizes n floats into dst (row_size(type, n) bytes). `importance` (n weights, may be null)
// is used the way ggml_quantize_chunk uses an imatrix; with it, n must be exactly one row (the
// legacy types' weights use the mean square of the whole row). Types without an imatrix variant
// (F32/F16/BF16, Q8_0, Q8_1, Q8_K, MXFP4) ignore it. Returns the bytes written.
// Throws boltrt::Error for a type without a quantizer or a non-finite input.
size_t quantize_row(GgmlType type, const float* src, void* dst, int64_t n,
                    const float* importance = nullptr);

bool can_quantize(GgmlType type);

}  // namespace boltrt

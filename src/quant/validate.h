// Checks of tensor data that ggml_validate_row_data performs (llama.cpp --check-tensors, and
// llama-quantize on its output; quant-formats.md §9): float types must hold no NaN/inf, the fp16
// scales of quantized blocks must be finite, Q8_K's fp32 scale finite, MXFP4's E8M0 not 0xFF.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "quant/ggml_type.h"

namespace boltrt {

// n elements of `type` at data (unaligned is fine). Returns a one-line description of the first
// problem ("block 12: scale d is inf"), or nullopt when the data is valid. Types without
// scale fields that can be invalid (and unknown layouts such as the IQ1-3 grids) pass.
std::optional<std::string> validate_row(GgmlType type, const void* data, int64_t n);

}  // namespace boltrt

// Converting a whole tensor (n_rows rows of n_per_row elements) from one ggml type to another,
// row by row in parallel: the data path of `boltrt quantize`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "quant/ggml_type.h"

namespace boltrt {

class ThreadPool;

// Reads n_rows rows of `from` at src, writes them as `to` at dst (row_size(to, n_per_row) bytes
// per row). Quantized sources are dequantized first (requantizing). `pool` may be null (one
// thread). Throws boltrt::Error naming `tensor_name` and the row for rejected input.
// `importance` (optional) holds n_per_row weights per slice of `rows_per_slice` rows (one slice
// per expert of a 3-D tensor); `first_row` is the index of src's first row in the tensor.
void convert_tensor(std::string_view tensor_name, GgmlType from, const void* src, GgmlType to,
                    void* dst, int64_t n_per_row, int64_t n_rows, ThreadPool* pool,
                    const float* importance = nullptr, int64_t rows_per_slice = 0,
                    int64_t first_row = 0);

}  // namespace boltrt

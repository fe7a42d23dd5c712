// Row-parallel tensor conversion. Each worker dequantizes a row of the source to f32 (a no-op
// copy for F32) and quantizes it; rows are independent, so the output does not depend on the
// number of threads.
#include "quant/quantize_tensor.h"

#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt {

void convert_tensor(std::string_view tensor_name, GgmlType from, const void* src, GgmlType to,
                    void* dst, int64_t n_per_row, int64_t n_rows, ThreadPool* pool,
                    const float* importance, int64_t rows_per_slice, int64_t first_row) {
  if (importance != nullptr && rows_per_slice <= 0) {
    fail("tensor '{}': importance weights need rows_per_slice > 0", tensor_name);
  }
  const TypeTraits& in = type_traits(from);
  const TypeTraits& out = type_traits(to);
  if (!in.computable && from != GgmlType::Q8_K) {
    fail("tensor '{}': cannot convert from type {}", tensor_name, in.name);
  }
  if (!can_quantize(to)) fail("tensor '{}': cannot convert to type {}", tensor_name, out.name);
  if (n_per_row % in.block_size != 0 || n_per_row % out.block_size != 0) {
    fail("tensor '{}': row length {} does not fit {} -> {}", tensor_name, n_per_row, in.name,
         out.name);
  }
  const size_t src_row = row_size(from, n_per_row);
  const size_t dst_row = row_size(to, n_per_row);
  const auto* src_bytes = static_cast<const uint8_t*>(src);
  auto* dst_bytes = static_cast<uint8_t*>(dst);

  std::mutex error_mutex;
  std::optional<std::string> first_error;
  auto work = [&](int64_t begin, int64_t end, int /*thread*/) {
    std::vector<float> row(static_cast<size_t>(n_per_row));
    // Q8_K destinations need 4-byte alignment; stage through an aligned buffer.
    std::vector<uint32_t> staging(to == GgmlType::Q8_K ? dst_row / 4 + 1 : 0);
    for (int64_t r = begin; r < end; ++r) {
      try {
        dequantize_row(from, src_bytes + static_cast<size_t>(r) * src_row, row.data(), n_per_row);
        uint8_t* out_row = dst_bytes + static_cast<size_t>(r) * dst_row;
        const float* qw =
            importance ? importance + ((first_row + r) / rows_per_slice) * n_per_row : nullptr;
        if (staging.empty()) {
          quantize_row(to, row.data(), out_row, n_per_row, qw);
        } else {
          quantize_row(to, row.data(), staging.data(), n_per_row, qw);
          std::memcpy(out_row, staging.data(), dst_row);
        }
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error)
          first_error = fmt::format("tensor '{}' row {}: {}", tensor_name, first_row + r, e.what());
        return;
      }
    }
  };
  if (pool != nullptr && pool->size() > 1) {
    pool->parallel_for(n_rows, 1, work);
  } else {
    work(0, n_rows, 0);
  }
  if (first_error) throw Error(*first_error);
}

}  // namespace boltrt

// Importance matrices written by llama-imatrix (GGUF: per weight "<name>.in_sum2" sums of squared
// activations and "<name>.counts" token counts, per expert), turned into the per-column weights
// llama-quantize hands to ggml_quantize_chunk: in_sum2 / count (1 where the count is 0).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace boltrt {

struct Imatrix {
  std::map<std::string, std::vector<float>> weights;  // tensor name -> ne0 * n_expert values
  std::vector<std::string> datasets;                  // imatrix.datasets
  int64_t chunk_count = 0;                            // imatrix.chunk_count
};

// Throws boltrt::Error for a file that is not a GGUF imatrix with its metadata (the legacy
// .dat format is not supported), mismatched sums/counts, non-F32 data or non-finite values.
Imatrix load_imatrix(const std::string& path);

}  // namespace boltrt

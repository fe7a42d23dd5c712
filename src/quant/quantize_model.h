// `boltrt quantize`: rewrite a GGUF model with llama-quantize's tensor type mix for a file type
// (quant_mix.h), our reference quantizers, and the metadata copied through (general.file_type
// and general.quantization_version updated). With the same input, the output is meant to be
// byte-identical with llama-quantize's (same key order, tensor order, types and bytes).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "quant/ggml_type.h"
#include "quant/quant_mix.h"

namespace boltrt {

namespace gguf {
class File;
}

struct QuantizeProgress {
  size_t tensor = 0;  // index of the tensor being written, in output order
  size_t tensor_count = 0;
  std::string_view name;
  GgmlType from = GgmlType::F32, to = GgmlType::F32;
  uint64_t bytes_done = 0;   // input bytes processed so far (all tensors)
  uint64_t bytes_total = 0;  // input bytes of all tensors
};

struct QuantizeOptions {
  FileType ftype = FileType::Q4_K_M;
  int threads = 1;
  bool allow_requantize = false;  // convert already-quantized tensors (as llama-quantize's flag)
  std::string imatrix_path;       // llama-imatrix GGUF file (optional), as --imatrix
  TypeOverrides overrides;  // --pure, --output-tensor-type, --token-embedding-type, --tensor-type
  std::function<void(const QuantizeProgress&)> progress;  // optional, called from one thread
};

struct QuantizeSummary {
  size_t n_tensors = 0;
  size_t n_converted = 0;  // tensors whose type changed
  size_t n_fallback = 0;   // tensors that took a shape fallback type
  uint64_t bytes_in = 0;   // tensor data bytes
  uint64_t bytes_out = 0;
  uint64_t n_elements = 0;
};

// The tensor list and hyperparameters plan_quantization() needs, read from a GGUF file.
ModelDesc describe_model(const gguf::File& file);

// Reads `in_path`, writes `out_path` atomically. Throws boltrt::Error (naming the tensor) for
// unsupported source types, non-finite weights, or I/O failures.
QuantizeSummary quantize_model(const std::string& in_path, const std::string& out_path,
                               const QuantizeOptions& options);

}  // namespace boltrt

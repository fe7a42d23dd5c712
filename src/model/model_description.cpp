#include "model/model_description.h"

#include <fmt/format.h>

#include "gguf/gguf.h"

namespace boltrt {
namespace {

// llama.cpp's size class of each architecture, from the layer count (and width where two sizes
// share a depth); "?B" for a layout it does not name, e.g. a synthetic tiny model.
std::string size_class(const gguf::File& file, const std::string& arch) {
  const int64_t n_block = file.get_arch_int("block_count").value_or(0);
  if (arch == "gemma4") {
    return n_block == 35   ? "E2B"
           : n_block == 42 ? "E4B"
           : n_block == 30 ? "26B.A4B"
           : n_block == 60 ? "31B"
                           : "?B";
  }
  if (arch == "qwen35") {
    // block_count includes the MTP blocks, which llama.cpp leaves out of the count.
    const int64_t n_layer = n_block - file.get_arch_int("nextn_predict_layers").value_or(0);
    const int64_t n_embd = file.get_arch_int("embedding_length").value_or(0);
    return n_layer == 24   ? (n_embd == 1024 ? "0.8B" : "2B")
           : n_layer == 32 ? (n_embd == 2560 ? "4B" : "9B")
           : n_layer == 64 ? "27B"
                           : "?B";
  }
  return "?B";
}

// llama.cpp's names of general.file_type for the types boltrt writes and reads.
std::string file_type_text(int64_t file_type) {
  switch (file_type) {
    case 0:
      return "all F32";
    case 1:
      return "F16";
    case 2:
      return "Q4_0";
    case 7:
      return "Q8_0";
    case 10:
      return "Q2_K - Medium";
    case 12:
      return "Q3_K - Medium";
    case 14:
      return "Q4_K - Small";
    case 15:
      return "Q4_K - Medium";
    case 17:
      return "Q5_K - Medium";
    case 18:
      return "Q6_K";
    case 32:
      return "BF16";
    default:
      return "?";
  }
}

}  // namespace

std::string model_description(const gguf::File& file) {
  const std::string arch = file.architecture();
  return fmt::format("{} {} {}", arch, size_class(file, arch),
                     file_type_text(file.get_int("general.file_type").value_or(-1)));
}

}  // namespace boltrt

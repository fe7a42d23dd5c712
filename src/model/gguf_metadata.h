// Reads one architecture's "<arch>.<name>" GGUF metadata keys the way llama.cpp's loader does
// (a scalar, or for per-layer keys a scalar or an array of exactly n values). Every missing
// required key or ill-typed value is one clear error naming the file and the key.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace boltrt {

namespace gguf {
class File;
}

class ArchMetadata {
 public:
  // prefix: the architecture name ("gemma4", "qwen35"); keys are "<prefix>.<name>".
  ArchMetadata(const gguf::File& file, std::string_view prefix);

  std::string key(std::string_view name) const;
  bool has(std::string_view name) const;

  int64_t required_int(std::string_view name) const;
  // fallback when the key is absent; present but not an integer is an error
  int64_t optional_int(std::string_view name, int64_t fallback) const;
  float required_float(std::string_view name) const;
  float optional_float(std::string_view name, float fallback) const;
  // A key read as "scalar (copied n times), or an array of exactly n integers"
  // (feed_forward_length, head_count, recurrent_layers, rope.dimension_sections, ...). Absent:
  // an error when required, else n copies of fallback.
  std::vector<int64_t> ints(std::string_view name, int64_t n, bool required,
                            int64_t fallback) const;

 private:
  const gguf::File& file_;
  std::string prefix_;
};

}  // namespace boltrt

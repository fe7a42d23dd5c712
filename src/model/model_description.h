// The one-line model name llama-bench prints ("gemma4 E4B Q4_K - Medium"): architecture, size
// class from the layer layout (as llama.cpp's per-architecture type), file type. Kept in the
// model layer because the size classes are per architecture.
#pragma once
#include <string>

namespace boltrt {

namespace gguf {
class File;
}

std::string model_description(const gguf::File& file);

}  // namespace boltrt

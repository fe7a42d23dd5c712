#include "model/gguf_metadata.h"

#include "gguf/gguf.h"
#include "util/error.h"

namespace boltrt {

ArchMetadata::ArchMetadata(const gguf::File& file, std::string_view prefix)
    : file_(file), prefix_(prefix) {}

std::string ArchMetadata::key(std::string_view name) const {
  return prefix_ + "." + std::string(name);
}

bool ArchMetadata::has(std::string_view name) const {
  return file_.find(key(name)) != nullptr;
}

int64_t ArchMetadata::required_int(std::string_view name) const {
  if (!has(name)) fail("{}: missing key '{}'", file_.path(), key(name));
  auto v = file_.get_int(key(name));
  if (!v) fail("{}: key '{}' is not an integer", file_.path(), key(name));
  return *v;
}

int64_t ArchMetadata::optional_int(std::string_view name, int64_t fallback) const {
  return has(name) ? required_int(name) : fallback;
}

float ArchMetadata::required_float(std::string_view name) const {
  if (!has(name)) fail("{}: missing key '{}'", file_.path(), key(name));
  auto v = file_.get_float(key(name));
  if (!v) fail("{}: key '{}' is not a number", file_.path(), key(name));
  return static_cast<float>(*v);
}

float ArchMetadata::optional_float(std::string_view name, float fallback) const {
  return has(name) ? required_float(name) : fallback;
}

std::vector<int64_t> ArchMetadata::ints(std::string_view name, int64_t n, bool required,
                                        int64_t fallback) const {
  const std::string k = key(name);
  const gguf::Value* value = file_.find(k);
  if (!value) {
    if (required) fail("{}: missing key '{}'", file_.path(), k);
    return std::vector<int64_t>(static_cast<size_t>(n), fallback);
  }
  if (const gguf::Array* array = value->as_array()) {
    if (static_cast<int64_t>(array->items.size()) != n) {
      fail("{}: key '{}' has {} values, expected {}", file_.path(), k, array->items.size(), n);
    }
    std::vector<int64_t> out;
    for (const gguf::Value& item : array->items) {
      auto v = item.as_int();
      if (!v) fail("{}: key '{}' holds a non-integer value", file_.path(), k);
      out.push_back(*v);
    }
    return out;
  }
  auto v = value->as_int();
  if (!v) fail("{}: key '{}' is not an integer", file_.path(), k);
  return std::vector<int64_t>(static_cast<size_t>(n), *v);
}

}  // namespace boltrt

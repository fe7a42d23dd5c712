#include "generate/suppress_tokens.h"

#include <limits>
#include <string>

#include "gguf/gguf.h"
#include "util/error.h"

namespace boltrt {

std::vector<int32_t> read_suppress_tokens(const gguf::File& file) {
  constexpr const char* kKey = "tokenizer.ggml.suppress_tokens";
  std::vector<int32_t> ids;
  const gguf::Value* value = file.find(kKey);
  if (value == nullptr) return ids;
  const gguf::Array* list = value->as_array();
  if (list == nullptr || list->type != gguf::ValueType::INT32) {
    fail("{}: {}: expected an array of i32, got {}", file.path(), kKey,
         list == nullptr ? std::string(gguf::value_type_name(value->type))
                         : "array of " + std::string(gguf::value_type_name(list->type)));
  }
  const gguf::Array* tokens = file.get_array("tokenizer.ggml.tokens");
  const int64_t n_vocab = tokens == nullptr ? 0 : static_cast<int64_t>(tokens->items.size());
  for (const gguf::Value& item : list->items) {
    const int64_t id = item.as_int().value_or(-1);
    if (id >= 0 && id < n_vocab) ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

void apply_suppress_tokens(std::span<float> logits, std::span<const int32_t> ids) {
  for (const int32_t id : ids) {
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) {
      logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
    }
  }
}

}  // namespace boltrt

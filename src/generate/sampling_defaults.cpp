#include "generate/sampling_defaults.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace boltrt {
namespace {

float read_float(const gguf::File& file, const char* key, float current) {
  const auto value = file.get_float(key);
  if (!value) return current;
  if (!std::isfinite(*value)) fail("{}: {} = {} is not a finite number", file.path(), key, *value);
  return static_cast<float>(*value);
}

int32_t read_int32(const gguf::File& file, const char* key, int32_t current) {
  const auto value = file.get_int(key);
  if (!value) return current;
  if (*value < std::numeric_limits<int32_t>::min() ||
      *value > std::numeric_limits<int32_t>::max()) {
    fail("{}: {} = {} does not fit in 32 bits", file.path(), key, *value);
  }
  return static_cast<int32_t>(*value);
}

}  // namespace

SamplerConfig sampling_defaults_from_gguf(const gguf::File& file, SamplerConfig defaults) {
  SamplerConfig c = defaults;
  c.top_k = read_int32(file, "general.sampling.top_k", c.top_k);
  c.top_p = read_float(file, "general.sampling.top_p", c.top_p);
  c.min_p = read_float(file, "general.sampling.min_p", c.min_p);
  c.temperature = read_float(file, "general.sampling.temp", c.temperature);
  c.penalty_last_n = read_int32(file, "general.sampling.penalty_last_n", c.penalty_last_n);
  c.repeat_penalty = read_float(file, "general.sampling.penalty_repeat", c.repeat_penalty);
  // libllama clamps a negative window to 0 (penalties off).
  c.penalty_last_n = std::max(c.penalty_last_n, 0);
  if (c.repeat_penalty <= 0.0f) {
    fail("{}: general.sampling.penalty_repeat = {} must be greater than 0", file.path(),
         c.repeat_penalty);
  }
  return c;
}

}  // namespace boltrt

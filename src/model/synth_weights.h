// Deterministic random weights for synthetic models: one PRNG stream per (seed, tensor, row),
// exactly-rounded arithmetic only (no libm), so the bytes never depend on the machine or on the
// thread count.
#pragma once
#include <cstdint>
#include <string_view>

#include "gguf/gguf_writer.h"
#include "quant/ggml_type.h"

namespace boltrt {
class ThreadPool;
}

namespace boltrt::model {

struct WeightInit {
  enum class Kind { Normal, RopeFreqs } kind = Kind::Normal;
  double mean = 0.0;
  double stddev = 1.0;
  int64_t rotating = 0;  // RopeFreqs: the first `rotating` entries are 1, the rest 1e30
  static WeightInit normal(double mean, double stddev) { return {Kind::Normal, mean, stddev, 0}; }
  static WeightInit rope_freqs(int64_t rotating) { return {Kind::RopeFreqs, 0, 0, rotating}; }
};

// xoshiro256** seeded through splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  float uniform();  // [0, 1), 24 bits
  // Approximately N(0, 1): sum of four uniforms, centred and scaled (bounded at ±3.46).
  float normal();

 private:
  uint64_t s_[4];
};

uint64_t tensor_stream_seed(uint64_t seed, std::string_view tensor_name);

// Fills one row of n floats from its init rule.
void draw_row(const WeightInit& init, uint64_t tensor_seed, int64_t row, float* out, int64_t n);

// Produces `rows` rows of `ne0` elements of `type` into sink (optionally in parallel).
// Quantized types: random_blocks writes random codes under scales that give the init's standard
// deviation (fast, for the real shapes); otherwise the float draws are quantized with
// quantize_row (so a quantized model approximates the f32 model of the same seed).
void write_weight_rows(GgmlType type, const WeightInit& init, uint64_t tensor_seed, int64_t ne0,
                       int64_t rows, bool random_blocks, ThreadPool* pool, gguf::TensorSink& sink);

}  // namespace boltrt::model

// Deterministic random weights for synthetic models: one PRNG stream per (seed, tensor, row),
// exactly-rounded arithmetic only (no libm), so the bytes never depend on the machine or on the
// thread count.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_writer.h"
#include "quant/ggml_type.h"
#include "util/error.h"

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

// The rule named `name` in a preset table (rules with a `name` field); an unknown name is one
// error listing the arch's known presets.
template <class Rule, size_t N>
const Rule& find_preset(const Rule (&rules)[N], std::string_view arch, std::string_view name) {
  for (const Rule& r : rules) {
    if (r.name == name) return r;
  }
  std::string all;
  for (const Rule& r : rules) all += (all.empty() ? "" : ", ") + std::string(r.name);
  fail("unknown {} preset '{}' (known: {})", arch, name, all);
}

template <class Rule, size_t N>
std::vector<std::string> preset_names(const Rule (&rules)[N]) {
  std::vector<std::string> names;
  for (const Rule& r : rules) names.emplace_back(r.name);
  return names;
}

// One tensor of a synthetic model: its shape, storage type and how its values are drawn.
struct SynthTensor {
  std::string name;
  std::vector<int64_t> ne;
  GgmlType type = GgmlType::F32;
  WeightInit init;
};

// Weight-type names of `boltrt synth --type`. "Uniform" types put every matrix in one type (what
// kernel tests want): f32 f16 bf16 q8_0 q4_0 q4_k q6_k. Any other name is a llama-quantize file
// type (q4_k_m, q4_k_s, q5_k_m, ...) and gets exactly llama-quantize's per-tensor mix.
bool synth_uniform_type(std::string_view type);
// general.file_type for a type name; throws boltrt::Error for an unknown name.
uint32_t synth_file_type(std::string_view type);
// Storage type of one matrix for a uniform type; rows that the type's block does not divide
// fall back to Q8_0, then F16.
GgmlType synth_matrix_type(std::string_view type, int64_t ne0);
// Bytes of a tensor in its storage type.
uint64_t synth_tensor_bytes(const SynthTensor& t);
// llama-quantize's choice for every tensor (all drawn as f32) of a model of that architecture.
void apply_synth_quant_mix(std::vector<SynthTensor>& tensors, std::string_view arch,
                           int64_t n_layer, int64_t n_expert, std::string_view type);
// Adds every tensor to `w`, produced lazily when the writer runs (rows from write_weight_rows,
// or all-zero bytes when zero_weights). `pool` (may hold null) must outlive the writer's write().
void add_synth_tensors(gguf::Writer& w, const std::vector<SynthTensor>& tensors, uint64_t seed,
                       bool random_blocks, bool zero_weights,
                       const std::unique_ptr<ThreadPool>& pool);

}  // namespace boltrt::model

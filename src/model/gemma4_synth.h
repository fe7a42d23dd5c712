// Synthetic Gemma 4 models: complete `gemma4` GGUF files with deterministic random weights, in
// every layout of shared/docs/gemma4.md (PLE on/off, shared-KV layers, per-layer FFN and KV-head
// arrays, K=V full layers, merged or split experts, tied or separate output). Used by tests,
// benchmarks and `boltrt synth`.
//
// Determinism: every row of every tensor has its own PRNG stream seeded from (seed, tensor name,
// row), and only exactly-rounded arithmetic is used (no libm), so the bytes are identical on
// any machine and for any thread count.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace boltrt::model {

struct Gemma4Config {
  std::string preset;
  int64_t n_embd = 0;                // D
  int64_t n_layer = 0;               // L
  int64_t n_head = 0;                // H (query heads, every layer)
  int64_t head_dim_swa = 0;          // attention.key_length_swa
  int64_t head_dim_full = 0;         // attention.key_length
  std::vector<int64_t> n_head_kv;    // per layer
  bool n_head_kv_as_array = false;   // write head_count_kv as an array
  std::vector<int64_t> n_ff;         // per layer dense FFN width
  bool n_ff_as_array = false;        // write feed_forward_length as an array
  std::vector<bool> is_swa;          // sliding_window_pattern
  int64_t shared_kv_layers = 0;      // trailing layers reading another layer's KV
  bool kv_on_shared_layers = false;  // still write attn_k/attn_k_norm/attn_v there (unused)
  bool k_eq_v_on_full = false;       // no attn_v on full layers
  int64_t n_embd_per_layer = 0;      // P; 0 disables per-layer embeddings
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;  // 0 experts = dense
  bool split_experts = false;  // ffn_gate_exps + ffn_up_exps instead of merged
  bool tied_output = true;     // no output.weight
  int64_t n_vocab = 0;         // pads the built-in vocabulary with <unusedN>
  int64_t context_length = 0;
  int64_t sliding_window = 0;
  float rope_base_full = 1e6f, rope_base_swa = 1e4f;
  float partial_rotary = 0.25f;  // fraction of full-layer head dims that rotate
  float logit_softcap = 30.0f;
  float rms_eps = 1e-6f;
};

std::vector<std::string> gemma4_preset_names();
// tiny, tiny-e2b-like, tiny-moe, e2b, e4b, 26b-a4b, 31b. n_layer > 0 rebuilds the layer pattern,
// the shared-KV split and the per-layer arrays for that many layers the way the preset does.
Gemma4Config gemma4_preset(std::string_view name, int64_t n_layer = 0);

struct Gemma4SynthOptions {
  // f32 f16 bf16 q8_0 q4_0 q4_k q6_k: every matrix that type (rows it cannot hold: Q8_0/F16);
  // q4_k_m q4_k_s q5_k_m q5_k_s q4_1 q5_0 q5_1: llama-quantize's per-tensor mix.
  std::string type = "f32";
  uint64_t seed = 1;
  std::string vocab_from;  // copy the tokenizer from this GGUF instead of the built-in one
  int threads = 1;         // only speed; the output does not depend on it
  // Quantized weights: -1 auto (random blocks above 300M parameters, quantize_row of the float
  // draws below, so small quantized models approximate the f32 model of the same seed),
  // 0 always quantize_row, 1 always random blocks with sane scales (fast).
  int random_blocks = -1;
  // Scales the norms at the end of every block (post-attention, post-FFN, per-layer embedding):
  // below 1 the residual stream stays close to the token embedding, so greedy choices have wide
  // margins. For timing benchmarks whose forced choices must not flip when a batch of another
  // size rounds differently in the last bits (which a deep random model amplifies). 1: as usual.
  double block_output_scale = 1.0;
  // Every tensor's bytes zero: a layout-only file (the real shapes, types and metadata) for
  // memory planning and loading tests of full-size models; written as a sparse file, it takes
  // no disk (`boltrt synth --zero-weights`).
  bool zero_weights = false;
};

struct Gemma4SynthStats {
  uint64_t file_bytes = 0;
  uint64_t n_tensors = 0;
  uint64_t n_params = 0;
  int64_t n_vocab = 0;
};

// What write_gemma4_synth would write (sizes and counts), without generating any weights.
Gemma4SynthStats plan_gemma4_synth(const Gemma4Config& config, const Gemma4SynthOptions& options);

// Writes the model to `path` (atomically). Throws boltrt::Error on bad options or I/O failure.
Gemma4SynthStats write_gemma4_synth(const Gemma4Config& config, const Gemma4SynthOptions& options,
                                    const std::string& path);

}  // namespace boltrt::model

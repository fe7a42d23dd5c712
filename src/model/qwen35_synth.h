// Synthetic Qwen3.5 models: complete `qwen35` GGUF files with deterministic random weights that
// llama.cpp loads, in the layouts of shared/docs/qwen35.md (full-attention interval or explicit
// recurrent-layer list, head and state sizes, key heads fewer than value heads, tied or separate
// output head, optional MTP blocks present but unused). Used by tests, benchmarks and
// `boltrt synth --arch qwen35`.
//
// Determinism as for Gemma 4 (synth_weights.h): one PRNG stream per (seed, tensor, row), so the
// bytes are identical on any machine and for any thread count.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace boltrt::model {

struct Qwen35SynthConfig {
  std::string preset;
  int64_t n_embd = 0;   // D
  int64_t n_layer = 0;  // trunk layers L (block_count = L + n_nextn)
  int64_t n_nextn = 0;  // MTP blocks appended after the trunk (present, never run)
  int64_t n_ff = 0;
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;  // full attention: H, Hkv, hd
  int64_t n_rot = 0;                                // rotated dims per head
  std::array<int64_t, 4> rope_sections{};
  float rope_base = 1e7f;
  int64_t full_attention_interval = 4;  // layer i is attention when (i + 1) % interval == 0
  // non-empty: written as attention.recurrent_layers (block_count entries, 1 = GDN) instead of
  // the interval
  std::vector<bool> recurrent_layers;
  int64_t conv_kernel = 4;  // Kc
  int64_t d_state = 0;      // dk = dv
  int64_t n_k_head = 0;     // Hk (group_count)
  int64_t n_v_head = 0;     // Hv (time_step_rank), a multiple of Hk
  bool tied_output = true;
  int64_t n_vocab = 0;  // the built-in vocabulary is padded to this size
  int64_t context_length = 0;
  float rms_eps = 1e-6f;
};

std::vector<std::string> qwen35_preset_names();
// tiny (fast test model: D 256, 8 layers, Hk 2 < Hv 4), 0.8b, 2b, 4b, 9b, 27b (§2.5 shapes).
// n_layer > 0 overrides the trunk layer count.
Qwen35SynthConfig qwen35_preset(std::string_view name, int64_t n_layer = 0);

struct Qwen35SynthOptions {
  std::string type = "f32";  // as Gemma4SynthOptions::type (synth_weights.h)
  uint64_t seed = 1;
  int threads = 1;  // only speed; the output does not depend on it
  // -1 auto (random blocks above 300M parameters), 0 quantize the float draws, 1 random blocks
  int random_blocks = -1;
  bool zero_weights = false;  // layout-only file, written sparse
};

struct Qwen35SynthStats {
  uint64_t file_bytes = 0;
  uint64_t n_tensors = 0;
  uint64_t n_params = 0;
  int64_t n_vocab = 0;
};

// Writes the model to `path` (atomically). Throws boltrt::Error on a bad config or I/O failure.
Qwen35SynthStats write_qwen35_synth(const Qwen35SynthConfig& config,
                                    const Qwen35SynthOptions& options, const std::string& path);

}  // namespace boltrt::model

// Synthetic DFlash drafts for tests: a complete `dflash` GGUF (as llama.cpp's converter lays it
// out: keys under dflash.*, target layer ids stored +1, mask token under tokenizer.ggml.*) with
// deterministic random f32 weights, sized to fit a given target (Gemma 4 or Qwen3.5).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/gemma4.h"
#include "quant/ggml_type.h"

namespace boltrt::gguf {
class File;
}

namespace boltrt::model {

struct DFlashSynthOptions {
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t head_dim = 32;
  int64_t n_ff = 256;
  int64_t block_size = 8;
  float rope_base = 1e6f;
  // HF target_layer_ids (layer outputs); empty: 3 spread from layer 1 to L-3 like z-lab's default.
  std::vector<int32_t> target_layer_ids;
  int32_t mask_token = -1;    // -1: the target's last token id
  int64_t n_vocab_draft = 0;  // > 0: reduced vocabulary (own output head + d2t)
  // The matrices' type (fc, attention, FFN, reduced head), quantized from the float draws;
  // norms stay F32, as do matrices whose rows the type's block size does not divide.
  GgmlType matrix_type = GgmlType::F32;
  uint64_t seed = 1;
  // Copy the tokenizer.* keys from this file (the target), as llama.cpp's converter does; needed
  // for llama.cpp to load the draft. Null: no tokenizer keys besides the mask token.
  const gguf::File* tokenizer_from = nullptr;
};

// The target sizes a draft must fit.
struct DFlashSynthTarget {
  int64_t n_embd = 0, n_layer = 0, n_vocab = 0, n_ctx_train = 0;
  DFlashSynthTarget(const boltrt::Gemma4Config& c)  // NOLINT(google-explicit-constructor)
      : n_embd(c.n_embd), n_layer(c.n_layer), n_vocab(c.n_vocab), n_ctx_train(c.n_ctx_train) {}
  DFlashSynthTarget(int64_t embd, int64_t layers, int64_t vocab, int64_t ctx)
      : n_embd(embd), n_layer(layers), n_vocab(vocab), n_ctx_train(ctx) {}
};

// Writes the draft to `path`. Throws boltrt::Error on bad options or I/O failure.
void write_dflash_synth(const DFlashSynthTarget& target, const DFlashSynthOptions& options,
                        const std::string& path);

}  // namespace boltrt::model

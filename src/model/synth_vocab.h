// A small built-in `gemma4` tokenizer vocabulary for synthetic models: the Gemma 4 special and
// control tokens at their real ids 0-4 (and the chat markers after them), the 256 <0xXX> byte
// tokens, printable ASCII, "▁" and newline runs, and BPE merges for a few dozen common English
// words, padded with <unusedN> to any vocabulary size. Text tokenizes with llama.cpp's gemma4
// BPE into whole words where it can and bytes otherwise.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"

namespace boltrt::model {

struct SynthVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t>
      token_types;  // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;
  uint32_t pad_id = 0, eos_id = 1, bos_id = 2, unk_id = 3;
};

// At least n_vocab tokens (more only if the base vocabulary alone is larger).
SynthVocab build_synth_vocab(int64_t n_vocab);
// Writes every tokenizer.* key a gemma4 model needs.
void write_synth_vocab(gguf::Writer& w, const SynthVocab& v);

}  // namespace boltrt::model

// Options of one sequence (a LanguageModel session) on the CPU, for every architecture.
#pragma once
#include <cstdint>

#include "runtime/kv_cache.h"

namespace boltrt {

struct SessionOptions {
  int64_t n_ctx = 4096;   // positions this sequence can hold (clamped to the model's own)
  int64_t n_batch = 512;  // micro-batch size for prompt processing
  KvType kv_type = KvType::F16;
  int64_t attention_chunk = 2048;  // keys per attention pass (bounds the f32 copy of K/V)
  // Models with a recurrent state (Qwen3.5): state copies kept for rollback, one taken at the
  // start of each decode call (the most recent ones are kept).
  int64_t recurrent_checkpoints = 2;
};

}  // namespace boltrt

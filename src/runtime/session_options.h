// Options of one sequence (a LanguageModel session) on the CPU, for every architecture.
#pragma once
#include <algorithm>
#include <cstdint>

#include "runtime/kv_cache.h"
#include "util/error.h"

namespace boltrt {

struct SessionOptions {
  int64_t n_ctx = 4096;   // positions this sequence can hold (clamped to the model's own)
  int64_t n_batch = 512;  // micro-batch size for prompt processing
  KvType kv_type = KvType::F16;
  int64_t attention_chunk = 2048;  // keys per attention pass (bounds each query's scores)
  // Models with a recurrent state: state copies kept for rollback, one taken at the start of
  // each decode call (the most recent ones are kept).
  int64_t recurrent_checkpoints = 2;
  // ... and prompt checkpoints for prefix reuse (a server slot or a chat rolled back to a shared
  // prefix): the state at the start and end of each multi-token decode call and at each
  // micro-batch boundary inside one, at most this many, thinned to stay spread over the history.
  // Each is one more copy of the recurrent state.
  int64_t prompt_checkpoints = 0;
};

// The positions a session holds: the requested context, clamped to the model's trained one
// (0: unknown); a request of 0 or less is an error.
inline int64_t clamp_context(int64_t n_ctx, int64_t n_ctx_train) {
  if (n_ctx <= 0) fail("context size {} must be > 0", n_ctx);
  return n_ctx_train > 0 ? std::min(n_ctx, n_ctx_train) : n_ctx;
}

}  // namespace boltrt

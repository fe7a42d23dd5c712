// Sampler defaults stored in a GGUF file (general.sampling.*), as llama.cpp applies them: each
// key present replaces the built-in default; flags given by the user override both.
#pragma once
#include "generate/sampler.h"
#include "gguf/gguf.h"

namespace boltrt {

// Reads general.sampling.{temp, top_k, top_p, min_p, penalty_last_n, penalty_repeat} into a
// copy of `defaults`. Throws boltrt::Error naming the key when a value has the wrong type or an
// impossible value.
SamplerConfig sampling_defaults_from_gguf(const gguf::File& file, SamplerConfig defaults);

}  // namespace boltrt

// tokenizer.ggml.suppress_tokens: ids a model file says must never be generated. llama.cpp
// reads the list in its vocabulary loader and common/sampling.cpp turns it into a logit-bias
// sampler of -inf for each id (after the user's biases, before every other sampler); only
// generation applies it, never perplexity or raw logits.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace boltrt::gguf {
class File;
}

namespace boltrt {

// The list as llama.cpp's loader reads it: absent key -> empty; present but not an array of
// i32 -> boltrt::Error naming the file and key; ids outside [0, n_vocab) dropped, where n_vocab
// is the length of tokenizer.ggml.tokens; order and duplicates kept. (text::Tokenizer's
// suppress_tokens() gives the same list when a tokenizer is already built.)
std::vector<int32_t> read_suppress_tokens(const gguf::File& file);

// Sets logits[id] to -inf for every id in the span (ids outside it are ignored). llama.cpp adds
// a bias of -inf, which gives the same -inf for every finite logit.
void apply_suppress_tokens(std::span<float> logits, std::span<const int32_t> ids);

}  // namespace boltrt

// LanguageModel — one sequence's view of a model: token ids in, logits out, with a KV cache
// that can be rolled back. The generation loop (src/generate/) talks only to this interface,
// so samplers, stop rules, speculative decoding and the reasoning controller are tested with
// scripted fakes and run unchanged on any model and backend.
#pragma once
#include <cstdint>
#include <span>

namespace boltrt {

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  virtual int64_t n_vocab() const = 0;
  virtual int64_t n_ctx() const = 0;   // the most positions this sequence can hold
  virtual int64_t n_past() const = 0;  // tokens already in the cache

  // Appends `tokens` at positions n_past() .. n_past()+n-1 and runs the model over them.
  // Returns the logits of the last token (n_vocab floats), or of every token when all_logits
  // (n * n_vocab floats, token-major). The span stays valid until the next call.
  // Throws boltrt::Error when the tokens would not fit in n_ctx().
  virtual std::span<const float> decode(std::span<const int32_t> tokens,
                                        bool all_logits = false) = 0;

  // Forgets every token at position >= n_past (n_past <= n_past()).
  virtual void rollback(int64_t n_past) = 0;

  void reset() { rollback(0); }
};

}  // namespace boltrt

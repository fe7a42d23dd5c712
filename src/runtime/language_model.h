// LanguageModel — one sequence's view of a model: token ids in, logits out, with a KV cache
// that can be rolled back. The generation loop (src/generate/) talks only to this interface,
// so samplers, stop rules, speculative decoding and the reasoning controller are tested with
// scripted fakes and run unchanged on any model and backend.
#pragma once
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "util/error.h"

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

  // A speculative verify batch: runs `tokens` as decode(tokens, true) does, but a model may
  // compute a row's logits only when verify_row() asks for it (verification reads the rows in
  // order and stops at the first rejected draft, so the output head of the rows after it is
  // never needed). verify_row(j) (j < tokens.size()) returns row j's n_vocab logits, equal to
  // row j of decode(tokens, true), valid until the next decode or rollback.
  virtual void decode_verify(std::span<const int32_t> tokens) {
    verify_logits_ = decode(tokens, /*all_logits=*/true);
  }
  virtual std::span<const float> verify_row(int64_t j) {
    const size_t V = static_cast<size_t>(n_vocab());
    return verify_logits_.subspan(static_cast<size_t>(j) * V, V);
  }

  void reset() { rollback(0); }
  // The longest batch a speculative verify may decode and then roll back to any of its rows: a
  // verify of draft + 1 tokens is rolled back by up to draft tokens. Default: no limit (Gemma 4
  // sessions: n_batch, what their sliding-window rings keep).
  virtual int64_t max_verify_batch() const { return std::numeric_limits<int64_t>::max(); }

  // Hidden-state capture for speculative drafting (DFlash KV injection, shared/docs/dflash.md
  // A4): with a non-empty list of layer ids every decode() also fills taps() with
  // [n_tokens][layers.size()][D] for every token of that call. A model that cannot capture
  // throws boltrt::Error for a non-empty list; an empty list turns capture off.
  virtual void set_tap_layers(std::vector<int32_t> layers) {
    if (!layers.empty()) fail("this model cannot capture hidden states for a draft");
  }
  // The taps of the last decode() call (empty when capture is off).
  virtual std::span<const float> taps() const { return {}; }

 private:
  std::span<const float> verify_logits_;  // the default decode_verify's rows
};

}  // namespace boltrt

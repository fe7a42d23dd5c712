// A scripted stand-in for a real model, for tests of `boltrt batch` (hidden CLI flag
// --fake-model): byte tokens 0..255, end-of-generation 256 and an answer marker 257. The prompt
// is the request's text (chat messages rendered as "role: content\n" lines) followed by the
// marker; the model then answers with the text upper-cased and ends. An optional delay per
// decode() makes runs slow enough to be killed at random moments.
#pragma once
#include <cstdint>
#include <memory>

#include "batch/engine.h"

namespace boltrt::batch {

inline constexpr int32_t kFakeEnd = 256;
inline constexpr int32_t kFakeMarker = 257;
inline constexpr int64_t kFakeVocab = 258;

class FakeLanguageModel : public LanguageModel {
 public:
  FakeLanguageModel(int64_t n_ctx, int delay_us) : n_ctx_(n_ctx), delay_us_(delay_us) {}
  int64_t n_vocab() const override { return kFakeVocab; }
  int64_t n_ctx() const override { return n_ctx_; }
  int64_t n_past() const override { return static_cast<int64_t>(context_.size()); }
  std::span<const float> decode(std::span<const int32_t> tokens, bool all_logits) override;
  void rollback(int64_t n_past) override;
  // The token this model scores highest after `context`.
  static int32_t next_token(std::span<const int32_t> context);

 private:
  int64_t n_ctx_;
  int delay_us_;
  std::vector<int32_t> context_;
  std::vector<float> logits_;
};

// `parallel` fake sessions, interleaved.
std::unique_ptr<BatchEngine> make_fake_engine(int parallel, int64_t n_ctx, int delay_us);

}  // namespace boltrt::batch

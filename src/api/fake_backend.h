// A scripted ModelBackend for tests of the API and of `boltrt batch` (hidden CLI flag
// --fake-model). Byte tokens 0..255 plus:
//   256 end of generation, 257 answer marker, 258/259 open/close a thought, 260 "think" flag.
// A prompt is the request's text followed by the marker, which tokenize() adds as its "special
// token" (chat: "role: content\n" lines, preceded by the think flag when thinking is on). The model
// answers with the text upper-cased and ends; with the think flag it first "thinks" the text as it
// is, between 258 and 259. An optional delay per decode() makes runs slow enough to kill at random
// moments.
#pragma once
#include <cstdint>
#include <memory>

#include "api/model_backend.h"

namespace boltrt {

inline constexpr int32_t kFakeEnd = 256;
inline constexpr int32_t kFakeMarker = 257;
inline constexpr int32_t kFakeThinkOpen = 258;
inline constexpr int32_t kFakeThinkClose = 259;
inline constexpr int32_t kFakeThinkFlag = 260;
inline constexpr int64_t kFakeVocab = 261;

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

std::shared_ptr<ModelBackend> make_fake_backend(int64_t n_ctx, int delay_us = 0);

}  // namespace boltrt

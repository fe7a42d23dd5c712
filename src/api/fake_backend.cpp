#include "api/fake_backend.h"

#include <cctype>
#include <chrono>
#include <thread>

#include "util/error.h"

namespace boltrt {

int32_t FakeLanguageModel::next_token(std::span<const int32_t> context) {
  // The answer so far follows the last marker; the question precedes it, back to the previous
  // marker or end token.
  size_t marker = context.size();
  while (marker > 0 && context[marker - 1] != kFakeMarker) --marker;
  if (marker == 0) return kFakeEnd;
  size_t start = marker - 1;
  while (start > 0 && context[start - 1] != kFakeMarker && context[start - 1] != kFakeEnd) --start;
  const bool think = start < marker - 1 && context[start] == kFakeThinkFlag;
  if (think) ++start;
  std::vector<int32_t> answer;
  if (think) {
    answer.push_back(kFakeThinkOpen);
    answer.insert(answer.end(), context.begin() + start, context.begin() + marker - 1);
    answer.push_back(kFakeThinkClose);
  }
  for (size_t i = start; i + 1 < marker; ++i) {
    const int32_t c = context[i];
    answer.push_back(c < 128 ? static_cast<int32_t>(std::toupper(c)) : c);
  }
  answer.push_back(kFakeEnd);
  const size_t answered = context.size() - marker;
  return answered < answer.size() ? answer[answered] : kFakeEnd;
}

std::span<const float> FakeLanguageModel::decode(std::span<const int32_t> tokens, bool all_logits) {
  if (all_logits) fail("fake model: all_logits is not supported");
  if (tokens.empty()) fail("fake model: decode of no tokens");
  if (n_past() + static_cast<int64_t>(tokens.size()) > n_ctx_)
    fail("fake model: {} tokens do not fit in the context of {} (holding {})", tokens.size(),
         n_ctx_, n_past());
  for (int32_t t : tokens)
    if (t < 0 || t >= kFakeVocab) fail("fake model: token {} outside the vocabulary", t);
  if (delay_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us_));
  context_.insert(context_.end(), tokens.begin(), tokens.end());
  logits_.assign(kFakeVocab, 0.0f);
  logits_[static_cast<size_t>(next_token(context_))] = 10.0f;
  return logits_;
}

void FakeLanguageModel::rollback(int64_t n_past) {
  if (n_past < 0 || n_past > this->n_past()) fail("fake model: bad rollback to {}", n_past);
  context_.resize(static_cast<size_t>(n_past));
}

namespace {

class FakeBackend : public ModelBackend {
 public:
  FakeBackend(int64_t n_ctx, int delay_us) : n_ctx_(n_ctx), delay_us_(delay_us) {
    vocab_.piece = [](int32_t id) {
      return id < 256 ? std::string(1, static_cast<char>(id)) : std::string();
    };
    vocab_.end_of_generation = {kFakeEnd};
  }
  std::string architecture() const override { return "fake"; }
  int64_t n_vocab() const override { return kFakeVocab; }
  int64_t n_ctx() const override { return n_ctx_; }
  std::unique_ptr<LanguageModel> new_sequence() override {
    return std::make_unique<FakeLanguageModel>(n_ctx_, delay_us_);
  }
  bool concurrent_decode() const override { return true; }

  // Bytes, with the control tokens spelled as "<end>", "<answer>", ... recognised. This fake's
  // "special token" is the answer marker, added at the end (real vocabularies add BOS first).
  std::vector<int32_t> tokenize(std::string_view text, bool add_special) const override {
    static const std::pair<const char*, int32_t> kSpecial[] = {{"<end>", kFakeEnd},
                                                               {"<answer>", kFakeMarker},
                                                               {"<think>", kFakeThinkOpen},
                                                               {"</think>", kFakeThinkClose},
                                                               {"<think-on>", kFakeThinkFlag}};
    std::vector<int32_t> tokens;
    size_t i = 0;
    while (i < text.size()) {
      bool matched = false;
      for (const auto& [spelling, id] : kSpecial) {
        if (text.substr(i).starts_with(spelling)) {
          tokens.push_back(id);
          i += std::string_view(spelling).size();
          matched = true;
          break;
        }
      }
      if (!matched) tokens.push_back(static_cast<unsigned char>(text[i++]));
    }
    if (add_special) tokens.push_back(kFakeMarker);
    return tokens;
  }
  const GenerationVocab& vocab() const override { return vocab_; }
  bool has_chat_template() const override { return true; }
  std::string render_chat(std::span<const ChatMessage> messages, bool thinking) const override {
    std::string text = thinking ? "<think-on>" : "";
    for (const auto& m : messages) text += m.role + ": " + m.content + "\n";
    return text;
  }
  std::optional<ReasoningMarkers> reasoning_markers() const override {
    return ReasoningMarkers{kFakeThinkOpen, kFakeThinkClose, ""};
  }
  SamplerConfig sampling_defaults(const SamplerConfig& defaults) const override { return defaults; }

 private:
  int64_t n_ctx_;
  int delay_us_;
  GenerationVocab vocab_;
};

}  // namespace

std::shared_ptr<ModelBackend> make_fake_backend(int64_t n_ctx, int delay_us) {
  return std::make_shared<FakeBackend>(n_ctx, delay_us);
}

}  // namespace boltrt

#include "batch/fake_engine.h"

#include <cctype>
#include <chrono>
#include <thread>

#include "util/error.h"

namespace boltrt::batch {

int32_t FakeLanguageModel::next_token(std::span<const int32_t> context) {
  // The answer so far follows the last marker; the question precedes it, back to the previous
  // marker or end token.
  size_t marker = context.size();
  while (marker > 0 && context[marker - 1] != kFakeMarker) --marker;
  if (marker == 0) return kFakeEnd;
  const size_t answered = context.size() - marker;
  size_t start = marker - 1;
  while (start > 0 && context[start - 1] != kFakeMarker && context[start - 1] != kFakeEnd) --start;
  const size_t question = marker - 1 - start;
  if (answered >= question) return kFakeEnd;
  const int32_t c = context[start + answered];
  return c < 128 ? static_cast<int32_t>(std::toupper(c)) : c;
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

class FakeEngine : public BatchEngine {
 public:
  FakeEngine(int parallel, int64_t n_ctx, int delay_us)
      : model_(make_sessions(parallel, n_ctx, delay_us)) {
    vocab_.piece = [](int32_t id) {
      return id < 256 ? std::string(1, static_cast<char>(id)) : std::string();
    };
    vocab_.end_of_generation = {kFakeEnd};
  }
  MultiSequenceModel& model() override { return model_; }
  const GenerationVocab& vocab() const override { return vocab_; }
  std::vector<int32_t> prompt_tokens(const BatchRequest& request) const override {
    std::string text;
    if (request.prompt) {
      text = *request.prompt;
    } else {
      for (const auto& m : *request.messages) {
        text += m["role"].get<std::string>() + ": " +
                (m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>()
                                                                   : std::string()) +
                "\n";
      }
    }
    std::vector<int32_t> tokens;
    for (unsigned char c : text) tokens.push_back(c);
    tokens.push_back(kFakeMarker);
    return tokens;
  }
  std::unique_ptr<TokenController> controller(const BatchRequest&) const override {
    return nullptr;
  }
  int64_t split_output(const BatchRequest&, const GenerationResult& result,
                       nlohmann::ordered_json& out) const override {
    out["reasoning"] = "";
    out["content"] = result.text;
    return 0;
  }
  std::string describe() const override {
    return "fake model, " + std::to_string(model_.n_slots()) + " interleaved sessions";
  }

 private:
  static std::vector<std::unique_ptr<LanguageModel>> make_sessions(int parallel, int64_t n_ctx,
                                                                   int delay_us) {
    std::vector<std::unique_ptr<LanguageModel>> sessions;
    for (int i = 0; i < parallel; ++i)
      sessions.push_back(std::make_unique<FakeLanguageModel>(n_ctx, delay_us));
    return sessions;
  }
  InterleavedSessions model_;
  GenerationVocab vocab_;
};

}  // namespace

std::unique_ptr<BatchEngine> make_fake_engine(int parallel, int64_t n_ctx, int delay_us) {
  if (parallel < 1) fail("--parallel must be at least 1");
  return std::make_unique<FakeEngine>(parallel, n_ctx, delay_us);
}

}  // namespace boltrt::batch

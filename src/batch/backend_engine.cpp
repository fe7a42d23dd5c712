#include "batch/backend_engine.h"

#include <fmt/format.h>

#include <algorithm>

#include "generate/reply_splitter.h"
#include "util/error.h"

namespace boltrt::batch {
namespace {

class BackendEngine : public BatchEngine {
 public:
  BackendEngine(std::shared_ptr<ModelBackend> backend, int parallel)
      : backend_(std::move(backend)), model_(make_sequences(*backend_, parallel)) {}

  MultiSequenceModel& model() override { return model_; }
  const GenerationVocab& vocab() const override { return backend_->vocab(); }

  std::vector<int32_t> prompt_tokens(const BatchRequest& request) const override {
    if (request.tools) fail("'tools' are not supported by this build's chat format yet");
    std::vector<ChatMessage> messages;
    if (request.messages) {
      for (const auto& m : *request.messages) {
        if (m.contains("tool_calls") && !m["tool_calls"].is_null())
          fail("messages with 'tool_calls' are not supported by this build's chat format yet");
        messages.push_back(
            {m["role"].get<std::string>(), m.contains("content") && m["content"].is_string()
                                               ? m["content"].get<std::string>()
                                               : std::string()});
      }
    }
    return boltrt::prompt_tokens(*backend_, request.prompt.value_or(""), messages,
                                 request.reasoning == ReasoningMode::kOn);
  }

  // The reasoning controller of issue 9 plugs in here once it exists; until then a request's
  // reasoning_budget is accepted and only thinking on/off takes effect.
  std::unique_ptr<TokenController> controller(const BatchRequest&) const override {
    return nullptr;
  }

  int64_t split_output(const BatchRequest&, std::span<const int32_t> prompt,
                       const GenerationResult& result, nlohmann::ordered_json& out) const override {
    const auto markers = backend_->reasoning_markers();
    ReplySplitter splitter(markers, ReplySplitter::prompt_opens_reasoning(prompt, markers));
    const auto& end = backend_->vocab().end_of_generation;
    for (int32_t token : result.tokens) {
      if (std::find(end.begin(), end.end(), token) != end.end()) continue;
      splitter.push(token, backend_->vocab().piece(token));
    }
    splitter.finish();
    if (result.finish_reason == FinishReason::kStopString) splitter.truncate_at(result.stop_string);
    out["reasoning"] = splitter.reasoning();
    out["content"] = splitter.content();
    return splitter.reasoning_tokens();
  }

  std::string describe() const override {
    return fmt::format("{} sequences as interleaved sessions (weights read once per sequence)",
                       model_.n_slots());
  }

 private:
  static std::vector<std::unique_ptr<LanguageModel>> make_sequences(ModelBackend& backend,
                                                                    int parallel) {
    if (parallel < 1) fail("--parallel must be at least 1");
    std::vector<std::unique_ptr<LanguageModel>> sequences;
    for (int i = 0; i < parallel; ++i) sequences.push_back(backend.new_sequence());
    return sequences;
  }

  std::shared_ptr<ModelBackend> backend_;
  InterleavedSessions model_;
};

}  // namespace

std::unique_ptr<BatchEngine> make_backend_engine(std::shared_ptr<ModelBackend> backend,
                                                 int parallel) {
  return std::make_unique<BackendEngine>(std::move(backend), parallel);
}

}  // namespace boltrt::batch

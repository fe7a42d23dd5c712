#include "batch/backend_engine.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/error.h"

namespace boltrt::batch {
namespace {

class BackendEngine : public BatchEngine {
 public:
  BackendEngine(std::shared_ptr<ModelBackend> backend, int parallel)
      : backend_(std::move(backend)), model_(make_sequences(*backend_, parallel)) {}

  MultiSequenceModel& model() override { return model_; }
  const GenerationVocab& vocab() const override { return backend_->vocab(); }

  PreparedPrompt prepare(const BatchRequest& request) const override {
    return prepare_prompt(
        *backend_, request.prompt.value_or(""), request.messages.value_or(nlohmann::ordered_json()),
        request.tools.value_or(nlohmann::ordered_json()), request.reasoning == ReasoningMode::kOn);
  }

  // The reasoning controller of issue 9 plugs in here once it exists; until then a request's
  // reasoning_budget is accepted and only thinking on/off takes effect.
  std::unique_ptr<TokenController> controller(const BatchRequest&) const override {
    return nullptr;
  }

  int64_t split_output(const BatchRequest& request, const PreparedPrompt& prompt,
                       const GenerationResult& result, nlohmann::ordered_json& out) const override {
    const auto tools = request.tools.value_or(nlohmann::ordered_json());
    const ParsedReply reply = backend_->parse_reply(prompt.tokens, prompt.chat, tools, result);
    out["reasoning"] = reply.reasoning;
    out["content"] = reply.content;
    if (request.tools) {
      out["tool_calls"] = nlohmann::ordered_json::array();
      for (const auto& call : reply.tool_calls) {
        out["tool_calls"].push_back(
            {{"id", call.id},
             {"type", "function"},
             {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
    }
    return reply.reasoning_tokens;
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

#include "batch/backend_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "generate/speculative.h"
#include "util/error.h"

namespace boltrt::batch {
namespace {

class BackendEngine : public BatchEngine {
 public:
  BackendEngine(std::shared_ptr<ModelBackend> backend, int parallel)
      : backend_(std::move(backend)), model_(backend_->new_sequences(parallel)) {}

  MultiSequenceModel& model() override { return *model_; }
  const GenerationVocab& vocab() const override { return backend_->vocab(); }

  PreparedPrompt prepare(const BatchRequest& request, bool thinking) const override {
    return prepare_prompt(*backend_, request.prompt.value_or(""),
                          request.messages.value_or(nlohmann::ordered_json()),
                          request.tools.value_or(nlohmann::ordered_json()), thinking);
  }

  std::unique_ptr<ReasoningController> controller(const ReasoningConfig& config) const override {
    return make_reasoning_controller(*backend_, config);
  }
  std::optional<ReasoningMarkers> reasoning_markers() const override {
    return backend_->reasoning_markers();
  }
  text::ToolCallGrammar tool_call_grammar(const nlohmann::ordered_json& tools,
                                          const text::ToolChoice& choice) const override {
    return backend_->tool_call_grammar(tools, choice);
  }

  int64_t split_output(const BatchRequest& request, const PreparedPrompt& prompt,
                       const GenerationResult& result, const ReasoningController* controller,
                       nlohmann::ordered_json& out) const override {
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
    return controller ? controller->reasoning_tokens() : reply.reasoning_tokens;
  }

  std::vector<int32_t> history_tokens(const BatchRequest& request,
                                      const nlohmann::ordered_json& reply,
                                      bool thinking) const override {
    if (!request.messages || !backend_->has_chat_template()) return {};
    nlohmann::ordered_json messages = *request.messages;
    messages.push_back(reply);
    try {
      const RenderedChat chat =
          backend_->render_chat_json(messages, request.tools.value_or(nlohmann::ordered_json()),
                                     thinking, /*add_generation_prompt=*/false);
      return backend_->tokenize_chat(chat);
    } catch (const Error&) {
      return {};  // a format that cannot end after a reply: nothing to pre-fill
    }
  }

  std::unique_ptr<BlockDrafter> new_drafter() override {
    std::unique_ptr<BlockDrafter> drafter = backend_->new_drafter();
    // A drafter runs outside the batched steps (a step waits for every worker in flight, so
    // none runs during a step), but two workers may draft at once on the one thread pool.
    if (drafter) drafter = std::make_unique<LockedDrafter>(std::move(drafter), draft_mutex_);
    return drafter;
  }

  std::string describe() const override {
    if (model_->shares_weight_reads())
      return fmt::format("{} sequences batched into one forward pass per step", model_->n_slots());
    return fmt::format("{} sequences as interleaved sessions (weights read once per sequence)",
                       model_->n_slots());
  }

 private:
  std::shared_ptr<ModelBackend> backend_;
  std::unique_ptr<MultiSequenceModel> model_;
  std::mutex draft_mutex_;
};

}  // namespace

std::unique_ptr<BatchEngine> make_backend_engine(std::shared_ptr<ModelBackend> backend,
                                                 int parallel) {
  return std::make_unique<BackendEngine>(std::move(backend), parallel);
}

}  // namespace boltrt::batch

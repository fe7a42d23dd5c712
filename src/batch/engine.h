// BatchEngine — what the batch runner needs from a model and its text side: a multi-sequence
// model, the vocabulary, turning a request into prompt tokens (tokenizer + chat template) and
// turning generated text into the result's reasoning / content / tool_calls fields.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/model_backend.h"
#include "batch/request.h"
#include "batch/sequence_batcher.h"
#include "generate/generator.h"
#include "generate/reasoning.h"

namespace boltrt::batch {

class BatchEngine {
 public:
  virtual ~BatchEngine() = default;
  virtual MultiSequenceModel& model() = 0;
  virtual const GenerationVocab& vocab() const = 0;
  // The prompt of a request, its chat rendered with thinking on or off. Throws boltrt::Error
  // for a request this model cannot run.
  virtual PreparedPrompt prepare(const BatchRequest& request, bool thinking) const = 0;
  // The reasoning controller (budget, closing) for one request, or nullptr when the model's
  // format has no thought markers.
  virtual std::unique_ptr<ReasoningController> controller(const ReasoningConfig& config) const = 0;
  // The format's thought markers (a grammar constraint starts after the thought), if any.
  virtual std::optional<ReasoningMarkers> reasoning_markers() const { return std::nullopt; }
  // The format's tool-call grammar (ModelBackend::tool_call_grammar), empty when it has none.
  virtual text::ToolCallGrammar tool_call_grammar(const nlohmann::ordered_json& tools,
                                                  const text::ToolChoice& choice) const {
    (void)tools;
    (void)choice;
    return {};
  }
  // Adds "reasoning", "content" and "tool_calls" (when the model has a tool-call format) to
  // `out` from the generated text. Returns the number of reasoning tokens (the controller's
  // count, forced closing message included, when there is one).
  virtual int64_t split_output(const BatchRequest& request, const PreparedPrompt& prompt,
                               const GenerationResult& result,
                               const ReasoningController* controller,
                               nlohmann::ordered_json& out) const = 0;
  // A speculative-decoding drafter for one worker when the model has a draft (--draft), else
  // null. Drafters of different workers may be called from their threads at once (they
  // serialise their use of the compute threads themselves).
  virtual std::unique_ptr<BlockDrafter> new_drafter() { return nullptr; }
  // The tokens a conversation will start with once `reply` (an OpenAI assistant message) is
  // part of its history: the request's chat plus the reply, rendered as a past turn (no
  // generation prompt). A server pre-fills them into the slot while the client composes its
  // next turn. Empty when the format cannot render it (the default).
  virtual std::vector<int32_t> history_tokens(const BatchRequest& request,
                                              const nlohmann::ordered_json& reply,
                                              bool thinking) const {
    (void)request, (void)reply, (void)thinking;
    return {};
  }
  // One line saying how --parallel sequences share the model (for the run summary).
  virtual std::string describe() const = 0;
};

}  // namespace boltrt::batch

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

namespace boltrt::batch {

class BatchEngine {
 public:
  virtual ~BatchEngine() = default;
  virtual MultiSequenceModel& model() = 0;
  virtual const GenerationVocab& vocab() const = 0;
  // The prompt of a request. Throws boltrt::Error for a request this model cannot run.
  virtual PreparedPrompt prepare(const BatchRequest& request) const = 0;
  // A per-request controller (reasoning on/off/budget), or nullptr.
  virtual std::unique_ptr<TokenController> controller(const BatchRequest& request) const = 0;
  // Adds "reasoning", "content" and "tool_calls" (when the model has a tool-call format) to
  // `out` from the generated text. Returns the number of reasoning tokens.
  virtual int64_t split_output(const BatchRequest& request, const PreparedPrompt& prompt,
                               const GenerationResult& result,
                               nlohmann::ordered_json& out) const = 0;
  // One line saying how --parallel sequences share the model (for the run summary).
  virtual std::string describe() const = 0;
};

}  // namespace boltrt::batch

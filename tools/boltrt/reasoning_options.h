// The reasoning flags shared by `boltrt generate`, `chat` and `batch` (issue 9):
//
//   --reasoning on|off|auto         thinking via the chat template (auto: the model's default;
//                                   Gemma 4 templates: off)
//   --reasoning-budget N            most thinking tokens of a reply (all thought blocks
//                                   together): -1 unlimited (default), 0 none
//   --reasoning-block-budget N      most thinking tokens of each thought block (a model that
//                                   thinks again after a tool call or a partial answer gets a
//                                   fresh one; the reply budget still caps the sum): -1
//                                   unlimited (default), 0 none
//   --reasoning-budget-message TEXT closing phrase forced before the end-of-thought marker
//                                   (backslash escapes such as \n are processed)
//   --answer-reserve N              tokens kept for the answer under -n (default -1:
//                                   min(128, max_tokens / 2))
//   --show-thinking                 print the thinking (dimmed on a terminal, plain in a pipe);
//                                   hidden by default (generate/chat only)
//
// A command adds them with add_reasoning_options(), renders its chat prompt with
// enable_thinking(), and plugs controller() into GenerationOptions::controller.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "generate/reasoning.h"
#include "generate/reasoning_display.h"

namespace boltrt::cli {

struct ReasoningOptions {
  std::string mode = "auto";
  int64_t budget = -1;
  int64_t block_budget = -1;
  std::string budget_message = std::string(kDefaultBudgetMessage);
  int64_t answer_reserve = -1;
  bool show_thinking = false;

  // The controller settings for a call limited to `max_tokens` (< 0: no limit). Throws
  // boltrt::Error naming the flag for bad values.
  ReasoningConfig config(int64_t max_tokens) const;
  // Whether to render the chat prompt with thinking on (budget 0 renders it off).
  bool enable_thinking(bool model_default = false) const;
  // The controller for a TextModel or ModelBackend (which must outlive it); nullptr when the
  // model's format has no reasoning markers (plain completion models).
  template <class Model>
  std::unique_ptr<ReasoningController> controller(const Model& model, int64_t max_tokens) const {
    return make_reasoning_controller(model, config(max_tokens));
  }
  // Hide, or show dimmed when stdout is a terminal, plain otherwise.
  ReasoningDisplay display() const;
};

// Adds the flags above to `app` (without --show-thinking when `with_display` is false, e.g.
// for batch, whose JSONL output always carries reasoning and content separately).
void add_reasoning_options(CLI::App& app, ReasoningOptions& options, bool with_display = true);

}  // namespace boltrt::cli

#include "reasoning_options.h"

#include <unistd.h>

#include "text/escapes.h"

namespace boltrt::cli {

ReasoningConfig ReasoningOptions::config(int64_t max_tokens) const {
  ReasoningConfig c;
  c.mode = parse_reasoning_mode(mode, "--reasoning");
  c.budget = budget;
  c.block_budget = block_budget;
  c.budget_message = text::process_escapes(budget_message);
  c.answer_reserve = answer_reserve;
  c.max_tokens = max_tokens;
  c.validate();
  return c;
}

bool ReasoningOptions::enable_thinking(bool model_default) const {
  return config(-1).enable_thinking(model_default);
}

ReasoningDisplay ReasoningOptions::display() const {
  return reasoning_display(show_thinking, ::isatty(STDOUT_FILENO) != 0);
}

void add_reasoning_options(CLI::App& app, ReasoningOptions& options, bool with_display) {
  app.add_option("--reasoning", options.mode,
                 "thinking: on, off or auto (the model's default; Gemma 4: off)")
      ->capture_default_str();
  app.add_option("--reasoning-budget", options.budget,
                 "most thinking tokens of a reply: -1 unlimited, 0 none")
      ->capture_default_str();
  app.add_option("--reasoning-block-budget", options.block_budget,
                 "most thinking tokens of each thought block: -1 unlimited, 0 none")
      ->capture_default_str();
  app.add_option("--reasoning-budget-message", options.budget_message,
                 "text forced before the end-of-thought marker when the budget is spent");
  app.add_option("--answer-reserve", options.answer_reserve,
                 "tokens kept for the answer under the token limit; -1: min(128, limit / 2)")
      ->capture_default_str();
  if (with_display) {
    app.add_flag("--show-thinking", options.show_thinking,
                 "print the thinking (dimmed on a terminal); hidden by default");
  }
}

}  // namespace boltrt::cli

// ChatLoop — the conversation behind `boltrt chat`: keeps the history, renders it with the
// model's chat format, streams each answer (reasoning shown dimmed, plain or hidden) and handles
// the slash commands. Input comes from a line-reading function (libedit on a terminal, a pipe
// otherwise), output goes to streams, so the loop is tested with a scripted model.
//
// Commands: /help, /exit (/quit), /reset, /system [TEXT], /think on|off, /stats,
// /save FILE, /load FILE. A line ending in a backslash continues on the next line.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "generate/text_model.h"

namespace boltrt {

enum class ReasoningDisplay { kHide, kPlain, kDim };

struct ChatOptions {
  std::string system;  // system prompt ("" for none)
  bool thinking = false;
  ReasoningDisplay reasoning = ReasoningDisplay::kHide;
  int64_t max_tokens = -1;  // per answer
  std::vector<std::string> stop_strings;
  bool ignore_end_of_generation = false;
  // Makes the controller for one answer (e.g. the reasoning budget of issue 9), or null.
  std::function<std::unique_ptr<TokenController>()> make_controller;
};

class ChatLoop {
 public:
  ChatLoop(TextModel& text, Generator& generator, ChatOptions options, std::ostream& out,
           std::ostream& err);

  // Reads lines until end of input or /exit. `read_line(prompt)` returns nullopt at the end.
  void run(const std::function<std::optional<std::string>(const char* prompt)>& read_line,
           const char* prompt = "> ");

  // Handles one complete input (a command or a user turn). Returns false after /exit.
  bool handle(const std::string& input);

  // Set from a signal handler to stop the current answer (the loop clears it per answer).
  std::atomic<bool>& cancel_flag() { return cancel_; }
  bool answering() const { return answering_.load(); }
  const std::atomic<bool>& answering_flag() const { return answering_; }

  const std::vector<ChatMessage>& history() const { return history_; }
  const ChatOptions& options() const { return options_; }
  const std::optional<GenerationResult>& last_result() const { return last_; }
  // Draft/verify counters summed over every answer (zero without a drafter).
  const SpeculativeStats& draft_totals() const { return draft_totals_; }

 private:
  void answer(const std::string& user_text);
  void command(const std::string& name, const std::string& argument);
  void print_stats();
  void save(const std::string& path) const;
  void load(const std::string& path);

  TextModel& text_;
  Generator& generator_;
  ChatOptions options_;
  std::ostream& out_;
  std::ostream& err_;
  std::vector<ChatMessage> history_;  // user and assistant turns (no system message)
  std::optional<GenerationResult> last_;
  int64_t total_prompt_ = 0, total_generated_ = 0, turns_ = 0;
  SpeculativeStats draft_totals_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> answering_{false};
  bool exit_ = false;
};

}  // namespace boltrt

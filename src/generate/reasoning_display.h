// How the CLI shows a model's thinking (issue 9): hidden unless --show-thinking; shown dimmed
// (ANSI faint) when the output is a terminal, plain when it is a pipe or file, so redirected
// output never carries escape codes. The answer is always shown plain.
#pragma once
#include <ostream>
#include <span>

#include "generate/chat_loop.h"
#include "generate/reply_splitter.h"

namespace boltrt {

ReasoningDisplay reasoning_display(bool show_thinking, bool output_is_terminal);

// Writes ReplySplitter pieces to a stream in a display mode, switching the dim attribute on and
// off at channel changes.
class ReasoningPrinter {
 public:
  ReasoningPrinter(std::ostream& out, ReasoningDisplay display) : out_(out), display_(display) {}
  ~ReasoningPrinter() { finish(); }
  ReasoningPrinter(const ReasoningPrinter&) = delete;
  ReasoningPrinter& operator=(const ReasoningPrinter&) = delete;

  void write(std::span<const ReplySplitter::Piece> pieces);
  // Ends an open dim span (call before printing anything else, e.g. statistics).
  void finish();

 private:
  std::ostream& out_;
  ReasoningDisplay display_;
  bool dimmed_ = false;
};

}  // namespace boltrt

#include "generate/reasoning_display.h"

namespace boltrt {
namespace {
constexpr const char* kDimOn = "\033[2m";
constexpr const char* kDimOff = "\033[0m";
}  // namespace

ReasoningDisplay reasoning_display(bool show_thinking, bool output_is_terminal) {
  if (!show_thinking) return ReasoningDisplay::kHide;
  return output_is_terminal ? ReasoningDisplay::kDim : ReasoningDisplay::kPlain;
}

void ReasoningPrinter::write(std::span<const ReplySplitter::Piece> pieces) {
  for (const auto& piece : pieces) {
    const bool reasoning = piece.channel == ReplySplitter::Channel::kReasoning;
    if (reasoning && display_ == ReasoningDisplay::kHide) continue;
    if (piece.text.empty()) continue;
    const bool dim = reasoning && display_ == ReasoningDisplay::kDim;
    if (dim != dimmed_) out_ << (dim ? kDimOn : kDimOff);
    dimmed_ = dim;
    out_ << piece.text;
  }
  if (!pieces.empty()) out_.flush();
}

void ReasoningPrinter::finish() {
  if (dimmed_) out_ << kDimOff;
  dimmed_ = false;
  out_.flush();
}

}  // namespace boltrt

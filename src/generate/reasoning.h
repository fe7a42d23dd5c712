// ReasoningController — thinking on or off and a thinking-token budget that holds (issue 9,
// shared/docs/reasoning.md B8/B9), as a TokenController of the generation loop.
//
// States (transitions happen only in on_commit, i.e. on accepted tokens):
//
//   kOff        reasoning switched off: passive; a thought block the model opens anyway is
//               closed at once (its label and end marker forced, no thinking tokens).
//   kAnswering  outside a thought block (before the model opens one, or after it closed one).
//               A block opened here is budgeted (one budget shared by all blocks of a call).
//   kLabel      just after the start marker: the channel label ("thought\n") is read, not
//               counted.
//   kThinking   counting the thinking tokens the model writes.
//   kFinishing  the budget is spent: the model may still finish its current UTF-8 character
//               (always, at most 3 tokens) and, within `word_grace` tokens, its current word.
//   kClosing    forcing the closing sequence token by token: `budget_message` + end marker, or
//               only what is left of an end marker the model had begun (never duplicated).
//
// Counting: thinking_tokens() are the tokens the model chose inside thought blocks (label,
// markers and forced tokens excluded); reasoning_tokens() adds the forced closing message (the
// JSON field "reasoning_tokens").
//
// Answer guarantee: with a token limit (`max_tokens`), closing starts as soon as
// generated + closing length + answer reserve reaches the limit, so the answer keeps
// `answer_reserve` tokens; must_continue() lets the loop finish a closing sequence past the limit.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "generate/generator.h"
#include "generate/text_model.h"

namespace boltrt {
namespace text {
class Tokenizer;
}

inline constexpr std::string_view kDefaultBudgetMessage =
    "\n\nI have thought enough; time to answer.\n";

// The markers and text functions of one vocabulary, found by text (never hard-coded ids).
struct ReasoningVocab {
  std::vector<int32_t> start;  // opens a thought block (Gemma 4: {<|channel>})
  std::string label;           // text right after `start` naming the channel ("thought\n")
  std::vector<int32_t> end;    // closes it (Gemma 4: {<channel|>})
  std::vector<int32_t> end_of_generation;
  std::function<std::string(int32_t)> piece;                     // a token's bytes
  std::function<std::vector<int32_t>(std::string_view)> encode;  // text -> ids, no BOS

  // Gemma 4 markers (<|channel>, <channel|>, label "thought\n") from a tokenizer; nullopt when
  // the vocabulary lacks them.
  static std::optional<ReasoningVocab> for_tokenizer(const text::Tokenizer& tokenizer);
  // From what TextModel / ModelBackend expose (their reasoning_markers(), vocab(), tokenize()).
  static ReasoningVocab from_markers(const ReasoningMarkers& markers, const GenerationVocab& vocab,
                                     std::function<std::vector<int32_t>(std::string_view)> encode);
  template <class Model>  // TextModel or ModelBackend
  static std::optional<ReasoningVocab> of(const Model& model) {
    const auto markers = model.reasoning_markers();
    if (!markers) return std::nullopt;
    return from_markers(*markers, model.vocab(),
                        [&model](std::string_view s) { return model.tokenize(s, false); });
  }
};

enum class ReasoningMode { kAuto, kOn, kOff };
// "on" | "off" | "auto"; throws boltrt::Error naming `what` otherwise.
ReasoningMode parse_reasoning_mode(std::string_view text, std::string_view what = "--reasoning");
std::string_view to_string(ReasoningMode mode);

struct ReasoningConfig {
  ReasoningMode mode = ReasoningMode::kAuto;
  int64_t budget = -1;  // thinking tokens: -1 unlimited, 0 none
  std::string budget_message = std::string(kDefaultBudgetMessage);
  int64_t max_tokens = -1;      // the call's token limit (GenerationOptions::max_tokens)
  int64_t answer_reserve = -1;  // tokens kept for the answer; -1: min(128, max_tokens / 2)
  int64_t word_grace = 4;       // extra tokens allowed to finish the current word

  // Throws boltrt::Error for budget < -1, answer_reserve < -1, word_grace < 0.
  void validate() const;
  // The answer reserve in effect (0 without a token limit).
  int64_t effective_answer_reserve() const;
  // Whether the chat template should switch thinking on, given the model's default: on -> true,
  // off -> false, auto -> the default; budget 0 -> false (the template closes the channel).
  bool enable_thinking(bool model_default = false) const;
};

class ReasoningController : public TokenController {
 public:
  enum class State { kOff, kAnswering, kLabel, kThinking, kFinishing, kClosing };

  ReasoningController(ReasoningVocab vocab, ReasoningConfig config);

  void begin(std::span<const int32_t> prompt) override;
  int32_t before_sample(std::span<float> logits) override;
  void on_commit(int32_t token, bool forced) override;
  bool must_continue() const override { return state_ == State::kClosing; }
  std::unique_ptr<TokenController> clone() const override;

  State state() const { return state_; }
  int64_t thinking_tokens() const { return thinking_; }
  int64_t reasoning_tokens() const { return thinking_ + forced_message_; }
  int64_t forced_tokens() const { return forced_; }  // every token the controller forced
  const ReasoningConfig& config() const { return config_; }
  const std::vector<int32_t>& message_tokens() const { return message_; }

 private:
  struct Shared;  // vocabulary data, identical for every clone

  bool budget_left() const;
  bool limit_reached() const;
  bool token_limit_reached() const;
  std::vector<int32_t> closing_sequence() const;
  void enter_block_body();  // label done: thinking, or finishing at once when nothing is left
  void open_block(std::string_view label_seen);
  void count_thinking(int32_t token);

  std::shared_ptr<const Shared> shared_;
  ReasoningConfig config_;
  std::vector<int32_t> message_;
  State state_ = State::kAnswering;
  int64_t generated_ = 0;   // tokens committed since begin()
  int64_t thinking_ = 0;    // model tokens inside blocks (all blocks of this call)
  int64_t block_text_ = 0;  // thinking tokens of the current block
  int64_t forced_message_ = 0;
  int64_t forced_ = 0;
  size_t start_match_ = 0;  // tokens of `start` matched at the tail
  size_t end_match_ = 0;    // tokens of `end` matched at the tail (model-written)
  std::string label_seen_;  // label bytes read so far
  int utf8_need_ = 0;       // continuation bytes the last character still needs
  int utf8_extra_ = 0;      // tokens spent in kFinishing completing a character
  int64_t grace_used_ = 0;
  bool last_is_boundary_ = true;  // the block's text ends at a word boundary (or is empty)
  bool hard_limit_ = false;       // closing was triggered by the token limit: no word grace
  std::vector<int32_t> closing_;  // the sequence being forced in kClosing
  size_t closing_pos_ = 0;
  bool closing_has_message_ = false;
};

std::string_view to_string(ReasoningController::State state);

// A controller for a TextModel or ModelBackend (which must outlive it), or nullptr when the
// model's format has no reasoning markers.
template <class Model>
std::unique_ptr<ReasoningController> make_reasoning_controller(const Model& model,
                                                               const ReasoningConfig& config) {
  auto vocab = ReasoningVocab::of(model);
  if (!vocab) return nullptr;
  return std::make_unique<ReasoningController>(std::move(*vocab), config);
}

}  // namespace boltrt

// ReasoningController — thinking on or off and a thinking-token budget that holds (issue 9,
// shared/docs/reasoning.md B8/B9), as a TokenController of the generation loop.
//
// States (transitions happen only in on_commit, i.e. on accepted tokens):
//
//   kOff        reasoning switched off: passive; a thought block the model opens anyway is
//               closed at once (its label and end marker forced, no thinking tokens).
//   kAnswering  outside a thought block (before the model opens one, or after it closed one).
//               A block opened here is budgeted.
//   kLabel      just after the start marker: the channel label ("thought\n") is read, not
//               counted.
//   kThinking   counting the thinking tokens the model writes.
//   kFinishing  the budget is spent: the model may still finish its current UTF-8 character
//               (always, at most 3 tokens), a multi-token marker it has begun, a tool call it
//               has opened (within `tool_call_grace` tokens) and, within `word_grace` tokens,
//               its current word.
//   kClosing    forcing the closing sequence token by token: [the rest of an open tool call's
//               closer] + `budget_message` + end marker, or only what is left of an end marker
//               the model had begun (never duplicated).
//
// Budgets: `budget` caps the thinking tokens of the whole reply (all blocks together);
// `block_budget` caps each block on its own (every block the model opens starts afresh). Both
// may be set: a block closes at whichever binds first.
//
// Counting: thinking_tokens() are the tokens the model chose inside thought blocks (label,
// markers and forced tokens excluded); reasoning_tokens() adds the forced closing message (the
// JSON field "reasoning_tokens").
//
// Answer guarantee, two limits: the token limit (`max_tokens`) and the context
// (set_context_size(), called by the loop before begin(): the loop can produce at most
// room = n_ctx - prompt + 1 tokens). Closing starts when generated + an upper bound of everything
// still to come before the answer (the closing sequence, a UTF-8 character's last bytes, a
// multi-token marker's rest, a tool call's closer) + the answer reserve reaches either; past
// that only a character's or a marker's rest is let through (within the room), an open tool
// call gets its closer forced, and no word grace is given. must_continue() lets the loop finish
// a closing past max_tokens should it ever need to (the context it can never pass).
// The answer reserve is `answer_reserve`, or with -1 min(128, limit / 2) where the limit is the
// smaller of max_tokens and the context room.
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
  // A tool call (Gemma 4: <|tool_call> ... <tool_call|>): the budget never cuts inside one.
  // Empty when the vocabulary has none.
  std::vector<int32_t> tool_call_open;
  std::vector<int32_t> tool_call_close;

  // Gemma 4 markers (<|channel>, <channel|>, label "thought\n"), else Qwen3.5's (<think>,
  // </think>, label "\n"), from a tokenizer; nullopt when the vocabulary has neither.
  static std::optional<ReasoningVocab> for_tokenizer(const text::Tokenizer& tokenizer);
  // From what TextModel / ModelBackend expose (their reasoning_markers(), vocab(), tokenize()).
  // The tool-call markers are taken when `encode` turns "<|tool_call>" and "<tool_call|>" (Gemma
  // 4), or "<tool_call>" and "</tool_call>" (Qwen3.5), into one (special) token each.
  static ReasoningVocab from_markers(const ReasoningMarkers& markers, const GenerationVocab& vocab,
                                     std::function<std::vector<int32_t>(std::string_view)> encode);
  static void set_tool_call_markers(ReasoningVocab& v);
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
  int64_t budget = -1;        // thinking tokens of the reply: -1 unlimited, 0 none
  int64_t block_budget = -1;  // thinking tokens of each block: -1 unlimited, 0 none
  std::string budget_message = std::string(kDefaultBudgetMessage);
  int64_t max_tokens = -1;      // the call's token limit (GenerationOptions::max_tokens)
  int64_t answer_reserve = -1;  // tokens kept for the answer; -1: min(128, max_tokens / 2)
  int64_t word_grace = 4;       // extra tokens allowed to finish the current word
  // Extra tokens a tool call opened inside a thought block may run past the budget to reach
  // its closer; past that its closer is forced (a hard ceiling against a call that never ends).
  int64_t tool_call_grace = 256;

  // Throws boltrt::Error for budget or block_budget < -1, answer_reserve < -1, word_grace < 0,
  // tool_call_grace < 0.
  void validate() const;
  // The answer reserve in effect under max_tokens (0 without a token limit).
  int64_t effective_answer_reserve() const { return answer_reserve_for(max_tokens); }
  // ... under a limit of `limit` tokens (< 0: none, reserve 0).
  int64_t answer_reserve_for(int64_t limit) const;
  // Whether the chat template should switch thinking on, given the model's default: on -> true,
  // off -> false, auto -> the default; budget or block_budget 0 -> false (the template closes
  // the channel).
  bool enable_thinking(bool model_default = false) const;
};

class ReasoningController : public TokenController {
 public:
  enum class State { kOff, kAnswering, kLabel, kThinking, kFinishing, kClosing };

  ReasoningController(ReasoningVocab vocab, ReasoningConfig config);

  void set_context_size(int64_t n_ctx) override { n_ctx_ = n_ctx; }
  void begin(std::span<const int32_t> prompt) override;
  int32_t before_sample(std::span<float> logits) override;
  void on_commit(int32_t token, bool forced) override;
  // kFinishing too: what is left to finish there (a character, a marker) is bounded, and then
  // the closing follows.
  bool must_continue() const override {
    return state_ == State::kClosing || state_ == State::kFinishing;
  }
  std::vector<int32_t> forced_run() const override;
  std::unique_ptr<TokenController> clone() const override;

  State state() const { return state_; }
  int64_t thinking_tokens() const { return thinking_; }
  int64_t reasoning_tokens() const { return thinking_ + forced_message_; }
  int64_t forced_tokens() const { return forced_; }  // every token the controller forced
  // Tokens the loop can still produce before the context is full at begin() (-1: unknown).
  int64_t context_room() const { return room_; }
  // The answer reserve in effect for this call (max_tokens and the context room).
  int64_t answer_reserve() const;
  const ReasoningConfig& config() const { return config_; }
  const std::vector<int32_t>& message_tokens() const { return message_; }

 private:
  struct Shared;  // vocabulary data, identical for every clone

  bool budget_left() const;
  bool limit_reached() const;
  bool token_limit_reached() const;
  int64_t closing_upper_bound() const;          // tokens the closing could take from now on
  bool closing_fits_after(int64_t more) const;  // ... after `more` model tokens (context)
  bool inside_multi_token_marker() const;       // the block text ends in a proper prefix
  std::vector<int32_t> closing_sequence(size_t* message_from, size_t* message_to) const;
  void enter_block_body();  // label done: thinking, or finishing at once when nothing is left
  void open_block(std::string_view label_seen);
  void leave_block();
  void count_thinking(int32_t token);
  void track_guards(int32_t token);  // tool calls and multi-token markers inside a block

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
  size_t closing_message_from_ = 0, closing_message_to_ = 0;  // the message inside closing_
  int64_t n_ctx_ = -1;                                        // set_context_size()
  int64_t room_ = -1;             // tokens the loop can produce, from begin() (-1: unknown)
  bool in_tool_call_ = false;     // a tool call opened inside the block is not closed yet
  size_t tool_open_match_ = 0;    // tokens of tool_call_open matched at the tail
  size_t tool_close_match_ = 0;   // tokens of tool_call_close matched at the tail
  size_t inner_start_match_ = 0;  // tokens of a multi-token start marker matched at the tail
  int64_t guard_used_ = 0;        // tokens spent in kFinishing inside a tool call or marker
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

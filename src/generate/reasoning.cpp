#include "generate/reasoning.h"

#include <algorithm>
#include <unordered_set>

#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace boltrt {
namespace {

constexpr int kMaxUtf8ExtraTokens = 3;  // a character has at most 3 continuation bytes

bool is_ascii_boundary(unsigned char c) {
  return c < 0x80 && (c == ' ' || c == '\n' || c == '\t' || c == '\r' ||
                      (c > 0x20 && c < 0x7F && !(c >= '0' && c <= '9') && !(c >= 'A' && c <= 'Z') &&
                       !(c >= 'a' && c <= 'z') && c != '_'));
}

// Continuation bytes a UTF-8 lead byte announces (0 for ASCII and for invalid bytes).
int utf8_continuations(unsigned char c) {
  if ((c & 0xE0) == 0xC0) return 1;
  if ((c & 0xF0) == 0xE0) return 2;
  if ((c & 0xF8) == 0xF0) return 3;
  return 0;
}

// Position of the last occurrence of `seq` in `tokens`, or npos.
size_t last_occurrence(std::span<const int32_t> tokens, const std::vector<int32_t>& seq) {
  if (seq.empty() || tokens.size() < seq.size()) return std::string::npos;
  for (size_t i = tokens.size() - seq.size() + 1; i-- > 0;) {
    if (std::equal(seq.begin(), seq.end(), tokens.begin() + static_cast<ptrdiff_t>(i))) return i;
  }
  return std::string::npos;
}

// Matched length after `token` when `matched` tokens of `seq` were matched before (restarting
// at the first token on a mismatch, as the markers here never overlap themselves).
size_t advance_match(const std::vector<int32_t>& seq, size_t matched, int32_t token) {
  if (matched < seq.size() && seq[matched] == token) return matched + 1;
  return !seq.empty() && seq[0] == token ? 1 : 0;
}

}  // namespace

struct ReasoningController::Shared {
  ReasoningVocab vocab;
  std::unordered_set<int32_t> end_of_generation;
  size_t longest_marker = 1;  // tokens of the longest start / end / tool-call marker
};

// ---- vocabulary ---------------------------------------------------------------------------------

std::optional<ReasoningVocab> ReasoningVocab::for_tokenizer(const text::Tokenizer& tokenizer) {
  // The first chat format whose thought markers the vocabulary has as tokens.
  for (text::ChatFormat format : text::formats_with_thoughts()) {
    const text::ThoughtMarkerText m = text::thought_markers(format);
    const text::TokenId open = tokenizer.find(m.open);
    const text::TokenId close = tokenizer.find(m.close);
    if (open == text::kNoToken || close == text::kNoToken) continue;
    ReasoningVocab v;
    v.start = {open};
    v.label = m.label;
    v.end = {close};
    v.end_of_generation = tokenizer.eog_tokens();
    const text::Tokenizer* t = &tokenizer;
    v.piece = [t](int32_t id) { return t->valid(id) ? t->piece(id, false) : std::string(); };
    v.encode = [t](std::string_view s) { return t->encode(s, false, true); };
    set_tool_call_markers(v);
    return v;
  }
  return std::nullopt;
}

ReasoningVocab ReasoningVocab::from_markers(
    const ReasoningMarkers& markers, const GenerationVocab& vocab,
    std::function<std::vector<int32_t>(std::string_view)> encode) {
  ReasoningVocab v;
  v.start = {markers.open};
  v.label = markers.label;
  v.end = {markers.close};
  v.end_of_generation = vocab.end_of_generation;
  v.piece = vocab.piece;
  v.encode = std::move(encode);
  set_tool_call_markers(v);
  return v;
}

// Gemma 4's (<|tool_call> <tool_call|>) or Qwen3.5's (<tool_call> </tool_call>) tool-call
// markers, whichever the vocabulary has as tokens of their own (a vocabulary that spells the
// text in many tokens: no markers then).
void ReasoningVocab::set_tool_call_markers(ReasoningVocab& v) {
  const std::pair<std::string_view, std::string_view> pairs[] = {{"<|tool_call>", "<tool_call|>"},
                                                                 {"<tool_call>", "</tool_call>"}};
  for (const auto& [open, close] : pairs) {
    std::vector<int32_t> call_open = v.encode(open);
    std::vector<int32_t> call_close = v.encode(close);
    if (call_open.size() == 1 && call_close.size() == 1 && call_open != call_close) {
      v.tool_call_open = std::move(call_open);
      v.tool_call_close = std::move(call_close);
      return;
    }
  }
}

// ---- configuration ------------------------------------------------------------------------------

ReasoningMode parse_reasoning_mode(std::string_view text, std::string_view what) {
  if (text == "on") return ReasoningMode::kOn;
  if (text == "off") return ReasoningMode::kOff;
  if (text == "auto") return ReasoningMode::kAuto;
  fail("{}: '{}' is not one of on, off, auto", what, text);
}

std::string_view to_string(ReasoningMode mode) {
  switch (mode) {
    case ReasoningMode::kOn:
      return "on";
    case ReasoningMode::kOff:
      return "off";
    case ReasoningMode::kAuto:
      return "auto";
  }
  return "auto";
}

std::string_view to_string(ReasoningController::State state) {
  using S = ReasoningController::State;
  switch (state) {
    case S::kOff:
      return "off";
    case S::kAnswering:
      return "answering";
    case S::kLabel:
      return "label";
    case S::kThinking:
      return "thinking";
    case S::kFinishing:
      return "finishing";
    case S::kClosing:
      return "closing";
  }
  return "unknown";
}

void ReasoningConfig::validate() const {
  if (budget < -1) fail("--reasoning-budget {} must be -1 (unlimited), 0 or positive", budget);
  if (block_budget < -1) {
    fail("--reasoning-block-budget {} must be -1 (unlimited), 0 or positive", block_budget);
  }
  if (answer_reserve < -1)
    fail("--answer-reserve {} must be -1 (automatic) or >= 0", answer_reserve);
  if (word_grace < 0) fail("reasoning word grace {} must be >= 0", word_grace);
  if (tool_call_grace < 0) fail("reasoning tool-call grace {} must be >= 0", tool_call_grace);
}

int64_t ReasoningConfig::answer_reserve_for(int64_t limit) const {
  if (limit < 0) return 0;
  if (answer_reserve >= 0) return answer_reserve;
  return std::min<int64_t>(128, limit / 2);
}

bool ReasoningConfig::enable_thinking(bool model_default) const {
  if (budget == 0 || block_budget == 0) return false;
  switch (mode) {
    case ReasoningMode::kOn:
      return true;
    case ReasoningMode::kOff:
      return false;
    case ReasoningMode::kAuto:
      return model_default;
  }
  return model_default;
}

// ---- controller ---------------------------------------------------------------------------------

ReasoningController::ReasoningController(ReasoningVocab vocab, ReasoningConfig config)
    : config_(std::move(config)) {
  config_.validate();
  if (vocab.start.empty() || vocab.end.empty())
    fail("reasoning: the vocabulary has no thought-block markers");
  if (!vocab.piece || !vocab.encode) fail("reasoning: the vocabulary has no piece/encode function");
  if (vocab.tool_call_open.empty() != vocab.tool_call_close.empty())
    fail("reasoning: a tool-call marker without its counterpart");
  message_ = vocab.encode(config_.budget_message);
  auto shared = std::make_shared<Shared>();
  shared->end_of_generation.insert(vocab.end_of_generation.begin(), vocab.end_of_generation.end());
  shared->longest_marker = std::max({vocab.start.size(), vocab.end.size(),
                                     vocab.tool_call_open.size(), vocab.tool_call_close.size()});
  shared->vocab = std::move(vocab);
  shared_ = std::move(shared);
}

std::unique_ptr<TokenController> ReasoningController::clone() const {
  return std::make_unique<ReasoningController>(*this);
}

std::vector<int32_t> ReasoningController::forced_run() const {
  if (state_ != State::kClosing) return {};
  return std::vector<int32_t>(closing_.begin() + static_cast<ptrdiff_t>(closing_pos_),
                              closing_.end());
}

int64_t ReasoningController::answer_reserve() const {
  int64_t limit = config_.max_tokens;
  if (room_ >= 0 && (limit < 0 || room_ < limit)) limit = room_;
  return config_.answer_reserve_for(limit);
}

// A begun end marker counts against the budget (it would be thinking text if it broke off).
bool ReasoningController::budget_left() const {
  const auto pending = static_cast<int64_t>(end_match_);
  if (config_.budget >= 0 && thinking_ + pending >= config_.budget) return false;
  if (config_.block_budget >= 0 && block_text_ + pending >= config_.block_budget) return false;
  return true;
}

// True when thinking must stop: a budget is spent or a limit binds.
bool ReasoningController::limit_reached() const {
  return !budget_left() || token_limit_reached();
}

// The closing sequence if it were forced now, at most: [the rest of an open tool call's closer]
// + message + end marker.
int64_t ReasoningController::closing_upper_bound() const {
  const auto& v = shared_->vocab;
  int64_t n = static_cast<int64_t>(message_.size() + v.end.size());
  if (in_tool_call_) n += static_cast<int64_t>(v.tool_call_close.size());
  return n;
}

// Whether the context still holds the whole closing after `more` further model tokens.
bool ReasoningController::closing_fits_after(int64_t more) const {
  return room_ < 0 || generated_ + more + closing_upper_bound() <= room_;
}

// Closing now is the last chance to leave the answer its reserve, under max_tokens and in the
// context, counting an upper bound of every token that may still come before the answer: the
// last bytes of a character (3), the rest of a multi-token marker, a tool call's closer, the
// message and the end marker. (A tighter bound, the closing alone, let a character or a marker
// finished after the trigger eat into the reserve.)
bool ReasoningController::token_limit_reached() const {
  const auto& v = shared_->vocab;
  const auto before_answer =
      static_cast<int64_t>(kMaxUtf8ExtraTokens + (shared_->longest_marker - 1) +
                           v.tool_call_close.size() + message_.size() + v.end.size());
  const int64_t reserve = answer_reserve();
  if (config_.max_tokens >= 0 && generated_ + before_answer + reserve >= config_.max_tokens)
    return true;
  return room_ >= 0 && generated_ + before_answer + reserve >= room_;
}

bool ReasoningController::inside_multi_token_marker() const {
  return inner_start_match_ > 0 || tool_open_match_ > 0 || (in_tool_call_ && tool_close_match_ > 0);
}

std::vector<int32_t> ReasoningController::closing_sequence(size_t* message_from,
                                                           size_t* message_to) const {
  const auto& v = shared_->vocab;
  std::vector<int32_t> seq;
  size_t from = 0, to = 0;
  if (end_match_ > 0 && !in_tool_call_) {  // the model began the end marker: finish it only
    seq.assign(v.end.begin() + static_cast<ptrdiff_t>(end_match_), v.end.end());
  } else {
    if (in_tool_call_) {  // close the tool call first (what the model began of its closer too)
      seq.assign(v.tool_call_close.begin() + static_cast<ptrdiff_t>(tool_close_match_),
                 v.tool_call_close.end());
    }
    if (block_text_ > 0) {
      from = seq.size();
      seq.insert(seq.end(), message_.begin(), message_.end());
      to = seq.size();
    }
    seq.insert(seq.end(), v.end.begin(), v.end.end());
  }
  if (message_from != nullptr) *message_from = from;
  if (message_to != nullptr) *message_to = to;
  return seq;
}

void ReasoningController::begin(std::span<const int32_t> prompt) {
  const State outside = config_.mode == ReasoningMode::kOff ? State::kOff : State::kAnswering;
  state_ = outside;
  generated_ = thinking_ = block_text_ = forced_message_ = forced_ = grace_used_ = 0;
  start_match_ = end_match_ = 0;
  label_seen_.clear();
  utf8_need_ = utf8_extra_ = 0;
  last_is_boundary_ = true;
  hard_limit_ = false;
  closing_.clear();
  closing_pos_ = closing_message_from_ = closing_message_to_ = 0;
  in_tool_call_ = false;
  tool_open_match_ = tool_close_match_ = inner_start_match_ = 0;
  guard_used_ = 0;
  room_ = n_ctx_ >= 0 ? std::max<int64_t>(0, n_ctx_ - static_cast<int64_t>(prompt.size()) + 1) : -1;

  // Does the prompt leave the model inside a thought block (a template that pre-opens it)? Only
  // when the last start marker is followed by nothing but (part of) the label and whitespace,
  // so a marker quoted in user text earlier in the prompt never arms the controller.
  const auto& v = shared_->vocab;
  const size_t start = last_occurrence(prompt, v.start);
  if (start == std::string::npos) return;
  const auto tail = prompt.subspan(start + v.start.size());
  if (last_occurrence(tail, v.end) != std::string::npos) return;
  std::string text;
  for (int32_t id : tail) text += v.piece(id);
  if (std::string_view(v.label).starts_with(text)) {
    open_block(text);
  } else if (text.starts_with(v.label) &&
             std::all_of(text.begin() + static_cast<ptrdiff_t>(v.label.size()), text.end(),
                         [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; })) {
    open_block(v.label);
  }
}

// A start marker was committed (or the prompt ends inside a block whose label so far is
// `label_seen`).
void ReasoningController::open_block(std::string_view label_seen) {
  const auto& v = shared_->vocab;
  block_text_ = 0;
  end_match_ = 0;
  utf8_need_ = utf8_extra_ = 0;
  grace_used_ = guard_used_ = 0;
  in_tool_call_ = false;
  tool_open_match_ = tool_close_match_ = inner_start_match_ = 0;
  last_is_boundary_ = true;
  hard_limit_ = false;
  label_seen_ = label_seen;
  if (config_.mode == ReasoningMode::kOff || limit_reached()) {
    // No thinking at all: close the channel at once, completing its label so the output still
    // reads as an (empty) thought block.
    closing_.clear();
    if (label_seen.size() < v.label.size()) closing_ = v.encode(v.label.substr(label_seen.size()));
    closing_.insert(closing_.end(), v.end.begin(), v.end.end());
    closing_pos_ = closing_message_from_ = closing_message_to_ = 0;
    state_ = State::kClosing;
    return;
  }
  state_ = State::kLabel;
  if (label_seen_.size() == v.label.size()) enter_block_body();
}

void ReasoningController::leave_block() {
  state_ = config_.mode == ReasoningMode::kOff ? State::kOff : State::kAnswering;
  end_match_ = 0;
  in_tool_call_ = false;
  tool_open_match_ = tool_close_match_ = inner_start_match_ = 0;
  closing_.clear();
  closing_pos_ = closing_message_from_ = closing_message_to_ = 0;
}

void ReasoningController::enter_block_body() {
  state_ = State::kThinking;
  if (limit_reached()) {
    state_ = State::kFinishing;
    hard_limit_ = token_limit_reached();  // no word grace when the answer's room is at stake
  }
}

// A token the model wrote inside a block (not part of a marker): count it and follow its text.
void ReasoningController::count_thinking(int32_t token) {
  ++thinking_;
  ++block_text_;
  const std::string bytes = shared_->vocab.piece(token);
  for (unsigned char c : bytes) {
    if (utf8_need_ > 0 && (c & 0xC0) == 0x80) {
      --utf8_need_;
    } else {
      utf8_need_ = utf8_continuations(c);
    }
  }
  if (!bytes.empty()) {
    const auto last = static_cast<unsigned char>(bytes.back());
    last_is_boundary_ = utf8_need_ == 0 && is_ascii_boundary(last);
  }
}

// Follows the sequences the budget must not cut: a tool call (opener .. closer) and any marker
// of several tokens (a prefix of one at the tail of the block).
void ReasoningController::track_guards(int32_t token) {
  const auto& v = shared_->vocab;
  if (v.start.size() > 1) {
    inner_start_match_ = advance_match(v.start, inner_start_match_, token);
    if (inner_start_match_ == v.start.size()) inner_start_match_ = 0;
  }
  if (v.tool_call_open.empty()) return;
  if (!in_tool_call_) {
    tool_open_match_ = advance_match(v.tool_call_open, tool_open_match_, token);
    if (tool_open_match_ == v.tool_call_open.size()) {
      tool_open_match_ = tool_close_match_ = 0;
      in_tool_call_ = true;
    }
  } else {
    tool_close_match_ = advance_match(v.tool_call_close, tool_close_match_, token);
    if (tool_close_match_ == v.tool_call_close.size()) {
      tool_close_match_ = 0;
      in_tool_call_ = false;
    }
  }
}

int32_t ReasoningController::before_sample(std::span<float> logits) {
  switch (state_) {
    case State::kClosing:
      return closing_[closing_pos_];
    case State::kFinishing: {
      // Every "let the model go on" below also needs the context to hold the closing after it.
      const bool may_defer = closing_fits_after(1);
      if (utf8_need_ > 0 && utf8_extra_ < kMaxUtf8ExtraTokens && may_defer)
        return -1;  // finish the character
      const std::vector<int32_t> seq = closing_sequence(nullptr, nullptr);
      if (end_match_ > 0 && !in_tool_call_) return seq[0];  // complete the marker the model began
      // Never cut inside a marker of several tokens the model has begun, nor inside a tool call
      // (within the tool-call grace, and only while the token limit leaves room).
      // Past a limit, only what one marker still needs (the limit's slack counts that much).
      const bool guard_left =
          guard_used_ < (hard_limit_ ? static_cast<int64_t>(shared_->longest_marker) - 1
                                     : config_.tool_call_grace);
      if (inside_multi_token_marker() && guard_left && may_defer) return -1;
      if (in_tool_call_) return !hard_limit_ && guard_left && may_defer ? -1 : seq[0];
      const auto best =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      // The model is about to close the block itself: let it (it costs no message), once under
      // the token limit, otherwise within the grace.
      if (best == shared_->vocab.end[0] &&
          (grace_used_ == 0 || (!hard_limit_ && grace_used_ < config_.word_grace)))
        return -1;
      if (hard_limit_ || last_is_boundary_ || grace_used_ >= config_.word_grace || !may_defer)
        return seq[0];
      // Within the grace: go on while the model's most likely next token continues the current
      // word; close as soon as it would start a new one.
      const std::string piece = shared_->vocab.piece(best);
      if (piece.empty() || is_ascii_boundary(static_cast<unsigned char>(piece[0]))) return seq[0];
      return -1;
    }
    case State::kOff:
    case State::kAnswering:
    case State::kLabel:
    case State::kThinking:
      return -1;
  }
  return -1;
}

void ReasoningController::on_commit(int32_t token, bool forced) {
  ++generated_;
  if (forced) ++forced_;
  const auto& v = shared_->vocab;

  if (state_ == State::kFinishing && forced) {  // the first token of the closing sequence
    if (in_tool_call_) {
      // A begun end marker inside a tool call was text of the call after all.
      for (size_t i = 0; i < end_match_; ++i) count_thinking(v.end[i]);
    }
    closing_ = closing_sequence(&closing_message_from_, &closing_message_to_);
    closing_pos_ = 0;
    end_match_ = 0;
    state_ = State::kClosing;
  }

  switch (state_) {
    case State::kOff:
    case State::kAnswering:
      start_match_ = advance_match(v.start, start_match_, token);
      if (start_match_ == v.start.size()) {
        start_match_ = 0;
        open_block("");
      }
      return;

    case State::kClosing: {
      if (token != closing_[closing_pos_]) {
        fail("reasoning: token {} was committed while closing the thought block expected {}", token,
             closing_[closing_pos_]);
      }
      if (closing_pos_ >= closing_message_from_ && closing_pos_ < closing_message_to_)
        ++forced_message_;
      if (++closing_pos_ == closing_.size()) leave_block();
      return;
    }

    case State::kLabel: {
      const std::string piece = v.piece(token);
      const std::string seen = label_seen_ + piece;
      if (token != v.end[0] && std::string_view(v.label).starts_with(seen)) {
        label_seen_ = seen;
        if (seen.size() == v.label.size()) enter_block_body();
        return;
      }
      // The model wrote something other than the label: the block's text starts here.
      enter_block_body();
      break;  // handled below as a thinking token
    }

    case State::kThinking:
    case State::kFinishing:
      break;
  }

  // kThinking / kFinishing, a token the model chose.
  if (shared_->end_of_generation.contains(token)) {
    leave_block();
    return;
  }
  const bool finishing = state_ == State::kFinishing;
  const bool completing_char = finishing && utf8_need_ > 0;
  const bool guarded = finishing && (in_tool_call_ || inside_multi_token_marker());
  const size_t matched = advance_match(v.end, end_match_, token);
  if (matched == end_match_ + 1 || (matched == 1 && end_match_ == 0)) {
    end_match_ = matched;
    if (end_match_ == v.end.size()) {  // the model closed the block itself
      leave_block();
      return;
    }
  } else {
    // A partial end marker that did not complete was ordinary text after all.
    for (size_t i = 0; i < end_match_; ++i) count_thinking(v.end[i]);
    end_match_ = matched;
    if (matched == 0) count_thinking(token);
  }
  track_guards(token);
  if (finishing) {
    if (completing_char) {
      ++utf8_extra_;
    } else if (guarded) {
      ++guard_used_;
    } else {
      ++grace_used_;
    }
    hard_limit_ = hard_limit_ || token_limit_reached();  // it may bind during the grace too
  } else if (limit_reached()) {
    state_ = State::kFinishing;
    hard_limit_ = token_limit_reached();
  }
}

}  // namespace boltrt

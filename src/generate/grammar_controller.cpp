#include "generate/grammar_controller.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "grammar/json_schema.h"
#include "util/error.h"

namespace boltrt {

std::shared_ptr<const grammar::Grammar> compile_constraint(const OutputConstraint& constraint) {
  switch (constraint.kind) {
    case OutputConstraint::Kind::kGrammar:
      return grammar::cached_gbnf(constraint.text);
    case OutputConstraint::Kind::kJsonSchema:
      return grammar::cached_gbnf(grammar::json_schema_to_gbnf(constraint.text));
    case OutputConstraint::Kind::kJsonObject:
      return grammar::cached_gbnf(grammar::json_object_gbnf());
    case OutputConstraint::Kind::kNone:
      break;
  }
  fail("compile_constraint: no constraint");
}

std::shared_ptr<const grammar::TokenVocabulary> grammar_vocabulary(const GenerationVocab& vocab,
                                                                   int64_t n_vocab) {
  if (vocab.grammar_vocabulary) return vocab.grammar_vocabulary();
  std::vector<std::string> pieces(static_cast<size_t>(n_vocab));
  std::vector<bool> atomic(static_cast<size_t>(n_vocab), false);
  for (int64_t id = 0; id < n_vocab; ++id) {
    pieces[static_cast<size_t>(id)] = vocab.piece(static_cast<int32_t>(id));
  }
  return std::make_shared<grammar::TokenVocabulary>(std::move(pieces), std::move(atomic),
                                                    vocab.end_of_generation);
}

GrammarController::GrammarController(std::shared_ptr<grammar::Engine> engine,
                                     std::vector<int32_t> end_of_generation,
                                     std::optional<ReasoningMarkers> markers, bool thinking_allowed,
                                     TokenController* inner, std::string trigger)
    : engine_(std::move(engine)),
      end_of_generation_(std::move(end_of_generation)),
      markers_(std::move(markers)),
      thinking_allowed_(thinking_allowed && markers_.has_value()),
      inner_(inner),
      matcher_(engine_),
      trigger_(std::move(trigger)) {
  if (!trigger_.empty()) {
    const int32_t id = engine_->vocab().find(trigger_);
    if (id >= 0 && engine_->vocab().atomic(id)) trigger_token_ = id;
  }
}

size_t GrammarController::watch(Waiting& w, int32_t token, std::string* text) const {
  // Thoughts are not answers: a call opened inside one is part of the thought (the parsers read
  // it as reasoning), so the trigger counts only outside them.
  if (markers_) {
    if (w.thinking) {
      if (token == markers_->close) w.thinking = false;
      return std::string::npos;
    }
    if (token == markers_->open) {
      w.thinking = true;
      w.tail.clear();
      return std::string::npos;
    }
  }
  if (trigger_token_ >= 0) return token == trigger_token_ ? 0 : std::string::npos;
  *text = w.tail;
  text->append(engine_->vocab().piece(token));
  const size_t at = text->find(trigger_);
  if (at != std::string::npos) return at;
  // Only a proper prefix of the trigger can still grow into it.
  const size_t keep = std::min(text->size(), trigger_.size() - 1);
  w.tail = text->substr(text->size() - keep);
  return std::string::npos;
}

void GrammarController::set_context_size(int64_t n_ctx) {
  if (inner_ != nullptr) inner_->set_context_size(n_ctx);
}

void GrammarController::begin(std::span<const int32_t> prompt) {
  if (inner_ != nullptr) inner_->begin(prompt);
  matcher_ = grammar::Matcher(engine_);
  thinking_ = false;
  thought_done_ = false;
  if (markers_) {  // a prompt that ends inside an open thought starts unconstrained
    for (auto it = prompt.rbegin(); it != prompt.rend(); ++it) {
      if (*it == markers_->close) break;
      if (*it == markers_->open) {
        thinking_ = true;
        break;
      }
    }
  }
  waiting_ = !trigger_.empty();
  watch_ = Waiting{thinking_, {}};
}

int32_t GrammarController::before_sample(std::span<float> logits) {
  const int32_t forced = inner_ != nullptr ? inner_->before_sample(logits) : -1;
  if (thinking_ || waiting_) return forced;
  if (forced >= 0 && matcher_.allows(forced)) return forced;
  // A thought may still be opened before the first constrained token.
  const bool may_open = may_open_thought() && markers_->open >= 0 &&
                        static_cast<size_t>(markers_->open) < logits.size();
  const float open_logit = may_open ? logits[static_cast<size_t>(markers_->open)] : 0.0f;
  matcher_.apply(logits, mask_);
  if (may_open) logits[static_cast<size_t>(markers_->open)] = open_logit;
  if (may_open || std::any_of(mask_.begin(), mask_.end(), [](uint32_t w) { return w != 0; })) {
    // Only the end may follow but the loop masked it (--ignore-eos): the output cannot go on,
    // so it ends here rather than sampling from a row without a legal token.
    const bool none_left =
        !may_open && matcher_.is_complete() &&
        std::none_of(logits.begin(), logits.end(), [](float x) { return x > -INFINITY; });
    if (!none_left) return -1;
  }
  // Nothing the model could write fits: when the grammar is complete, end; else the grammar
  // cannot be finished with this vocabulary.
  if (matcher_.is_accepting()) {
    for (int32_t id : end_of_generation_) {
      if (id >= 0 && static_cast<size_t>(id) < logits.size()) return id;
    }
  }
  fail("grammar: no token of the vocabulary can continue the constrained output here");
}

void GrammarController::on_commit(int32_t token, bool forced) {
  if (inner_ != nullptr) inner_->on_commit(token, forced);
  if (waiting_) {
    std::string text;
    const size_t at = watch(watch_, token, &text);
    if (at == std::string::npos) return;
    grammar::Matcher started(engine_);
    const bool fits = trigger_token_ >= 0 ? started.accept(token)
                                          : started.accept_bytes(std::string_view(text).substr(at));
    if (!fits) {  // the trigger's token carried more than the grammar takes: not a call
      watch_.tail.clear();
      return;
    }
    matcher_ = std::move(started);
    waiting_ = false;
    thinking_ = false;
    thought_done_ = true;  // no thought inside the constrained part
    return;
  }
  if (thinking_) {
    if (markers_ && token == markers_->close) {
      thinking_ = false;
      thought_done_ = true;
    }
    return;
  }
  if (may_open_thought() && token == markers_->open) {
    thinking_ = true;
    return;
  }
  if (!matcher_.accept(token)) {
    // Only a forced token the grammar does not allow gets here (the inner controller's); the
    // constraint cannot hold any more.
    fail("grammar: token {} was committed but the grammar does not allow it", token);
  }
}

bool GrammarController::must_continue() const {
  return inner_ != nullptr && inner_->must_continue();
}

std::vector<int32_t> GrammarController::forced_run() const {
  if (inner_ == nullptr) return {};
  std::vector<int32_t> run = inner_->forced_run();
  if (thinking_ || waiting_ || run.empty()) return run;
  // Outside a thought the inner controller's forced tokens pass only as far as the grammar
  // allows them.
  grammar::Matcher probe = matcher_;
  size_t n = 0;
  while (n < run.size() && probe.accept(run[n])) ++n;
  run.resize(n);
  return run;
}

int64_t GrammarController::draft_prefix(std::span<const int32_t> drafted) {
  int64_t limit =
      inner_ != nullptr ? inner_->draft_prefix(drafted) : static_cast<int64_t>(drafted.size());
  if (waiting_) {
    // Free until the trigger; the drafts after it are checked once the grammar is on.
    Waiting w = watch_;
    std::string text;
    for (int64_t n = 0; n < limit; ++n) {
      if (watch(w, drafted[static_cast<size_t>(n)], &text) != std::string::npos) return n + 1;
    }
    return limit;
  }
  bool thinking = thinking_;
  bool done = thought_done_;
  const size_t before = matcher_.tokens_accepted();
  int64_t n = 0;
  for (; n < limit; ++n) {
    const int32_t t = drafted[static_cast<size_t>(n)];
    if (thinking) {
      if (markers_ && t == markers_->close) {
        thinking = false;
        done = true;
      }
      continue;
    }
    if (!done && may_open_thought() && t == markers_->open) {
      thinking = true;
      continue;
    }
    if (!matcher_.accept(t)) break;
    if (matcher_.finished()) {
      ++n;
      break;
    }
  }
  matcher_.rollback(matcher_.tokens_accepted() - before);
  return n;
}

std::unique_ptr<TokenController> GrammarController::clone() const {
  auto copy = std::make_unique<GrammarController>(engine_, end_of_generation_, markers_,
                                                  thinking_allowed_, nullptr, trigger_);
  if (inner_ != nullptr) {
    copy->owned_inner_ = inner_->clone();
    copy->inner_ = copy->owned_inner_.get();
  }
  copy->matcher_ = matcher_;
  copy->thinking_ = thinking_;
  copy->thought_done_ = thought_done_;
  copy->waiting_ = waiting_;
  copy->watch_ = watch_;
  return copy;
}

std::unique_ptr<GrammarController> make_grammar_controller(
    const OutputConstraint& constraint, const GenerationVocab& vocab, int64_t n_vocab,
    std::optional<ReasoningMarkers> markers, bool thinking_allowed, TokenController* inner) {
  if (!constraint.active()) return nullptr;
  return make_grammar_controller(compile_constraint(constraint), vocab, n_vocab, std::move(markers),
                                 thinking_allowed, inner, constraint.trigger);
}

std::unique_ptr<GrammarController> make_grammar_controller(
    std::shared_ptr<const grammar::Grammar> compiled, const GenerationVocab& vocab, int64_t n_vocab,
    std::optional<ReasoningMarkers> markers, bool thinking_allowed, TokenController* inner,
    std::string trigger) {
  if (compiled == nullptr) return nullptr;
  auto engine = grammar::engine_for(std::move(compiled), grammar_vocabulary(vocab, n_vocab));
  return std::make_unique<GrammarController>(std::move(engine), vocab.end_of_generation,
                                             std::move(markers), thinking_allowed, inner,
                                             std::move(trigger));
}

}  // namespace boltrt

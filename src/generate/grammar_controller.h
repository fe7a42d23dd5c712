// GrammarController — grammar / JSON-Schema constrained decoding as a TokenController of the
// generation loop (issue 18, shared/docs/structured-output.md §8).
//
// Before each draw every token the grammar does not allow next gets logit -inf (the mask comes
// first, so top-k / top-p / min-p choose among legal tokens and can never be left with none);
// end-of-generation tokens only where the grammar is complete; when the grammar is complete and
// nothing may follow, the end-of-generation token is forced.
//
// Reasoning: the constraint starts when the thought ends. The phase comes from the prompt (a
// prompt that ends inside an open thought channel starts unconstrained, shared/docs §8.3), and
// while thinking is allowed the model may open a thought before the first constrained token;
// inside it nothing is masked (the wrapped reasoning controller keeps its budget) and the
// closing marker switches the grammar on. Without reasoning the thought markers are masked like
// every other special token.
//
// Lazy grammars (`trigger`, tool_choice auto; shared/docs/structured-output.md §5.2): until the
// output writes the trigger outside a thought nothing is masked, so a reply that never writes it
// is exactly the unconstrained one (greedy output unchanged). A trigger that is one atomic token
// of the vocabulary (Gemma 4's <|tool_call>) switches the grammar on when that token is
// committed; a trigger spelled in text (a vocabulary without the marker as a token) when the
// output text since the last thought ends with it, the bytes from its first one replayed into
// the grammar. From then on the grammar holds to the end of the output. A text trigger whose
// token carries bytes the grammar cannot take after it does not switch the grammar on.
//
// Speculative decoding: committed tokens are chosen row by row after this mask, so greedy output
// with a draft equals greedy output without one. draft_prefix() checks drafted tokens before the
// verify batch: it accepts them into the matcher one by one and rolls the matcher back, and the
// loop verifies only the grammar-legal prefix.
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "generate/text_model.h"
#include "grammar/matcher.h"

namespace boltrt {

// What a request constrains its output to.
struct OutputConstraint {
  enum class Kind { kNone, kGrammar, kJsonSchema, kJsonObject };
  Kind kind = Kind::kNone;
  std::string text;     // GBNF text (kGrammar) or JSON Schema text (kJsonSchema)
  std::string trigger;  // kGrammar: "" holds from the start, else lazy (see above)

  bool active() const { return kind != Kind::kNone; }
  static OutputConstraint grammar(std::string gbnf) {
    return {Kind::kGrammar, std::move(gbnf), {}};
  }
  static OutputConstraint lazy_grammar(std::string gbnf, std::string trigger) {
    return {Kind::kGrammar, std::move(gbnf), std::move(trigger)};
  }
  static OutputConstraint json_schema(std::string schema) {
    return {Kind::kJsonSchema, std::move(schema), {}};
  }
  static OutputConstraint json_object() { return {Kind::kJsonObject, {}, {}}; }
};

// The compiled grammar of a constraint (cached by its text; boltrt::Error for a malformed
// grammar or schema).
std::shared_ptr<const grammar::Grammar> compile_constraint(const OutputConstraint& constraint);

// The grammar view of a generation vocabulary: vocab.grammar_vocabulary() when set, else one
// derived from piece() (end-of-generation tokens atomic, every other token text).
std::shared_ptr<const grammar::TokenVocabulary> grammar_vocabulary(const GenerationVocab& vocab,
                                                                   int64_t n_vocab);

class GrammarController : public TokenController {
 public:
  // `inner` (may be null; not owned, must outlive this) is a controller this one wraps, e.g. the
  // reasoning controller; it sees every call first. `markers`: the format's thought markers
  // (nullopt: none); `thinking_allowed`: the model may think before the constrained answer;
  // `trigger`: "" for a grammar that holds from the start, else the text that switches it on.
  GrammarController(std::shared_ptr<grammar::Engine> engine, std::vector<int32_t> end_of_generation,
                    std::optional<ReasoningMarkers> markers, bool thinking_allowed,
                    TokenController* inner = nullptr, std::string trigger = {});

  void set_context_size(int64_t n_ctx) override;
  void begin(std::span<const int32_t> prompt) override;
  int32_t before_sample(std::span<float> logits) override;
  void on_commit(int32_t token, bool forced) override;
  bool must_continue() const override;
  std::vector<int32_t> forced_run() const override;
  int64_t draft_prefix(std::span<const int32_t> drafted) override;
  std::unique_ptr<TokenController> clone() const override;

  // Takes ownership of the inner controller (it stays the one this wraps).
  void adopt_inner(std::unique_ptr<TokenController> inner) {
    owned_inner_ = std::move(inner);
    inner_ = owned_inner_.get();
  }
  bool thinking() const { return thinking_; }
  // A lazy grammar that has not seen its trigger yet.
  bool waiting() const { return waiting_; }
  const grammar::Matcher& matcher() const { return matcher_; }
  TokenController* inner() const { return inner_; }

 private:
  std::shared_ptr<grammar::Engine> engine_;
  std::vector<int32_t> end_of_generation_;
  std::optional<ReasoningMarkers> markers_;
  bool thinking_allowed_;
  TokenController* inner_;
  std::unique_ptr<TokenController> owned_inner_;  // a clone's copy of the inner controller
  grammar::Matcher matcher_;
  // One thought, before the first constrained token.
  bool may_open_thought() const {
    return thinking_allowed_ && !thought_done_ && matcher_.tokens_accepted() == 0 &&
           markers_->open >= 0;
  }

  bool thinking_ = false;      // inside a thought: unconstrained
  bool thought_done_ = false;  // a thought was closed (no second one)
  std::vector<uint32_t> mask_;

  // Lazy grammars.
  struct Waiting {  // what decides when the trigger is seen
    bool thinking = false;
    std::string tail;  // output text since the last thought, at most the trigger's length
  };
  // Moves `w` past `token`; returns where the trigger starts in w.tail + the token's text (the
  // bytes to replay into the grammar begin there), or npos when it is not complete yet.
  size_t watch(Waiting& w, int32_t token, std::string* text) const;
  std::string trigger_;
  int32_t trigger_token_ = -1;  // the trigger as one atomic token, else -1 (spelled in text)
  bool waiting_ = false;
  Waiting watch_;
};

// The controller for a request, or null when the constraint is inactive.
std::unique_ptr<GrammarController> make_grammar_controller(
    const OutputConstraint& constraint, const GenerationVocab& vocab, int64_t n_vocab,
    std::optional<ReasoningMarkers> markers, bool thinking_allowed, TokenController* inner);
// The same for a grammar compiled beforehand (compile_constraint, e.g. while validating a
// request); the engine comes from the process-wide cache (grammar::engine_for).
// `trigger` as in OutputConstraint.
std::unique_ptr<GrammarController> make_grammar_controller(
    std::shared_ptr<const grammar::Grammar> compiled, const GenerationVocab& vocab, int64_t n_vocab,
    std::optional<ReasoningMarkers> markers, bool thinking_allowed, TokenController* inner,
    std::string trigger = {});

}  // namespace boltrt

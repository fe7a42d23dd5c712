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
  std::string text;  // GBNF text (kGrammar) or JSON Schema text (kJsonSchema)

  bool active() const { return kind != Kind::kNone; }
  static OutputConstraint grammar(std::string gbnf) { return {Kind::kGrammar, std::move(gbnf)}; }
  static OutputConstraint json_schema(std::string schema) {
    return {Kind::kJsonSchema, std::move(schema)};
  }
  static OutputConstraint json_object() { return {Kind::kJsonObject, {}}; }
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
  // (nullopt: none); `thinking_allowed`: the model may think before the constrained answer.
  GrammarController(std::shared_ptr<grammar::Engine> engine, std::vector<int32_t> end_of_generation,
                    std::optional<ReasoningMarkers> markers, bool thinking_allowed,
                    TokenController* inner = nullptr);

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
};

// The controller for a request, or null when the constraint is inactive.
std::unique_ptr<GrammarController> make_grammar_controller(
    const OutputConstraint& constraint, const GenerationVocab& vocab, int64_t n_vocab,
    std::optional<ReasoningMarkers> markers, bool thinking_allowed, TokenController* inner);
// The same for a grammar compiled beforehand (compile_constraint, e.g. while validating a
// request); the engine comes from the process-wide cache (grammar::engine_for).
std::unique_ptr<GrammarController> make_grammar_controller(
    std::shared_ptr<const grammar::Grammar> compiled, const GenerationVocab& vocab, int64_t n_vocab,
    std::optional<ReasoningMarkers> markers, bool thinking_allowed, TokenController* inner);

}  // namespace boltrt

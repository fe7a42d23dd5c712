// Generator — the text-generation loop over a LanguageModel:
//
//   prompt --(prefill, reusing the cached prefix)--> logits --(controller, sampler)--> token
//     --> stop checks (end-of-generation token, max tokens, cancellation, context)
//     --> TextStream (whole UTF-8 characters, stop strings) --> on_text callback
//     --> decode(token) --> logits ...
//
// It knows nothing about tokenizers or chat templates: a GenerationVocab gives each token's
// bytes and the end-of-generation ids. A TokenController (the reasoning controller of issue 9
// and similar constraints) can edit the logits or force tokens at every step.
//
// Speculative decoding (issue 8, shared/docs/dflash.md A5-A7) is the same loop with a
// BlockDrafter attached: each step decodes [last, d_1..d_K] (the drafter's proposal) in ONE
// batch and walks the K+1 logit rows exactly as plain decoding walks its one row, stopping
// after the first committed token that differs from the draft; the model is rolled back to the
// committed tokens. Every committed token is chosen by the same sampler from the model's own
// row, with one draw per committed token, so the output is the plain output: greedy exactly,
// with temperature > 0 the same distribution (the same tokens for the same seed, up to the
// last-bit differences between a batched and a one-token forward). Without a drafter K = 0
// and a step is one plain decode.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "generate/drafter.h"
#include "generate/sampler.h"
#include "runtime/language_model.h"

namespace boltrt {
namespace grammar {
class TokenVocabulary;
}

// What the loop needs from the vocabulary.
struct GenerationVocab {
  // The bytes a token adds to the output text ("" for control tokens that print nothing).
  std::function<std::string(int32_t token)> piece;
  // Tokens that end generation (end of turn, end of sequence, ...).
  std::vector<int32_t> end_of_generation;
  // Tokens never sampled (logit -inf), as llama.cpp does with tokenizer.ggml.suppress_tokens.
  std::vector<int32_t> suppressed;
  // The vocabulary as grammar constraints see it (pieces with special tokens as text, which
  // tokens are atomic, a byte trie), built on the first call and shared; unset for scripted
  // vocabularies (grammar_controller.h then derives one from `piece`).
  std::function<std::shared_ptr<const grammar::TokenVocabulary>()> grammar_vocabulary;
};

enum class FinishReason {
  kEndOfGeneration,  // the model produced an end-of-generation token   -> "eog"
  kStopString,       // the text reached one of the stop strings         -> "stop"
  kMaxTokens,        // the token limit was reached                      -> "length"
  kContextFull,      // no room left in the context                      -> "context_full"
  kCancelled,        // the callback or the cancel flag stopped it       -> "cancelled"
};
std::string_view to_string(FinishReason reason);

// What to do with a prompt that leaves no room to generate.
enum class ContextOverflow {
  kError,         // throw boltrt::Error (default)
  kTruncateLeft,  // drop the oldest prompt tokens (after keep_first) to make room
};

// Passed to on_token after each committed token.
struct TokenEvent {
  int32_t token;
  bool forced;             // chosen by the controller, not sampled
  std::string_view piece;  // the token's bytes (may be part of a UTF-8 character)
  int64_t index;           // 0 for the first generated token
};

// Plug-in point for whatever steers generation token by token (the reasoning controller of
// issue 9: states off / thinking / closing / answering). All calls happen on committed tokens
// only, so a controller never sees a token that is later taken back.
class TokenController {
 public:
  virtual ~TokenController() = default;
  // The model's context size, given by the loop before begin(): a controller that must finish
  // a forced sequence before the context is full (the reasoning controller's closing) plans
  // with it; the loop can produce at most n_ctx - prompt + 1 tokens.
  virtual void set_context_size(int64_t n_ctx) { (void)n_ctx; }
  // Start of a generate() call; `prompt` is the whole prompt (the chat template's generation
  // prefix, e.g. a pre-opened thought channel, is at its end).
  virtual void begin(std::span<const int32_t> prompt) = 0;
  // Before each draw. May edit `logits` (mask, bias) or return a token that must come next
  // (no draw is made for it; it still enters the sampler's penalty history), or -1.
  virtual int32_t before_sample(std::span<float> logits) = 0;
  // After each committed token (sampled or forced).
  virtual void on_commit(int32_t token, bool forced) = 0;
  // True while the controller still has tokens to force (e.g. a closing sequence): the loop
  // then goes past max_tokens to finish it, so an answer is never cut inside a marker.
  virtual bool must_continue() const { return false; }
  // The tokens the controller will force next whatever the model predicts (a closing sequence
  // under way), in order; empty when the next token is the model's choice. The speculative loop
  // verifies them in place of drafted guesses, so a forced run costs one target pass instead of
  // one per token (shared/docs/reasoning.md B9 step 5); they still pass through before_sample().
  virtual std::vector<int32_t> forced_run() const { return {}; }
  // How many of `drafted` (tokens a draft proposes after the last committed one, in order) the
  // controller could let through; the speculative loop verifies only that prefix. The state
  // must be unchanged afterwards (a grammar accepts them and rolls back).
  virtual int64_t draft_prefix(std::span<const int32_t> drafted) {
    return static_cast<int64_t>(drafted.size());
  }
  // A copy of the current state: speculative decoding walks drafted tokens through a scratch
  // copy and commits only the accepted prefix (shared/docs/reasoning.md, B9).
  virtual std::unique_ptr<TokenController> clone() const = 0;
};

struct GenerationOptions {
  int64_t max_tokens = -1;  // < 0: until end of generation or a full context
  std::vector<std::string> stop_strings;
  bool ignore_end_of_generation = false;  // mask end-of-generation tokens (llama.cpp --ignore-eos)
  ContextOverflow overflow = ContextOverflow::kError;
  int64_t keep_first = 1;    // prompt tokens kept at the front when truncating (BOS)
  int64_t batch_size = 512;  // prompt tokens per decode() call

  // Streaming output: called with text as soon as it is safe to show (whole characters, never
  // part of a stop string). The concatenation of all calls equals GenerationResult::text.
  std::function<void(std::string_view text)> on_text;
  // Called after each committed token; return false to stop (finish reason "cancelled"; the
  // token and its text are kept).
  std::function<bool(const TokenEvent& event)> on_token;
  // Checked before each model call; set it (e.g. from a SIGINT handler) to stop.
  const std::atomic<bool>* cancel = nullptr;
  TokenController* controller = nullptr;
};

struct GenerationStats {
  int64_t n_prompt_tokens = 0;     // prompt length (after truncation)
  int64_t n_prompt_evaluated = 0;  // prompt tokens run through the model (the rest was cached)
  int64_t n_tokens = 0;            // generated tokens, end-of-generation token included
  int64_t n_truncated = 0;         // prompt tokens dropped by ContextOverflow::kTruncateLeft
  double ttft_ms = 0;              // start of generate() to the first generated token
  double prompt_ms = 0;            // prompt decode time
  double generation_ms = 0;        // first to last generated token
  double prompt_tokens_per_second = 0;
  double tokens_per_second = 0;  // (n_tokens - 1) / generation time; 0 with < 2 tokens
  SpeculativeStats draft;        // draft/verify rounds (zero without a drafter)
};

struct GenerationResult {
  std::string text;  // what on_text received (stop string and everything after it excluded)
  std::vector<int32_t> tokens;  // generated tokens, including a final end-of-generation token
  FinishReason finish_reason = FinishReason::kEndOfGeneration;
  std::string stop_string;  // the stop string that matched, if any
  GenerationStats stats;
};

// Checks a prompt (non-empty, ids inside the vocabulary, positive batch size) and applies the
// context-overflow policy: returns the prompt to run, with stats.n_truncated and
// stats.n_prompt_tokens set. Shared by Generator and the speculative loop.
std::vector<int32_t> fit_prompt(std::span<const int32_t> prompt, int64_t n_vocab, int64_t n_ctx,
                                const GenerationOptions& options, GenerationStats& stats);

class Generator {
 public:
  Generator(LanguageModel& model, GenerationVocab vocab, const SamplerConfig& sampling);

  // Generates a continuation of `prompt`. Tokens already in the model's cache from an earlier
  // call (the longest common prefix) are reused, so a chat that re-sends its whole history only
  // evaluates the new turn. The sampler's penalty history restarts from the prompt; its random
  // stream continues across calls.
  GenerationResult generate(std::span<const int32_t> prompt, const GenerationOptions& options);

  // The tokens whose keys/values the model holds, in order.
  const std::vector<int32_t>& cached_tokens() const { return cached_; }
  // Empties the model's cache (and the drafter's context) and reseeds the sampler.
  void reset();

  // Turns speculative decoding on (drafter non-null; it must outlive the generator or the next
  // set_drafter) or off (null). Switches the model's hidden-state capture to the drafter's
  // tap layers (boltrt::Error when the model cannot capture them). A rollback after a
  // rejected draft goes back up to draft_max tokens: a sliding-window cache must allow that.
  void set_drafter(BlockDrafter* drafter, const SpeculativeOptions& options = {});
  BlockDrafter* drafter() const { return drafter_; }
  // The options in force (draft_max resolved against the drafter's max_draft()).
  const SpeculativeOptions& speculative_options() const { return speculative_; }

  Sampler& sampler() { return sampler_; }
  LanguageModel& model() { return model_; }
  const GenerationVocab& vocab() const { return vocab_; }

 private:
  std::span<const float> prefill(std::span<const int32_t> prompt, const GenerationOptions& options,
                                 GenerationStats& stats);

  LanguageModel& model_;
  GenerationVocab vocab_;
  Sampler sampler_;
  std::vector<int32_t> cached_;
  std::vector<float> logits_copy_;
  BlockDrafter* drafter_ = nullptr;
  SpeculativeOptions speculative_;
  std::vector<int32_t> verify_;  // the tokens of one step: [last, d_1..d_K]
  DraftLengthPolicy policy_;     // the adaptive draft length (kept across generate() calls)
};

}  // namespace boltrt

// Matcher — which tokens may come next under a compiled Grammar, and fast token masks over a
// whole vocabulary (shared/docs/structured-output.md §5.2, §6, §7, §8.2).
//
// The automaton: a parse position is a stack of grammar positions (the element to match next
// on top, return positions below). Stacks are hash-consed nodes (position, parent), so equal
// stacks are one id, a set of stacks is a sorted id list, and a tail call (a rule reference
// that ends its alternative) reuses the caller's frame: `x*` never grows the stack. A matcher
// state is an interned set of stacks (all alternatives tracked at once, no backtracking), and
// the byte transitions between states are computed once and cached in a 256-entry row per
// state: a lazily built DFA over the pushdown automaton's reachable configurations.
//
// Masks: the vocabulary's text tokens sit in a byte trie laid out in depth-first order; the mask
// of a state is one walk over the trie that follows cached transitions and skips a subtree at
// its first dead byte. Masks are cached per state (a state repeats whenever the grammar loops,
// e.g. inside a JSON string), so the walk runs once per state, not once per token.
//
// Tokens: atomic tokens (control, user-defined, unused: Gemma 4's <|"|>, <|tool_call>,
// <|channel>, <turn|>, ... and its NORMAL-typed <unusedNN>) are never text: only a grammar
// element naming the token (<[id]> or <text>) allows one. End-of-generation tokens are allowed
// exactly when the grammar is complete. Empty text tokens are never allowed.
//
// A Matcher is a small value (the engine pointer and its state history): copy it to snapshot,
// rollback(n) to take back the last n tokens (speculative decoding's rejected drafts).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace boltrt::grammar {

// The vocabulary as the matcher sees it: each token's bytes, which tokens are atomic, which end
// generation, and the byte trie of the text tokens. Built once per model and shared.
class TokenVocabulary {
 public:
  // pieces[id]: the token's bytes with special tokens rendered as their text; atomic[id]: the
  // token is matched only as a whole (see above). Tokens named <unusedNN> are atomic whatever
  // `atomic` says (Gemma 4 types them NORMAL).
  TokenVocabulary(std::vector<std::string> pieces, std::vector<bool> atomic,
                  std::vector<int32_t> end_of_generation);

  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  bool atomic(int32_t id) const { return atomic_[static_cast<size_t>(id)] != 0; }
  bool end_of_generation(int32_t id) const { return eog_flag_[static_cast<size_t>(id)] != 0; }
  const std::vector<int32_t>& end_of_generation_tokens() const { return eog_; }
  // The atomic token whose text is exactly `text`, else any token with that text; -1 if none.
  int32_t find(std::string_view text) const;
  size_t words() const { return (pieces_.size() + 31) / 32; }  // mask size in 32-bit words

  // The trie, depth-first: node i holds byte[i] at depth[i] (1 = a first byte); its subtree
  // is nodes i+1 .. end[i]-1; the tokens whose bytes end at node i are
  // node_tokens[token_begin[i] .. token_begin[i+1]).
  struct Trie {
    std::vector<uint8_t> byte;
    std::vector<uint16_t> depth;
    std::vector<uint32_t> end;
    std::vector<uint32_t> token_begin;
    std::vector<int32_t> node_tokens;
    size_t max_depth = 0;
  };
  // The trie of the text tokens outside the slice, and the slice's: tokens made only of
  // printable ASCII other than '"' and '\\' (most of a vocabulary; free-string states accept all
  // of them at once).
  const Trie& trie() const { return trie_; }
  const Trie& slice_trie() const { return slice_trie_; }
  const std::vector<uint32_t>& slice_mask() const { return slice_mask_; }
  static bool is_slice_byte(char c) { return c >= 0x20 && c <= 0x7E && c != '"' && c != '\\'; }
  const std::vector<uint32_t>& text_tokens_mask() const { return text_mask_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<uint8_t> atomic_;
  std::vector<uint8_t> eog_flag_;
  std::vector<int32_t> eog_;
  std::unordered_map<std::string, int32_t> by_text_;
  void build_trie(const std::vector<int32_t>& sorted_ids, Trie& t) const;

  Trie trie_, slice_trie_;
  std::vector<uint32_t> text_mask_;  // every non-empty text token
  std::vector<uint32_t> slice_mask_;
};

// A grammar bound to a vocabulary: the interned stacks and states, their transitions and the
// cached masks. Shared by every matcher of that grammar and vocabulary; thread-safe (one lock).
class Engine {
 public:
  static constexpr uint32_t kDead = UINT32_MAX;          // no stack survives
  static constexpr uint32_t kFinished = UINT32_MAX - 1;  // an end-of-generation token was taken
  static constexpr size_t kMaxStates = 1u << 16;
  static constexpr size_t kMaxStacksPerState = 4096;
  static constexpr size_t kMaxCachedMasks = 256;  // 32 KiB each for a 262,144-token vocabulary

  // Throws boltrt::Error when a <text> token reference names no token of the vocabulary or a
  // <[id]> reference is outside it.
  Engine(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab);

  uint32_t initial_state() const { return initial_; }
  // The state after `token`, kFinished for an end-of-generation token in an accepting state,
  // or kDead when the token is not allowed.
  uint32_t advance(uint32_t state, int32_t token);
  // The state after raw text (no token boundaries; atomic elements never match), or kDead.
  uint32_t advance_bytes(uint32_t state, std::string_view bytes);
  bool accepting(uint32_t state);
  // Only the end is possible (nothing else can follow).
  bool complete(uint32_t state);
  // Writes the mask of `state` (vocab.words() words, bit id%32 of word id/32 set: allowed).
  void fill_mask(uint32_t state, std::vector<uint32_t>& out);

  const Grammar& grammar() const { return *grammar_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  size_t n_states() const;
  size_t n_masks_computed() const;  // trie walks done so far (cache misses)

 private:
  struct StackNode {
    uint32_t pos;
    uint32_t parent;
  };
  struct State {
    std::vector<uint32_t> stacks;  // sorted node ids; kAcceptNode when the grammar may end
    bool accepting = false;
    bool has_token_tops = false;  // some stack waits for a whole token
    int32_t mask_slot = -1;
  };
  static constexpr uint32_t kNoParent = UINT32_MAX;
  static constexpr uint32_t kAcceptNode = 0;

  uint32_t node(uint32_t pos, uint32_t parent);
  void close(uint32_t node, std::vector<uint32_t>& out);
  uint32_t intern(std::vector<uint32_t>& stacks);
  uint32_t step_byte(uint32_t state, uint8_t byte);
  uint32_t next(uint32_t state, uint8_t byte) {
    const uint32_t t = transitions_[static_cast<size_t>(state) * 256 + byte];
    return t != kUnknown ? t : step_byte(state, byte);
  }
  uint32_t step_token(uint32_t state, int32_t token);  // token elements only
  uint32_t merge(uint32_t a, uint32_t b);
  int32_t token_of(const Element& e) const;
  void compute_mask(uint32_t state, uint32_t* words);
  void walk(uint32_t state, const TokenVocabulary::Trie& trie, uint32_t* words);

  static constexpr uint32_t kUnknown = UINT32_MAX - 2;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<int32_t> token_ids_;  // grammar token_texts resolved
  mutable std::mutex mutex_;
  std::vector<StackNode> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<State> states_;
  std::unordered_map<std::string, uint32_t> state_ids_;  // key: the stack ids' bytes
  std::vector<uint32_t> transitions_;                    // 256 per state
  std::vector<std::vector<uint32_t>> masks_;
  std::vector<uint32_t> mask_owner_;
  size_t masks_computed_ = 0;
  std::vector<uint32_t> visit_stamp_;
  uint32_t stamp_ = 0;
  std::vector<uint32_t> walk_states_;
  uint32_t initial_ = kDead;
};

// The engine for (grammar, vocab) from a process-wide cache (the same compiled grammar on the
// same vocabulary shares its states and masks across requests).
std::shared_ptr<Engine> engine_for(std::shared_ptr<const Grammar> grammar,
                                   std::shared_ptr<const TokenVocabulary> vocab);

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<Engine> engine);

  // Takes `token` when the grammar allows it and returns true; otherwise returns false and
  // changes nothing.
  bool accept(int32_t token);
  // Takes raw text (tests, forced prefixes); false and no change when it does not fit.
  bool accept_bytes(std::string_view bytes);
  // Whether `token` may come next.
  bool allows(int32_t token) const;
  // Takes back the last n accepted tokens (n <= tokens_accepted()).
  void rollback(size_t n);
  size_t tokens_accepted() const { return history_.size() - 1; }

  bool is_accepting() const;  // the text so far is a complete sentence of the grammar
  bool is_complete() const;   // ... and nothing can follow it
  bool finished() const { return history_.back() == Engine::kFinished; }
  void fill_mask(std::vector<uint32_t>& out) const;
  // Sets every logit whose token the grammar does not allow to -infinity.
  void apply(std::span<float> logits, std::vector<uint32_t>& scratch) const;

  const Engine& engine() const { return *engine_; }

 private:
  std::shared_ptr<Engine> engine_;
  std::vector<uint32_t> history_;  // states: [0] initial, one more per accepted token
};

}  // namespace boltrt::grammar

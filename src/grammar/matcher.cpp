#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include "util/error.h"

namespace boltrt::grammar {
namespace {

bool is_unused_name(std::string_view s) {
  constexpr std::string_view kPrefix = "<unused";
  if (s.size() < kPrefix.size() + 2 || s.substr(0, kPrefix.size()) != kPrefix || s.back() != '>') {
    return false;
  }
  for (size_t i = kPrefix.size(); i + 1 < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

void set_bit(uint32_t* words, int32_t id) {
  words[static_cast<size_t>(id) >> 5] |= 1u << (static_cast<uint32_t>(id) & 31);
}

}  // namespace

// ---- TokenVocabulary ---------------------------------------------------------------------------

TokenVocabulary::TokenVocabulary(std::vector<std::string> pieces, std::vector<bool> atomic,
                                 std::vector<int32_t> end_of_generation)
    : pieces_(std::move(pieces)) {
  const size_t n = pieces_.size();
  if (atomic.size() != n) {
    fail("grammar: the vocabulary has {} pieces but {} atomic flags", n, atomic.size());
  }
  atomic_.resize(n);
  eog_flag_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) atomic_[i] = atomic[i] || is_unused_name(pieces_[i]);
  for (int32_t id : end_of_generation) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      fail("grammar: end-of-generation token {} is outside the vocabulary of {}", id, n);
    }
    // An end-of-generation token is never text, whatever its type says.
    atomic_[static_cast<size_t>(id)] = 1;
    if (!eog_flag_[static_cast<size_t>(id)]) eog_.push_back(id);
    eog_flag_[static_cast<size_t>(id)] = 1;
  }
  for (int pass = 0; pass < 2; ++pass) {  // atomic tokens win a text lookup
    for (size_t i = 0; i < n; ++i) {
      if ((atomic_[i] != 0) == (pass == 0))
        by_text_.try_emplace(pieces_[i], static_cast<int32_t>(i));
    }
  }

  std::vector<int32_t> ids;
  for (size_t i = 0; i < n; ++i) {
    if (!atomic_[i] && !pieces_[i].empty()) ids.push_back(static_cast<int32_t>(i));
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return pieces_[static_cast<size_t>(a)] < pieces_[static_cast<size_t>(b)];
  });
  text_mask_.assign(words(), 0);
  slice_mask_.assign(words(), 0);
  std::vector<int32_t> rest, slice;
  for (int32_t id : ids) {
    set_bit(text_mask_.data(), id);
    const std::string& p = pieces_[static_cast<size_t>(id)];
    const bool in_slice = std::all_of(p.begin(), p.end(), [](char c) { return is_slice_byte(c); });
    if (in_slice) set_bit(slice_mask_.data(), id);
    (in_slice ? slice : rest).push_back(id);
  }
  build_trie(rest, trie_);
  build_trie(slice, slice_trie_);
}

// A depth-first byte trie of `ids` (sorted by their pieces).
void TokenVocabulary::build_trie(const std::vector<int32_t>& ids, Trie& t) const {
  std::vector<uint32_t> path;
  const std::string* prev = nullptr;
  for (int32_t id : ids) {
    const std::string& s = pieces_[static_cast<size_t>(id)];
    size_t lcp = 0;
    if (prev != nullptr) {
      while (lcp < s.size() && lcp < prev->size() && (*prev)[lcp] == s[lcp]) ++lcp;
    }
    while (path.size() > lcp) {
      t.end[path.back()] = static_cast<uint32_t>(t.byte.size());
      path.pop_back();
    }
    for (size_t k = lcp; k < s.size(); ++k) {
      path.push_back(static_cast<uint32_t>(t.byte.size()));
      t.byte.push_back(static_cast<uint8_t>(s[k]));
      t.depth.push_back(static_cast<uint16_t>(std::min<size_t>(k + 1, 65535)));
      t.end.push_back(0);
      t.token_begin.push_back(static_cast<uint32_t>(t.node_tokens.size()));
    }
    t.node_tokens.push_back(id);
    t.max_depth = std::max(t.max_depth, s.size());
    prev = &s;
  }
  while (!path.empty()) {
    t.end[path.back()] = static_cast<uint32_t>(t.byte.size());
    path.pop_back();
  }
  t.token_begin.push_back(static_cast<uint32_t>(t.node_tokens.size()));
  if (t.max_depth >= 65535) fail("grammar: a token of {} bytes is too long", t.max_depth);
}

int32_t TokenVocabulary::find(std::string_view text) const {
  const auto it = by_text_.find(std::string(text));
  return it == by_text_.end() ? -1 : it->second;
}

// ---- Engine ------------------------------------------------------------------------------------

Engine::Engine(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  for (const std::string& text : grammar_->token_texts) {
    const int32_t id = vocab_->find(text);
    if (id < 0) fail("grammar: token {} is not in the vocabulary", text);
    token_ids_.push_back(id);
  }
  for (const Element& e : grammar_->elements) {
    if ((e.kind == ElementKind::kToken || e.kind == ElementKind::kNotToken) &&
        e.value >= static_cast<uint32_t>(vocab_->size())) {
      fail("grammar: token <[{}]> is outside the vocabulary of {}", e.value, vocab_->size());
    }
  }
  nodes_.push_back({UINT32_MAX, kNoParent});  // kAcceptNode
  std::lock_guard lock(mutex_);
  std::vector<uint32_t> out;
  ++stamp_;
  for (uint32_t alt : grammar_->rules[grammar_->root]) close(node(alt, kNoParent), out);
  initial_ = intern(out);
}

uint32_t Engine::node(uint32_t pos, uint32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(pos) << 32) | parent;
  auto [it, inserted] = node_ids_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) {
    if (nodes_.size() >= (size_t{1} << 24)) {
      fail("grammar: more than {} parser stacks; the grammar is too ambiguous", nodes_.size());
    }
    nodes_.push_back({pos, parent});
  }
  return it->second;
}

// Adds to `out` the stacks reachable from `start` without consuming input whose top is a
// terminal (or kAcceptNode). Nodes already visited in this step (stamp_) are skipped.
void Engine::close(uint32_t start, std::vector<uint32_t>& out) {
  const auto& elements = grammar_->elements;
  std::vector<uint32_t> work{start};
  while (!work.empty()) {
    const uint32_t n = work.back();
    work.pop_back();
    if (visit_stamp_.size() <= n) visit_stamp_.resize(nodes_.size() + 1024, 0);
    if (visit_stamp_[n] == stamp_) continue;
    visit_stamp_[n] = stamp_;
    if (n == kAcceptNode) {
      out.push_back(kAcceptNode);
      continue;
    }
    const StackNode sn = nodes_[n];
    const Element& e = elements[sn.pos];
    if (e.kind == ElementKind::kEnd) {
      work.push_back(sn.parent == kNoParent ? kAcceptNode : sn.parent);
    } else if (e.kind == ElementKind::kRule) {
      const uint32_t ret =
          elements[sn.pos + 1].kind == ElementKind::kEnd ? sn.parent : node(sn.pos + 1, sn.parent);
      for (uint32_t alt : grammar_->rules[e.value]) work.push_back(node(alt, ret));
    } else {
      out.push_back(n);
    }
  }
}

uint32_t Engine::intern(std::vector<uint32_t>& stacks) {
  if (stacks.empty()) return kDead;
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > kMaxStacksPerState) {
    fail("grammar: more than {} parses are alive at once; the grammar is too ambiguous",
         kMaxStacksPerState);
  }
  std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(uint32_t));
  auto [it, inserted] =
      state_ids_.try_emplace(std::move(key), static_cast<uint32_t>(states_.size()));
  if (!inserted) return it->second;
  if (states_.size() >= kMaxStates) {
    fail("grammar: more than {} matcher states; the grammar is too large or too ambiguous",
         kMaxStates);
  }
  State s;
  s.stacks = stacks;
  for (uint32_t n : stacks) {
    if (n == kAcceptNode) {
      s.accepting = true;
      continue;
    }
    const ElementKind k = grammar_->elements[nodes_[n].pos].kind;
    if (k != ElementKind::kBytes) s.has_token_tops = true;
  }
  states_.push_back(std::move(s));
  transitions_.resize(transitions_.size() + 256, kUnknown);
  return it->second;
}

uint32_t Engine::step_byte(uint32_t state, uint8_t byte) {
  std::vector<uint32_t> out;
  ++stamp_;
  const std::vector<uint32_t> stacks = states_[state].stacks;  // intern() grows states_
  for (uint32_t n : stacks) {
    if (n == kAcceptNode) continue;
    const StackNode sn = nodes_[n];
    const Element& e = grammar_->elements[sn.pos];
    if (e.kind == ElementKind::kBytes && byte_in(grammar_->byte_sets[e.value], byte)) {
      close(node(sn.pos + 1, sn.parent), out);
    }
  }
  const uint32_t result = intern(out);
  transitions_[static_cast<size_t>(state) * 256 + byte] = result;
  return result;
}

int32_t Engine::token_of(const Element& e) const {
  switch (e.kind) {
    case ElementKind::kToken:
    case ElementKind::kNotToken:
      return static_cast<int32_t>(e.value);
    case ElementKind::kTokenText:
    case ElementKind::kNotTokenText:
      return token_ids_[e.value];
    default:
      return -1;
  }
}

uint32_t Engine::step_token(uint32_t state, int32_t token) {
  std::vector<uint32_t> out;
  ++stamp_;
  const std::vector<uint32_t> stacks = states_[state].stacks;
  for (uint32_t n : stacks) {
    if (n == kAcceptNode) continue;
    const StackNode sn = nodes_[n];
    const Element& e = grammar_->elements[sn.pos];
    bool match = false;
    if (e.kind == ElementKind::kToken || e.kind == ElementKind::kTokenText) {
      match = token_of(e) == token;
    } else if (e.kind == ElementKind::kNotToken || e.kind == ElementKind::kNotTokenText) {
      match = token_of(e) != token && !vocab_->atomic(token) && !vocab_->piece(token).empty();
    }
    if (match) close(node(sn.pos + 1, sn.parent), out);
  }
  return intern(out);
}

uint32_t Engine::merge(uint32_t a, uint32_t b) {
  if (a == kDead) return b;
  if (b == kDead || a == b) return a;
  std::vector<uint32_t> both = states_[a].stacks;
  both.insert(both.end(), states_[b].stacks.begin(), states_[b].stacks.end());
  return intern(both);
}

uint32_t Engine::advance(uint32_t state, int32_t token) {
  if (token < 0 || token >= vocab_->size()) return kDead;
  std::lock_guard lock(mutex_);
  if (state == kDead || state == kFinished) return kDead;
  uint32_t result = kDead;
  if (!vocab_->atomic(token)) {
    const std::string& piece = vocab_->piece(token);
    if (!piece.empty()) {
      uint32_t s = state;
      for (char c : piece) {
        s = next(s, static_cast<uint8_t>(c));
        if (s == kDead) break;
      }
      result = s;
    }
  }
  if (states_[state].has_token_tops) result = merge(result, step_token(state, token));
  if (result == kDead && vocab_->end_of_generation(token) && states_[state].accepting) {
    return kFinished;
  }
  return result;
}

uint32_t Engine::advance_bytes(uint32_t state, std::string_view bytes) {
  std::lock_guard lock(mutex_);
  if (state == kDead || state == kFinished) return kDead;
  for (char c : bytes) {
    state = next(state, static_cast<uint8_t>(c));
    if (state == kDead) break;
  }
  return state;
}

bool Engine::accepting(uint32_t state) {
  if (state == kDead) return false;
  if (state == kFinished) return true;
  std::lock_guard lock(mutex_);
  return states_[state].accepting;
}

bool Engine::complete(uint32_t state) {
  if (state == kDead) return false;
  if (state == kFinished) return true;
  std::lock_guard lock(mutex_);
  const State& s = states_[state];
  return s.accepting && s.stacks.size() == 1;
}

void Engine::walk(uint32_t state, const TokenVocabulary::Trie& t, uint32_t* words) {
  walk_states_.resize(std::max(walk_states_.size(), t.max_depth + 1));
  walk_states_[0] = state;
  const size_t n_nodes = t.byte.size();
  for (size_t i = 0; i < n_nodes;) {
    const uint32_t from = walk_states_[t.depth[i] - 1];
    const uint32_t to = next(from, t.byte[i]);
    if (to == kDead) {
      i = t.end[i];
      continue;
    }
    walk_states_[t.depth[i]] = to;
    for (uint32_t k = t.token_begin[i]; k < t.token_begin[i + 1]; ++k) {
      set_bit(words, t.node_tokens[k]);
    }
    ++i;
  }
}

void Engine::compute_mask(uint32_t state, uint32_t* words) {
  ++masks_computed_;
  const size_t n_words = vocab_->words();
  std::memset(words, 0, n_words * sizeof(uint32_t));
  // A state that maps every slice byte to itself allows every slice token (each leads back to
  // the state, which is live): their mask is OR-ed in and only the other tokens are walked.
  // Inside a free string or free text this skips most of the vocabulary.
  bool absorbs = true;
  for (int b = 0; b < 256 && absorbs; ++b) {
    if (TokenVocabulary::is_slice_byte(static_cast<char>(b))) {
      absorbs = next(state, static_cast<uint8_t>(b)) == state;
    }
  }
  if (absorbs) {
    const std::vector<uint32_t>& slice = vocab_->slice_mask();
    for (size_t w = 0; w < n_words; ++w) words[w] |= slice[w];
  } else {
    walk(state, vocab_->slice_trie(), words);
  }
  walk(state, vocab_->trie(), words);
  const State& s = states_[state];
  if (s.has_token_tops) {
    for (uint32_t n : s.stacks) {
      if (n == kAcceptNode) continue;
      const Element& e = grammar_->elements[nodes_[n].pos];
      if (e.kind == ElementKind::kToken || e.kind == ElementKind::kTokenText) {
        set_bit(words, token_of(e));
      } else if (e.kind == ElementKind::kNotToken || e.kind == ElementKind::kNotTokenText) {
        const int32_t x = token_of(e);
        const std::vector<uint32_t>& text = vocab_->text_tokens_mask();
        const bool x_allowed =
            (words[static_cast<size_t>(x) >> 5] >> (static_cast<uint32_t>(x) & 31)) & 1u;
        for (size_t w = 0; w < n_words; ++w) words[w] |= text[w];
        if (!x_allowed)
          words[static_cast<size_t>(x) >> 5] &= ~(1u << (static_cast<uint32_t>(x) & 31));
      }
    }
  }
  if (s.accepting) {
    for (int32_t id : vocab_->end_of_generation_tokens()) set_bit(words, id);
  }
}

void Engine::fill_mask(uint32_t state, std::vector<uint32_t>& out) {
  const size_t n_words = vocab_->words();
  out.resize(n_words);
  if (state == kDead || state == kFinished) {
    std::fill(out.begin(), out.end(), 0u);
    return;
  }
  std::lock_guard lock(mutex_);
  if (states_[state].mask_slot < 0) {
    if (masks_.size() >= kMaxCachedMasks) {
      // Forget every cached mask (they are recomputed on demand); states stay.
      for (uint32_t owner : mask_owner_) states_[owner].mask_slot = -1;
      masks_.clear();
      mask_owner_.clear();
    }
    std::vector<uint32_t> words(n_words);
    compute_mask(state, words.data());
    states_[state].mask_slot = static_cast<int32_t>(masks_.size());
    masks_.push_back(std::move(words));
    mask_owner_.push_back(state);
  }
  const std::vector<uint32_t>& m = masks_[static_cast<size_t>(states_[state].mask_slot)];
  std::copy(m.begin(), m.end(), out.begin());
}

size_t Engine::n_states() const {
  std::lock_guard lock(mutex_);
  return states_.size();
}

size_t Engine::n_masks_computed() const {
  std::lock_guard lock(mutex_);
  return masks_computed_;
}

std::shared_ptr<Engine> engine_for(std::shared_ptr<const Grammar> grammar,
                                   std::shared_ptr<const TokenVocabulary> vocab) {
  static std::mutex mutex;
  static std::map<std::pair<const Grammar*, const TokenVocabulary*>, std::shared_ptr<Engine>> cache;
  constexpr size_t kMaxEntries = 16;  // each holds up to 8 MiB of masks and 64 MiB of states
  const auto key = std::make_pair(grammar.get(), vocab.get());
  {
    std::lock_guard lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto engine = std::make_shared<Engine>(grammar, vocab);
  std::lock_guard lock(mutex);
  if (cache.size() >= kMaxEntries) cache.clear();
  cache.emplace(key, engine);
  return engine;
}

// ---- Matcher -----------------------------------------------------------------------------------

Matcher::Matcher(std::shared_ptr<Engine> engine) : engine_(std::move(engine)) {
  history_.push_back(engine_->initial_state());
}

bool Matcher::accept(int32_t token) {
  const uint32_t next = engine_->advance(history_.back(), token);
  if (next == Engine::kDead) return false;
  history_.push_back(next);
  return true;
}

bool Matcher::accept_bytes(std::string_view bytes) {
  const uint32_t next = engine_->advance_bytes(history_.back(), bytes);
  if (next == Engine::kDead) return false;
  history_.push_back(next);
  return true;
}

bool Matcher::allows(int32_t token) const {
  return engine_->advance(history_.back(), token) != Engine::kDead;
}

void Matcher::rollback(size_t n) {
  if (n > tokens_accepted()) {
    fail("grammar: cannot take back {} tokens, only {} were accepted", n, tokens_accepted());
  }
  history_.resize(history_.size() - n);
}

bool Matcher::is_accepting() const {
  return engine_->accepting(history_.back());
}
bool Matcher::is_complete() const {
  return engine_->complete(history_.back());
}

void Matcher::fill_mask(std::vector<uint32_t>& out) const {
  engine_->fill_mask(history_.back(), out);
}

void Matcher::apply(std::span<float> logits, std::vector<uint32_t>& scratch) const {
  fill_mask(scratch);
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), scratch.size() * 32);
  for (size_t w = 0; w * 32 < n; ++w) {
    const uint32_t bits = scratch[w];
    if (bits == ~0u) continue;
    const size_t end = std::min(n, w * 32 + 32);
    if (bits == 0) {  // the common case of a sparse mask: a run of 32 without a branch each
      std::fill(logits.begin() + static_cast<std::ptrdiff_t>(w * 32),
                logits.begin() + static_cast<std::ptrdiff_t>(end), kMinusInf);
      continue;
    }
    for (size_t i = w * 32; i < end; ++i) {
      if (!((bits >> (i & 31)) & 1u)) logits[i] = kMinusInf;
    }
  }
  for (size_t i = n; i < logits.size(); ++i) logits[i] = kMinusInf;
}

}  // namespace boltrt::grammar

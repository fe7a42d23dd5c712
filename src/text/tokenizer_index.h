// Lookup tables behind text::Tokenizer (private to src/text). Open addressing with flat arrays:
// the Gemma 4 vocabulary has 262,144 tokens and 514,906 merges, and node-based hash maps made
// loading it take about a second.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer.h"

namespace boltrt::text {

// Strings with dense ids: ids 0..n_vocab-1 are the vocabulary's tokens (so a symbol id below
// n_vocab *is* a token id), higher ids are other strings the merges mention.
class SymbolTable {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  void init(const std::vector<std::string>* tokens, size_t expected_total) {
    tokens_ = tokens;
    size_t cap = 16;
    while (cap < expected_total * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
    hashes_.clear();
    hashes_.reserve(tokens->size());
  }
  size_t size() const { return hashes_.size(); }
  std::string_view text(uint32_t id) const {
    return id < tokens_->size() ? std::string_view((*tokens_)[id])
                                : std::string_view(extra_[id - tokens_->size()]);
  }
  uint32_t find(std::string_view s) const { return find_hashed(s, hash(s)); }
  // Adds the next token (ids must be added in order 0..n-1 before any extra string); returns
  // the id of an existing equal string instead when there is one.
  uint32_t add_token(uint32_t id) {
    const std::string_view s = (*tokens_)[id];
    const uint64_t h = hash(s);
    const uint32_t found = find_hashed(s, h);
    if (found != kNone) return found;
    insert(id, h);
    return id;
  }
  uint32_t intern(std::string_view s) {
    const uint64_t h = hash(s);
    const uint32_t found = find_hashed(s, h);
    if (found != kNone) return found;
    extra_.emplace_back(s);
    const auto id = static_cast<uint32_t>(tokens_->size() + extra_.size() - 1);
    insert(id, h);
    return id;
  }

 private:
  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
  // A slot keeps the hash's high half next to the id, so a probe touches one cache line until
  // the hashes agree.
  struct Slot {
    uint32_t id = kNone;
    uint32_t tag = 0;
  };
  static uint32_t tag_of(uint64_t h) { return static_cast<uint32_t>(h >> 32); }
  uint32_t find_hashed(std::string_view s, uint64_t h) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.id == kNone) return kNone;
      if (slot.tag == tag_of(h) && text(slot.id) == s) return slot.id;
    }
  }
  void insert(uint32_t id, uint64_t h) {
    if (hashes_.size() <= id) hashes_.resize(id + 1, 0);
    hashes_[id] = h;
    if ((used_ + 1) * 2 > slots_.size()) grow();
    place(id, h);
    ++used_;
  }
  void place(uint32_t id, uint64_t h) {
    const size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    while (slots_[i].id != kNone) i = (i + 1) & mask;
    slots_[i] = Slot{id, tag_of(h)};
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, Slot{});
    for (const Slot& slot : old) {
      if (slot.id != kNone) place(slot.id, hashes_[slot.id]);
    }
  }

  const std::vector<std::string>* tokens_ = nullptr;
  std::vector<std::string> extra_;
  std::vector<uint64_t> hashes_;  // by id
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

// (left symbol, right symbol) -> (rank, merged symbol); the first merge of a pair wins.
class MergeTable {
 public:
  struct Merge {
    int32_t rank = -1;
    uint32_t result = SymbolTable::kNone;
  };
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n + n / 2) cap <<= 1;  // load factor <= 2/3
    keys_.assign(cap, kEmpty);
    values_.assign(cap, Merge{});
  }
  void add(uint32_t left, uint32_t right, Merge m) {
    const uint64_t key = uint64_t(left) << 32 | right;
    const size_t mask = keys_.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == key) return;  // an earlier merge of the same pair has the lower rank
      if (keys_[i] == kEmpty) {
        keys_[i] = key;
        values_[i] = m;
        return;
      }
    }
  }
  const Merge* find(uint32_t left, uint32_t right) const {
    if (left == SymbolTable::kNone || right == SymbolTable::kNone || keys_.empty()) return nullptr;
    const uint64_t key = uint64_t(left) << 32 | right;
    const size_t mask = keys_.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;
  static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
  }
  std::vector<uint64_t> keys_;
  std::vector<Merge> values_;
};

struct Tokenizer::Index {
  SymbolTable symbols;  // every token text, plus merge operands that are not tokens
  MergeTable merges;    // Gemma 4 only

  // Special-token candidates by their first two bytes (tokens of one byte are kept apart).
  std::unordered_map<uint16_t, std::vector<TokenId>> specials_by_prefix;
  std::vector<TokenId> one_byte_specials;
  std::vector<int32_t> special_rank;  // id -> position in Tokenizer::specials_ (or -1)
};

}  // namespace boltrt::text

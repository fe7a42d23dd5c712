// Gemma 4 BPE (gemma4.md §8.4): text is cut into runs of '\n' and runs of everything else;
// a run of newlines that is itself a token is emitted whole; every other run starts as single
// UTF-8 characters and repeatedly merges the adjacent pair with the lowest merge rank (leftmost
// first on ties). Symbols without a token fall back to <0xXX> byte tokens.
#include <queue>

#include "text/tokenizer.h"
#include "text/tokenizer_index.h"
#include "text/utf8.h"

namespace boltrt::text {

namespace {

struct Symbol {
  uint32_t begin;  // byte offset in the run
  uint32_t len;    // 0 once merged into its left neighbour
  int32_t prev, next;
  uint32_t id;  // SymbolTable id, or SymbolTable::kNone
};

struct Candidate {
  int32_t rank;
  int32_t left, right;
  uint32_t left_len, right_len;  // lengths when queued; a change means the pair is stale
  uint32_t result;
};

struct LaterCandidate {  // priority_queue puts the "largest" first: lowest rank, then leftmost
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  }
};

}  // namespace

void Tokenizer::encode_bpe_fragment(std::string_view fragment, std::vector<TokenId>& out) const {
  const Index& ix = *index_;
  const std::string text = normalize_utf8_like_llama(fragment);
  std::vector<Symbol> symbols;
  std::vector<Candidate> storage;
  auto emit_bytes = [&](std::string_view s) {
    for (char c : s) {
      const TokenId b = byte_token(static_cast<uint8_t>(c));
      if (b != kNoToken) out.push_back(b);  // a missing byte token is dropped, as llama.cpp does
    }
  };

  for (size_t pos = 0; pos < text.size();) {
    const bool newlines = text[pos] == '\n';
    size_t end = pos;
    while (end < text.size() && (text[end] == '\n') == newlines) ++end;
    const std::string_view run(text.data() + pos, end - pos);
    pos = end;
    if (newlines) {
      const TokenId whole = find(run);
      if (whole != kNoToken) {
        out.push_back(whole);
        continue;
      }
    }

    symbols.clear();
    for (size_t at = 0; at < run.size();) {
      const size_t len = std::min(utf8_lead_length(static_cast<uint8_t>(run[at])), run.size() - at);
      const auto index = static_cast<int32_t>(symbols.size());
      symbols.push_back({static_cast<uint32_t>(at), static_cast<uint32_t>(len), index - 1,
                         at + len == run.size() ? -1 : index + 1,
                         ix.symbols.find(run.substr(at, len))});
      at += len;
    }
    storage.clear();
    std::priority_queue<Candidate, std::vector<Candidate>, LaterCandidate> queue(
        LaterCandidate{}, std::move(storage));
    auto consider = [&](int32_t left, int32_t right) {
      if (left < 0 || right < 0) return;
      const MergeTable::Merge* m = ix.merges.find(symbols[left].id, symbols[right].id);
      if (!m) return;
      queue.push({m->rank, left, right, symbols[left].len, symbols[right].len, m->result});
    };
    for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) consider(i - 1, i);
    while (!queue.empty()) {
      const Candidate c = queue.top();
      queue.pop();
      Symbol& left = symbols[c.left];
      Symbol& right = symbols[c.right];
      if (left.len == 0 || right.len == 0 || left.len != c.left_len || right.len != c.right_len) {
        continue;
      }
      left.len += right.len;
      left.id = c.result;
      right.len = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = c.left;
      consider(left.prev, c.left);
      consider(c.left, left.next);
    }

    for (int32_t i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
      const Symbol& s = symbols[i];
      const std::string_view piece = run.substr(s.begin, s.len);
      // Symbol ids below n_vocab are token ids; others (and kNone) have no token.
      const TokenId id = s.id < tokens_.size() ? static_cast<TokenId>(s.id) : kNoToken;
      if (id != kNoToken) {
        out.push_back(id);
      } else {
        emit_bytes(piece);
      }
    }
  }
}

}  // namespace boltrt::text

// SentencePiece-style tokenization as llama.cpp does it for tokenizer.ggml.model = "llama":
// start from UTF-8 characters (cut by lead byte, so invalid input is cut the same way), and
// repeatedly merge the adjacent pair whose concatenation is the vocabulary token with the
// highest score (leftmost first on ties). Characters without a token become byte tokens.
#include <queue>

#include "text/tokenizer.h"
#include "text/tokenizer_index.h"
#include "text/utf8.h"

namespace boltrt::text {

namespace {

struct Symbol {
  uint32_t begin;
  uint32_t len;  // 0 once merged into its left neighbour
  int32_t prev, next;
};

struct Candidate {
  float score;
  int32_t left, right;
  uint32_t size;  // bytes of the merged text when queued; a change means the pair is stale
};

struct LaterCandidate {  // highest score first, then leftmost
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::encode_spm_fragment(std::string_view text, std::vector<TokenId>& out) const {
  std::vector<Symbol> symbols;
  for (size_t at = 0; at < text.size();) {
    const size_t len = std::min(utf8_lead_length(static_cast<uint8_t>(text[at])), text.size() - at);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(at), static_cast<uint32_t>(len), index - 1,
                       at + len == text.size() ? -1 : index + 1});
    at += len;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, LaterCandidate> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t size = symbols[left].len + symbols[right].len;
    const TokenId id = find(text.substr(symbols[left].begin, size));
    if (id == kNoToken) return;
    queue.push({scores_[id], left, right, size});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) consider(i - 1, i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    if (left.len == 0 || right.len == 0 || left.len + right.len != c.size) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
  for (int32_t i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].begin, symbols[i].len);
    const TokenId id = find(piece);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      // llama.cpp throws when a vocabulary lacks the byte token; we drop the byte instead.
      const TokenId b = byte_token(static_cast<uint8_t>(c));
      if (b != kNoToken) out.push_back(b);
    }
  }
}

}  // namespace boltrt::text

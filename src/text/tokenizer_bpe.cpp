// The two BPE tokenizers. Both merge, inside one word, the adjacent pair of symbols with the
// lowest merge rank (leftmost first on ties) until no pair merges, starting from UTF-8
// characters; they differ in how text becomes words.
//   Gemma 4 (gemma4.md §8.4): text is cut into runs of '\n' and runs of everything else; a run
//   of newlines that is itself a token is emitted whole. Symbols without a token fall back to
//   <0xXX> byte tokens.
//   Byte-level (gpt2, qwen35.md §8.2): the pre-tokenizer cuts text into words, and each word's
//   bytes are written in GPT-2's printable alphabet before merging. Symbols without a token fall
//   back to the tokens of their single bytes.
#include <array>
#include <queue>

#include "text/pretokenizer.h"
#include "text/tokenizer.h"
#include "text/tokenizer_index.h"
#include "text/utf8.h"

namespace boltrt::text {

namespace {

struct Symbol {
  uint32_t begin;  // byte offset in the word
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

// UTF-8 of the GPT-2 alphabet character of every byte.
const std::array<std::string, 256>& level_chars() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    for (int b = 0; b < 256; ++b) append_utf8(t[b], byte_to_level_char(static_cast<uint8_t>(b)));
    return t;
  }();
  return table;
}

// Code points of text that normalize_utf8_like_llama produced (every sequence well formed by
// its bit pattern), with the byte offset where each starts; offsets has one extra entry, the end.
void decode_normalized(std::string_view text, std::vector<uint32_t>& cps,
                       std::vector<uint32_t>& offsets) {
  cps.clear();
  offsets.clear();
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<uint8_t>(text[i]);
    const size_t len = std::min(utf8_lead_length(lead), text.size() - i);
    uint32_t cp = len == 1 ? lead : lead & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) cp = cp << 6 | (static_cast<uint8_t>(text[i + k]) & 0x3F);
    cps.push_back(cp);
    offsets.push_back(static_cast<uint32_t>(i));
    i += len;
  }
  offsets.push_back(static_cast<uint32_t>(text.size()));
}

}  // namespace

void Tokenizer::merge_word(std::string_view word, std::vector<TokenId>& out) const {
  const Index& ix = *index_;
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t at = 0; at < word.size();) {
    const size_t len = std::min(utf8_lead_length(static_cast<uint8_t>(word[at])), word.size() - at);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(at), static_cast<uint32_t>(len), index - 1,
                       at + len == word.size() ? -1 : index + 1,
                       ix.symbols.find(word.substr(at, len))});
    at += len;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, LaterCandidate> queue;
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
    // Symbol ids below n_vocab are token ids; others (and kNone) have no token.
    if (s.id < tokens_.size()) {
      out.push_back(static_cast<TokenId>(s.id));
      continue;
    }
    for (char ch : word.substr(s.begin, s.len)) {
      // A missing byte token is dropped, as llama.cpp does.
      const TokenId b = kind_ == TokenizerKind::kByteBpe ? find(std::string_view(&ch, 1))
                                                         : byte_token(static_cast<uint8_t>(ch));
      if (b != kNoToken) out.push_back(b);
    }
  }
}

void Tokenizer::encode_bpe_fragment(std::string_view fragment, std::vector<TokenId>& out) const {
  const std::string text = normalize_utf8_like_llama(fragment);
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
    merge_word(run, out);
  }
}

void Tokenizer::encode_byte_bpe_fragment(std::string_view fragment,
                                         std::vector<TokenId>& out) const {
  const std::string text = normalize_utf8_like_llama(fragment);
  std::vector<uint32_t> cps, offsets, lengths;
  decode_normalized(text, cps, offsets);
  split_qwen35(cps, lengths);
  const auto& chars = level_chars();
  std::string word;
  size_t cp = 0;
  for (uint32_t len : lengths) {
    word.clear();
    for (uint32_t b = offsets[cp]; b < offsets[cp + len]; ++b) {
      word += chars[static_cast<uint8_t>(text[b])];
    }
    cp += len;
    merge_word(word, out);
  }
}

}  // namespace boltrt::text

// Token ids back to text: per-token pieces, llama_detokenize's whole-string rules, and the
// streaming decoder that never hands out half a UTF-8 character.
#include "text/tokenizer.h"
#include "text/utf8.h"
#include "util/error.h"

namespace boltrt::text {

namespace {
const std::string kEmpty;
}

const std::string& Tokenizer::piece(TokenId id, bool special) const {
  if (!valid(id)) fail("token id {} is out of range (vocabulary has {})", id, n_vocab());
  if (!special && (attrs_[id] & (kAttrUnknown | kAttrControl))) return kEmpty;
  return pieces_[id];
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool remove_special,
                              bool unparse_special) const {
  bool strip_space = add_space_prefix_;  // SentencePiece: the first piece's leading space
  if (remove_special && add_bos_ && !ids.empty() && ids.front() == bos_) {
    strip_space = false;
    ids = ids.subspan(1);
  }
  if (remove_special && add_eos_ && !ids.empty() && ids.back() == eos_) {
    ids = ids.subspan(0, ids.size() - 1);
  }
  std::string text;
  for (TokenId id : ids) {
    std::string_view p = piece(id, unparse_special);
    if (strip_space && !p.empty() && p.front() == ' ') p.remove_prefix(1);
    strip_space = false;
    text.append(p);
  }
  if (!clean_spaces_ || text.empty()) return text;

  // llama.cpp's clean-up passes for BPE vocabularies, done in place exactly as it does them
  // (later passes read bytes that earlier iterations may have overwritten).
  char* s = text.data();
  // 1: drop a space before ? ! . ,
  int64_t n1 = static_cast<int64_t>(text.size()), total = 1;
  for (int64_t i = 1; i < n1; ++i) {
    const char x = s[i];
    if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    s[total++] = x;
  }
  // 2: " ' " loses both spaces
  const int64_t n2 = total;
  total = 1;
  for (int64_t i = 1; i < n2; ++i) {
    const char x = s[i];
    if (x == '\'' && i + 1 < n2 && s[i - 1] == ' ' && s[i + 1] == ' ') {
      --total;
      s[++i] = '\0';
    }
    s[total++] = x;
  }
  // 3: " 's", " 'm", " 're", " 've" lose the space
  const int64_t n3 = total;
  total = 1;
  for (int64_t i = 1; i < n3; ++i) {
    const char x = s[i];
    if (s[i - 1] == ' ' && x == '\'' && i + 1 < n3) {
      const char x1 = s[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (i + 2 < n3) {
        const char x2 = s[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    s[total++] = x;
  }
  text.resize(static_cast<size_t>(total));
  return text;
}

std::string StreamingDetokenizer::push(TokenId id) {
  pending_.append(tokenizer_->piece(id, render_special_));
  const size_t hold = incomplete_utf8_tail(pending_);
  std::string ready = sanitize_utf8(std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  return ready;
}

std::string StreamingDetokenizer::finish() {
  std::string rest = sanitize_utf8(pending_);
  pending_.clear();
  return rest;
}

}  // namespace boltrt::text

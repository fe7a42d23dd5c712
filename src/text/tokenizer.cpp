// Loading a Tokenizer from GGUF metadata, special-token splitting and encode() dispatch.
// The attribute and end-of-generation rules follow llama.cpp's vocabulary loader so that
// encode/decode agree with it id for id (see tests/test_tokenizer_parity.cpp).
#include "text/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "gguf/gguf.h"
#include "text/pretokenizer.h"
#include "text/tokenizer_index.h"
#include "text/utf8.h"
#include "util/error.h"

namespace boltrt::text {

namespace {

// llama.cpp's GGUF token types (tokenizer.ggml.token_type values).
enum TokenType : int64_t {
  kTypeUndefined = 0,
  kTypeNormal = 1,
  kTypeUnknown = 2,
  kTypeControl = 3,
  kTypeUserDefined = 4,
  kTypeUnused = 5,
  kTypeByte = 6,
};

uint32_t attr_from_type(int64_t type) {
  switch (type) {
    case kTypeUnknown:
      return kAttrUnknown;
    case kTypeUnused:
      return kAttrUnused;
    case kTypeNormal:
      return kAttrNormal;
    case kTypeControl:
      return kAttrControl;
    case kTypeUserDefined:
      return kAttrUserDefined;
    case kTypeByte:
      return kAttrByte;
    default:
      return kAttrUndefined;
  }
}

// Token texts that llama.cpp treats as end-of-turn when the file names no eot id. llama.cpp
// takes the first one its hash map yields; we take the first in this order (for Qwen's
// vocabulary that is <|im_end|>, as llama.cpp reports).
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",         "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",    "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
};
// Token texts that end generation (llama.cpp's list; the Gemma 4 ones are the last three).
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
};

// Fill-in-the-middle tokens llama.cpp recognises by text (each marked CONTROL); the pad, repo
// and file-separator ones also end generation.
enum Fim { kFimPre, kFimSuf, kFimMid, kFimPad, kFimRep, kFimSep, kFimCount };
constexpr std::string_view kFimKeys[kFimCount] = {
    "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
    "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.fim_pad_token_id",
    "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id",
};
constexpr std::string_view kFimOldKeys[3] = {
    "tokenizer.ggml.prefix_token_id",
    "tokenizer.ggml.suffix_token_id",
    "tokenizer.ggml.middle_token_id",
};
const std::vector<std::string_view> kFimTexts[kFimCount] = {
    {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
     "<|code_prefix|>", "<|prefix|>"},
    {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
     "<|code_suffix|>", "<|suffix|>"},
    {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
     "<|code_middle|>", "<|middle|>"},
    {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
    {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
    {"<|file_sep|>"},
};

// A byte-level vocabulary string back to bytes (llama.cpp's rule for characters outside the
// alphabet: "[UNK_BYTE_0x<hex of the character's UTF-8>" + the whole token text + "]").
std::string level_text_to_bytes(const std::string& token) {
  const std::string text = normalize_utf8_like_llama(token);
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<uint8_t>(text[i]);
    const size_t len = std::min(utf8_lead_length(lead), text.size() - i);
    uint32_t cp = len == 1 ? lead : lead & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) cp = cp << 6 | (static_cast<uint8_t>(text[i + k]) & 0x3F);
    const int byte = level_char_to_byte(cp);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out += "[UNK_BYTE_0x";
      for (size_t k = 0; k < len; ++k) {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%02x", static_cast<uint8_t>(text[i + k]));
        out += hex;
      }
      out += token;
      out += "]";
    }
    i += len;
  }
  return out;
}

const gguf::Array* required_array(const gguf::File& f, std::string_view key) {
  const gguf::Array* a = f.get_array(key);
  if (!a) fail("{}: {}: missing (needed by the tokenizer)", f.path(), key);
  return a;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (;;) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out.append(to);
    pos = hit + from.size();
  }
  if (pos == 0) return;
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 "▁"

}  // namespace

Tokenizer::Tokenizer() : index_(std::make_unique<Index>()) {
  std::fill(std::begin(byte_tokens_), std::end(byte_tokens_), kNoToken);
}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& f) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  Index& ix = *t->index_;
  const std::string& path = f.path();

  const std::optional<std::string> model = f.get_string("tokenizer.ggml.model");
  if (!model) fail("{}: tokenizer.ggml.model: missing (the file has no tokenizer)", path);
  if (*model == "gemma4") {
    t->kind_ = TokenizerKind::kGemma4Bpe;
  } else if (*model == "llama") {
    t->kind_ = TokenizerKind::kSentencePiece;
  } else if (*model == "gpt2") {
    t->kind_ = TokenizerKind::kByteBpe;
    const std::optional<std::string> pre = f.get_string("tokenizer.ggml.pre");
    if (!pre || *pre != "qwen35") {
      fail(
          "{}: tokenizer.ggml.pre: unsupported pre-tokenizer '{}' for tokenizer gpt2 "
          "(supported: qwen35)",
          path, pre.value_or(""));
    }
  } else {
    fail("{}: tokenizer.ggml.model: unsupported tokenizer '{}' (supported: gemma4, llama, gpt2)",
         path, *model);
  }
  const bool spm = t->kind_ == TokenizerKind::kSentencePiece;
  const bool byte_level = t->kind_ == TokenizerKind::kByteBpe;

  // ---- tokens, scores, types ----------------------------------------------------------------
  const gguf::Array* tokens = required_array(f, "tokenizer.ggml.tokens");
  if (tokens->type != gguf::ValueType::STRING) {
    fail("{}: tokenizer.ggml.tokens: expected an array of strings, got {}", path,
         gguf::value_type_name(tokens->type));
  }
  const size_t n = tokens->items.size();
  if (n == 0 || n > size_t(INT32_MAX)) {
    fail("{}: tokenizer.ggml.tokens: bad token count {}", path, n);
  }
  t->tokens_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string* s = tokens->items[i].as_string();
    if (!s) fail("{}: tokenizer.ggml.tokens[{}]: not a string", path, i);
    t->tokens_[i] = s->empty() ? "[EMPTY_" + std::to_string(i) + "]" : *s;
  }
  t->scores_.assign(n, 0.0f);
  if (const gguf::Array* scores = f.get_array("tokenizer.ggml.scores")) {
    if (scores->type != gguf::ValueType::FLOAT32 && scores->type != gguf::ValueType::INT32) {
      fail("{}: tokenizer.ggml.scores: expected f32 or i32 array, got {}", path,
           gguf::value_type_name(scores->type));
    }
    if (scores->items.size() < n) {
      fail("{}: tokenizer.ggml.scores: {} values for {} tokens", path, scores->items.size(), n);
    }
    for (size_t i = 0; i < n; ++i) {
      t->scores_[i] = static_cast<float>(scores->items[i].as_float().value_or(0.0));
    }
  }
  t->attrs_.assign(n, kAttrNormal);
  if (const gguf::Array* types = f.get_array("tokenizer.ggml.token_type")) {
    if (types->type != gguf::ValueType::INT32) {
      fail("{}: tokenizer.ggml.token_type: expected i32 array, got {}", path,
           gguf::value_type_name(types->type));
    }
    if (types->items.size() < n) {
      fail("{}: tokenizer.ggml.token_type: {} values for {} tokens", path, types->items.size(), n);
    }
    for (size_t i = 0; i < n; ++i) {
      t->attrs_[i] = attr_from_type(types->items[i].as_int().value_or(kTypeUndefined));
    }
  }
  const gguf::Array* merges = spm ? nullptr : required_array(f, "tokenizer.ggml.merges");
  ix.symbols.init(&t->tokens_, n + (merges ? merges->items.size() / 4 : 0));
  for (size_t i = 0; i < n; ++i) {
    const uint32_t first = ix.symbols.add_token(static_cast<uint32_t>(i));
    if (first != i) {
      fail("{}: tokenizer.ggml.tokens[{}]: duplicate of token {} ('{}')", path, i, first,
           t->tokens_[i]);
    }
  }

  // ---- merges (Gemma 4) -------------------------------------------------------------------------
  if (merges) {
    if (merges->type != gguf::ValueType::STRING) {
      fail("{}: tokenizer.ggml.merges: expected an array of strings, got {}", path,
           gguf::value_type_name(merges->type));
    }
    ix.merges.reserve(merges->items.size());
    std::string joined;
    for (size_t i = 0; i < merges->items.size(); ++i) {
      const std::string* m = merges->items[i].as_string();
      if (!m) fail("{}: tokenizer.ggml.merges[{}]: not a string", path, i);
      // "LEFT RIGHT", split at the first space after position 0 (a merge operand may itself
      // start with a space in some vocabularies).
      const size_t sp = m->size() > 1 ? m->find(' ', 1) : std::string::npos;
      if (sp == std::string::npos) continue;  // cannot match any pair of non-empty symbols
      const std::string_view whole(*m);
      const std::string_view left = whole.substr(0, sp), right = whole.substr(sp + 1);
      if (right.empty()) continue;
      const uint32_t l = ix.symbols.intern(left), r = ix.symbols.intern(right);
      joined.assign(left);
      joined.append(right);
      ix.merges.add(l, r, {static_cast<int32_t>(i), ix.symbols.intern(joined)});
    }
  }
  for (int b = 0; b < 256 && !byte_level; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    t->byte_tokens_[b] = t->find(hex);
    if (t->byte_tokens_[b] == kNoToken && spm) {
      // SentencePiece falls back to the byte as a one-character token.
      const char one[1] = {static_cast<char>(b)};
      t->byte_tokens_[b] = t->find(std::string_view(one, 1));
    }
  }

  // ---- special ids and flags --------------------------------------------------------------------
  TokenId eom = kNoToken;
  TokenId fim[kFimCount] = {kNoToken, kNoToken, kNoToken, kNoToken, kNoToken, kNoToken};
  if (spm) {
    t->bos_ = 1;
    t->eos_ = 2;
    t->unk_ = 0;
    t->add_bos_ = true;
    t->add_space_prefix_ = true;
  } else if (byte_level) {
    t->bos_ = 11;  // llama.cpp's defaults for gpt2 vocabularies, before the file's keys
    t->eos_ = 11;
    t->clean_spaces_ = false;  // qwen35
  } else {
    t->clean_spaces_ = true;
  }
  const auto n_tok = static_cast<int64_t>(n);
  for (TokenId* id : {&t->bos_, &t->eos_, &t->unk_}) {
    if (*id >= n_tok) *id = kNoToken;
  }
  const std::pair<const char*, TokenId*> id_keys[] = {
      {"tokenizer.ggml.bos_token_id", &t->bos_},     {"tokenizer.ggml.eos_token_id", &t->eos_},
      {"tokenizer.ggml.eot_token_id", &t->eot_},     {"tokenizer.ggml.eom_token_id", &eom},
      {"tokenizer.ggml.unknown_token_id", &t->unk_}, {"tokenizer.ggml.padding_token_id", &t->pad_},
  };
  for (const auto& [key, id] : id_keys) {
    const std::optional<int64_t> v = f.get_int(key);
    if (v && *v >= 0 && *v < n_tok) *id = static_cast<TokenId>(*v);  // out of range: default
  }
  for (int k = 0; k < kFimCount; ++k) {
    for (std::string_view key : {kFimKeys[k], k < 3 ? kFimOldKeys[k] : std::string_view()}) {
      const std::optional<int64_t> v = key.empty() ? std::nullopt : f.get_int(key);
      if (v && *v >= 0 && *v < n_tok) fim[k] = static_cast<TokenId>(*v);
    }
  }
  if (auto v = f.get_bool("tokenizer.ggml.add_bos_token")) t->add_bos_ = *v;
  if (auto v = f.get_bool("tokenizer.ggml.add_eos_token")) t->add_eos_ = *v;
  if (auto v = f.get_bool("tokenizer.ggml.add_space_prefix")) t->add_space_prefix_ = *v;
  if (t->kind_ == TokenizerKind::kGemma4Bpe) {
    t->add_bos_ = true;  // llama.cpp forces BOS for Gemma 4 (PR #21500)
  }
  if ((t->add_bos_ && t->bos_ == kNoToken) || (t->add_eos_ && t->eos_ == kNoToken)) {
    fail("{}: tokenizer.ggml.add_{}_token is set but the file has no valid {} token id", path,
         t->add_bos_ && t->bos_ == kNoToken ? "bos" : "eos",
         t->add_bos_ && t->bos_ == kNoToken ? "bos" : "eos");
  }
  if (const gguf::Array* sup = f.get_array("tokenizer.ggml.suppress_tokens")) {
    if (sup->type != gguf::ValueType::INT32) {
      fail("{}: tokenizer.ggml.suppress_tokens: expected i32 array, got {}", path,
           gguf::value_type_name(sup->type));
    }
    for (const auto& v : sup->items) {
      const int64_t id = v.as_int().value_or(-1);
      if (id >= 0 && id < n_tok) t->suppress_.push_back(static_cast<TokenId>(id));
    }
  }
  if (auto tmpl = f.get_string("tokenizer.chat_template")) t->chat_template_ = std::move(*tmpl);

  // ---- attributes decided by token text (llama.cpp's loader rules)
  // ------------------------------- Iterate in id order so that the lowest id wins where
  // llama.cpp's hash order is unspecified.
  auto mark_control = [&](TokenId id) { t->attrs_[id] |= kAttrControl; };
  if (t->eot_ == kNoToken) {
    for (std::string_view s : kEotTexts) {
      const TokenId id = t->find(s);
      if (id == kNoToken) continue;
      t->eot_ = id;
      mark_control(id);
      break;
    }
  }
  for (int k = 0; k < kFimCount; ++k) {
    if (fim[k] != kNoToken) continue;
    for (std::string_view s : kFimTexts[k]) {
      const TokenId id = t->find(s);
      if (id == kNoToken) continue;
      fim[k] = id;
      mark_control(id);
      break;
    }
  }
  if (eom == kNoToken) {
    eom = t->find("<|eom_id|>");
    if (eom != kNoToken) mark_control(eom);
  }
  for (TokenId id = 0; id < n_tok; ++id) {  // "unused" control tokens
    if ((t->attrs_[id] & kAttrControl) && t->tokens_[id].find("unused") != std::string::npos) {
      t->attrs_[id] |= kAttrUnused;
    }
  }
  std::vector<TokenId> eog;
  for (int k : {kFimPad, kFimRep, kFimSep}) {
    if (fim[k] != kNoToken) eog.push_back(fim[k]);
  }
  for (std::string_view s : kEogTexts) {
    const TokenId id = t->find(s);
    if (id == kNoToken) continue;
    eog.push_back(id);
    mark_control(id);
  }
  for (TokenId id : {t->eos_, t->eot_, eom}) {
    if (id != kNoToken) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  // Gemma 4: "</s>" is an ordinary token once <|tool_response> marks the end of generation.
  const TokenId tool_response = t->find("<|tool_response>"), eos_text = t->find("</s>");
  if (tool_response != kNoToken && eos_text != kNoToken &&
      std::binary_search(eog.begin(), eog.end(), tool_response) &&
      std::binary_search(eog.begin(), eog.end(), eos_text)) {
    eog.erase(std::find(eog.begin(), eog.end(), eos_text));
    t->attrs_[eos_text] = kAttrNormal;
  }
  t->eog_ = std::move(eog);

  // ---- special-token table
  // ------------------------------------------------------------------------
  for (TokenId id = 0; id < n_tok; ++id) {
    if (t->attrs_[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      t->specials_.push_back(id);
  }
  // Same comparator and input order as llama.cpp (std::sort, longest text first), so that
  // equal-length tokens are tried in the same order.
  std::sort(t->specials_.begin(), t->specials_.end(),
            [&](TokenId a, TokenId b) { return t->tokens_[a].size() > t->tokens_[b].size(); });
  ix.special_rank.assign(n, -1);
  for (size_t r = 0; r < t->specials_.size(); ++r) {
    const TokenId id = t->specials_[r];
    ix.special_rank[id] = static_cast<int32_t>(r);
    const std::string& s = t->tokens_[id];
    if (s.size() == 1) {
      ix.one_byte_specials.push_back(id);
    } else {
      const auto key = static_cast<uint16_t>(uint8_t(s[0]) | uint16_t(uint8_t(s[1])) << 8);
      ix.specials_by_prefix[key].push_back(id);
    }
  }

  // ---- pieces (llama_token_to_piece with special=true) -----------------------------------------
  t->pieces_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = t->attrs_[i];
    const std::string& text = t->tokens_[i];
    if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) {
      t->pieces_[i] = text;
    } else if ((a & kAttrNormal) && byte_level) {
      t->pieces_[i] = level_text_to_bytes(text);
    } else if (a & kAttrNormal) {
      t->pieces_[i] = text;
      replace_all(t->pieces_[i], kSpaceMark, " ");
    } else if (a & kAttrByte) {
      const std::string hex = text.size() >= 5 ? text.substr(3, 2) : std::string();
      t->pieces_[i] = std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
    }
  }
  return t;
}

const std::string& Tokenizer::token_text(TokenId id) const {
  if (!valid(id)) fail("token id {} is out of range (vocabulary has {})", id, n_vocab());
  return tokens_[id];
}

uint32_t Tokenizer::attr(TokenId id) const {
  if (!valid(id)) fail("token id {} is out of range (vocabulary has {})", id, n_vocab());
  return attrs_[id];
}

float Tokenizer::score(TokenId id) const {
  if (!valid(id)) fail("token id {} is out of range (vocabulary has {})", id, n_vocab());
  return scores_[id];
}

TokenId Tokenizer::find(std::string_view text) const {
  const uint32_t id = index_->symbols.find(text);
  return id < tokens_.size() ? static_cast<TokenId>(id) : kNoToken;
}

bool Tokenizer::is_eog(TokenId id) const {
  return std::binary_search(eog_.begin(), eog_.end(), id);
}

// llama.cpp splits special tokens out of the text one token at a time, longest text first: each
// token takes its leftmost non-overlapping occurrences inside the pieces of text that earlier
// tokens left over. We find all occurrences in one pass and replay that order, which gives the
// same split without scanning the text once per special token.
void Tokenizer::partition_special(std::string_view text, bool parse_special,
                                  std::span<const std::pair<size_t, size_t>> literal,
                                  std::vector<std::pair<size_t, TokenId>>& found) const {
  found.clear();
  const Index& ix = *index_;
  if (specials_.empty()) return;
  struct Occurrence {
    int32_t rank;
    size_t pos;
  };
  std::vector<Occurrence> occ;
  auto consider = [&](TokenId id, size_t pos) {
    if (!parse_special && (attrs_[id] & (kAttrControl | kAttrUnknown))) return;
    const std::string& s = tokens_[id];
    if (text.compare(pos, s.size(), s) != 0) return;
    if (!literal.empty()) {
      // The first literal range that ends after pos: a match overlapping it is message text.
      auto it = std::upper_bound(literal.begin(), literal.end(), pos,
                                 [](size_t p, const auto& range) { return p < range.second; });
      if (it != literal.end() && it->first < pos + s.size()) return;
    }
    occ.push_back({ix.special_rank[id], pos});
  };
  for (size_t pos = 0; pos < text.size(); ++pos) {
    for (TokenId id : ix.one_byte_specials) consider(id, pos);
    if (pos + 1 < text.size()) {
      const auto key =
          static_cast<uint16_t>(uint8_t(text[pos]) | uint16_t(uint8_t(text[pos + 1])) << 8);
      auto it = ix.specials_by_prefix.find(key);
      if (it != ix.specials_by_prefix.end()) {
        for (TokenId id : it->second) consider(id, pos);
      }
    }
  }
  if (occ.empty()) return;
  std::sort(occ.begin(), occ.end(), [](const Occurrence& a, const Occurrence& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
  });
  std::map<size_t, std::pair<size_t, TokenId>> taken;  // start -> (end, id) of accepted matches
  size_t same_token_end = 0;
  for (size_t i = 0; i < occ.size(); ++i) {
    if (i == 0 || occ[i].rank != occ[i - 1].rank) same_token_end = 0;
    const TokenId id = specials_[occ[i].rank];
    const size_t begin = occ[i].pos, end = begin + tokens_[id].size();
    if (begin < same_token_end) continue;
    auto next = taken.lower_bound(begin);
    if (next != taken.end() && next->first < end) continue;
    if (next != taken.begin() && std::prev(next)->second.first > begin) continue;
    taken.emplace_hint(next, begin, std::make_pair(end, id));
    same_token_end = end;
  }
  found.reserve(taken.size());
  for (const auto& [begin, match] : taken) found.emplace_back(begin, match.second);
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<TokenId> out;
  encode(text, out, add_special, parse_special);
  return out;
}

void Tokenizer::encode(std::string_view text, std::vector<TokenId>& out, bool add_special,
                       bool parse_special) const {
  encode_impl(text, out, add_special, parse_special, {});
}

std::vector<TokenId> Tokenizer::encode_with_literals(
    std::string_view text, std::span<const std::pair<size_t, size_t>> literal,
    bool add_special) const {
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal[i].first > literal[i].second || literal[i].second > text.size() ||
        (i > 0 && literal[i].first < literal[i - 1].second)) {
      fail("tokenizer: literal ranges must be sorted, disjoint and inside the text");
    }
  }
  std::vector<TokenId> out;
  encode_impl(text, out, add_special, /*parse_special=*/true, literal);
  return out;
}

void Tokenizer::encode_impl(std::string_view text, std::vector<TokenId>& out, bool add_special,
                            bool parse_special,
                            std::span<const std::pair<size_t, size_t>> literal) const {
  out.clear();
  out.reserve(text.size() / 3 + 4);
  if (add_special && add_bos_) out.push_back(bos_);
  std::vector<std::pair<size_t, TokenId>> specials;
  partition_special(text, parse_special, literal, specials);
  bool prev_special = true;  // SentencePiece: a space goes in front of text after a special
  std::string fragment;
  auto encode_text = [&](std::string_view raw) {
    if (raw.empty()) return;
    fragment.clear();
    if (kind_ == TokenizerKind::kSentencePiece && add_space_prefix_ && prev_special) {
      fragment.push_back(' ');
    }
    fragment.append(raw);
    if (kind_ == TokenizerKind::kByteBpe) {
      encode_byte_bpe_fragment(fragment, out);
      prev_special = false;
      return;
    }
    replace_all(fragment, " ", kSpaceMark);
    if (kind_ == TokenizerKind::kSentencePiece) {
      encode_spm_fragment(fragment, out);
    } else {
      encode_bpe_fragment(fragment, out);
    }
    prev_special = false;
  };
  size_t pos = 0;
  for (const auto& [begin, id] : specials) {
    encode_text(text.substr(pos, begin - pos));
    out.push_back(id);
    prev_special = true;
    pos = begin + tokens_[id].size();
  }
  encode_text(text.substr(pos));
  if (add_special && add_eos_) out.push_back(eos_);
}

}  // namespace boltrt::text

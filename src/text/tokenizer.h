// Tokenizers built from GGUF metadata, token for token equal to llama.cpp:
//   tokenizer.ggml.model = "gemma4" — Gemma 4's BPE over UTF-8 characters (gemma4.md §8.4)
//   tokenizer.ggml.model = "llama"  — SentencePiece-style merging by token score
//   tokenizer.ggml.model = "gpt2"   — byte-level BPE with a pre-tokenizer (tokenizer.ggml.pre:
//                                     "qwen35", Qwen3.5's, qwen35.md §8)
// Special tokens are found by their text and attributes, never by hard-coded ids.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace boltrt::gguf {
class File;
}

namespace boltrt::text {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// Per-token attribute bits; the same values as llama.cpp's llama_token_attr.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

enum class TokenizerKind { kGemma4Bpe, kSentencePiece, kByteBpe };

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* from `file` (a full model or a vocabulary-only GGUF). Throws
  // boltrt::Error naming the file and key on missing or malformed metadata.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // llama_tokenize: add_special prepends BOS (and appends EOS) when the vocabulary asks for it;
  // parse_special lets control tokens' text in `text` become those tokens (user-defined tokens
  // such as <|channel> are always recognised). Any bytes are accepted (invalid UTF-8 included).
  std::vector<TokenId> encode(std::string_view text, bool add_special = true,
                              bool parse_special = true) const;
  void encode(std::string_view text, std::vector<TokenId>& out, bool add_special,
              bool parse_special) const;
  // A rendered chat prompt: special tokens (control and user-defined alike) are recognised only
  // outside `literal`, the byte ranges [begin, end) the template filled with message text, so a
  // user who types "<|turn>system" gets those characters, never the control token. Ranges are
  // sorted and disjoint. Outside them it is encode(text, add_special, parse_special = true).
  std::vector<TokenId> encode_with_literals(std::string_view text,
                                            std::span<const std::pair<size_t, size_t>> literal,
                                            bool add_special = true) const;

  // llama_token_to_piece: the bytes one token stands for. With special=false, control and
  // unknown tokens give "". A byte token gives one raw byte (maybe half a UTF-8 character).
  const std::string& piece(TokenId id, bool special = true) const;
  // llama_detokenize: pieces joined, with the leading-space and "clean spaces" rules.
  std::string decode(std::span<const TokenId> ids, bool remove_special = false,
                     bool unparse_special = false) const;

  TokenizerKind kind() const { return kind_; }
  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  bool valid(TokenId id) const { return id >= 0 && id < n_vocab(); }
  const std::string& token_text(TokenId id) const;  // the vocabulary string (with "▁")
  uint32_t attr(TokenId id) const;                  // TokenAttr bits
  TokenId find(std::string_view token_text) const;  // kNoToken when absent
  float score(TokenId id) const;

  TokenId bos() const { return bos_; }  // kNoToken when the file has none
  TokenId eos() const { return eos_; }
  TokenId eot() const { return eot_; }
  TokenId unk() const { return unk_; }
  TokenId pad() const { return pad_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  // End-of-generation tokens as llama.cpp decides them (for Gemma 4: <eos>, <|tool_response>,
  // <turn|>; never </s>).
  bool is_eog(TokenId id) const;
  const std::vector<TokenId>& eog_tokens() const { return eog_; }
  bool is_control(TokenId id) const { return (attr(id) & kAttrControl) != 0; }
  // tokenizer.ggml.suppress_tokens (in range), for a logit bias of -inf.
  const std::vector<TokenId>& suppress_tokens() const { return suppress_; }
  // tokenizer.chat_template, or "" when absent.
  const std::string& chat_template() const { return chat_template_; }

 private:
  Tokenizer();
  struct Index;  // lookup tables (string -> id, merges, special-token trie)

  void partition_special(std::string_view text, bool parse_special,
                         std::span<const std::pair<size_t, size_t>> literal,
                         std::vector<std::pair<size_t, TokenId>>& found) const;
  void encode_impl(std::string_view text, std::vector<TokenId>& out, bool add_special,
                   bool parse_special, std::span<const std::pair<size_t, size_t>> literal) const;
  void encode_bpe_fragment(std::string_view fragment, std::vector<TokenId>& out) const;
  void encode_byte_bpe_fragment(std::string_view fragment, std::vector<TokenId>& out) const;
  // BPE merges inside one word (symbols start as its UTF-8 characters); symbols without a token
  // fall back to byte tokens.
  void merge_word(std::string_view word, std::vector<TokenId>& out) const;
  void encode_spm_fragment(std::string_view fragment, std::vector<TokenId>& out) const;
  TokenId byte_token(uint8_t byte) const { return byte_tokens_[byte]; }

  TokenizerKind kind_ = TokenizerKind::kGemma4Bpe;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<uint32_t> attrs_;
  std::vector<std::string> pieces_;  // token_to_piece(special=true) of every id
  std::vector<TokenId> specials_;    // control/user-defined/unknown ids, longest text first
  std::vector<TokenId> eog_;
  std::vector<TokenId> suppress_;
  TokenId byte_tokens_[256];
  TokenId bos_ = kNoToken, eos_ = kNoToken, eot_ = kNoToken, unk_ = kNoToken, pad_ = kNoToken;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false, clean_spaces_ = false;
  std::string chat_template_;
  std::unique_ptr<Index> index_;
};

// Turns a stream of token ids into text that never ends in half a UTF-8 character: bytes of an
// incomplete sequence are held back until the sequence completes; invalid bytes become U+FFFD.
class StreamingDetokenizer {
 public:
  // render_special: print control tokens' text (e.g. "<turn|>") instead of nothing.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(&tokenizer), render_special_(render_special) {}
  // Text that became complete with this token (maybe "").
  std::string push(TokenId id);
  // Everything still held back (an unfinished sequence becomes U+FFFD); then starts afresh.
  std::string finish();
  void reset() { pending_.clear(); }
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool render_special_;
  std::string pending_;
};

}  // namespace boltrt::text

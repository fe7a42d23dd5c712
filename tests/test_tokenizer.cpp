// Tokenizer unit tests that need no vocabulary file: UTF-8 helpers, escapes, and tiny
// vocabularies synthesized in memory (GGUF metadata only) that pin down each rule of the Gemma 4
// BPE and SentencePiece algorithms, the special-token split, the detokenizers and the errors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "text/escapes.h"
#include "text/tokenizer.h"
#include "text/utf8.h"
#include "util/error.h"

namespace boltrt::text {
namespace {

// ---- a minimal GGUF metadata writer (v3, no tensors) -------------------------------------------
class MetaWriter {
 public:
  void str(const std::string& key, const std::string& v) {
    begin(key, 8);
    put_str(v);
  }
  void u32(const std::string& key, uint32_t v) {
    begin(key, 4);
    put(v);
  }
  void boolean(const std::string& key, bool v) {
    begin(key, 7);
    put(static_cast<uint8_t>(v));
  }
  void strings(const std::string& key, const std::vector<std::string>& v) {
    begin(key, 9);
    put<uint32_t>(8);
    put<uint64_t>(v.size());
    for (const auto& s : v) put_str(s);
  }
  void i32s(const std::string& key, const std::vector<int32_t>& v) {
    begin(key, 9);
    put<uint32_t>(5);
    put<uint64_t>(v.size());
    for (int32_t x : v) put(x);
  }
  void f32s(const std::string& key, const std::vector<float>& v) {
    begin(key, 9);
    put<uint32_t>(6);
    put<uint64_t>(v.size());
    for (float x : v) put(x);
  }
  std::unique_ptr<gguf::File> file() const {
    std::vector<uint8_t> bytes;
    auto append = [&](const void* p, size_t n) {
      bytes.insert(bytes.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    };
    const uint32_t magic = 0x46554747, version = 3;
    const uint64_t n_tensors = 0, n_kv = count_;
    append(&magic, 4);
    append(&version, 4);
    append(&n_tensors, 8);
    append(&n_kv, 8);
    append(body_.data(), body_.size());
    while (bytes.size() % 32) bytes.push_back(0);
    image_ = bytes;
    return gguf::File::parse(image_, "tiny.gguf");
  }

 private:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    body_.insert(body_.end(), p, p + sizeof v);
  }
  void put_str(const std::string& s) {
    put<uint64_t>(s.size());
    body_.insert(body_.end(), s.begin(), s.end());
  }
  void begin(const std::string& key, uint32_t type) {
    put_str(key);
    put(type);
    ++count_;
  }
  std::vector<uint8_t> body_;
  mutable std::vector<uint8_t> image_;
  uint64_t count_ = 0;
};

enum : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6 };

struct TinyVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;
  TokenId add(const std::string& text, int32_t type = kNormal, float score = 0) {
    tokens.push_back(text);
    types.push_back(type);
    scores.push_back(score);
    return static_cast<TokenId>(tokens.size() - 1);
  }
  void add_bytes() {
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", b);
      add(hex, kByte);
    }
  }
};

// Gemma-4-like: <pad> <eos> <bos> <unk> specials, then text tokens, then byte tokens.
struct Gemma {
  TinyVocab v;
  std::vector<std::string> merges;
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Tokenizer> tok;
  Gemma() {
    v.add("<pad>", kControl);
    v.add("<eos>", kControl);
    v.add("<bos>", kControl);
    v.add("<unk>", kControl);
  }
  void build(bool add_bos = false) {
    MetaWriter w;
    w.str("tokenizer.ggml.model", "gemma4");
    w.strings("tokenizer.ggml.tokens", v.tokens);
    w.i32s("tokenizer.ggml.token_type", v.types);
    w.f32s("tokenizer.ggml.scores", v.scores);
    w.strings("tokenizer.ggml.merges", merges);
    w.u32("tokenizer.ggml.bos_token_id", 2);
    w.u32("tokenizer.ggml.eos_token_id", 1);
    w.boolean("tokenizer.ggml.add_bos_token", add_bos);
    w.str("tokenizer.chat_template", "{{ bos_token }}");
    file = w.file();
    tok = Tokenizer::from_gguf(*file);
  }
};

// ---- UTF-8 helpers ------------------------------------------------------------------------------

TEST(Utf8, NormalizeLikeLlama) {
  EXPECT_EQ(normalize_utf8_like_llama("abc é 😀"), "abc é 😀");
  EXPECT_EQ(normalize_utf8_like_llama(std::string("\xC0\x80", 2)), std::string(1, '\0'));
  EXPECT_EQ(normalize_utf8_like_llama("\xED\xA0\x80"), "\xED\xA0\x80");  // surrogate kept
  EXPECT_EQ(normalize_utf8_like_llama("\xFF"), "\xEF\xBF\xBD");
  EXPECT_EQ(normalize_utf8_like_llama("\xE4"
                                      "ab"),
            "\xEF\xBF\xBD"
            "ab");
  EXPECT_EQ(normalize_utf8_like_llama("\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // Above U+10FFFF (llama.cpp throws): every byte becomes U+FFFD.
  EXPECT_EQ(normalize_utf8_like_llama("\xF4\x90\x80\x80"),
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Utf8, ValidityTailAndSanitize) {
  EXPECT_TRUE(is_valid_utf8("héllo 😀"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));
  EXPECT_EQ(incomplete_utf8_tail("ab"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("a\xE2"), 1u);
  EXPECT_EQ(incomplete_utf8_tail("a\xE2\x82"), 2u);
  EXPECT_EQ(incomplete_utf8_tail("a\xE2\x82\xAC"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("\xE0\x80"), 0u);  // can never complete (overlong)
  EXPECT_EQ(incomplete_utf8_tail("\x80"), 0u);
  EXPECT_EQ(sanitize_utf8("a\xE2\x82"
                          "b"),
            "a\xEF\xBF\xBD"
            "b");  // one U+FFFD per maximal part
  EXPECT_EQ(sanitize_utf8("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(sanitize_utf8("ok €"), "ok €");
}

TEST(Escapes, LikeLlamaCpp) {
  EXPECT_EQ(process_escapes("a\\nb\\tc\\\\d\\'\\\""), "a\nb\tc\\d'\"");
  EXPECT_EQ(process_escapes("\\x41\\x4a!"), "AJ!");
  EXPECT_EQ(process_escapes("\\xZZ"), "\\xZZ");
  EXPECT_EQ(process_escapes("\\q"), "\\q");
  EXPECT_EQ(process_escapes("end\\"), "end\\");
  EXPECT_EQ(process_escapes("\\x4"), "\\x4");  // needs two characters after x
}

// ---- Gemma 4 BPE --------------------------------------------------------------------------------

TEST(Gemma4Bpe, MergesByRankLeftmostFirst) {
  Gemma g;
  const TokenId a = g.v.add("a"), b = g.v.add("b"), c = g.v.add("c");
  const TokenId bc = g.v.add("bc"), ab = g.v.add("ab"), aa = g.v.add("aa");
  g.merges = {"b c", "a b", "a a"};
  g.build();
  EXPECT_EQ(g.tok->encode("abc", false), (std::vector<TokenId>{a, bc}));  // "b c" ranks first
  EXPECT_EQ(g.tok->encode("abab", false), (std::vector<TokenId>{ab, ab}));
  EXPECT_EQ(g.tok->encode("aaa", false), (std::vector<TokenId>{aa, a}));  // leftmost pair wins
  EXPECT_EQ(g.tok->encode("cab", false), (std::vector<TokenId>{c, ab}));
  (void)b;
}

TEST(Gemma4Bpe, SpacesNewlinesBytesAndBos) {
  Gemma g;
  const TokenId sp = g.v.add("▁"), a = g.v.add("a"), spa = g.v.add("▁a");
  const TokenId nl = g.v.add("\n"), nl2 = g.v.add("\n\n");
  g.v.add_bytes();
  g.merges = {"▁ a"};
  g.build(/*add_bos=*/false);  // llama.cpp forces BOS on for Gemma 4 anyway
  const TokenId bos = 2;
  EXPECT_TRUE(g.tok->add_bos());
  EXPECT_EQ(g.tok->encode(" a a"), (std::vector<TokenId>{bos, spa, spa}));
  EXPECT_EQ(g.tok->encode("a  "), (std::vector<TokenId>{bos, a, sp, sp}));
  // A newline run that is a token is taken whole; other runs are merged like text.
  EXPECT_EQ(g.tok->encode("a\n\na", false), (std::vector<TokenId>{a, nl2, a}));
  EXPECT_EQ(g.tok->encode("\n\n\n", false), (std::vector<TokenId>{nl, nl, nl}));
  // No token for "é": one <0xXX> token per byte.
  const TokenId c3 = g.tok->find("<0xC3>"), a9 = g.tok->find("<0xA9>");
  EXPECT_EQ(g.tok->encode("é", false), (std::vector<TokenId>{c3, a9}));
  EXPECT_EQ(g.tok->encode("", true), (std::vector<TokenId>{bos}));
  EXPECT_TRUE(g.tok->encode("", false).empty());
  // Invalid UTF-8 is read as U+FFFD (EF BF BD), which here has no token -> three byte tokens.
  const TokenId ef = g.tok->find("<0xEF>"), bf = g.tok->find("<0xBF>"), bd = g.tok->find("<0xBD>");
  EXPECT_EQ(g.tok->encode("\xFF", false), (std::vector<TokenId>{ef, bf, bd}));
}

TEST(Gemma4Bpe, SpecialTokensControlVersusUserDefined) {
  Gemma g;
  const TokenId turn = g.v.add("<|turn>", kControl), channel = g.v.add("<|channel>", kUserDefined);
  const TokenId tool_response = g.v.add("<|tool_response>", kUserDefined);
  const TokenId end_turn = g.v.add("<turn|>", kControl), s_end = g.v.add("</s>");
  const TokenId x = g.v.add("x");
  g.v.add_bytes();
  g.build();
  // Control tokens are matched only with parse_special; user-defined ones always.
  EXPECT_EQ(g.tok->encode("<|turn>x", false, true), (std::vector<TokenId>{turn, x}));
  EXPECT_EQ(g.tok->encode("x<|channel>x", false, false), (std::vector<TokenId>{x, channel, x}));
  const auto plain = g.tok->encode("<|turn>", false, false);
  EXPECT_EQ(plain.size(), 7u);  // seven byte tokens
  // <|tool_response> ends generation, which makes it a control token (not matched as text
  // without parse_special), and </s> stays an ordinary token.
  EXPECT_TRUE(g.tok->is_eog(tool_response));
  EXPECT_TRUE(g.tok->is_eog(end_turn));
  EXPECT_TRUE(g.tok->is_eog(1));
  EXPECT_FALSE(g.tok->is_eog(s_end));
  EXPECT_EQ(g.tok->attr(tool_response), kAttrUserDefined | kAttrControl);
  EXPECT_EQ(g.tok->attr(s_end), kAttrNormal);
  EXPECT_EQ(g.tok->encode("<|tool_response>", false, true), (std::vector<TokenId>{tool_response}));
  EXPECT_EQ(g.tok->encode("<|tool_response>", false, false).size(), 16u);
  // Pieces: control text only with special=true; user-defined always.
  EXPECT_EQ(g.tok->piece(turn, false), "");
  EXPECT_EQ(g.tok->piece(turn, true), "<|turn>");
  EXPECT_EQ(g.tok->piece(channel, false), "<|channel>");
  EXPECT_EQ(g.tok->chat_template(), "{{ bos_token }}");
}

TEST(Gemma4Bpe, LongerSpecialTokensAreSplitOutFirst) {
  Gemma g;
  const TokenId ab = g.v.add("<ab>", kUserDefined), abc = g.v.add("<ab><c>", kUserDefined);
  const TokenId c = g.v.add("<c>", kUserDefined);
  g.v.add_bytes();
  g.build();
  EXPECT_EQ(g.tok->encode("<ab><c><ab>", false), (std::vector<TokenId>{abc, ab}));
  EXPECT_EQ(g.tok->encode("<ab><ab><c>", false), (std::vector<TokenId>{ab, abc}));
  EXPECT_EQ(g.tok->encode("<c><c>", false), (std::vector<TokenId>{c, c}));
}

TEST(Gemma4Bpe, DecodeCleansSpacesLikeLlamaDetokenize) {
  Gemma g;
  const TokenId hello = g.v.add("Hello"), sp = g.v.add("▁"), dot = g.v.add("."),
                apos = g.v.add("'"), s = g.v.add("s"), turn = g.v.add("<|turn>", kControl);
  g.build();
  const std::vector<TokenId> ids = {2, hello, sp, dot, sp, apos, s, turn};
  EXPECT_EQ(g.tok->decode(ids), "Hello.'s");
  EXPECT_EQ(g.tok->decode(ids, false, true), "<bos>Hello.'s<|turn>");
  const std::vector<TokenId> quote = {hello, sp, apos, sp, hello};
  EXPECT_EQ(g.tok->decode(quote), "Hello'Hello");
}

TEST(StreamingDetokenizer, HoldsBackHalfCharacters) {
  Gemma g;
  const TokenId a = g.v.add("a"), turn = g.v.add("<turn|>", kControl);
  g.v.add_bytes();
  g.build();
  const TokenId e2 = g.tok->find("<0xE2>"), x82 = g.tok->find("<0x82>"),
                xac = g.tok->find("<0xAC>");
  StreamingDetokenizer d(*g.tok);
  EXPECT_EQ(d.push(a), "a");
  EXPECT_EQ(d.push(e2), "");
  EXPECT_EQ(d.push(x82), "");
  EXPECT_EQ(d.push(xac), "€");
  EXPECT_EQ(d.push(turn), "");  // control tokens print nothing by default
  EXPECT_EQ(d.push(e2), "");
  EXPECT_EQ(d.push(a),
            "\xEF\xBF\xBD"
            "a");  // the sequence can no longer complete
  EXPECT_EQ(d.push(e2), "");
  EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");
  StreamingDetokenizer shown(*g.tok, /*render_special=*/true);
  EXPECT_EQ(shown.push(turn), "<turn|>");
}

TEST(Gemma4Bpe, RandomTextRoundTripsThroughPieces) {
  // Every byte has a token here, so the pieces of encode(text) always spell the text back (after
  // the invalid-UTF-8 normalisation llama.cpp applies).
  Gemma g;
  g.v.add("<|turn>", kControl);
  g.v.add("<|channel>", kUserDefined);
  for (const char* t : {"a", "b", "ab", "▁", "▁a", "\n", "\n\n", "é", "ü"}) g.v.add(t);
  g.v.add_bytes();
  g.merges = {"a b", "▁ a", "\n \n"};
  g.build();
  const std::string pieces[] = {
      "a",       "b",          " ",  "\n", "é", "ü", "\xC3", "\xFF", "\xF4\x90\x80\x80",
      "<|turn>", "<|channel>", "<|", "😀"};
  uint64_t state = 12345;
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int n = static_cast<int>((state >> 33) % 12);
    for (int k = 0; k < n; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      text += pieces[(state >> 33) % std::size(pieces)];
    }
    const std::vector<TokenId> ids = g.tok->encode(text, false, true);
    std::string spelled;
    for (TokenId id : ids) spelled += g.tok->piece(id, true);
    // Special tokens are split out before normalisation, so normalise the text between them.
    std::string want;
    size_t pos = 0;
    for (;;) {
      size_t a = text.find("<|turn>", pos), b = text.find("<|channel>", pos);
      const size_t hit = std::min(a, b);
      if (hit == std::string::npos) break;
      const size_t len = hit == a ? 7 : 10;
      want += normalize_utf8_like_llama(text.substr(pos, hit - pos)) + text.substr(hit, len);
      pos = hit + len;
    }
    want += normalize_utf8_like_llama(text.substr(pos));
    ASSERT_EQ(spelled, want) << "round " << round;
  }
}

// ---- SentencePiece ------------------------------------------------------------------------------

TEST(SentencePiece, ScoreOrderPrefixSpaceAndBytes) {
  TinyVocab v;
  v.add("<unk>", kUnknown);
  v.add("<s>", kControl);
  v.add("</s>", kControl);
  v.add_bytes();
  const TokenId sp = v.add("▁", kNormal, -1), a = v.add("a", kNormal, -2),
                b = v.add("b", kNormal, -2);
  const TokenId spa = v.add("▁a", kNormal, -5), ab = v.add("ab", kNormal, -3);
  MetaWriter w;
  w.str("tokenizer.ggml.model", "llama");
  w.strings("tokenizer.ggml.tokens", v.tokens);
  w.i32s("tokenizer.ggml.token_type", v.types);
  w.f32s("tokenizer.ggml.scores", v.scores);
  const auto file = w.file();
  const auto tok = Tokenizer::from_gguf(*file);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  // " ab": candidates "▁a" (-5) and "ab" (-3): the higher score merges first.
  EXPECT_EQ(tok->encode("ab", false), (std::vector<TokenId>{sp, ab}));
  EXPECT_EQ(tok->encode("ba", true), (std::vector<TokenId>{1, sp, b, a}));
  EXPECT_EQ(tok->encode("a", false), (std::vector<TokenId>{spa}));
  // A space goes in front of the text after a special token too (none before it: no text).
  EXPECT_EQ(tok->encode("</s>a", false, true), (std::vector<TokenId>{2, spa}));
  EXPECT_EQ(tok->encode("a</s>", false, true), (std::vector<TokenId>{spa, 2}));
  // Unknown characters become byte tokens <0xXX> (ids 3 + byte).
  EXPECT_EQ(tok->encode("é", false), (std::vector<TokenId>{sp, 3 + 0xC3, 3 + 0xA9}));
  // llama_detokenize strips the prefix space from the first piece, except after a BOS that
  // remove_special dropped (llama.cpp's rule, kept as it is).
  EXPECT_EQ(tok->decode(tok->encode("a b", false)), "a b");
  EXPECT_EQ(tok->decode(tok->encode("a b", true), true), " a b");
  EXPECT_EQ(tok->decode(tok->encode("a b", true), false, true), "<s> a b");
  EXPECT_TRUE(tok->is_eog(2));
}

// ---- errors -------------------------------------------------------------------------------------

std::string load_error(const MetaWriter& w) {
  try {
    const auto file = w.file();
    Tokenizer::from_gguf(*file);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenizerErrors, OneLineNamingTheKey) {
  {
    MetaWriter w;
    w.str("general.architecture", "gemma4");
    EXPECT_NE(load_error(w).find("tokenizer.ggml.model: missing"), std::string::npos);
  }
  {
    MetaWriter w;
    w.str("tokenizer.ggml.model", "bert");
    w.strings("tokenizer.ggml.tokens", {"a"});
    EXPECT_NE(load_error(w).find("unsupported tokenizer 'bert'"), std::string::npos);
  }
  {
    MetaWriter w;
    w.str("tokenizer.ggml.model", "gpt2");
    w.str("tokenizer.ggml.pre", "llama3");
    w.strings("tokenizer.ggml.tokens", {"a"});
    EXPECT_NE(load_error(w).find("tokenizer.ggml.pre: unsupported pre-tokenizer 'llama3'"),
              std::string::npos);
  }
  {
    MetaWriter w;
    w.str("tokenizer.ggml.model", "gpt2");
    w.str("tokenizer.ggml.pre", "qwen35");
    w.strings("tokenizer.ggml.tokens", {"a"});
    EXPECT_NE(load_error(w).find("tokenizer.ggml.merges: missing"), std::string::npos);
  }
  {
    MetaWriter w;
    w.str("tokenizer.ggml.model", "gemma4");
    w.strings("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>"});
    w.u32("tokenizer.ggml.bos_token_id", 2);
    EXPECT_NE(load_error(w).find("tokenizer.ggml.merges: missing"), std::string::npos);
  }
  {
    MetaWriter w;
    w.str("tokenizer.ggml.model", "gemma4");
    w.i32s("tokenizer.ggml.tokens", {1, 2});
    // The GGUF reader itself may reject the type first; either way the key is named.
    const std::string e = load_error(w);
    EXPECT_NE(e.find("tokenizer.ggml.tokens"), std::string::npos) << e;
    EXPECT_NE(e.find("string"), std::string::npos) << e;
  }
  {
    MetaWriter w;
    w.str("tokenizer.ggml.model", "gemma4");
    w.strings("tokenizer.ggml.tokens", {"<bos>", "a", "a"});
    w.strings("tokenizer.ggml.merges", {});
    w.u32("tokenizer.ggml.bos_token_id", 0);
    EXPECT_NE(load_error(w).find("tokenizer.ggml.tokens[2]: duplicate"), std::string::npos);
  }
  {
    MetaWriter w;  // Gemma 4 always adds BOS, so it needs a BOS id
    w.str("tokenizer.ggml.model", "gemma4");
    w.strings("tokenizer.ggml.tokens", {"a"});
    w.strings("tokenizer.ggml.merges", {});
    EXPECT_NE(load_error(w).find("no valid bos token id"), std::string::npos);
  }
  {
    MetaWriter w;
    w.str("tokenizer.ggml.model", "llama");
    w.strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    w.i32s("tokenizer.ggml.token_type", {2});
    EXPECT_NE(load_error(w).find("tokenizer.ggml.token_type: 1 values for 3 tokens"),
              std::string::npos);
  }
}

TEST(TokenizerErrors, OutOfRangeIds) {
  Gemma g;
  g.build();
  EXPECT_THROW(g.tok->piece(1000), Error);
  EXPECT_THROW(g.tok->token_text(-1), Error);
}

}  // namespace
}  // namespace boltrt::text

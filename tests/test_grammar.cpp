// The grammar engine (src/grammar/): the GBNF parser (every construct, errors with line and
// column, limits), the byte-level matcher (accept / reject, partial UTF-8 across tokens,
// rollback, completion) and token masks, which must equal a brute-force reference (advance a
// fresh matcher by each token) on a subset of the real Gemma 4 vocabulary.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "support/paths.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace boltrt::grammar {
namespace {

// A small vocabulary: every byte as a token (ids 0..255), some words, and atomic tokens.
struct SmallVocab {
  std::vector<std::string> pieces;
  std::vector<bool> atomic;
  int32_t eos = -1, quote = -1, call = -1, empty = -1;
  std::shared_ptr<const TokenVocabulary> vocab;
  SmallVocab() {
    for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
    for (const char* w : {"true", "false", "null", "{\"", "\":", "\",\"", "ab", "abc", "12",
                          "\xC3\xA9", "\xC3", "\xA9t", "he", "hello", " world", "\"}"}) {
      add(w);
    }
    empty = add("");
    eos = add("<eos>", true);
    quote = add("<|\"|>", true);
    call = add("<|tool_call>", true);
    add("<unused3>");  // NORMAL-typed, atomic by name
    vocab = std::make_shared<TokenVocabulary>(pieces, atomic, std::vector<int32_t>{eos});
  }
  int32_t add(std::string s, bool is_atomic = false) {
    pieces.push_back(std::move(s));
    atomic.push_back(is_atomic);
    return static_cast<int32_t>(pieces.size()) - 1;
  }
  int32_t id(std::string_view s) const {
    for (size_t i = 256; i < pieces.size(); ++i) {
      if (pieces[i] == s) return static_cast<int32_t>(i);
    }
    if (s.size() == 1) return static_cast<uint8_t>(s[0]);
    return -1;
  }
};

const SmallVocab& small() {
  static const SmallVocab v;
  return v;
}

Matcher matcher_for(std::string_view gbnf) {
  return Matcher(std::make_shared<Engine>(parse_gbnf(gbnf), small().vocab));
}

bool matches(std::string_view gbnf, std::string_view text) {
  Matcher m = matcher_for(gbnf);
  return m.accept_bytes(text) && m.is_accepting();
}

std::string error_of(std::string_view gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GrammarParse, LiteralsAlternativesAndGroups) {
  const std::string g = "root ::= \"a\" ( \"b\" | \"cd\" ) \"e\" | \"x\"\n";
  EXPECT_TRUE(matches(g, "abe"));
  EXPECT_TRUE(matches(g, "acde"));
  EXPECT_TRUE(matches(g, "x"));
  EXPECT_FALSE(matches(g, "ace"));
  EXPECT_FALSE(matches(g, "ab"));
  EXPECT_FALSE(matches(g, "xx"));
}

TEST(GrammarParse, Repetitions) {
  EXPECT_TRUE(matches("root ::= \"a\"*", ""));
  EXPECT_TRUE(matches("root ::= \"a\"*", "aaaa"));
  EXPECT_FALSE(matches("root ::= \"a\"+", ""));
  EXPECT_TRUE(matches("root ::= \"a\"+", "aaa"));
  EXPECT_TRUE(matches("root ::= \"ab\"?", "ab"));
  EXPECT_FALSE(matches("root ::= \"ab\"?", "abab"));
  const std::string bounded = "root ::= [0-9]{2,4}";
  EXPECT_FALSE(matches(bounded, "1"));
  EXPECT_TRUE(matches(bounded, "12"));
  EXPECT_TRUE(matches(bounded, "1234"));
  EXPECT_FALSE(matches(bounded, "12345"));
  EXPECT_TRUE(matches("root ::= \"x\"{3}", "xxx"));
  EXPECT_FALSE(matches("root ::= \"x\"{3}", "xx"));
  EXPECT_TRUE(matches("root ::= \"x\"{ 2 , }", "xxxxxxx"));
  EXPECT_FALSE(matches("root ::= \"x\"{2,}", "x"));
  // the postfix applies to the whole preceding literal
  EXPECT_TRUE(matches("root ::= \"ab\"{2}", "abab"));
  EXPECT_TRUE(matches("root ::= (\"a\" | \"b\")* \"c\"", "abbac"));
}

TEST(GrammarParse, CharacterClasses) {
  EXPECT_TRUE(matches("root ::= [a-c]+", "abcab"));
  EXPECT_FALSE(matches("root ::= [a-c]+", "abd"));
  EXPECT_TRUE(matches("root ::= [^a-c]", "d"));
  EXPECT_FALSE(matches("root ::= [^a-c]", "b"));
  EXPECT_TRUE(matches("root ::= [a-]+", "a-a"));  // trailing '-' is literal
  EXPECT_TRUE(matches("root ::= [\\]\\[]+", "[]"));
  EXPECT_TRUE(matches("root ::= [\\x41-\\x43]", "B"));
  EXPECT_TRUE(matches("root ::= [\\u00e9]", "\xC3\xA9"));
  EXPECT_TRUE(matches("root ::= [\\U0001F600-\\U0001F64F]", "\xF0\x9F\x98\x80"));
  EXPECT_FALSE(matches("root ::= [\\U0001F600-\\U0001F64F]", "\xF0\x9F\x99\x90"));
  // negated classes include multi-byte characters but never invalid UTF-8 or surrogates
  EXPECT_TRUE(matches("root ::= [^\"]", "\xE2\x82\xAC"));   // U+20AC
  EXPECT_FALSE(matches("root ::= [^\"]", "\xED\xA0\x80"));  // a surrogate
  EXPECT_FALSE(matches("root ::= [^\"]", "\xC0\x80"));      // overlong
  EXPECT_FALSE(matches("root ::= [^\"]", "\xFF"));
  // '.' is any code point, newline included
  EXPECT_TRUE(matches("root ::= ...", "a\n\xC3\xA9"));
  EXPECT_TRUE(matches("root ::= \"\\t\\n\\r\\\\\\\"\"", "\t\n\r\\\""));
  EXPECT_TRUE(matches("root ::= \"caf\xC3\xA9\"", "caf\xC3\xA9"));
}

TEST(GrammarParse, RulesCommentsAndNewlines) {
  const std::string g =
      "# a comment line\n"
      "root ::= greeting ws name   # trailing comment\n"
      "\n"
      "greeting ::= \"hello\" |\n"
      "   \"hi\"\n"
      "name ::= (\n"
      "  [a-z]+\n"
      "  | \"?\" )\n"
      "ws ::= \" \"\n";
  EXPECT_TRUE(matches(g, "hello bob"));
  EXPECT_TRUE(matches(g, "hi ?"));
  EXPECT_FALSE(matches(g, "hey bob"));
  EXPECT_TRUE(matches("root ::= a\r\na ::= \"z\"\r\n", "z"));
  EXPECT_TRUE(matches("root ::= my_rule-2\nmy_rule-2 ::= \"k\"", "k"));
}

TEST(GrammarParse, ErrorsHaveLineAndColumn) {
  EXPECT_EQ(error_of("root ::= \"abc"), "grammar: 1:10: unterminated string");
  EXPECT_EQ(error_of("root ::= [abc"), "grammar: 1:10: unterminated character class");
  EXPECT_EQ(error_of("root ::= \"a\"\nx := \"b\""),
            "grammar: 2:3: expected '::=' after rule name 'x'");
  EXPECT_EQ(error_of("root ::= \"\\d\""), "grammar: 1:11: unknown escape '\\d'");
  EXPECT_EQ(error_of("root ::= \"\\x4\""), "grammar: 1:11: hex escape needs exactly 2 hex digits");
  EXPECT_EQ(error_of("root ::= * \"a\""), "grammar: 1:10: '*' has nothing to repeat");
  EXPECT_EQ(error_of("root ::= (\"a\""), "grammar: 1:10: unclosed '('");
  EXPECT_EQ(error_of("root ::= \"a\" )"), "grammar: 1:14: unexpected ')'");
  EXPECT_EQ(error_of("root ::= [z-a]"), "grammar: 1:13: character range U+7A-U+61 is reversed");
  EXPECT_EQ(error_of("root ::= \"a\"{3,2}"), "grammar: 1:13: repetition {3,2} has max < min");
  EXPECT_EQ(error_of("root ::= \"a\"{2001}"),
            "grammar: 1:13: repetition count 2001 is over the limit of 2000");
  EXPECT_EQ(error_of("root ::= thing\n"), "grammar: 1:10: undefined rule 'thing'");
  EXPECT_EQ(error_of("start ::= \"a\""), "grammar: no 'root' rule (the start symbol)");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""),
            "grammar: 2:1: rule 'root' is defined twice");
  EXPECT_EQ(error_of("root ::= \"a\" b ::= \"c\""),
            "grammar: 1:14: missing newline before rule 'b'");
  EXPECT_EQ(error_of("root ::= \"\xFF\""), "grammar: 1:11: invalid UTF-8 in the grammar text");
  EXPECT_EQ(error_of("root ::= <abc"), "grammar: 1:10: unterminated token reference '<...>'");
  EXPECT_EQ(error_of("root ::= \"\\uD800\""),
            "grammar: 1:11: escape U+D800 is not a Unicode scalar value");
  EXPECT_EQ(error_of("root ::= @"), "grammar: 1:10: unexpected character '@'");
}

TEST(GrammarParse, DeepNestingIsAnErrorNotACrash) {
  EXPECT_EQ(error_of("root ::= " + std::string(100000, '(')),
            "grammar: 1:266: groups nested deeper than 256");
  EXPECT_TRUE(matches("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')'), "a"));
}

TEST(GrammarParse, LeftRecursionIsRejected) {
  EXPECT_EQ(error_of("root ::= root \"a\" | \"b\""),
            "grammar: left recursion in rule 'root' (a rule that can reach itself before "
            "consuming any text)");
  // through a nullable prefix
  EXPECT_NE(error_of("root ::= opt root \"a\" | \"b\"\nopt ::= \"x\"?").find("left recursion"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"").find("left recursion"),
            std::string::npos);
  // right recursion is fine
  EXPECT_TRUE(matches("root ::= \"a\" root | \"b\"", "aaab"));
}

TEST(GrammarParse, RepetitionOverTheLimitIsUnbounded) {
  // llama.cpp treats a max above 2000 as unbounded; nesting stays linear in size.
  EXPECT_TRUE(matches("root ::= \"a\"{0,5000}", std::string(2500, 'a')));
  const auto g = parse_gbnf("root ::= ((\"a\"{1000}){1000}){1000}");
  EXPECT_LT(g->elements.size(), 10000u);
}

TEST(GrammarParse, DumpShowsByteLevelRules) {
  const auto g = parse_gbnf("root ::= [a-c] \"\xC3\xA9\"");
  EXPECT_EQ(g->dump(), "root ::= [61-63] [C3] [A9]\n");
  const auto neg = parse_gbnf("root ::= [^\\x00-\\U0010FFFF]?");  // an empty class
  EXPECT_FALSE(matches("root ::= [^\\x00-\\U0010FFFF]", "a"));
  EXPECT_TRUE(matches("root ::= [^\\x00-\\U0010FFFF]?", ""));
  (void)neg;
}

TEST(GrammarLiteral, RoundTripsThroughTheParser) {
  for (std::string s : {std::string("plain"), std::string("q\"uo\\te"), std::string("\n\t\r"),
                        std::string("\x01\x7F"), std::string("\xC3\xA9\xE2\x82\xAC")}) {
    EXPECT_TRUE(matches("root ::= " + gbnf_literal(s), s)) << gbnf_literal(s);
  }
}

TEST(GrammarCache, SameTextSameGrammar) {
  const auto a = cached_gbnf("root ::= \"cached\"");
  const auto b = cached_gbnf("root ::= \"cached\"");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), cached_gbnf("root ::= \"other\"").get());
}

// ---- the matcher -------------------------------------------------------------------------------

TEST(GrammarMatcher, AcceptsTokensSpanningTerminals) {
  Matcher m = matcher_for("root ::= \"{\\\"\" [a-z]+ \"\\\":\" (\"true\" | \"false\") \"}\"");
  const SmallVocab& v = small();
  EXPECT_TRUE(m.accept(v.id("{\"")));
  EXPECT_TRUE(m.accept(v.id("ab")));
  EXPECT_FALSE(m.accept(v.id("12")));  // rejected: nothing changes
  EXPECT_TRUE(m.accept(v.id("c")));
  EXPECT_TRUE(m.accept(v.id("\":")));
  EXPECT_FALSE(m.is_accepting());
  EXPECT_FALSE(m.allows(v.eos));  // end only when complete
  EXPECT_TRUE(m.accept(v.id("true")));
  EXPECT_TRUE(m.accept(v.id("}")));
  EXPECT_TRUE(m.is_accepting());
  EXPECT_TRUE(m.is_complete());
  EXPECT_TRUE(m.accept(v.eos));
  EXPECT_TRUE(m.finished());
  EXPECT_FALSE(m.allows(v.id("a")));
}

TEST(GrammarMatcher, PartialUtf8AcrossTokens) {
  const SmallVocab& v = small();
  Matcher m = matcher_for("root ::= [\\u00e9] \"t\"");
  EXPECT_TRUE(m.accept(v.id("\xC3")));  // the first byte of U+00E9
  EXPECT_FALSE(m.allows(v.id("a")));
  EXPECT_TRUE(m.accept(v.id("\xA9t")));  // its second byte and a "t"
  EXPECT_TRUE(m.is_complete());
  // a lead byte that cannot start an allowed character is rejected at once
  Matcher ascii = matcher_for("root ::= [a-z]");
  EXPECT_FALSE(ascii.allows(v.id("\xC3")));
  // an incomplete character is not a complete sentence
  Matcher any = matcher_for("root ::= [^\"]*");
  EXPECT_TRUE(any.accept(v.id("\xC3")));
  EXPECT_FALSE(any.is_accepting());
  EXPECT_FALSE(any.allows(v.eos));
  EXPECT_FALSE(any.allows(v.id("a")));  // invalid UTF-8: a continuation byte is needed
}

TEST(GrammarMatcher, AtomicTokensOnlyWhereNamed) {
  const SmallVocab& v = small();
  // a text rule that would match the atomic token's text does not allow the token
  Matcher text = matcher_for("root ::= [^\"]*");
  EXPECT_FALSE(text.allows(v.quote));
  EXPECT_FALSE(text.allows(v.call));
  EXPECT_FALSE(text.allows(v.id("<unused3>")));
  EXPECT_FALSE(text.allows(v.empty));
  EXPECT_TRUE(text.allows(v.id("<")));
  // by id and by text
  Matcher call = matcher_for("root ::= <[" + std::to_string(v.call) + "]> \"x\" <|\"|>");
  EXPECT_FALSE(call.allows(v.id("<")));
  EXPECT_TRUE(call.accept(v.call));
  EXPECT_TRUE(call.accept(v.id("x")));
  EXPECT_FALSE(call.accept(v.id("<")));
  EXPECT_TRUE(call.accept(v.quote));
  EXPECT_TRUE(call.is_complete());
  // !<token>: any one text token except it
  Matcher not_a = matcher_for("root ::= !<[97]> \"!\"");  // 97 = "a"
  EXPECT_FALSE(not_a.allows(97));
  EXPECT_FALSE(not_a.allows(v.quote));
  EXPECT_TRUE(not_a.allows(v.id("hello")));
  EXPECT_TRUE(not_a.accept(v.id("hello")));
  EXPECT_TRUE(not_a.accept(v.id("!")));
  EXPECT_TRUE(not_a.is_complete());
}

TEST(GrammarMatcher, UnknownTokenReferencesFailWhenBound) {
  try {
    Engine(parse_gbnf("root ::= <nope>"), small().vocab);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "grammar: token <nope> is not in the vocabulary");
  }
  try {
    Engine(parse_gbnf("root ::= <[999999]>"), small().vocab);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), fmt::format("grammar: token <[999999]> is outside the vocabulary of {}",
                                       small().vocab->size())
                               .c_str());
  }
}

TEST(GrammarMatcher, RollbackRestoresEarlierPositions) {
  const SmallVocab& v = small();
  Matcher m = matcher_for("root ::= \"he\" \"llo\"? \" world\"");
  ASSERT_TRUE(m.accept(v.id("he")));
  const Matcher snapshot = m;
  ASSERT_TRUE(m.accept(v.id("l")));
  ASSERT_TRUE(m.accept(v.id("l")));
  EXPECT_FALSE(m.allows(v.id(" world")));
  m.rollback(2);
  EXPECT_EQ(m.tokens_accepted(), 1u);
  EXPECT_TRUE(m.allows(v.id(" world")));
  EXPECT_TRUE(m.accept(v.id(" world")));
  EXPECT_TRUE(m.is_complete());
  EXPECT_TRUE(snapshot.allows(v.id("l")));
  EXPECT_FALSE(snapshot.allows(v.id("hello")));
  EXPECT_THROW(m.rollback(5), Error);
}

TEST(GrammarMatcher, EndAllowedExactlyWhenAccepting) {
  const SmallVocab& v = small();
  Matcher m = matcher_for("root ::= \"a\"+");
  EXPECT_FALSE(m.allows(v.eos));
  EXPECT_FALSE(m.accept(v.eos));
  ASSERT_TRUE(m.accept(v.id("a")));
  EXPECT_TRUE(m.is_accepting());
  EXPECT_FALSE(m.is_complete());  // more "a" may follow
  EXPECT_TRUE(m.allows(v.eos));
  EXPECT_TRUE(m.allows(v.id("a")));
}

TEST(GrammarMatcher, AmbiguousGrammarsTrackEveryParse) {
  // both alternatives share a prefix; the matcher keeps both until they diverge
  Matcher m = matcher_for("root ::= \"ab\" \"c\" | \"a\" \"bd\" | [a-z]* \"e\"");
  EXPECT_TRUE(m.accept_bytes("ab"));
  Matcher c = m, d = m, e = m;
  EXPECT_TRUE(c.accept_bytes("c") && c.is_accepting());
  EXPECT_TRUE(d.accept_bytes("d") && d.is_accepting());
  EXPECT_TRUE(e.accept_bytes("zze") && e.is_accepting());
}

// Brute force: the mask must allow exactly the tokens a fresh advance accepts.
void expect_mask_equals_reference(Matcher m, const TokenVocabulary& vocab) {
  std::vector<uint32_t> mask;
  m.fill_mask(mask);
  ASSERT_EQ(mask.size(), vocab.words());
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const bool bit = (mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u;
    ASSERT_EQ(bit, m.allows(id)) << "token " << id << " '" << vocab.piece(id) << "'";
  }
}

TEST(GrammarMask, EqualsBruteForceOnTheSmallVocabulary) {
  const SmallVocab& v = small();
  const std::string g =
      "root ::= \"{\" ws \"\\\"\" [a-z\\u00e9]* \"\\\"\" ws \":\" ws (\"true\" | \"null\" | "
      "[0-9]+) ws \"}\"\nws ::= \" \"?";
  Matcher m = matcher_for(g);
  for (std::string_view step : {"{", " ", "\"", "ab", "\xC3", "\xA9t", "\"", ":", "12", " ", "}"}) {
    expect_mask_equals_reference(m, *v.vocab);
    ASSERT_TRUE(m.accept_bytes(step)) << step;
  }
  expect_mask_equals_reference(m, *v.vocab);
}

// The real Gemma 4 vocabulary (tools/fetch-test-data.sh), cut to a subset so the brute force
// stays quick: every token whose id is a multiple of 17, the first 400 (specials) and the
// byte tokens.
std::shared_ptr<const TokenVocabulary> gemma_subset(std::vector<int32_t>* ids) {
  const std::string path = test::source_dir() + "/tests/data/vocab/ggml-vocab-gemma-4.gguf";
  if (!std::filesystem::exists(path)) return nullptr;
  auto file = gguf::File::open(path);
  auto tok = text::Tokenizer::from_gguf(*file);
  std::vector<std::string> pieces;
  std::vector<bool> atomic;
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tok->n_vocab(); ++id) {
    if (id >= 400 && id % 17 != 0 && (tok->attr(id) & text::kAttrByte) == 0) continue;
    ids->push_back(id);
    if (tok->is_eog(id)) eog.push_back(static_cast<int32_t>(pieces.size()));
    pieces.push_back(tok->piece(id, true));
    const uint32_t a = tok->attr(id);
    atomic.push_back((a & (text::kAttrControl | text::kAttrUserDefined | text::kAttrUnused |
                           text::kAttrUnknown)) != 0);
  }
  return std::make_shared<TokenVocabulary>(std::move(pieces), std::move(atomic), std::move(eog));
}

TEST(GrammarMask, EqualsBruteForceOnTheRealGemma4Vocabulary) {
  std::vector<int32_t> ids;
  const auto vocab = gemma_subset(&ids);
  if (!vocab) GTEST_SKIP() << "run tools/fetch-test-data.sh for the Gemma 4 vocabulary";
  ASSERT_GT(vocab->size(), 15000);
  const std::string g =
      "root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws string ws \",\" ws \"\\\"n\\\"\" ws \":\" "
      "ws [0-9]+ ws \"}\"\n"
      "string ::= \"\\\"\" ([^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\nt])* \"\\\"\"\n"
      "ws ::= [ \\n]{0,3}\n";
  Matcher m(std::make_shared<Engine>(parse_gbnf(g), vocab));
  // walk towards a target text: at each step compare the mask with the reference, then take a
  // random allowed token that continues the target
  std::string rest = "{ \"name\": \"caf\xC3\xA9 \\\"x\\\" d\xC3\xA9j\xC3\xA0\",\n\"n\":42}";
  std::mt19937 rng(7);
  std::vector<uint32_t> mask;
  while (!rest.empty()) {
    expect_mask_equals_reference(m, *vocab);
    m.fill_mask(mask);
    std::vector<int32_t> fits;
    for (int32_t id = 0; id < vocab->size(); ++id) {
      const std::string& p = vocab->piece(id);
      if (((mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u) && !p.empty() &&
          rest.compare(0, p.size(), p) == 0) {
        fits.push_back(id);
      }
    }
    ASSERT_FALSE(fits.empty()) << "nothing continues '" << rest << "'";
    const int32_t pick = fits[rng() % fits.size()];
    ASSERT_TRUE(m.accept(pick));
    rest.erase(0, vocab->piece(pick).size());
  }
  EXPECT_TRUE(m.is_complete());
  expect_mask_equals_reference(m, *vocab);
  // special tokens never in the mask of a text position
  Matcher fresh(std::make_shared<Engine>(parse_gbnf("root ::= [^\"]*"), vocab));
  fresh.fill_mask(mask);
  for (int32_t i = 0; i < vocab->size(); ++i) {
    const bool bit = (mask[static_cast<size_t>(i) >> 5] >> (i & 31)) & 1u;
    if (vocab->atomic(i) && !vocab->end_of_generation(i)) {
      ASSERT_FALSE(bit) << vocab->piece(i);
    }
  }
}

}  // namespace
}  // namespace boltrt::grammar

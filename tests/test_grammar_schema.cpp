// JSON Schema -> grammar (src/grammar/json_schema.cpp, regex.cpp): accepted and rejected
// documents per keyword, the errors (keyword and JSON pointer named), and conformance: random
// walks under the constraint (random tokens of a real Gemma 4 vocabulary subset, biased to
// close structures) whose finished outputs are checked by an independent validator written
// here (std::regex for patterns, calendar arithmetic for dates, long double for bounds) —
// including the cases llama.cpp's converter gets wrong (number ranges, formats, prefixItems,
// maxLength with pattern).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_vocabulary.h"
#include "support/json_schema_validator.h"
#include "support/paths.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace boltrt::grammar {
namespace {

using Json = nlohmann::ordered_json;

// ---- helpers -----------------------------------------------------------------------------------

std::shared_ptr<const TokenVocabulary> bytes_vocab() {
  static const auto v = [] {
    std::vector<std::string> pieces;
    std::vector<bool> atomic;
    for (int b = 0; b < 256; ++b) {
      pieces.push_back(std::string(1, static_cast<char>(b)));
      atomic.push_back(false);
    }
    pieces.push_back("<eos>");
    atomic.push_back(true);
    return std::make_shared<TokenVocabulary>(pieces, atomic, std::vector<int32_t>{256});
  }();
  return v;
}

bool accepts(const std::string& schema, const std::string& doc) {
  Matcher m(std::make_shared<Engine>(parse_gbnf(json_schema_to_gbnf(schema)), bytes_vocab()));
  return m.accept_bytes(doc) && m.is_accepting();
}

std::string error_of(const std::string& schema) {
  try {
    parse_gbnf(json_schema_to_gbnf(schema));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- accept / reject ---------------------------------------------------------------------------

TEST(JsonSchema, Primitives) {
  EXPECT_TRUE(accepts(R"({"type":"string"})", R"("hi \"there\" \u00e9")"));
  EXPECT_FALSE(accepts(R"({"type":"string"})", R"("bad \x")"));
  EXPECT_FALSE(accepts(R"({"type":"string"})", R"("\ud800")"));  // lone surrogate escape
  EXPECT_TRUE(accepts(R"({"type":"integer"})", "-42"));
  EXPECT_FALSE(accepts(R"({"type":"integer"})", "042"));
  EXPECT_FALSE(accepts(R"({"type":"integer"})", "1.5"));
  EXPECT_TRUE(accepts(R"({"type":"number"})", "-1.5e10"));
  EXPECT_FALSE(accepts(R"({"type":"number"})", ".5"));
  EXPECT_TRUE(accepts(R"({"type":"boolean"})", "false"));
  EXPECT_TRUE(accepts(R"({"type":"null"})", "null"));
  EXPECT_TRUE(accepts(R"({"type":["string","null"]})", "null"));
  EXPECT_TRUE(accepts(R"({"type":["string","null"]})", R"("x")"));
  EXPECT_FALSE(accepts(R"({"type":["string","null"]})", "1"));
  EXPECT_TRUE(accepts(R"({})", R"([1, {"a": null}])"));  // any value
}

TEST(JsonSchema, EnumConstAnyOf) {
  EXPECT_TRUE(accepts(R"({"enum":["red",1,null,{"a":[true]}]})", R"({"a":[true]})"));
  EXPECT_TRUE(accepts(R"({"enum":["red",1,null]})", "1"));
  EXPECT_FALSE(accepts(R"({"enum":["red",1,null]})", R"("blue")"));
  EXPECT_TRUE(accepts(R"({"const":"x\"y"})", R"("x\"y")"));
  EXPECT_FALSE(accepts(R"({"const":"xy"})", R"("x")"));
  const std::string any = R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})";
  EXPECT_TRUE(accepts(any, "5"));
  EXPECT_TRUE(accepts(any, R"("ab")"));
  EXPECT_FALSE(accepts(any, R"("abc")"));
}

TEST(JsonSchema, ObjectsRequiredOptionalAdditional) {
  const std::string s =
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["b"]})";
  EXPECT_TRUE(accepts(s, R"({"b": "x"})"));
  EXPECT_TRUE(accepts(s, R"({"a": 1, "b": "x", "c": true})"));
  EXPECT_TRUE(accepts(s, R"({ "a":1,"b":"x" })"));
  EXPECT_TRUE(accepts(s, "{\n  \"b\": \"x\",\n  \"c\": false\n}"));
  EXPECT_FALSE(accepts(s, R"({"a": 1})"));              // b missing
  EXPECT_FALSE(accepts(s, R"({"b": "x", "d": 1})"));    // no additional keys by default
  EXPECT_FALSE(accepts(s, R"({"b": "x", "b": "y"})"));  // no duplicates
  EXPECT_FALSE(accepts(s, R"({"b": "x",})"));
  const std::string extra =
      R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":{"type":"string"}})";
  EXPECT_TRUE(accepts(extra, R"({"id": 1, "x": "y", "idx": "z"})"));
  EXPECT_FALSE(accepts(extra, R"({"id": 1, "x": 2})"));
  EXPECT_FALSE(accepts(extra, R"({"id": 1, "id": "again"})"));  // an extra key is never "id"
  EXPECT_TRUE(accepts(R"({"type":"object"})", R"({"any": [1, "thing"]})"));
  EXPECT_TRUE(accepts(R"({"type":"object","properties":{}})", "{}"));
  EXPECT_FALSE(accepts(R"({"type":"object","properties":{}})", R"({"a":1})"));
}

TEST(JsonSchema, ArraysTuplesAndCounts) {
  const std::string counted =
      R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})";
  EXPECT_FALSE(accepts(counted, "[1]"));
  EXPECT_TRUE(accepts(counted, "[1, 2]"));
  EXPECT_TRUE(accepts(counted, "[1,2,3]"));
  EXPECT_FALSE(accepts(counted, "[1,2,3,4]"));
  EXPECT_FALSE(accepts(counted, "[1,\"a\"]"));
  const std::string tuple =
      R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})";
  EXPECT_TRUE(accepts(tuple, R"(["a", 1])"));
  EXPECT_TRUE(accepts(tuple, R"(["a"])"));  // prefixItems do not require their items
  EXPECT_TRUE(accepts(tuple, "[]"));
  EXPECT_FALSE(accepts(tuple, R"([1, "a"])"));
  EXPECT_FALSE(accepts(tuple, R"(["a", 1, 2])"));
  const std::string tail =
      R"({"type":"array","prefixItems":[{"const":"head"}],"items":{"type":"boolean"},"minItems":2})";
  EXPECT_FALSE(accepts(tail, R"(["head"])"));
  EXPECT_TRUE(accepts(tail, R"(["head", true, false])"));
  EXPECT_FALSE(accepts(tail, R"(["head", 1])"));
}

TEST(JsonSchema, RefsAndRecursion) {
  const std::string tree = R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["v"]}},"$ref":"#/$defs/node"})";
  EXPECT_TRUE(accepts(tree, R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4}]}]})"));
  EXPECT_FALSE(accepts(tree, R"({"v": 1, "kids": [{"w": 2}]})"));
  const std::string all_of =
      R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
      {"properties":{"b":{"type":"string"}},"required":["b"]}]})";
  EXPECT_TRUE(accepts(all_of, R"({"a": 1, "b": "x"})"));
  EXPECT_FALSE(accepts(all_of, R"({"a": 1})"));
}

TEST(JsonSchema, IntegerRangesAreExact) {
  const std::string s = R"({"type":"integer","minimum":-15,"maximum":1234})";
  for (int x = -40; x <= 1300; ++x) {
    ASSERT_EQ(accepts(s, std::to_string(x)), x >= -15 && x <= 1234) << x;
  }
  const std::string ex = R"({"type":"integer","exclusiveMinimum":7,"exclusiveMaximum":100})";
  for (int x = -5; x <= 120; ++x) ASSERT_EQ(accepts(ex, std::to_string(x)), x > 7 && x < 100) << x;
  const std::string lower = R"({"type":"integer","minimum":95})";
  EXPECT_FALSE(accepts(lower, "94"));
  EXPECT_TRUE(accepts(lower, "95"));
  EXPECT_TRUE(accepts(lower, "123456789"));
  EXPECT_FALSE(accepts(lower, "-100"));
  const std::string upper = R"({"type":"integer","maximum":-3})";
  EXPECT_TRUE(accepts(upper, "-3"));
  EXPECT_TRUE(accepts(upper, "-1000"));
  EXPECT_FALSE(accepts(upper, "-2"));
  EXPECT_FALSE(accepts(upper, "0"));
  EXPECT_FALSE(accepts(upper, "-0"));
  EXPECT_TRUE(accepts(R"({"type":"integer","minimum":2.5,"maximum":4.5})", "3"));
  EXPECT_FALSE(accepts(R"({"type":"integer","minimum":2.5,"maximum":4.5})", "5"));
  EXPECT_FALSE(accepts(R"({"type":"integer","minimum":2.5,"maximum":4.5})", "2"));
}

TEST(JsonSchema, NumberRangesAreExact) {
  const std::string s = R"({"type":"number","minimum":-2.5,"exclusiveMaximum":10.25})";
  EXPECT_TRUE(accepts(s, "-2.5"));
  EXPECT_TRUE(accepts(s, "-2.4999"));
  EXPECT_FALSE(accepts(s, "-2.5001"));
  EXPECT_FALSE(accepts(s, "-3"));
  EXPECT_TRUE(accepts(s, "0"));
  EXPECT_TRUE(accepts(s, "10.2499"));
  EXPECT_FALSE(accepts(s, "10.25"));
  EXPECT_FALSE(accepts(s, "10.250"));
  EXPECT_FALSE(accepts(s, "11"));
  EXPECT_FALSE(accepts(s, "1e1"));  // bounded numbers are plain decimals
  // every decimal with up to 3 fraction digits in a window around the bounds
  const std::string t = R"({"type":"number","exclusiveMinimum":0.1,"maximum":0.35})";
  for (int i = 0; i <= 500; ++i) {
    const std::string x = fmt::format("{}.{:03d}", i / 1000, i % 1000);
    ASSERT_EQ(accepts(t, x), i > 100 && i <= 350) << x;
  }
  EXPECT_FALSE(accepts(R"({"type":"number","exclusiveMinimum":0})", "0"));
  EXPECT_FALSE(accepts(R"({"type":"number","exclusiveMinimum":0})", "0.000"));
  EXPECT_TRUE(accepts(R"({"type":"number","exclusiveMinimum":0})", "0.0001"));
  EXPECT_FALSE(accepts(R"({"type":"number","exclusiveMinimum":0})", "-0.5"));
  EXPECT_TRUE(accepts(R"({"type":"number","maximum":0})", "-0.5"));
  EXPECT_TRUE(accepts(R"({"type":"number","maximum":0})", "0"));
  EXPECT_FALSE(accepts(R"({"type":"number","maximum":0})", "0.1"));
}

TEST(JsonSchema, StringLengthsPatternsAndFormats) {
  const std::string len = R"({"type":"string","minLength":2,"maxLength":3})";
  EXPECT_FALSE(accepts(len, R"("a")"));
  EXPECT_TRUE(accepts(len, R"("\u00e9\n")"));  // escapes count as one character
  EXPECT_TRUE(accepts(len, "\"\xC3\xA9t\xC3\xA9\""));
  EXPECT_FALSE(accepts(len, R"("abcd")"));
  const std::string pat = R"({"type":"string","pattern":"^[A-Z]{2}-\\d+$","maxLength":5})";
  EXPECT_TRUE(accepts(pat, R"("AB-1")"));
  EXPECT_TRUE(accepts(pat, R"("AB-12")"));
  EXPECT_FALSE(accepts(pat, R"("AB-123")"));  // maxLength binds together with the pattern
  EXPECT_FALSE(accepts(pat, R"("Ab-1")"));
  const std::string unanchored = R"({"type":"string","pattern":"ab|cd"})";
  EXPECT_TRUE(accepts(unanchored, R"("xxabyy")"));
  EXPECT_FALSE(accepts(unanchored, R"("xxacyy")"));
  const std::string quote = R"({"type":"string","pattern":"^a\"b\\\\c$"})";
  EXPECT_TRUE(accepts(quote, R"("a\"b\\c")"));
  const std::string date = R"({"type":"string","format":"date"})";
  EXPECT_TRUE(accepts(date, R"("2024-02-29")"));
  EXPECT_FALSE(accepts(date, R"("2023-02-29")"));
  EXPECT_FALSE(accepts(date, R"("1900-02-29")"));
  EXPECT_TRUE(accepts(date, R"("2000-02-29")"));
  EXPECT_FALSE(accepts(date, R"("2024-04-31")"));
  EXPECT_FALSE(accepts(date, R"("2024-13-01")"));
  EXPECT_TRUE(accepts(R"({"type":"string","format":"time"})", R"("23:59:59.5+05:30")"));
  EXPECT_FALSE(accepts(R"({"type":"string","format":"time"})", R"("24:00:00Z")"));
  EXPECT_TRUE(accepts(R"({"type":"string","format":"date-time"})", R"("2026-12-04T03:59:12Z")"));
  EXPECT_TRUE(
      accepts(R"({"type":"string","format":"uuid"})", R"("3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f")"));
  EXPECT_FALSE(accepts(R"({"type":"string","format":"uuid"})", R"("3f2b8c1e-9d4a-4b7e-8f00")"));
  EXPECT_TRUE(accepts(R"({"type":"string","format":"email"})", R"("a.b+c@example.co.uk")"));
  EXPECT_FALSE(accepts(R"({"type":"string","format":"email"})", R"("a..b@example.com")"));
  EXPECT_FALSE(accepts(R"({"type":"string","format":"email"})", R"("ab@localhost")"));
  EXPECT_TRUE(accepts(R"({"type":"string","format":"ipv4"})", R"("192.168.0.255")"));
  EXPECT_FALSE(accepts(R"({"type":"string","format":"ipv4"})", R"("192.168.0.256")"));
}

TEST(JsonSchema, ErrorsNameTheKeywordAndPointer) {
  EXPECT_EQ(error_of(R"({"type":"object","properties":{"a":{"not":{"type":"string"}}}})"),
            "json schema: /properties/a/not: unsupported keyword 'not'");
  EXPECT_EQ(error_of(R"({"type":"string","format":"hostname"})"),
            "json schema: /format: unsupported format 'hostname'");
  EXPECT_EQ(error_of(R"({"type":"array","uniqueItems":true})"),
            "json schema: /uniqueItems: unsupported keyword 'uniqueItems'");
  EXPECT_EQ(error_of(R"({"type":"number","multipleOf":3})"),
            "json schema: /multipleOf: unsupported keyword 'multipleOf'");
  EXPECT_EQ(error_of(R"({"$ref":"http://example.com/s.json"})"),
            "json schema: /$ref: only local references ('#...') are supported, not "
            "'http://example.com/s.json'");
  EXPECT_EQ(error_of(R"({"$ref":"#/$defs/missing"})"),
            "json schema: /$ref: reference '#/$defs/missing' points to nothing");
  EXPECT_EQ(error_of(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})"),
            "json schema: /oneOf: branches 0 and 1 may both match a value (oneOf needs provably "
            "disjoint branches; use anyOf)");
  EXPECT_EQ(error_of(R"x({"type":"string","pattern":"(a)\\1"})x"),
            "json schema: /pattern: pattern '(a)\\1': backreferences are not supported (at "
            "character 4)");
  EXPECT_EQ(error_of(R"x({"type":"string","pattern":"^(?=a)"})x"),
            "json schema: /pattern: pattern '^(?=a)': lookarounds are not supported (at "
            "character 4)");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"^[0-9]{3}$","maxLength":2})"),
            "json schema: /pattern: pattern '^[0-9]{3}$' admits no string of length 0..2");
  EXPECT_EQ(error_of(R"({"type":"integer","minimum":5,"maximum":4})"),
            "json schema: (root): no integer lies within the bounds");
  EXPECT_EQ(error_of(R"({"type":"object","properties":{"a":{}},"required":["b"]})"),
            "json schema: /required: required property 'b' is not declared in properties");
  EXPECT_EQ(error_of("{\"type\": "),
            "json schema: not valid JSON: parse error at line 1, column 10: syntax error while "
            "parsing value - unexpected end of input; expected '[', '{', or a literal");
  EXPECT_EQ(error_of(R"({"type":"string","maxLength":5000})"),
            "json schema: /maxLength: 5000 is over the supported limit of 2000");
  EXPECT_EQ(error_of(R"({"type":"strin"})"), "json schema: /type: unknown type 'strin'");
  EXPECT_EQ(error_of(R"({"allOf":[{"type":"string"},{"type":"integer"}]})"),
            "json schema: /allOf/1/type: allOf branches disagree on 'type' (cannot merge)");
  // a discriminated oneOf is fine
  EXPECT_EQ(
      error_of(R"({"oneOf":[{"type":"object","properties":{"k":{"const":"a"}},"required":["k"]},
      {"type":"object","properties":{"k":{"const":"b"},"x":{"type":"integer"}},"required":["k"]}]})"),
      "");
}

TEST(JsonSchema, DeepNestingIsAnErrorNotACrash) {
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += R"({"type":"array","items":)";
  deep += "{}" + std::string(300, '}');
  EXPECT_NE(error_of(deep).find("schemas nested deeper than 128"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":")" + std::string(1000, '(') + R"("})")
                .find("groups nested deeper than 256"),
            std::string::npos);
}

TEST(JsonSchema, JsonObjectIsAnyObject) {
  Matcher m(std::make_shared<Engine>(parse_gbnf(json_object_gbnf()), bytes_vocab()));
  EXPECT_TRUE(m.accept_bytes(R"({"a": [1, 2.5, {"b": null}], "c": "d"})"));
  EXPECT_TRUE(m.is_accepting());
  Matcher arr(std::make_shared<Engine>(parse_gbnf(json_object_gbnf()), bytes_vocab()));
  EXPECT_FALSE(arr.accept_bytes("[1]"));
}

// ---- conformance of constrained random outputs -------------------------------------------------

std::shared_ptr<const TokenVocabulary> gemma_vocab_subset() {
  static const auto v = []() -> std::shared_ptr<const TokenVocabulary> {
    const std::string path = test::source_dir() + "/tests/data/vocab/ggml-vocab-gemma-4.gguf";
    if (!std::filesystem::exists(path)) return nullptr;
    auto file = gguf::File::open(path);
    auto tok = text::Tokenizer::from_gguf(*file);
    std::vector<std::string> pieces;
    std::vector<bool> atomic;
    std::vector<int32_t> eog;
    constexpr uint32_t kAtomic =
        text::kAttrControl | text::kAttrUserDefined | text::kAttrUnused | text::kAttrUnknown;
    for (int32_t id = 0; id < tok->n_vocab(); ++id) {
      if (id >= 400 && id % 13 != 0 && (tok->attr(id) & text::kAttrByte) == 0) continue;
      if (tok->is_eog(id)) eog.push_back(static_cast<int32_t>(pieces.size()));
      pieces.push_back(tok->piece(id, true));
      atomic.push_back((tok->attr(id) & kAtomic) != 0);
    }
    return std::make_shared<TokenVocabulary>(pieces, atomic, eog);
  }();
  return v;
}

// Random walks under the schema's constraint; every finished output (end-of-generation reached)
// must parse and validate. Returns the number finished.
int conformance(const std::string& schema_text, int seeds) {
  const auto vocab = gemma_vocab_subset();
  const Json schema = Json::parse(schema_text);
  auto engine = std::make_shared<Engine>(parse_gbnf(json_schema_to_gbnf(schema_text)), vocab);
  std::vector<uint32_t> mask;
  int finished = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    Matcher m(engine);
    std::string out;
    for (int step = 0; step < 300 && !m.finished(); ++step) {
      m.fill_mask(mask);
      std::vector<int32_t> allowed, closers;
      for (int32_t id = 0; id < vocab->size(); ++id) {
        if (!((mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u)) continue;
        allowed.push_back(id);
        const std::string& p = vocab->piece(id);
        if (vocab->end_of_generation(id) || p == "\"" || p == "}" || p == "]" || p == "," ||
            p == "\"," || p == "@")
          closers.push_back(id);
      }
      EXPECT_FALSE(allowed.empty()) << "dead end after '" << out << "'";
      if (allowed.empty()) break;
      const bool close = !closers.empty() && rng() % 100 < static_cast<uint32_t>(15 + step / 4);
      const auto& pool = close ? closers : allowed;
      const int32_t pick = pool[rng() % pool.size()];
      EXPECT_TRUE(m.accept(pick));
      if (!vocab->end_of_generation(pick)) out += vocab->piece(pick);
    }
    if (!m.finished()) {
      if (getenv("SHOW_UNFINISHED")) fprintf(stderr, "unfinished: %s\n", out.c_str());
      continue;
    }
    ++finished;
    Json value;
    try {
      value = Json::parse(out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not JSON: " << out << " (" << e.what() << ")";
      continue;
    }
    std::string why;
    EXPECT_TRUE(test::validate_json(schema, value, &why)) << why << ": " << out;
  }
  return finished;
}

class JsonSchemaConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gemma_vocab_subset()) GTEST_SKIP() << "run tools/fetch-test-data.sh";
  }
};

TEST_F(JsonSchemaConformance, NumberRanges) {
  EXPECT_GE(conformance(R"({"type":"object","properties":{
      "ratio":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},
      "temp":{"type":"number","minimum":-40.5,"maximum":60.25},
      "count":{"type":"integer","minimum":10,"maximum":999},
      "neg":{"type":"integer","exclusiveMaximum":-5,"minimum":-77}},
      "required":["ratio","temp","count","neg"]})",
                        40),
            20);
}

TEST_F(JsonSchemaConformance, StringFormats) {
  EXPECT_GE(conformance(R"({"type":"object","properties":{
      "day":{"type":"string","format":"date"},
      "at":{"type":"string","format":"date-time"},
      "t":{"type":"string","format":"time"},
      "id":{"type":"string","format":"uuid"},
      "mail":{"type":"string","format":"email"},
      "ip":{"type":"string","format":"ipv4"}},
      "required":["day","at","t","id","mail","ip"]})",
                        30),
            15);
}

TEST_F(JsonSchemaConformance, PrefixItemsTuples) {
  EXPECT_GE(conformance(R"({"type":"array","prefixItems":[
      {"type":"string","maxLength":4},{"type":"integer","minimum":0,"maximum":9},{"enum":["x","y"]}],
      "items":false,"minItems":2})",
                        40),
            20);
}

TEST_F(JsonSchemaConformance, MaxLengthWithPattern) {
  EXPECT_GE(conformance(R"({"type":"object","properties":{
      "code":{"type":"string","pattern":"^[a-z]+[0-9]*$","minLength":3,"maxLength":6},
      "tag":{"type":"string","pattern":"x","maxLength":4}},"required":["code","tag"]})",
                        40),
            20);
}

TEST_F(JsonSchemaConformance, NestedRefsAnyOfAndOptionals) {
  EXPECT_GE(conformance(R"({"$defs":{"item":{"type":"object","properties":{
        "name":{"type":"string","minLength":1,"maxLength":8},
        "price":{"anyOf":[{"type":"number","minimum":0,"maximum":100},{"type":"null"}]},
        "tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3}},
        "required":["name"]}},
      "type":"object","properties":{"items":{"type":"array","items":{"$ref":"#/$defs/item"},
        "minItems":1,"maxItems":2},"note":{"type":["string","null"],"maxLength":5}},
      "required":["items"]})",
                        40),
            15);
}

}  // namespace
}  // namespace boltrt::grammar

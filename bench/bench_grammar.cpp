// Grammar-constrained decoding cost on the real 262,144-token Gemma 4 vocabulary:
//   bench_grammar [VOCAB.gguf]
// Run from the repository root (default vocabulary: tests/data/vocab/ggml-vocab-gemma-4.gguf,
// fetched by tools/fetch-test-data.sh). For each case (a GBNF grammar or a JSON Schema and a
// document it accepts) the document is tokenized as the model would write it and replayed token by
// token: before each token the full-vocabulary mask is computed (and applied to a logit row),
// then the token is accepted. Reported: compile time, per-token mask time (median, p99, max) on
// a cold engine (first request with that grammar: every new state walks the trie once) and a
// warm one (a later request: the states' masks are cached), and the trie walk of one dense
// state. Prints a table; no assertions.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_vocabulary.h"
#include "text/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct Case {
  const char* name;
  bool schema;
  std::string text;  // GBNF or JSON Schema
  std::string document;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1)))];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace boltrt;
  const std::string path = argc > 1 ? argv[1] : "tests/data/vocab/ggml-vocab-gemma-4.gguf";
  auto file = gguf::File::open(path);
  auto tokenizer = text::Tokenizer::from_gguf(*file);
  auto t0 = Clock::now();
  const auto vocab = grammar::vocabulary_of(*tokenizer);
  size_t slice_tokens = 0;
  for (uint32_t w : vocab->slice_mask()) slice_tokens += static_cast<size_t>(__builtin_popcount(w));
  fmt::print(
      "vocabulary: {} tokens ({} in the printable-ASCII slice), tries {} + {} nodes, built in "
      "{:.1f} ms\n",
      vocab->size(), slice_tokens, vocab->trie().byte.size(), vocab->slice_trie().byte.size(),
      us_since(t0) / 1000);

  const std::vector<Case> cases = {
      {"gbnf json (grammars/json.gbnf style)", false,
       "root ::= object\n"
       "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
       "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
       "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
       "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
       "[0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
       "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)? ws\n"
       "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n",
       R"({"name": "Elizabeth Bennet", "age": 20, "sisters": ["Jane", "Mary", "Kitty", "Lydia"],
  "home": {"house": "Longbourn", "county": "Hertfordshire"}, "married": true, "income": 1.5e3})"},
      {"schema: person (strings, integer range, enum, array)", true,
       R"({"type":"object","properties":{
         "name":{"type":"string","minLength":1,"maxLength":60},
         "age":{"type":"integer","minimum":0,"maximum":150},
         "role":{"enum":["admin","user","guest"]},
         "tags":{"type":"array","items":{"type":"string"},"maxItems":8},
         "email":{"type":"string","format":"email"}},
         "required":["name","age","role"]})",
       R"({"name": "Fitzwilliam Darcy", "age": 28, "role": "admin", "tags": ["Pemberley", "Derbyshire"], "email": "darcy@pemberley.co.uk"})"},
      {"schema: order (nested objects, number range, date-time, uuid)", true,
       R"({"type":"object","properties":{
         "id":{"type":"string","format":"uuid"},
         "created":{"type":"string","format":"date-time"},
         "items":{"type":"array","minItems":1,"items":{"type":"object","properties":{
            "sku":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"},
            "qty":{"type":"integer","minimum":1},
            "price":{"type":"number","exclusiveMinimum":0,"maximum":10000}},
            "required":["sku","qty","price"]}},
         "note":{"type":["string","null"]}},
         "required":["id","created","items","note"]})",
       R"({"id": "3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f", "created": "2026-12-04T03:59:12Z", "items": [{"sku": "ABC-1234", "qty": 2, "price": 19.99}, {"sku": "XYZ-0001", "qty": 1, "price": 250}], "note": null})"},
  };

  fmt::print("per-token mask time (fill_mask); +apply = mask and -inf on the logit row, warm\n");
  fmt::print("{:58} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>7}\n", "case", "compile",
             "cold med", "cold p99", "cold max", "warm med", "warm p99", "+apply med", "tokens");
  std::vector<float> logits(static_cast<size_t>(vocab->size()), 0.0f);
  std::vector<uint32_t> scratch;
  for (const Case& c : cases) {
    t0 = Clock::now();
    const std::string gbnf = c.schema ? grammar::json_schema_to_gbnf(c.text) : c.text;
    auto compiled = grammar::parse_gbnf(gbnf);
    auto engine = std::make_shared<grammar::Engine>(compiled, vocab);
    const double compile_us = us_since(t0);
    const std::vector<int32_t> tokens = tokenizer->encode(c.document, false, false);
    std::vector<double> cold, warm, applied;
    for (int pass = 0; pass < 2; ++pass) {
      grammar::Matcher m(engine);
      for (size_t i = 0; i <= tokens.size(); ++i) {
        auto t = Clock::now();
        m.fill_mask(scratch);
        (pass == 0 ? cold : warm).push_back(us_since(t));
        if (pass == 0 && cold.back() > 1000 && getenv("SHOW_SLOW")) {
          fmt::print("  slow mask {:.0f} us before token {} '{}'\n", cold.back(), i,
                     i < tokens.size() ? tokenizer->piece(tokens[i]) : std::string("<end>"));
        }
        std::fill(logits.begin(), logits.end(), 0.0f);
        t = Clock::now();
        m.apply(logits, scratch);
        if (pass == 1) applied.push_back(us_since(t));
        const int32_t next = i < tokens.size() ? tokens[i] : tokenizer->eos();
        if (i < tokens.size() && !m.accept(next)) {
          fmt::print("  {}: token {} '{}' rejected at {}\n", c.name, next, tokenizer->piece(next),
                     i);
          break;
        }
      }
    }
    fmt::print(
        "{:58} {:>7.2f}ms {:>7.1f}us {:>7.1f}us {:>7.1f}us {:>7.1f}us {:>7.1f}us {:>8.1f}us "
        "{:>7}\n",
        c.name, compile_us / 1000, percentile(cold, 0.5), percentile(cold, 0.99),
        percentile(cold, 1.0), percentile(warm, 0.5), percentile(warm, 0.99),
        percentile(applied, 0.5), tokens.size());
  }

  // One dense state: inside a JSON string almost every token is allowed.
  auto dense = std::make_shared<grammar::Engine>(
      grammar::parse_gbnf("root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]* \"\\\"\""), vocab);
  grammar::Matcher m(dense);
  m.accept_bytes("\"");
  t0 = Clock::now();
  m.fill_mask(scratch);
  const double walk = us_since(t0);
  size_t allowed = 0;
  for (uint32_t w : scratch) allowed += static_cast<size_t>(__builtin_popcount(w));
  t0 = Clock::now();
  m.fill_mask(scratch);
  fmt::print(
      "dense state (inside a string): trie walk {:.0f} us, cached {:.1f} us, {} tokens "
      "allowed\n",
      walk, us_since(t0), allowed);
  t0 = Clock::now();
  for (int i = 0; i < 100; ++i) m.apply(logits, scratch);
  fmt::print("apply a cached mask to 262,144 logits: {:.1f} us\n", us_since(t0) / 100);
  return 0;
}

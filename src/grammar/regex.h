// Regular expressions (the ECMA-262 subset JSON Schema's `pattern` uses) as GBNF rules for the
// body of a JSON string, optionally intersected with a length range (minLength / maxLength).
//
// The regex is parsed into a Thompson NFA over code-point sets, made epsilon-free, and written
// as a right-linear grammar: one rule per NFA state (times the number of characters seen when
// a length bound applies), so the language is exactly the regex's, and with a bound exactly the
// strings of the regex whose length is in range (the product construction; llama.cpp applies
// `maxLength` and `pattern` separately and so can violate one). Characters are written as the
// JSON text that decodes to them (`"` as \", `\` as \\, control characters as \n, \u00XX, ...).
//
// Supported: literals, `.`, classes [...] with ranges and negation, \d \w \s \D \W \S, escapes
// (\n \t \r \f \v \0 \xHH \uHHHH, escaped punctuation), groups ( ) and (?: ), `|`, `* + ?`,
// `{n}` `{n,}` `{n,m}` (lazy `?` suffixes accepted: they do not change the language), `^` at the
// start and `$` at the end. A pattern without `^` (or `$`) may have any text before (after) the
// match, as JSON Schema says patterns are not anchored. Anything else (backreferences,
// lookarounds, anchors in the middle) is a boltrt::Error naming the construct.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace boltrt::grammar {

// Appends the rules to `rules` (one "name ::= ..." line each, names prefixed by `prefix`) and
// returns the name of the rule that matches the string body. max_length < 0: unbounded.
// Throws boltrt::Error "pattern '...': ..." for an unsupported or invalid regex, or when the
// pattern and the length range admit no string.
// raw: characters are written as themselves (no JSON escapes) and '<' never (JsonDialect::raw).
std::string regex_body_rules(std::string_view pattern, int64_t min_length, int64_t max_length,
                             const std::string& prefix, std::string& rules, bool raw = false);

// A GBNF alternative group matching one JSON-string character (as its JSON text) whose decoded
// code point lies in [lo, hi] ranges of `ranges` (pairs, inclusive).
std::string json_char_group(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);

}  // namespace boltrt::grammar

// The checks of `boltrt eval` task lines: does a model's answer pass? A check is the task's
// "check" object; its "type" picks one:
//
//   {"type": "exact", "value": "Paris", "ignore_case": false}
//       the answer, trimmed of surrounding whitespace, equals value
//   {"type": "contains", "value": "Paris", "ignore_case": false}
//       the answer contains value
//   {"type": "regex", "pattern": "^4[0-9]$"}
//       an ECMAScript regex that matches somewhere in the answer (anchor it to match all)
//   {"type": "numeric", "value": 3.14, "tolerance": 0.01, "relative": false}
//       the last number in the answer (1,234.5 and -2e3 forms) is within tolerance of value
//       (absolute by default, |got - value| <= tolerance * |value| when relative)
//   {"type": "choice", "value": "B", "choices": "ABCD"}
//       the multiple-choice letter the answer gives ("B", "(B)", "B) ...", "Answer: B",
//       "the answer is B") is value; an answer naming no letter or several is wrong
//   {"type": "json_schema", "schema": {...}}
//       the answer (optionally in a ```json fence) parses as JSON and validates
//   {"type": "tool_call", "calls": [{"name": "f", "arguments": {...}}, ...],
//    "arguments": "exact" | "subset"}
//       the reply's tool calls are exactly these functions, in any order, each with arguments
//       equal to the expected ones as JSON values (1 == 1.0; key order free), or with "subset"
//       holding at least the expected arguments (objects compared recursively)
//
// The answer is the reply's content (reasoning removed); tool_call looks at its tool calls.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace boltrt::eval {

struct ExpectedCall {
  std::string name;
  nlohmann::ordered_json arguments;  // an object
};

struct Check {
  enum class Kind { kExact, kContains, kRegex, kNumeric, kChoice, kJsonSchema, kToolCall };
  Kind kind = Kind::kExact;
  std::string value;  // exact, contains, choice (the letter)
  bool ignore_case = false;
  std::string pattern;  // regex
  std::optional<std::regex> regex;
  double number = 0, tolerance = 0;  // numeric
  bool relative = false;
  std::string choices = "ABCD";     // choice: the letters an answer may give
  nlohmann::ordered_json schema;    // json_schema
  std::vector<ExpectedCall> calls;  // tool_call
  bool subset = false;              // tool_call: arguments may hold more keys
};

// Parses a "check" object. Throws boltrt::Error with a one-line reason ("unknown check type
// 'x'", "check 'regex': bad pattern ...", ...).
Check parse_check(const nlohmann::ordered_json& spec);

std::string_view check_name(Check::Kind kind);

// What a reply gives a check: its content and its tool calls (OpenAI's shape: [{"function":
// {"name", "arguments": "JSON text"}}], as batch result lines carry them).
struct Answer {
  std::string content;
  nlohmann::ordered_json tool_calls = nlohmann::ordered_json::array();
};

struct CheckResult {
  bool passed = false;
  std::string detail;  // why it failed ("" when it passed)
};

CheckResult run_check(const Check& check, const Answer& answer);

// Helpers the checks use, exposed for tests.
std::optional<double> last_number(std::string_view text);
std::optional<char> extract_choice(std::string_view text, std::string_view choices);
// Equality as JSON values: object key order is free, 1 == 1.0 (ordered_json's == is not).
bool json_equal(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);
// Subset: every key of `expected` is in `got` with a value that is (recursively for objects)
// equal; arrays and scalars compare as JSON values.
bool json_subset(const nlohmann::ordered_json& expected, const nlohmann::ordered_json& got);

}  // namespace boltrt::eval

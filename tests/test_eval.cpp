// `boltrt eval`: the task-file format, every check type on hand-made answers (near misses
// included), the JSON Schema validator and the report's statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "eval/check.h"
#include "eval/json_validate.h"
#include "eval/report.h"
#include "eval/task.h"
#include "util/error.h"

namespace boltrt::eval {
namespace {

using json = nlohmann::ordered_json;

Check check_of(const char* spec) {
  return parse_check(json::parse(spec));
}

bool passes(const char* spec, const std::string& content) {
  return run_check(check_of(spec), Answer{content, json::array()}).passed;
}

std::string check_error(const char* spec) {
  try {
    check_of(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(EvalCheck, Exact) {
  const char* spec = R"({"type": "exact", "value": "Paris"})";
  EXPECT_TRUE(passes(spec, "Paris"));
  EXPECT_TRUE(passes(spec, "  Paris\n"));
  EXPECT_FALSE(passes(spec, "paris"));
  EXPECT_FALSE(passes(spec, "Paris."));
  EXPECT_FALSE(passes(spec, "Paris, France"));
  EXPECT_TRUE(passes(R"({"type": "exact", "value": "Paris", "ignore_case": true})", "PARIS"));
  EXPECT_EQ(run_check(check_of(spec), {"Lyon", json::array()}).detail,
            "expected exactly \"Paris\"");
}

TEST(EvalCheck, Contains) {
  const char* spec = R"({"type": "contains", "value": "Paris"})";
  EXPECT_TRUE(passes(spec, "It is Paris, of course."));
  EXPECT_FALSE(passes(spec, "It is paris."));
  EXPECT_FALSE(passes(spec, "It is Pari s."));
  EXPECT_TRUE(passes(R"({"type": "contains", "value": "paris", "ignore_case": true})", "PARIS!"));
  EXPECT_NE(check_error(R"({"type": "contains", "value": ""})"), "");
}

TEST(EvalCheck, Regex) {
  const char* spec = R"({"type": "regex", "pattern": "^4[0-9]$"})";
  EXPECT_TRUE(passes(spec, "42"));
  EXPECT_FALSE(passes(spec, "420"));
  EXPECT_FALSE(passes(spec, "x42"));
  EXPECT_TRUE(passes(R"({"type": "regex", "pattern": "b+c"})", "abbbcd"));
  EXPECT_TRUE(passes(R"({"type": "regex", "pattern": "yes", "ignore_case": true})", "YES"));
  EXPECT_EQ(check_error(R"({"type": "regex", "pattern": "(unclosed"})")
                .rfind("check 'regex': bad pattern '(unclosed'", 0),
            0u);
}

TEST(EvalCheck, NumericTakesTheLastNumberWithinTolerance) {
  EXPECT_EQ(last_number("1,234.5 apples"), 1234.5);
  EXPECT_EQ(last_number("from 3 to -2e3"), -2000);
  EXPECT_EQ(last_number("x = .5"), 0.5);
  EXPECT_FALSE(last_number("no digits").has_value());
  const char* spec = R"({"type": "numeric", "value": 42, "tolerance": 0.1})";
  EXPECT_TRUE(passes(spec, "The answer is 42."));
  EXPECT_TRUE(passes(spec, "6 * 7 = 42.05"));
  EXPECT_FALSE(passes(spec, "6 * 7 = 42.2"));           // just outside
  EXPECT_FALSE(passes(spec, "42 is wrong, it is 43"));  // the last number counts
  EXPECT_FALSE(passes(spec, "forty-two"));
  EXPECT_TRUE(passes(R"({"type": "numeric", "value": 1000})", "1,000"));
  EXPECT_FALSE(passes(R"({"type": "numeric", "value": 1000})", "1,000.5"));
  const char* relative =
      R"({"type": "numeric", "value": 200, "tolerance": 0.01, "relative": true})";
  EXPECT_TRUE(passes(relative, "about 201.9"));
  EXPECT_FALSE(passes(relative, "about 202.1"));
  EXPECT_NE(check_error(R"({"type": "numeric", "value": 1, "tolerance": -1})"), "");
  EXPECT_NE(check_error(R"({"type": "numeric", "value": "1"})"), "");
}

TEST(EvalCheck, ChoiceExtractsOneLetter) {
  EXPECT_EQ(extract_choice("B", "ABCD"), 'B');
  EXPECT_EQ(extract_choice("(C) because ...", "ABCD"), 'C');
  EXPECT_EQ(extract_choice("D) the last one", "ABCD"), 'D');
  EXPECT_EQ(extract_choice("A.", "ABCD"), 'A');
  EXPECT_EQ(extract_choice("I think the answer is B.", "ABCD"), 'B');
  EXPECT_EQ(extract_choice("Answer: (C)", "ABCD"), 'C');
  EXPECT_EQ(extract_choice("answer is A, no wait, final answer: D", "ABCD"), 'D');
  EXPECT_EQ(extract_choice("Between the options, (B) fits", "ABCD"), 'B');
  EXPECT_FALSE(extract_choice("A cat sat.", "ABCD").has_value());
  EXPECT_FALSE(extract_choice("Either (A) or (B)", "ABCD").has_value());
  EXPECT_FALSE(extract_choice("E", "ABCD").has_value());
  EXPECT_FALSE(extract_choice("the answer is b", "ABCD").has_value());
  const char* spec = R"({"type": "choice", "value": "B"})";
  EXPECT_TRUE(passes(spec, "The answer is B"));
  EXPECT_FALSE(passes(spec, "The answer is C"));
  EXPECT_FALSE(passes(spec, "Both (A) and (B)"));
  EXPECT_TRUE(passes(R"({"type": "choice", "value": "E", "choices": "ABCDE"})", "E"));
  EXPECT_NE(check_error(R"({"type": "choice", "value": "E"})"), "");
  EXPECT_NE(check_error(R"({"type": "choice", "value": "a", "choices": "abc"})"), "");
}

TEST(EvalCheck, JsonSchema) {
  const char* spec = R"({"type": "json_schema", "schema": {"type": "object",
      "properties": {"name": {"type": "string", "minLength": 1},
                     "age": {"type": "integer", "minimum": 0}},
      "required": ["name", "age"], "additionalProperties": false}})";
  EXPECT_TRUE(passes(spec, R"({"name": "Ada", "age": 36})"));
  EXPECT_TRUE(passes(spec, R"({"age": 36.0, "name": "Ada"})"));
  EXPECT_TRUE(passes(spec, "```json\n{\"name\": \"Ada\", \"age\": 36}\n```"));
  EXPECT_FALSE(passes(spec, R"({"name": "Ada", "age": -1})"));
  EXPECT_FALSE(passes(spec, R"({"name": "Ada", "age": 36.5})"));
  EXPECT_FALSE(passes(spec, R"({"name": "", "age": 36})"));
  EXPECT_FALSE(passes(spec, R"({"name": "Ada"})"));
  EXPECT_FALSE(passes(spec, R"({"name": "Ada", "age": 36, "x": 1})"));
  EXPECT_FALSE(passes(spec, R"({"name": "Ada", "age": 36)"));
  EXPECT_EQ(run_check(check_of(spec), {R"({"name": "Ada", "age": -1})", json::array()}).detail,
            "schema: /age: minimum 0");
  EXPECT_EQ(run_check(check_of(spec), {"Ada, 36", json::array()}).detail, "the answer is not JSON");
  EXPECT_NE(check_error(R"({"type": "json_schema"})"), "");
}

TEST(EvalValidate, Keywords) {
  auto ok = [](const char* schema, const char* value) {
    return validate_json(json::parse(schema), json::parse(value));
  };
  EXPECT_TRUE(ok(R"({"enum": [1, "a"]})", "1.0"));
  EXPECT_FALSE(ok(R"({"enum": [1, "a"]})", R"("b")"));
  EXPECT_TRUE(ok(R"({"const": {"a": [1], "b": 2}})", R"({"b": 2.0, "a": [1]})"));
  EXPECT_TRUE(ok(R"({"type": ["string", "null"]})", "null"));
  EXPECT_FALSE(ok(R"({"type": ["string", "null"]})", "0"));
  EXPECT_TRUE(ok(R"({"anyOf": [{"type": "string"}, {"type": "integer"}]})", "3"));
  EXPECT_FALSE(ok(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})", "3"));
  EXPECT_TRUE(ok(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})", "3.5"));
  EXPECT_TRUE(ok(R"({"allOf": [{"minimum": 1}, {"maximum": 3}]})", "2"));
  EXPECT_FALSE(ok(R"({"exclusiveMaximum": 3})", "3"));
  EXPECT_TRUE(ok(R"({"$defs": {"p": {"type": "integer"}}, "type": "array",
                     "items": {"$ref": "#/$defs/p"}, "minItems": 2, "maxItems": 3})",
                 "[1, 2]"));
  EXPECT_FALSE(
      ok(R"({"$defs": {"p": {"type": "integer"}}, "items": {"$ref": "#/$defs/p"}})", "[1, 2.5]"));
  EXPECT_FALSE(ok(R"({"items": {"$ref": "#/$defs/missing"}})", "[1]"));
  EXPECT_TRUE(ok(R"({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}})",
                 R"(["a", 1, 2])"));
  EXPECT_FALSE(ok(R"({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}})",
                  R"(["a", 1, "b"])"));
  EXPECT_TRUE(ok(R"({"pattern": "^[a-z]+-[0-9]{2}$", "maxLength": 5})", R"("ab-12")"));
  EXPECT_FALSE(ok(R"({"pattern": "^[a-z]+-[0-9]{2}$", "maxLength": 5})", R"("abc-12")"));
  EXPECT_TRUE(ok(R"({"maxLength": 2})", "\"\xc3\xa9\xc3\xa9\""));  // two code points
  EXPECT_TRUE(ok(R"({"additionalProperties": {"type": "integer"}})", R"({"a": 1})"));
  EXPECT_FALSE(ok(R"({"additionalProperties": {"type": "integer"}})", R"({"a": "1"})"));
  EXPECT_TRUE(ok(R"({"properties": {"a": {"type": "integer"}}})", R"({"b": "x"})"));
  EXPECT_FALSE(ok(R"({"uniqueItems": true})", "[1, 1.0]"));
  EXPECT_FALSE(ok(R"({"not": {"type": "string"}})", R"("x")"));
  EXPECT_TRUE(ok("true", "[1]"));
  EXPECT_FALSE(ok("false", "[1]"));
}

json calls(const char* text) {
  return json::parse(text);
}

bool tool_passes(const char* spec, const char* tool_calls) {
  return run_check(check_of(spec), Answer{"", calls(tool_calls)}).passed;
}

TEST(EvalCheck, ToolCallNamesAndArgumentsAsJsonValues) {
  const char* spec = R"({"type": "tool_call", "calls": [{"name": "get_weather",
      "arguments": {"city": "Oslo", "days": 3, "units": {"temp": "C"}}}]})";
  // Arguments arrive as JSON text (OpenAI's shape); key order and 3 vs 3.0 do not matter.
  EXPECT_TRUE(tool_passes(spec, R"([{"type": "function", "function": {"name": "get_weather",
      "arguments": "{\"units\": {\"temp\": \"C\"}, \"days\": 3.0, \"city\": \"Oslo\"}"}}])"));
  EXPECT_FALSE(tool_passes(spec, R"([{"function": {"name": "get_weather",
      "arguments": "{\"city\": \"Oslo\", \"days\": \"3\", \"units\": {\"temp\": \"C\"}}"}}])"));
  EXPECT_FALSE(tool_passes(spec, R"([{"function": {"name": "get_weather",
      "arguments": "{\"city\": \"oslo\", \"days\": 3, \"units\": {\"temp\": \"C\"}}"}}])"));
  EXPECT_FALSE(tool_passes(spec, R"([{"function": {"name": "get_forecast",
      "arguments": "{\"city\": \"Oslo\", \"days\": 3, \"units\": {\"temp\": \"C\"}}"}}])"));
  EXPECT_FALSE(tool_passes(spec, R"([{"function": {"name": "get_weather",
      "arguments": "{\"city\": \"Oslo\", \"days\": 3, \"units\": {\"temp\": \"C\"}, \"x\": 1}"}}])"));
  EXPECT_FALSE(
      tool_passes(spec, R"([{"function": {"name": "get_weather", "arguments": "{bad"}}])"));
  EXPECT_FALSE(tool_passes(spec, "[]"));
  EXPECT_EQ(run_check(check_of(spec), Answer{"", json::array()}).detail,
            "0 tool calls, expected 1");
}

TEST(EvalCheck, ToolCallSubsetAndParallelCallsInAnyOrder) {
  const char* subset = R"({"type": "tool_call", "arguments": "subset", "calls": [
      {"name": "f", "arguments": {"a": 1, "o": {"k": true}}}]})";
  EXPECT_TRUE(tool_passes(subset, R"([{"function": {"name": "f",
      "arguments": "{\"a\": 1, \"b\": 2, \"o\": {\"k\": true, \"z\": 0}}"}}])"));
  EXPECT_FALSE(tool_passes(subset, R"([{"function": {"name": "f",
      "arguments": "{\"a\": 1, \"o\": {\"k\": false}}"}}])"));
  const char* parallel = R"({"type": "tool_call", "calls": [
      {"name": "f", "arguments": {"x": 1}}, {"name": "f", "arguments": {"x": 2}},
      {"name": "g", "arguments": {}}]})";
  EXPECT_TRUE(tool_passes(parallel, R"([{"function": {"name": "g", "arguments": "{}"}},
      {"function": {"name": "f", "arguments": "{\"x\": 2}"}},
      {"function": {"name": "f", "arguments": "{\"x\": 1}"}}])"));
  EXPECT_FALSE(tool_passes(parallel, R"([{"function": {"name": "g", "arguments": "{}"}},
      {"function": {"name": "f", "arguments": "{\"x\": 1}"}},
      {"function": {"name": "f", "arguments": "{\"x\": 1}"}}])"));
  EXPECT_FALSE(tool_passes(parallel, R"([{"function": {"name": "g", "arguments": "{}"}},
      {"function": {"name": "f", "arguments": "{\"x\": 2}"}}])"));
  EXPECT_NE(check_error(R"({"type": "tool_call", "calls": [{"arguments": {}}]})"), "");
  EXPECT_NE(check_error(R"({"type": "tool_call", "calls": [], "arguments": "loose"})"), "");
}

TEST(EvalTask, MalformedLinesAndUnknownChecksAreReportedWithTheirLineAndSkipped) {
  const std::string text =
      R"({"id": "a", "prompt": "2+2=", "check": {"type": "numeric", "value": 4}})"
      "\n\n"
      R"({"id": "b", "prompt": "x", "check": {"type": "fuzzy", "value": "y"}})"
      "\n"
      "{not json\n"
      R"({"id": "c", "prompt": "x"})"
      "\n"
      R"({"id": "a", "prompt": "again", "check": {"type": "exact", "value": "y"}})"
      "\n"
      R"({"id": "d", "prompt": "x", "check": {"type": "tool_call", "calls": []}})"
      "\n"
      R"({"id": 7, "category": "chat", "messages": [{"role": "user", "content": "Hi"}],)"
      R"( "max_tokens": 4, "reasoning": "off", "check": {"type": "contains", "value": "H"}})"
      "\n";
  const TaskFile file = parse_tasks(text);
  ASSERT_EQ(file.tasks.size(), 2u);
  EXPECT_EQ(file.tasks[0].key, "\"a\"");
  EXPECT_EQ(file.tasks[0].category, "general");
  EXPECT_EQ(file.tasks[0].check.kind, Check::Kind::kNumeric);
  EXPECT_FALSE(file.tasks[0].request.contains("check"));
  EXPECT_EQ(file.tasks[1].key, "7");
  EXPECT_EQ(file.tasks[1].line, 8);
  EXPECT_EQ(file.tasks[1].category, "chat");
  EXPECT_FALSE(file.tasks[1].request.contains("category"));
  EXPECT_EQ(file.tasks[1].request["max_tokens"], 4);
  ASSERT_EQ(file.errors.size(), 5u);
  EXPECT_EQ(file.errors[0].line, 3);
  EXPECT_EQ(file.errors[0].message, "unknown check type 'fuzzy'");
  EXPECT_EQ(file.errors[1].line, 4);
  EXPECT_EQ(file.errors[1].message.rfind("bad JSON", 0), 0u);
  EXPECT_EQ(file.errors[2].line, 5);
  EXPECT_EQ(file.errors[2].message, "missing 'check'");
  EXPECT_EQ(file.errors[3].line, 6);
  EXPECT_EQ(file.errors[3].message, "duplicate id \"a\"");
  EXPECT_EQ(file.errors[4].line, 7);
  EXPECT_EQ(file.errors[4].message, "check 'tool_call' needs 'tools' (and 'messages')");
}

TEST(EvalReport, WilsonAndPercentiles) {
  const Interval half = wilson95(5, 10);
  EXPECT_NEAR(half.lo, 0.236593, 1e-5);
  EXPECT_NEAR(half.hi, 0.763407, 1e-5);
  const Interval none = wilson95(0, 20);
  EXPECT_EQ(none.lo, 0);
  EXPECT_NEAR(none.hi, 0.161125, 1e-5);
  const Interval all = wilson95(20, 20);
  EXPECT_NEAR(all.lo, 0.838875, 1e-5);
  EXPECT_NEAR(all.hi, 1.0, 1e-12);
  EXPECT_EQ(wilson95(0, 0).hi, 0);
  EXPECT_EQ(percentile({}, 50), 0);
  EXPECT_EQ(percentile({5, 1, 4, 2, 3}, 50), 3);
  EXPECT_EQ(percentile({5, 1, 4, 2, 3}, 95), 5);
  EXPECT_EQ(percentile({1, 2, 3, 4}, 50), 2);
  EXPECT_EQ(percentile({1, 2, 3, 4}, 75), 3);
}

}  // namespace
}  // namespace boltrt::eval

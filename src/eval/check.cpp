#include "eval/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "eval/json_validate.h"
#include "util/error.h"

namespace boltrt::eval {
namespace {

using json = nlohmann::ordered_json;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

const std::string& string_field(const json& spec, const char* type, const char* name) {
  if (!spec.contains(name) || !spec[name].is_string())
    fail("check '{}' needs a string '{}'", type, name);
  return spec[name].get_ref<const std::string&>();
}

bool bool_field(const json& spec, const char* type, const char* name) {
  if (!spec.contains(name) || spec[name].is_null()) return false;
  if (!spec[name].is_boolean()) fail("check '{}': '{}' must be a boolean", type, name);
  return spec[name].get<bool>();
}

double number_field(const json& spec, const char* type, const char* name) {
  if (!spec.contains(name) || !spec[name].is_number())
    fail("check '{}' needs a number '{}'", type, name);
  const double x = spec[name].get<double>();
  if (!std::isfinite(x)) fail("check '{}': '{}' must be finite", type, name);
  return x;
}

// The answer's text with an optional ```json ... ``` (or ``` ... ```) fence removed.
std::string_view unfence(std::string_view text) {
  text = trim(text);
  if (text.substr(0, 3) != "```") return text;
  const size_t newline = text.find('\n');
  if (newline == std::string_view::npos) return text;
  std::string_view body = text.substr(newline + 1);
  const size_t close = body.rfind("```");
  if (close == std::string_view::npos) return text;
  return trim(body.substr(0, close));
}

// Backtracking assignment of expected calls to distinct actual calls.
bool assign(const std::vector<ExpectedCall>& want,
            const std::vector<std::pair<std::string, json>>& got, bool subset, size_t i,
            std::vector<bool>& used) {
  if (i == want.size()) return true;
  for (size_t j = 0; j < got.size(); ++j) {
    if (used[j] || got[j].first != want[i].name) continue;
    const bool match = subset ? json_subset(want[i].arguments, got[j].second)
                              : json_equal(want[i].arguments, got[j].second);
    if (!match) continue;
    used[j] = true;
    if (assign(want, got, subset, i + 1, used)) return true;
    used[j] = false;
  }
  return false;
}

CheckResult result(bool passed, std::string detail) {
  return {passed, passed ? std::string() : std::move(detail)};
}

}  // namespace

std::string_view check_name(Check::Kind kind) {
  switch (kind) {
    case Check::Kind::kExact:
      return "exact";
    case Check::Kind::kContains:
      return "contains";
    case Check::Kind::kRegex:
      return "regex";
    case Check::Kind::kNumeric:
      return "numeric";
    case Check::Kind::kChoice:
      return "choice";
    case Check::Kind::kJsonSchema:
      return "json_schema";
    case Check::Kind::kToolCall:
      return "tool_call";
  }
  return "?";
}

Check parse_check(const json& spec) {
  if (!spec.is_object()) fail("'check' must be an object, not {}", spec.type_name());
  if (!spec.contains("type") || !spec["type"].is_string()) fail("'check' needs a string 'type'");
  const std::string type = spec["type"].get<std::string>();
  Check c;
  if (type == "exact" || type == "contains") {
    c.kind = type == "exact" ? Check::Kind::kExact : Check::Kind::kContains;
    c.value = string_field(spec, type.c_str(), "value");
    c.ignore_case = bool_field(spec, type.c_str(), "ignore_case");
    if (c.kind == Check::Kind::kContains && c.value.empty())
      fail("check 'contains': 'value' is empty");
  } else if (type == "regex") {
    c.kind = Check::Kind::kRegex;
    c.pattern = string_field(spec, "regex", "pattern");
    c.ignore_case = bool_field(spec, "regex", "ignore_case");
    try {
      auto flags = std::regex::ECMAScript;
      if (c.ignore_case) flags |= std::regex::icase;
      c.regex.emplace(c.pattern, flags);
    } catch (const std::regex_error& e) {
      fail("check 'regex': bad pattern '{}': {}", c.pattern, e.what());
    }
  } else if (type == "numeric") {
    c.kind = Check::Kind::kNumeric;
    c.number = number_field(spec, "numeric", "value");
    if (spec.contains("tolerance")) c.tolerance = number_field(spec, "numeric", "tolerance");
    if (c.tolerance < 0) fail("check 'numeric': 'tolerance' must be >= 0");
    c.relative = bool_field(spec, "numeric", "relative");
  } else if (type == "choice") {
    c.kind = Check::Kind::kChoice;
    if (spec.contains("choices")) c.choices = string_field(spec, "choice", "choices");
    if (c.choices.empty()) fail("check 'choice': 'choices' is empty");
    for (const char ch : c.choices)
      if (!std::isupper(static_cast<unsigned char>(ch)))
        fail("check 'choice': 'choices' must be capital letters A-Z");
    c.value = string_field(spec, "choice", "value");
    if (c.value.size() != 1 || c.choices.find(c.value[0]) == std::string::npos)
      fail("check 'choice': 'value' must be one of the letters \"{}\"", c.choices);
  } else if (type == "json_schema") {
    c.kind = Check::Kind::kJsonSchema;
    if (!spec.contains("schema") || !(spec["schema"].is_object() || spec["schema"].is_boolean()))
      fail("check 'json_schema' needs a 'schema' object");
    c.schema = spec["schema"];
  } else if (type == "tool_call") {
    c.kind = Check::Kind::kToolCall;
    if (!spec.contains("calls") || !spec["calls"].is_array())
      fail("check 'tool_call' needs a 'calls' array");
    for (size_t i = 0; i < spec["calls"].size(); ++i) {
      const json& call = spec["calls"][i];
      if (!call.is_object() || !call.contains("name") || !call["name"].is_string())
        fail("check 'tool_call': calls[{}] needs a string 'name'", i);
      ExpectedCall e{call["name"].get<std::string>(), json::object()};
      if (call.contains("arguments")) {
        if (!call["arguments"].is_object())
          fail("check 'tool_call': calls[{}].arguments must be an object", i);
        e.arguments = call["arguments"];
      }
      c.calls.push_back(std::move(e));
    }
    if (spec.contains("arguments")) {
      const json& mode = spec["arguments"];
      if (mode != "exact" && mode != "subset")
        fail("check 'tool_call': 'arguments' must be \"exact\" or \"subset\"");
      c.subset = mode == "subset";
    }
  } else {
    fail("unknown check type '{}'", type);
  }
  return c;
}

std::optional<double> last_number(std::string_view text) {
  static const std::regex number(
      R"([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+(?:[eE][-+]?\d+)?)");
  std::optional<double> last;
  const std::string s(text);
  for (auto it = std::sregex_iterator(s.begin(), s.end(), number); it != std::sregex_iterator();
       ++it) {
    std::string digits = it->str();
    std::erase(digits, ',');
    last = std::strtod(digits.c_str(), nullptr);
  }
  return last;
}

std::optional<char> extract_choice(std::string_view text, std::string_view choices) {
  const std::string set(choices);
  const std::string s(trim(text));
  // "answer is B", "Answer: (B)", "final answer: B." -> the last such statement.
  const std::regex stated("[Aa][Nn][Ss][Ww][Ee][Rr]\\s*(?:[Ii][Ss]|:)?\\s*:?\\s*\\(?([" + set +
                          "])\\)?(?![A-Za-z0-9])");
  std::optional<char> found;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), stated); it != std::sregex_iterator();
       ++it) {
    found = it->str(1)[0];
  }
  if (found) return found;
  // "B", "B.", "B)", "B: text", "(B) text" at the start of the answer.
  const std::regex leading("^\\(?([" + set + "])(?:$|[).:]|\\s*$)");
  std::smatch m;
  if (std::regex_search(s, m, leading)) return m.str(1)[0];
  // Otherwise one distinct "(X)" in the text.
  const std::regex paren("\\(([" + set + "])\\)");
  std::string letters;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), paren); it != std::sregex_iterator();
       ++it) {
    if (letters.find(it->str(1)[0]) == std::string::npos) letters += it->str(1)[0];
  }
  if (letters.size() == 1) return letters[0];
  return std::nullopt;
}

bool json_equal(const json& a, const json& b) {
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.items())
      if (!b.contains(key) || !json_equal(value, b[key])) return false;
    return true;
  }
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

bool json_subset(const json& expected, const json& got) {
  if (expected.is_object()) {
    if (!got.is_object()) return false;
    for (const auto& [key, value] : expected.items()) {
      if (!got.contains(key) || !json_subset(value, got[key])) return false;
    }
    return true;
  }
  return json_equal(expected, got);
}

CheckResult run_check(const Check& c, const Answer& answer) {
  const std::string_view content = answer.content;
  switch (c.kind) {
    case Check::Kind::kExact: {
      const std::string_view got = trim(content);
      const bool ok = c.ignore_case ? lower(got) == lower(c.value) : got == c.value;
      return result(ok, fmt::format("expected exactly \"{}\"", c.value));
    }
    case Check::Kind::kContains: {
      const bool ok = c.ignore_case ? lower(content).find(lower(c.value)) != std::string::npos
                                    : content.find(c.value) != std::string_view::npos;
      return result(ok, fmt::format("\"{}\" not found", c.value));
    }
    case Check::Kind::kRegex: {
      const std::string s(content);
      return result(std::regex_search(s, *c.regex), fmt::format("no match for /{}/", c.pattern));
    }
    case Check::Kind::kNumeric: {
      const std::optional<double> got = last_number(content);
      if (!got) return result(false, "no number in the answer");
      const double limit = c.relative ? c.tolerance * std::fabs(c.number) : c.tolerance;
      return result(std::fabs(*got - c.number) <= limit,
                    fmt::format("{} is not within {} of {}", *got, limit, c.number));
    }
    case Check::Kind::kChoice: {
      const std::optional<char> got = extract_choice(content, c.choices);
      if (!got) return result(false, "no single choice letter in the answer");
      return result(*got == c.value[0], fmt::format("chose {}, expected {}", *got, c.value));
    }
    case Check::Kind::kJsonSchema: {
      const json value = json::parse(unfence(content), nullptr, /*allow_exceptions=*/false);
      if (value.is_discarded()) return result(false, "the answer is not JSON");
      std::string why;
      const bool ok = validate_json(c.schema, value, &why);
      return result(ok, "schema: " + why);
    }
    case Check::Kind::kToolCall: {
      std::vector<std::pair<std::string, json>> got;
      if (answer.tool_calls.is_array()) {
        for (const json& call : answer.tool_calls) {
          const json& f = call.contains("function") ? call["function"] : call;
          std::string name = f.value("name", "");
          json args = f.contains("arguments") ? f["arguments"] : json::object();
          if (args.is_string()) {
            args = json::parse(args.get<std::string>(), nullptr, false);
            if (args.is_discarded()) args = nullptr;  // matches no expected object
          }
          got.emplace_back(std::move(name), std::move(args));
        }
      }
      if (got.size() != c.calls.size())
        return result(false, fmt::format("{} tool calls, expected {}", got.size(), c.calls.size()));
      std::vector<bool> used(got.size(), false);
      return result(assign(c.calls, got, c.subset, 0, used),
                    "the tool calls do not match the expected names and arguments");
    }
  }
  return result(false, "unknown check");
}

}  // namespace boltrt::eval

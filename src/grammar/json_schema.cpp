#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/regex.h"
#include "util/error.h"

namespace boltrt::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Shared rules. `ws` is bounded (one newline and up to 20 spaces or tabs) so a model cannot
// loop on whitespace; \u escapes exclude surrogates (strict JSON parsers reject lone ones);
// integers have at most 16 digits and exponents 2, so every number is finite in a double.
constexpr const char* kBaseRules = R"(ws ::= | " " | "\n" [ \t]{0,20}
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" json-hex4 )
json-hex4 ::= [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}
json-plain-char ::= [^"\\\x00-\x1F]
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ( "0" | [1-9] [0-9]{0,15} )
json-number ::= json-int ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?
json-bool ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-bool | json-null
json-member ::= json-string ws ":" ws json-value ws
json-object ::= "{" ws ( json-member ( "," ws json-member )* )? "}"
json-array ::= "[" ws ( json-value ws ( "," ws json-value ws )* )? "]"
)";

// The same rules for the raw dialect (JsonDialect::raw()): strings between delimiter tokens with
// raw characters (never '<', so no text can spell a special token), bare keys, no whitespace.
std::string raw_base_rules(const std::string& open, const std::string& close) {
  return "ws ::= \"\"\n"
         "json-char ::= [^<]\n"
         "json-plain-char ::= [^<]\n"
         "json-string ::= " +
         open + " json-char* " + close +
         "\n"
         "json-int ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
         "json-number ::= json-int ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?\n"
         "json-bool ::= \"true\" | \"false\"\n"
         "json-null ::= \"null\"\n"
         "json-value ::= json-object | json-array | json-string | json-number | json-bool | "
         "json-null\n"
         "json-key ::= [A-Za-z_] [A-Za-z0-9_]*\n"
         "json-member ::= json-key \":\" json-value\n"
         "json-object ::= \"{\" ( json-member ( \",\" json-member )* )? \"}\"\n"
         "json-array ::= \"[\" ( json-value ( \",\" json-value )* )? \"]\"\n";
}

constexpr int64_t kMaxCount = kMaxRepetition;
constexpr size_t kMaxIntDigits = 16;

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {"title",    "description", "default",  "examples",
                                          "$schema",  "$id",         "$comment", "deprecated",
                                          "readOnly", "writeOnly"};
  return k;
}
const std::set<std::string>& supported() {
  static const std::set<std::string> k = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "$ref",
                                          "$defs",
                                          "definitions",
                                          "items",
                                          "prefixItems",
                                          "minItems",
                                          "maxItems",
                                          "minLength",
                                          "maxLength",
                                          "pattern",
                                          "format",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum"};
  return k;
}

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

template <typename... Args>
[[noreturn]] void fail_at(const std::string& ptr, fmt::format_string<Args...> format,
                          Args&&... args) {
  throw Error(fmt::format("json schema: {}: {}", ptr.empty() ? std::string("(root)") : ptr,
                          fmt::format(format, std::forward<Args>(args)...)));
}

std::string dump(const Json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
}

// ---- exact decimals for numeric bounds -------------------------------------------------------

struct Decimal {
  bool negative = false;
  std::string int_digits = "0";  // no leading zeros
  std::string frac_digits;       // no trailing zeros
  bool zero() const { return int_digits == "0" && frac_digits.empty(); }
};

Decimal decimal_of(const Json& v, const std::string& ptr) {
  if (!v.is_number()) fail_at(ptr, "must be a number");
  std::string text;
  if (v.is_number_integer()) {
    text = dump(v);
  } else {
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail_at(ptr, "must be finite");
    text = fmt::format("{}", d);
  }
  Decimal out;
  size_t i = 0;
  if (text[i] == '-') {
    out.negative = true;
    ++i;
  }
  std::string mantissa;
  int64_t point = -1, exponent = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      mantissa += c;
    } else if (c == '.') {
      point = static_cast<int64_t>(mantissa.size());
    } else if (c == 'e' || c == 'E') {
      exponent = std::stoll(text.substr(i + 1));
      break;
    }
  }
  if (point < 0) point = static_cast<int64_t>(mantissa.size());
  point += exponent;
  if (point > 40 || point < -40) fail_at(ptr, "{} is out of the supported range", text);
  while (point < 0) {
    mantissa.insert(mantissa.begin(), '0');
    ++point;
  }
  while (static_cast<int64_t>(mantissa.size()) < point) mantissa += '0';
  std::string ip = mantissa.substr(0, static_cast<size_t>(point));
  std::string fp = mantissa.substr(static_cast<size_t>(point));
  ip.erase(0, std::min(ip.find_first_not_of('0'), ip.size()));
  if (ip.empty()) ip = "0";
  while (!fp.empty() && fp.back() == '0') fp.pop_back();
  out.int_digits = ip;
  out.frac_digits = fp;
  if (out.zero()) out.negative = false;
  return out;
}

// Compares |a| and |b|.
int compare_magnitude(const Decimal& a, const Decimal& b) {
  if (a.int_digits.size() != b.int_digits.size()) {
    return a.int_digits.size() < b.int_digits.size() ? -1 : 1;
  }
  if (a.int_digits != b.int_digits) return a.int_digits < b.int_digits ? -1 : 1;
  const size_t n = std::max(a.frac_digits.size(), b.frac_digits.size());
  std::string fa = a.frac_digits, fb = b.frac_digits;
  fa.resize(n, '0');
  fb.resize(n, '0');
  return fa == fb ? 0 : (fa < fb ? -1 : 1);
}
int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int m = compare_magnitude(a, b);
  return a.negative ? -m : m;
}

std::string increment(std::string d) {
  for (size_t i = d.size(); i-- > 0;) {
    if (d[i] == '9') {
      d[i] = '0';
    } else {
      ++d[i];
      return d;
    }
  }
  d.insert(d.begin(), '1');
  return d;
}
std::string decrement(std::string d) {  // d > 0
  for (size_t i = d.size(); i-- > 0;) {
    if (d[i] == '0') {
      d[i] = '9';
    } else {
      --d[i];
      break;
    }
  }
  d.erase(0, std::min(d.find_first_not_of('0'), d.size() - 1));
  return d;
}
bool digits_less_equal(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a <= b;
}

std::string digit_class(char lo, char hi) {
  return lo == hi ? fmt::format("\"{}\"", lo) : fmt::format("[{}-{}]", lo, hi);
}
std::string any_digits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : fmt::format("[0-9]{{{}}}", n);
}
std::string join_alts(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}
std::string seq(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

// Digit strings of length s.size() that are >= s (leading zeros allowed: an inner position).
std::string at_least(const std::string& s) {
  if (s.empty()) return "";
  if (s.find_first_not_of('0') == std::string::npos) return any_digits(s.size());
  std::vector<std::string> alts;
  alts.push_back(seq(fmt::format("\"{}\"", s[0]), at_least(s.substr(1))));
  if (s[0] < '9') {
    alts.push_back(seq(digit_class(static_cast<char>(s[0] + 1), '9'), any_digits(s.size() - 1)));
  }
  return join_alts(alts);
}
std::string at_most(const std::string& s) {
  if (s.empty()) return "";
  if (s.find_first_not_of('9') == std::string::npos) return any_digits(s.size());
  std::vector<std::string> alts;
  if (s[0] > '0') {
    alts.push_back(seq(digit_class('0', static_cast<char>(s[0] - 1)), any_digits(s.size() - 1)));
  }
  alts.push_back(seq(fmt::format("\"{}\"", s[0]), at_most(s.substr(1))));
  return join_alts(alts);
}
// Digit strings of length a.size() == b.size() in [a, b].
std::string between_same_length(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a[0] == b[0]) {
    return seq(fmt::format("\"{}\"", a[0]), between_same_length(a.substr(1), b.substr(1)));
  }
  const std::string ra = a.substr(1), rb = b.substr(1);
  if (ra.find_first_not_of('0') == std::string::npos &&
      rb.find_first_not_of('9') == std::string::npos) {
    return seq(digit_class(a[0], b[0]), any_digits(ra.size()));
  }
  std::vector<std::string> alts;
  alts.push_back(seq(fmt::format("\"{}\"", a[0]), at_least(ra)));
  if (a[0] + 1 <= b[0] - 1) {
    alts.push_back(seq(digit_class(static_cast<char>(a[0] + 1), static_cast<char>(b[0] - 1)),
                       any_digits(ra.size())));
  }
  alts.push_back(seq(fmt::format("\"{}\"", b[0]), at_most(rb)));
  return join_alts(alts);
}
// Canonical decimal integers (no leading zeros) in [a, b]; b empty: up to kMaxIntDigits digits.
std::string unsigned_range(const std::string& a, const std::string& b_in) {
  const std::string b = b_in.empty() ? std::string(kMaxIntDigits, '9') : b_in;
  std::vector<std::string> alts;
  for (size_t len = a.size(); len <= b.size(); ++len) {
    std::string lo = a;
    if (len != a.size()) {
      lo.assign(len, '0');
      if (len > 1) lo[0] = '1';
    }
    const std::string hi = len == b.size() ? b : std::string(len, '9');
    alts.push_back(between_same_length(lo, hi));
  }
  return join_alts(alts);
}

// ---- the converter ---------------------------------------------------------------------------

class Converter {
 public:
  Converter(const Json& root, const JsonDialect& dialect, std::string prefix)
      : root_(root), dialect_(dialect), prefix_(std::move(prefix)) {}

  std::string run() {
    const std::string root = visit(root_, "");
    return "root ::= " + root + "\n" + base_rules(dialect_) + rules_;
  }
  // The rules without the shared ones; returns the schema's rule name.
  std::string embed(std::string& rules) {
    const std::string root = visit(root_, "");
    rules += rules_;
    return root;
  }

  static std::string base_rules(const JsonDialect& d) {
    return d.raw_strings ? raw_base_rules(d.string_open, d.string_close) : kBaseRules;
  }

 private:
  std::string fresh(std::string_view hint) {
    std::string name = fmt::format("{}s{}", prefix_, counter_++);
    for (char c : hint) {
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
        if (name.size() < 40) name += static_cast<char>(c);
      }
    }
    return name;
  }
  std::string add_rule(const std::string& name, const std::string& body) {
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  static bool only_annotations_besides(const Json& s, std::initializer_list<const char*> keep) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (annotations().contains(k) || k == "$defs" || k == "definitions") continue;
      bool kept = false;
      for (const char* x : keep) kept = kept || k == x;
      if (!kept) return false;
    }
    return true;
  }

  void check_keywords(const Json& s, const std::string& ptr) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (!supported().contains(k) && !annotations().contains(k)) {
        fail_at(ptr + "/" + pointer_token(k), "unsupported keyword '{}'", k);
      }
    }
  }

  const Json& resolve(const std::string& ref, const std::string& ptr) {
    if (ref.empty() || ref[0] != '#') {
      fail_at(ptr, "only local references ('#...') are supported, not '{}'", ref);
    }
    try {
      const auto p = Json::json_pointer(ref.substr(1));
      if (!root_.contains(p)) fail_at(ptr, "reference '{}' points to nothing", ref);
      return root_.at(p);
    } catch (const nlohmann::json::exception&) {
      fail_at(ptr, "reference '{}' is not a valid JSON pointer", ref);
    }
  }

  std::string ref_rule(const Json& ref, const std::string& ptr) {
    if (!ref.is_string()) fail_at(ptr, "$ref must be a string");
    const std::string target = ref.get<std::string>();
    const auto it = refs_.find(target);
    if (it != refs_.end()) return it->second;
    const std::string name = fresh("ref" + target.substr(target.rfind('/') + 1));
    refs_[target] = name;
    const Json& schema = resolve(target, ptr);
    const std::string body = visit(schema, target.substr(1));
    return add_rule(name, body);
  }

  std::string visit(const Json& s, const std::string& ptr) {
    // Schemas nest through properties, items and combinators; recursion goes through $ref
    // rules, so a deeper nesting is a hostile input, not a schema.
    if (depth_ >= kMaxDepth) fail_at(ptr, "schemas nested deeper than {}", kMaxDepth);
    ++depth_;
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    return visit_inner(s, ptr);
  }

  std::string visit_inner(const Json& s, const std::string& ptr) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return "json-value";
      fail_at(ptr, "the schema false admits no value");
    }
    if (!s.is_object()) fail_at(ptr, "a schema must be an object or a boolean");
    check_keywords(s, ptr);
    if (s.contains("$ref")) {
      if (!only_annotations_besides(s, {"$ref"})) {
        fail_at(ptr + "/$ref", "$ref together with other keywords is not supported");
      }
      return ref_rule(s["$ref"], ptr + "/$ref");
    }
    if (s.contains("allOf")) return visit_merged(merge_all_of(s, ptr), ptr);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const std::string p = ptr + "/" + key;
      if (!only_annotations_besides(s, {key})) {
        fail_at(p, "{} together with other keywords is not supported", key);
      }
      const Json& branches = s[key];
      if (!branches.is_array() || branches.empty()) fail_at(p, "must be a non-empty array");
      if (std::string_view(key) == "oneOf") check_disjoint(branches, p);
      std::vector<std::string> alts;
      for (size_t i = 0; i < branches.size(); ++i) {
        alts.push_back(visit(branches[i], fmt::format("{}/{}", p, i)));
      }
      return add_rule(fresh(key), join_bare(alts));
    }
    if (s.contains("const")) return add_rule(fresh("const"), literal(s["const"]));
    if (s.contains("enum")) {
      const Json& values = s["enum"];
      if (!values.is_array() || values.empty()) fail_at(ptr + "/enum", "must be a non-empty array");
      std::vector<std::string> alts;
      for (const Json& v : values) alts.push_back(literal(v));
      return add_rule(fresh("enum"), join_bare(alts));
    }
    std::vector<std::string> types = types_of(s, ptr);
    if (types.empty()) return "json-value";
    std::vector<std::string> alts;
    for (const std::string& t : types) alts.push_back(visit_type(s, t, ptr));
    return alts.size() == 1 ? alts[0] : add_rule(fresh("types"), join_bare(alts));
  }

  std::string visit_merged(const Json& merged, const std::string& ptr) {
    return visit(merged, ptr);
  }

  // A JSON value as the dialect writes it.
  std::string literal(const Json& v) const {
    if (!dialect_.raw_strings) return gbnf_literal(dump(v));
    if (v.is_string()) {
      const std::string str = v.get<std::string>();
      if (str.find('<') != std::string::npos) {
        fail("json schema: the value {} holds '<', which raw strings cannot", dump(v));
      }
      return dialect_.string_open + " " + gbnf_literal(str) + " " + dialect_.string_close;
    }
    if (v.is_object()) {
      std::vector<std::string> keys;
      for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
      if (dialect_.sorted_keys) std::sort(keys.begin(), keys.end());
      std::string out = "\"{\"";
      for (size_t i = 0; i < keys.size(); ++i) {
        out += " " + gbnf_literal((i ? "," : "") + keys[i] + ":") + " " + literal(v[keys[i]]);
      }
      return out + " \"}\"";
    }
    if (v.is_array()) {
      std::string out = "\"[\"";
      for (size_t i = 0; i < v.size(); ++i) {
        out += std::string(i ? " \",\" " : " ") + literal(v[i]);
      }
      return out + " \"]\"";
    }
    return gbnf_literal(dump(v));
  }

  static std::string join_bare(const std::vector<std::string>& alts) {
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out;
  }

  std::vector<std::string> types_of(const Json& s, const std::string& ptr) {
    static const std::set<std::string> kTypes = {"null",   "boolean", "integer", "number",
                                                 "string", "array",   "object"};
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const Json& x : t) {
          if (!x.is_string()) fail_at(ptr + "/type", "must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail_at(ptr + "/type", "must be a string or a non-empty array of strings");
      }
      for (const std::string& x : types) {
        if (!kTypes.contains(x)) fail_at(ptr + "/type", "unknown type '{}'", x);
      }
      return types;
    }
    // No type: infer it from the keywords present (a keyword of one type does not constrain
    // values of another, but an unconstrained schema would let those through: llama.cpp infers
    // the same way).
    if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") ||
               s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") ||
               s.contains("format")) {
      types.push_back("string");
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      types.push_back("number");
    }
    return types;
  }

  std::string visit_type(const Json& s, const std::string& t, const std::string& ptr) {
    if (t == "null") return "json-null";
    if (t == "boolean") return "json-bool";
    if (t == "integer") return integer_rule(s, ptr);
    if (t == "number") return number_rule(s, ptr);
    if (t == "string") return string_rule(s, ptr);
    if (t == "array") return array_rule(s, ptr);
    return object_rule(s, ptr);
  }

  // ---- combinators ----
  Json merge_all_of(const Json& s, const std::string& ptr) {
    Json merged = Json::object();
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() != "allOf") merged[it.key()] = it.value();
    }
    const Json& branches = s["allOf"];
    const std::string p = ptr + "/allOf";
    if (!branches.is_array() || branches.empty()) fail_at(p, "must be a non-empty array");
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string bp = fmt::format("{}/{}", p, i);
      Json b = branches[i];
      for (int depth = 0; b.is_object() && b.contains("$ref"); ++depth) {
        if (depth > 32) fail_at(bp, "$ref chain too deep");
        b = resolve(b["$ref"].get<std::string>(), bp);
      }
      if (!b.is_object()) fail_at(bp, "allOf branches must be objects");
      check_keywords(b, bp);
      if (b.contains("allOf")) b = merge_all_of(b, bp);
      for (auto it = b.begin(); it != b.end(); ++it) {
        const std::string& k = it.key();
        if (annotations().contains(k)) continue;
        const std::string kp = bp + "/" + pointer_token(k);
        if (k == "properties") {
          Json& props = merged["properties"];
          if (props.is_null()) props = Json::object();
          for (auto pi = it.value().begin(); pi != it.value().end(); ++pi) {
            if (props.contains(pi.key()) && props[pi.key()] != pi.value()) {
              fail_at(kp + "/" + pointer_token(pi.key()),
                      "allOf branches declare property '{}' differently (cannot merge)", pi.key());
            }
            props[pi.key()] = pi.value();
          }
        } else if (k == "required") {
          Json& req = merged["required"];
          if (req.is_null()) req = Json::array();
          for (const Json& r : it.value()) {
            if (std::find(req.begin(), req.end(), r) == req.end()) req.push_back(r);
          }
        } else if (merged.contains(k) && merged[k] != it.value()) {
          fail_at(kp, "allOf branches disagree on '{}' (cannot merge)", k);
        } else {
          merged[k] = it.value();
        }
      }
    }
    return merged;
  }

  // The JSON kinds a schema's values can have (integer counts as number), or nullopt: any.
  std::optional<std::set<std::string>> kinds_of(const Json& s_in, const std::string& ptr) {
    Json s = s_in;
    for (int depth = 0; s.is_object() && s.contains("$ref"); ++depth) {
      if (depth > 32) return std::nullopt;
      s = resolve(s["$ref"].get<std::string>(), ptr);
    }
    if (!s.is_object()) return std::nullopt;
    auto kind = [](const Json& v) -> std::string {
      if (v.is_null()) return "null";
      if (v.is_boolean()) return "boolean";
      if (v.is_number()) return "number";
      if (v.is_string()) return "string";
      if (v.is_array()) return "array";
      return "object";
    };
    if (s.contains("const")) return std::set<std::string>{kind(s["const"])};
    if (s.contains("enum") && s["enum"].is_array()) {
      std::set<std::string> k;
      for (const Json& v : s["enum"]) k.insert(kind(v));
      return k;
    }
    if (s.contains("anyOf") || s.contains("oneOf") || s.contains("allOf")) return std::nullopt;
    const auto types = types_of(s, ptr);
    if (types.empty()) return std::nullopt;
    std::set<std::string> k;
    for (const std::string& t : types) k.insert(t == "integer" ? "number" : t);
    return k;
  }

  std::optional<std::vector<Json>> values_of(const Json& s) {
    if (!s.is_object()) return std::nullopt;
    if (s.contains("const")) return std::vector<Json>{s["const"]};
    if (s.contains("enum") && s["enum"].is_array()) {
      return std::vector<Json>(s["enum"].begin(), s["enum"].end());
    }
    return std::nullopt;
  }

  // oneOf is enforced as anyOf, which is exact only when no value can match two branches.
  void check_disjoint(const Json& branches, const std::string& ptr) {
    for (size_t i = 0; i < branches.size(); ++i) {
      for (size_t j = i + 1; j < branches.size(); ++j) {
        const auto ki = kinds_of(branches[i], ptr), kj = kinds_of(branches[j], ptr);
        bool disjoint = false;
        if (ki && kj) {
          disjoint = std::none_of(ki->begin(), ki->end(),
                                  [&](const std::string& k) { return kj->contains(k); });
        }
        const auto vi = values_of(branches[i]), vj = values_of(branches[j]);
        if (!disjoint && vi && vj) {
          disjoint = std::none_of(vi->begin(), vi->end(), [&](const Json& v) {
            return std::find(vj->begin(), vj->end(), v) != vj->end();
          });
        }
        if (!disjoint && branches[i].is_object() && branches[j].is_object() &&
            branches[i].contains("properties") && branches[j].contains("properties")) {
          // a discriminator: a property both require, with disjoint const/enum values
          const Json& pi = branches[i]["properties"];
          const Json& pj = branches[j]["properties"];
          const Json ri = branches[i].value("required", Json::array());
          const Json rj = branches[j].value("required", Json::array());
          for (auto it = pi.begin(); it != pi.end() && !disjoint; ++it) {
            const Json key = it.key();
            if (!pj.contains(it.key()) || std::find(ri.begin(), ri.end(), key) == ri.end() ||
                std::find(rj.begin(), rj.end(), key) == rj.end()) {
              continue;
            }
            const auto a = values_of(it.value()), b = values_of(pj[it.key()]);
            if (a && b) {
              disjoint = std::none_of(a->begin(), a->end(), [&](const Json& v) {
                return std::find(b->begin(), b->end(), v) != b->end();
              });
            }
          }
        }
        if (!disjoint) {
          fail_at(ptr,
                  "branches {} and {} may both match a value (oneOf needs provably "
                  "disjoint branches; use anyOf)",
                  i, j);
        }
      }
    }
  }

  // ---- numbers ----
  int64_t count_of(const Json& s, const char* key, const std::string& ptr, int64_t fallback) {
    if (!s.contains(key)) return fallback;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      fail_at(ptr + "/" + key, "must be a non-negative integer");
    }
    const int64_t n = v.get<int64_t>();
    if (n > kMaxCount)
      fail_at(ptr + "/" + key, "{} is over the supported limit of {}", n, kMaxCount);
    return n;
  }

  struct Bound {
    Decimal value;
    bool strict = false;
  };
  // The tighter of `inclusive_key` and `exclusive_key` (lower: the larger value).
  std::optional<Bound> bound(const Json& s, const char* inclusive_key, const char* exclusive_key,
                             bool lower, const std::string& ptr) {
    std::optional<Bound> b;
    if (s.contains(inclusive_key)) {
      b = Bound{decimal_of(s[inclusive_key], ptr + "/" + inclusive_key), false};
    }
    if (s.contains(exclusive_key)) {
      const Json& v = s[exclusive_key];
      if (v.is_boolean()) {
        fail_at(ptr + "/" + exclusive_key, "the boolean form (draft 4) is not supported");
      }
      Bound e{decimal_of(v, ptr + "/" + exclusive_key), true};
      if (!b) {
        b = e;
      } else {
        const int c = compare(e.value, b->value);
        if ((lower && c >= 0) || (!lower && c <= 0)) b = e;
      }
    }
    return b;
  }

  std::string integer_rule(const Json& s, const std::string& ptr) {
    auto lo = bound(s, "minimum", "exclusiveMinimum", true, ptr);
    auto hi = bound(s, "maximum", "exclusiveMaximum", false, ptr);
    if (!lo && !hi) return "json-int";
    // Integer bounds: lo = the least integer allowed, hi = the greatest (as signed digit
    // strings).
    auto to_int_lower = [](const Bound& b) {
      Decimal d = b.value;
      // ceil for positive with a fraction, trunc for negative with a fraction
      const bool has_frac = !d.frac_digits.empty();
      d.frac_digits.clear();
      if (!d.negative && has_frac) d.int_digits = increment(d.int_digits);
      if (d.negative && !has_frac && b.strict) {
        d.int_digits = decrement(d.int_digits);
      } else if (!d.negative && !has_frac && b.strict) {
        d.int_digits = increment(d.int_digits);
      }
      if (d.int_digits == "0") d.negative = false;
      return d;
    };
    auto to_int_upper = [](const Bound& b) {
      Decimal d = b.value;
      const bool has_frac = !d.frac_digits.empty();
      d.frac_digits.clear();
      if (d.negative && has_frac) d.int_digits = increment(d.int_digits);
      if (!d.negative && !has_frac && b.strict) {
        if (d.int_digits == "0") {
          d.negative = true;
          d.int_digits = "1";
        } else {
          d.int_digits = decrement(d.int_digits);
        }
      } else if (d.negative && !has_frac && b.strict) {
        d.int_digits = increment(d.int_digits);
      }
      if (d.int_digits == "0") d.negative = false;
      return d;
    };
    std::optional<Decimal> l, h;
    if (lo) l = to_int_lower(*lo);
    if (hi) h = to_int_upper(*hi);
    for (const auto* d : {&l, &h}) {
      if (*d && (*d)->int_digits.size() > kMaxIntDigits) {
        fail_at(ptr, "integer bounds beyond {} digits are not supported", kMaxIntDigits);
      }
    }
    if (l && h && compare(*l, *h) > 0) fail_at(ptr, "no integer lies within the bounds");
    std::vector<std::string> alts;
    // non-negative part: [max(l, 0), h]
    if (!h || !h->negative) {
      const std::string a = (l && !l->negative) ? l->int_digits : "0";
      alts.push_back(unsigned_range(a, h ? h->int_digits : ""));
    }
    // negative part: -[max(1, -h), -l]
    if (!l || l->negative) {
      const std::string a = (h && h->negative) ? h->int_digits : "1";
      const std::string b = l ? l->int_digits : "";
      alts.push_back("\"-\" " + unsigned_range(a, b));
    }
    return add_rule(fresh("int"), join_bare(alts));
  }

  // The fraction part (empty, or "." and digits) of a number whose integer part is fixed, so
  // that 0.F lies above `lower` (digits, strict?) and below `upper`. nullopt: impossible.
  std::optional<std::string> fraction(std::optional<std::string> lower, bool lower_strict,
                                      std::optional<std::string> upper, bool upper_strict) {
    if (lower && lower->empty() && !lower_strict) lower.reset();
    const std::string base = fresh("frac");
    // state (i, lo_on, hi_on), i capped at the longer bound: rules named base-i-lo-hi
    const size_t len_lo = lower ? lower->size() : 0, len_hi = upper ? upper->size() : 0;
    // Fractions are capped a few digits past the bounds' own: enough for every value in range
    // to be written, few enough that a double parses each one to a value on the same side of
    // the bound as the decimal (integer parts of up to 7 digits).
    const size_t max_frac = std::max<size_t>(8, std::max(len_lo, len_hi) + 2);
    std::map<std::tuple<size_t, bool, bool>, std::optional<std::string>> memo;
    std::function<std::optional<std::string>(size_t, bool, bool)> state;
    auto digit_at = [](const std::optional<std::string>& s, size_t i) {
      return (s && i < s->size()) ? (*s)[i] : '0';
    };
    auto end_ok = [&](size_t i, bool lo_on, bool hi_on) {
      bool ok = true;
      if (lo_on) {
        const bool rest_zero =
            lower->find_first_not_of('0', std::min(i, len_lo)) == std::string::npos;
        ok = ok && rest_zero && !lower_strict;
      }
      if (hi_on && upper_strict) {
        const bool rest_zero =
            upper->find_first_not_of('0', std::min(i, len_hi)) == std::string::npos;
        ok = ok && !rest_zero;
      }
      return ok;
    };
    // alternatives of one more digit from state (i, lo_on, hi_on)
    std::function<std::vector<std::string>(size_t, bool, bool)> digit_alts;
    digit_alts = [&](size_t i, bool lo_on, bool hi_on) {
      std::vector<std::string> alts;
      const char g = digit_at(lower, i), h = digit_at(upper, i);
      for (char d = '0'; d <= '9';) {
        // group digits with the same outcome
        auto outcome = [&](char x) {
          if (lo_on && x < g) return -1;
          if (hi_on && x > h) return -1;
          return (lo_on && x == g ? 1 : 0) | (hi_on && x == h ? 2 : 0);
        };
        const int o = outcome(d);
        char e = d;
        while (e < '9' && outcome(static_cast<char>(e + 1)) == o) ++e;
        if (o >= 0) {
          const auto next = state(i + 1, (o & 1) != 0, (o & 2) != 0);
          if (next) alts.push_back(seq(digit_class(d, e), *next));
        }
        d = static_cast<char>(e + 1);
      }
      return alts;
    };
    state = [&](size_t i, bool lo_on, bool hi_on) -> std::optional<std::string> {
      // past the end of a non-strict lower bound the rest is free
      if (lo_on && i >= len_lo && !lower_strict) lo_on = false;
      // past the end of the upper bound only zeros keep the value at the bound: possible only
      // when it is inclusive (and a lower bound still in force needs a non-zero digit)
      if (hi_on && i >= len_hi) {
        if (upper_strict || lo_on) return std::nullopt;
        return i >= max_frac ? std::string("\"\"") : fmt::format("\"0\"{{0,{}}}", max_frac - i);
      }
      if (i >= max_frac) {
        if (end_ok(i, lo_on, hi_on)) return std::string("\"\"");
        return std::nullopt;
      }
      if (!lo_on && !hi_on) return fmt::format("[0-9]{{0,{}}}", max_frac - i);
      const size_t ic = i;
      const auto k = std::make_tuple(ic, lo_on, hi_on);
      const auto it = memo.find(k);
      if (it != memo.end()) return it->second;
      const std::string name = fmt::format("{}-{}-{}{}", base, ic, lo_on ? 1 : 0, hi_on ? 1 : 0);
      memo[k] = name;
      std::vector<std::string> alts = digit_alts(ic, lo_on, hi_on);
      if (end_ok(ic, lo_on, hi_on)) alts.push_back("\"\"");
      if (alts.empty()) {
        memo[k] = std::nullopt;
        return std::nullopt;
      }
      add_rule(name, join_bare(alts));
      return name;
    };
    std::vector<std::string> alts;
    if (end_ok(0, lower.has_value(), upper.has_value())) alts.push_back("\"\"");
    const std::vector<std::string> first = digit_alts(0, lower.has_value(), upper.has_value());
    if (!first.empty()) alts.push_back("\".\" " + join_alts(first));
    if (alts.empty()) return std::nullopt;
    return join_alts(alts);
  }

  // Non-negative decimals (no exponent) within bounds; nullopt when none.
  std::optional<std::string> nonnegative(const std::optional<Bound>& lo,
                                         const std::optional<Bound>& hi) {
    const std::string a = lo ? lo->value.int_digits : "0";
    const std::optional<std::string> fa =
        lo ? std::optional<std::string>(lo->value.frac_digits) : std::nullopt;
    const bool as = lo && lo->strict;
    std::vector<std::string> alts;
    if (hi && hi->value.int_digits == a) {
      const auto f = fraction(fa, as, hi->value.frac_digits, hi->strict);
      if (f) alts.push_back(seq(fmt::format("\"{}\"", a), *f));
    } else {
      if (hi && !digits_less_equal(a, hi->value.int_digits)) return std::nullopt;
      const auto f = fraction(fa, as, std::nullopt, false);
      if (f) alts.push_back(seq(fmt::format("\"{}\"", a), *f));
      const std::string a1 = increment(a);
      const std::string any_frac = "( \".\" [0-9]{1,8} )?";
      if (!hi) {
        if (a1.size() <= kMaxIntDigits) alts.push_back(unsigned_range(a1, "") + " " + any_frac);
      } else {
        const std::string b = hi->value.int_digits;
        if (b != "0") {
          const std::string b1 = decrement(b);
          if (digits_less_equal(a1, b1)) alts.push_back(unsigned_range(a1, b1) + " " + any_frac);
        }
        const auto fb = fraction(std::nullopt, false, hi->value.frac_digits, hi->strict);
        if (fb) alts.push_back(seq(fmt::format("\"{}\"", b), *fb));
      }
    }
    if (alts.empty()) return std::nullopt;
    return join_alts(alts);
  }

  std::string number_rule(const Json& s, const std::string& ptr) {
    auto lo = bound(s, "minimum", "exclusiveMinimum", true, ptr);
    auto hi = bound(s, "maximum", "exclusiveMaximum", false, ptr);
    if (!lo && !hi) return "json-number";
    for (const auto* b : {&lo, &hi}) {
      if (*b && (*b)->value.int_digits.size() > kMaxIntDigits) {
        fail_at(ptr, "number bounds beyond {} integer digits are not supported", kMaxIntDigits);
      }
    }
    const Decimal zero;
    std::vector<std::string> alts;
    // x >= 0 part
    const bool nonneg_possible = !hi || (!hi->value.negative && !(hi->value.zero() && hi->strict));
    if (nonneg_possible) {
      std::optional<Bound> l;
      if (lo && !lo->value.negative) l = lo;  // a negative lower bound does not bind here
      const auto e = nonnegative(l, hi);
      if (e) alts.push_back(*e);
    }
    // x < 0 part: "-" y with y in (max(-hi, 0), -lo]
    if (!lo || (lo->value.negative)) {
      std::optional<Bound> ylo, yhi;
      if (hi && hi->value.negative) {
        Bound b = *hi;
        b.value.negative = false;
        ylo = b;
      } else {
        ylo = Bound{zero, true};
      }
      if (lo) {
        Bound b = *lo;
        b.value.negative = false;
        yhi = b;
      }
      const auto e = nonnegative(ylo, yhi);
      if (e) alts.push_back("\"-\" " + *e);
    }
    if (alts.empty()) fail_at(ptr, "no number lies within the bounds");
    return add_rule(fresh("num"), join_bare(alts));
  }

  // ---- strings ----
  static std::string format_regex(const std::string& format) {
    const std::string year = "([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])";
    const std::string leap =
        "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)";
    const std::string date = "(" + year + "-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|" + year +
                             "-(0[469]|11)-(0[1-9]|[12][0-9]|30)|" + year +
                             "-02-(0[1-9]|1[0-9]|2[0-8])|" + leap + "-02-29)";
    const std::string time =
        "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5]"
        "[0-9])";
    if (format == "date") return "^" + date + "$";
    if (format == "time") return "^" + time + "$";
    if (format == "date-time") return "^" + date + "T" + time + "$";
    if (format == "uuid") {
      return "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
    }
    if (format == "email") {
      const std::string atom = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
      const std::string label = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
      return "^" + atom + "(\\." + atom + ")*@" + label + "(\\." + label + ")+$";
    }
    if (format == "ipv4") {
      const std::string octet = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
      return "^(" + octet + "\\.){3}" + octet + "$";
    }
    return "";
  }

  std::string string_rule(const Json& s, const std::string& ptr) {
    const int64_t min = count_of(s, "minLength", ptr, 0);
    const int64_t max = count_of(s, "maxLength", ptr, -1);
    if (max >= 0 && min > max) fail_at(ptr, "minLength {} is above maxLength {}", min, max);
    std::string regex, where;
    if (s.contains("format")) {
      if (!s["format"].is_string()) fail_at(ptr + "/format", "must be a string");
      const std::string f = s["format"].get<std::string>();
      regex = format_regex(f);
      where = ptr + "/format";
      if (regex.empty()) fail_at(where, "unsupported format '{}'", f);
    }
    if (s.contains("pattern")) {
      if (!regex.empty()) {
        fail_at(ptr + "/pattern", "pattern together with format is not supported");
      }
      if (!s["pattern"].is_string()) fail_at(ptr + "/pattern", "must be a string");
      regex = s["pattern"].get<std::string>();
      where = ptr + "/pattern";
    }
    if (!regex.empty()) {
      std::string body;
      try {
        body = regex_body_rules(regex, min, max, fresh("re"), rules_, dialect_.raw_strings);
      } catch (const Error& e) {
        fail_at(where, "{}", e.what());
      }
      return add_rule(fresh("str"),
                      dialect_.string_open + " " + body + " " + dialect_.string_close);
    }
    if (min == 0 && max < 0) return "json-string";
    const std::string count =
        max < 0 ? fmt::format("{{{},}}", min) : fmt::format("{{{},{}}}", min, max);
    return add_rule(fresh("str"),
                    dialect_.string_open + " json-char" + count + " " + dialect_.string_close);
  }

  // ---- arrays ----
  std::string array_rule(const Json& s, const std::string& ptr) {
    const int64_t min = count_of(s, "minItems", ptr, 0);
    const int64_t max = count_of(s, "maxItems", ptr, -1);
    if (max >= 0 && min > max) fail_at(ptr, "minItems {} is above maxItems {}", min, max);
    std::vector<std::string> prefix;
    std::string rest = "json-value";  // items after the prefix ("" = none allowed)
    if (s.contains("prefixItems")) {
      const Json& p = s["prefixItems"];
      if (!p.is_array()) fail_at(ptr + "/prefixItems", "must be an array");
      for (size_t i = 0; i < p.size(); ++i) {
        prefix.push_back(visit(p[i], fmt::format("{}/prefixItems/{}", ptr, i)));
      }
    }
    if (s.contains("items")) {
      const Json& it = s["items"];
      if (it.is_array()) {
        if (!prefix.empty()) fail_at(ptr + "/items", "items as an array together with prefixItems");
        for (size_t i = 0; i < it.size(); ++i) {
          prefix.push_back(visit(it[i], fmt::format("{}/items/{}", ptr, i)));
        }
        rest = "";  // draft-7 tuples in llama.cpp's reading: exactly these items
      } else if (it.is_boolean() && !it.get<bool>()) {
        rest = "";
      } else {
        rest = visit(it, ptr + "/items");
      }
    }
    const int64_t k = static_cast<int64_t>(prefix.size());
    if (rest.empty() && min > k) {
      fail_at(ptr, "minItems {} but only {} items are allowed", min, k);
    }
    const std::string base = fresh("arr");
    // T_i: what follows after i items (i <= k); the tail after the prefix is a repetition.
    std::string tail;
    const int64_t rest_min = std::max<int64_t>(0, min - k);
    const int64_t rest_max = max < 0 ? -1 : std::max<int64_t>(0, max - k);
    if (rest.empty() || rest_max == 0) {
      tail = "";
    } else if (k == 0) {
      const std::string more =
          rest_max < 0 ? fmt::format("{{{},}}", std::max<int64_t>(0, rest_min - 1))
                       : fmt::format("{{{},{}}}", std::max<int64_t>(0, rest_min - 1), rest_max - 1);
      const std::string body = rest + " ws ( \",\" ws " + rest + " ws )" + more;
      tail = rest_min == 0 ? "( " + body + " )?" : body;
    } else {
      const std::string count = rest_max < 0 ? fmt::format("{{{},}}", rest_min)
                                             : fmt::format("{{{},{}}}", rest_min, rest_max);
      tail = "( \",\" ws " + rest + " ws )" + count;
    }
    const int64_t limit = max < 0 ? k : std::min(k, max);
    std::string next = (tail.empty() || limit < k) ? "\"\"" : tail;
    for (int64_t i = limit; i-- > 0;) {
      // after i items: item i (with its comma) or, when i >= minItems, the end
      const std::string sep = i == 0 ? "" : "\",\" ws ";
      const std::string item = sep + prefix[static_cast<size_t>(i)] + " ws " + next;
      next = add_rule(fmt::format("{}-{}", base, i), i >= min ? item + " | \"\"" : item);
    }
    return add_rule(base, "\"[\" ws " + next + " \"]\"");
  }

  // ---- objects ----
  // A JSON string (plain characters, no escapes) that is none of `names`.
  std::string key_not_in(const std::vector<std::string>& names) {
    struct TrieNode {
      std::map<uint32_t, size_t> children;
      bool terminal = false;
    };
    std::vector<TrieNode> trie(1);
    for (const std::string& n : names) {
      size_t at = 0, pos = 0;
      bool plain = true;
      std::vector<uint32_t> cps;
      while (pos < n.size()) {
        const int32_t cp = decode_utf8(n, &pos);
        if (cp < 0x20 || cp == '"' || cp == '\\') {
          plain = false;  // such a name is written with escapes, which extra keys never use
          break;
        }
        cps.push_back(static_cast<uint32_t>(cp));
      }
      if (!plain) continue;
      for (uint32_t cp : cps) {
        auto it = trie[at].children.find(cp);
        if (it == trie[at].children.end()) {
          trie.emplace_back();
          it = trie[at].children.emplace(cp, trie.size() - 1).first;
        }
        at = it->second;
      }
      trie[at].terminal = true;
    }
    const std::string base = fresh("key");
    for (size_t i = trie.size(); i-- > 0;) {
      std::vector<std::string> alts;
      if (!trie[i].terminal) alts.push_back("\"\\\"\"");
      std::string cls = "[^\"\\\\\\x00-\\x1F";
      for (auto& [cp, child] : trie[i].children) {
        cls += fmt::format("\\U{:08X}", cp);
        alts.push_back(fmt::format("[\\U{:08X}] {}-{}", cp, base, child));
      }
      alts.push_back(cls + "] json-plain-char* \"\\\"\"");
      add_rule(fmt::format("{}-{}", base, i), join_bare(alts));
    }
    return add_rule(base, "\"\\\"\" " + base + "-0");
  }

  std::string object_rule(const Json& s, const std::string& ptr) {
    Json props = Json::object();
    if (s.contains("properties")) {
      props = s["properties"];
      if (!props.is_object()) fail_at(ptr + "/properties", "must be an object");
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      const Json& r = s["required"];
      if (!r.is_array()) fail_at(ptr + "/required", "must be an array of strings");
      for (const Json& x : r) {
        if (!x.is_string()) fail_at(ptr + "/required", "must be an array of strings");
        if (!props.contains(x.get<std::string>())) {
          fail_at(ptr + "/required", "required property '{}' is not declared in properties",
                  x.get<std::string>());
        }
        required.insert(x.get<std::string>());
      }
    }
    std::string extra_value;  // "" : no other keys
    if (s.contains("additionalProperties")) {
      const Json& ap = s["additionalProperties"];
      if (ap.is_boolean()) {
        extra_value = ap.get<bool>() ? "json-value" : "";
      } else {
        extra_value = visit(ap, ptr + "/additionalProperties");
      }
      if (!extra_value.empty() && dialect_.bare_keys && !props.empty()) {
        fail_at(ptr + "/additionalProperties",
                "other keys next to properties are not supported "
                "with bare keys");
      }
    } else if (!s.contains("properties")) {
      return "json-object";  // {"type": "object"} alone: any object
    }
    std::vector<std::string> kvs, names;
    std::vector<bool> optional;
    std::vector<std::string> keys;
    for (auto it = props.begin(); it != props.end(); ++it) keys.push_back(it.key());
    if (dialect_.sorted_keys) std::sort(keys.begin(), keys.end());
    for (const std::string& key : keys) {
      const std::string value = visit(props[key], ptr + "/properties/" + pointer_token(key));
      if (dialect_.bare_keys) {
        kvs.push_back(gbnf_literal(key + ":") + " " + value);
      } else {
        kvs.push_back(gbnf_literal(dump(Json(key))) + " ws \":\" ws " + value + " ws");
      }
      names.push_back(key);
      optional.push_back(!required.contains(key));
    }
    const std::string base = fresh("obj");
    const size_t n = kvs.size();
    // S_i: members from property i on, none written yet; R_i: some written (comma first).
    std::string s_next, r_next;
    if (!extra_value.empty() && props.empty() && dialect_.bare_keys) {
      const std::string extra = add_rule(base + "-x", "json-key \":\" " + extra_value);
      r_next = add_rule(base + "-r" + std::to_string(n), "( \",\" " + extra + " )*");
      s_next = add_rule(base + "-s" + std::to_string(n), extra + " " + r_next + " | \"\"");
    } else if (!extra_value.empty()) {
      const std::string key = key_not_in(names);
      const std::string extra = add_rule(base + "-x", key + " ws \":\" ws " + extra_value + " ws");
      r_next = add_rule(base + "-r" + std::to_string(n), "( \",\" ws " + extra + " )*");
      s_next = add_rule(base + "-s" + std::to_string(n), extra + " " + r_next + " | \"\"");
    } else {
      r_next = "\"\"";
      s_next = "\"\"";
    }
    for (size_t i = n; i-- > 0;) {
      const std::string r_body =
          "\",\" ws " + kvs[i] + " " + r_next + (optional[i] ? " | " + r_next : "");
      const std::string s_body = kvs[i] + " " + r_next + (optional[i] ? " | " + s_next : "");
      const std::string r_name = add_rule(fmt::format("{}-r{}", base, i), r_body);
      s_next = add_rule(fmt::format("{}-s{}", base, i), s_body);
      r_next = r_name;
    }
    return add_rule(base, "\"{\" ws " + s_next + " \"}\"");
  }

  const Json& root_;
  JsonDialect dialect_;
  std::string prefix_;
  static constexpr int kMaxDepth = 128;
  int depth_ = 0;
  std::string rules_;
  std::map<std::string, std::string> refs_;
  int counter_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  return Converter(schema, JsonDialect(), "").run();
}

std::string json_schema_rules(const nlohmann::ordered_json& schema, const JsonDialect& dialect,
                              const std::string& prefix, std::string& rules) {
  return Converter(schema, dialect, prefix).embed(rules);
}

std::string json_base_rules(const JsonDialect& dialect) {
  return Converter::base_rules(dialect);
}

std::string json_schema_to_gbnf(std::string_view schema_json) {
  Json schema;
  try {
    schema = Json::parse(schema_json);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    const size_t colon = what.find("] ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    fail("json schema: not valid JSON: {}", what);
  }
  return json_schema_to_gbnf(schema);
}

std::string json_object_gbnf() {
  return std::string("root ::= json-object\n") + kBaseRules;
}

}  // namespace boltrt::grammar

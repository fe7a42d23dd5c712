#include "support/json_schema_validator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <regex>
#include <vector>

namespace boltrt::test {
namespace {

using Json = nlohmann::ordered_json;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool leap(int y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}
bool valid_date(const std::string& s) {
  int y, m, d;
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d", &y, &m, &d) != 3) return false;
  for (size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 8u, 9u}) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y < 1 || m < 1 || m > 12 || d < 1) return false;
  const int days = kDays[m - 1] + (m == 2 && leap(y) ? 1 : 0);
  return d <= days;
}
bool valid_time(const std::string& s) {
  static const std::regex re(R"(^(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-](\d\d):(\d\d))$)");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  if (std::stoi(m[1]) > 23 || std::stoi(m[2]) > 59 || std::stoi(m[3]) > 59) return false;
  if (m[6].matched && (std::stoi(m[6]) > 23 || std::stoi(m[7]) > 59)) return false;
  return true;
}
bool valid_format(const std::string& f, const std::string& s) {
  if (f == "date") return valid_date(s);
  if (f == "time") return valid_time(s);
  if (f == "date-time") {
    const size_t t = s.find('T');
    return t == 10 && valid_date(s.substr(0, 10)) && valid_time(s.substr(11));
  }
  if (f == "uuid") {
    return std::regex_match(s, std::regex("[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"));
  }
  if (f == "email") {
    const size_t at = s.find('@');
    if (at == std::string::npos || at == 0 || s.find('@', at + 1) != std::string::npos) {
      return false;
    }
    const std::string local = s.substr(0, at), domain = s.substr(at + 1);
    if (local.front() == '.' || local.back() == '.' || local.find("..") != std::string::npos) {
      return false;
    }
    return std::regex_match(
        domain,
        std::regex(
            R"(([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)"));
  }
  if (f == "ipv4") {
    std::smatch m;
    if (!std::regex_match(s, m, std::regex(R"((\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3}))"))) {
      return false;
    }
    for (int i = 1; i <= 4; ++i) {
      const std::string o = m[i];
      if ((o.size() > 1 && o[0] == '0') || std::stoi(o) > 255) return false;
    }
    return true;
  }
  return false;
}

bool fail_why(std::string* why, const std::string& what) {
  *why = what;
  return false;
}

bool validate(const Json& s, const Json& v, const Json& root, std::string* why) {
  if (s.is_boolean()) return s.get<bool>() || fail_why(why, "false schema");
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    return validate(root.at(Json::json_pointer(ref.substr(1))), v, root, why);
  }
  if (s.contains("allOf")) {
    for (const Json& b : s["allOf"]) {
      if (!validate(b, v, root, why)) return false;
    }
  }
  if (s.contains("anyOf")) {
    bool any = false;
    for (const Json& b : s["anyOf"]) {
      std::string w;
      any = any || validate(b, v, root, &w);
    }
    if (!any) return fail_why(why, "no anyOf branch");
  }
  if (s.contains("oneOf")) {
    int n = 0;
    for (const Json& b : s["oneOf"]) {
      std::string w;
      n += validate(b, v, root, &w);
    }
    if (n != 1) return fail_why(why, fmt::format("{} oneOf branches match", n));
  }
  if (s.contains("const") && s["const"] != v) return fail_why(why, "const");
  if (s.contains("enum")) {
    const Json& e = s["enum"];
    if (std::find(e.begin(), e.end(), v) == e.end()) return fail_why(why, "enum");
  }
  if (s.contains("type")) {
    std::vector<std::string> types;
    if (s["type"].is_string()) {
      types.push_back(s["type"]);
    } else {
      for (const Json& t : s["type"]) types.push_back(t);
    }
    bool ok = false;
    for (const std::string& t : types) {
      ok = ok || (t == "null" && v.is_null()) || (t == "boolean" && v.is_boolean()) ||
           (t == "string" && v.is_string()) || (t == "array" && v.is_array()) ||
           (t == "object" && v.is_object()) || (t == "number" && v.is_number()) ||
           (t == "integer" &&
            (v.is_number_integer() ||
             (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())));
    }
    if (!ok) return fail_why(why, "type");
  }
  if (v.is_number()) {
    const long double x = v.is_number_float() ? static_cast<long double>(v.get<double>())
                                              : static_cast<long double>(v.get<int64_t>());
    auto num = [&](const char* k) { return static_cast<long double>(s[k].get<double>()); };
    if (s.contains("minimum") && !(x >= num("minimum"))) return fail_why(why, "minimum");
    if (s.contains("maximum") && !(x <= num("maximum"))) return fail_why(why, "maximum");
    if (s.contains("exclusiveMinimum") && !(x > num("exclusiveMinimum"))) {
      return fail_why(why, "exclusiveMinimum");
    }
    if (s.contains("exclusiveMaximum") && !(x < num("exclusiveMaximum"))) {
      return fail_why(why, "exclusiveMaximum");
    }
  }
  if (v.is_string()) {
    const std::string str = v.get<std::string>();
    const size_t n = code_points(str);
    if (s.contains("minLength") && n < s["minLength"].get<size_t>())
      return fail_why(why, "minLength");
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>())
      return fail_why(why, "maxLength");
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>(),
                                                                    std::regex::ECMAScript))) {
      return fail_why(why, "pattern");
    }
    if (s.contains("format") && !valid_format(s["format"], str)) return fail_why(why, "format");
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>())
      return fail_why(why, "minItems");
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>())
      return fail_why(why, "maxItems");
    size_t k = 0;
    if (s.contains("prefixItems")) {
      const Json& p = s["prefixItems"];
      for (; k < p.size() && k < v.size(); ++k) {
        if (!validate(p[k], v[k], root, why)) return false;
      }
    }
    if (s.contains("items")) {
      for (size_t i = k; i < v.size(); ++i) {
        if (!validate(s["items"], v[i], root, why)) return false;
      }
    }
  }
  if (v.is_object()) {
    if (s.contains("required")) {
      for (const Json& r : s["required"]) {
        if (!v.contains(r.get<std::string>())) return fail_why(why, "required " + r.dump());
      }
    }
    const Json props = s.value("properties", Json::object());
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (props.contains(it.key())) {
        if (!validate(props[it.key()], it.value(), root, why)) return false;
      } else if (s.contains("additionalProperties")) {
        if (!validate(s["additionalProperties"], it.value(), root, why)) return false;
      }
    }
  }
  return true;
}

}  // namespace

bool validate_json(const Json& schema, const Json& value, std::string* why) {
  return validate(schema, value, schema, why);
}

}  // namespace boltrt::test

#include "eval/json_validate.h"

#include <fmt/format.h>

#include <cmath>
#include <regex>

#include "eval/check.h"

namespace boltrt::eval {
namespace {

using json = nlohmann::ordered_json;

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  bool check(const json& schema, const json& value, const std::string& at, int depth) {
    if (depth > 64) return fail(at, "$ref nesting deeper than 64");
    if (schema.is_boolean()) return schema.get<bool>() || fail(at, "schema false");
    if (!schema.is_object()) return true;
    if (schema.contains("$ref") && schema["$ref"].is_string()) {
      const json* target = resolve(schema["$ref"].get<std::string>());
      if (!target) return fail(at, "$ref " + schema["$ref"].get<std::string>() + " not found");
      if (!check(*target, value, at, depth + 1)) return false;
    }
    if (schema.contains("type") && !type_ok(schema["type"], value))
      return fail(at, "type " + schema["type"].dump());
    if (schema.contains("const") && !json_equal(schema["const"], value)) return fail(at, "const");
    if (schema.contains("enum") && schema["enum"].is_array()) {
      bool found = false;
      for (const json& e : schema["enum"]) found = found || json_equal(e, value);
      if (!found) return fail(at, "enum");
    }
    if (schema.contains("allOf") && schema["allOf"].is_array())
      for (const json& s : schema["allOf"])
        if (!check(s, value, at, depth + 1)) return false;
    if (schema.contains("anyOf") && schema["anyOf"].is_array()) {
      bool any = false;
      for (const json& s : schema["anyOf"]) any = any || quiet(s, value, at, depth);
      if (!any) return fail(at, "anyOf");
    }
    if (schema.contains("oneOf") && schema["oneOf"].is_array()) {
      int n = 0;
      for (const json& s : schema["oneOf"]) n += quiet(s, value, at, depth) ? 1 : 0;
      if (n != 1) return fail(at, fmt::format("oneOf ({} branches match)", n));
    }
    if (schema.contains("not") && quiet(schema["not"], value, at, depth)) return fail(at, "not");
    if (value.is_number()) return number(schema, value, at);
    if (value.is_string()) return string(schema, value.get<std::string>(), at);
    if (value.is_array()) return array(schema, value, at, depth);
    if (value.is_object()) return object(schema, value, at, depth);
    return true;
  }

  std::string why;

 private:
  bool fail(const std::string& at, const std::string& what) {
    if (why.empty()) why = (at.empty() ? "/" : at) + ": " + what;
    return false;
  }

  // Validates without recording a reason (a failing anyOf branch is not the answer's fault).
  bool quiet(const json& schema, const json& value, const std::string& at, int depth) {
    const std::string saved = why;
    const bool ok = check(schema, value, at, depth + 1);
    why = saved;
    return ok;
  }

  const json* resolve(const std::string& ref) const {
    if (ref.empty() || ref[0] != '#') return nullptr;
    if (ref == "#") return &root_;
    try {
      const json::json_pointer pointer(ref.substr(1));
      if (!root_.contains(pointer)) return nullptr;
      return &root_.at(pointer);
    } catch (const json::exception&) {
      return nullptr;
    }
  }

  static bool one_type_ok(const std::string& type, const json& value) {
    if (type == "null") return value.is_null();
    if (type == "boolean") return value.is_boolean();
    if (type == "string") return value.is_string();
    if (type == "array") return value.is_array();
    if (type == "object") return value.is_object();
    if (type == "number") return value.is_number();
    if (type == "integer") {
      if (value.is_number_integer()) return true;
      if (!value.is_number_float()) return false;
      const double x = value.get<double>();
      return std::isfinite(x) && std::floor(x) == x;
    }
    return false;
  }

  static bool type_ok(const json& type, const json& value) {
    if (type.is_string()) return one_type_ok(type.get<std::string>(), value);
    if (type.is_array()) {
      for (const json& t : type)
        if (t.is_string() && one_type_ok(t.get<std::string>(), value)) return true;
      return false;
    }
    return true;
  }

  bool number(const json& schema, const json& value, const std::string& at) {
    const long double x = value.is_number_integer() ? static_cast<long double>(value.get<int64_t>())
                          : value.is_number_unsigned()
                              ? static_cast<long double>(value.get<uint64_t>())
                              : static_cast<long double>(value.get<double>());
    auto bound = [&](const char* name) -> const json* {
      return schema.contains(name) && schema[name].is_number() ? &schema[name] : nullptr;
    };
    if (const json* b = bound("minimum"); b && x < b->get<long double>())
      return fail(at, "minimum " + b->dump());
    if (const json* b = bound("maximum"); b && x > b->get<long double>())
      return fail(at, "maximum " + b->dump());
    if (const json* b = bound("exclusiveMinimum"); b && x <= b->get<long double>())
      return fail(at, "exclusiveMinimum " + b->dump());
    if (const json* b = bound("exclusiveMaximum"); b && x >= b->get<long double>())
      return fail(at, "exclusiveMaximum " + b->dump());
    if (const json* b = bound("multipleOf"); b && b->get<long double>() > 0) {
      const long double q = x / b->get<long double>();
      if (std::fabs(q - std::round(q)) > 1e-9L) return fail(at, "multipleOf " + b->dump());
    }
    return true;
  }

  static int64_t code_points(const std::string& s) {
    int64_t n = 0;
    for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
    return n;
  }

  bool string(const json& schema, const std::string& s, const std::string& at) {
    const int64_t n = code_points(s);
    if (schema.contains("minLength") && schema["minLength"].is_number_integer() &&
        n < schema["minLength"].get<int64_t>())
      return fail(at, "minLength " + schema["minLength"].dump());
    if (schema.contains("maxLength") && schema["maxLength"].is_number_integer() &&
        n > schema["maxLength"].get<int64_t>())
      return fail(at, "maxLength " + schema["maxLength"].dump());
    if (schema.contains("pattern") && schema["pattern"].is_string()) {
      try {
        const std::regex re(schema["pattern"].get<std::string>(), std::regex::ECMAScript);
        if (!std::regex_search(s, re)) return fail(at, "pattern " + schema["pattern"].dump());
      } catch (const std::regex_error&) {
        return fail(at, "pattern " + schema["pattern"].dump() + " is not a valid regex");
      }
    }
    return true;
  }

  bool array(const json& schema, const json& value, const std::string& at, int depth) {
    const auto n = static_cast<int64_t>(value.size());
    if (schema.contains("minItems") && schema["minItems"].is_number_integer() &&
        n < schema["minItems"].get<int64_t>())
      return fail(at, "minItems " + schema["minItems"].dump());
    if (schema.contains("maxItems") && schema["maxItems"].is_number_integer() &&
        n > schema["maxItems"].get<int64_t>())
      return fail(at, "maxItems " + schema["maxItems"].dump());
    if (schema.value("uniqueItems", false)) {
      for (size_t i = 0; i < value.size(); ++i)
        for (size_t j = i + 1; j < value.size(); ++j)
          if (json_equal(value[i], value[j])) return fail(at, "uniqueItems");
    }
    size_t prefix = 0;
    const json* prefix_schemas = nullptr;
    if (schema.contains("prefixItems") && schema["prefixItems"].is_array())
      prefix_schemas = &schema["prefixItems"];
    else if (schema.contains("items") && schema["items"].is_array())
      prefix_schemas = &schema["items"];  // the older tuple form
    if (prefix_schemas) {
      prefix = std::min(prefix_schemas->size(), value.size());
      for (size_t i = 0; i < prefix; ++i)
        if (!check((*prefix_schemas)[i], value[i], fmt::format("{}/{}", at, i), depth + 1))
          return false;
    }
    const json* rest = nullptr;
    if (schema.contains("items") && !schema["items"].is_array()) rest = &schema["items"];
    if (rest)
      for (size_t i = prefix; i < value.size(); ++i)
        if (!check(*rest, value[i], fmt::format("{}/{}", at, i), depth + 1)) return false;
    return true;
  }

  bool object(const json& schema, const json& value, const std::string& at, int depth) {
    const auto n = static_cast<int64_t>(value.size());
    if (schema.contains("minProperties") && schema["minProperties"].is_number_integer() &&
        n < schema["minProperties"].get<int64_t>())
      return fail(at, "minProperties " + schema["minProperties"].dump());
    if (schema.contains("maxProperties") && schema["maxProperties"].is_number_integer() &&
        n > schema["maxProperties"].get<int64_t>())
      return fail(at, "maxProperties " + schema["maxProperties"].dump());
    if (schema.contains("required") && schema["required"].is_array()) {
      for (const json& r : schema["required"])
        if (r.is_string() && !value.contains(r.get<std::string>()))
          return fail(at, "required " + r.dump());
    }
    const json* properties = schema.contains("properties") && schema["properties"].is_object()
                                 ? &schema["properties"]
                                 : nullptr;
    for (const auto& [key, item] : value.items()) {
      const std::string where = at + "/" + key;
      if (properties && properties->contains(key)) {
        if (!check((*properties)[key], item, where, depth + 1)) return false;
      } else if (schema.contains("additionalProperties")) {
        const json& extra = schema["additionalProperties"];
        if (extra.is_boolean() && !extra.get<bool>())
          return fail(at, "additionalProperties false (" + key + ")");
        if (extra.is_object() && !check(extra, item, where, depth + 1)) return false;
      }
    }
    return true;
  }

  const json& root_;
};

}  // namespace

bool validate_json(const json& schema, const json& value, std::string* why) {
  Validator v(schema);
  const bool ok = v.check(schema, value, "", 0);
  if (!ok && why) *why = v.why;
  return ok;
}

}  // namespace boltrt::eval

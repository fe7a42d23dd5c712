// JSON Schema -> GBNF (shared/docs/structured-output.md §2-§4): the output grammar accepts only
// JSON texts that validate against the schema, for every keyword it accepts; a keyword it
// cannot enforce exactly is an error naming the keyword and its JSON pointer, never ignored.
//
// Supported: type (incl. arrays of types, null), properties, required, additionalProperties
// (false by default, as llama.cpp does: a schema with properties gets exactly those keys; true
// or a schema adds other keys), enum, const, anyOf, oneOf (when its branches are provably
// disjoint: different types, or a required property with different const/enum values),
// allOf (object branches merged), $ref to local pointers ($defs, definitions, any path; recursion
// through rules), items, prefixItems (and items as an array), minItems/maxItems, minLength/
// maxLength, pattern (regex.h, intersected exactly with the length bounds), format (date, time,
// date-time, uuid, email, ipv4), integer and number minimum/maximum/exclusiveMinimum/
// exclusiveMaximum (exact digit-range grammars: integers up to 16 digits, numbers as plain
// decimals without exponent when bounded). Annotations (title, description, default, examples,
// $schema, $id, $comment, deprecated, readOnly, writeOnly) are ignored.
//
// Shape of the JSON: properties in schema order, whitespace bounded (at most one newline and 20
// spaces or tabs between tokens) so a model cannot loop on it.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace boltrt::grammar {

// Throws boltrt::Error "json schema: POINTER: what" (POINTER "" for the root, else e.g.
// "/properties/age") for invalid JSON, unsupported keywords or unsatisfiable constraints.
std::string json_schema_to_gbnf(std::string_view schema_json);
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
inline std::string json_schema_to_gbnf(const std::string& schema_json) {
  return json_schema_to_gbnf(std::string_view(schema_json));
}
inline std::string json_schema_to_gbnf(const char* schema_json) {
  return json_schema_to_gbnf(std::string_view(schema_json));
}

// Any JSON object (OpenAI's response_format {"type": "json_object"}).
std::string json_object_gbnf();

// How values are written. The default is JSON. raw(): the JSON-like argument syntax of chat
// formats that delimit strings with a special token (string_open/close are GBNF items, e.g.
// a token reference), write string characters raw (no escapes; '<' excluded so no text spells
// a special token), keys bare (`name:value`), in alphabetical order, without whitespace.
struct JsonDialect {
  std::string string_open = "\"\\\"\"", string_close = "\"\\\"\"";
  bool raw_strings = false;
  bool bare_keys = false;
  bool sorted_keys = false;
  static JsonDialect raw(std::string open, std::string close) {
    return {std::move(open), std::move(close), true, true, true};
  }
};

// For grammars that embed several schemas: appends the schema's rules (names prefixed by
// `prefix`, unique per schema) to `rules` and returns its rule name; the shared rules
// (json_base_rules(), once per grammar) must be added too.
std::string json_schema_rules(const nlohmann::ordered_json& schema, const JsonDialect& dialect,
                              const std::string& prefix, std::string& rules);
std::string json_base_rules(const JsonDialect& dialect);

}  // namespace boltrt::grammar

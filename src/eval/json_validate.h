// A JSON Schema validator for `boltrt eval`'s json_schema check: does a model's answer validate
// against the task's schema? It covers the keywords the grammar compiler accepts
// (src/grammar/json_schema.h): type (incl. arrays of types), properties, required,
// additionalProperties (a boolean or a schema; absent = allowed, as JSON Schema says), enum,
// const, anyOf, oneOf, allOf, not, local $ref (JSON pointers into the root schema), items,
// prefixItems, minItems/maxItems, uniqueItems, minLength/maxLength (code points), pattern
// (ECMAScript, unanchored), minimum/maximum/exclusiveMinimum/exclusiveMaximum/multipleOf,
// minProperties/maxProperties. Annotations and unknown keywords are ignored; `format` is not
// asserted (JSON Schema treats it as an annotation by default).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace boltrt::eval {

// True when `value` validates against `schema`; otherwise false with *why naming the JSON
// pointer of the failing value and the keyword (e.g. "/age: minimum 0").
bool validate_json(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& value,
                   std::string* why = nullptr);

}  // namespace boltrt::eval

// An independent JSON Schema validator for the structured-output tests: it checks values the
// constrained decoder produced against the schema by other means than the grammar compiler
// (std::regex for patterns, calendar arithmetic for dates, long double for numeric bounds).
// Supports the keywords src/grammar/json_schema.cpp accepts.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace boltrt::test {

// True when `value` validates against `schema` (whose $refs resolve within it); otherwise
// false with the failing keyword in *why.
bool validate_json(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& value,
                   std::string* why);

}  // namespace boltrt::test

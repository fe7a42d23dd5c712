#include "grammar_options.h"

#include <fstream>
#include <sstream>

#include "util/error.h"

namespace boltrt::cli {
namespace {

std::string read_file(const std::string& path, const char* what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("{}: cannot open the {} file", path, what);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

OutputConstraint GrammarOptions::constraint() const {
  const int given =
      !grammar.empty() + !grammar_file.empty() + !json_schema.empty() + !json_schema_file.empty();
  if (given > 1) {
    fail("give one of --grammar, --grammar-file, --json-schema, --json-schema-file");
  }
  OutputConstraint c;
  if (!grammar.empty()) c = OutputConstraint::grammar(grammar);
  if (!grammar_file.empty()) c = OutputConstraint::grammar(read_file(grammar_file, "grammar"));
  if (!json_schema.empty()) c = OutputConstraint::json_schema(json_schema);
  if (!json_schema_file.empty()) {
    c = OutputConstraint::json_schema(read_file(json_schema_file, "JSON schema"));
  }
  if (c.active()) compile_constraint(c);
  return c;
}

void add_grammar_options(CLI::App& app, GrammarOptions& options) {
  app.add_option("--grammar", options.grammar, "constrain the output to this GBNF grammar");
  app.add_option("--grammar-file", options.grammar_file, "... read from a file");
  app.add_option("-j,--json-schema", options.json_schema,
                 "constrain the output to JSON valid against this JSON Schema");
  app.add_option("--json-schema-file", options.json_schema_file, "... read from a file");
}

}  // namespace boltrt::cli

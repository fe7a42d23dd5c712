// The structured-output flags shared by `boltrt generate` and `chat` (issue 18; llama.cpp's
// names):
//
//   --grammar TEXT          constrain the output to a GBNF grammar (start rule `root`)
//   --grammar-file F        ... read from a file
//   -j, --json-schema TEXT  constrain the output to JSON valid against a JSON Schema
//   --json-schema-file F    ... read from a file
//
// At most one of them. With reasoning on, the thought stays free and the constraint starts
// when it ends.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "generate/grammar_controller.h"

namespace boltrt::cli {

struct GrammarOptions {
  std::string grammar, grammar_file, json_schema, json_schema_file;

  // The constraint the flags ask for (files read here; boltrt::Error naming the file, or when
  // more than one flag is given). The grammar or schema is compiled once here, so a malformed
  // one fails before the model loads.
  OutputConstraint constraint() const;
};

void add_grammar_options(CLI::App& app, GrammarOptions& options);

}  // namespace boltrt::cli

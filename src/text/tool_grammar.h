// Tool-call grammars per chat format (issue 18, shared/docs/structured-output.md §8.4, §10):
// the GBNF that forces a reply into the format's tool-call envelope, with each function's
// arguments constrained by its `parameters` JSON Schema, for OpenAI's `tool_choice`.
//
// Gemma 4: `<|tool_call>call:NAME{key:value,...}<tool_call|>`, strings between `<|"|>` tokens
// (raw characters, never '<'), bare keys in alphabetical order (as the template renders them),
// no whitespace. required: one call (or several with parallel calls); a named function: exactly
// that one; auto: free text, then optionally calls (the constraint on the arguments starts when
// the model opens a call); none: free text only, the call token masked.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace boltrt::text {

struct ToolChoice {
  enum class Kind { kAuto, kNone, kRequired, kFunction };
  Kind kind = Kind::kAuto;
  std::string function;  // kFunction
  bool parallel = true;  // parallel_tool_calls: several calls allowed

  // "auto" | "none" | "required" | {"type": "function", "function": {"name": N}} (null: auto);
  // throws boltrt::Error naming `what` otherwise.
  static ToolChoice from_json(const nlohmann::ordered_json& value,
                              const char* what = "tool_choice");
};

// The Gemma 4 grammar for OpenAI tool declarations `tools` ([{"type": "function", "function":
// {"name", "parameters"}}]). Throws boltrt::Error for a malformed declaration, an unsupported
// schema keyword (naming the tool and the pointer), or a named function that is not declared.
std::string gemma4_tool_call_gbnf(const nlohmann::ordered_json& tools, const ToolChoice& choice);

}  // namespace boltrt::text

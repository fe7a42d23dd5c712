// Tool-call grammars per chat format (issue 18, shared/docs/structured-output.md §8.4, §10):
// the GBNF that forces a reply into the format's tool-call envelope, with each function's
// arguments constrained by its `parameters` JSON Schema, for OpenAI's `tool_choice`.
//
// Gemma 4: `<|tool_call>call:NAME{key:value,...}<tool_call|>`, strings between `<|"|>` tokens
// (raw characters, never '<'), bare keys in alphabetical order (as the template renders them),
// no whitespace. required: one call (or several with parallel calls); a named function: exactly
// that one; auto: free text, then optionally calls (the constraint on the arguments starts when
// the model opens a call); none: free text only, the call token masked.
//
// Qwen3.5: `<tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>\n
// </tool_call>`, parameters in declaration order (required ones always, optional ones maybe),
// string parameters as raw text (no "</" inside), others as JSON by their schema; parallel calls
// one per line. The same choices as Gemma 4.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "text/chat_template.h"

namespace boltrt::text {

class Tokenizer;

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

// The Qwen3.5 grammar. atomic_markers: <tool_call> and </tool_call> are tokens of their own in
// the vocabulary (written as token references), else they are spelled as text. Throws like
// gemma4_tool_call_gbnf, and for names that cannot be written in a Qwen call.
std::string qwen35_tool_call_gbnf(const nlohmann::ordered_json& tools, const ToolChoice& choice,
                                  bool atomic_markers);

// The tool-call grammar of a chat format, "" for a format without tool calls (kNone). The
// tokenizer decides how the format's markers are written (token references or text).
std::string tool_call_gbnf(ChatFormat format, const nlohmann::ordered_json& tools,
                           const ToolChoice& choice, const Tokenizer& tokenizer);

// The format's tool-call opener ("<|tool_call>" for Gemma 4, "<tool_call>" for Qwen3.5), ""
// for a format without tool calls.
std::string_view tool_call_opener(ChatFormat format);

// The constraint a tool_choice puts on a reply. With `trigger` empty the grammar holds from the
// first token of the answer (required, a named function, none). With a trigger it is lazy
// (tool_choice auto, shared/docs/structured-output.md §1, §5.2): the reply is free until it
// writes the trigger — the format's call opener — outside a thought; from the trigger's first
// byte on the rest must match `gbnf`: the calls (the required grammar: each function's
// arguments by its parameters schema, several calls when parallel calls are allowed) and then
// the end. Neither format reads text after its calls, so none may follow.
struct ToolCallGrammar {
  std::string gbnf;     // "" when the format has no tool calls
  std::string trigger;  // "" for a grammar that holds from the start
  bool empty() const { return gbnf.empty(); }
};
ToolCallGrammar tool_call_grammar(ChatFormat format, const nlohmann::ordered_json& tools,
                                  const ToolChoice& choice, const Tokenizer& tokenizer);

}  // namespace boltrt::text

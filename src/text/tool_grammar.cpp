#include "text/tool_grammar.h"

#include <fmt/format.h>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "util/error.h"

namespace boltrt::text {

using Json = nlohmann::ordered_json;

ToolChoice ToolChoice::from_json(const Json& value, const char* what) {
  ToolChoice c;
  if (value.is_null()) return c;
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    if (s == "auto") return c;
    if (s == "none") {
      c.kind = Kind::kNone;
      return c;
    }
    if (s == "required") {
      c.kind = Kind::kRequired;
      return c;
    }
  } else if (value.is_object() && value.value("type", "") == "function" &&
             value.contains("function") && value["function"].is_object() &&
             value["function"].contains("name") && value["function"]["name"].is_string()) {
    c.kind = Kind::kFunction;
    c.function = value["function"]["name"].get<std::string>();
    return c;
  }
  fail(
      "field '{}' must be \"auto\", \"none\", \"required\" or "
      "{{\"type\":\"function\",\"function\":{{\"name\":...}}}}, not {}",
      what, value.dump());
}

std::string gemma4_tool_call_gbnf(const Json& tools, const ToolChoice& choice) {
  const grammar::JsonDialect dialect = grammar::JsonDialect::raw("<|\"|>", "<|\"|>");
  std::string rules;
  std::vector<std::string> calls;
  bool named_found = false;
  if (!tools.is_array()) fail("'tools' must be an array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string()) {
      fail("tools[{}] must be {{\"type\":\"function\",\"function\":{{\"name\":...}}}}", i);
    }
    const Json& f = t["function"];
    const std::string name = f["name"].get<std::string>();
    if (name.empty() || name.find_first_of("{<") != std::string::npos) {
      fail("tools[{}]: the name '{}' cannot be written in a Gemma 4 call", i, name);
    }
    if (choice.kind == ToolChoice::Kind::kFunction && name != choice.function) continue;
    named_found = named_found || name == choice.function;
    std::string args = "\"{\" \"}\"";  // no parameters: empty arguments
    if (f.contains("parameters") && !f["parameters"].is_null()) {
      try {
        args = grammar::json_schema_rules(f["parameters"], dialect, fmt::format("t{}-", i), rules);
      } catch (const Error& e) {
        fail("tools[{}] ({}): parameters: {}", i, name, e.what());
      }
    }
    calls.push_back(grammar::gbnf_literal("call:" + name) + " " + args);
  }
  if (choice.kind == ToolChoice::Kind::kFunction && !named_found) {
    fail("tool_choice names the function '{}', which 'tools' does not declare", choice.function);
  }
  std::string out;
  // Free text: no special token (they are atomic) and no text that spells one ("<|").
  const std::string free = "free ::= ( [^<] | \"<\" [^|] )*\n";
  if (choice.kind == ToolChoice::Kind::kNone || calls.empty()) {
    out = "root ::= free\n" + free;
  } else {
    std::string any;
    for (size_t i = 0; i < calls.size(); ++i) any += (i ? " | " : "") + calls[i];
    out += "call ::= <|tool_call> ( " + any + " ) <tool_call|>\n";
    out += choice.parallel ? "calls ::= call+\n" : "calls ::= call\n";
    if (choice.kind == ToolChoice::Kind::kAuto) {
      out = "root ::= free calls?\n" + out + free;
    } else {
      out = "root ::= calls\n" + out;
    }
  }
  return out + grammar::json_base_rules(dialect) + rules;
}

}  // namespace boltrt::text

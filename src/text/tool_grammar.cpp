#include "text/tool_grammar.h"

#include <fmt/format.h>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "text/tokenizer.h"
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

namespace {

const Json& checked_function(const Json& tools, size_t i) {
  const Json& t = tools[i];
  if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
      !t["function"].contains("name") || !t["function"]["name"].is_string()) {
    fail("tools[{}] must be {{\"type\":\"function\",\"function\":{{\"name\":...}}}}", i);
  }
  return t["function"];
}

// The schema keywords that make llama.cpp's Qwen parser read a parameter as raw text.
bool schema_is_string(const Json& schema) {
  if (!schema.is_object() || !schema.contains("type")) return false;
  const Json& type = schema["type"];
  if (type.is_string()) return type == "string";
  if (type.is_array()) {
    for (const Json& t : type) {
      if (t.is_string() && t == "string") return true;
    }
  }
  return false;
}

bool writable_name(const std::string& name) {
  return !name.empty() && name.find_first_of(">\n<") == std::string::npos;
}

}  // namespace

std::string qwen35_tool_call_gbnf(const Json& tools, const ToolChoice& choice,
                                  bool atomic_markers) {
  const grammar::JsonDialect dialect;  // standard JSON
  std::string rules;
  std::vector<std::string> functions;
  bool named_found = false;
  if (!tools.is_array()) fail("'tools' must be an array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& f = checked_function(tools, i);
    const std::string name = f["name"].get<std::string>();
    if (!writable_name(name)) {
      fail("tools[{}]: the name '{}' cannot be written in a Qwen3.5 call", i, name);
    }
    if (choice.kind == ToolChoice::Kind::kFunction && name != choice.function) continue;
    named_found = named_found || name == choice.function;
    std::string body = grammar::gbnf_literal("<function=" + name + ">\n");
    const Json* params = f.contains("parameters") ? &f["parameters"] : nullptr;
    if (params && !params->is_null() && !params->is_object()) {
      fail("tools[{}] ({}): parameters must be a JSON Schema object", i, name);
    }
    if (params && params->is_object() && params->contains("properties")) {
      const Json& props = (*params)["properties"];
      if (!props.is_object())
        fail("tools[{}] ({}): parameters.properties must be an object", i, name);
      const Json required = params->contains("required") ? (*params)["required"] : Json::array();
      size_t k = 0;
      for (auto it = props.begin(); it != props.end(); ++it, ++k) {
        const std::string& key = it.key();
        if (!writable_name(key)) {
          fail("tools[{}] ({}): the parameter name '{}' cannot be written in a Qwen3.5 call", i,
               name, key);
        }
        std::string value = "qwen-text";
        if (!schema_is_string(it.value())) {
          try {
            value = grammar::json_schema_rules(it.value(), dialect, fmt::format("t{}-p{}-", i, k),
                                               rules);
          } catch (const Error& e) {
            fail("tools[{}] ({}): parameters.properties.{}: {}", i, name, key, e.what());
          }
        }
        bool is_required = false;
        if (required.is_array()) {
          for (const Json& r : required) is_required = is_required || (r.is_string() && r == key);
        }
        body.append(" ( ").append(grammar::gbnf_literal("<parameter=" + key + ">\n"));
        body.append(" ").append(value).append(" ");
        body.append(grammar::gbnf_literal("\n</parameter>\n")).append(is_required ? " )" : " )?");
      }
    }
    body.append(" ").append(grammar::gbnf_literal("</function>\n"));
    functions.push_back(std::move(body));
  }
  if (choice.kind == ToolChoice::Kind::kFunction && !named_found) {
    fail("tool_choice names the function '{}', which 'tools' does not declare", choice.function);
  }
  const std::string open = atomic_markers ? "<tool_call>" : "\"<tool_call>\"";
  const std::string close = atomic_markers ? "</tool_call>" : "\"</tool_call>\"";
  // Free text: never the call's opening marker (as text, never "<t").
  const std::string free = "free ::= ( [^<] | \"<\" [^t] )*\n";
  std::string out;
  if (choice.kind == ToolChoice::Kind::kNone || functions.empty()) {
    out = "root ::= free\n" + free;
  } else {
    std::string any;
    for (size_t i = 0; i < functions.size(); ++i) any += (i ? " | " : "") + functions[i];
    out += "call ::= " + open + " \"\\n\" ( " + any + " ) " + close + "\n";
    out += choice.parallel ? "calls ::= call ( \"\\n\" call )*\n" : "calls ::= call\n";
    out += "qwen-text ::= ( [^<] | \"<\" [^/] )*\n";
    if (choice.kind == ToolChoice::Kind::kAuto) {
      out = "root ::= free calls?\n" + out + free;
    } else {
      out = "root ::= calls\n" + out;
    }
  }
  return out + grammar::json_base_rules(dialect) + rules;
}

std::string tool_call_gbnf(ChatFormat format, const Json& tools, const ToolChoice& choice,
                           const Tokenizer& tokenizer) {
  switch (format) {
    case ChatFormat::kGemma4:
      return gemma4_tool_call_gbnf(tools, choice);
    case ChatFormat::kQwen35: {
      auto atomic = [&](std::string_view text) {
        const TokenId id = tokenizer.find(text);
        return id != kNoToken && (tokenizer.attr(id) & (kAttrControl | kAttrUserDefined)) != 0;
      };
      return qwen35_tool_call_gbnf(tools, choice, atomic("<tool_call>") && atomic("</tool_call>"));
    }
    case ChatFormat::kNone:
      break;
  }
  return "";
}

std::string_view tool_call_opener(ChatFormat format) {
  switch (format) {
    case ChatFormat::kGemma4:
      return "<|tool_call>";
    case ChatFormat::kQwen35:
      return "<tool_call>";
    case ChatFormat::kNone:
      break;
  }
  return "";
}

ToolCallGrammar tool_call_grammar(ChatFormat format, const Json& tools, const ToolChoice& choice,
                                  const Tokenizer& tokenizer) {
  if (choice.kind != ToolChoice::Kind::kAuto) {
    return {tool_call_gbnf(format, tools, choice, tokenizer), ""};
  }
  if (tools.is_array() && tools.empty()) return {};
  // auto: from the opener on, the reply is what `required` would force.
  ToolChoice calls = choice;
  calls.kind = ToolChoice::Kind::kRequired;
  std::string gbnf = tool_call_gbnf(format, tools, calls, tokenizer);
  if (gbnf.empty()) return {};
  return {std::move(gbnf), std::string(tool_call_opener(format))};
}

}  // namespace boltrt::text

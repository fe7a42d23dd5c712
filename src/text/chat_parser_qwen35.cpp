// Splitting a Qwen3.5 model's output into reasoning, content and tool calls, as llama.cpp's
// parser for this template does (its "Qwen3-Coder" XML format, qwen35.md §9.3), on the output
// read as the continuation of the generation prompt:
//   <|im_start|>assistant\n [<think> ws REASONING (</think> | before <tool_call>)] ws CONTENT
//   [<tool_call>\n<function=NAME>\n (<parameter=P>\nVALUE\n</parameter>\n)* </function>\n
//    </tool_call> ws]*
// Reasoning that is only whitespace becomes "". A parameter whose schema resolves to a string
// takes its text verbatim (it may span lines) up to "\n</parameter>\n"; any other parameter is
// JSON text, kept as written. Arguments become a JSON object text in the order written.
//
// Where llama.cpp loses text, we keep it: when the tool-call part does not parse (an undeclared
// function or parameter, a missing required parameter, a non-JSON value for a typed parameter,
// an unclosed call, text after the calls, a second call when parallel calls are off), there are
// no calls, `well_formed` is false and `content` is everything after the reasoning, unchanged.
// (llama.cpp then returns nothing, or a call with truncated JSON.) Parameters are accepted in any
// order, each once (llama.cpp wants the required ones first).
#include <nlohmann/json.hpp>

#include "text/chat_template.h"

namespace boltrt::text {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f';
}

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  return pos;
}

bool starts_at(std::string_view s, size_t pos, std::string_view what) {
  return s.size() >= pos && s.substr(pos).starts_with(what);
}

std::string json_text(const std::string& s) {
  try {
    return Json(s).dump();
  } catch (const nlohmann::json::exception&) {  // invalid UTF-8
    return Json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

// Whether a parameter schema takes raw text (llama.cpp's "resolves to string"): type "string"
// (or a type list with "string"), an anyOf/oneOf alternative that does, or a local $ref to one.
bool resolves_to_string(const Json& schema, const Json& root, int depth = 0) {
  if (!schema.is_object() || depth > 16) return false;
  if (auto ref = schema.find("$ref"); ref != schema.end()) {
    if (!ref->is_string()) return false;
    const std::string& r = ref->get_ref<const std::string&>();
    if (!r.starts_with("#")) return false;
    try {
      const Json::json_pointer pointer(r.substr(1));
      return root.contains(pointer) && resolves_to_string(root.at(pointer), root, depth + 1);
    } catch (const nlohmann::json::exception&) {
      return false;
    }
  }
  if (auto type = schema.find("type"); type != schema.end()) {
    if (type->is_string() && *type == "string") return true;
    if (type->is_array()) {
      for (const Json& t : *type) {
        if (t.is_string() && t == "string") return true;
      }
    }
  }
  for (const char* key : {"oneOf", "anyOf"}) {
    if (auto alts = schema.find(key); alts != schema.end() && alts->is_array()) {
      for (const Json& alt : *alts) {
        if (resolves_to_string(alt, root, depth + 1)) return true;
      }
    }
  }
  return false;
}

struct Param {
  std::string name;
  bool required = false;
  bool string = false;
};

struct Function {
  std::string name;
  std::vector<Param> params;
};

std::vector<Function> declared_functions(const Json& tools) {
  std::vector<Function> out;
  if (!tools.is_array()) return out;
  for (const Json& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
    const Json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string()) continue;
    Function fn;
    fn.name = f["name"].get<std::string>();
    const Json* params = f.contains("parameters") ? &f["parameters"] : nullptr;
    if (params && params->is_object() && params->contains("properties") &&
        (*params)["properties"].is_object()) {
      const Json& props = (*params)["properties"];
      const Json* required = params->contains("required") ? &(*params)["required"] : nullptr;
      for (auto it = props.begin(); it != props.end(); ++it) {
        Param p;
        p.name = it.key();
        if (required && required->is_array()) {
          for (const Json& r : *required) p.required = p.required || (r.is_string() && r == p.name);
        }
        p.string = resolves_to_string(it.value(), *params);
        fn.params.push_back(std::move(p));
      }
    }
    out.push_back(std::move(fn));
  }
  return out;
}

// One "<tool_call>\n<function=...>...</function>\n</tool_call>" at `pos`; returns the position
// after it, or npos when it does not parse.
size_t parse_call(std::string_view s, size_t pos, const std::vector<Function>& functions,
                  ToolCall& call) {
  constexpr std::string_view kOpen = "<tool_call>\n<function=", kArgClose = "\n</parameter>\n";
  if (!starts_at(s, pos, kOpen)) return std::string_view::npos;
  pos += kOpen.size();
  const Function* fn = nullptr;
  for (const Function& f : functions) {
    if (starts_at(s, pos, f.name) && starts_at(s, pos + f.name.size(), ">\n")) {
      fn = &f;
      break;
    }
  }
  if (!fn) return std::string_view::npos;
  pos += fn->name.size() + 2;
  std::vector<bool> seen(fn->params.size(), false);
  std::string args = "{";
  while (starts_at(s, pos, "<parameter=")) {
    pos += 11;
    const size_t name_end = s.find(">\n", pos);
    if (name_end == std::string_view::npos) return std::string_view::npos;
    const std::string_view name = s.substr(pos, name_end - pos);
    size_t k = 0;
    while (k < fn->params.size() && fn->params[k].name != name) ++k;
    if (k == fn->params.size() || seen[k]) return std::string_view::npos;
    seen[k] = true;
    pos = name_end + 2;
    const size_t value_end = s.find(kArgClose, pos);
    if (value_end == std::string_view::npos) return std::string_view::npos;
    const std::string value(s.substr(pos, value_end - pos));
    if (args.size() > 1) args += ',';
    args += json_text(std::string(name)) + ":";
    if (fn->params[k].string) {
      args += json_text(value);
    } else {
      if (value.empty() || is_space(value.front()) || is_space(value.back()) ||
          !Json::accept(value)) {
        return std::string_view::npos;
      }
      args += value;
    }
    pos = value_end + kArgClose.size();
  }
  for (size_t k = 0; k < fn->params.size(); ++k) {
    if (fn->params[k].required && !seen[k]) return std::string_view::npos;
  }
  constexpr std::string_view kClose = "</function>\n</tool_call>";
  if (!starts_at(s, pos, kClose)) return std::string_view::npos;
  call.name = fn->name;
  call.arguments = args + "}";
  return pos + kClose.size();
}

}  // namespace

ParsedOutput parse_qwen35_output(std::string_view output, std::string_view generation_prompt,
                                 const Json& tools, const ParseOptions& options) {
  const std::string input = std::string(generation_prompt) + std::string(output);
  const std::string_view s(input);
  ParsedOutput out;
  size_t pos = 0;
  constexpr std::string_view kStart = "<|im_start|>assistant\n";
  if (starts_at(s, pos, kStart)) pos += kStart.size();
  if (starts_at(s, pos, "<think>")) {
    pos = skip_space(s, pos + 7);
    const size_t close = s.find("</think>", pos), call = s.find("<tool_call>", pos);
    const size_t end = std::min(close, call);
    out.reasoning =
        std::string(s.substr(pos, end == std::string_view::npos ? s.size() - pos : end - pos));
    if (end == std::string_view::npos) {
      pos = s.size();
    } else {
      pos = end == close ? close + 8 : call;
    }
    bool blank = true;
    for (char c : out.reasoning) blank = blank && (c == ' ' || c == '\n' || c == '\r' || c == '\t');
    if (blank) out.reasoning.clear();
  }
  pos = skip_space(s, pos);
  const std::string_view body = s.substr(pos);
  const std::vector<Function> functions = declared_functions(tools);
  const size_t first_call = functions.empty() ? std::string_view::npos : body.find("<tool_call>");
  if (first_call == std::string_view::npos) {
    out.content = std::string(body);
    return out;
  }
  out.content = std::string(body.substr(0, first_call));
  for (size_t at = first_call; at < body.size();) {
    if (!out.tool_calls.empty() && !options.parallel_tool_calls) {
      out.well_formed = false;
      break;
    }
    ToolCall call;
    const size_t next = parse_call(body, at, functions, call);
    if (next == std::string_view::npos) {
      out.well_formed = false;
      break;
    }
    out.tool_calls.push_back(std::move(call));
    at = skip_space(body, next);
  }
  if (!out.well_formed) {
    out.tool_calls.clear();
    out.content = std::string(body);
  }
  return out;
}

std::span<const ChatFormat> formats_with_thoughts() {
  static constexpr ChatFormat kFormats[] = {ChatFormat::kGemma4, ChatFormat::kQwen35};
  return kFormats;
}

ThoughtMarkerText thought_markers(ChatFormat format) {
  if (format == ChatFormat::kQwen35) return {"<think>", "\n", "</think>"};
  return {"<|channel>", "thought\n", "<channel|>"};
}

ParsedOutput parse_output(ChatFormat format, std::string_view output,
                          std::string_view generation_prompt, const Json& tools,
                          const ParseOptions& options) {
  switch (format) {
    case ChatFormat::kGemma4:
      return parse_gemma4_output(output, generation_prompt, tools, options);
    case ChatFormat::kQwen35:
      return parse_qwen35_output(output, generation_prompt, tools, options);
    case ChatFormat::kNone:
      break;
  }
  ParsedOutput out;
  out.content = std::string(output);
  return out;
}

}  // namespace boltrt::text

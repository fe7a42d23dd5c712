// Gemma 4 prompt rendering. This is the Jinja template that Gemma 4 GGUFs carry in
// tokenizer.chat_template, written out in C++ with the value semantics of llama.cpp's Jinja
// engine (which is what decides the bytes llama.cpp feeds the model):
//   - dictsort is case-sensitive (byte order); Python's Jinja would ignore case,
//   - None prints as "" and floats print as "%f" with trailing zeros trimmed ("21.5", "3.0"),
//   - `trim` strips ASCII whitespace only,
// plus what llama.cpp does around the template: OpenAI tool messages are folded into the
// preceding assistant turn as tool_responses, tools are reduced to name/description/parameters,
// the leading <bos> is dropped (the tokenizer adds it), and "<|turn>model\n" is appended when a
// generation prompt is wanted but the text ends with "<turn|>\n".
#include "text/chat_template.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "text/tokenizer.h"
#include "util/error.h"

namespace boltrt::text {

namespace {

constexpr std::string_view kQuote = "<|\"|>";

// Text from the messages and tools (contents, names, keys, string values) is wrapped in these
// two bytes while the prompt is built, and render() turns the marks into ChatPrompt::literal
// ranges: the tokenizer then reads only the template's own markers as special tokens. 0xFE and
// 0xFF never occur in UTF-8; input bytes with these values become U+FFFD.
constexpr char kLiteralOpen = '\xFE';
constexpr char kLiteralClose = '\xFF';

std::string lit(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += kLiteralOpen;
  for (char c : s) {
    if (c == kLiteralOpen || c == kLiteralClose) {
      out += "\xEF\xBF\xBD";
    } else {
      out += c;
    }
  }
  out += kLiteralClose;
  return out;
}

// Removes the marks of lit() (they may nest) and returns the marked ranges, merged where they
// touch.
std::vector<std::pair<size_t, size_t>> take_literal_marks(std::string& text) {
  std::vector<std::pair<size_t, size_t>> ranges;
  std::string clean;
  clean.reserve(text.size());
  int depth = 0;
  size_t begin = 0;
  for (char c : text) {
    if (c == kLiteralOpen) {
      if (depth++ == 0) begin = clean.size();
    } else if (c == kLiteralClose) {
      if (--depth == 0 && clean.size() > begin) {
        if (!ranges.empty() && ranges.back().second == begin) {
          ranges.back().second = clean.size();
        } else {
          ranges.emplace_back(begin, clean.size());
        }
      }
    } else {
      clean += c;
    }
  }
  text = std::move(clean);
  return ranges;
}

// ---- Jinja-like helpers over JSON values -------------------------------------------------------

const Json* member(const Json* v, std::string_view key) {  // nullptr = undefined
  if (!v || !v->is_object()) return nullptr;
  auto it = v->find(std::string(key));
  return it == v->end() ? nullptr : &*it;
}

bool truthy(const Json* v) {
  if (!v || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number_integer()) return v->get<int64_t>() != 0;
  if (v->is_number_unsigned()) return v->get<uint64_t>() != 0;
  if (v->is_number_float()) return v->get<double>() != 0.0;
  if (v->is_string()) return !v->get_ref<const std::string&>().empty();
  return !v->empty();
}

std::string float_text(double d) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%f", d);
  std::string out = buf;
  out.erase(out.find_last_not_of('0') + 1);
  if (!out.empty() && out.back() == '.') out.push_back('0');
  return out;
}

// {{ value }}
std::string text_of(const Json* v) {
  if (!v || v->is_null()) return "";
  if (v->is_string()) return v->get<std::string>();
  if (v->is_boolean()) return v->get<bool>() ? "True" : "False";
  if (v->is_number_integer()) return std::to_string(v->get<int64_t>());
  if (v->is_number_unsigned()) return std::to_string(v->get<uint64_t>());
  if (v->is_number_float()) return float_text(v->get<double>());
  return v->dump();
}

std::string upper(const Json* v) {
  if (!v || !v->is_string()) return "";
  std::string s = v->get<std::string>();
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// Object items in key order (bytewise, as llama.cpp's dictsort).
std::vector<std::pair<std::string, const Json*>> dictsort(const Json& obj) {
  std::vector<std::pair<std::string, const Json*>> items;
  for (auto it = obj.begin(); it != obj.end(); ++it) items.emplace_back(it.key(), &it.value());
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return items;
}

std::string in_quotes(std::string_view s) {
  std::string out(kQuote);
  out.append(lit(s));
  out.append(kQuote);
  return out;
}

// ---- the template's macros ----------------------------------------------------------------------

std::string format_argument(const Json& arg, bool escape_keys) {
  if (arg.is_string()) return in_quotes(arg.get_ref<const std::string&>());
  if (arg.is_boolean()) return arg.get<bool>() ? "true" : "false";
  if (arg.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, value] : dictsort(arg)) {
      if (!first) out += ',';
      first = false;
      out += escape_keys ? in_quotes(key) : lit(key);
      out += ':';
      out += format_argument(*value, escape_keys);
    }
    return out + "}";
  }
  if (arg.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < arg.size(); ++i) {
      if (i > 0) out += ',';
      out += format_argument(arg[i], escape_keys);
    }
    return out + "]";
  }
  return text_of(&arg);
}

void required_list(std::string& out, const Json* items) {
  out += '[';
  if (items && items->is_array()) {
    for (size_t i = 0; i < items->size(); ++i) {
      if (i > 0) out += ',';
      out += in_quotes(text_of(&(*items)[i]));
    }
  }
  out += ']';
}

void format_parameters(std::string& out, const Json& properties) {
  static const std::string_view kStandardKeys[] = {"description", "type", "properties", "required",
                                                   "nullable"};
  bool found_first = false;
  for (const auto& [key, value_ptr] : dictsort(properties)) {
    if (std::find(std::begin(kStandardKeys), std::end(kStandardKeys), key) !=
        std::end(kStandardKeys)) {
      continue;
    }
    const Json* value = value_ptr;
    bool add_comma = false;
    auto comma = [&] {
      if (add_comma) {
        out += ',';
      } else {
        add_comma = true;
      }
    };
    if (found_first) out += ',';
    found_first = true;
    out += lit(key) + ":{";
    if (truthy(member(value, "description"))) {
      out += "description:" + in_quotes(text_of(member(value, "description")));
      add_comma = true;
    }
    if (truthy(member(value, "nullable"))) {
      comma();
      out += "nullable:true";
    }
    const std::string type = upper(member(value, "type"));
    if (type == "STRING") {
      if (truthy(member(value, "enum"))) {
        comma();
        out += "enum:" + format_argument(*member(value, "enum"), true);
      }
    } else if (type == "OBJECT") {
      out += ",properties:{";
      const Json* props = member(value, "properties");
      if (props && props->is_object()) {
        format_parameters(out, *props);
      } else if (value->is_object()) {
        format_parameters(out, *value);
      }
      out += '}';
      if (truthy(member(value, "required"))) {
        out += ",required:";
        required_list(out, member(value, "required"));
      }
    } else if (type == "ARRAY") {
      const Json* items = member(value, "items");
      if (items && items->is_object() && !items->empty()) {
        out += ",items:{";
        bool items_first = false;
        for (const auto& [item_key, item_value] : dictsort(*items)) {
          if (item_value->is_null()) continue;
          if (items_first) out += ',';
          items_first = true;
          if (item_key == "properties") {
            out += "properties:{";
            if (item_value->is_object()) format_parameters(out, *item_value);
            out += '}';
          } else if (item_key == "required") {
            out += "required:";
            required_list(out, item_value);
          } else if (item_key == "type") {
            if (item_value->is_string()) {
              out += "type:" + in_quotes(upper(item_value));
            } else {
              // `map('upper')`: llama.cpp's Jinja engine cannot run this branch (it throws
              // "filter-mapping not implemented"); we give what Python's Jinja gives.
              Json upper_list = Json::array();
              if (item_value->is_array()) {
                for (const auto& t : *item_value) upper_list.push_back(upper(&t));
              }
              out += "type:" + format_argument(upper_list, true);
            }
          } else {
            out += lit(item_key) + ":" + format_argument(*item_value, true);
          }
        }
        out += '}';
      }
    }
    comma();
    out += "type:" + in_quotes(type) + "}";
  }
}

std::string format_function_declaration(const Json& tool) {
  const Json* function = member(&tool, "function");
  std::string out = "declaration:" + lit(text_of(member(function, "name"))) +
                    "{description:" + in_quotes(text_of(member(function, "description")));
  const Json* params = member(function, "parameters");
  if (truthy(params)) {
    out += ",parameters:{";
    if (truthy(member(params, "properties"))) {
      out += "properties:{";
      if (member(params, "properties")->is_object()) {
        format_parameters(out, *member(params, "properties"));
      }
      out += "},";
    }
    if (truthy(member(params, "required"))) {
      out += "required:";
      required_list(out, member(params, "required"));
      out += ',';
    }
    if (truthy(member(params, "type")))
      out += "type:" + in_quotes(upper(member(params, "type"))) + "}";
  }
  if (member(function, "response")) {
    const Json* response = member(function, "response");
    out += ",response:{";
    if (truthy(member(response, "description"))) {
      out += "description:" + in_quotes(text_of(member(response, "description"))) + ",";
    }
    if (upper(member(response, "type")) == "OBJECT") {
      out += "type:" + in_quotes(upper(member(response, "type"))) + "}";
    }
  }
  return out + "}";
}

std::string strip_thinking(std::string_view text) {
  std::string result;
  size_t pos = 0;
  for (;;) {  // text.split('<channel|>'): keep what precedes '<|channel>' in each part
    const size_t end = text.find("<channel|>", pos);
    const std::string_view part =
        text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    const size_t open = part.find("<|channel>");
    result.append(part.substr(0, open));
    if (end == std::string_view::npos) break;
    pos = end + std::string_view("<channel|>").size();
  }
  return trim(result);
}

// ---- messages as the template sees them ------------------------------------------------------

struct RenderCall {
  std::string name;
  Json arguments;
};
struct RenderResponse {
  std::string name;
  Json response;
};
struct RenderMessage {
  std::string role;
  bool has_content = false;
  std::string content;
  std::vector<RenderCall> tool_calls;
  std::vector<RenderResponse> tool_responses;
};

RenderMessage plain(const ChatMessage& m, size_t index) {
  RenderMessage r;
  r.role = m.role;
  r.has_content = true;
  r.content = m.content;
  for (const ToolCall& c : m.tool_calls) {
    Json args;
    try {
      args = Json::parse(c.arguments);
    } catch (const std::exception&) {
      fail("chat message {}: tool call '{}': arguments are not valid JSON: {}", index, c.name,
           c.arguments.substr(0, 80));
    }
    r.tool_calls.push_back({c.name, std::move(args)});
  }
  return r;
}

// llama.cpp's Gemma 4 workaround: assistant(tool_calls) + tool results (+ a final assistant
// answer) become one assistant message with tool_responses. The first assistant message's own
// text is dropped, as llama.cpp drops it.
std::vector<RenderMessage> fold_tool_messages(const std::vector<ChatMessage>& messages) {
  std::vector<RenderMessage> out;
  for (size_t i = 0; i < messages.size();) {
    const ChatMessage& m = messages[i];
    if (m.role != "assistant" || m.tool_calls.empty()) {
      out.push_back(plain(m, i));
      ++i;
      continue;
    }
    RenderMessage turn = plain(m, i);
    turn.has_content = false;
    turn.content.clear();
    ++i;
    while (i < messages.size() && messages[i].role == "tool") {
      RenderResponse r;
      try {
        r.response = Json::parse(messages[i].content);
      } catch (const std::exception&) {
        r.response = messages[i].content;
      }
      const size_t k = turn.tool_responses.size();
      r.name = k < turn.tool_calls.size() ? turn.tool_calls[k].name : "";
      if (r.name.empty()) r.name = messages[i].tool_call_id;
      turn.tool_responses.push_back(std::move(r));
      ++i;
    }
    if (i < messages.size() && messages[i].role == "assistant" && messages[i].tool_calls.empty() &&
        !messages[i].content.empty()) {
      turn.has_content = true;
      turn.content = messages[i].content;
      ++i;
    }
    out.push_back(std::move(turn));
  }
  return out;
}

Json normalize_tools(const Json& tools) {
  // llama.cpp keeps name, description and parameters of each function tool.
  Json out = Json::array();
  if (!tools.is_array()) return out;
  for (const Json& t : tools) {
    const Json* f = member(&t, "function");
    if (!f) fail("chat tools: each tool needs a \"function\" object");
    Json fn = Json::object();
    fn["name"] = text_of(member(f, "name"));
    fn["description"] = text_of(member(f, "description"));
    const Json* params = member(f, "parameters");
    if (params && !params->is_null()) fn["parameters"] = *params;
    out.push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// The template proper (without bos_token). Returns the text and, separately, what the
// generation prompt appended.
std::pair<std::string, std::string> render_gemma4(const std::vector<RenderMessage>& messages,
                                                  const Json& tools, bool add_generation_prompt,
                                                  bool enable_thinking) {
  std::string out;
  std::string prev_type;  // ns.prev_message_type
  size_t first = 0;
  const bool has_tools = !tools.empty();
  const bool system_first =
      !messages.empty() && (messages[0].role == "system" || messages[0].role == "developer");
  if (enable_thinking || has_tools || system_first) {
    out += "<|turn>system\n";
    if (enable_thinking) {
      out += "<|think|>";
      prev_type = "think";
    }
    if (system_first) {
      out += lit(trim(messages[0].content));
      first = 1;
    }
    if (has_tools) {
      for (const Json& tool : tools)
        out += "<|tool>" + trim(format_function_declaration(tool)) + "<tool|>";
      prev_type = "tool";
    }
    out += "<turn|>\n";
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const RenderMessage& m = messages[i];
    prev_type.clear();
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<|turn>" + lit(role) + "\n";
    if (!m.tool_calls.empty()) {
      for (const RenderCall& c : m.tool_calls) {
        out += "<|tool_call>call:" + lit(c.name) + "{";
        if (c.arguments.is_object()) {
          bool first_arg = true;
          for (const auto& [key, value] : dictsort(c.arguments)) {
            if (!first_arg) out += ',';
            first_arg = false;
            out += lit(key) + ":" + format_argument(*value, false);
          }
        } else if (c.arguments.is_string()) {
          out += lit(c.arguments.get<std::string>());
        }
        out += "}<tool_call|>";
      }
      prev_type = "tool_call";
    }
    if (!m.tool_responses.empty()) {
      for (const RenderResponse& r : m.tool_responses) {
        out += "<|tool_response>";
        if (r.response.is_object()) {
          out += "response:" + lit(r.name) + "{";
          bool first_kv = true;
          for (const auto& [key, value] : dictsort(r.response)) {
            if (!first_kv) out += ',';
            first_kv = false;
            out += lit(key) + ":" + format_argument(*value, false);
          }
          out += "}";
        } else {
          out += "response:" + lit(r.name) + "{value:" + format_argument(r.response, false) + "}";
        }
        out += "<tool_response|>";
      }
      prev_type = "tool_response";
    }
    if (m.has_content) out += lit(role == "model" ? strip_thinking(m.content) : trim(m.content));
    const bool empty_content = !m.has_content || m.content.empty();
    if (!(!m.tool_responses.empty() && empty_content)) out += "<turn|>\n";
  }
  std::string generation;
  if (prev_type != "tool_response") generation += "<|turn>model\n";
  if (!enable_thinking) generation += "<|channel>thought\n<channel|>";
  if (!add_generation_prompt) return {out, generation};
  out += generation;
  return {out, generation};
}

// ---- Qwen3.5 (qwen35.md §9) --------------------------------------------------------------------
// The model's Jinja template (llama.cpp's models/templates/Qwen3.5-4B.jinja) written out in C++,
// with `tojson` as Hugging Face and llama.cpp's Jinja engine apply it: keys in their given order,
// ", " and ": " separators, non-ASCII characters kept.

void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void to_json_text(std::string& out, const Json& v) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ", ";
      first = false;
      json_string(out, it.key());
      out += ": ";
      to_json_text(out, it.value());
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ", ";
      to_json_text(out, v[i]);
    }
    out += ']';
  } else if (v.is_string()) {
    json_string(out, v.get_ref<const std::string&>());
  } else {
    out += v.dump();  // null, true/false, numbers
  }
}

std::string to_json_text(const Json& v) {
  std::string out;
  to_json_text(out, v);
  return out;
}

// `value | string` in the template (a tool-call argument that is not a mapping or a list).
std::string qwen_scalar_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  return v.dump();
}

bool is_tool_response_text(std::string_view s) {
  constexpr std::string_view kOpen = "<tool_response>", kClose = "</tool_response>";
  return s.size() >= kOpen.size() && s.substr(0, kOpen.size()) == kOpen &&
         s.size() >= kClose.size() && s.substr(s.size() - kClose.size()) == kClose;
}

std::string strip_left_newlines(std::string_view s) {
  const size_t b = s.find_first_not_of('\n');
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b));
}

std::string strip_right_newlines(std::string_view s) {
  const size_t e = s.find_last_not_of('\n');
  return e == std::string_view::npos ? std::string() : std::string(s.substr(0, e + 1));
}

constexpr std::string_view kQwenToolInstructions =
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    "</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
    "that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
    "Reminder:\n- Function calls MUST follow the specified format: an inner <function=...>"
    "</function> block must be nested within <tool_call></tool_call> XML tags\n- Required "
    "parameters MUST be specified\n- You may provide optional reasoning for your function call "
    "in natural language BEFORE the function call, but NOT after\n- If there is no function call "
    "available, answer the question like normal with your current knowledge and do not tell the "
    "user about function calls\n</IMPORTANT>";

std::pair<std::string, std::string> render_qwen35(const std::vector<ChatMessage>& messages,
                                                  const Json& tools, bool add_generation_prompt,
                                                  bool enable_thinking) {
  if (messages.empty()) fail("chat: no messages");
  std::string out;
  const bool system_first = messages[0].role == "system";
  if (!tools.empty()) {
    out += "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>";
    for (const Json& tool : tools) out += "\n" + lit(to_json_text(tool));
    out += "\n</tools>";
    out += kQwenToolInstructions;
    if (system_first) {
      const std::string content = trim(messages[0].content);
      if (!content.empty()) out += "\n\n" + lit(content);
    }
    out += "<|im_end|>\n";
  } else if (system_first) {
    out += "<|im_start|>system\n" + lit(trim(messages[0].content)) + "<|im_end|>\n";
  }

  // The last user message that is a real query (not a wrapped tool response).
  size_t last_query = messages.size();
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role == "user" && !is_tool_response_text(trim(messages[i].content))) {
      last_query = i;
      break;
    }
  }
  if (last_query == messages.size()) fail("chat: no user message (Qwen3.5's template needs one)");

  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::string content = trim(m.content);
    if (m.role == "system") {
      if (i != 0) fail("chat message {}: a system message must come first", i);
    } else if (m.role == "user") {
      out += "<|im_start|>user\n" + lit(content) + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string reasoning = m.reasoning_content;
      if (reasoning.empty() && content.find("</think>") != std::string::npos) {
        const std::string before = content.substr(0, content.find("</think>"));
        const size_t open = before.rfind("<think>");
        reasoning = strip_left_newlines(
            strip_right_newlines(open == std::string::npos ? before : before.substr(open + 7)));
        content = strip_left_newlines(content.substr(content.rfind("</think>") + 8));
      }
      reasoning = trim(reasoning);
      if (i > last_query) {
        out +=
            "<|im_start|>assistant\n<think>\n" + lit(reasoning) + "\n</think>\n\n" + lit(content);
      } else {
        out += "<|im_start|>assistant\n" + lit(content);
      }
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        const ToolCall& c = m.tool_calls[k];
        Json args;
        try {
          args = Json::parse(c.arguments);
        } catch (const std::exception&) {
          fail("chat message {}: tool call '{}': arguments are not valid JSON: {}", i, c.name,
               c.arguments.substr(0, 80));
        }
        if (!args.is_object()) {
          fail("chat message {}: tool call '{}': arguments must be a JSON object", i, c.name);
        }
        if (k > 0) {
          out += "\n";
        } else if (!content.empty()) {
          out += "\n\n";
        }
        out += "<tool_call>\n<function=" + lit(c.name) + ">\n";
        for (auto it = args.begin(); it != args.end(); ++it) {
          const Json& v = it.value();
          out += "<parameter=" + lit(it.key()) + ">\n";
          out += lit(v.is_object() || v.is_array() ? to_json_text(v) : qwen_scalar_text(v));
          out += "\n</parameter>\n";
        }
        out += "</function>\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i > 0 && messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + lit(content) + "\n</tool_response>";
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    } else {
      fail("chat message {}: role '{}' is not one of system, user, assistant, tool", i, m.role);
    }
  }
  std::string generation = "<|im_start|>assistant\n";
  generation += enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n";
  if (add_generation_prompt) out += generation;
  return {out, generation};
}

}  // namespace

std::vector<ChatMessage> messages_from_json(const Json& messages) {
  if (!messages.is_array()) fail("chat messages: expected a JSON array");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object() || !member(&m, "role") || !m["role"].is_string()) {
      fail("chat message {}: needs a string \"role\"", i);
    }
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    if (const Json* c = member(&m, "content")) {
      if (c->is_string()) {
        msg.content = c->get<std::string>();
      } else if (c->is_array()) {
        for (size_t k = 0; k < c->size(); ++k) {
          const Json& part = (*c)[k];
          if (text_of(member(&part, "type")) != "text") {
            fail("chat message {}: content part {}: only \"text\" parts are supported", i, k);
          }
          if (!msg.content.empty() || k > 0) msg.content += "\n";
          msg.content += text_of(member(&part, "text"));
        }
      } else if (!c->is_null()) {
        fail("chat message {}: \"content\" must be a string, a list of parts or null", i);
      }
    }
    if (const Json* calls = member(&m, "tool_calls"); calls && calls->is_array()) {
      for (const Json& call : *calls) {
        const Json* f = member(&call, "function");
        if (!f) fail("chat message {}: tool call without \"function\"", i);
        ToolCall tc;
        tc.name = text_of(member(f, "name"));
        const Json* args = member(f, "arguments");
        tc.arguments = args && args->is_string() ? args->get<std::string>()
                                                 : (args ? args->dump() : std::string("{}"));
        tc.id = text_of(member(&call, "id"));
        msg.tool_calls.push_back(std::move(tc));
      }
    }
    msg.tool_call_id = text_of(member(&m, "tool_call_id"));
    msg.reasoning_content = text_of(member(&m, "reasoning_content"));
    out.push_back(std::move(msg));
  }
  return out;
}

ChatTemplate ChatTemplate::for_source(std::string_view source, std::string* warning) {
  if (source.empty()) return ChatTemplate(ChatFormat::kNone);
  // Qwen3.5: ChatML turns with Qwen's XML tool calls (llama.cpp picks its "Qwen3-Coder" XML
  // format by these three markers).
  if (source.find("<|im_start|>") != std::string_view::npos &&
      source.find("<tool_call>") != std::string_view::npos &&
      source.find("<function=") != std::string_view::npos &&
      source.find("<parameter=") != std::string_view::npos) {
    return ChatTemplate(ChatFormat::kQwen35);
  }
  // llama.cpp recognises Gemma 4 templates by their tool-call marker.
  if (source.find("'<|tool_call>call:'") == std::string_view::npos && warning) {
    *warning =
        "the model's chat template is not a Gemma 4 template boltrt knows; using the built-in "
        "Gemma 4 chat format";
  }
  return ChatTemplate(ChatFormat::kGemma4);
}

ChatTemplate ChatTemplate::for_tokenizer(const Tokenizer& tokenizer, std::string* warning) {
  return for_source(tokenizer.chat_template(), warning);
}

ChatPrompt ChatTemplate::render(const std::vector<ChatMessage>& messages, const Json& tools,
                                const ChatOptions& options) const {
  if (format_ == ChatFormat::kNone) {
    fail("this model has no chat template (tokenizer.chat_template); use plain completion");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r.empty()) fail("chat message {}: empty role", i);
  }
  ChatPrompt p;
  if (format_ == ChatFormat::kQwen35) {
    auto [text, generation] = render_qwen35(messages, normalize_tools(tools),
                                            options.add_generation_prompt, options.enable_thinking);
    p.literal = take_literal_marks(text);
    p.generation_prompt = std::move(generation);
    p.text = std::move(text);
    return p;
  }
  const std::vector<RenderMessage> folded = fold_tool_messages(messages);
  auto [text, generation] = render_gemma4(folded, normalize_tools(tools),
                                          options.add_generation_prompt, options.enable_thinking);
  p.literal = take_literal_marks(text);
  p.generation_prompt = generation;
  if (options.add_generation_prompt && text.size() >= 8 &&
      text.compare(text.size() - 8, 8, "<turn|>\n") == 0) {
    // The template opened no model turn (content after tool results, thinking on).
    p.generation_prompt = "<|turn>model\n";
    text += p.generation_prompt;
  }
  p.text = std::move(text);
  return p;
}

}  // namespace boltrt::text

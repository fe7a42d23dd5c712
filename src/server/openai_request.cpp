#include "server/openai_request.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "batch/request.h"
#include "util/error.h"

namespace boltrt::server {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void bad(std::string param, std::string message) {
  throw ApiError(400, std::move(message), std::move(param));
}

[[noreturn]] void unsupported(std::string param, std::string message) {
  throw ApiError(400, std::move(message), std::move(param), "unsupported_parameter");
}

std::string type_of(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

// A present, non-null member (OpenAI clients send null for "not given").
const json* field(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

double number(const json& v, const std::string& name, double lo, double hi) {
  if (!v.is_number()) bad(name, fmt::format("'{}' must be a number, not {}", name, type_of(v)));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad(name, fmt::format("'{}' must be between {} and {}", name, lo, hi));
  return x;
}

int64_t integer(const json& v, const std::string& name, int64_t lo, int64_t hi) {
  if (!v.is_number_integer())
    bad(name, fmt::format("'{}' must be an integer, not {}", name, type_of(v)));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    bad(name, fmt::format("'{}' must be at most {}", name, hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) bad(name, fmt::format("'{}' must be between {} and {}", name, lo, hi));
  return x;
}

bool boolean(const json& v, const std::string& name) {
  if (!v.is_boolean()) bad(name, fmt::format("'{}' must be a boolean, not {}", name, type_of(v)));
  return v.get<bool>();
}

const std::string& string(const json& v, const std::string& name) {
  if (!v.is_string()) bad(name, fmt::format("'{}' must be a string, not {}", name, type_of(v)));
  return v.get_ref<const std::string&>();
}

bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// content: a string, or an array of {"type": "text", "text": ...} parts, or null where allowed.
void check_content(const json& m, const std::string& where, bool may_be_null) {
  const json* content = field(m, "content");
  if (content == nullptr) {
    if (!may_be_null) bad(where + ".content", fmt::format("'{}.content' is required", where));
    return;
  }
  if (content->is_string()) return;
  if (!content->is_array())
    bad(where + ".content",
        fmt::format("'{}.content' must be a string or an array of parts, not {}", where,
                    type_of(*content)));
  for (size_t k = 0; k < content->size(); ++k) {
    const json& part = (*content)[k];
    const std::string p = fmt::format("{}.content[{}]", where, k);
    if (!part.is_object()) bad(p, fmt::format("'{}' must be an object", p));
    const json* type = field(part, "type");
    if (type == nullptr || !type->is_string())
      bad(p + ".type", fmt::format("'{}.type' is required", p));
    const std::string& t = type->get_ref<const std::string&>();
    if (t == "text" || t == "refusal") {
      const json* text = field(part, t == "text" ? "text" : "refusal");
      if (text == nullptr || !text->is_string())
        bad(p + "." + t, fmt::format("'{}.{}' must be a string", p, t));
    } else if (t == "image_url" || t == "input_audio" || t == "file") {
      unsupported(
          p, fmt::format("'{}': {} parts are not supported (this server reads text only)", p, t));
    } else {
      bad(p + ".type", fmt::format("'{}.type' '{}' is not a known part type", p, t));
    }
  }
}

// Validates the messages and returns them in the form the chat renderer reads (refusal parts
// become text, tool call arguments stay JSON text).
json check_messages(const json& messages) {
  if (!messages.is_array())
    bad("messages", fmt::format("'messages' must be an array, not {}", type_of(messages)));
  if (messages.empty()) bad("messages", "'messages' must not be empty");
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad(where, fmt::format("'{}' must be an object", where));
    const json* role_value = field(m, "role");
    if (role_value == nullptr) bad(where + ".role", fmt::format("'{}.role' is required", where));
    const std::string& role = string(*role_value, where + ".role");
    if (const json* name = field(m, "name")) string(*name, where + ".name");
    json copy = m;
    if (role == "system" || role == "developer" || role == "user") {
      check_content(m, where, false);
    } else if (role == "assistant") {
      const json* calls = field(m, "tool_calls");
      check_content(m, where, true);
      if (calls != nullptr) {
        if (!calls->is_array())
          bad(where + ".tool_calls", fmt::format("'{}.tool_calls' must be an array", where));
        for (size_t k = 0; k < calls->size(); ++k) {
          const json& call = (*calls)[k];
          const std::string p = fmt::format("{}.tool_calls[{}]", where, k);
          if (!call.is_object()) bad(p, fmt::format("'{}' must be an object", p));
          if (const json* id = field(call, "id")) string(*id, p + ".id");
          if (const json* type = field(call, "type");
              type && string(*type, p + ".type") != "function")
            unsupported(p + ".type", fmt::format("'{}.type' must be \"function\"", p));
          const json* function = field(call, "function");
          if (function == nullptr || !function->is_object())
            bad(p + ".function", fmt::format("'{}.function' must be an object", p));
          const json* name = field(*function, "name");
          if (name == nullptr)
            bad(p + ".function.name", fmt::format("'{}.function.name' is required", p));
          string(*name, p + ".function.name");
          const json* args = field(*function, "arguments");
          if (args != nullptr) {
            if (args->is_string()) {
              const json parsed = json::parse(args->get_ref<const std::string&>(), nullptr, false);
              if (parsed.is_discarded())
                bad(p + ".function.arguments",
                    fmt::format("'{}.function.arguments' is not valid JSON", p));
            } else if (!args->is_object()) {
              bad(p + ".function.arguments",
                  fmt::format("'{}.function.arguments' must be a JSON string", p));
            }
          }
        }
      }
      if (const json* r = field(m, "reasoning_content")) string(*r, where + ".reasoning_content");
      if (const json* r = field(m, "reasoning")) {
        string(*r, where + ".reasoning");
        if (!copy.contains("reasoning_content")) copy["reasoning_content"] = *r;
      }
      if (field(m, "content") == nullptr) copy["content"] = "";
      if (const json* refusal = field(m, "refusal"); refusal && !field(m, "content"))
        copy["content"] = string(*refusal, where + ".refusal");
      if (const json* content = field(copy, "content"); content && content->is_array()) {
        // refusal parts are text for the template
        json parts = json::array();
        for (const json& part : *content) {
          if (part["type"] == "refusal") {
            parts.push_back({{"type", "text"}, {"text", part["refusal"]}});
          } else {
            parts.push_back(part);
          }
        }
        copy["content"] = std::move(parts);
      }
    } else if (role == "tool") {
      check_content(m, where, false);
      const json* id = field(m, "tool_call_id");
      if (id == nullptr)
        bad(where + ".tool_call_id", fmt::format("'{}.tool_call_id' is required", where));
      string(*id, where + ".tool_call_id");
    } else if (role == "function") {
      unsupported(where + ".role",
                  fmt::format("'{}.role' \"function\" is deprecated; use \"tool\"", where));
    } else {
      bad(where + ".role", fmt::format("'{}.role' '{}' is not one of system, developer, user, "
                                       "assistant, tool",
                                       where, role));
    }
    out.push_back(std::move(copy));
  }
  return out;
}

json check_tools(const json& tools) {
  if (!tools.is_array())
    bad("tools", fmt::format("'tools' must be an array, not {}", type_of(tools)));
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string p = fmt::format("tools[{}]", i);
    if (!t.is_object()) bad(p, fmt::format("'{}' must be an object", p));
    const json* type = field(t, "type");
    if (type == nullptr) bad(p + ".type", fmt::format("'{}.type' is required", p));
    if (string(*type, p + ".type") != "function")
      unsupported(
          p + ".type",
          fmt::format("'{}.type' must be \"function\" (custom tools are not supported)", p));
    const json* f = field(t, "function");
    if (f == nullptr || !f->is_object())
      bad(p + ".function", fmt::format("'{}.function' must be an object", p));
    const json* name = field(*f, "name");
    if (name == nullptr)
      bad(p + ".function.name", fmt::format("'{}.function.name' is required", p));
    if (!valid_function_name(string(*name, p + ".function.name")))
      bad(p + ".function.name",
          fmt::format("'{}.function.name' must be 1-64 characters of a-z, A-Z, 0-9, _ and -", p));
    if (const json* d = field(*f, "description")) string(*d, p + ".function.description");
    if (const json* params = field(*f, "parameters"); params && !params->is_object())
      bad(p + ".function.parameters", fmt::format("'{}.function.parameters' must be an object", p));
    if (const json* strict = field(*f, "strict")) boolean(*strict, p + ".function.strict");
  }
  return tools;
}

json parse_object(std::string_view body) {
  if (!batch::is_valid_utf8(body)) bad("", "the request body is not valid UTF-8");
  json object;
  try {
    object = json::parse(body);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    const size_t at = what.find("] ");
    bad("", fmt::format("the request body is not valid JSON: {}",
                        at == std::string::npos ? what : what.substr(at + 2)));
  }
  if (!object.is_object())
    bad("", fmt::format("the request body must be a JSON object, not {}", type_of(object)));
  return object;
}

ReasoningMode reasoning_mode(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? ReasoningMode::kOn : ReasoningMode::kOff;
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "on") return ReasoningMode::kOn;
    if (s == "off") return ReasoningMode::kOff;
    if (s == "auto") return ReasoningMode::kAuto;
  }
  bad("reasoning", "'reasoning' must be true, false, \"on\", \"off\" or \"auto\"");
}

// The fields chat and completions share.
void parse_common(const json& o, ServeRequest& r) {
  const json* model = field(o, "model");
  if (model == nullptr) bad("model", "'model' is required");
  r.model = string(*model, "model");

  const char* limit_names[] = {"max_tokens", "max_completion_tokens", "n_predict"};
  for (const char* name : limit_names) {
    if (const json* v = field(o, name))
      r.max_tokens = integer(*v, name, 1, std::numeric_limits<int32_t>::max());
  }
  if (const json* v = field(o, "temperature"))
    r.temperature = static_cast<float>(number(*v, "temperature", 0, 2));
  if (const json* v = field(o, "top_p")) r.top_p = static_cast<float>(number(*v, "top_p", 0, 1));
  if (const json* v = field(o, "min_p")) r.min_p = static_cast<float>(number(*v, "min_p", 0, 1));
  if (const json* v = field(o, "top_k"))
    r.top_k = static_cast<int32_t>(integer(*v, "top_k", 0, std::numeric_limits<int32_t>::max()));
  if (const json* v = field(o, "frequency_penalty"))
    r.frequency_penalty = static_cast<float>(number(*v, "frequency_penalty", -2, 2));
  if (const json* v = field(o, "presence_penalty"))
    r.presence_penalty = static_cast<float>(number(*v, "presence_penalty", -2, 2));
  if (const json* v = field(o, "seed")) {
    if (!v->is_number_integer())
      bad("seed", fmt::format("'seed' must be an integer, not {}", type_of(*v)));
    // Any 64-bit seed maps onto the sampler's 32-bit ones, never onto "random" (0xFFFFFFFF).
    const uint64_t s =
        v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
    r.seed = static_cast<uint32_t>(s % 0xFFFFFFFFull);
  }
  if (const json* v = field(o, "stop")) {
    if (v->is_string()) {
      r.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      if (v->size() > 16) bad("stop", "'stop' holds more than 16 strings");
      for (const json& s : *v) r.stop.push_back(string(s, "stop"));
    } else {
      bad("stop",
          fmt::format("'stop' must be a string or an array of strings, not {}", type_of(*v)));
    }
    for (const auto& s : r.stop)
      if (s.empty()) bad("stop", "'stop' holds an empty string");
  }
  if (const json* v = field(o, "stream")) r.stream = boolean(*v, "stream");
  if (const json* v = field(o, "stream_options")) {
    if (!v->is_object()) bad("stream_options", "'stream_options' must be an object");
    if (const json* u = field(*v, "include_usage"))
      r.include_usage = boolean(*u, "stream_options.include_usage");
  }
  if (const json* v = field(o, "n")) r.n = static_cast<int>(integer(*v, "n", 1, 128));
  if (const json* v = field(o, "logit_bias")) {
    try {
      r.logit_bias = batch::parse_logit_bias(*v);
    } catch (const Error& e) {
      bad("logit_bias", e.what());
    }
  }

  if (const json* v = field(o, "reasoning_effort")) {
    const std::string& effort = string(*v, "reasoning_effort");
    if (effort == "none") {
      r.reasoning = ReasoningMode::kOff;
    } else if (effort == "minimal" || effort == "low" || effort == "medium" || effort == "high") {
      r.reasoning = ReasoningMode::kOn;
      r.reasoning_budget = effort == "minimal"  ? 256
                           : effort == "low"    ? 1024
                           : effort == "medium" ? 4096
                                                : 16384;
    } else if (effort == "xhigh" || effort == "max") {
      r.reasoning = ReasoningMode::kOn;
      r.reasoning_budget = -1;
    } else {
      bad("reasoning_effort",
          "'reasoning_effort' must be none, minimal, low, medium, high, xhigh or max");
    }
  }
  if (const json* v = field(o, "chat_template_kwargs")) {
    if (!v->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    if (const json* t = field(*v, "enable_thinking"))
      r.reasoning = boolean(*t, "chat_template_kwargs.enable_thinking") ? ReasoningMode::kOn
                                                                        : ReasoningMode::kOff;
  }
  if (const json* v = field(o, "reasoning")) r.reasoning = reasoning_mode(*v);
  if (const json* v = field(o, "reasoning_budget"))
    r.reasoning_budget = integer(*v, "reasoning_budget", -1, std::numeric_limits<int32_t>::max());
  if (const json* v = field(o, "reasoning_block_budget"))
    r.reasoning_block_budget =
        integer(*v, "reasoning_block_budget", -1, std::numeric_limits<int32_t>::max());

  if (const json* v = field(o, "response_format")) {
    if (!v->is_object()) bad("response_format", "'response_format' must be an object");
    const json* type = field(*v, "type");
    if (type == nullptr) bad("response_format.type", "'response_format.type' is required");
    const std::string& t = string(*type, "response_format.type");
    if (t == "json_schema") {
      const json* schema = field(*v, "json_schema");
      if (schema == nullptr || !schema->is_object())
        bad("response_format.json_schema", "'response_format.json_schema' must be an object");
      const json* name = field(*schema, "name");
      if (name == nullptr || !name->is_string() || !valid_function_name(name->get<std::string>()))
        bad("response_format.json_schema.name",
            "'response_format.json_schema.name' must be 1-64 characters of a-z, A-Z, 0-9, _ and -");
      if (const json* s = field(*schema, "schema"); s && !s->is_object() && !s->is_boolean())
        bad("response_format.json_schema.schema",
            "'response_format.json_schema.schema' must be an object");
      if (const json* d = field(*schema, "description"))
        string(*d, "response_format.json_schema.description");
      if (const json* strict = field(*schema, "strict"))
        boolean(*strict, "response_format.json_schema.strict");
    } else if (t != "text" && t != "json_object") {
      bad("response_format.type",
          "'response_format.type' must be text, json_object or json_schema");
    }
    r.response_format = *v;
  }

  for (const char* name : {"prediction", "audio"}) {
    if (field(o, name)) unsupported(name, fmt::format("'{}' is not supported", name));
  }
}

}  // namespace

std::string error_body(int status, std::string_view message, std::string_view param,
                       std::string_view code, std::string_view type) {
  std::string t(type);
  if (t.empty()) {
    switch (status) {
      case 401:
        t = "authentication_error";
        break;
      case 404:
        t = "not_found_error";
        break;
      case 429:
        t = "rate_limit_error";
        break;
      case 503:
        t = "unavailable_error";
        break;
      default:
        t = status >= 500 ? "server_error" : "invalid_request_error";
    }
  }
  json e;
  e["message"] = std::string(message);
  e["type"] = t;
  e["param"] = param.empty() ? json() : json(std::string(param));
  e["code"] = code.empty() ? json() : json(std::string(code));
  return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

ServeRequest parse_chat_request(std::string_view body) {
  const json o = parse_object(body);
  ServeRequest r;
  r.chat = true;
  parse_common(o, r);
  const json* messages = field(o, "messages");
  if (messages == nullptr) bad("messages", "'messages' is required");
  r.messages = check_messages(*messages);
  if (const json* tools = field(o, "tools")) r.tools = check_tools(*tools);
  if (const json* choice = field(o, "tool_choice")) {
    if (choice->is_string()) {
      const auto& c = choice->get_ref<const std::string&>();
      if (c == "auto") {
        r.tool_choice = ToolChoice::kAuto;
      } else if (c == "none") {
        r.tool_choice = ToolChoice::kNone;
      } else if (c == "required") {
        r.tool_choice = ToolChoice::kRequired;
      } else {
        bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or an object");
      }
    } else if (choice->is_object()) {
      const json* type = field(*choice, "type");
      if (type == nullptr || !type->is_string())
        bad("tool_choice.type", "'tool_choice.type' is required");
      if (type->get<std::string>() != "function")
        unsupported("tool_choice.type",
                    "only {\"type\": \"function\"} tool_choice objects are supported");
      const json* f = field(*choice, "function");
      const json* name = f && f->is_object() ? field(*f, "name") : nullptr;
      if (name == nullptr)
        bad("tool_choice.function.name", "'tool_choice.function.name' is required");
      r.tool_choice = ToolChoice::kFunction;
      r.tool_choice_name = string(*name, "tool_choice.function.name");
    } else {
      bad("tool_choice",
          fmt::format("'tool_choice' must be a string or an object, not {}", type_of(*choice)));
    }
    if (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kFunction) {
      if (r.tools.is_null() || r.tools.empty())
        bad("tool_choice", "'tool_choice' asks for a tool call but 'tools' is empty");
      if (r.tool_choice == ToolChoice::kFunction) {
        bool found = false;
        for (const json& t : r.tools) found = found || t["function"]["name"] == r.tool_choice_name;
        if (!found)
          bad("tool_choice.function.name",
              fmt::format("'tool_choice' names '{}', which is not in 'tools'", r.tool_choice_name));
      }
    }
  }
  if (const json* v = field(o, "parallel_tool_calls"))
    r.parallel_tool_calls = boolean(*v, "parallel_tool_calls");
  const json* logprobs = field(o, "logprobs");
  const bool want_logprobs = logprobs && boolean(*logprobs, "logprobs");
  if (const json* v = field(o, "top_logprobs")) {
    const int64_t n = integer(*v, "top_logprobs", 0, 20);
    if (!want_logprobs) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.top_logprobs = static_cast<int>(n);
  } else if (want_logprobs) {
    r.top_logprobs = 0;
  }
  return r;
}

ServeRequest parse_completion_request(std::string_view body) {
  const json o = parse_object(body);
  ServeRequest r;
  r.chat = false;
  parse_common(o, r);
  const json* prompt = field(o, "prompt");
  if (prompt == nullptr) bad("prompt", "'prompt' is required");
  if (prompt->is_string()) {
    r.prompt = prompt->get<std::string>();
  } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    r.prompt = (*prompt)[0].get<std::string>();
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_string()) {
    unsupported("prompt", "several prompts in one request are not supported yet");
  } else if (prompt->is_array()) {
    unsupported("prompt", "token-id prompts are not supported yet; send text");
  } else {
    bad("prompt", fmt::format("'prompt' must be a string, not {}", type_of(*prompt)));
  }
  if (r.prompt.empty()) bad("prompt", "'prompt' is empty");
  if (const json* v = field(o, "echo")) r.echo = boolean(*v, "echo");
  if (const json* v = field(o, "suffix"); v && !(v->is_string() && v->get<std::string>().empty()))
    unsupported("suffix", "'suffix' (fill in the middle) is not supported");
  if (const json* v = field(o, "best_of"); v && integer(*v, "best_of", 1, 128) != 1)
    unsupported("best_of", "'best_of' > 1 is not supported");
  // Legacy completions: `logprobs` is the number of alternatives (0-5), not a switch.
  if (const json* v = field(o, "logprobs"))
    r.top_logprobs = static_cast<int>(integer(*v, "logprobs", 0, 5));
  return r;
}

}  // namespace boltrt::server

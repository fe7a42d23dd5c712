#include "batch/request.h"

#include <cmath>
#include <limits>

#include "util/error.h"

namespace boltrt::batch {
namespace {

using json = nlohmann::ordered_json;

double number_field(const json& object, const char* name) {
  const json& value = object.at(name);
  if (!value.is_number()) fail("field '{}' must be a number, not {}", name, value.type_name());
  const double x = value.get<double>();
  if (!std::isfinite(x)) fail("field '{}' must be finite", name);
  return x;
}

int64_t integer_field(const json& object, const char* name) {
  const json& value = object.at(name);
  if (!value.is_number_integer()) {
    fail("field '{}' must be an integer, not {}", name,
         value.is_number() ? "a fraction" : value.type_name());
  }
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail("field '{}' is too large", name);
  }
  return value.get<int64_t>();
}

ReasoningMode reasoning_field(const json& value) {
  if (value.is_boolean()) return value.get<bool>() ? ReasoningMode::kOn : ReasoningMode::kOff;
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    if (s == "on") return ReasoningMode::kOn;
    if (s == "off") return ReasoningMode::kOff;
    if (s == "auto") return ReasoningMode::kAuto;
  }
  fail("field 'reasoning' must be true, false, \"on\", \"off\" or \"auto\", not {}", value.dump());
}

void check_messages(const json& messages) {
  if (!messages.is_array()) fail("field 'messages' must be an array");
  if (messages.empty()) fail("field 'messages' is empty");
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    if (!m.is_object()) fail("messages[{}] must be an object", i);
    if (!m.contains("role") || !m["role"].is_string()) fail("messages[{}] has no string 'role'", i);
    const bool has_tool_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (m.contains("content") && !m["content"].is_null()) {
      if (!m["content"].is_string()) fail("messages[{}].content must be a string", i);
    } else if (!has_tool_calls) {
      fail("messages[{}] has no 'content'", i);
    }
  }
}

}  // namespace

bool is_valid_utf8(std::string_view text, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    size_t len = 0;
    uint32_t min = 0, cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, cp = c & 0x07;
    } else {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    if (i + len > n) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) {
        if (bad_offset) *bad_offset = i;
        return false;
      }
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

// response_format / grammar -> the output constraint (compiled here so that errors are the
// line's).
static OutputConstraint constraint_fields(const json& object) {
  OutputConstraint c;
  if (object.contains("response_format") && !object["response_format"].is_null()) {
    const json& rf = object["response_format"];
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
      fail("field 'response_format' must be an object with a string 'type'");
    }
    const std::string type = rf["type"].get<std::string>();
    if (type == "json_object") {
      c = OutputConstraint::json_object();
    } else if (type == "json_schema") {
      if (!rf.contains("json_schema") || !rf["json_schema"].is_object()) {
        fail("field 'response_format': type json_schema needs a 'json_schema' object");
      }
      const json& js = rf["json_schema"];
      if (!js.contains("schema") || !(js["schema"].is_object() || js["schema"].is_boolean())) {
        fail("field 'response_format.json_schema' needs a 'schema' object");
      }
      if (js.contains("strict") && !js["strict"].is_boolean() && !js["strict"].is_null()) {
        fail("field 'response_format.json_schema.strict' must be a boolean");
      }
      c = OutputConstraint::json_schema(js["schema"].dump());
    } else if (type != "text") {
      fail(
          "field 'response_format': type must be \"text\", \"json_object\" or "
          "\"json_schema\", not \"{}\"",
          type);
    }
  }
  if (object.contains("grammar") && !object["grammar"].is_null()) {
    if (!object["grammar"].is_string()) fail("field 'grammar' must be a string (GBNF)");
    if (c.active()) fail("give either 'grammar' or a JSON 'response_format', not both");
    c = OutputConstraint::grammar(object["grammar"].get<std::string>());
  }
  if (c.active()) compile_constraint(c);
  return c;
}

std::string id_key(const json& id) {
  return id.dump();
}

BatchRequest parse_request(std::string_view line, int64_t line_number) {
  size_t bad = 0;
  if (!is_valid_utf8(line, &bad)) fail("invalid UTF-8 at byte {}", bad);
  json object;
  try {
    object = json::parse(line);
  } catch (const json::parse_error& e) {
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at ...".
    std::string what = e.what();
    const size_t at = what.find("] ");
    fail("bad JSON: {}", at == std::string::npos ? what : what.substr(at + 2));
  }
  if (!object.is_object()) fail("a request must be a JSON object, not {}", object.type_name());

  BatchRequest r;
  r.line = line_number;
  if (!object.contains("id") || object["id"].is_null()) fail("missing 'id'");
  r.id = object["id"];
  if (!r.id.is_string() && !r.id.is_number_integer())
    fail("'id' must be a string or an integer, not {}", r.id.type_name());
  if (r.id.is_string() && r.id.get_ref<const std::string&>().empty()) fail("'id' is empty");
  r.key = id_key(r.id);

  const bool has_prompt = object.contains("prompt") && !object["prompt"].is_null();
  const bool has_messages = object.contains("messages") && !object["messages"].is_null();
  if (has_prompt && has_messages) fail("give either 'prompt' or 'messages', not both");
  if (!has_prompt && !has_messages) fail("missing 'prompt' or 'messages'");
  if (has_prompt) {
    if (!object["prompt"].is_string()) fail("field 'prompt' must be a string");
    r.prompt = object["prompt"].get<std::string>();
    if (r.prompt->empty()) fail("field 'prompt' is empty");
  } else {
    check_messages(object["messages"]);
    r.messages = object["messages"];
  }
  if (object.contains("tools") && !object["tools"].is_null()) {
    if (!object["tools"].is_array()) fail("field 'tools' must be an array");
    if (!has_messages) fail("field 'tools' needs 'messages'");
    r.tools = object["tools"];
  }

  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (object.contains(name) && !object[name].is_null()) {
      const int64_t n = integer_field(object, name);
      if (n < 0) fail("field '{}' must be >= 0", name);
      r.max_tokens = n;
    }
  }
  if (object.contains("temperature") && !object["temperature"].is_null()) {
    const double t = number_field(object, "temperature");
    if (t < 0) fail("field 'temperature' must be >= 0");
    r.temperature = static_cast<float>(t);
  }
  if (object.contains("top_p") && !object["top_p"].is_null()) {
    const double p = number_field(object, "top_p");
    if (!(p > 0 && p <= 1)) fail("field 'top_p' must be in (0, 1]");
    r.top_p = static_cast<float>(p);
  }
  if (object.contains("min_p") && !object["min_p"].is_null()) {
    const double p = number_field(object, "min_p");
    if (!(p >= 0 && p <= 1)) fail("field 'min_p' must be in [0, 1]");
    r.min_p = static_cast<float>(p);
  }
  if (object.contains("top_k") && !object["top_k"].is_null()) {
    const int64_t k = integer_field(object, "top_k");
    if (k < 0 || k > std::numeric_limits<int32_t>::max()) fail("field 'top_k' is out of range");
    r.top_k = static_cast<int32_t>(k);
  }
  for (const char* name : {"frequency_penalty", "presence_penalty"}) {
    if (object.contains(name) && !object[name].is_null()) {
      const double x = number_field(object, name);
      if (x < -2 || x > 2) fail("field '{}' must be in [-2, 2]", name);
      (name[0] == 'f' ? r.frequency_penalty : r.presence_penalty) = static_cast<float>(x);
    }
  }
  if (object.contains("seed") && !object["seed"].is_null()) {
    const int64_t seed = integer_field(object, "seed");
    if (seed < 0 || seed >= 0xFFFFFFFFll)
      fail("field 'seed' must be in [0, 4294967294]");  // 0xFFFFFFFF means "random"
    r.seed = static_cast<uint32_t>(seed);
  }
  if (object.contains("stop") && !object["stop"].is_null()) {
    const json& stop = object["stop"];
    if (stop.is_string()) {
      r.stop.push_back(stop.get<std::string>());
    } else if (stop.is_array()) {
      for (const json& s : stop) {
        if (!s.is_string()) fail("field 'stop' must hold strings only");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      fail("field 'stop' must be a string or an array of strings");
    }
    for (const auto& s : r.stop)
      if (s.empty()) fail("field 'stop' holds an empty string");
  }
  if (object.contains("logit_bias") && !object["logit_bias"].is_null())
    r.logit_bias = parse_logit_bias(object["logit_bias"]);
  if (object.contains("reasoning") && !object["reasoning"].is_null())
    r.reasoning = reasoning_field(object["reasoning"]);
  if (object.contains("reasoning_budget") && !object["reasoning_budget"].is_null()) {
    const int64_t b = integer_field(object, "reasoning_budget");
    if (b < -1) fail("field 'reasoning_budget' must be >= -1");
    r.reasoning_budget = b;
  }
  if (object.contains("reasoning_block_budget") && !object["reasoning_block_budget"].is_null()) {
    const int64_t b = integer_field(object, "reasoning_block_budget");
    if (b < -1) fail("field 'reasoning_block_budget' must be >= -1");
    r.reasoning_block_budget = b;
  }
  r.constraint = constraint_fields(object);
  if (object.contains("tool_choice")) {
    if (!r.tools) fail("field 'tool_choice' needs 'tools'");
    r.tool_choice = text::ToolChoice::from_json(object["tool_choice"]);
  }
  if (object.contains("parallel_tool_calls") && !object["parallel_tool_calls"].is_null()) {
    if (!object["parallel_tool_calls"].is_boolean())
      fail("field 'parallel_tool_calls' must be a boolean");
    r.tool_choice.parallel = object["parallel_tool_calls"].get<bool>();
  }
  return r;
}

std::vector<LogitBias> parse_logit_bias(const json& value) {
  if (!value.is_object())
    fail("'logit_bias' must be an object mapping token ids to biases, not {}", value.type_name());
  if (value.size() > 1024) fail("'logit_bias' holds more than 1024 tokens");
  std::vector<LogitBias> out;
  for (const auto& [key, bias] : value.items()) {
    // Keys are token ids in decimal ("15043"), as OpenAI's clients send them.
    const bool digits = !key.empty() && key.size() <= 10 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    const int64_t id = digits ? std::stoll(key) : -1;
    if (!digits || id > std::numeric_limits<int32_t>::max())
      fail("'logit_bias' key '{}' is not a token id (a decimal integer)", key);
    if (!bias.is_number()) fail("'logit_bias.{}' must be a number, not {}", key, bias.type_name());
    const double x = bias.get<double>();
    if (!std::isfinite(x) || x < -100 || x > 100)
      fail("'logit_bias.{}' must be between -100 and 100", key);
    out.push_back({static_cast<int32_t>(id), static_cast<float>(x)});
  }
  return out;
}

void check_logit_bias(const std::vector<LogitBias>& bias, int64_t n_vocab) {
  for (const LogitBias& b : bias) {
    if (b.token < 0 || b.token >= n_vocab)
      fail("'logit_bias' names token {}; the vocabulary has {} tokens (0-{})", b.token, n_vocab,
           n_vocab - 1);
  }
}

}  // namespace boltrt::batch

// The OpenAI request bodies `boltrt serve` accepts, validated into one ServeRequest.
//
// Chat (POST /v1/chat/completions) and legacy completions (POST /v1/completions) share the
// sampling fields and `response_format`. Every malformed body or mistyped field is an ApiError
// (HTTP 400, an OpenAI error object whose `param` names the field), raised before anything is
// queued or streamed. Fields the engine cannot honour are 400 naming the field; fields of hosted
// services (store, metadata, user, ...) are accepted and ignored, as other local servers do. The
// schema of a `response_format` and the tools' parameters are compiled by the server (an
// unsupported keyword is a 400 there).
//
// Reasoning: `reasoning_effort` none -> thinking off; minimal / low / medium / high -> thinking
// on with a budget of 256 / 1024 / 4096 / 16384 tokens; xhigh / max -> on, unlimited.
// Extensions win over it: `reasoning` (true/false/"on"/"off"/"auto"), `reasoning_budget` and
// `reasoning_block_budget` (-1 unlimited), `chat_template_kwargs.enable_thinking`.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "generate/reasoning.h"
#include "generate/sampler.h"

namespace boltrt::server {

// An error answered as {"error": {"message", "type", "param", "code"}}.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = "", std::string code = "",
           std::string type = "")
      : std::runtime_error(std::move(message)),
        status(status),
        param(std::move(param)),
        code(std::move(code)),
        type(std::move(type)) {}
  int status;
  std::string param, code, type;  // "" -> null (type: chosen from the status)
};

// The error body (also used for errors of the HTTP layer).
std::string error_body(int status, std::string_view message, std::string_view param = "",
                       std::string_view code = "", std::string_view type = "");

enum class ToolChoice { kAuto, kNone, kRequired, kFunction };

struct ServeRequest {
  bool chat = true;
  std::string model;
  nlohmann::ordered_json messages;  // chat: validated OpenAI messages
  nlohmann::ordered_json tools;     // null or an array of function tools
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;  // kFunction
  bool parallel_tool_calls = true;
  nlohmann::ordered_json response_format;  // null or {"type": "text" | ...} (both endpoints)
  std::string prompt;                      // completions
  bool echo = false;                       // completions: prepend the prompt

  std::optional<int64_t> max_tokens;
  std::optional<float> temperature, top_p, min_p, frequency_penalty, presence_penalty;
  std::optional<int32_t> top_k;
  std::optional<uint32_t> seed;
  std::vector<std::string> stop;
  // logit_bias: {"token id": bias in [-100, 100]}; the ids are checked against the vocabulary
  // by the server (the parser does not know it).
  std::vector<LogitBias> logit_bias;

  int top_logprobs = -1;  // >= 0: logprobs with that many alternatives per token

  int n = 1;  // choices, each generated as its own sequence
  bool stream = false;
  bool include_usage = false;

  ReasoningMode reasoning = ReasoningMode::kAuto;
  std::optional<int64_t> reasoning_budget, reasoning_block_budget;
};

// Throws ApiError.
ServeRequest parse_chat_request(std::string_view body);
ServeRequest parse_completion_request(std::string_view body);

}  // namespace boltrt::server

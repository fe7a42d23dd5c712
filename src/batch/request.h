// BatchRequest — one line of a `boltrt batch` input file (JSON Lines), validated.
//
//   {"id": "q1", "prompt": "Once upon a time", "max_tokens": 64}
//   {"id": 7, "messages": [{"role": "user", "content": "Hi"}], "temperature": 0, "stop": ["\n"],
//    "seed": 1, "reasoning": "off", "reasoning_budget": 128}
//
// Field names follow OpenAI's API (max_tokens or max_completion_tokens, temperature, top_p,
// stop, seed, frequency_penalty, presence_penalty) plus top_k, min_p, reasoning (true/false or
// "on"/"off"/"auto"), reasoning_budget and reasoning_block_budget (-1 unlimited; the block
// budget caps each thought block, the budget all of them), response_format (OpenAI's shapes)
// and grammar (GBNF) for structured output, and logit_bias ({"token id": bias in [-100, 100]}).
// Unknown fields are ignored, as an OpenAI-compatible server would, so files written for other
// engines run unchanged.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "generate/grammar_controller.h"
#include "generate/reasoning.h"
#include "generate/sampler.h"
#include "text/tool_grammar.h"

namespace boltrt::batch {

struct BatchRequest {
  int64_t line = 0;           // 1-based line number in the input file
  nlohmann::ordered_json id;  // a string or an integer, echoed verbatim in the result
  std::string key;            // id as compact JSON: the identity used for resume and duplicates
  std::optional<std::string> prompt;               // plain completion ...
  std::optional<nlohmann::ordered_json> messages;  // ... or chat: [{"role", "content"}, ...]
  std::optional<nlohmann::ordered_json> tools;     // tool declarations (chat only), passed through
  std::optional<int64_t> max_tokens;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<float> min_p;
  std::optional<float> frequency_penalty;
  std::optional<float> presence_penalty;
  std::optional<uint32_t> seed;
  std::vector<std::string> stop;
  std::vector<LogitBias> logit_bias;  // ids checked against the vocabulary when run
  ReasoningMode reasoning = ReasoningMode::kAuto;
  std::optional<int64_t> reasoning_budget;        // -1 unlimited, 0 no thinking tokens
  std::optional<int64_t> reasoning_block_budget;  // each thought block's own cap; -1 unlimited
  // response_format ({"type": "json_object"} or {"type": "json_schema", "json_schema":
  // {"name", "schema", "strict"}}; "text" = none) or grammar (GBNF text): compiled at parse
  // time, so a malformed one is a bad line.
  OutputConstraint constraint;
  // tool_choice and parallel_tool_calls (with tools): the format's tool-call grammar.
  text::ToolChoice tool_choice;
};

// Parses one input line. Throws boltrt::Error with a one-line reason (invalid UTF-8 at byte N,
// bad JSON, a missing or mistyped field, ...); the caller adds the line number.
BatchRequest parse_request(std::string_view line, int64_t line_number);

// OpenAI's logit_bias: an object whose keys are token ids in decimal and whose values are
// numbers in [-100, 100]. Throws boltrt::Error naming the bad key or value. Shared by batch
// lines and `boltrt serve`.
std::vector<LogitBias> parse_logit_bias(const nlohmann::ordered_json& value);
// Throws boltrt::Error when a biased token is not in a vocabulary of n_vocab tokens.
void check_logit_bias(const std::vector<LogitBias>& bias, int64_t n_vocab);

// True when `text` is well-formed UTF-8; otherwise *bad_offset is the first bad byte.
bool is_valid_utf8(std::string_view text, size_t* bad_offset = nullptr);

// The identity of an id value (compact JSON: "\"q1\"" and "7" differ).
std::string id_key(const nlohmann::ordered_json& id);

}  // namespace boltrt::batch

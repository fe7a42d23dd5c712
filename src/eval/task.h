// One line of a `boltrt eval` task file (JSON Lines): a batch request (request.h: "id",
// "prompt" or "messages", "tools", "tool_choice", "response_format", "max_tokens", "reasoning",
// "reasoning_budget", sampling fields ...) plus the eval's own fields:
//
//   {"id": "capital-fr", "category": "geography", "prompt": "The capital of France is",
//    "max_tokens": 8, "check": {"type": "contains", "value": "Paris"}}
//
// "category" (a string; default "general") groups tasks in the report; "check" (check.h) says
// how the answer is judged. A line that is not valid JSON, not a valid request, has no or an
// unknown check, or repeats an id is reported with its line number and skipped.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "eval/check.h"

namespace boltrt::eval {

struct Task {
  int64_t line = 0;           // 1-based line in its file (0 for generated suite tasks)
  nlohmann::ordered_json id;  // a string or an integer
  std::string key;            // id as compact JSON (batch::id_key)
  std::string category = "general";
  Check check;
  nlohmann::ordered_json request;  // the batch request line: the task without category/check
};

struct TaskError {
  int64_t line = 0;
  std::string message;
};

struct TaskFile {
  std::vector<Task> tasks;
  std::vector<TaskError> errors;
};

// Parses one line. Throws boltrt::Error with a one-line reason (the caller adds the line).
Task parse_task(std::string_view line, int64_t line_number);
// A task from a JSON object (the generated suites build them this way). Throws boltrt::Error.
Task make_task(nlohmann::ordered_json object, int64_t line_number);

// Reads a whole file: valid tasks in file order, the rest as errors. Throws boltrt::Error when
// the file cannot be read.
TaskFile read_tasks(const std::string& path);
// The same for text already in memory.
TaskFile parse_tasks(std::string_view text);

// Appends `more` to `file`, reporting ids that are already taken as errors (line 0).
void add_tasks(TaskFile& file, std::vector<Task> more);

}  // namespace boltrt::eval

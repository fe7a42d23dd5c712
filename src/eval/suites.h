// The built-in task suites of `boltrt eval --suite NAME`, generated from a seed (the same seed
// gives the same tasks on every machine: the generator uses its own arithmetic on a
// std::mt19937, never the implementation-defined std distributions):
//
//   tool-calling  single, multiple-choice-of-function and parallel function calls with typed
//                 arguments (strings, integers, numbers, booleans, enums), checked by value
//                 (check tool_call, exact arguments); categories tool-single, tool-multiple,
//                 tool-parallel.
//   needle        long-context retrieval: one key ("needle") or one among distractor keys hidden
//                 at given depths in filler text of given lengths (tokens, counted with the
//                 model's tokenizer, lengths above `max_length` clipped to it); categories
//                 needle-LENGTH.
//   budget        short arithmetic word problems with numeric answers, run with thinking on,
//                 meant for a sweep of reasoning budgets; category arithmetic.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/task.h"

namespace boltrt::eval {

struct SuiteOptions {
  uint32_t seed = 1;
  int count = 8;  // tasks per kind (tool-calling, budget) or per cell
  std::vector<int64_t> lengths = {4096, 16384, 65536};  // needle: prompt tokens
  std::vector<double> depths = {0.1, 0.5, 0.9};         // needle: where the key sits (0..1)
  int64_t max_length = 4096;  // needle: longest prompt (the context minus the answer's room)
  // Counts the tokens of a text (the model's tokenizer); needle lengths are measured with it.
  std::function<int64_t(std::string_view)> count_tokens;
};

// The names accepted by make_suite.
const std::vector<std::string>& suite_names();

// The tasks of one suite. Throws boltrt::Error for an unknown name or unusable options.
std::vector<Task> make_suite(const std::string& name, const SuiteOptions& options);

}  // namespace boltrt::eval

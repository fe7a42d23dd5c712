// The report of `boltrt eval`: every task's outcome per run (a model, or a model at one
// reasoning budget), and the statistics over them — accuracy with a 95 % Wilson interval per run
// and per category, mean generated and reasoning tokens, time to first token and decode
// tokens/s percentiles, and the tasks where the runs disagree.
//
// JSON (report_json):
//   {"models": [{"model": PATH, "reasoning_budget": B or null, "accuracy": A, "passed": P,
//                "total": N, "ci95": [LO, HI], "errors": E,
//                "categories": {NAME: {"accuracy", "passed", "total", "ci95", "generated_mean",
//                                      "reasoning_mean"}},
//                "latency": {"ttft_ms_p50", "ttft_ms_p95", "decode_tps_p50", "decode_tps_p95"},
//                "tokens": {"generated_mean", "reasoning_mean"},
//                "tasks": [{"id", "category", "passed", "output", "tokens": {"generated",
//                           "reasoning"}, "ttft_ms", "decode_tps", "detail"?, "tool_calls"?,
//                           "error"?}]}],
//    "disagreements": [{"id", "passed": {LABEL: true|false}}],
//    "skipped": [{"line", "error"}]}
//
// Every figure is recomputable from the task rows: accuracy = passed / total over all rows
// (a task that failed to run counts as not passed); token means over all rows; ttft percentiles
// over the rows that ran (no "error"); decode tok/s percentiles over the rows with
// decode_tps > 0. Percentiles are nearest-rank: the ceil(p/100 * n)-th smallest value.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/check.h"
#include "eval/task.h"

namespace boltrt::eval {

struct TaskOutcome {
  nlohmann::ordered_json id;
  std::string category;
  bool passed = false;
  std::string detail;                 // the check's reason for a failure
  std::string output;                 // the answer's content
  nlohmann::ordered_json tool_calls;  // null unless the task declared tools
  int64_t generated = 0, reasoning = 0;
  double ttft_ms = 0, decode_tps = 0;
  std::string error;  // the task did not run (prompt too long, ...): not passed
};

struct RunResult {
  std::string model;
  std::optional<int64_t> budget;  // the reasoning budget of this run (a budget sweep)
  std::vector<TaskOutcome> tasks;
  std::string label() const;  // "model" or "model @ budget B"
};

// Judges one task from its batch result line (runner.h's shape).
TaskOutcome judge(const Task& task, const nlohmann::ordered_json& result);
// A task with no result: it failed at run time with `error`.
TaskOutcome failed_outcome(const Task& task, const std::string& error);

struct Interval {
  double lo = 0, hi = 0;
};
// The Wilson score interval for `passed` of `total` at 95 % (z = 1.959964); [0, 0] for 0 total.
Interval wilson95(int64_t passed, int64_t total);
// Nearest-rank percentile (p in (0, 100]) of `values`; 0 when empty.
double percentile(std::vector<double> values, double p);

nlohmann::ordered_json report_json(const std::vector<RunResult>& runs,
                                   const std::vector<TaskError>& skipped);
// A markdown summary of a report_json() document: one row per run and category, then the
// disagreements.
std::string report_markdown(const nlohmann::ordered_json& report);

}  // namespace boltrt::eval

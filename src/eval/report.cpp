#include "eval/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace boltrt::eval {
namespace {

using json = nlohmann::ordered_json;

double round6(double x) {
  return std::round(x * 1e6) / 1e6;
}

double mean(double sum, size_t n) {
  return n == 0 ? 0.0 : round6(sum / static_cast<double>(n));
}

json accuracy_fields(int64_t passed, int64_t total) {
  const Interval ci = wilson95(passed, total);
  return {
      {"accuracy", total ? round6(static_cast<double>(passed) / static_cast<double>(total)) : 0.0},
      {"passed", passed},
      {"total", total},
      {"ci95", {round6(ci.lo), round6(ci.hi)}}};
}

json task_row(const TaskOutcome& t) {
  json row = {{"id", t.id},
              {"category", t.category},
              {"passed", t.passed},
              {"output", t.output},
              {"tokens", {{"generated", t.generated}, {"reasoning", t.reasoning}}},
              {"ttft_ms", round6(t.ttft_ms)},
              {"decode_tps", round6(t.decode_tps)}};
  if (!t.detail.empty()) row["detail"] = t.detail;
  if (!t.tool_calls.is_null()) row["tool_calls"] = t.tool_calls;
  if (!t.error.empty()) row["error"] = t.error;
  return row;
}

json run_json(const RunResult& run) {
  json m;
  m["model"] = run.model;
  m["reasoning_budget"] = run.budget ? json(*run.budget) : json(nullptr);
  int64_t passed = 0, errors = 0;
  double generated = 0, reasoning = 0;
  std::vector<double> ttft, tps;
  struct Category {
    int64_t passed = 0, total = 0;
    double generated = 0, reasoning = 0;
  };
  std::map<std::string, Category> categories;
  for (const TaskOutcome& t : run.tasks) {
    passed += t.passed ? 1 : 0;
    generated += static_cast<double>(t.generated);
    reasoning += static_cast<double>(t.reasoning);
    if (t.error.empty()) {
      ttft.push_back(round6(t.ttft_ms));
    } else {
      ++errors;
    }
    if (round6(t.decode_tps) > 0) tps.push_back(round6(t.decode_tps));
    Category& c = categories[t.category];
    c.passed += t.passed ? 1 : 0;
    ++c.total;
    c.generated += static_cast<double>(t.generated);
    c.reasoning += static_cast<double>(t.reasoning);
  }
  const auto n = static_cast<int64_t>(run.tasks.size());
  m.update(accuracy_fields(passed, n));
  m["errors"] = errors;
  json cats = json::object();
  for (const auto& [name, c] : categories) {
    json entry = accuracy_fields(c.passed, c.total);
    entry["generated_mean"] = mean(c.generated, static_cast<size_t>(c.total));
    entry["reasoning_mean"] = mean(c.reasoning, static_cast<size_t>(c.total));
    cats[name] = entry;
  }
  m["categories"] = cats;
  m["latency"] = {{"ttft_ms_p50", percentile(ttft, 50)},
                  {"ttft_ms_p95", percentile(ttft, 95)},
                  {"decode_tps_p50", percentile(tps, 50)},
                  {"decode_tps_p95", percentile(tps, 95)}};
  m["tokens"] = {{"generated_mean", mean(generated, run.tasks.size())},
                 {"reasoning_mean", mean(reasoning, run.tasks.size())}};
  m["tasks"] = json::array();
  for (const TaskOutcome& t : run.tasks) m["tasks"].push_back(task_row(t));
  return m;
}

}  // namespace

std::string RunResult::label() const {
  return budget ? fmt::format("{} @ budget {}", model, *budget) : model;
}

TaskOutcome failed_outcome(const Task& task, const std::string& error) {
  TaskOutcome t;
  t.id = task.id;
  t.category = task.category;
  t.error = error.empty() ? "no result" : error;
  t.detail = "did not run: " + t.error;
  if (task.request.contains("tools")) t.tool_calls = json::array();
  return t;
}

TaskOutcome judge(const Task& task, const json& result) {
  TaskOutcome t;
  t.id = task.id;
  t.category = task.category;
  Answer answer;
  if (result.contains("content") && result["content"].is_string())
    answer.content = result["content"].get<std::string>();
  else if (result.contains("text") && result["text"].is_string())
    answer.content = result["text"].get<std::string>();
  if (result.contains("tool_calls") && result["tool_calls"].is_array())
    answer.tool_calls = result["tool_calls"];
  const CheckResult r = run_check(task.check, answer);
  t.passed = r.passed;
  t.detail = r.detail;
  t.output = answer.content;
  if (task.request.contains("tools")) t.tool_calls = answer.tool_calls;
  if (result.contains("tokens") && result["tokens"].is_object()) {
    t.generated = result["tokens"].value("completion", int64_t{0});
    t.reasoning = result["tokens"].value("reasoning", int64_t{0});
  }
  if (result.contains("timings") && result["timings"].is_object()) {
    t.ttft_ms = result["timings"].value("ttft_ms", 0.0);
    t.decode_tps = result["timings"].value("tokens_per_second", 0.0);
  }
  return t;
}

Interval wilson95(int64_t passed, int64_t total) {
  if (total <= 0) return {};
  const double z = 1.959964;
  const double n = static_cast<double>(total);
  const double p = static_cast<double>(passed) / n;
  const double denom = 1 + z * z / n;
  const double centre = (p + z * z / (2 * n)) / denom;
  const double half = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom;
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto n = static_cast<double>(values.size());
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * n));
  rank = std::clamp<size_t>(rank, 1, values.size());
  return values[rank - 1];
}

json report_json(const std::vector<RunResult>& runs, const std::vector<TaskError>& skipped) {
  json report;
  report["models"] = json::array();
  for (const RunResult& run : runs) report["models"].push_back(run_json(run));
  // Disagreements: tasks (by position; every run has the same task list) whose pass/fail
  // differs between runs.
  report["disagreements"] = json::array();
  if (runs.size() > 1) {
    const size_t n = runs.front().tasks.size();
    for (size_t i = 0; i < n; ++i) {
      bool any_pass = false, any_fail = false;
      json passed = json::object();
      for (const RunResult& run : runs) {
        const bool p = i < run.tasks.size() && run.tasks[i].passed;
        any_pass = any_pass || p;
        any_fail = any_fail || !p;
        passed[run.label()] = p;
      }
      if (any_pass && any_fail)
        report["disagreements"].push_back({{"id", runs.front().tasks[i].id}, {"passed", passed}});
    }
  }
  report["skipped"] = json::array();
  for (const TaskError& e : skipped)
    report["skipped"].push_back({{"line", e.line}, {"error", e.message}});
  return report;
}

std::string report_markdown(const json& report) {
  std::string out =
      "| model | budget | category | accuracy | 95% CI | n | gen tok | reasoning tok | TTFT p50 ms "
      "| TTFT p95 ms | decode tok/s p50 |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n";
  auto pct = [](const json& v) { return fmt::format("{:.1f}%", v.get<double>() * 100); };
  for (const json& m : report["models"]) {
    const std::string budget = m["reasoning_budget"].is_null() ? "-" : m["reasoning_budget"].dump();
    const json& lat = m["latency"];
    out += fmt::format(
        "| {} | {} | **all** | {} | {}–{} | {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} "
        "| {:.1f} |\n",
        m["model"].get<std::string>(), budget, pct(m["accuracy"]), pct(m["ci95"][0]),
        pct(m["ci95"][1]), m["total"].get<int64_t>(), m["tokens"]["generated_mean"].get<double>(),
        m["tokens"]["reasoning_mean"].get<double>(), lat["ttft_ms_p50"].get<double>(),
        lat["ttft_ms_p95"].get<double>(), lat["decode_tps_p50"].get<double>());
    for (const auto& [name, c] : m["categories"].items()) {
      out += fmt::format("| {} | {} | {} | {} | {}–{} | {} | {:.1f} | {:.1f} | | | |\n",
                         m["model"].get<std::string>(), budget, name, pct(c["accuracy"]),
                         pct(c["ci95"][0]), pct(c["ci95"][1]), c["total"].get<int64_t>(),
                         c["generated_mean"].get<double>(), c["reasoning_mean"].get<double>());
    }
  }
  const json& dis = report["disagreements"];
  if (!dis.empty()) {
    out += fmt::format("\n{} tasks where the runs disagree:\n\n", dis.size());
    for (const json& d : dis) {
      std::string who;
      for (const auto& [label, passed] : d["passed"].items())
        who += fmt::format("{}{}: {}", who.empty() ? "" : ", ", label,
                           passed.get<bool>() ? "pass" : "fail");
      out += fmt::format("- {}: {}\n", d["id"].dump(), who);
    }
  }
  return out;
}

}  // namespace boltrt::eval

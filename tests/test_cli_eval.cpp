// `boltrt eval` through the CLI: a run of task lines and every built-in suite on the shipped tiny
// models (two models, two reasoning budgets) whose report's figures are recomputed from its own
// task rows and whose HTML page loads in headless Chromium with no console error and no request
// (screenshot kept as eval_report.png in the build tree); the same answers for --parallel 1 and
// 4; kill -9 at random moments then --resume; bad input.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/chromium.h"
#include "support/paths.h"

extern char** environ;

namespace boltrt::test {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string tiny(const char* name) {
  return source_dir() + "/models/tiny/" + name;
}

std::string quoted(const std::vector<std::string>& args) {
  std::string c;
  for (const auto& a : args) c += "'" + a + "' ";
  return c;
}

// Hand-made tasks: completions, a chat, a JSON answer forced by response_format, a malformed
// line (line 5) and an unknown check (line 6).
const char* kTasks =
    R"({"id": "story", "category": "completion", "prompt": "Once upon a time", "max_tokens": 12, "check": {"type": "contains", "value": "the"}})"
    "\n"
    R"({"id": "france", "category": "completion", "prompt": "The capital of France is", "max_tokens": 8, "check": {"type": "contains", "value": "Paris"}})"
    "\n"
    R"({"id": "greet", "category": "chat", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16, "reasoning": "off", "check": {"type": "regex", "pattern": "[Hh]ello"}})"
    "\n"
    R"({"id": "json", "category": "structured", "messages": [{"role": "user", "content": "Is the sky blue? Answer in JSON."}], "max_tokens": 48, "reasoning": "off", "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}, "check": {"type": "json_schema", "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}})"
    "\n"
    "{\"id\": \"broken\", \"prompt\": \n"
    R"({"id": "odd", "prompt": "x", "check": {"type": "similar", "value": "y"}})"
    "\n"
    R"({"id": "pick", "category": "choice", "prompt": "Which letter comes first? (A) b (B) a. Answer:", "max_tokens": 6, "check": {"type": "choice", "value": "B", "choices": "AB"}})"
    "\n";

// Independent of the engine's code: the 95 % Wilson interval.
std::pair<double, double> wilson(double passed, double n) {
  if (n == 0) return {0, 0};
  const double z = 1.959964, p = passed / n;
  const double centre = (p + z * z / (2 * n)) / (1 + z * z / n);
  const double half = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

double nearest_rank(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

void expect_recomputed(const json& m) {
  const json& rows = m["tasks"];
  const std::string who = m["model"].get<std::string>() + " " + m["reasoning_budget"].dump();
  int64_t passed = 0, errors = 0;
  double generated = 0, reasoning = 0;
  std::vector<double> ttft, tps;
  std::map<std::string, std::vector<const json*>> categories;
  for (const json& t : rows) {
    passed += t["passed"].get<bool>() ? 1 : 0;
    generated += t["tokens"]["generated"].get<double>();
    reasoning += t["tokens"]["reasoning"].get<double>();
    if (t.contains("error")) {
      ++errors;
    } else {
      ttft.push_back(t["ttft_ms"].get<double>());
    }
    if (t["decode_tps"].get<double>() > 0) tps.push_back(t["decode_tps"].get<double>());
    categories[t["category"].get<std::string>()].push_back(&t);
  }
  const auto n = static_cast<double>(rows.size());
  EXPECT_EQ(m["total"].get<int64_t>(), static_cast<int64_t>(rows.size())) << who;
  EXPECT_EQ(m["passed"].get<int64_t>(), passed) << who;
  EXPECT_EQ(m["errors"].get<int64_t>(), errors) << who;
  EXPECT_NEAR(m["accuracy"].get<double>(), passed / n, 1e-6) << who;
  const auto [lo, hi] = wilson(static_cast<double>(passed), n);
  EXPECT_NEAR(m["ci95"][0].get<double>(), lo, 1e-5) << who;
  EXPECT_NEAR(m["ci95"][1].get<double>(), hi, 1e-5) << who;
  EXPECT_NEAR(m["tokens"]["generated_mean"].get<double>(), generated / n, 1e-6) << who;
  EXPECT_NEAR(m["tokens"]["reasoning_mean"].get<double>(), reasoning / n, 1e-6) << who;
  EXPECT_EQ(m["latency"]["ttft_ms_p50"].get<double>(), nearest_rank(ttft, 50)) << who;
  EXPECT_EQ(m["latency"]["ttft_ms_p95"].get<double>(), nearest_rank(ttft, 95)) << who;
  EXPECT_EQ(m["latency"]["decode_tps_p50"].get<double>(), nearest_rank(tps, 50)) << who;
  EXPECT_EQ(m["latency"]["decode_tps_p95"].get<double>(), nearest_rank(tps, 95)) << who;
  ASSERT_EQ(m["categories"].size(), categories.size()) << who;
  for (const auto& [name, list] : categories) {
    const json& c = m["categories"][name];
    double p = 0, g = 0, r = 0;
    for (const json* t : list) {
      p += (*t)["passed"].get<bool>() ? 1 : 0;
      g += (*t)["tokens"]["generated"].get<double>();
      r += (*t)["tokens"]["reasoning"].get<double>();
    }
    const auto k = static_cast<double>(list.size());
    EXPECT_EQ(c["total"].get<int64_t>(), static_cast<int64_t>(list.size())) << who << name;
    EXPECT_EQ(c["passed"].get<double>(), p) << who << name;
    EXPECT_NEAR(c["accuracy"].get<double>(), p / k, 1e-6) << who << name;
    const auto [clo, chi] = wilson(p, k);
    EXPECT_NEAR(c["ci95"][0].get<double>(), clo, 1e-5) << who << name;
    EXPECT_NEAR(c["ci95"][1].get<double>(), chi, 1e-5) << who << name;
    EXPECT_NEAR(c["generated_mean"].get<double>(), g / k, 1e-6) << who << name;
    EXPECT_NEAR(c["reasoning_mean"].get<double>(), r / k, 1e-6) << who << name;
  }
}

// Chromium loads the page from a file: no console error, no exception, no request but the
// page itself; returns the number of <svg> plots and keeps a screenshot at `shot`.
int load_in_chromium(const std::string& html_path, const std::string& shot,
                     const std::string& scratch) {
  const auto deadline = Clock::now() + 120s;
  Chromium browser({"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--user-data-dir=" + scratch + "/profile", "--window-size=1100,1400",
                    "--remote-debugging-pipe", "about:blank"},
                   scratch + "/chromium.log");
  const nlohmann::json target =
      browser.call("Target.createTarget", {{"url", "about:blank"}}, "", deadline);
  const std::string session =
      browser.call("Target.attachToTarget", {{"targetId", target["targetId"]}, {"flatten", true}},
                   "", deadline)["sessionId"];
  for (const char* domain : {"Page.enable", "Runtime.enable", "Log.enable", "Network.enable"})
    browser.call(domain, nlohmann::json::object(), session, deadline);
  const std::string url = "file://" + std::filesystem::absolute(html_path).string();
  browser.call("Page.navigate", {{"url", url}}, session, deadline);
  while (browser.evaluate(session,
                          "location.href === '" + url + "' && document.readyState === 'complete'",
                          deadline) != nlohmann::json(true)) {
    EXPECT_TRUE(Clock::now() < deadline) << "the report did not load";
    if (Clock::now() >= deadline) return 0;
    std::this_thread::sleep_for(50ms);
  }
  const int svgs =
      browser.evaluate(session, "document.querySelectorAll('svg').length", deadline).get<int>();
  std::filesystem::remove(shot);
  const nlohmann::json png =
      browser.call("Page.captureScreenshot", {{"format", "png"}, {"captureBeyondViewport", true}},
                   session, deadline);
  std::ofstream(shot, std::ios::binary) << base64_decode(png.value("data", ""));
  for (const nlohmann::json& e : browser.events()) {
    const std::string method = e.value("method", "");
    if (method == "Runtime.consoleAPICalled") {
      EXPECT_NE(e["params"].value("type", ""), "error") << e.dump();
    }
    EXPECT_NE(method, "Runtime.exceptionThrown") << e.dump();
    if (method == "Log.entryAdded") {
      EXPECT_NE(e["params"]["entry"].value("level", ""), "error") << e.dump();
    }
    if (method == "Network.requestWillBeSent") {
      EXPECT_EQ(e["params"]["request"].value("url", ""), url) << "an external request";
    }
  }
  return svgs;
}

TEST(EvalCli, TinyModelsReportRecomputesFromItsRowsAndLoadsInChromium) {
  const std::string dir = scratch_dir("eval_cli_tiny");
  write_file(dir + "/tasks.jsonl", kTasks);
  const std::vector<std::string> command = {cli_path(),
                                            "eval",
                                            "-m",
                                            tiny("tiny-q8_0.gguf"),
                                            "-m",
                                            tiny("tiny-f32.gguf"),
                                            "--tasks",
                                            dir + "/tasks.jsonl",
                                            "--suite",
                                            "tool-calling",
                                            "--suite",
                                            "needle",
                                            "--suite",
                                            "budget",
                                            "--suite-size",
                                            "2",
                                            "--lengths",
                                            "200,100000",
                                            "--depths",
                                            "0.5",
                                            "--reasoning-budget",
                                            "0,24",
                                            "-c",
                                            "1024",
                                            "-t",
                                            "1",
                                            "--parallel",
                                            "2",
                                            "-o",
                                            dir + "/report.json",
                                            "--html",
                                            dir + "/report.html",
                                            "--progress",
                                            "off"};
  const CommandOutput run = run_command_split(quoted(command));
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("tasks.jsonl:5: bad JSON"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("tasks.jsonl:6: unknown check type 'similar' (skipped)"),
            std::string::npos)
      << run.err;
  const json report = json::parse(read_file(dir + "/report.json"));
  ASSERT_EQ(report["skipped"].size(), 2u);
  EXPECT_EQ(report["skipped"][0]["line"], 5);
  EXPECT_EQ(report["skipped"][1]["line"], 6);

  // 5 task lines + 3 kinds x 2 tool tasks + 2 needle lengths x 1 depth x 2
  // + 2 budget tasks, for 2 models x 2 budgets.
  const json& models = report["models"];
  ASSERT_EQ(models.size(), 4u);
  std::vector<std::string> ids;
  for (const json& t : models[0]["tasks"]) ids.push_back(t["id"].get<std::string>());
  ASSERT_EQ(ids.size(), 5u + 6u + 4u + 2u);
  EXPECT_EQ(ids[0], "story");
  EXPECT_EQ(ids[4], "pick");
  EXPECT_EQ(ids[5], "tool-single-0");
  EXPECT_EQ(ids[11], "needle-200-d50-0");
  // 100000 is clipped to the context: -c 1024 is cut to the tiny model's trained 512, less 32.
  EXPECT_EQ(ids[13], "needle-480-d50-0");
  EXPECT_EQ(ids[16], "budget-1");
  const std::vector<std::pair<std::string, int64_t>> runs = {{tiny("tiny-q8_0.gguf"), 0},
                                                             {tiny("tiny-q8_0.gguf"), 24},
                                                             {tiny("tiny-f32.gguf"), 0},
                                                             {tiny("tiny-f32.gguf"), 24}};
  for (size_t i = 0; i < models.size(); ++i) {
    const json& m = models[i];
    EXPECT_EQ(m["model"], runs[i].first);
    EXPECT_EQ(m["reasoning_budget"], runs[i].second);
    ASSERT_EQ(m["tasks"].size(), ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      const json& t = m["tasks"][k];
      EXPECT_EQ(t["id"], ids[k]);
      EXPECT_FALSE(t.contains("error")) << t.dump();
      const std::string out = t["output"].get<std::string>();
      // The checks, judged again on the rows' own outputs.
      if (ids[k] == "story") {
        EXPECT_EQ(t["passed"], out.find("the") != std::string::npos);
      }
      if (ids[k] == "france") {
        EXPECT_EQ(t["passed"], out.find("Paris") != std::string::npos);
      }
      if (ids[k] == "greet") {
        EXPECT_EQ(t["passed"], out.find("ello") != std::string::npos);
      }
      // response_format forces valid JSON, which the schema check then accepts.
      if (ids[k] == "json") {
        EXPECT_TRUE(t["passed"].get<bool>()) << out;
      }
      // tool_choice "required": every tool task's reply is calls.
      if (ids[k].rfind("tool-", 0) == 0) {
        ASSERT_TRUE(t["tool_calls"].is_array());
        EXPECT_FALSE(t["tool_calls"].empty()) << t.dump();
      }
      // Budget 0: no thinking tokens.
      if (runs[i].second == 0) {
        EXPECT_EQ(t["tokens"]["reasoning"], 0) << t.dump();
      }
      if (runs[i].second == 24) {
        EXPECT_LE(t["tokens"]["reasoning"].get<int64_t>(), 24 + 40);
      }
    }
    expect_recomputed(m);
  }
  // The disagreements, recomputed.
  std::vector<std::string> disagree;
  for (size_t k = 0; k < ids.size(); ++k) {
    std::set<bool> seen;
    for (const json& m : models) seen.insert(m["tasks"][k]["passed"].get<bool>());
    if (seen.size() == 2) disagree.push_back(ids[k]);
  }
  ASSERT_EQ(report["disagreements"].size(), disagree.size());
  for (size_t i = 0; i < disagree.size(); ++i) {
    EXPECT_EQ(report["disagreements"][i]["id"], disagree[i]);
    EXPECT_EQ(report["disagreements"][i]["passed"].size(), 4u);
  }
  // The markdown table on stdout: a row per run.
  EXPECT_NE(run.out.find("| " + tiny("tiny-q8_0.gguf") + " | 0 | **all** |"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("| " + tiny("tiny-f32.gguf") + " | 24 | structured |"), std::string::npos)
      << run.out;

  // The HTML page: self-contained, loads cleanly, five plots.
  const std::string html = read_file(dir + "/report.html");
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  if (run_command("command -v chromium >/dev/null") != 0)
    GTEST_SKIP() << "chromium is not installed (tools/setup.sh installs it)";
  const std::string shot = binary_dir() + "/eval_report.png";
  EXPECT_EQ(load_in_chromium(dir + "/report.html", shot, dir), 5);
  EXPECT_GT(std::filesystem::file_size(shot), 10000u);
}

std::vector<json> rows_without_timings(const std::string& report_path) {
  std::vector<json> rows;
  const json report = json::parse(read_file(report_path));
  for (const json& m : report["models"]) {
    for (json t : m["tasks"]) {
      t.erase("ttft_ms");
      t.erase("decode_tps");
      rows.push_back(t);
    }
  }
  return rows;
}

TEST(EvalCli, ParallelOneAndFourGiveTheSameAnswersAtTemperatureZero) {
  const std::string dir = scratch_dir("eval_cli_parallel");
  write_file(dir + "/tasks.jsonl", kTasks);
  std::vector<std::vector<json>> results;
  for (const char* parallel : {"1", "4"}) {
    const std::string report = dir + "/report-" + parallel + ".json";
    const CommandOutput run = run_command_split(
        quoted({cli_path(), "eval", "-m", tiny("tiny-q8_0.gguf"), "--tasks", dir + "/tasks.jsonl",
                "--suite", "tool-calling", "--suite-size", "2", "-t", "1", "--parallel", parallel,
                "-o", report, "--progress", "off"}));
    ASSERT_EQ(run.status, 0) << run.err;
    results.push_back(rows_without_timings(report));
  }
  ASSERT_EQ(results[0].size(), 11u);
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i)
    EXPECT_EQ(results[0][i].dump(), results[1][i].dump());
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

int wait_status(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string task_id(int i) {
  std::string id = std::to_string(i);
  id.insert(id.begin(), 't');
  return id;
}

// The scripted model (--fake-model) answers a prompt upper-cased: tasks whose expected answer
// is the upper-cased prompt pass, the others fail.
std::string fake_tasks(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    const std::string prompt = "task number " + std::to_string(i);
    std::string upper = prompt;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    text += json({{"id", task_id(i)},
                  {"category", i % 3 == 0 ? "a" : "b"},
                  {"prompt", prompt},
                  {"check", {{"type", "exact"}, {"value", i % 2 == 0 ? upper : prompt}}}})
                .dump() +
            "\n";
  }
  return text;
}

TEST(EvalCli, KillNineAtRandomMomentsThenResumeFinishesEachTaskOnce) {
  const std::string dir = scratch_dir("eval_cli_kill");
  constexpr int kTasks = 30;
  write_file(dir + "/tasks.jsonl", fake_tasks(kTasks));
  const std::vector<std::string> command = {cli_path(),
                                            "eval",
                                            "--fake-model",
                                            "--fake-delay-us",
                                            "3000",
                                            "--tasks",
                                            dir + "/tasks.jsonl",
                                            "--reasoning-budget",
                                            "0,-1",
                                            "--parallel",
                                            "3",
                                            "-o",
                                            dir + "/report.json",
                                            "--resume",
                                            "--progress",
                                            "off"};
  std::mt19937 rng(22);
  int killed_mid_run = 0;
  for (int iteration = 0; iteration < 8; ++iteration) {
    const pid_t pid = spawn(command, dir + "/log.txt");
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 150)(rng)));
    const bool was_running = kill(pid, SIGKILL) == 0;
    if (wait_status(pid) == 128 + SIGKILL && was_running) ++killed_mid_run;
  }
  EXPECT_GT(killed_mid_run, 0);
  const CommandOutput run = run_command_split(quoted(command));
  ASSERT_EQ(run.status, 0) << run.err;
  const json report = json::parse(read_file(dir + "/report.json"));
  ASSERT_EQ(report["models"].size(), 2u);
  for (const json& m : report["models"]) {
    ASSERT_EQ(m["tasks"].size(), static_cast<size_t>(kTasks));
    for (int i = 0; i < kTasks; ++i) {
      const json& t = m["tasks"][static_cast<size_t>(i)];
      EXPECT_EQ(t["id"], task_id(i));
      EXPECT_FALSE(t.contains("error")) << t.dump();
      EXPECT_EQ(t["passed"], i % 2 == 0) << t.dump();
    }
    EXPECT_EQ(m["passed"], kTasks / 2);
    expect_recomputed(m);
  }
  // Each run file holds every task exactly once.
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/report.json.runs")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("run-", 0) != 0 || name.find(".errors.") != std::string::npos) continue;
    std::istringstream lines(read_file(entry.path().string()));
    std::string line;
    std::set<std::string> seen;
    while (std::getline(lines, line))
      EXPECT_TRUE(seen.insert(json::parse(line)["id"].get<std::string>()).second) << line;
    EXPECT_EQ(seen.size(), static_cast<size_t>(kTasks)) << name;
  }
}

TEST(EvalCli, BadInputIsOneErrorLine) {
  const std::string dir = scratch_dir("eval_cli_bad");
  write_file(dir + "/tasks.jsonl", fake_tasks(3));
  write_file(dir + "/junk.jsonl", "{\n[]\n");
  std::string base = cli_path();
  base.insert(base.begin(), '\'');
  base += "' eval --fake-model --progress off ";
  auto expect_error = [&](const std::string& args, int status, const std::string& message) {
    const CommandOutput r = run_command_split(base + args);
    EXPECT_EQ(r.status, status) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
  };
  expect_error("--tasks " + dir + "/missing.jsonl", 1,
               "boltrt: error: " + dir + "/missing.jsonl: cannot open the task file");
  expect_error("--tasks " + dir + "/junk.jsonl -o " + dir + "/a.json", 1,
               "boltrt: error: eval: no valid tasks to run");
  expect_error("", 1, "boltrt: error: eval: give a task file with --tasks FILE");
  expect_error("--tasks " + dir + "/tasks.jsonl --reasoning-budget 0,-2", 1,
               "boltrt: error: --reasoning-budget: -2 is below -1");
  expect_error("--tasks " + dir + "/tasks.jsonl --reasoning-budget 0,x", 1,
               "boltrt: error: --reasoning-budget: 'x' is not an integer");
  expect_error("--tasks " + dir + "/tasks.jsonl --suite nope", 2, "nope");
  expect_error("--suite needle --lengths 4096,abc", 1,
               "boltrt: error: --lengths: 'abc' is not an integer");
  expect_error("--suite needle --depths 1.5", 1, "boltrt: error: --depths: 1.5 is not in [0, 1]");
  // A finished run, then --resume with other tasks: refused; without --resume: refused.
  const std::string out = " -o " + dir + "/b.json";
  ASSERT_EQ(run_command_split(base + "--tasks " + dir + "/tasks.jsonl" + out).status, 0);
  write_file(dir + "/tasks2.jsonl", fake_tasks(4));
  expect_error("--tasks " + dir + "/tasks2.jsonl --resume" + out, 1,
               "the tasks differ from the interrupted run's; use --overwrite to start over");
  expect_error("--tasks " + dir + "/tasks.jsonl" + out, 1,
               "already exists; use --resume to continue it or --overwrite to start over");
  EXPECT_EQ(run_command_split(base + "--tasks " + dir + "/tasks2.jsonl --overwrite" + out).status,
            0);
}

}  // namespace
}  // namespace boltrt::test

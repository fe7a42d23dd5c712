// `boltrt eval`: run task files and built-in suites on one or more models and report accuracy,
// tokens, reasoning cost and latency on this machine (issue 22).
//   boltrt eval -m A.gguf [-m B.gguf ...] --tasks FILE.jsonl [--suite NAME ...] [--parallel N]
//               [-o report.json] [--html report.html] [--work-dir DIR] [--resume]
//               [--reasoning-budget B1,B2,...] [device, thread, context, KV, draft, sampling
//               and reasoning options as in `boltrt batch`]
// Each (model, reasoning budget) is one run of the batch engine over the same requests; its
// results go to a JSON Lines file in the work directory, so --resume after a kill finishes only
// what is missing. The report (eval/report.h) is printed as markdown on stdout.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/fake_backend.h"
#include "api/model_backend.h"
#include "batch/backend_engine.h"
#include "batch/request.h"
#include "batch/runner.h"
#include "command.h"
#include "device_options.h"
#include "draft_options.h"
#include "eval/html_report.h"
#include "eval/report.h"
#include "eval/suites.h"
#include "eval/task.h"
#include "reasoning_options.h"
#include "util/error.h"

namespace boltrt::cli {
namespace {

using json = nlohmann::ordered_json;

std::atomic<bool> g_interrupted{false};
extern "C" void on_eval_interrupt(int) {
  g_interrupted = true;
}

struct EvalArgs {
  std::vector<std::string> models;
  std::string tasks;
  std::vector<std::string> suites;
  eval::SuiteOptions suite;
  std::string lengths = "4096,16384,65536";
  std::string depths = "0.1,0.5,0.9";
  std::string report, html, work_dir;
  batch::BatchOptions options;
  int threads = 0;
  int64_t context = 4096;
  std::string kv_type = "f16";
  std::string device = "auto";
  ReasoningOptions reasoning;
  std::string budgets;
  std::string progress = "auto";
  DraftOptions draft;
  bool fake_model = false;
  int fake_delay_us = 0;
};

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, ',')) parts.push_back(part);
  if (!text.empty() && text.back() == ',') parts.emplace_back();
  return parts;
}

int64_t parse_integer(const std::string& text, const char* flag) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  fail("{}: '{}' is not an integer", flag, text);
}

double parse_number(const std::string& text, const char* flag) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  fail("{}: '{}' is not a number", flag, text);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes through a temporary file and a rename, so a kill leaves the old file or the new one.
void write_text(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) fail("{}: cannot write", temporary);
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) fail("{}: cannot write: {}", path, ec.message());
}

std::shared_ptr<ModelBackend> open_backend(const EvalArgs& args, const std::string& model) {
  if (args.fake_model) return make_fake_backend(args.context, args.fake_delay_us);
  BackendOptions options;
  options.threads = args.threads;
  options.context = args.context;
  options.kv_type = args.kv_type;
  options.device = args.device;
  options.draft = args.draft.path;
  return open_model_backend(model, options);
}

// A file name for a run: its index, the model file's stem and the budget.
std::string run_file(const std::string& dir, size_t index, const std::string& model,
                     const std::optional<int64_t>& budget) {
  std::string stem = std::filesystem::path(model).stem().string();
  for (char& c : stem)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return fmt::format("{}/run-{}-{}{}.jsonl", dir, index, stem,
                     budget ? fmt::format("-budget{}", *budget) : "");
}

// The run's outcomes in task order, from its results and errors files.
eval::RunResult collect(const std::vector<eval::Task>& tasks, const std::string& results,
                        const std::string& errors, const std::string& model,
                        const std::optional<int64_t>& budget) {
  std::unordered_map<std::string, json> done;
  std::unordered_map<std::string, std::string> failed;
  std::istringstream in(read_text(results));
  std::string line;
  while (std::getline(in, line)) {
    json r = json::parse(line, nullptr, false);
    if (!r.is_object() || !r.contains("id")) continue;
    const std::string key = batch::id_key(r["id"]);  // before r is moved from
    done[key] = std::move(r);
  }
  std::istringstream err(read_text(errors));
  while (std::getline(err, line)) {
    const json e = json::parse(line, nullptr, false);
    if (e.is_object() && e.contains("id") && e.contains("error") && e["error"].is_string())
      failed[batch::id_key(e["id"])] = e["error"].get<std::string>();
  }
  eval::RunResult run{model, budget, {}};
  for (const eval::Task& t : tasks) {
    if (auto it = done.find(t.key); it != done.end()) {
      run.tasks.push_back(eval::judge(t, it->second));
    } else {
      auto f = failed.find(t.key);
      run.tasks.push_back(eval::failed_outcome(t, f == failed.end() ? "" : f->second));
    }
  }
  return run;
}

void run(EvalArgs& args) {
  if (args.fake_model && args.models.empty()) args.models.push_back("fake");
  if (args.models.empty()) fail("eval: give a model with -m FILE");
  if (args.tasks.empty() && args.suites.empty())
    fail("eval: give a task file with --tasks FILE or a built-in suite with --suite NAME");
  if (args.fake_model && args.draft.enabled()) fail("--draft needs a real model, not --fake-model");

  // Reasoning budgets: one run per value.
  std::vector<std::optional<int64_t>> budgets;
  for (const std::string& b : split_commas(args.budgets)) {
    const int64_t v = parse_integer(b, "--reasoning-budget");
    if (v < -1) fail("--reasoning-budget: {} is below -1", v);
    budgets.emplace_back(v);
  }
  const bool budget_suite =
      std::find(args.suites.begin(), args.suites.end(), "budget") != args.suites.end();
  if (budgets.empty() && budget_suite) budgets = {0, 128, 512};
  if (budgets.empty()) budgets.emplace_back(std::nullopt);

  args.suite.lengths.clear();
  for (const std::string& l : split_commas(args.lengths))
    args.suite.lengths.push_back(parse_integer(l, "--lengths"));
  args.suite.depths.clear();
  for (const std::string& d : split_commas(args.depths))
    args.suite.depths.push_back(parse_number(d, "--depths"));

  ReasoningConfig base = args.reasoning.config(-1);
  args.options.progress = args.progress == "on" || (args.progress == "auto" && ::isatty(2));
  args.options.cancel = &g_interrupted;
  if (args.draft.enabled()) args.options.speculative = args.draft.speculative();

  eval::TaskFile file;
  if (!args.tasks.empty()) file = eval::read_tasks(args.tasks);
  for (const eval::TaskError& e : file.errors)
    fmt::print(stderr, "eval: {}:{}: {} (skipped)\n", args.tasks, e.line, e.message);

  std::string dir = args.work_dir;
  if (dir.empty()) dir = (args.report.empty() ? std::string("boltrt-eval") : args.report) + ".runs";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the work directory: {}", dir, ec.message());

  std::shared_ptr<ModelBackend> backend = open_backend(args, args.models[0]);
  if (!args.suites.empty()) {
    args.suite.max_length = std::max<int64_t>(backend->n_ctx() - 32, 64);
    std::shared_ptr<ModelBackend> tokenizer = backend;
    args.suite.count_tokens = [tokenizer](std::string_view text) {
      return static_cast<int64_t>(tokenizer->tokenize(text, /*add_special=*/false).size());
    };
    for (const std::string& name : args.suites) {
      const size_t before = file.errors.size();
      eval::add_tasks(file, eval::make_suite(name, args.suite));
      for (size_t i = before; i < file.errors.size(); ++i)
        fmt::print(stderr, "eval: suite {}: {} (skipped)\n", name, file.errors[i].message);
    }
  }
  if (file.tasks.empty()) fail("eval: no valid tasks to run");

  // The requests every run reads: the tasks without their check and category.
  std::string requests;
  for (const eval::Task& t : file.tasks)
    requests += t.request.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  const std::string requests_path = dir + "/requests.jsonl";
  if (args.options.resume && std::filesystem::exists(requests_path) &&
      read_text(requests_path) != requests) {
    fail("{}: the tasks differ from the interrupted run's; use --overwrite to start over",
         requests_path);
  }
  write_text(requests_path, requests);
  args.options.input = requests_path;

  std::signal(SIGINT, on_eval_interrupt);
  std::signal(SIGTERM, on_eval_interrupt);
  std::vector<eval::RunResult> runs;
  size_t index = 0;
  for (size_t m = 0; m < args.models.size(); ++m) {
    if (m > 0) {
      backend.reset();
      backend = open_backend(args, args.models[m]);
    }
    const auto engine = batch::make_backend_engine(backend, args.options.parallel);
    for (const auto& budget : budgets) {
      batch::BatchOptions options = args.options;
      options.reasoning = base;
      if (budget) options.reasoning.budget = *budget;
      options.output = run_file(dir, index++, args.models[m], budget);
      options.errors = options.output.substr(0, options.output.size() - 6) + ".errors.jsonl";
      const batch::BatchSummary s = batch::run_batch(*engine, options);
      eval::RunResult r =
          collect(file.tasks, options.output, options.errors, args.models[m], budget);
      fmt::print(stderr, "eval: {}: {} tasks: {} run now, {} already done, {} failed; {:.1f} s\n",
                 r.label(), file.tasks.size(), s.completed, s.already_done, s.failed, s.seconds);
      if (s.cancelled) {
        std::signal(SIGINT, SIG_DFL);
        std::signal(SIGTERM, SIG_DFL);
        fmt::print(stderr, "eval: interrupted; run again with --resume to finish\n");
        exit_with(130);
      }
      runs.push_back(std::move(r));
    }
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);

  std::vector<eval::TaskError> skipped = file.errors;
  const json report = eval::report_json(runs, skipped);
  if (!args.report.empty())
    write_text(args.report, report.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  if (!args.html.empty()) write_text(args.html, eval::report_html(report));
  fmt::print("{}", eval::report_markdown(report));
}

void setup(CLI::App& sub) {
  auto args = std::make_shared<EvalArgs>();
  auto& o = args->options;
  o.sampling.temperature = 0;  // greedy unless asked: comparable, reproducible runs
  o.max_tokens = 256;
  sub.add_option("-m,--model", args->models, "GGUF model file (repeat to compare models)");
  sub.add_option("--tasks", args->tasks, "task file: one JSON object per line with a 'check'");
  sub.add_option("--suite", args->suites, "built-in suite: tool-calling, needle, budget")
      ->check(CLI::IsMember(eval::suite_names()));
  sub.add_option("--suite-seed", args->suite.seed, "seed of the built-in suites")
      ->capture_default_str();
  sub.add_option("--suite-size", args->suite.count,
                 "tasks per kind (tool-calling, budget) or per length and depth (needle)")
      ->capture_default_str();
  sub.add_option("--lengths", args->lengths,
                 "needle: prompt lengths in tokens, clipped to the context")
      ->capture_default_str();
  sub.add_option("--depths", args->depths, "needle: where the key sits, 0 (start) to 1 (end)")
      ->capture_default_str();
  sub.add_option("-o,--output", args->report, "JSON report file");
  sub.add_option("--html", args->html, "self-contained HTML report with plots");
  sub.add_option("--work-dir", args->work_dir,
                 "where the runs' result files go (default REPORT.runs or boltrt-eval.runs)");
  sub.add_flag("--resume", o.resume, "continue an interrupted eval: run only what is missing");
  sub.add_flag("--overwrite", o.overwrite, "start over even if the work directory has results");
  sub.add_option("--parallel", o.parallel, "sequences in flight (default 1)")
      ->check(CLI::Range(1, 1024));
  sub.add_option("-t,--threads", args->threads, "CPU threads (default: physical cores)");
  sub.add_option("-c,--ctx-size", args->context, "context per sequence")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub.add_option("--kv-type", args->kv_type, "KV cache type: f16, f32, q8_0 or q4_0");
  add_device_option(sub, &args->device);
  sub.add_option("-n,--max-tokens", o.max_tokens, "default max_tokens of a task")
      ->capture_default_str();
  sub.add_option("--temp", o.sampling.temperature, "temperature (default 0: greedy)");
  sub.add_option("--top-p", o.sampling.top_p, "top_p");
  sub.add_option("--top-k", o.sampling.top_k, "top_k");
  sub.add_option("--min-p", o.sampling.min_p, "min_p");
  sub.add_option("--seed", o.sampling.seed, "sampling seed (tasks may set their own)");
  add_reasoning_options(sub, args->reasoning, /*with_display=*/false);
  // A comma list here: each budget is a separate run.
  sub.remove_option(sub.get_option("--reasoning-budget"));
  sub.add_option("--reasoning-budget", args->budgets,
                 "thinking tokens of a reply, or a comma list (one run each): -1 unlimited, 0 "
                 "none (default -1; with --suite budget: 0,128,512)");
  add_draft_options(sub, args->draft);
  sub.add_option("--progress", args->progress, "progress bar on stderr: on, off, auto (a terminal)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  sub.add_flag("--fake-model", args->fake_model)->group("");
  sub.add_option("--fake-delay-us", args->fake_delay_us)->group("");
  sub.callback([args] { run(*args); });
}

}  // namespace

BOLTRT_COMMAND(eval, "Compare models on task files and built-in suites: accuracy, tokens, latency",
               setup);

}  // namespace boltrt::cli

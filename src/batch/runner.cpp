#include "batch/runner.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "batch/progress.h"
#include "batch/result_file.h"
#include "util/error.h"

namespace boltrt::batch {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct InputLineError {
  int64_t line;
  json id;  // null when unknown
  std::string message;
};

struct Input {
  std::vector<BatchRequest> requests;
  std::vector<InputLineError> errors;
};

// Reads every line; keeps the valid requests and the reasons for the others.
Input read_input(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the input", path);
  Input input;
  std::unordered_map<std::string, int64_t> first_line;
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank
    try {
      BatchRequest request = parse_request(line, line_number);
      auto [it, inserted] = first_line.emplace(request.key, line_number);
      if (!inserted) fail("duplicate id {} (first on line {})", request.key, it->second);
      input.requests.push_back(std::move(request));
    } catch (const Error& e) {
      json id;
      const json object = json::parse(line, nullptr, false);
      if (object.is_object() && object.contains("id") &&
          (object["id"].is_string() || object["id"].is_number_integer())) {
        id = object["id"];
      }
      input.errors.push_back({line_number, std::move(id), e.what()});
    }
  }
  if (in.bad()) fail("{}: read error", path);
  return input;
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string error_line(int64_t line, const json& id, const std::string& message) {
  nlohmann::ordered_json e;
  e["line"] = line;
  if (!id.is_null()) e["id"] = id;
  e["error"] = message;
  return e.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec);
}

}  // namespace

void parse_shard(const std::string& text, BatchOptions& options) {
  const size_t slash = text.find('/');
  int index = -1, count = -1;
  try {
    size_t used = 0;
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    index = std::stoi(text.substr(0, slash), &used);
    if (used != slash) throw std::invalid_argument("junk");
    count = std::stoi(text.substr(slash + 1), &used);
    if (used != text.size() - slash - 1) throw std::invalid_argument("junk");
  } catch (const std::exception&) {
    fail("shard '{}' is not I/N (e.g. 0/4)", text);
  }
  if (count < 1 || index < 0 || index >= count) fail("shard '{}' needs 0 <= I < N", text);
  options.shard_index = index;
  options.shard_count = count;
}

BatchSummary run_batch(BatchEngine& engine, const BatchOptions& options) {
  const auto t_start = Clock::now();
  if (options.parallel < 1) fail("--parallel must be at least 1");
  if (options.parallel > engine.model().n_slots())
    fail("--parallel {} exceeds the model's {} sequences", options.parallel,
         engine.model().n_slots());
  const std::string errors_path =
      options.errors.empty() ? options.output + ".errors.jsonl" : options.errors;
  if (same_file(options.input, options.output) || options.input == options.output)
    fail("the output {} is the input file", options.output);
  if (errors_path == options.output || errors_path == options.input)
    fail("the errors file {} is the input or output file", errors_path);

  Input input = read_input(options.input);
  auto in_shard = [&](int64_t line) {
    return (line - 1) % options.shard_count == options.shard_index;
  };

  BatchSummary summary;
  ResultFile results;
  namespace fs = std::filesystem;
  if (options.resume) {
    summary.truncated_bytes = results.open_for_resume(options.output);
  } else {
    std::error_code ec;
    if (!options.overwrite && fs::exists(options.output, ec) &&
        fs::file_size(options.output, ec) > 0) {
      fail("{} already exists; use --resume to continue it or --overwrite to start over",
           options.output);
    }
    results.open_new(options.output, /*truncate=*/true);
  }
  results.set_fail_after_bytes(options.fail_after_bytes);
  // The errors file is rewritten by every run: reading the input finds the same bad lines again.
  ResultFile errors;
  errors.open_new(errors_path, /*truncate=*/true);

  std::mutex mutex;  // guards both files, summary, stop_message
  std::string stop_message;
  std::atomic<bool> stop{false};
  auto record_write_failure = [&](const WriteError& e) {
    if (stop_message.empty()) stop_message = e.what();
    stop = true;
  };

  try {
    for (const auto& e : input.errors) {
      if (!in_shard(e.line)) continue;
      errors.append(error_line(e.line, e.id, e.message));
      ++summary.malformed;
    }
  } catch (const WriteError& e) {
    fail("{}; nothing was run (free some space, then run again)", e.what());
  }

  std::vector<const BatchRequest*> pending;
  for (const auto& r : input.requests) {
    if (!in_shard(r.line)) continue;
    ++summary.requests;
    if (results.contains(r.key)) {
      ++summary.already_done;
    } else {
      pending.push_back(&r);
    }
  }

  SequenceBatcher batcher(engine.model());
  std::atomic<size_t> next{0};
  std::atomic<int64_t> tokens_total{0};
  std::atomic<int> workers_left{options.parallel};
  std::condition_variable finished;

  auto run_one = [&](Generator& generator, const BatchRequest& original) {
    const BatchRequest& request = original;
    SamplerConfig sampling = options.sampling;
    if (request.temperature) sampling.temperature = *request.temperature;
    if (request.top_p) sampling.top_p = *request.top_p;
    if (request.top_k) sampling.top_k = *request.top_k;
    if (request.min_p) sampling.min_p = *request.min_p;
    if (request.frequency_penalty) sampling.frequency_penalty = *request.frequency_penalty;
    if (request.presence_penalty) sampling.presence_penalty = *request.presence_penalty;
    if (request.seed) sampling.seed = *request.seed;
    if (!request.logit_bias.empty()) {
      check_logit_bias(request.logit_bias, generator.model().n_vocab());
      sampling.logit_bias = request.logit_bias;
    }
    sampling.validate();
    // Every request starts from an empty cache: its result depends on nothing but the request
    // (not on which request ran before it in this slot), so --parallel and --resume change
    // nothing in the output.
    generator.reset();
    generator.sampler() = Sampler(sampling);

    const auto t0 = Clock::now();
    GenerationOptions gen;
    gen.max_tokens = request.max_tokens.value_or(options.max_tokens);
    ReasoningConfig reasoning = options.reasoning;
    if (request.reasoning != ReasoningMode::kAuto) reasoning.mode = request.reasoning;
    if (request.reasoning_budget) reasoning.budget = *request.reasoning_budget;
    if (request.reasoning_block_budget) reasoning.block_budget = *request.reasoning_block_budget;
    reasoning.max_tokens = gen.max_tokens;
    reasoning.validate();
    const PreparedPrompt prompt = engine.prepare(request, reasoning.enable_thinking());
    std::unique_ptr<ReasoningController> controller = engine.controller(reasoning);
    // response_format / grammar: the constraint wraps the reasoning controller (the thought
    // stays free).
    OutputConstraint constraint = request.constraint;
    if (request.tools && !request.tools->empty()) {
      const auto kind = request.tool_choice.kind;
      const bool forcing =
          kind == text::ToolChoice::Kind::kRequired || kind == text::ToolChoice::Kind::kFunction;
      if (forcing && constraint.active())
        fail("a forcing 'tool_choice' cannot be combined with 'response_format' or 'grammar'");
      if (!constraint.active()) {
        text::ToolCallGrammar g = engine.tool_call_grammar(*request.tools, request.tool_choice);
        if (g.empty() && forcing) fail("'tool_choice' needs a chat format with tool calls");
        if (!g.empty())
          constraint = OutputConstraint::lazy_grammar(std::move(g.gbnf), std::move(g.trigger));
      }
    }
    const std::unique_ptr<GrammarController> grammar = make_grammar_controller(
        constraint, engine.vocab(), generator.model().n_vocab(), engine.reasoning_markers(),
        request.messages.has_value() && reasoning.enable_thinking(), controller.get());
    gen.stop_strings = request.stop;
    gen.cancel = &stop;
    gen.controller = grammar ? static_cast<TokenController*>(grammar.get()) : controller.get();
    gen.on_token = [&](const TokenEvent&) {
      tokens_total.fetch_add(1, std::memory_order_relaxed);
      return true;
    };
    GenerationResult result;
    {
      SequenceBatcher::Participation participation(batcher);
      result = generator.generate(prompt.tokens, gen);
    }
    if (result.finish_reason == FinishReason::kCancelled && stop) return;  // not finished
    const auto t1 = Clock::now();

    nlohmann::ordered_json out;
    out["id"] = request.id;
    out["text"] = result.text;
    const int64_t reasoning_tokens =
        engine.split_output(request, prompt, result, controller.get(), out);
    out["finish_reason"] = std::string(to_string(result.finish_reason));
    if (result.finish_reason == FinishReason::kEndOfGeneration && out.contains("tool_calls") &&
        out["tool_calls"].is_array() && !out["tool_calls"].empty()) {
      out["finish_reason"] = "tool_calls";  // OpenAI's name for a turn that ends in calls
    }
    out["tokens"]["prompt"] = result.stats.n_prompt_tokens;
    out["tokens"]["completion"] = result.stats.n_tokens;
    out["tokens"]["reasoning"] = reasoning_tokens;
    out["timings"] = {{"ttft_ms", result.stats.ttft_ms},
                      {"prompt_ms", result.stats.prompt_ms},
                      {"generation_ms", result.stats.generation_ms},
                      {"total_ms", ms_between(t0, t1)},
                      {"tokens_per_second", result.stats.tokens_per_second}};
    out["seed"] = generator.sampler().seed();
    const SpeculativeStats& draft = result.stats.draft;
    if (generator.drafter() != nullptr) {
      out["draft"] = {{"drafted", draft.n_drafted},
                      {"accepted", draft.n_accepted},
                      {"steps", draft.n_rounds},
                      {"acceptance_rate", draft.acceptance_rate()},
                      {"mean_accepted", draft.mean_accepted()}};
    }
    const std::string line =
        out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);

    std::lock_guard lock(mutex);
    if (stop) return;
    try {
      if (results.write(request.key, line)) {
        ++summary.completed;
        summary.generated_tokens += result.stats.n_tokens;
        summary.draft += draft;
      }
    } catch (const WriteError& e) {
      record_write_failure(e);
    }
  };

  auto worker = [&](int slot) {
    std::unique_ptr<LanguageModel> model = batcher.slot_model(slot);
    Generator generator(*model, engine.vocab(), options.sampling);
    std::unique_ptr<BlockDrafter> drafter;
    try {
      drafter = engine.new_drafter();
      if (drafter) generator.set_drafter(drafter.get(), options.speculative);
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex);
      if (stop_message.empty()) stop_message = e.what();
      stop = true;
    }
    while (!stop) {
      const size_t i = next.fetch_add(1);
      if (i >= pending.size()) break;
      const BatchRequest& request = *pending[i];
      try {
        run_one(generator, request);
      } catch (const std::exception& e) {
        // This request cannot run (prompt too long, bad sampling values, ...): note it and go on.
        std::lock_guard lock(mutex);
        if (stop) break;
        try {
          errors.append(error_line(request.line, request.id, e.what()));
          ++summary.failed;
        } catch (const WriteError& w) {
          record_write_failure(w);
        }
      }
    }
    std::lock_guard lock(mutex);
    if (--workers_left == 0) finished.notify_all();
  };

  std::vector<std::thread> threads;
  const int n_workers = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(options.parallel), std::max<size_t>(pending.size(), 1)));
  workers_left = n_workers;
  for (int i = 0; i < n_workers; ++i) threads.emplace_back(worker, i);

  // Watch for cancellation and draw the progress bar while the workers run.
  const int64_t total = summary.requests;
  auto draw = [&](bool last) {
    if (!options.progress) return;
    int64_t done;
    {
      std::lock_guard lock(mutex);
      done = summary.already_done + summary.completed + summary.failed;
    }
    const double seconds = ms_between(t_start, Clock::now()) / 1000.0;
    fmt::print(stderr, "\r{}\x1b[K{}", format_progress(done, total, seconds, tokens_total.load()),
               last ? "\n" : "");
    std::fflush(stderr);
  };
  {
    std::unique_lock lock(mutex);
    while (workers_left > 0) {
      finished.wait_for(lock, std::chrono::milliseconds(200));
      if (options.cancel && options.cancel->load()) {
        stop = true;
        summary.cancelled = true;
      }
      lock.unlock();
      draw(false);
      lock.lock();
    }
  }
  for (auto& t : threads) t.join();
  draw(true);
  summary.seconds = ms_between(t_start, Clock::now()) / 1000.0;
  if (!stop_message.empty()) {
    const int64_t done = summary.already_done + summary.completed;
    fail("{}; stopped with {} of {} results written; run again with --resume to finish",
         stop_message, done, summary.requests);
  }
  return summary;
}

}  // namespace boltrt::batch

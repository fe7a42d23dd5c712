// `boltrt batch`: run a JSON Lines file of requests, one result line each, resumable.
//   boltrt batch -m MODEL.gguf --input requests.jsonl --output results.jsonl [--parallel N]
//                [--resume] [--errors FILE] [--shard I/N] [sampling and reasoning defaults]
//                [--draft FILE [--draft-max N] [--draft-min N]]
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <string>

#include "api/fake_backend.h"
#include "api/model_backend.h"
#include "batch/backend_engine.h"
#include "batch/runner.h"
#include "command.h"
#include "device_options.h"
#include "draft_options.h"
#include "reasoning_options.h"
#include "util/error.h"

namespace boltrt::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) {
  g_interrupted = true;
}

struct BatchArgs {
  std::string model;
  batch::BatchOptions options;
  std::string shard;
  int shard_count = 0;
  int threads = 0;
  int64_t context = 4096;
  std::string kv_type = "f16";
  std::string device = "auto";
  ReasoningOptions reasoning;
  std::string progress = "auto";
  DraftOptions draft;
  bool fake_model = false;
  int fake_delay_us = 0;
};

// --shard, else SLURM_ARRAY_TASK_ID/COUNT (relative to SLURM_ARRAY_TASK_MIN), else
// JOB_COMPLETION_INDEX (Kubernetes Indexed Job) with --shard-count.
void resolve_shard(BatchArgs& args) {
  if (!args.shard.empty()) return batch::parse_shard(args.shard, args.options);
  const char* slurm_id = std::getenv("SLURM_ARRAY_TASK_ID");
  const char* slurm_count = std::getenv("SLURM_ARRAY_TASK_COUNT");
  if (slurm_id && slurm_count) {
    const char* slurm_min = std::getenv("SLURM_ARRAY_TASK_MIN");
    const long index = std::atol(slurm_id) - (slurm_min ? std::atol(slurm_min) : 0);
    return batch::parse_shard(fmt::format("{}/{}", index, slurm_count), args.options);
  }
  if (const char* k8s = std::getenv("JOB_COMPLETION_INDEX")) {
    if (args.shard_count < 1)
      fail("JOB_COMPLETION_INDEX is set: give the number of completions with --shard-count N");
    return batch::parse_shard(fmt::format("{}/{}", k8s, args.shard_count), args.options);
  }
}

void run(BatchArgs& args) {
  resolve_shard(args);
  args.options.reasoning = args.reasoning.config(-1);
  args.options.progress = args.progress == "on" || (args.progress == "auto" && ::isatty(2));
  args.options.cancel = &g_interrupted;

  std::shared_ptr<ModelBackend> backend;
  if (args.draft.enabled()) args.options.speculative = args.draft.speculative();
  if (args.fake_model) {
    if (args.draft.enabled()) fail("--draft needs a real model, not --fake-model");
    backend = make_fake_backend(args.context, args.fake_delay_us);
  } else {
    if (args.model.empty()) fail("batch: give a model with -m FILE");
    BackendOptions options;
    options.threads = args.threads;
    options.context = args.context;
    options.kv_type = args.kv_type;
    options.device = args.device;
    options.draft = args.draft.path;
    backend = open_model_backend(args.model, options);
  }
  const auto engine = batch::make_backend_engine(backend, args.options.parallel);

  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  const batch::BatchSummary s = batch::run_batch(*engine, args.options);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  fmt::print(stderr,
             "batch: {} requests: {} written now, {} already done, {} failed, {} malformed lines; "
             "{} tokens in {:.1f} s ({:.1f} tok/s); {}\n",
             s.requests, s.completed, s.already_done, s.failed, s.malformed, s.generated_tokens,
             s.seconds, s.seconds > 0 ? s.generated_tokens / s.seconds : 0.0, engine->describe());
  if (args.draft.enabled())
    fmt::print(stderr, "batch: {}\n", format_speculative_stats(s.draft, -1));
  if (s.truncated_bytes > 0)
    fmt::print(stderr, "batch: cut a partial last line of {} bytes from {}\n", s.truncated_bytes,
               args.options.output);
  if (s.cancelled) {
    fmt::print(stderr, "batch: interrupted; run again with --resume to finish\n");
    exit_with(130);
  }
}

void setup(CLI::App& sub) {
  auto args = std::make_shared<BatchArgs>();
  auto& o = args->options;
  sub.add_option("-m,--model", args->model, "GGUF model file");
  sub.add_option("--input", o.input, "requests, one JSON object per line")->required();
  sub.add_option("--output", o.output, "results, one JSON line per request")->required();
  sub.add_option("--errors", o.errors,
                 "malformed or failed requests (default OUTPUT.errors.jsonl)");
  sub.add_flag("--resume", o.resume, "continue an interrupted run: skip ids already in OUTPUT");
  sub.add_flag("--overwrite", o.overwrite, "start over even if OUTPUT exists");
  sub.add_option("--parallel", o.parallel, "sequences in flight (default 1)")
      ->check(CLI::Range(1, 1024));
  sub.add_option("--shard", args->shard,
                 "run only shard I of N (lines with (line-1) % N == I), e.g. 0/4; default from "
                 "SLURM_ARRAY_TASK_ID/COUNT or JOB_COMPLETION_INDEX");
  sub.add_option("--shard-count", args->shard_count, "N for JOB_COMPLETION_INDEX");
  sub.add_option("-t,--threads", args->threads, "CPU threads (default: physical cores)");
  sub.add_option("-c,--ctx-size", args->context, "context per sequence")
      ->check(CLI::PositiveNumber);
  sub.add_option("--kv-type", args->kv_type, "KV cache type: f16, f32, q8_0 or q4_0");
  add_device_option(sub, &args->device);
  sub.add_option("-n,--max-tokens", o.max_tokens, "default max_tokens (-1: until the end)");
  sub.add_option("--temp", o.sampling.temperature, "default temperature (0: greedy)");
  sub.add_option("--top-p", o.sampling.top_p, "default top_p");
  sub.add_option("--top-k", o.sampling.top_k, "default top_k");
  sub.add_option("--min-p", o.sampling.min_p, "default min_p");
  sub.add_option("--seed", o.sampling.seed, "default seed (requests may set their own)");
  add_reasoning_options(sub, args->reasoning, /*with_display=*/false);
  add_draft_options(sub, args->draft);
  sub.add_option("--progress", args->progress, "progress bar on stderr: on, off, auto (a terminal)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  // Hidden test hooks: a scripted model, a delay per decode, a simulated full disk.
  sub.add_flag("--fake-model", args->fake_model)->group("");
  sub.add_option("--fake-delay-us", args->fake_delay_us)->group("");
  sub.add_option("--fail-after-bytes", o.fail_after_bytes)->group("");
  sub.callback([args] { run(*args); });
}

}  // namespace

BOLTRT_COMMAND(batch, "Run a JSON Lines file of requests; resumable, one result line each", setup);

}  // namespace boltrt::cli

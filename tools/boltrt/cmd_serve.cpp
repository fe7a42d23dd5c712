// `boltrt serve`: an OpenAI-compatible HTTP server over the batch engine.
//   boltrt serve -m MODEL.gguf [--host 127.0.0.1] [--port 8080] [--parallel N]
//                [--api-key KEY | --api-key-file F] [-c N] [-t N] [--kv-type T] [--device D]
//                [--draft F] [sampling, reasoning defaults]
// Prints exactly one line "listening on http://HOST:PORT" on stderr once it accepts
// connections. SIGINT / SIGTERM: stop accepting, let requests in flight finish within
// --shutdown-grace seconds, cancel the rest, exit 0; a second signal exits at once (130).
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "api/fake_backend.h"
#include "api/model_backend.h"
#include "batch/backend_engine.h"
#include "command.h"
#include "device_options.h"
#include "draft_options.h"
#include "reasoning_options.h"
#include "server/http.h"
#include "server/openai_request.h"
#include "server/openai_server.h"
#include "server/scheduler.h"
#include "util/error.h"

namespace boltrt::cli {
namespace {

std::atomic<int> g_signals{0};
extern "C" void on_stop_signal(int) {
  if (g_signals.fetch_add(1) >= 1) ::_exit(130);  // the second one: leave now
}

struct ServeArgs {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int parallel = 1;
  int max_queue = 64;
  std::string api_key, api_key_file, alias;
  int threads = 0;
  int64_t context = 4096;
  std::string kv_type = "f16";
  std::string device = "auto";
  int64_t max_tokens = -1;
  SamplerConfig sampling;
  CLI::Option *temp = nullptr, *top_p = nullptr, *top_k = nullptr, *min_p = nullptr,
              *seed = nullptr;
  ReasoningOptions reasoning;
  DraftOptions draft;
  bool no_prefix_cache = false;
  double shutdown_grace_s = 10;
  server::HttpLimits limits;
  size_t body_limit_mib = 16;
  bool fake_model = false;
  int fake_delay_us = 0;
};

std::string read_key_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read the API key file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string key = ss.str();
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' '))
    key.pop_back();
  if (key.empty()) fail("{}: the API key file is empty", path);
  return key;
}

void run(ServeArgs& args) {
  if (!args.api_key.empty() && !args.api_key_file.empty())
    fail("give --api-key or --api-key-file, not both");
  std::string key = args.api_key;
  if (!args.api_key_file.empty()) key = read_key_file(args.api_key_file);

  std::shared_ptr<ModelBackend> backend;
  std::string model_id = args.alias;
  if (args.fake_model) {
    if (args.draft.enabled()) fail("--draft needs a real model, not --fake-model");
    backend = make_fake_backend(args.context, args.fake_delay_us);
    if (model_id.empty()) model_id = "fake";
  } else {
    if (args.model.empty()) fail("serve: give a model with -m FILE");
    BackendOptions options;
    options.threads = args.threads;
    options.context = args.context;
    options.kv_type = args.kv_type;
    options.device = args.device;
    options.draft = args.draft.path;
    backend = open_model_backend(args.model, options);
    if (model_id.empty()) model_id = std::filesystem::path(args.model).stem().string();
  }
  const auto engine = batch::make_backend_engine(backend, args.parallel);

  // Sampling defaults: the file's general.sampling.* keys, then the flags that were given.
  SamplerConfig sampling = backend->sampling_defaults(SamplerConfig{});
  if (args.temp->count()) sampling.temperature = args.sampling.temperature;
  if (args.top_p->count()) sampling.top_p = args.sampling.top_p;
  if (args.top_k->count()) sampling.top_k = args.sampling.top_k;
  if (args.min_p->count()) sampling.min_p = args.sampling.min_p;
  if (args.seed->count()) sampling.seed = args.sampling.seed;
  sampling.validate();

  server::SchedulerOptions scheduler_options;
  scheduler_options.parallel = args.parallel;
  scheduler_options.max_queue = args.max_queue;
  scheduler_options.prefix_cache = !args.no_prefix_cache;
  if (args.draft.enabled()) scheduler_options.speculative = args.draft.speculative();
  server::Scheduler scheduler(*engine, scheduler_options);

  server::OpenAiOptions options;
  options.model_id = model_id;
  options.api_key = key;
  options.sampling = sampling;
  options.max_tokens = args.max_tokens;
  options.reasoning = args.reasoning.config(-1);
  server::OpenAiServer api(scheduler, options);

  args.limits.max_body_bytes = args.body_limit_mib * 1024 * 1024;
  server::HttpServer http(
      args.limits,
      [&api](const server::HttpRequest& request, server::HttpResponder& response) {
        api.handle(request, response);
      },
      [](int status, std::string_view message) { return server::error_body(status, message); });
  const int port = http.listen(args.host, args.port);

  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  if (args.host != "127.0.0.1" && args.host != "localhost" && args.host != "::1" && key.empty())
    fmt::print(stderr, "boltrt: warning: listening on {} without --api-key\n", args.host);
  const bool v6 = args.host.find(':') != std::string::npos;
  fmt::print(stderr, "listening on http://{}{}{}:{}\n", v6 ? "[" : "", args.host, v6 ? "]" : "",
             port);
  std::fflush(stderr);

  std::thread accept_thread([&http] { http.run(); });
  while (g_signals.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));

  // Shutdown: no new connections or requests, in-flight requests get the grace period.
  api.begin_shutdown();
  http.stop();
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(args.shutdown_grace_s * 1000));
  if (!scheduler.wait_idle(grace))
    fmt::print(stderr, "boltrt: cancelling requests still running\n");
  scheduler.stop();
  accept_thread.join();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

void setup(CLI::App& sub) {
  auto args = std::make_shared<ServeArgs>();
  sub.add_option("-m,--model", args->model, "GGUF model file");
  sub.add_option("--host", args->host, "address to bind (default 127.0.0.1: this machine only)");
  sub.add_option("--port", args->port, "TCP port (default 8080; 0: a free port)")
      ->check(CLI::Range(0, 65535));
  sub.add_option("--parallel", args->parallel, "slots: requests generating at once (default 1)")
      ->check(CLI::Range(1, 1024));
  sub.add_option("--max-queue", args->max_queue,
                 "requests waiting for a slot before 429 (default 64)")
      ->check(CLI::Range(0, 1 << 20));
  sub.add_option("--api-key", args->api_key, "require Authorization: Bearer KEY");
  sub.add_option("--api-key-file", args->api_key_file, "read the key from a file");
  sub.add_option("--alias", args->alias, "model id in /v1/models (default: the file name)");
  sub.add_option("-t,--threads", args->threads, "CPU threads (default: physical cores)");
  sub.add_option("-c,--ctx-size", args->context, "context per slot")->check(CLI::PositiveNumber);
  sub.add_option("--kv-type", args->kv_type, "KV cache type: f16, f32, q8_0 or q4_0");
  add_device_option(sub, &args->device);
  sub.add_option("-n,--max-tokens", args->max_tokens,
                 "default max_tokens (-1: until the end or the context)");
  args->temp = sub.add_option("--temp", args->sampling.temperature, "default temperature");
  args->top_p = sub.add_option("--top-p", args->sampling.top_p, "default top_p");
  args->top_k = sub.add_option("--top-k", args->sampling.top_k, "default top_k");
  args->min_p = sub.add_option("--min-p", args->sampling.min_p, "default min_p");
  args->seed = sub.add_option("--seed", args->sampling.seed, "default seed");
  add_reasoning_options(sub, args->reasoning, /*with_display=*/false);
  add_draft_options(sub, args->draft);
  sub.add_flag("--no-prefix-cache", args->no_prefix_cache,
               "start every request from an empty cache");
  sub.add_option("--body-limit", args->body_limit_mib, "largest request body in MiB (default 16)")
      ->check(CLI::Range(1, 1024));
  sub.add_option("--header-timeout", args->limits.header_timeout_ms,
                 "ms for a request's headers to arrive (default 10000)")
      ->check(CLI::Range(1, 3'600'000));
  sub.add_option("--body-timeout", args->limits.body_timeout_ms,
                 "ms for a request body to arrive (default 30000)")
      ->check(CLI::Range(1, 3'600'000));
  sub.add_option("--idle-timeout", args->limits.idle_timeout_ms,
                 "ms a keep-alive connection may wait for its next request (default 30000)")
      ->check(CLI::Range(1, 3'600'000));
  sub.add_option("--shutdown-grace", args->shutdown_grace_s,
                 "seconds requests in flight may run after SIGTERM (default 10)")
      ->check(CLI::Range(0.0, 3600.0));
  // Hidden test hooks: a scripted model and a delay per decode.
  sub.add_flag("--fake-model", args->fake_model)->group("");
  sub.add_option("--fake-delay-us", args->fake_delay_us)->group("");
  sub.callback([args] { run(*args); });
}

}  // namespace

BOLTRT_COMMAND(serve, "OpenAI-compatible HTTP server (chat, completions, streaming)", setup);

}  // namespace boltrt::cli

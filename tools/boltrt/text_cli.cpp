#include "text_cli.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "command.h"
#include "util/error.h"

namespace boltrt::cli {

void add_model_flags(CLI::App& app, ModelFlags& flags) {
  app.add_option("-m,--model", flags.path, "GGUF model file")->required();
  app.add_option("-t,--threads", flags.threads,
                 "CPU threads (default: physical cores; 1 for models under 64 MiB)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-c,--ctx-size", flags.n_ctx,
                 "context size in tokens (0: the model's training context)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-type", flags.kv_type, "KV cache type")
      ->capture_default_str()
      ->check(CLI::IsMember({"f16", "f32", "q8_0"}));
}

namespace {

// Threads when -t is not given: the physical cores, except for models under 64 MiB. Their
// matrices are a few hundred KB, so an op's work is microseconds: a second thread's hand-offs,
// and its spinning between ops on a core that shares resources with the first, cost more than
// it saves (the shipped tiny model decodes at ~7,000-9,000 tokens/s on one thread and
// ~3,500 on two on the 2-vCPU development machine).
int default_model_threads(const std::string& path) {
  constexpr std::uintmax_t kSmallModelBytes = 64u << 20;
  std::error_code error;
  const std::uintmax_t bytes = std::filesystem::file_size(path, error);
  if (!error && bytes < kSmallModelBytes) return 1;
  return default_threads();
}

}  // namespace

std::unique_ptr<TextModel> load_model(const ModelFlags& flags) {
  TextModelOptions options;
  options.path = flags.path;
  options.threads = flags.threads > 0 ? flags.threads : default_model_threads(flags.path);
  options.n_ctx = flags.n_ctx;
  options.kv_type = flags.kv_type;
  options.device = flags.device;
  const bool bar = isatty(STDERR_FILENO) != 0;
  int shown = -1;
  if (bar) {
    options.on_progress = [&shown](float done) {
      const int percent = std::clamp(static_cast<int>(done * 100.0f), 0, 100);
      if (percent == shown) return;
      shown = percent;
      const int filled = percent * 30 / 100;
      fmt::print(stderr, "\rloading [{}{}] {:3d}%", std::string(static_cast<size_t>(filled), '#'),
                 std::string(static_cast<size_t>(30 - filled), ' '), percent);
      std::fflush(stderr);
    };
  }
  auto model = load_text_model(options);
  if (bar && shown >= 0) fmt::print(stderr, "\r{:50}\r", "");
  return model;
}

void add_sampling_flags(CLI::App& app, SamplingFlags& flags) {
  SamplerConfig& c = flags.config;
  flags.temperature = app.add_option("--temp", c.temperature, "temperature (0: greedy)");
  flags.top_k = app.add_option("--top-k", c.top_k, "top-k (0: off)");
  flags.top_p = app.add_option("--top-p", c.top_p, "top-p (1: off)");
  flags.min_p = app.add_option("--min-p", c.min_p, "min-p (0: off)");
  flags.repeat_penalty =
      app.add_option("--repeat-penalty", c.repeat_penalty, "repetition penalty (1: off)");
  flags.repeat_last_n = app.add_option("--repeat-last-n", flags.repeat_last_n_value,
                                       "tokens the penalties look back at (0: off)");
  app.add_option("--frequency-penalty", c.frequency_penalty, "frequency penalty (0: off)");
  app.add_option("--presence-penalty", c.presence_penalty, "presence penalty (0: off)");
  app.add_option("-s,--seed", c.seed, "random seed (default: random)");
}

SamplerConfig sampler_config(const SamplingFlags& flags, TextModel& model) {
  SamplerConfig config = model.sampling_defaults(SamplerConfig{});
  const SamplerConfig& given = flags.config;
  if (flags.temperature->count() > 0) config.temperature = given.temperature;
  if (flags.top_k->count() > 0) config.top_k = given.top_k;
  if (flags.top_p->count() > 0) config.top_p = given.top_p;
  if (flags.min_p->count() > 0) config.min_p = given.min_p;
  if (flags.repeat_penalty->count() > 0) config.repeat_penalty = given.repeat_penalty;
  if (flags.repeat_last_n->count() > 0) {
    if (flags.repeat_last_n_value < 0) {
      fail("--repeat-last-n {} must be 0 or more", flags.repeat_last_n_value);
    }
    config.penalty_last_n = flags.repeat_last_n_value;
  }
  config.frequency_penalty = given.frequency_penalty;
  config.presence_penalty = given.presence_penalty;
  config.seed = given.seed;
  config.validate();
  return config;
}

namespace {

std::atomic<bool>* g_cancel = nullptr;
const std::atomic<bool>* g_answering = nullptr;
bool g_warn_first = false;
std::atomic<int> g_interrupts_outside{0};

void write_stderr(const char* text) {
  size_t n = 0;
  while (text[n] != '\0') ++n;
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, text, n);
}

void on_interrupt(int) {
  const bool answering = g_answering == nullptr || g_answering->load();
  if (answering) {
    g_interrupts_outside = 0;
    // The first Ctrl-C stops the answer; one more while it is still stopping exits.
    if (g_cancel != nullptr && !g_cancel->exchange(true)) return;
  } else if (g_warn_first && g_interrupts_outside.fetch_add(1) == 0) {
    write_stderr("\n(press Ctrl-C again or type /exit to leave)\n");
    return;
  }
  write_stderr("\n");
  _exit(130);
}

}  // namespace

void install_interrupt_handler(std::atomic<bool>* cancel, const std::atomic<bool>* answering,
                               bool warn_first) {
  g_cancel = cancel;
  g_answering = answering;
  g_warn_first = warn_first;
  struct sigaction action = {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
}

int interrupts_at_prompt() {
  return g_interrupts_outside.load();
}

bool stdout_is_terminal() {
  return isatty(STDOUT_FILENO) != 0;
}
bool stdin_is_terminal() {
  return isatty(STDIN_FILENO) != 0;
}

}  // namespace boltrt::cli

// Flags and helpers shared by `boltrt generate` and `boltrt chat`: model and sampling flags
// (sampling defaults come from the file's general.sampling.* keys, flags override them), the
// load progress bar and Ctrl-C handling.
#pragma once
#include <CLI/CLI.hpp>
#include <atomic>
#include <memory>
#include <string>

#include "generate/gguf_text_model.h"
#include "generate/sampler.h"

namespace boltrt::cli {

struct ModelFlags {
  std::string path;
  int threads = 0;
  int64_t n_ctx = 4096;
  std::string kv_type = "f16";
  std::string device = "auto";  // --device (device_options.h): auto | cpu | cuda
};
void add_model_flags(CLI::App& app, ModelFlags& flags);
// Loads the model, with a progress bar on stderr when it is a terminal.
std::unique_ptr<TextModel> load_model(const ModelFlags& flags);

struct SamplingFlags {
  SamplerConfig config;  // values given on the command line
  CLI::Option* temperature = nullptr;
  CLI::Option* top_k = nullptr;
  CLI::Option* top_p = nullptr;
  CLI::Option* min_p = nullptr;
  CLI::Option* repeat_penalty = nullptr;
  CLI::Option* repeat_last_n = nullptr;
  int32_t repeat_last_n_value = 64;
};
void add_sampling_flags(CLI::App& app, SamplingFlags& flags);
// The file's defaults, overridden by the flags that were given.
SamplerConfig sampler_config(const SamplingFlags& flags, TextModel& model);

// Ctrl-C: while `answering` is true (always, when it is null) a Ctrl-C sets `cancel`, and one
// more before the answer has stopped exits with status 130. Outside an answer Ctrl-C exits with
// 130; with `warn_first` the first one only prints a hint and the second exits.
void install_interrupt_handler(std::atomic<bool>* cancel, const std::atomic<bool>* answering,
                               bool warn_first);

// How many Ctrl-C arrived outside an answer so far (libedit's readline returns "end of input"
// when one interrupts it; the caller then prompts again instead of leaving).
int interrupts_at_prompt();

bool stdout_is_terminal();
bool stdin_is_terminal();

}  // namespace boltrt::cli

// boltrt chat — an interactive conversation with a model.
//
//   boltrt chat -m FILE [--system TEXT] [--think on|off] [reasoning flags] [-n N] [sampling
//               flags] [--stop S]... [-t N] [-c CTX] [--kv-type f16|f32|q8_0|q4_0]
//               [--draft FILE [--draft-max N] [--draft-min N]]
//
// On a terminal input is read with libedit (line editing, history); from a pipe every line is
// one user turn. Commands: /help /exit /reset /system /think /stats /save /load. Ctrl-C stops
// the answer; at the prompt, a second Ctrl-C exits with status 130.
#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <string>

#ifdef BOLTRT_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#include "command.h"
#include "device_options.h"
#include "draft_options.h"
#include "generate/chat_loop.h"
#include "generate/generator.h"
#include "generate/reasoning.h"
#include "grammar_options.h"
#include "reasoning_options.h"
#include "text_cli.h"
#include "util/error.h"

namespace boltrt::cli {
namespace {

struct ChatFlags {
  ModelFlags model;
  SamplingFlags sampling;
  std::string system;
  std::string think;  // alias of --reasoning on|off
  ReasoningOptions reasoning;
  GrammarOptions grammar;
  int64_t n_predict = -1;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  DraftOptions draft;
};

std::optional<std::string> read_piped_line(const char*) {
  std::string line;
  if (!std::getline(std::cin, line)) return std::nullopt;
  return line;
}

#ifdef BOLTRT_HAVE_LIBEDIT
std::optional<std::string> read_terminal_line(const char* prompt) {
  char* raw = nullptr;
  while (raw == nullptr) {
    // A Ctrl-C at the prompt makes readline return null like Ctrl-D does; the interrupt
    // handler has printed its hint (a second one exits), so prompt again.
    const int interrupts = interrupts_at_prompt();
    raw = readline(prompt);
    if (raw == nullptr && interrupts_at_prompt() == interrupts) return std::nullopt;
  }
  std::string line(raw);
  std::free(raw);
  if (!line.empty()) add_history(line.c_str());
  return line;
}
#endif

void run(ChatFlags& flags, CLI::App& app) {
  if (app.count("--think") > 0) {
    if (app.count("--reasoning") > 0) fail("give --think or --reasoning, not both");
    flags.reasoning.mode = flags.think;
  }
  std::unique_ptr<TextModel> text = load_model(flags.model);
  const SamplerConfig sampling = sampler_config(flags.sampling, *text);
  if (!text->has_chat_template()) {
    fmt::print(stderr, "boltrt: warning: {} has no chat template; turns are plain text\n",
               flags.model.path);
  }
  Generator generator(text->model(), text->vocab(), sampling);
  // --draft: every answer is drafted and verified; the draft shares the model's weights.
  const std::unique_ptr<BlockDrafter> drafter = flags.draft.attach(*text, generator);

  const bool terminal = stdin_is_terminal();
  ChatOptions options;
  options.system = flags.system;
  options.thinking = flags.reasoning.enable_thinking();
  options.reasoning = flags.reasoning.display();
  const TextModel& model = *text;
  const OutputConstraint constraint = flags.grammar.constraint();
  const int64_t n_vocab = text->model().n_vocab();
  options.make_controller = [&flags, &model, constraint,
                             n_vocab]() -> std::unique_ptr<TokenController> {
    std::unique_ptr<TokenController> reasoning = flags.reasoning.controller(model, flags.n_predict);
    if (!constraint.active()) return reasoning;
    // Every answer is constrained; its thought (reasoning on) stays free.
    auto grammar =
        make_grammar_controller(constraint, model.vocab(), n_vocab, model.reasoning_markers(),
                                flags.reasoning.enable_thinking(), reasoning.get());
    grammar->adopt_inner(std::move(reasoning));
    return grammar;
  };
  options.max_tokens = flags.n_predict;
  options.stop_strings = flags.stop;
  options.ignore_end_of_generation = flags.ignore_eos;
  ChatLoop loop(*text, generator, options, std::cout, std::cerr);
  install_interrupt_handler(&loop.cancel_flag(), &loop.answering_flag(), true);

  if (terminal) {
    fmt::print(stderr, "boltrt chat — /help for commands, Ctrl-D or /exit to leave\n");
#ifdef BOLTRT_HAVE_LIBEDIT
    loop.run(read_terminal_line);
#else
    loop.run([](const char* prompt) {
      std::cout << prompt << std::flush;
      return read_piped_line(prompt);
    });
#endif
  } else {
    loop.run(read_piped_line, "");
  }
  if (drafter) fmt::print(stderr, "{}\n", format_speculative_stats(loop.draft_totals(), -1));
}

void setup(CLI::App& app) {
  auto flags = std::make_shared<ChatFlags>();
  add_model_flags(app, flags->model);
  add_device_option(app, &flags->model.device);
  add_sampling_flags(app, flags->sampling);
  app.add_option("--system", flags->system, "system prompt");
  add_reasoning_options(app, flags->reasoning);
  app.add_option("--think", flags->think, "reasoning on or off (= --reasoning)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("-n,--n-predict", flags->n_predict, "most tokens per answer (-1: no limit)")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
  app.add_option("--stop", flags->stop, "end the answer before this text (repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--ignore-eos", flags->ignore_eos,
               "never end an answer at end-of-generation tokens");
  add_draft_options(app, flags->draft);
  add_grammar_options(app, flags->grammar);
  app.callback([flags, &app] { run(*flags, app); });
}

}  // namespace

BOLTRT_COMMAND(chat, "Chat with a model (interactive, or one turn per line from a pipe)", setup);

}  // namespace boltrt::cli

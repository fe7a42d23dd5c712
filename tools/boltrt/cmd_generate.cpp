// boltrt generate — one prompt in, a streamed continuation out (or one JSON object).
//
//   boltrt generate -m FILE -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]
//                   [--repeat-penalty R] [--seed S] [--chat] [--system TEXT] [--think on|off]
//                   [--stop S]... [--json] [--ignore-eos] [--truncate] [-t N] [-c CTX]
//                   [--kv-type f16|f32|q8_0|q4_0] [--grammar G | --grammar-file F | -j SCHEMA |
//                   --json-schema-file F]
#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "device_options.h"
#include "draft_options.h"
#include "generate/generator.h"
#include "generate/reasoning.h"
#include "generate/reasoning_display.h"
#include "generate/reply_splitter.h"
#include "grammar_options.h"
#include "reasoning_options.h"
#include "text_cli.h"
#include "util/error.h"

namespace boltrt::cli {
namespace {

struct GenerateFlags {
  ModelFlags model;
  SamplingFlags sampling;
  std::string prompt;
  std::string prompt_file;
  int64_t n_predict = -1;
  bool chat = false;
  std::string system;
  std::string think;  // alias of --reasoning on|off
  ReasoningOptions reasoning;
  std::vector<std::string> stop;
  bool json = false;
  bool ignore_eos = false;
  bool truncate = false;
  DraftOptions draft;
  GrammarOptions grammar;
};

std::string read_prompt_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("{}: cannot open the prompt file", path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

void run(GenerateFlags& flags, CLI::App& app) {
  if (!flags.chat && (app.count("--system") > 0 || app.count("--think") > 0)) {
    fail("--system and --think need --chat");
  }
  if (app.count("--think") > 0) {
    if (app.count("--reasoning") > 0) fail("give --think or --reasoning, not both");
    flags.reasoning.mode = flags.think;
  }
  const std::string prompt_text =
      flags.prompt_file.empty() ? flags.prompt : read_prompt_file(flags.prompt_file);
  const OutputConstraint constraint = flags.grammar.constraint();  // fails before loading

  std::unique_ptr<TextModel> text = load_model(flags.model);
  const SamplerConfig sampling = sampler_config(flags.sampling, *text);

  std::vector<int32_t> prompt;
  std::optional<ReasoningMarkers> markers;
  std::unique_ptr<ReasoningController> controller;
  if (flags.chat && text->has_chat_template()) {
    std::vector<ChatMessage> messages;
    if (!flags.system.empty()) messages.push_back({"system", flags.system});
    messages.push_back({"user", prompt_text});
    prompt = text->tokenize_chat(messages, flags.reasoning.enable_thinking());
    markers = text->reasoning_markers();
    controller = flags.reasoning.controller(*text, flags.n_predict);
  } else {
    if (flags.chat) {
      fmt::print(stderr, "boltrt: warning: {} has no chat template; running plain completion\n",
                 flags.model.path);
    }
    prompt = text->tokenize(prompt_text, true);
  }

  Generator generator(text->model(), text->vocab(), sampling);
  // --draft: the draft shares the loaded target's weights and threads (one mapping).
  const std::unique_ptr<BlockDrafter> drafter = flags.draft.attach(*text, generator);
  ReplySplitter splitter(markers, ReplySplitter::prompt_opens_reasoning(prompt, markers));
  std::atomic<bool> cancel{false};
  install_interrupt_handler(&cancel, nullptr, false);

  GenerationOptions options;
  options.max_tokens = flags.n_predict;
  options.stop_strings = flags.stop;
  options.ignore_end_of_generation = flags.ignore_eos;
  options.overflow = flags.truncate ? ContextOverflow::kTruncateLeft : ContextOverflow::kError;
  options.cancel = &cancel;
  // --grammar / --json-schema: the constraint wraps the reasoning controller (the thought stays
  // free, the answer is constrained).
  const std::unique_ptr<GrammarController> grammar =
      make_grammar_controller(constraint, text->vocab(), text->model().n_vocab(), markers,
                              flags.chat && flags.reasoning.enable_thinking(), controller.get());
  options.controller = grammar ? static_cast<TokenController*>(grammar.get()) : controller.get();
  // With a chat format the reply is shown through the splitter (thinking hidden, dimmed or
  // plain); plain completion streams the text as it is.
  std::optional<ReasoningPrinter> printer;
  if (!flags.json && markers) printer.emplace(std::cout, flags.reasoning.display());
  if (!flags.json && !markers) {
    options.on_text = [](std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    };
  }
  options.on_token = [&](const TokenEvent& event) {
    const auto pieces = splitter.push(event.token, event.piece);
    if (printer) {
      printer->write(pieces);
      std::cout.flush();
    }
    return true;
  };
  const GenerationResult result = generator.generate(prompt, options);
  if (drafter && !flags.json) {
    fmt::print(stderr, "{}\n",
               format_speculative_stats(result.stats.draft, result.stats.tokens_per_second));
  }
  const auto rest = splitter.finish();
  if (printer) {
    printer->write(rest);
    printer->finish();
    std::cout.flush();
  }
  if (result.finish_reason == FinishReason::kStopString) splitter.truncate_at(result.stop_string);

  if (flags.json) {
    const GenerationStats& s = result.stats;
    nlohmann::ordered_json out;
    out["text"] = result.text;
    if (flags.chat) {
      out["reasoning"] = splitter.reasoning();
      out["content"] = splitter.content();
      out["reasoning_tokens"] =
          controller ? controller->reasoning_tokens() : splitter.reasoning_tokens();
    }
    out["n_tokens"] = s.n_tokens;
    out["n_prompt_tokens"] = s.n_prompt_tokens;
    out["ttft_ms"] = s.ttft_ms;
    out["tokens_per_second"] = s.tokens_per_second;
    out["prompt_tokens_per_second"] = s.prompt_tokens_per_second;
    out["finish_reason"] = to_string(result.finish_reason);
    if (!result.stop_string.empty()) out["stop_string"] = result.stop_string;
    out["seed"] = generator.sampler().seed();
    if (drafter) {
      const SpeculativeStats& d = result.stats.draft;
      out["draft"] = {{"drafted", d.n_drafted},
                      {"accepted", d.n_accepted},
                      {"rounds", d.n_rounds},
                      {"acceptance_rate", d.acceptance_rate()},
                      {"mean_accepted", d.mean_accepted()},
                      {"mean_acceptance_length", d.mean_acceptance_length()}};
    }
    out["tokens"] = result.tokens;
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else if (stdout_is_terminal() && !result.text.empty() && result.text.back() != '\n') {
    std::cout << '\n';
  }
  std::cout.flush();
  std::fflush(stdout);
  if (result.finish_reason == FinishReason::kCancelled) exit_with(130);
}

void setup(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  add_model_flags(app, flags->model);
  add_device_option(app, &flags->model.device);
  auto* prompt = app.add_option("-p,--prompt", flags->prompt, "prompt text");
  auto* file = app.add_option("-f,--file", flags->prompt_file, "read the prompt from a file");
  prompt->excludes(file);
  app.add_option("-n,--n-predict", flags->n_predict,
                 "most tokens to generate (-1: until end of generation or a full context)")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
  add_sampling_flags(app, flags->sampling);
  app.add_flag("--chat", flags->chat, "wrap the prompt as a user turn in the chat template");
  app.add_option("--system", flags->system, "system prompt (with --chat)");
  add_reasoning_options(app, flags->reasoning);
  add_draft_options(app, flags->draft);
  add_grammar_options(app, flags->grammar);
  app.add_option("--think", flags->think, "reasoning on or off (with --chat; = --reasoning)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--stop", flags->stop, "stop before this text (repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--json", flags->json, "print one JSON object instead of streaming text");
  app.add_flag("--ignore-eos", flags->ignore_eos, "never stop at end-of-generation tokens");
  app.add_flag("--truncate", flags->truncate,
               "drop the oldest prompt tokens when the prompt does not fit the context");
  app.callback([flags, &app] {
    if (app.count("--prompt") == 0 && app.count("--file") == 0) {
      fail("generate needs a prompt: -p TEXT or -f FILE");
    }
    run(*flags, app);
  });
}

}  // namespace

BOLTRT_COMMAND(generate, "Generate text from a prompt", setup);

}  // namespace boltrt::cli

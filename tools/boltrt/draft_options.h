// The speculative-decoding flags for `boltrt generate`, `chat` and `batch` (issue 8):
//
//   --draft FILE     a DFlash draft GGUF (general.architecture = dflash) for the model
//   --draft-max N    most drafted tokens per round (default: the draft's block size - 1)
//   --draft-min N    lower bound of the adaptive draft length (default 1); equal to
//                    --draft-max: a fixed length every round
//
// A command adds them with add_draft_options(); when enabled() it attaches the draft to its
// Generator with attach() (the draft shares the loaded model's weights and threads) and prints
// format_speculative_stats() on stderr after the run.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "generate/speculative.h"
#include "generate/text_model.h"

namespace boltrt::cli {

struct DraftOptions {
  std::string path;
  int64_t draft_max = -1;
  int64_t draft_min = 1;

  bool enabled() const { return !path.empty(); }
  // Throws boltrt::Error naming the flag for bad values.
  SpeculativeOptions speculative() const;
  // Loads the draft for `text`'s model and attaches it to `generator` (which must run on
  // text.model()). Returns the drafter, to be kept alive as long as the generator uses it; null
  // when --draft was not given.
  std::unique_ptr<BlockDrafter> attach(const TextModel& text, Generator& generator) const;
};

void add_draft_options(CLI::App& app, DraftOptions& options);

}  // namespace boltrt::cli

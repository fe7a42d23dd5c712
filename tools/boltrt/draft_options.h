// The speculative-decoding flags for `boltrt generate`, `chat` and `batch` (issue 8):
//
//   --draft FILE     a DFlash draft GGUF (general.architecture = dflash) for the model
//   --draft-max N    most drafted tokens per round (default: the draft's block size - 1)
//   --draft-min N    lower bound of the adaptive draft length (default 1); equal to
//                    --draft-max: a fixed length every round
//
// A command adds them with add_draft_options(); when enabled() it generates through
// make_generation() instead of a plain Generator and prints stats_line() with its statistics.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "generate/speculative.h"
#include "text_cli.h"

namespace boltrt::cli {

struct DraftOptions {
  std::string path;
  int64_t draft_max = -1;
  int64_t draft_min = 1;

  bool enabled() const { return !path.empty(); }
  // Throws boltrt::Error naming the flag for bad values.
  SpeculativeOptions speculative() const;
  // The draft and the loop over it and the model of `model` (loaded for the loop in a session
  // of its own, with the same context, cache type and threads).
  std::unique_ptr<DFlashGeneration> make_generation(const ModelFlags& model, GenerationVocab vocab,
                                                    const SamplerConfig& sampling) const;
};

void add_draft_options(CLI::App& app, DraftOptions& options);

}  // namespace boltrt::cli

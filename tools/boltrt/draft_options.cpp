#include "draft_options.h"

#include "util/error.h"

namespace boltrt::cli {

SpeculativeOptions DraftOptions::speculative() const {
  if (draft_max == 0 || draft_max < -1) fail("--draft-max {} must be >= 1", draft_max);
  if (draft_min < 1) fail("--draft-min {} must be >= 1", draft_min);
  if (draft_max > 0 && draft_min > draft_max) {
    fail("--draft-min {} is above --draft-max {}", draft_min, draft_max);
  }
  SpeculativeOptions o;
  o.draft_max = draft_max;
  o.draft_min = draft_min;
  o.adaptive = draft_max < 0 || draft_min < draft_max;
  return o;
}

std::unique_ptr<BlockDrafter> DraftOptions::attach(const TextModel& text,
                                                   Generator& generator) const {
  if (!enabled()) return nullptr;
  const SpeculativeOptions options = speculative();
  std::unique_ptr<BlockDrafter> drafter = text.load_drafter(path);
  generator.set_drafter(drafter.get(), options);
  return drafter;
}

void add_draft_options(CLI::App& app, DraftOptions& options) {
  app.add_option("--draft", options.path, "DFlash draft model (GGUF) for speculative decoding");
  app.add_option("--draft-max", options.draft_max,
                 "most drafted tokens per round; -1: the draft's block size - 1")
      ->capture_default_str();
  app.add_option("--draft-min", options.draft_min,
                 "lower bound of the adaptive draft length (= --draft-max: fixed length)")
      ->capture_default_str();
}

}  // namespace boltrt::cli

#include "draft_options.h"

#include <limits>
#include <optional>

#include "command.h"
#include "runtime/kv_cache.h"
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

std::unique_ptr<DFlashGeneration> DraftOptions::make_generation(
    const ModelFlags& model, GenerationVocab vocab, const SamplerConfig& sampling) const {
  SessionOptions session;
  session.n_ctx = model.n_ctx > 0 ? model.n_ctx : std::numeric_limits<int64_t>::max();
  const std::optional<KvType> kv = kv_type_from_name(model.kv_type);
  if (!kv) fail("--kv-type {}: expected f16, f32 or q8_0", model.kv_type);
  session.kv_type = *kv;
  return std::make_unique<DFlashGeneration>(path, model.path, session,
                                            model.threads > 0 ? model.threads : default_threads(),
                                            std::move(vocab), sampling, speculative());
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

// Speculative decoding with DFlash drafts (shared/docs/dflash.md A5-A7). The draft/verify loop
// itself is Generator's (generator.h) with a BlockDrafter attached:
//
//   prefill (taps on) --> drafter context
//   step: drafter proposes d_1..d_K after the last committed token `last`
//         target decodes [last, d_1..d_K] in ONE batch (all logits, taps on)
//         walk the rows j = 0..K exactly as plain decoding would (logit edits, controller,
//         the same Sampler: one draw per committed token), committing y_j, and stop after the
//         first y_j != d_{j+1}
//         roll the target back to the committed tokens, give the drafter their taps
//
// This file holds the DFlash drafter, SpeculativeGenerator (a Generator over any LanguageModel
// with a drafter, as the tests and benches drive it) and the statistics line the commands
// print. The commands open drafts through their model (LoadedModel::load_draft,
// TextModel::load_drafter), so nothing here names an architecture.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "model/dflash.h"

namespace boltrt {

class ThreadPool;

// A DFlash draft: block [last, mask x n], greedy proposal per slot (llama.cpp takes the top of
// its top-10 list, i.e. the argmax).
class DFlashDrafter : public BlockDrafter {
 public:
  // draft and pool (may be null: one thread) must outlive the drafter.
  DFlashDrafter(const DFlashDraft& draft, ThreadPool* pool);
  // A drafter that shares a loaded draft (the draft is immutable; each drafter has its own
  // context).
  DFlashDrafter(std::shared_ptr<const DFlashDraft> draft, ThreadPool* pool);
  int64_t max_draft() const override { return draft_.config().block_size - 1; }
  std::vector<int32_t> tap_layers() const override { return draft_.config().target_layers; }
  void reset() override;
  bool rollback(int64_t n) override;
  // Context rows are injected lazily: their taps wait until the next propose() (or until 64
  // rows wait), so a run of plain steps costs one batched injection.
  void add_context(std::span<const int32_t> tokens, const float* taps) override;
  int64_t context_end() const override { return kv_.pos_end + pending_rows_; }
  void propose(int32_t last, int64_t n, int32_t* out) override;
  // The injected context (rows of committed tokens only; injects the waiting ones).
  const DFlashKv& kv();

 private:
  static constexpr int64_t kPendingMax = 64;
  void flush();
  int64_t tap_row() const;  // floats of one token's taps

  std::vector<float> pending_taps_;  // [pending_rows_][n_taps][D], positions kv_.pos_end..
  int64_t pending_rows_ = 0;
  std::shared_ptr<const DFlashDraft> owned_;
  const DFlashDraft& draft_;
  ThreadPool* pool_;
  DFlashKv kv_;
  std::vector<int32_t> block_;
  DFlashScratch scratch_;
};

struct SpeculativeResult {
  GenerationResult generation;
  SpeculativeStats speculative;  // = generation.stats.draft
};

// Serialises a drafter's calls with a mutex, for drafters whose forward pass shares a thread
// pool with other sequences (the API's sessions, `boltrt batch` workers).
class LockedDrafter : public BlockDrafter {
 public:
  LockedDrafter(std::unique_ptr<BlockDrafter> inner, std::mutex& mutex)
      : inner_(std::move(inner)), mutex_(mutex) {}
  int64_t max_draft() const override { return inner_->max_draft(); }
  std::vector<int32_t> tap_layers() const override { return inner_->tap_layers(); }
  void reset() override { inner_->reset(); }
  bool rollback(int64_t n) override { return inner_->rollback(n); }
  void add_context(std::span<const int32_t> tokens, const float* taps) override {
    std::lock_guard lock(mutex_);
    inner_->add_context(tokens, taps);
  }
  int64_t context_end() const override { return inner_->context_end(); }
  void propose(int32_t last, int64_t n, int32_t* out) override {
    std::lock_guard lock(mutex_);
    inner_->propose(last, n, out);
  }

 private:
  std::unique_ptr<BlockDrafter> inner_;
  std::mutex& mutex_;
};

// A Generator over a language model with a drafter attached.
class SpeculativeGenerator {
 public:
  // target, drafter must outlive the generator. Turns on the target's tap capture (a target
  // that cannot capture throws boltrt::Error). Throws boltrt::Error when a verify batch
  // (draft_max + 1 tokens) is longer than the target can roll back (max_verify_batch()).
  SpeculativeGenerator(LanguageModel& target, BlockDrafter& drafter, GenerationVocab vocab,
                       const SamplerConfig& sampling, const SpeculativeOptions& options);

  // Generator::generate (the cached prefix is reused across calls).
  SpeculativeResult generate(std::span<const int32_t> prompt, const GenerationOptions& options);

  Sampler& sampler() { return generator_.sampler(); }
  Generator& generator() { return generator_; }

 private:
  Generator generator_;
};

// One line of statistics, e.g. "draft: 812/1024 accepted (79.3%), mean acceptance length 4.25
// over 191 rounds, 57.2 tokens/s".
std::string format_speculative_stats(const SpeculativeResult& result);
// The same from a generation's stats: "draft: 812/1024 accepted (79.3%), 3.25 accepted per
// verify step, mean acceptance length 4.25 over 191 rounds, 57.2 tokens/s" (tokens/s left out
// when `tokens_per_second` < 0).
std::string format_speculative_stats(const SpeculativeStats& stats, double tokens_per_second);

}  // namespace boltrt

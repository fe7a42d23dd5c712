// SpeculativeGenerator — the draft/verify loop of speculative decoding (shared/docs/dflash.md
// A5-A7), next to the plain Generator and producing the same tokens:
//
//   prefill (taps on) --> drafter context
//   round: drafter proposes d_1..d_K after the last committed token `last`
//          target decodes [last, d_1..d_K] in ONE batch (all logits, taps on)
//          walk the rows j = 0..K exactly as plain decoding would (logit edits, controller,
//          the same Sampler: one draw per committed token), committing y_j, and stop after the
//          first y_j != d_{j+1}
//          roll the target back to the committed tokens, give the drafter their taps
//
// Because every committed token is chosen by the real sampler from the target's own row, with
// the RNG advanced once per committed token, the output is the plain output: greedy exactly,
// and with temperature > 0 the same distribution (with the same seed the same tokens, up to
// the last-bit differences between a batched and a one-token forward). Rejected rows are never
// shown to the sampler or the controller, so neither needs a scratch copy.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "model/dflash.h"
#include "runtime/session.h"

namespace boltrt {

class ThreadPool;

// Proposes the tokens of a block. DFlashDrafter is the real one; tests plug in fakes.
class BlockDrafter {
 public:
  virtual ~BlockDrafter() = default;
  // The most tokens one proposal may hold (DFlash: block size - 1).
  virtual int64_t max_draft() const = 0;
  // Target layers (Gemma4Taps ids) whose hidden states add_context() needs; may be empty.
  virtual std::vector<int32_t> tap_layers() const = 0;
  // Forgets every context row.
  virtual void reset() = 0;
  // Committed tokens at positions context_end() .. +tokens.size()-1 and the target's taps for
  // them ([n][tap_layers().size()][D]).
  virtual void add_context(std::span<const int32_t> tokens, const float* taps) = 0;
  virtual int64_t context_end() const = 0;
  // Writes n proposed tokens that follow `last`, which sits at position context_end().
  virtual void propose(int32_t last, int64_t n, int32_t* out) = 0;
};

// A DFlash draft: block [last, mask x n], greedy proposal per slot (llama.cpp takes the top of
// its top-10 list, i.e. the argmax).
class DFlashDrafter : public BlockDrafter {
 public:
  DFlashDrafter(const DFlashDraft& draft, ThreadPool* pool);
  int64_t max_draft() const override { return draft_.config().block_size - 1; }
  std::vector<int32_t> tap_layers() const override { return draft_.config().target_layers; }
  void reset() override { kv_ = DFlashKv(); }
  void add_context(std::span<const int32_t> tokens, const float* taps) override;
  int64_t context_end() const override { return kv_.pos_end; }
  void propose(int32_t last, int64_t n, int32_t* out) override;
  // The injected context (rows of committed tokens only).
  const DFlashKv& kv() const { return kv_; }

 private:
  const DFlashDraft& draft_;
  ThreadPool* pool_;
  DFlashKv kv_;
  std::vector<int32_t> block_;
  std::vector<float> logits_;
};

struct SpeculativeOptions {
  int64_t draft_max = -1;  // most drafted tokens per round (< 0: the drafter's max_draft())
  int64_t draft_min = 1;   // adaptive lower bound
  // Adaptive: after a fully accepted round the length grows by 2, after a round accepting
  // less than half it shrinks by 1 (within draft_min..draft_max). Off: always draft_max.
  bool adaptive = true;
};

struct SpeculativeStats {
  int64_t n_rounds = 0;    // verify batches with at least one drafted token
  int64_t n_drafted = 0;   // drafted tokens sent to verification
  int64_t n_accepted = 0;  // drafted tokens kept
  // Tokens committed per round, the bonus/correction token included (tau of dflash.md A1).
  double mean_acceptance_length() const {
    return n_rounds > 0 ? static_cast<double>(n_accepted + n_rounds) / n_rounds : 0.0;
  }
  double acceptance_rate() const {
    return n_drafted > 0 ? static_cast<double>(n_accepted) / n_drafted : 0.0;
  }
};

struct SpeculativeResult {
  GenerationResult generation;
  SpeculativeStats speculative;
};

class SpeculativeGenerator {
 public:
  // target, drafter must outlive the generator. Turns on the target's tap capture.
  SpeculativeGenerator(Gemma4Session& target, BlockDrafter& drafter, GenerationVocab vocab,
                       const SamplerConfig& sampling, const SpeculativeOptions& options);

  // Same contract as Generator::generate (no prefix reuse: every call prefills from scratch).
  SpeculativeResult generate(std::span<const int32_t> prompt, const GenerationOptions& options);

  Sampler& sampler() { return sampler_; }

 private:
  Gemma4Session& target_;
  BlockDrafter& drafter_;
  GenerationVocab vocab_;
  Sampler sampler_;
  SpeculativeOptions options_;
  std::vector<float> logits_copy_;
};

// What a command needs for `--draft FILE`: the draft loaded for a target session and the loop
// over them.
class DFlashGeneration {
 public:
  // target must be a Gemma4Session (else one boltrt::Error naming the draft file); it and its
  // model must outlive this. Throws boltrt::Error when the draft does not fit the target.
  DFlashGeneration(const std::string& draft_path, LanguageModel& target, GenerationVocab vocab,
                   const SamplerConfig& sampling, const SpeculativeOptions& options);
  // Loads the target from `target_path` itself (a second read-only mapping of the file) and
  // runs it in its own session; for callers whose LanguageModel wraps the session (TextModel).
  // threads <= 0: one thread.
  DFlashGeneration(const std::string& draft_path, const std::string& target_path,
                   const SessionOptions& session, int threads, GenerationVocab vocab,
                   const SamplerConfig& sampling, const SpeculativeOptions& options);
  ~DFlashGeneration();

  SpeculativeResult generate(std::span<const int32_t> prompt, const GenerationOptions& options) {
    return generator_->generate(prompt, options);
  }
  Sampler& sampler() { return generator_->sampler(); }
  const DFlashDraft& draft() const { return *draft_; }

 private:
  void init(const std::string& draft_path, Gemma4Session& session, GenerationVocab vocab,
            const SamplerConfig& sampling, const SpeculativeOptions& options);

  // owned only by the second constructor
  std::unique_ptr<Gemma4Model> target_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Gemma4Session> session_;
  std::unique_ptr<DFlashDraft> draft_;
  std::unique_ptr<DFlashDrafter> drafter_;
  std::unique_ptr<SpeculativeGenerator> generator_;
};

// One line of statistics, e.g. "draft: 812/1024 accepted (79.3%), mean acceptance length 4.25
// over 191 rounds, 57.2 tokens/s".
std::string format_speculative_stats(const SpeculativeResult& result);

}  // namespace boltrt

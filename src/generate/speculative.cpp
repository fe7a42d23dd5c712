#include "generate/speculative.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt {

// ---------------------------------------------------------------------------------------------
// DFlashDrafter
// ---------------------------------------------------------------------------------------------

DFlashDrafter::DFlashDrafter(const DFlashDraft& draft, ThreadPool* pool)
    : draft_(draft), pool_(pool) {}

DFlashDrafter::DFlashDrafter(std::shared_ptr<const DFlashDraft> draft, ThreadPool* pool)
    : owned_(std::move(draft)), draft_(*owned_), pool_(pool) {}

void DFlashDrafter::reset() {
  kv_ = DFlashKv();
  pending_taps_.clear();
  pending_rows_ = 0;
}

bool DFlashDrafter::rollback(int64_t n) {
  if (n < 0 || n > context_end())
    fail("dflash: cannot roll the draft context back to {} (it ends at {})", n, context_end());
  if (n >= kv_.pos_end) {  // only pending rows go
    pending_rows_ = n - kv_.pos_end;
    pending_taps_.resize(static_cast<size_t>(pending_rows_ * tap_row()));
    return true;
  }
  pending_taps_.clear();
  pending_rows_ = 0;
  kv_.truncate(n);
  return true;
}

void DFlashDrafter::add_context(std::span<const int32_t> tokens, const float* taps) {
  if (tokens.empty()) return;
  // Kept until the next proposal (or kPendingMax rows): one batched injection for a run of
  // plain steps instead of one per token.
  const int64_t n = static_cast<int64_t>(tokens.size());
  pending_taps_.insert(pending_taps_.end(), taps, taps + n * tap_row());
  pending_rows_ += n;
  if (pending_rows_ >= kPendingMax) flush();
}

void DFlashDrafter::flush() {
  if (pending_rows_ == 0) return;
  draft_.inject(pending_taps_.data(), pending_rows_, kv_, pool_);
  pending_taps_.clear();
  pending_rows_ = 0;
}

const DFlashKv& DFlashDrafter::kv() {
  flush();
  return kv_;
}

int64_t DFlashDrafter::tap_row() const {
  return draft_.config().n_taps() * draft_.config().n_embd;
}

void DFlashDrafter::propose(int32_t last, int64_t n, int32_t* out) {
  if (n <= 0) return;
  if (n > max_draft())
    fail("dflash: {} draft tokens exceed the block size - 1 = {}", n, max_draft());
  block_.assign(static_cast<size_t>(n + 1), draft_.config().mask_token);
  block_[0] = last;
  flush();
  // slot i+1 predicts the token at its own position: out[i]
  draft_.draft_greedy(block_.data(), n + 1, kv_, scratch_, out, pool_);
}

// ---------------------------------------------------------------------------------------------
// SpeculativeGenerator
// ---------------------------------------------------------------------------------------------

SpeculativeGenerator::SpeculativeGenerator(LanguageModel& target, BlockDrafter& drafter,
                                           GenerationVocab vocab, const SamplerConfig& sampling,
                                           const SpeculativeOptions& options)
    : generator_(target, std::move(vocab), sampling) {
  generator_.set_drafter(&drafter, options);
  // A verify batch of draft_max + 1 tokens is rolled back by up to draft_max tokens (Gemma 4:
  // the sliding-window rings hold n_batch extra cells, so that must cover the batch).
  const int64_t draft_max = generator_.speculative_options().draft_max;
  if (target.max_verify_batch() < draft_max + 1) {
    fail("speculative: the target's batch size {} is below draft length + 1 = {}",
         target.max_verify_batch(), draft_max + 1);
  }
}

SpeculativeResult SpeculativeGenerator::generate(std::span<const int32_t> prompt,
                                                 const GenerationOptions& options) {
  SpeculativeResult out;
  out.generation = generator_.generate(prompt, options);
  out.speculative = out.generation.stats.draft;
  return out;
}

std::string format_speculative_stats(const SpeculativeResult& result) {
  const SpeculativeStats& s = result.speculative;
  return fmt::format(
      "draft: {}/{} accepted ({:.1f}%), mean acceptance length {:.2f} over {} rounds, {:.1f} "
      "tokens/s",
      s.n_accepted, s.n_drafted, 100.0 * s.acceptance_rate(), s.mean_acceptance_length(),
      s.n_rounds, result.generation.stats.tokens_per_second);
}

std::string format_speculative_stats(const SpeculativeStats& s, double tokens_per_second) {
  std::string line = fmt::format(
      "draft: {}/{} accepted ({:.1f}%), {:.2f} accepted per verify step, mean acceptance length "
      "{:.2f} over {} rounds",
      s.n_accepted, s.n_drafted, 100.0 * s.acceptance_rate(), s.mean_accepted(),
      s.mean_acceptance_length(), s.n_rounds);
  if (tokens_per_second >= 0) line += fmt::format(", {:.1f} tokens/s", tokens_per_second);
  return line;
}

}  // namespace boltrt

// BlockDrafter — what the generation loop needs from a speculative-decoding draft (issue 8,
// shared/docs/dflash.md): it proposes a block of tokens after the last committed one, and keeps
// a context that mirrors the target's committed tokens (DFlash: one injected row of target
// hidden states per token). DFlashDrafter (speculative.h) is the real one; tests plug in fakes.
//
// Generator (generator.h) runs the draft/verify rounds when a drafter is attached; these types
// live apart so that generator.h does not depend on the DFlash model code.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace boltrt {

class BlockDrafter {
 public:
  virtual ~BlockDrafter() = default;
  // The most tokens one proposal may hold (DFlash: block size - 1).
  virtual int64_t max_draft() const = 0;
  // Target layers (Gemma4Taps ids) whose hidden states add_context() needs; may be empty.
  virtual std::vector<int32_t> tap_layers() const = 0;
  // Forgets every context row.
  virtual void reset() = 0;
  // Keeps the first n context rows (n <= context_end()) and returns true, or returns false when
  // this drafter cannot (the caller then resets it and re-runs the whole prompt). The default
  // handles n == 0 only.
  virtual bool rollback(int64_t n) {
    if (n != 0) return false;
    reset();
    return true;
  }
  // Committed tokens at positions context_end() .. +tokens.size()-1 and the target's taps for
  // them ([n][tap_layers().size()][D]).
  virtual void add_context(std::span<const int32_t> tokens, const float* taps) = 0;
  virtual int64_t context_end() const = 0;
  // Writes n proposed tokens that follow `last`, which sits at position context_end().
  virtual void propose(int32_t last, int64_t n, int32_t* out) = 0;
};

struct SpeculativeOptions {
  int64_t draft_max = -1;  // most drafted tokens per round (< 0: the drafter's max_draft())
  int64_t draft_min = 1;   // adaptive lower bound
  // Adaptive: after a fully accepted round the length grows by 2, after a round accepting
  // less than half it shrinks by 1 (within draft_min..draft_max). Off: always draft_max.
  bool adaptive = true;
};

// Counters of the draft/verify rounds of one generation (all zero without a drafter).
struct SpeculativeStats {
  int64_t n_rounds = 0;    // verify batches with at least one drafted token
  int64_t n_drafted = 0;   // drafted tokens sent to verification
  int64_t n_accepted = 0;  // drafted tokens kept
  // Tokens committed per round, the bonus/correction token included (tau of dflash.md A1).
  double mean_acceptance_length() const {
    return n_rounds > 0 ? static_cast<double>(n_accepted + n_rounds) / n_rounds : 0.0;
  }
  // Mean drafted tokens accepted per verify round (tau - 1).
  double mean_accepted() const {
    return n_rounds > 0 ? static_cast<double>(n_accepted) / n_rounds : 0.0;
  }
  double acceptance_rate() const {
    return n_drafted > 0 ? static_cast<double>(n_accepted) / n_drafted : 0.0;
  }
  SpeculativeStats& operator+=(const SpeculativeStats& o) {
    n_rounds += o.n_rounds;
    n_drafted += o.n_drafted;
    n_accepted += o.n_accepted;
    return *this;
  }
};

}  // namespace boltrt

// BlockDrafter — what the generation loop needs from a speculative-decoding draft (issue 8,
// shared/docs/dflash.md): it proposes a block of tokens after the last committed one, and keeps
// a context that mirrors the target's committed tokens (DFlash: one injected row of target
// hidden states per token). DFlashDrafter (speculative.h) is the real one; tests plug in fakes.
//
// Generator (generator.h) runs the draft/verify rounds when a drafter is attached; these types
// live apart so that generator.h does not depend on the DFlash model code.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace boltrt {

class BlockDrafter {
 public:
  virtual ~BlockDrafter() = default;
  // The most tokens one proposal may hold (DFlash: block size - 1).
  virtual int64_t max_draft() const = 0;
  // Target layers (LayerTaps ids) whose hidden states add_context() needs; may be empty.
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
  int64_t draft_min = 1;   // adaptive lower bound of a drafting round's length
  // Adaptive (DraftLengthPolicy): each round drafts the length in draft_min..draft_max with
  // the most expected tokens per second, from the recent per-slot acceptance and the measured
  // cost of rounds of each length, or drafts nothing (a plain step, probing again later) when
  // no length beats plain decoding. Off: always draft_max.
  bool adaptive = true;
  // Adaptive: cost a round by its measured time (the generating thread's CPU time) (true), or by
  // the fixed model 1 + 0.5 * length plain steps (false: deterministic, for tests).
  bool timed = true;
};

// The adaptive draft length (SpeculativeOptions::adaptive).
//
// Acceptance: q[i] estimates the chance that drafted slot i is accepted when slots 1..i-1 were
// (an exponential moving average over the rounds that reached slot i), so a round of length n
// is expected to commit E(n) = 1 + sum_{i<=n} q[1]*...*q[i] tokens (the bonus/correction token
// included). Cost: c[n] is a moving average of the CPU time of rounds of length n (draft,
// verify, walk, injection; n = 0: a plain step), smoothed over the lengths by a line (cost())
// in which each length weighs by its recent rounds. next() picks the n maximising E(n) / c(n),
// n = 0 included. While plain steps win, a probe round is drafted every `probe_interval` steps
// (doubling up to 64 while probes fail) so a draft that starts to fit the text is noticed
// again. While drafting wins (timed), every kExploreEvery-th round drafts two tokens more or
// fewer than the best length, and every kPlainEvery-th round is a plain step: otherwise the
// lengths not chosen keep the costs and acceptances of the first, cold rounds (page faults,
// empty caches), and an early overestimate of long rounds locked the tiny model's Austen text
// (tau 6.9 at length 7) into one-token drafts at 0.8x the speed of length 7.
class DraftLengthPolicy {
 public:
  void reset(const SpeculativeOptions& options) {
    options_ = options;
    const size_t slots = static_cast<size_t>(std::max<int64_t>(0, options.draft_max)) + 1;
    q_.assign(slots, kPrior);
    cost_.assign(slots, -1.0);
    count_.assign(slots, 0);
    weight_.assign(slots, 0.0);
    seen_plain_ = seen_drafting_ = 0;
    plain_steps_ = 0;
    probe_interval_ = kProbeMin;
    drafting_rounds_ = 0;
  }

  // The draft length of the next round (0: a plain step).
  int64_t next() {
    const int64_t lo = std::max<int64_t>(1, options_.draft_min), hi = options_.draft_max;
    if (hi < lo) return 0;
    // Timed: plain steps until one is measured, the yardstick for every length (the first
    // one of a generator runs cold and is not counted).
    if (options_.timed && cost_[0] < 0) return 0;
    // rate[n] = E(n) / c(n); the longest length within kLengthMargin of the best rate wins (the
    // estimates are noisy, and a longer round amortises its fixed cost better once the
    // per-token cost of a batch falls), and drafting goes on unless a plain step (1 token per
    // c(0)) is better by more than kMargin.
    std::vector<double>& rate = rate_;
    rate.assign(static_cast<size_t>(hi) + 1, 0.0);
    double best_rate = 0;
    double expected = 1.0, reach = 1.0;
    for (int64_t n = 1; n <= hi; ++n) {
      reach *= q_[static_cast<size_t>(n)];
      expected += reach;
      if (n < lo) continue;
      rate[static_cast<size_t>(n)] = expected / cost(n);
      best_rate = std::max(best_rate, rate[static_cast<size_t>(n)]);
    }
    int64_t best = lo;
    for (int64_t n = hi; n >= lo; --n) {
      if (rate[static_cast<size_t>(n)] >= (1.0 - kLengthMargin) * best_rate) {
        best = n;
        break;
      }
    }
    if (best_rate * cost(0) >= 1.0 - kMargin) {  // drafting (about) as good as plain steps
      plain_steps_ = 0;
      probe_interval_ = kProbeMin;
      if (!options_.timed) return best;
      // exploration (see above): other lengths' costs and deeper slots' acceptance stay fresh
      ++drafting_rounds_;
      if (drafting_rounds_ % kPlainEvery == 0) return 0;
      if (drafting_rounds_ % kExploreEvery == 0) {
        const bool up = (drafting_rounds_ / kExploreEvery) % 2 == 1 || best <= lo;
        return std::clamp<int64_t>(up ? best + 2 : best - 2, lo, hi);
      }
      return best;
    }
    if (++plain_steps_ < probe_interval_) return 0;
    plain_steps_ = 0;
    probe_interval_ = std::min<int64_t>(kProbeMax, 2 * probe_interval_);
    return best;
  }

  // A round drafted `drafted` tokens (slots 1..drafted) and `accepted` of them were kept.
  void observe_acceptance(int64_t drafted, int64_t accepted) {
    drafted = std::min<int64_t>(drafted, static_cast<int64_t>(q_.size()) - 1);
    for (int64_t i = 1; i <= std::min(drafted, accepted + 1); ++i) {
      double& q = q_[static_cast<size_t>(i)];
      q += kRate * ((i <= accepted ? 1.0 : 0.0) - q);
    }
  }

  // A round of length n (0: a plain step) took `seconds`.
  void observe_cost(int64_t n, double seconds) {
    if (n < 0 || n >= static_cast<int64_t>(cost_.size()) || !(seconds > 0)) return;
    // The first drafting rounds and plain steps run with cold caches and fresh buffers (and,
    // timed, page faults on the first touch of each weight page): not counted.
    int64_t& seen = n == 0 ? seen_plain_ : seen_drafting_;
    if (++seen <= (options_.timed ? kWarmup : 1)) return;
    ++count_[static_cast<size_t>(n)];
    // recent rounds weigh more in the line over the lengths (cost())
    for (double& w : weight_) w *= kWeightDecay;
    weight_[static_cast<size_t>(n)] += 1.0;
    double& c = cost_[static_cast<size_t>(n)];
    // A round the OS preempted (shared machines) or the first one (page faults, allocations)
    // counts at most twice the running estimate.
    c = c < 0 ? seconds : c + kCostRate * (std::min(seconds, 2 * c) - c);
  }

  double acceptance(int64_t slot) const { return q_.at(static_cast<size_t>(slot)); }

  // The cost used for a round of length n (seconds, or model units while nothing is measured).
  // Drafting rounds: a line a + b * n fitted to the measured lengths (least squares, each
  // length weighted by its rounds up to 8, or timed by its rounds decayed by kWeightDecay per
  // round measured since, b >= 0), so one noisy length does not decide alone
  // and unmeasured lengths are predicted from their neighbours; with one measured length m,
  // the line from the plain step to it (or b = c[m] / (m + 1) without a plain step). A plain
  // step not measured yet is taken as half the cheapest drafting round.
  double cost(int64_t n) const {
    // before any measurement: a round of n drafts costs 1 + n/2 plain steps (a guess on the
    // safe side: a wasted round of a long draft is what hurts short generations)
    auto model = [](int64_t m) { return 1.0 + 0.5 * static_cast<double>(m); };
    if (!options_.timed) return model(n);
    const double plain = cost_[0];
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, cheapest = -1;
    int64_t lengths = 0, last = 0;
    for (size_t m = 1; m < cost_.size(); ++m) {
      if (cost_[m] <= 0) continue;
      const double w = options_.timed ? std::max(weight_[m], 1e-3)
                                      : static_cast<double>(std::min<int64_t>(count_[m], 8));
      const double x = static_cast<double>(m), y = cost_[m];
      sw += w;
      sx += w * x;
      sy += w * y;
      sxx += w * x * x;
      sxy += w * x * y;
      ++lengths;
      last = static_cast<int64_t>(m);
      if (cheapest < 0 || y < cheapest) cheapest = y;
    }
    if (n == 0) return plain > 0 ? plain : cheapest > 0 ? 0.5 * cheapest : model(0);
    if (lengths == 0) return plain > 0 ? plain * model(n) : model(n);
    double a = 0, b = 0;
    if (lengths == 1) {
      const double c = cost_[static_cast<size_t>(last)], x = static_cast<double>(last);
      b = plain > 0 && plain < c ? (c - plain) / x : c / (x + 1);
      a = c - b * x;
    } else {
      b = std::max(0.0, (sw * sxy - sx * sy) / (sw * sxx - sx * sx));
      a = (sy - b * sx) / sw;
    }
    return std::max(a + b * static_cast<double>(n), 1e-9);
  }

 private:
  static constexpr double kPrior = 0.7;     // acceptance of a slot never seen yet
  static constexpr double kRate = 0.4;      // weight of the newest round in q
  static constexpr double kCostRate = 0.2;  // weight of the newest round in c
  static constexpr int64_t kProbeMin = 8;   // plain steps before the first probe
  static constexpr int64_t kProbeMax = 64;
  static constexpr double kMargin = 0.05;        // drafting vs plain: rates this close are equal
  static constexpr double kLengthMargin = 0.10;  // between lengths: the longer one wins
  static constexpr int64_t kWarmup = 3;          // timed: rounds of each kind not counted
  static constexpr double kWeightDecay = 0.95;   // timed: per round, of each length's weight
  static constexpr int64_t kExploreEvery = 5;    // timed, drafting: best +- 2 every 5th round
  static constexpr int64_t kPlainEvery = 32;     // timed, drafting: a plain step every 32nd
  SpeculativeOptions options_;
  std::vector<double> q_;                       // [slot] conditional acceptance, slot 0 unused
  std::vector<double> cost_;                    // [length] seconds per round, < 0: not measured
  std::vector<int64_t> count_;                  // [length] rounds measured
  std::vector<double> weight_;                  // [length] recency-weighted rounds measured (timed)
  std::vector<double> rate_;                    // next()'s scratch
  int64_t seen_plain_ = 0, seen_drafting_ = 0;  // rounds observed, warm-up included
  int64_t plain_steps_ = 0;
  int64_t probe_interval_ = kProbeMin;
  int64_t drafting_rounds_ = 0;  // timed: rounds where drafting won (exploration's clock)
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

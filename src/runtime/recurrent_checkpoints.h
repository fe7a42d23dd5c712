// Copies of a sequence's recurrent state for rollback, for models whose state cannot run
// backwards (linear-attention / state-space layers). The policy every backend's session of such
// a model shares, on the CPU and on the device; State is the backend's state type, copied with
// its copy constructor and copy assignment (which reuses the destination's memory).
//   * decode-call checkpoints: the state at the start of each decode call, the most recent
//     `max_calls` of them (speculative decoding rolls back into the last verify batch);
//   * prompt checkpoints (off when max_prompt is 0): the state at the start and end of each
//     multi-token call and at each micro-batch boundary inside one, at most `max_prompt`,
//     thinned to stay spread over the history, so that a rollback to a long shared prefix
//     (serve, chat) recomputes about one micro-batch instead of the whole prefix.
// A session restores the newest checkpoint at or before the rollback target and re-runs the
// tokens from there; position 0 needs none (the zero state).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace boltrt {

template <class State>
class RecurrentCheckpoints {
 public:
  struct Checkpoint {
    int64_t pos = 0;
    State state;
  };

  RecurrentCheckpoints(int64_t max_calls, int64_t max_prompt)
      : max_calls_(std::max<int64_t>(0, max_calls)),
        max_prompt_(std::max<int64_t>(0, max_prompt)) {}

  // Before a call that appends n tokens at `start` to a sequence whose state is `live`: the
  // start of a multi-token call is a prompt checkpoint when those are kept, else a decode-call
  // checkpoint (none at position 0 or twice at one position).
  void begin_call(int64_t start, int64_t n, const State& live) {
    if (n > 1 && max_prompt_ > 0) {
      add_prompt(start, live);
      return;
    }
    if (max_calls_ == 0 || start == 0 || (!calls_.empty() && calls_.back().pos == start)) return;
    if (static_cast<int64_t>(calls_.size()) == max_calls_) {
      // Reuse the oldest checkpoint's memory (same sizes: a copy, no allocation). A fresh copy
      // per decode call had the CPU fault in and zero a new recurrent state every token (4B
      // shape: 50 MB), ~4 % of a 2-thread decode.
      std::rotate(calls_.begin(), calls_.begin() + 1, calls_.end());
      calls_.back().pos = start;
      calls_.back().state = live;
    } else {
      calls_.push_back({start, live});
    }
  }

  // Keeps `live` as a prompt checkpoint at pos (thinning the others when there are too many).
  void add_prompt(int64_t pos, const State& live) {
    if (pos == 0 || max_prompt_ == 0) return;
    if (!prompt_.empty() && prompt_.back().pos == pos) return;
    prompt_.push_back({pos, live});
    if (static_cast<int64_t>(prompt_.size()) <= max_prompt_) return;
    // too many: drop the one (never the newest) whose removal leaves the smallest gap between
    // its neighbours, so the kept ones stay spread from position 0 to the newest
    size_t drop = 0;
    int64_t best_gap = -1;
    for (size_t i = 0; i + 1 < prompt_.size(); ++i) {
      const int64_t before = i == 0 ? 0 : prompt_[i - 1].pos;
      const int64_t gap = prompt_[i + 1].pos - before;
      if (best_gap < 0 || gap < best_gap) {
        best_gap = gap;
        drop = i;
      }
    }
    prompt_.erase(prompt_.begin() + static_cast<std::ptrdiff_t>(drop));
  }

  // Drops the checkpoints past n; returns the newest remaining one (position ≤ n), or null.
  const Checkpoint* restore_point(int64_t n) {
    while (!calls_.empty() && calls_.back().pos > n) calls_.pop_back();
    while (!prompt_.empty() && prompt_.back().pos > n) prompt_.pop_back();
    const Checkpoint* from = calls_.empty() ? nullptr : &calls_.back();
    if (!prompt_.empty() && (!from || prompt_.back().pos > from->pos)) from = &prompt_.back();
    return from;
  }

  // Positions of the checkpoints held (both kinds), ascending.
  std::vector<int64_t> positions() const {
    std::vector<int64_t> out;
    for (const Checkpoint& c : calls_) out.push_back(c.pos);
    for (const Checkpoint& c : prompt_) out.push_back(c.pos);
    std::sort(out.begin(), out.end());
    return out;
  }
  // Calls f(state) for every checkpoint held (memory figures).
  template <class F>
  void for_each(F f) const {
    for (const Checkpoint& c : calls_) f(c.state);
    for (const Checkpoint& c : prompt_) f(c.state);
  }

 private:
  int64_t max_calls_, max_prompt_;
  std::vector<Checkpoint> calls_;   // decode-call starts, increasing positions
  std::vector<Checkpoint> prompt_;  // increasing positions
};

}  // namespace boltrt

#include "model/qwen35_session.h"

#include <algorithm>

#include "util/error.h"

namespace boltrt {

Qwen35Session::Qwen35Session(const Qwen35Model& model, const SessionOptions& options,
                             ThreadPool* pool)
    : model_(model),
      pool_(pool),
      n_batch_(std::max<int64_t>(
          1, std::min(options.n_batch, clamp_context(options.n_ctx, model.config().n_ctx_train)))),
      max_checkpoints_(std::max<int64_t>(0, options.recurrent_checkpoints)),
      kv_(model.kv_layout(), clamp_context(options.n_ctx, model.config().n_ctx_train), n_batch_,
          options.kv_type),
      state_(model.new_state()) {
  workspace_.attention_chunk = options.attention_chunk;
}

std::span<const float> Qwen35Session::decode(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t V = n_vocab();
  if (n == 0) fail("decode: no tokens");
  if (n_past() + n > n_ctx()) {
    fail("decode: {} tokens after {} do not fit in the context of {}", n, n_past(), n_ctx());
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= V) fail("decode: token id {} outside the vocabulary [0, {})", t, V);
  }
  const int64_t start = n_past();
  // checkpoint of the state before this call (position 0 needs none: the zero state)
  if (max_checkpoints_ > 0 && start > 0 &&
      (checkpoints_.empty() || checkpoints_.back().pos != start)) {
    if (static_cast<int64_t>(checkpoints_.size()) == max_checkpoints_) {
      checkpoints_.erase(checkpoints_.begin());
    }
    checkpoints_.push_back({start, state_});
  }
  logits_.resize(static_cast<size_t>((all_logits ? n : 1) * V));
  tokens_.resize(static_cast<size_t>(start));
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  try {
    for (int64_t done = 0; done < n; done += n_batch_) {
      const int64_t m = std::min(n_batch_, n - done);
      const bool last_chunk = done + m == n;
      float* out = all_logits ? logits_.data() + done * V : (last_chunk ? logits_.data() : nullptr);
      model_.forward(tokens.data() + done, m, n_past(), kv_, state_, workspace_, pool_, out,
                     all_logits);
      kv_.set_n_past(n_past() + m);
    }
  } catch (...) {
    // back to the state before the call (the checkpoint just taken, or recompute)
    tokens_.resize(static_cast<size_t>(start));
    restore(start);
    throw;
  }
  return {logits_.data(), logits_.size()};
}

void Qwen35Session::rollback(int64_t n) {
  if (n < 0 || n > n_past()) fail("rollback: cannot go to {} (n_past {})", n, n_past());
  if (n == n_past()) return;
  kv_.rollback(n);
  tokens_.resize(static_cast<size_t>(n));
  restore(n);
}

void Qwen35Session::restore(int64_t n) {
  // drop checkpoints past n; the newest remaining one (position ≤ n) is where to restart
  while (!checkpoints_.empty() && checkpoints_.back().pos > n) checkpoints_.pop_back();
  int64_t from = 0;
  if (checkpoints_.empty()) {
    state_.clear();
  } else {
    state_ = checkpoints_.back().state;
    from = checkpoints_.back().pos;
  }
  recompute(from, n);
}

void Qwen35Session::recompute(int64_t from, int64_t to) {
  kv_.set_n_past(from);  // rows [from, to) are rewritten with the same values
  for (int64_t p = from; p < to; p += n_batch_) {
    const int64_t m = std::min(n_batch_, to - p);
    model_.forward(tokens_.data() + p, m, p, kv_, state_, workspace_, pool_, nullptr, false);
    kv_.set_n_past(p + m);
  }
  kv_.set_n_past(to);
}

void Qwen35Session::copy_prefix(const Qwen35Session& other, int64_t n) {
  if (&other.model_ != &model_) fail("copy_prefix: the sessions run different models");
  if (n < 0 || n > other.n_past()) {
    fail("copy_prefix: {} tokens asked, the other sequence holds {}", n, other.n_past());
  }
  kv_.copy_prefix(other.kv_, other.n_past());
  state_ = other.state_;
  checkpoints_ = other.checkpoints_;
  tokens_ = other.tokens_;
  rollback(n);
}

size_t Qwen35Session::recurrent_memory_bytes() const {
  size_t bytes = state_.bytes();
  for (const Checkpoint& c : checkpoints_) bytes += c.state.bytes();
  return bytes;
}

std::vector<int64_t> Qwen35Session::checkpoint_positions() const {
  std::vector<int64_t> out;
  for (const Checkpoint& c : checkpoints_) out.push_back(c.pos);
  return out;
}

}  // namespace boltrt

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
      kv_(model.kv_layout(), clamp_context(options.n_ctx, model.config().n_ctx_train), n_batch_,
          options.kv_type),
      state_(model.new_state()),
      checkpoints_(options.recurrent_checkpoints, options.prompt_checkpoints) {
  workspace_.attention_chunk = options.attention_chunk;
}

void Qwen35Session::begin_call(std::span<const int32_t> tokens) {
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
  checkpoints_.begin_call(start, n, state_);
  tokens_.resize(static_cast<size_t>(start));
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
}

std::span<const float> Qwen35Session::decode(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t V = n_vocab();
  const int64_t start = n_past();
  begin_call(tokens);
  logits_.resize(static_cast<size_t>((all_logits ? n : 1) * V));
  const int64_t tap_row = static_cast<int64_t>(tap_layers_.size()) * model_.config().n_embd;
  taps_.resize(static_cast<size_t>(n * tap_row));
  try {
    for (int64_t done = 0; done < n; done += n_batch_) {
      if (done > 0) checkpoints_.add_prompt(start + done, state_);  // the state after `done` tokens
      const int64_t m = std::min(n_batch_, n - done);
      const bool last_chunk = done + m == n;
      float* out = all_logits ? logits_.data() + done * V : (last_chunk ? logits_.data() : nullptr);
      const LayerTaps taps{tap_layers_, taps_.data() + done * tap_row};
      model_.forward(tokens.data() + done, m, n_past(), kv_, state_, workspace_, pool_, out,
                     all_logits, tap_layers_.empty() ? nullptr : &taps);
      kv_.set_n_past(n_past() + m);
    }
    if (n > 1) checkpoints_.add_prompt(start + n, state_);  // where the reply to a prompt starts
  } catch (...) {
    // back to the state before the call (the checkpoint just taken, or recompute)
    tokens_.resize(static_cast<size_t>(start));
    restore(start);
    throw;
  }
  return {logits_.data(), logits_.size()};
}

std::vector<std::span<const float>> Qwen35Session::decode_batch(
    std::span<Qwen35Session* const> sessions, std::span<const std::span<const int32_t>> tokens) {
  if (sessions.size() != tokens.size()) {
    fail("decode_batch: {} sessions but {} token lists", sessions.size(), tokens.size());
  }
  if (sessions.empty()) return {};
  const Qwen35Model& model = sessions[0]->model_;
  const int64_t V = model.n_vocab();
  for (size_t i = 0; i < sessions.size(); ++i) {
    const Qwen35Session& s = *sessions[i];
    if (&s.model_ != &model) fail("decode_batch: sessions of different models");
    for (size_t j = 0; j < i; ++j) {
      if (sessions[j] == &s) fail("decode_batch: one session appears twice");
    }
    if (static_cast<int64_t>(tokens[i].size()) > s.n_batch_) {
      fail("decode_batch: session {}: {} tokens exceed the micro-batch of {}", i, tokens[i].size(),
           s.n_batch_);
    }
  }
  // validate and checkpoint every session first (begin_call throws before changing anything)
  std::vector<int64_t> starts;
  std::vector<int32_t> all;
  std::vector<Qwen35Sequence> sequences;
  try {
    for (size_t i = 0; i < sessions.size(); ++i) {
      Qwen35Session& s = *sessions[i];
      const int64_t start = s.n_past();
      s.begin_call(tokens[i]);
      starts.push_back(start);
      all.insert(all.end(), tokens[i].begin(), tokens[i].end());
      sequences.push_back({&s.kv_, &s.state_, start, static_cast<int64_t>(tokens[i].size())});
    }
    Qwen35Session& lead = *sessions[0];
    std::vector<float> logits(sessions.size() * static_cast<size_t>(V));
    // hidden-state capture (all sessions with the same tap layers): [all tokens][taps][D] in
    // batch order, split into each session's taps() below
    const std::vector<int32_t>& tap_layers = lead.tap_layers_;
    for (const Qwen35Session* s : sessions) {
      if (s->tap_layers_ != tap_layers) fail("decode_batch: sessions capture different taps");
    }
    const int64_t tap_row = static_cast<int64_t>(tap_layers.size()) * model.config().n_embd;
    std::vector<float> taps(all.size() * static_cast<size_t>(tap_row));
    const LayerTaps capture{tap_layers, taps.data()};
    model.forward(all.data(), sequences, lead.workspace_, lead.pool_, logits.data(), false,
                  tap_layers.empty() ? nullptr : &capture);
    size_t first_token = 0;
    std::vector<std::span<const float>> out;
    for (size_t i = 0; i < sessions.size(); ++i) {
      Qwen35Session& s = *sessions[i];
      s.kv_.set_n_past(starts[i] + static_cast<int64_t>(tokens[i].size()));
      const auto row = logits.begin() + static_cast<std::ptrdiff_t>(i * static_cast<size_t>(V));
      s.logits_.assign(row, row + V);
      out.emplace_back(s.logits_.data(), s.logits_.size());
      const auto tap_begin = taps.begin() + static_cast<std::ptrdiff_t>(first_token * tap_row);
      s.taps_.assign(tap_begin,
                     tap_begin + static_cast<std::ptrdiff_t>(tokens[i].size() * tap_row));
      first_token += tokens[i].size();
      if (tokens[i].size() > 1) s.checkpoints_.add_prompt(s.n_past(), s.state_);
    }
    return out;
  } catch (...) {
    // every session that began its call goes back to the state before it
    for (size_t i = 0; i < starts.size(); ++i) {
      Qwen35Session& s = *sessions[i];
      s.tokens_.resize(static_cast<size_t>(starts[i]));
      s.restore(starts[i]);
    }
    throw;
  }
}

void Qwen35Session::set_tap_layers(std::vector<int32_t> layers) {
  for (int32_t k : layers) {
    if (k < 0 || k > model_.config().n_layer) {
      fail("tap layer {} outside [0, {}]", k, model_.config().n_layer);
    }
  }
  tap_layers_ = std::move(layers);
  taps_.clear();
}

void Qwen35Session::rollback(int64_t n) {
  if (n < 0 || n > n_past()) fail("rollback: cannot go to {} (n_past {})", n, n_past());
  if (n == n_past()) return;
  kv_.rollback(n);
  tokens_.resize(static_cast<size_t>(n));
  restore(n);
}

void Qwen35Session::restore(int64_t n) {
  // the newest checkpoint at or before n is where to restart (the later ones are dropped)
  if (const auto* from = checkpoints_.restore_point(n)) {
    state_ = from->state;
    recompute(from->pos, n);
  } else {
    state_.clear();
    recompute(0, n);
  }
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
  checkpoints_.for_each([&](const Qwen35State& c) { bytes += c.bytes(); });
  return bytes;
}

std::vector<int64_t> Qwen35Session::checkpoint_positions() const {
  return checkpoints_.positions();
}

}  // namespace boltrt

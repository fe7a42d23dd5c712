#include "model/gemma4_session.h"

#include <algorithm>

#include "util/error.h"

namespace boltrt {

Gemma4Session::Gemma4Session(const Gemma4Model& model, const SessionOptions& options,
                             ThreadPool* pool)
    : model_(model),
      pool_(pool),
      n_batch_(std::max<int64_t>(
          1, std::min(options.n_batch, clamp_context(options.n_ctx, model.config().n_ctx_train)))),
      kv_(model.kv_layout(), clamp_context(options.n_ctx, model.config().n_ctx_train), n_batch_,
          options.kv_type) {
  workspace_.attention_chunk = options.attention_chunk;
}

std::span<const float> Gemma4Session::decode(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t V = n_vocab();
  if (n == 0) fail("decode: no tokens");
  verify_rows_ = 0;  // logits_ is overwritten
  if (n_past() + n > n_ctx()) {
    fail("decode: {} tokens after {} do not fit in the context of {}", n, n_past(), n_ctx());
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= V) fail("decode: token id {} outside the vocabulary [0, {})", t, V);
  }
  logits_.resize(static_cast<size_t>((all_logits ? n : 1) * V));
  const int64_t start = n_past();
  const int64_t tap_row = static_cast<int64_t>(tap_layers_.size()) * model_.config().n_embd;
  taps_.resize(static_cast<size_t>(n * tap_row));
  try {
    for (int64_t done = 0; done < n; done += n_batch_) {
      const int64_t m = std::min(n_batch_, n - done);
      const bool last_chunk = done + m == n;
      float* out = all_logits ? logits_.data() + done * V : (last_chunk ? logits_.data() : nullptr);
      const LayerTaps taps{tap_layers_, taps_.data() + done * tap_row};
      model_.forward(tokens.data() + done, m, n_past(), kv_, workspace_, pool_, out, all_logits,
                     tap_layers_.empty() ? nullptr : &taps);
      kv_.set_n_past(n_past() + m);
    }
  } catch (...) {
    kv_.set_n_past(start);  // the cache cells past `start` are simply stale
    throw;
  }
  return {logits_.data(), logits_.size()};
}

void Gemma4Session::decode_verify(std::span<const int32_t> tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t V = n_vocab(), D = model_.config().n_embd;
  verify_rows_ = 0;
  if (n > n_batch_ || n == 0) {  // several forward calls: every row's logits at once
    decode(tokens, /*all_logits=*/true);
    verify_rows_ = n;
    verify_done_.assign(static_cast<size_t>(n), 1);
    return;
  }
  if (n_past() + n > n_ctx()) {
    fail("decode: {} tokens after {} do not fit in the context of {}", n, n_past(), n_ctx());
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= V) fail("decode: token id {} outside the vocabulary [0, {})", t, V);
  }
  const int64_t tap_row = static_cast<int64_t>(tap_layers_.size()) * D;
  taps_.resize(static_cast<size_t>(n * tap_row));
  const LayerTaps taps{tap_layers_, taps_.data()};
  // no logits: the forward leaves the final residual rows in workspace_.h
  model_.forward(tokens.data(), n, n_past(), kv_, workspace_, pool_, nullptr, false,
                 tap_layers_.empty() ? nullptr : &taps);
  kv_.set_n_past(n_past() + n);
  verify_hidden_.assign(workspace_.h.begin(), workspace_.h.begin() + n * D);
  logits_.resize(static_cast<size_t>(n * V));
  verify_done_.assign(static_cast<size_t>(n), 0);
  verify_rows_ = n;
}

std::span<const float> Gemma4Session::verify_row(int64_t j) {
  const int64_t V = n_vocab(), D = model_.config().n_embd;
  if (j < 0 || j >= verify_rows_) fail("verify_row: row {} of a batch of {}", j, verify_rows_);
  float* row = logits_.data() + j * V;
  if (!verify_done_[static_cast<size_t>(j)]) {
    // Rows in doubling chunks (0, 1, 2-3, 4-7, ...): a walk that goes on past row j likely
    // goes further, and a head over several rows costs less per row than one row at a time.
    const int64_t limit = std::min(verify_rows_, j + std::max<int64_t>(1, j));
    int64_t end = j + 1;  // up to the limit or the first row already computed (kept as is)
    while (end < limit && !verify_done_[static_cast<size_t>(end)]) ++end;
    model_.output_logits(verify_hidden_.data() + j * D, end - j, workspace_, pool_, row);
    std::fill(verify_done_.begin() + j, verify_done_.begin() + end, uint8_t{1});
  }
  return {row, static_cast<size_t>(V)};
}

void Gemma4Session::set_tap_layers(std::vector<int32_t> layers) {
  for (int32_t k : layers) {
    if (k < 0 || k > model_.config().n_layer) {
      fail("tap layer {} outside [0, {}]", k, model_.config().n_layer);
    }
  }
  tap_layers_ = std::move(layers);
  taps_.clear();
}

void Gemma4Session::rollback(int64_t n_past) {
  kv_.rollback(n_past);
  verify_rows_ = 0;  // the verify rows are gone with their tokens
}

}  // namespace boltrt

namespace boltrt {

void Gemma4Session::copy_prefix(const Gemma4Session& other, int64_t n) {
  if (&other.model_ != &model_) fail("copy_prefix: sessions of different models");
  kv_.copy_prefix(other.kv_, n);
}

std::vector<std::span<const float>> Gemma4Session::decode_batch(
    std::span<Gemma4Session* const> sessions, std::span<const std::span<const int32_t>> tokens) {
  if (sessions.size() != tokens.size()) {
    fail("decode_batch: {} sessions but {} token lists", sessions.size(), tokens.size());
  }
  if (sessions.empty()) return {};
  const Gemma4Model& model = sessions[0]->model_;
  const int64_t V = model.config().n_vocab;
  std::vector<int32_t> all;
  std::vector<Gemma4Sequence> sequences;
  for (size_t i = 0; i < sessions.size(); ++i) {
    Gemma4Session& s = *sessions[i];
    if (&s.model_ != &model) fail("decode_batch: sessions of different models");
    const int64_t n = static_cast<int64_t>(tokens[i].size());
    if (n == 0) fail("decode_batch: session {} has no tokens", i);
    if (s.n_past() + n > s.n_ctx()) {
      fail("decode_batch: session {}: {} tokens after {} do not fit in the context of {}", i, n,
           s.n_past(), s.n_ctx());
    }
    all.insert(all.end(), tokens[i].begin(), tokens[i].end());
    sequences.push_back({&s.kv_, s.n_past(), n});
  }
  Gemma4Session& lead = *sessions[0];
  std::vector<float> logits(sessions.size() * static_cast<size_t>(V));
  // Hidden-state capture (all sessions with the same tap layers, e.g. sequences of one draft):
  // [all tokens][taps][D] in batch order, split into each session's taps() below.
  const std::vector<int32_t>& tap_layers = lead.tap_layers_;
  for (Gemma4Session* s : sessions) {
    if (s->tap_layers_ != tap_layers) fail("decode_batch: sessions capture different taps");
  }
  const int64_t tap_row = static_cast<int64_t>(tap_layers.size()) * model.config().n_embd;
  std::vector<float> taps(all.size() * static_cast<size_t>(tap_row));
  const LayerTaps capture{tap_layers, taps.data()};
  model.forward(all.data(), sequences, lead.workspace_, lead.pool_, logits.data(), false,
                tap_layers.empty() ? nullptr : &capture);
  std::vector<std::span<const float>> out;
  size_t first_token = 0;
  for (size_t i = 0; i < sessions.size(); ++i) {
    Gemma4Session& s = *sessions[i];
    const auto tap_begin = taps.begin() + static_cast<std::ptrdiff_t>(first_token * tap_row);
    s.taps_.assign(tap_begin, tap_begin + static_cast<std::ptrdiff_t>(tokens[i].size() * tap_row));
    first_token += tokens[i].size();
    s.kv_.set_n_past(s.n_past() + static_cast<int64_t>(tokens[i].size()));
    const auto row = logits.begin() + static_cast<std::ptrdiff_t>(i * static_cast<size_t>(V));
    s.logits_.assign(row, row + V);
    s.verify_rows_ = 0;
    out.emplace_back(s.logits_.data(), s.logits_.size());
  }
  return out;
}

}  // namespace boltrt

// Several sessions of one model as one MultiSequenceModel, for a session type with a batched
// step (Session::decode_batch: one forward pass over several sessions' tokens, every projection
// once, attention and recurrent state per sequence): the weights are read once per step however
// many sequences are in flight. Gemma4Session and Qwen35Session provide one; the loader of each
// architecture (model/registry.h) makes these, so the batch layer never names a model.
#pragma once
#include <exception>
#include <memory>
#include <span>
#include <vector>

#include "runtime/multi_sequence.h"
#include "util/error.h"

namespace boltrt {

template <class Session>
class BatchedSessions : public MultiSequenceModel {
 public:
  explicit BatchedSessions(std::vector<std::unique_ptr<Session>> sessions)
      : sessions_(std::move(sessions)) {
    if (sessions_.empty()) fail("batch: no sessions");
  }
  int n_slots() const override { return static_cast<int>(sessions_.size()); }
  int64_t n_vocab() const override { return sessions_.front()->n_vocab(); }
  int64_t n_ctx() const override { return sessions_.front()->n_ctx(); }
  int64_t n_past(int slot) const override { return sessions_.at(slot)->n_past(); }
  void rollback(int slot, int64_t n_past) override { sessions_.at(slot)->rollback(n_past); }
  bool shares_weight_reads() const override { return true; }
  void set_tap_layers(int slot, std::vector<int32_t> layers) override {
    sessions_.at(slot)->set_tap_layers(std::move(layers));
  }

  void decode(std::span<DecodeItem> items) override {
    // Items that cannot join the shared pass fail or run alone, so one bad request never takes
    // the others down: a token outside the vocabulary or past the context fails on its own;
    // all-logits requests (speculative verify steps) and chunks longer than a micro-batch run
    // through Session::decode.
    std::vector<Session*> batch_sessions;
    std::vector<std::span<const int32_t>> batch_tokens;
    std::vector<DecodeItem*> batch_items;
    const int64_t n_vocab = this->n_vocab();
    for (DecodeItem& item : items) {
      try {
        Session& session = *sessions_.at(item.slot);
        if (item.tokens.empty()) fail("decode of no tokens");
        for (int32_t t : item.tokens)
          if (t < 0 || t >= n_vocab) fail("token {} is outside the vocabulary of {}", t, n_vocab);
        const auto n = static_cast<int64_t>(item.tokens.size());
        if (session.n_past() + n > session.n_ctx())
          fail("{} tokens after {} do not fit in the context of {}", n, session.n_past(),
               session.n_ctx());
        if (item.all_logits || n > session.kv_cache().max_batch()) {
          item.logits = session.decode(item.tokens, item.all_logits);
          item.taps = session.taps();
        } else {
          batch_sessions.push_back(&session);
          batch_tokens.push_back(item.tokens);
          batch_items.push_back(&item);
        }
      } catch (...) {
        item.error = std::current_exception();
      }
    }
    if (batch_sessions.empty()) return;
    try {
      const auto logits = Session::decode_batch(batch_sessions, batch_tokens);
      for (size_t i = 0; i < batch_items.size(); ++i) {
        batch_items[i]->logits = logits[i];
        batch_items[i]->taps = batch_sessions[i]->taps();
      }
    } catch (...) {
      for (DecodeItem* item : batch_items) item->error = std::current_exception();
    }
  }

 private:
  std::vector<std::unique_ptr<Session>> sessions_;
};

}  // namespace boltrt

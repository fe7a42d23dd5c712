#include "batch/gemma4_sequences.h"

#include "util/error.h"

namespace boltrt::batch {

Gemma4Sequences::Gemma4Sequences(std::vector<std::unique_ptr<Gemma4Session>> sessions)
    : sessions_(std::move(sessions)) {
  if (sessions_.empty()) fail("batch: no sessions");
}

void Gemma4Sequences::decode(std::span<DecodeItem> items) {
  // Items that cannot join the shared pass fail or run alone, so one bad request never takes
  // the others down: a token outside the vocabulary or past the context fails on its own;
  // all-logits requests (speculative verify steps) and chunks longer than a micro-batch run
  // through Session::decode.
  std::vector<Gemma4Session*> batch_sessions;
  std::vector<std::span<const int32_t>> batch_tokens;
  std::vector<DecodeItem*> batch_items;
  const int64_t n_vocab = this->n_vocab();
  for (DecodeItem& item : items) {
    try {
      Gemma4Session& session = *sessions_.at(item.slot);
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
    const auto logits = Gemma4Session::decode_batch(batch_sessions, batch_tokens);
    for (size_t i = 0; i < batch_items.size(); ++i) {
      batch_items[i]->logits = logits[i];
      batch_items[i]->taps = batch_sessions[i]->taps();
    }
  } catch (...) {
    for (DecodeItem* item : batch_items) item->error = std::current_exception();
  }
}

}  // namespace boltrt::batch

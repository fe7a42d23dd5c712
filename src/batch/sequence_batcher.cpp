#include "batch/sequence_batcher.h"

#include <utility>

#include "util/error.h"

namespace boltrt::batch {

// The per-slot view the Generator runs on. Logits (and taps) are copied out of the batch so
// they stay valid until this slot's next decode whatever the other slots do.
class SequenceBatcher::SlotModel : public LanguageModel {
 public:
  SlotModel(SequenceBatcher& batcher, int slot) : batcher_(batcher), slot_(slot) {}
  int64_t n_vocab() const override { return batcher_.model_.n_vocab(); }
  int64_t n_ctx() const override { return batcher_.model_.n_ctx(); }
  int64_t n_past() const override { return batcher_.n_past(slot_); }
  std::span<const float> decode(std::span<const int32_t> tokens, bool all_logits) override {
    const DecodeItem item = batcher_.decode(slot_, tokens, all_logits);
    logits_.assign(item.logits.begin(), item.logits.end());
    taps_.assign(item.taps.begin(), item.taps.end());
    return logits_;
  }
  void rollback(int64_t n_past) override { batcher_.rollback(slot_, n_past); }
  void set_tap_layers(std::vector<int32_t> layers) override {
    batcher_.set_tap_layers(slot_, std::move(layers));
    taps_.clear();
  }
  std::span<const float> taps() const override { return taps_; }

 private:
  SequenceBatcher& batcher_;
  int slot_;
  std::vector<float> logits_;
  std::vector<float> taps_;
};

std::unique_ptr<LanguageModel> SequenceBatcher::slot_model(int slot) {
  if (slot < 0 || slot >= model_.n_slots())
    fail("batch: slot {} outside 0..{}", slot, model_.n_slots() - 1);
  return std::make_unique<SlotModel>(*this, slot);
}

SequenceBatcher::Participation::Participation(SequenceBatcher& batcher) : batcher_(batcher) {
  std::lock_guard lock(batcher_.mutex_);
  ++batcher_.participants_;
}

SequenceBatcher::Participation::~Participation() {
  std::unique_lock lock(batcher_.mutex_);
  --batcher_.participants_;
  // The others may all be waiting for this thread's tokens: run their step now.
  batcher_.maybe_run(lock);
}

int64_t SequenceBatcher::steps() const {
  std::lock_guard lock(mutex_);
  return steps_;
}

int64_t SequenceBatcher::items() const {
  std::lock_guard lock(mutex_);
  return items_;
}

int64_t SequenceBatcher::n_past(int slot) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !running_; });
  return model_.n_past(slot);
}

void SequenceBatcher::rollback(int slot, int64_t n_past) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !running_; });
  model_.rollback(slot, n_past);
}

void SequenceBatcher::set_tap_layers(int slot, std::vector<int32_t> layers) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !running_; });
  model_.set_tap_layers(slot, std::move(layers));
}

void SequenceBatcher::maybe_run(std::unique_lock<std::mutex>& lock) {
  while (!running_ && !waiting_.empty() && static_cast<int>(waiting_.size()) >= participants_) {
    std::vector<Pending*> batch;
    batch.swap(waiting_);
    running_ = true;
    lock.unlock();
    std::vector<DecodeItem> items;
    items.reserve(batch.size());
    for (Pending* p : batch) items.push_back(p->item);
    try {
      model_.decode(items);
    } catch (...) {
      for (DecodeItem& item : items) item.error = std::current_exception();
    }
    lock.lock();
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i]->item = items[i];
      batch[i]->done = true;
    }
    ++steps_;
    items_ += static_cast<int64_t>(batch.size());
    running_ = false;
    changed_.notify_all();
  }
}

DecodeItem SequenceBatcher::decode(int slot, std::span<const int32_t> tokens, bool all_logits) {
  Pending pending;
  pending.item.slot = slot;
  pending.item.tokens = tokens;
  pending.item.all_logits = all_logits;
  std::unique_lock lock(mutex_);
  if (participants_ == 0) fail("batch: decode outside a Participation");
  changed_.wait(lock, [&] { return !running_; });
  waiting_.push_back(&pending);
  maybe_run(lock);
  changed_.wait(lock, [&] { return pending.done; });
  if (pending.item.error) std::rethrow_exception(pending.item.error);
  return pending.item;
}

}  // namespace boltrt::batch

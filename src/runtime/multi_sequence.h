// Several sequences (slots) of one model decoded together: the interface the batch engine
// (src/batch/sequence_batcher.h) drives and a model's loader provides (LoadedModel::new_sequences,
// src/model/batched_sessions.h). It lives below src/model/ so that a model can implement it
// without the batch layer knowing the architecture.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <vector>

#include "runtime/language_model.h"
#include "util/error.h"

namespace boltrt {

// One sequence's share of a batched decode step.
struct DecodeItem {
  int slot = 0;                     // which sequence (0 .. n_slots()-1)
  std::span<const int32_t> tokens;  // appended at that sequence's n_past
  bool all_logits = false;          // logits of every token instead of only the last
  std::span<const float> logits;    // out: valid until this slot's next decode
  // out: the slot's hidden-state taps for these tokens when capture is on (set_tap_layers),
  // [tokens][layers][D], valid as long as `logits`
  std::span<const float> taps;
  std::exception_ptr error;  // out: set when this item failed (others may succeed)
};

// Several sequences (slots) of one model, each with its own KV cache.
class MultiSequenceModel {
 public:
  virtual ~MultiSequenceModel() = default;
  virtual int n_slots() const = 0;
  virtual int64_t n_vocab() const = 0;
  virtual int64_t n_ctx() const = 0;  // per slot
  virtual int64_t n_past(int slot) const = 0;
  virtual void rollback(int slot, int64_t n_past) = 0;
  // Runs every item (at most one per slot). A failure of one item is stored in its `error`.
  virtual void decode(std::span<DecodeItem> items) = 0;
  // True when decode() evaluates all items in one forward pass (weights read once per step).
  virtual bool shares_weight_reads() const = 0;
  // Hidden-state capture of one slot (LanguageModel::set_tap_layers): its items then return
  // taps. The default can capture nothing (boltrt::Error for a non-empty list).
  virtual void set_tap_layers(int slot, std::vector<int32_t> layers) {
    (void)slot;
    if (!layers.empty()) fail("batch: this model cannot capture hidden states for a draft");
  }
};

// N independent LanguageModel sessions decoded one after another: correct, but N sequences
// cost N times the weight reads of one.
class InterleavedSessions : public MultiSequenceModel {
 public:
  explicit InterleavedSessions(std::vector<std::unique_ptr<LanguageModel>> sessions);
  int n_slots() const override { return static_cast<int>(sessions_.size()); }
  int64_t n_vocab() const override { return sessions_.front()->n_vocab(); }
  int64_t n_ctx() const override { return sessions_.front()->n_ctx(); }
  int64_t n_past(int slot) const override { return sessions_.at(slot)->n_past(); }
  void rollback(int slot, int64_t n_past) override { sessions_.at(slot)->rollback(n_past); }
  void decode(std::span<DecodeItem> items) override;
  bool shares_weight_reads() const override { return false; }
  void set_tap_layers(int slot, std::vector<int32_t> layers) override {
    sessions_.at(slot)->set_tap_layers(std::move(layers));
  }

 private:
  std::vector<std::unique_ptr<LanguageModel>> sessions_;
};

}  // namespace boltrt

// Several Gemma4Sessions as one MultiSequenceModel: a batched step is one forward pass over all
// the sequences' tokens (every projection once, attention per sequence), so the weights are read
// once per step however many sequences are in flight.
#pragma once
#include <memory>
#include <vector>

#include "batch/sequence_batcher.h"
#include "runtime/session.h"

namespace boltrt::batch {

class Gemma4Sequences : public MultiSequenceModel {
 public:
  explicit Gemma4Sequences(std::vector<std::unique_ptr<Gemma4Session>> sessions);
  int n_slots() const override { return static_cast<int>(sessions_.size()); }
  int64_t n_vocab() const override { return sessions_.front()->n_vocab(); }
  int64_t n_ctx() const override { return sessions_.front()->n_ctx(); }
  int64_t n_past(int slot) const override { return sessions_.at(slot)->n_past(); }
  void rollback(int slot, int64_t n_past) override { sessions_.at(slot)->rollback(n_past); }
  void decode(std::span<DecodeItem> items) override;
  bool shares_weight_reads() const override { return true; }
  void set_tap_layers(int slot, std::vector<int32_t> layers) override {
    sessions_.at(slot)->set_tap_layers(std::move(layers));
  }

 private:
  std::vector<std::unique_ptr<Gemma4Session>> sessions_;
};

}  // namespace boltrt::batch

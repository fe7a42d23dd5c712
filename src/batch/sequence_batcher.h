// Continuous batching for `boltrt batch --parallel N`.
//
// Every in-flight request runs the ordinary generation loop (Generator) on its own thread, over
// a SlotModel: a LanguageModel whose decode() does not compute anything itself but posts its
// tokens to the SequenceBatcher and waits. When every participating thread is waiting, the
// last one to arrive runs ONE MultiSequenceModel::decode over all their tokens (new prompts'
// prefill chunks and running sequences' single tokens mixed), then wakes them. Sampling, stop
// strings and reasoning control stay in the threads and run in parallel; requests join and
// leave between steps (continuous batching).
//
// Whether the weights are read once per step for all sequences depends on the
// MultiSequenceModel (runtime/multi_sequence.h, made by the model's loader): InterleavedSessions
// (N independent sessions, run one after another) does not share them; a model with a real
// multi-sequence forward (model/batched_sessions.h) does.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "runtime/language_model.h"
#include "runtime/multi_sequence.h"
#include "util/error.h"

namespace boltrt::batch {

// The batch layer's names for the interface it drives (runtime/multi_sequence.h).
using boltrt::DecodeItem;
using boltrt::InterleavedSessions;
using boltrt::MultiSequenceModel;

class SequenceBatcher {
 public:
  explicit SequenceBatcher(MultiSequenceModel& model) : model_(model) {}

  // The LanguageModel of one slot. Use it from one thread at a time, inside a Participation.
  std::unique_ptr<LanguageModel> slot_model(int slot);

  // A thread counts as a participant (a batch step waits for its tokens) while it holds one.
  class Participation {
   public:
    explicit Participation(SequenceBatcher& batcher);
    ~Participation();
    Participation(const Participation&) = delete;
    Participation& operator=(const Participation&) = delete;

   private:
    SequenceBatcher& batcher_;
  };

  // How many batched steps ran and how many items they held in total (for statistics).
  int64_t steps() const;
  int64_t items() const;

 private:
  class SlotModel;
  struct Pending {
    DecodeItem item;
    bool done = false;
  };
  DecodeItem decode(int slot, std::span<const int32_t> tokens, bool all_logits);
  void rollback(int slot, int64_t n_past);
  void set_tap_layers(int slot, std::vector<int32_t> layers);
  int64_t n_past(int slot);
  // Runs the batch when every participant is waiting; called with the lock held.
  void maybe_run(std::unique_lock<std::mutex>& lock);

  MultiSequenceModel& model_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int participants_ = 0;
  bool running_ = false;
  std::vector<Pending*> waiting_;
  int64_t steps_ = 0, items_ = 0;
};

}  // namespace boltrt::batch

// Qwen35Session: one sequence running on a Qwen35Model (LanguageModel implementation).
//
// A sequence's memory is the KV cache of the full-attention layers plus the recurrent state of
// the Gated DeltaNet layers (conv window and delta state, constant size; shared/docs/qwen35.md
// §5). The KV cache rolls back by truncation; the recurrent state cannot be run backwards
// (§5.3), so the session keeps (runtime/recurrent_checkpoints.h, the policy the CUDA session
// shares):
//   * the token history, and
//   * state checkpoints: a copy of the recurrent state taken at the start of each decode() call
//     (the most recent SessionOptions::recurrent_checkpoints of them).
//   * prompt checkpoints (SessionOptions::prompt_checkpoints, off by default): the state at the
//     start and end of each multi-token call and at each micro-batch boundary inside one (the
//     start of a multi-token call is then not a decode-call checkpoint), thinned to
//     stay spread over the history, so that a rollback to a long shared prefix (serve, chat)
//     recomputes at most about one micro-batch instead of the whole prefix.
// rollback(n) restores the nearest checkpoint at a position ≤ n and re-runs the tokens from there
// to n through the model (no logits). Cost: one forward pass over n − c tokens, c that
// checkpoint's position; for speculative decoding (rollback into the last verify batch, whose
// start is a checkpoint) that is at most the accepted tokens of the batch. With no checkpoint
// ≤ n it recomputes from position 0 (a forward pass over n tokens). Memory: each checkpoint is
// one more recurrent_state_bytes() (0.8B: 18 × 1.07 MiB). Because every step of the forward pass
// is batch-invariant, the recomputed state has the bits the original run had.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model/qwen35.h"
#include "runtime/kv_cache.h"
#include "runtime/language_model.h"
#include "runtime/recurrent_checkpoints.h"
#include "runtime/session_options.h"

namespace boltrt {

class ThreadPool;

class Qwen35Session : public LanguageModel {
 public:
  // The model and pool must outlive the session; pool may be null (one thread).
  Qwen35Session(const Qwen35Model& model, const SessionOptions& options, ThreadPool* pool);

  int64_t n_vocab() const override { return model_.n_vocab(); }
  int64_t n_ctx() const override { return kv_.n_ctx(); }
  int64_t n_past() const override { return kv_.n_past(); }
  std::span<const float> decode(std::span<const int32_t> tokens, bool all_logits = false) override;
  // One forward pass over several sessions of one model (tokens[i] appended to sessions[i],
  // each at most n_batch tokens): the weights are read once for all; each session gets the
  // logits of its last token, with the bits a decode() of its tokens alone gives, and the same
  // checkpoints. Throws (every session back where it was) when any input is bad.
  static std::vector<std::span<const float>> decode_batch(
      std::span<Qwen35Session* const> sessions, std::span<const std::span<const int32_t>> tokens);
  // Any n_past ≤ n_past() (see the file comment for the cost).
  void rollback(int64_t n_past) override;

  // Hidden-state capture for DFlash drafts (LanguageModel::set_tap_layers): with a non-empty
  // list of layer ids (LayerTaps: id k = the input of layer k), every decode() and
  // decode_batch() also fills taps() with [n_tokens][layers][D] for the tokens of that call.
  // The forward passes a rollback re-runs capture nothing (taps() keeps the last call's rows).
  void set_tap_layers(std::vector<int32_t> layers) override;
  std::span<const float> taps() const override { return {taps_.data(), taps_.size()}; }

  // Makes this session hold the first n tokens of `other` (same model and KV type): its KV rows,
  // history and checkpoints are copied, then the state is brought back to position n as
  // rollback(n) does (free when n == other.n_past()).
  void copy_prefix(const Qwen35Session& other, int64_t n);

  const KvCache& kv_cache() const { return kv_; }
  // The live recurrent state of this sequence (the model's recurrent_state_bytes()).
  size_t recurrent_state_bytes() const { return state_.bytes(); }
  // Live state plus the checkpoints currently held.
  size_t recurrent_memory_bytes() const;
  // Positions of the checkpoints held (both kinds, oldest first), for tests.
  std::vector<int64_t> checkpoint_positions() const;

 private:
  // Records the state before a call that appends n tokens at `start` (validated).
  void begin_call(std::span<const int32_t> tokens);
  // Brings the recurrent state to position n (≤ tokens_.size()) from the newest checkpoint ≤ n,
  // or from zero; the KV cache ends at n.
  void restore(int64_t n);
  // Runs tokens_[from, to) through the model in micro-batches without logits.
  void recompute(int64_t from, int64_t to);

  const Qwen35Model& model_;
  ThreadPool* pool_;
  int64_t n_batch_;
  KvCache kv_;
  Qwen35State state_;
  RecurrentCheckpoints<Qwen35State> checkpoints_;
  std::vector<int32_t> tokens_;  // history: tokens_[p] is the token at position p
  std::vector<int32_t> tap_layers_;
  std::vector<float> taps_;  // [n_tokens][tap_layers_][D] of the last decode call
  Qwen35Workspace workspace_;
  std::vector<float> logits_;
};

}  // namespace boltrt

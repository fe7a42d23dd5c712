// Gemma4Session: one sequence running on a Gemma4Model (LanguageModel implementation).
// Prompts are processed in micro-batches of n_batch tokens, each one batched matmul per
// projection; decoding is the same path with one token.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model/gemma4.h"
#include "runtime/kv_cache.h"
#include "runtime/language_model.h"
#include "runtime/session_options.h"

namespace boltrt {

class ThreadPool;

class Gemma4Session : public LanguageModel {
 public:
  // The model and pool must outlive the session; pool may be null (one thread).
  Gemma4Session(const Gemma4Model& model, const SessionOptions& options, ThreadPool* pool);

  int64_t n_vocab() const override { return model_.config().n_vocab; }
  int64_t n_ctx() const override { return kv_.n_ctx(); }
  int64_t n_past() const override { return kv_.n_past(); }
  std::span<const float> decode(std::span<const int32_t> tokens, bool all_logits = false) override;
  // Rolls back at most n_batch tokens when the model has sliding-window layers (their ring
  // keeps no more); throws boltrt::Error otherwise.
  void rollback(int64_t n_past) override;
  int64_t max_verify_batch() const override { return kv_.max_batch(); }
  // Verify batches of at most n_batch tokens keep their final hidden rows and run the output
  // head for a row only when verify_row() asks for it, in doubling chunks of rows (0, 1, 2-3,
  // 4-7, ...); longer batches: every row at once.
  void decode_verify(std::span<const int32_t> tokens) override;
  std::span<const float> verify_row(int64_t j) override;

  // Makes this session hold the first n tokens of `other` (same model and KV type), e.g. a
  // shared system prompt processed once.
  void copy_prefix(const Gemma4Session& other, int64_t n);

  // Appends tokens[i] to sessions[i] for every i in one forward batch (all sessions on the
  // same model; each tokens[i] at most that session's n_batch). Returns each session's
  // last-token logits, valid until that session's next call.
  static std::vector<std::span<const float>> decode_batch(
      std::span<Gemma4Session* const> sessions, std::span<const std::span<const int32_t>> tokens);

  const KvCache& kv_cache() const { return kv_; }
  const Gemma4Model& model() const { return model_; }
  ThreadPool* pool() const { return pool_; }

  // Hidden-state capture for DFlash drafting (shared/docs/dflash.md A4): with a non-empty list
  // of layer ids (LayerTaps: id k = the input of layer k), every decode() also fills taps()
  // with [n_tokens][layers.size()][D] for every token of that call (prompt chunks included).
  // An empty list turns it off (no cost).
  void set_tap_layers(std::vector<int32_t> layers) override;
  const std::vector<int32_t>& tap_layers() const { return tap_layers_; }
  // The taps of the last decode() call (empty when capture is off).
  std::span<const float> taps() const override { return {taps_.data(), taps_.size()}; }

 private:
  const Gemma4Model& model_;
  ThreadPool* pool_;
  int64_t n_batch_;
  KvCache kv_;
  Gemma4Workspace workspace_;
  std::vector<float> logits_;
  std::vector<int32_t> tap_layers_;
  std::vector<float> taps_;
  // decode_verify(): the batch's final hidden rows [n][D], which rows' logits (in logits_,
  // [n][V]) are computed, and whether every row was computed at once.
  std::vector<float> verify_hidden_;
  std::vector<uint8_t> verify_done_;
  int64_t verify_rows_ = 0;
};

}  // namespace boltrt

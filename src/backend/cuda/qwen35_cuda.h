// Qwen3.5 on a CUDA device: the weights of a loaded Qwen35Model copied to device memory once
// (Qwen35CudaModel) and sequences decoding on them (Qwen35CudaSession, a LanguageModel with an
// F16 or Q8_0 KV cache for the gated-attention layers and the Gated DeltaNet layers' recurrent
// state, both in device memory). The forward pass mirrors Qwen35Model::forward
// (src/model/qwen35.cpp, shared/docs/qwen35.md §4) op by op with the kernels of kernels/; the
// CPU forward pass stays the reference (test_cuda_qwen35 compares logits). Prompts and verify
// batches run in chunks through the tensor-core GEMM (cuBLAS for F16/BF16 matrices) and flash
// attention; the delta rule runs as its recurrence at every batch size.
//
// Rollback (speculative decoding, prefix reuse): the KV cache truncates; the recurrent state
// cannot run backwards, so the session keeps the token history and device copies of the state,
// with the CPU session's policy (runtime/recurrent_checkpoints.h: at the start of the last
// SessionOptions::recurrent_checkpoints decode calls, and prompt checkpoints spread over each
// prompt for serve and chat), and re-runs the tokens from the newest checkpoint at or before the
// target (from position 0 when none is). Single-token decode replays a CUDA graph per context
// bucket (BOLTRT_CUDA_GRAPHS=0 launches kernel by kernel).
//
// Plain C++ header (no CUDA types), built only with CUDA; other code reaches it through
// backend/device.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "runtime/language_model.h"
#include "runtime/session_options.h"

namespace boltrt {
class Qwen35Model;
}

namespace boltrt::cuda {

// Why `model` cannot run on the CUDA backend (a head size the attention kernels lack, ...), or
// "" when it can.
std::string qwen35_unsupported_reason(const Qwen35Model& model);

// Device bytes the weights of `model` take on the device (no device needed).
size_t qwen35_cuda_weight_bytes(const Qwen35Model& model);

class Qwen35CudaModel {
 public:
  // Uploads every trunk tensor (MTP blocks stay unused on the host). Matrices whose type the
  // GEMV kernel lacks are converted to F16 on the way. `model` must outlive this object.
  // Throws boltrt::Error when there is no usable device, the layout is unsupported, or device
  // memory is short.
  explicit Qwen35CudaModel(const Qwen35Model& model, int device_index = 0);
  ~Qwen35CudaModel();
  Qwen35CudaModel(const Qwen35CudaModel&) = delete;
  Qwen35CudaModel& operator=(const Qwen35CudaModel&) = delete;

  const Qwen35Model& host() const { return host_; }
  const DeviceInfo& device() const { return device_; }
  size_t weight_bytes() const;
  size_t free_bytes_after_load() const { return free_after_load_; }
  size_t total_bytes() const { return total_bytes_; }
  int converted_tensors() const;

  struct Weights;  // device pointers, defined in qwen35_cuda.cpp
  const Weights& weights() const { return *weights_; }

 private:
  const Qwen35Model& host_;
  DeviceInfo device_;
  std::unique_ptr<Weights> weights_;
  size_t free_after_load_ = 0, total_bytes_ = 0;
};

class Qwen35CudaSession : public LanguageModel {
 public:
  static constexpr int64_t kMaxBatch = 512;
  Qwen35CudaSession(std::shared_ptr<const Qwen35CudaModel> model, const SessionOptions& options);
  ~Qwen35CudaSession() override;

  int64_t n_vocab() const override;
  int64_t n_ctx() const override { return n_ctx_; }
  int64_t n_past() const override { return n_past_; }
  std::span<const float> decode(std::span<const int32_t> tokens, bool all_logits = false) override;
  // Any n_past ≤ n_past() (see the file comment for the cost).
  void rollback(int64_t n_past) override;
  int64_t max_verify_batch() const override { return n_batch_; }

  // Hidden-state capture for DFlash drafts (LanguageModel::set_tap_layers): the residual
  // stream at the input of each listed layer (n_layer: after the last one), copied to the host
  // with every decode; the forward passes a rollback re-runs capture nothing.
  void set_tap_layers(std::vector<int32_t> layers) override;
  std::span<const float> taps() const override { return {taps_.data(), taps_.size()}; }

  // KV cache + recurrent state + its checkpoints + scratch of this session.
  size_t device_bytes() const;
  // Positions of the state checkpoints held (both kinds), ascending (tests).
  std::vector<int64_t> checkpoint_positions() const;

 private:
  struct State;
  // Runs n ≤ n_batch tokens at positions pos0..; the logits of the last row (all rows with
  // all_logits) into `logits` unless it is null; with `capture`, appends the taps of the n
  // tokens to taps_. Ends synchronised.
  void forward(const int32_t* tokens, int64_t n, int64_t pos0, bool all_logits, float* logits,
               bool capture);
  // Queues the layers of that forward pass on the session's stream (also while a graph is being
  // captured): device_pos makes the kernels read the position from device memory; split_keys
  // (with device_pos) is the bucket the decode attention splits its keys by.
  void enqueue(int64_t n, int64_t pos0, int64_t logit_rows, bool capture, bool device_pos,
               int64_t split_keys);
  // Brings the recurrent state to position n (≤ history) from the newest checkpoint ≤ n, or
  // from zero; the KV cache then ends at n.
  void restore(int64_t n);

  std::shared_ptr<const Qwen35CudaModel> model_;
  int64_t n_ctx_ = 0, n_batch_ = 0, n_past_ = 0;
  std::unique_ptr<State> state_;
  std::vector<int32_t> tokens_;  // history: tokens_[p] is the token at position p
  std::vector<float> logits_;
  std::vector<int32_t> tap_layers_;
  std::vector<float> taps_;  // [n_tokens][tap_layers_][D] of the last decode
};

}  // namespace boltrt::cuda

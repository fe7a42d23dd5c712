// Gemma 4 on a CUDA device: the weights of a loaded Gemma4Model copied to device memory once
// (Gemma4CudaModel) and sequences decoding on them (Gemma4CudaSession, a LanguageModel with an
// F16 or Q8_0 KV cache in device memory). The forward pass mirrors Gemma4Model::forward
// (src/model/gemma4.cpp, shared/docs/gemma4.md §5) op by op with the kernels of kernels/; the
// CPU forward pass stays the reference (test_cuda_gemma4 compares logits). Prompts and verify
// batches run in chunks through the tensor-core GEMM (cuBLAS for F16/BF16 matrices;
// BOLTRT_CUDA_CUBLAS=0: the tensor-core GEMM for them too) and flash attention; single-token
// decode replays a CUDA graph per context bucket (BOLTRT_CUDA_GRAPHS=0 launches kernel by
// kernel). Mixture-of-experts layers (26B-A4B, §5.7) route on the device and run only the
// selected experts' slices (one expert-GEMV launch per matrix for every (token, expert) pair).
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
#include "backend/cuda/device_weights.h"
#include "model/gemma4_session.h"
#include "runtime/language_model.h"

namespace boltrt {
class Gemma4Model;
}

namespace boltrt::cuda {

// Why `model` cannot run on the CUDA backend (a head size the attention kernel lacks, an MoE
// layout other than 26B-A4B's, ...), or "" when it can.
std::string gemma4_unsupported_reason(const Gemma4Model& model);

// Device memory of one Gemma4CudaSession: the KV cache (per --kv-type, ring sizes of window
// layers) and the scratch of its micro-batches. Computed from the model alone (no device
// needed); the session allocates exactly this.
struct SessionMemory {
  size_t kv_bytes = 0, scratch_bytes = 0;
  size_t total() const { return kv_bytes + scratch_bytes; }
};
SessionMemory gemma4_cuda_session_memory(const Gemma4Model& model, const SessionOptions& options);

// Device bytes the weights of `model` take on the device (what Gemma4CudaModel allocates; no
// device needed).
size_t gemma4_cuda_weight_bytes(const Gemma4Model& model);

class Gemma4CudaModel {
 public:
  // Uploads every tensor except the per-layer token embedding table (it stays in host memory;
  // each forward copies only the rows of its tokens). Matrices whose type the GEMV kernel lacks
  // are converted to F16 on the way. `model` must outlive this object. Throws boltrt::Error
  // when there is no usable device, the layout is unsupported, or device memory is short
  // ("out of device memory: N MiB needed ...").
  explicit Gemma4CudaModel(const Gemma4Model& model, int device_index = 0);
  ~Gemma4CudaModel();
  Gemma4CudaModel(const Gemma4CudaModel&) = delete;
  Gemma4CudaModel& operator=(const Gemma4CudaModel&) = delete;

  const Gemma4Model& host() const { return host_; }
  const DeviceInfo& device() const { return device_; }
  size_t weight_bytes() const;  // device memory holding the weights
  // the device's free and total memory measured right after the upload (the load report)
  size_t free_bytes_after_load() const { return free_after_load_; }
  size_t total_bytes() const { return total_bytes_; }
  // Tensors converted to F16 because the GEMV kernel lacks their type (0 for Q4_K_M files).
  int converted_tensors() const;

  struct Weights;  // device pointers, defined in gemma4_cuda.cpp
  const Weights& weights() const { return *weights_; }

 private:
  const Gemma4Model& host_;
  DeviceInfo device_;
  std::unique_ptr<Weights> weights_;
  size_t free_after_load_ = 0, total_bytes_ = 0;
};

class Gemma4CudaSession : public LanguageModel {
 public:
  // Prompts run in micro-batches of min(options.n_batch, kMaxBatch) tokens: each one pass of
  // tensor-core GEMMs and flash attention (above kernels::kGemmMinBatch tokens).
  static constexpr int64_t kMaxBatch = 512;
  Gemma4CudaSession(std::shared_ptr<const Gemma4CudaModel> model, const SessionOptions& options);
  ~Gemma4CudaSession() override;

  int64_t n_vocab() const override;
  int64_t n_ctx() const override { return n_ctx_; }
  int64_t n_past() const override { return n_past_; }
  std::span<const float> decode(std::span<const int32_t> tokens, bool all_logits = false) override;
  // Any rollback for models without sliding-window layers; with them, as far back as the
  // rings still hold (n_batch tokens, like the CPU cache), or to 0.
  void rollback(int64_t n_past) override;
  int64_t max_verify_batch() const override { return n_batch_; }

  size_t device_bytes() const;  // KV cache + scratch of this session

  // Hidden-state capture for DFlash drafts (LanguageModel::set_tap_layers): the residual
  // stream at the input of each listed layer (n_layer: after the last one), copied to the host
  // with every decode.
  void set_tap_layers(std::vector<int32_t> layers) override;
  std::span<const float> taps() const override { return {taps_.data(), taps_.size()}; }

 private:
  struct State;
  // Runs n tokens at positions pos0..; writes the logits of the last row (all rows with
  // all_logits) to `logits` unless it is null. One token replays a CUDA graph.
  void forward(const int32_t* tokens, int64_t n, int64_t pos0, bool all_logits, float* logits);
  // Queues the forward pass of n tokens staged by forward() on the session's stream (also
  // while a graph is being captured): logit_rows final rows go through the head into the
  // pinned logits; device_pos makes the kernels read the position from device memory;
  // split_keys bounds the keys the decode attention splits.
  void enqueue(int64_t n, int64_t pos0, int64_t logit_rows, bool device_pos, int64_t split_keys);
  // The mixture-of-experts half of layer il's feed-forward for the n tokens in flight.
  void enqueue_moe(int64_t il, int64_t n);

  std::shared_ptr<const Gemma4CudaModel> model_;
  int64_t n_ctx_ = 0, n_batch_ = 0, n_past_ = 0;
  std::unique_ptr<State> state_;
  std::vector<float> logits_;
  std::vector<int32_t> tap_layers_;
  std::vector<float> taps_;  // [n_tokens][tap_layers_.size()][D] of the last decode
};

}  // namespace boltrt::cuda

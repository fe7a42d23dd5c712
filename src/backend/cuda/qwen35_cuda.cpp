#include "backend/cuda/qwen35_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "backend/cpu/imrope.h"
#include "backend/cuda/cublas_linear.h"
#include "backend/cuda/device_weights.h"
#include "backend/cuda/gemma4_math.h"
#include "gemm_quant.cuh"
#include "gemv_quant.cuh"
#include "gguf/gguf.h"
#include "model/qwen35.h"
#include "ops.cuh"
#include "runtime/recurrent_checkpoints.h"
#include "util/error.h"

namespace boltrt::cuda {

struct Qwen35CudaModel::Weights {
  struct Layer {
    const float *attn_norm = nullptr, *post_attention_norm = nullptr;
    DeviceMatrix ffn_gate, ffn_up, ffn_down;
    // gated full attention
    DeviceMatrix attn_q, attn_k, attn_v, attn_output;
    const float *attn_q_norm = nullptr, *attn_k_norm = nullptr;
    // Gated DeltaNet
    DeviceMatrix attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_out;
    const float *ssm_conv1d = nullptr, *ssm_dt_bias = nullptr, *ssm_a = nullptr;
    const float* ssm_norm = nullptr;
  };
  DeviceBuffer arena;
  size_t bytes = 0;
  int converted = 0;
  DeviceMatrix token_embd, output;
  const float* output_norm = nullptr;
  // IMROPE for text tokens as NEOX RoPE with frequency factors: 1 for the pairs of streams T, H
  // and W (angle p·θ_i, the same float operations as cpu::rope_angles), +inf for stream E
  // (angle 0: cos 1, sin 0, the pair passes unchanged), [n_rot/2]
  std::vector<float> rope_factors_host;
  const float* rope_factors = nullptr;
  std::vector<Layer> layers;
};

std::string qwen35_unsupported_reason(const Qwen35Model& model) {
  const Qwen35Config& c = model.config();
  if (!kernels::attention_prefill_head_dim_supported(c.head_dim)) {
    return fmt::format("head size {} (the attention kernels take 64, 128, 192, 256 or 512)",
                       c.head_dim);
  }
  // the GEMV and GEMM kernels read matrix rows in 32-value sub-blocks
  if (c.n_embd % 32 != 0) return fmt::format("embedding size {} is not a multiple of 32", c.n_embd);
  if (c.ssm_d_inner % 32 != 0) {
    return fmt::format("delta-net inner size {} is not a multiple of 32", c.ssm_d_inner);
  }
  for (int64_t il = 0; il < c.n_layer; ++il) {
    if (c.n_ff[static_cast<size_t>(il)] % 32 != 0) {
      return fmt::format("layer {} has FFN width {}, not a multiple of 32", il,
                         c.n_ff[static_cast<size_t>(il)]);
    }
  }
  return "";
}

namespace {

void collect_weights(const Qwen35Model& model, Qwen35CudaModel::Weights& w, Uploader& up) {
  const Qwen35Config& c = model.config();
  w.layers.resize(static_cast<size_t>(c.n_layer));  // pointers into it must not move
  up.matrix(model.token_embd(), 1.0f, &w.token_embd);
  up.matrix(model.output(), &w.output);
  up.vector(model.output_norm(), &w.output_norm);
  w.rope_factors_host.assign(static_cast<size_t>(c.n_rot / 2), 1.0f);
  {
    std::vector<float> cos_t(w.rope_factors_host.size()), sin_t(w.rope_factors_host.size());
    // a pair whose text angle is 0 at position 1 is an E pair (cpu::imrope_text_angles)
    cpu::imrope_text_angles(1, c.n_rot, c.rope_base, c.rope_sections, cos_t.data(), sin_t.data());
    for (size_t i = 0; i < cos_t.size(); ++i) {
      if (cos_t[i] == 1.0f && sin_t[i] == 0.0f) w.rope_factors_host[i] = INFINITY;
    }
  }
  up.vector(F32Vector{w.rope_factors_host.data(), static_cast<int64_t>(w.rope_factors_host.size())},
            &w.rope_factors);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const Qwen35Layer& h = model.layer(il);
    Qwen35CudaModel::Weights::Layer& d = w.layers[static_cast<size_t>(il)];
    up.vector(h.attn_norm, &d.attn_norm);
    up.vector(h.post_attention_norm, &d.post_attention_norm);
    up.matrix(h.ffn_gate, &d.ffn_gate);
    up.matrix(h.ffn_up, &d.ffn_up);
    up.matrix(h.ffn_down, &d.ffn_down);
    if (c.is_gdn[static_cast<size_t>(il)]) {
      up.matrix(h.attn_qkv, &d.attn_qkv);
      up.matrix(h.attn_gate, &d.attn_gate);
      up.matrix(h.ssm_beta, &d.ssm_beta);
      up.matrix(h.ssm_alpha, &d.ssm_alpha);
      up.matrix(h.ssm_out, &d.ssm_out);
      up.vector(h.ssm_conv1d, &d.ssm_conv1d);
      up.vector(h.ssm_dt_bias, &d.ssm_dt_bias);
      up.vector(h.ssm_a, &d.ssm_a);
      up.vector(h.ssm_norm, &d.ssm_norm);
    } else {
      up.matrix(h.attn_q, &d.attn_q);
      up.matrix(h.attn_k, &d.attn_k);
      up.matrix(h.attn_v, &d.attn_v);
      up.matrix(h.attn_output, &d.attn_output);
      up.vector(h.attn_q_norm, &d.attn_q_norm);
      up.vector(h.attn_k_norm, &d.attn_k_norm);
    }
  }
}

}  // namespace

size_t qwen35_cuda_weight_bytes(const Qwen35Model& model) {
  Qwen35CudaModel::Weights w;
  Uploader up;
  collect_weights(model, w, up);
  return up.total();
}

Qwen35CudaModel::Qwen35CudaModel(const Qwen35Model& model, int device_index)
    : host_(model), weights_(std::make_unique<Weights>()) {
  device_ = open_device(device_index);
  if (std::string reason = qwen35_unsupported_reason(model); !reason.empty()) {
    fail("{}: cannot run on CUDA: {}", model.file().path(), reason);
  }
  Weights& w = *weights_;
  Uploader up;
  collect_weights(model, w, up);
  const Uploader::Loaded loaded = up.upload_to(device_, w.arena, model.file().path());
  free_after_load_ = loaded.free_bytes;
  total_bytes_ = loaded.total_bytes;
  w.bytes = up.total();
  w.converted = up.converted();
}

Qwen35CudaModel::~Qwen35CudaModel() = default;

size_t Qwen35CudaModel::weight_bytes() const {
  return weights_->bytes;
}
int Qwen35CudaModel::converted_tensors() const {
  return weights_->converted;
}

// ---- session -----------------------------------------------------------------------------------

namespace {

// One copy of a sequence's recurrent state (conv windows, then delta states) in device memory,
// copied on the session's stream: RecurrentCheckpoints keeps its checkpoints with these copies
// (a copy constructor allocates, a copy assignment reuses the destination).
class DeviceState {
 public:
  DeviceState(size_t bytes, cudaStream_t stream) : buffer_(bytes), bytes_(bytes), stream_(stream) {}
  DeviceState(const DeviceState& o) : buffer_(o.bytes_), bytes_(o.bytes_), stream_(o.stream_) {
    copy_from(o);
  }
  DeviceState& operator=(const DeviceState& o) {
    if (this != &o) copy_from(o);
    return *this;
  }
  DeviceState(DeviceState&&) noexcept = default;
  DeviceState& operator=(DeviceState&&) noexcept = default;
  void clear() { check(cudaMemsetAsync(buffer_.data(), 0, bytes_, stream_), "state clear"); }
  void* data() const { return buffer_.data(); }
  size_t bytes() const { return bytes_; }

 private:
  void copy_from(const DeviceState& o) {
    if (o.bytes_ != bytes_) fail("recurrent state copy between sizes {} and {}", o.bytes_, bytes_);
    check(cudaMemcpyAsync(buffer_.data(), o.buffer_.data(), bytes_, cudaMemcpyDeviceToDevice,
                          stream_),
          "state copy");
  }
  DeviceBuffer buffer_;
  size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

struct Qwen35CudaSession::State {
  cudaStream_t stream = nullptr;
  kernels::KvFormat kv_format = kernels::KvFormat::kF16;
  DeviceBuffer kv;             // K and V of every attention layer, n_ctx cells each
  std::vector<uint8_t*> k, v;  // per KV layer
  // the live recurrent state (conv windows [n_gdn][C][Kc-1], then the delta states) and its
  // checkpoints
  std::unique_ptr<DeviceState> recurrent;
  float *conv = nullptr, *delta = nullptr;
  size_t recurrent_bytes = 0;
  RecurrentCheckpoints<DeviceState> checkpoints{0, 0};
  DeviceBuffer scratch;
  float *h = nullptr, *a = nullptr, *o = nullptr, *big = nullptr, *q = nullptr, *gate = nullptr;
  float *kx = nullptr, *vx = nullptr, *z = nullptr, *u = nullptr, *attn = nullptr, *up = nullptr;
  float *alpha = nullptr, *beta_in = nullptr, *gamma = nullptr, *beta = nullptr;
  float *partials = nullptr, *blas_scratch = nullptr;
  int32_t* tokens = nullptr;
  PinnedBuffer host_tokens_buffer;
  int32_t* host_tokens = nullptr;
  int64_t logit_rows = 0;
  DeviceBuffer logit_buffer;
  PinnedBuffer host_logit_buffer;
  float *logits = nullptr, *host_logits = nullptr;
  // taps (set_tap_layers): [taps][n_batch][D] on the device, the same in pinned memory
  DeviceBuffer tap_buffer;
  PinnedBuffer host_tap_buffer;
  float *tap = nullptr, *host_tap = nullptr;
  bool use_prefill_kernels = true;  // BOLTRT_CUDA_GEMM=0: batches through GEMV only
  std::unique_ptr<CublasLinear> cublas;
  // Decode as CUDA graphs (BOLTRT_CUDA_GRAPHS=0: kernel by kernel): the one-token forward pass
  // captured once per (context bucket, taps on/off) and replayed for every token of the bucket;
  // the kernels that depend on the position read it from `pos` on the device. A graph holds the
  // buffer addresses of its capture, so growing a buffer drops them.
  bool use_graphs = true;
  int64_t* pos = nullptr;       // device: the position of the single token
  int64_t* host_pos = nullptr;  // pinned staging for it
  std::map<int64_t, cudaGraphExec_t> graphs;
  void drop_graphs() {
    for (auto& [key, exec] : graphs) cudaGraphExecDestroy(exec);
    graphs.clear();
  }
  ~State() {
    drop_graphs();
    cublas.reset();
    if (stream) cudaStreamDestroy(stream);
  }
};

Qwen35CudaSession::Qwen35CudaSession(std::shared_ptr<const Qwen35CudaModel> model,
                                     const SessionOptions& options)
    : model_(std::move(model)), state_(std::make_unique<State>()) {
  const Qwen35Model& host = model_->host();
  const Qwen35Config& c = host.config();
  State& s = *state_;
  if (options.kv_type != KvType::F16 && options.kv_type != KvType::Q8_0) {
    fail("the CUDA backend keeps its KV cache in f16 or q8_0; --kv-type {} is not supported",
         kv_type_name(options.kv_type));
  }
  n_ctx_ = clamp_context(options.n_ctx, c.n_ctx_train);
  n_batch_ = std::max<int64_t>(1, std::min({options.n_batch, kMaxBatch, n_ctx_}));
  s.checkpoints =
      RecurrentCheckpoints<DeviceState>(options.recurrent_checkpoints, options.prompt_checkpoints);
  const int64_t state_copies = 1 + std::max<int64_t>(0, options.recurrent_checkpoints) +
                               std::max<int64_t>(0, options.prompt_checkpoints);
  s.kv_format =
      options.kv_type == KvType::Q8_0 ? kernels::KvFormat::kQ8_0 : kernels::KvFormat::kF16;

  // sizes: KV (attention layers, n_ctx cells of Hkv·hd values), recurrent state, scratch
  const int64_t D = c.n_embd, hd = c.head_dim, C = c.conv_channels(), Kc = c.conv_kernel;
  const int64_t Hv = c.ssm_n_v_head, dk = c.ssm_d_state, dv = dk;
  std::vector<size_t> kv_offset, v_offset;
  size_t kv_bytes = 0;
  int64_t q_width = 0, kv_width = 0, ff = 0;
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const auto l = static_cast<size_t>(il);
    ff = std::max(ff, c.n_ff[l]);
    if (c.is_gdn[l]) continue;
    const int64_t row = c.n_head_kv[l] * hd;
    q_width = std::max(q_width, c.n_head[l] * hd);
    kv_width = std::max(kv_width, row);
    const size_t cell = static_cast<size_t>(
        s.kv_format == kernels::KvFormat::kQ8_0 ? cuda::q8_0_row_bytes(row) : row * 2);
    kv_offset.push_back(kv_bytes);
    v_offset.push_back(align_up(static_cast<size_t>(n_ctx_) * cell));
    kv_bytes += 2 * v_offset.back();
  }
  const int64_t n_gdn = c.n_gdn_layers();
  const size_t conv_floats = static_cast<size_t>(n_gdn * C * (Kc - 1));
  const size_t delta_floats = static_cast<size_t>(n_gdn * Hv * dk * dv);
  s.recurrent_bytes = align_up(conv_floats * 4) + delta_floats * 4;
  const int64_t B = n_batch_;
  const int64_t wide = std::max({2 * q_width, C, ff});  // q+gate, conv input, FFN gate
  const int64_t partial_floats = 512 * (hd + 2);        // split-KV states (<= 512 splits)
  const int64_t blas_halves = B * std::max({D, q_width, Hv * dv, ff});
  // scratch slots in State's order (see the slots list below), in floats
  const std::vector<int64_t> floats = {
      B * D,                           // h
      B * D,                           // a
      B * D,                           // o
      B * wide,                        // big: q+gate, conv input
      B * q_width,                     // q
      B * std::max(q_width, ff),       // gate: attention gate, FFN gate
      B * kv_width,                    // kx
      B * kv_width,                    // vx
      B * Hv * dv,                     // z
      B * C,                           // u: conv output
      B * std::max(q_width, Hv * dv),  // attn: attention or delta-rule output
      B * ff,                          // up
      B * Hv,                          // alpha
      B * Hv,                          // beta_in
      B * Hv,                          // gamma
      B * Hv,                          // beta
      partial_floats,                  // split-KV partials
      (blas_halves + 1) / 2,           // cuBLAS activations
      B,                               // int32 tokens
      2};                              // int64 position
  size_t scratch_bytes = 0;
  for (int64_t f : floats) scratch_bytes += align_up(static_cast<size_t>(f) * 4);

  check(cudaSetDevice(model_->device().index), "cudaSetDevice");
  {
    size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    const size_t need =
        kv_bytes + s.recurrent_bytes * static_cast<size_t>(state_copies) + scratch_bytes;
    const std::string what = fmt::format(
        "the KV cache for {} tokens ({}, {}), the recurrent state and up to {} copies of it ({}) "
        "and {} of scratch for batches of {}",
        n_ctx_, kv_type_name(options.kv_type), mib(kv_bytes), state_copies - 1,
        mib(s.recurrent_bytes * static_cast<size_t>(state_copies)), mib(scratch_bytes), n_batch_);
    if (std::string why = device_memory_shortfall(what, need, free_bytes, total_bytes);
        !why.empty()) {
      fail("{} (the weights hold {}; try a smaller --ctx-size)", why, mib(model_->weight_bytes()));
    }
  }
  check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  s.kv = DeviceBuffer(std::max<size_t>(kv_bytes, 1));
  for (size_t i = 0; i < kv_offset.size(); ++i) {
    auto* base = static_cast<uint8_t*>(s.kv.data()) + kv_offset[i];
    s.k.push_back(base);
    s.v.push_back(base + v_offset[i]);
  }
  s.recurrent = std::make_unique<DeviceState>(s.recurrent_bytes, s.stream);
  s.conv = static_cast<float*>(s.recurrent->data());
  s.delta = reinterpret_cast<float*>(static_cast<uint8_t*>(s.recurrent->data()) +
                                     align_up(conv_floats * 4));
  s.recurrent->clear();

  s.scratch = DeviceBuffer(scratch_bytes);
  auto* p = static_cast<uint8_t*>(s.scratch.data());
  float** slots[] = {&s.h,     &s.a,       &s.o,     &s.big,  &s.q,        &s.gate,
                     &s.kx,    &s.vx,      &s.z,     &s.u,    &s.attn,     &s.up,
                     &s.alpha, &s.beta_in, &s.gamma, &s.beta, &s.partials, &s.blas_scratch};
  if (std::size(slots) + 2 != floats.size()) fail("session scratch plan out of step");
  for (size_t i = 0; i < std::size(slots); ++i) {
    *slots[i] = reinterpret_cast<float*>(p);
    p += align_up(static_cast<size_t>(floats[i]) * 4);
  }
  s.tokens = reinterpret_cast<int32_t*>(p);
  s.pos = reinterpret_cast<int64_t*>(p + align_up(static_cast<size_t>(B) * 4));
  s.host_tokens_buffer = PinnedBuffer(align_up(static_cast<size_t>(B) * 4) + sizeof(int64_t));
  s.host_tokens = static_cast<int32_t*>(s.host_tokens_buffer.data());
  s.host_pos = reinterpret_cast<int64_t*>(static_cast<uint8_t*>(s.host_tokens_buffer.data()) +
                                          align_up(static_cast<size_t>(B) * 4));
  if (const char* env = std::getenv("BOLTRT_CUDA_GRAPHS"); env && std::string(env) == "0") {
    s.use_graphs = false;
  }
  if (const char* env = std::getenv("BOLTRT_CUDA_GEMM"); env && std::string(env) == "0") {
    s.use_prefill_kernels = false;
  }
  if (const char* env = std::getenv("BOLTRT_CUDA_CUBLAS"); !env || std::string(env) != "0") {
    s.cublas = std::make_unique<CublasLinear>();
  }
  check(cudaStreamSynchronize(s.stream), "session setup");
}

Qwen35CudaSession::~Qwen35CudaSession() = default;

int64_t Qwen35CudaSession::n_vocab() const {
  return model_->host().n_vocab();
}

size_t Qwen35CudaSession::device_bytes() const {
  const State& s = *state_;
  size_t bytes = s.kv.size() + s.recurrent->bytes() + s.scratch.size() + s.logit_buffer.size() +
                 s.tap_buffer.size();
  s.checkpoints.for_each([&](const DeviceState& c) { bytes += c.bytes(); });
  return bytes;
}

std::vector<int64_t> Qwen35CudaSession::checkpoint_positions() const {
  return state_->checkpoints.positions();
}

std::span<const float> Qwen35CudaSession::decode(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t V = n_vocab();
  State& s = *state_;
  if (n == 0) fail("decode: no tokens");
  if (n_past_ + n > n_ctx_) {
    fail("decode: {} tokens after {} do not fit in the context of {}", n, n_past_, n_ctx_);
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= V) fail("decode: token id {} outside the vocabulary [0, {})", t, V);
  }
  const int64_t start = n_past_;
  s.checkpoints.begin_call(start, n, *s.recurrent);
  tokens_.resize(static_cast<size_t>(start));
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  logits_.resize(static_cast<size_t>((all_logits ? n : 1) * V));
  taps_.clear();
  try {
    for (int64_t done = 0; done < n; done += n_batch_) {
      if (done > 0) s.checkpoints.add_prompt(start + done, *s.recurrent);  // after `done` tokens
      const int64_t m = std::min(n_batch_, n - done);
      const bool last_chunk = done + m == n;
      float* out = all_logits ? logits_.data() + done * V : (last_chunk ? logits_.data() : nullptr);
      forward(tokens.data() + done, m, n_past_, all_logits, out, /*capture=*/true);
      n_past_ += m;
    }
    if (n > 1) s.checkpoints.add_prompt(start + n, *s.recurrent);  // where a reply starts
  } catch (...) {
    tokens_.resize(static_cast<size_t>(start));
    n_past_ = start;
    restore(start);
    throw;
  }
  return {logits_.data(), logits_.size()};
}

void Qwen35CudaSession::rollback(int64_t n) {
  if (n < 0 || n > n_past_) fail("rollback: cannot go to {} (n_past {})", n, n_past_);
  if (n == n_past_) return;
  tokens_.resize(static_cast<size_t>(n));
  restore(n);
}

void Qwen35CudaSession::restore(int64_t n) {
  State& s = *state_;
  int64_t from = 0;
  if (const auto* point = s.checkpoints.restore_point(n)) {
    from = point->pos;
    *s.recurrent = point->state;
  } else {
    s.recurrent->clear();
  }
  // re-run [from, n): the KV rows are rewritten with the same values, the state advances
  for (int64_t p = from; p < n; p += n_batch_) {
    const int64_t m = std::min(n_batch_, n - p);
    forward(tokens_.data() + p, m, p, false, nullptr, /*capture=*/false);
  }
  check(cudaStreamSynchronize(s.stream), "state restore");
  n_past_ = n;
}

void Qwen35CudaSession::set_tap_layers(std::vector<int32_t> layers) {
  const int64_t L = model_->host().config().n_layer;
  for (int32_t k : layers) {
    if (k < 0 || k > L) fail("set_tap_layers: layer {} outside [0, {}]", k, L);
  }
  State& s = *state_;
  s.drop_graphs();  // they captured the old tap copies (or none)
  tap_layers_ = std::move(layers);
  taps_.clear();
  const size_t floats =
      tap_layers_.size() * static_cast<size_t>(n_batch_ * model_->host().config().n_embd);
  s.tap_buffer = DeviceBuffer(std::max<size_t>(floats, 1) * 4);
  s.host_tap_buffer = PinnedBuffer(std::max<size_t>(floats, 1) * 4);
  s.tap = static_cast<float*>(s.tap_buffer.data());
  s.host_tap = static_cast<float*>(s.host_tap_buffer.data());
}

void Qwen35CudaSession::forward(const int32_t* tokens, int64_t n, int64_t pos0, bool all_logits,
                                float* logits, bool capture) {
  State& s = *state_;
  const int64_t V = n_vocab();
  check(cudaSetDevice(model_->device().index), "cudaSetDevice");
  std::memcpy(s.host_tokens, tokens, static_cast<size_t>(n) * 4);
  const int64_t rows = logits ? (all_logits ? n : 1) : 0;
  if (rows > s.logit_rows) {  // all_logits: grow the logits buffers to the rows asked for
    s.drop_graphs();          // they captured the old addresses
    s.logit_buffer = DeviceBuffer(static_cast<size_t>(rows * V) * 4);
    s.host_logit_buffer = PinnedBuffer(static_cast<size_t>(rows * V) * 4);
    s.logit_rows = rows;
    s.logits = static_cast<float*>(s.logit_buffer.data());
    s.host_logits = static_cast<float*>(s.host_logit_buffer.data());
  }
  capture = capture && !tap_layers_.empty();
  if (n == 1 && rows == 1 && s.use_graphs) {
    // one token: replay the graph of its context bucket, capturing it on first use
    const int64_t bucket = decode_bucket(pos0);
    const int64_t key = 2 * bucket + (capture ? 1 : 0);
    *s.host_pos = pos0;
    auto it = s.graphs.find(key);
    if (it == s.graphs.end()) {
      const cudaGraphExec_t exec = capture_graph(
          s.stream, [&] { enqueue(1, pos0, 1, capture, /*device_pos=*/true, bucket); });
      it = s.graphs.emplace(key, exec).first;
    }
    check(cudaGraphLaunch(it->second, s.stream), "graph launch");
  } else {
    enqueue(n, pos0, rows, capture, /*device_pos=*/false, 0);
  }
  // ends synchronised: the pinned staging is reused by the next call, and a device fault
  // surfaces here as one error
  check(cudaStreamSynchronize(s.stream), "forward");
  if (logits) std::memcpy(logits, s.host_logits, static_cast<size_t>(rows * V) * 4);
  if (capture) {
    append_taps(s.host_tap, n, static_cast<int64_t>(tap_layers_.size()), n_batch_,
                model_->host().config().n_embd, taps_);
  }
}

void Qwen35CudaSession::enqueue(int64_t n, int64_t pos0, int64_t logit_rows, bool capture,
                                bool device_pos, int64_t split_keys) {
  const Qwen35Model& host = model_->host();
  const Qwen35Config& c = host.config();
  const Qwen35CudaModel::Weights& w = model_->weights();
  State& s = *state_;
  cudaStream_t st = s.stream;
  const int64_t D = c.n_embd, V = host.n_vocab(), hd = c.head_dim;
  const int64_t C = c.conv_channels(), Kc = c.conv_kernel;
  const int64_t Hk = c.ssm_n_k_head, Hv = c.ssm_n_v_head, dk = c.ssm_d_state, dv = dk;
  const float eps = c.rms_eps;
  const GemmPath gemm{s.use_prefill_kernels, s.cublas.get(), s.blas_scratch};
  const float theta_scale = std::pow(c.rope_base, -2.0f / static_cast<float>(c.n_rot));

  // device_pos: the kernels read the position from s.pos (a graph replays for any position)
  const int64_t* dpos = nullptr;
  if (device_pos) {
    check(cudaMemcpyAsync(s.pos, s.host_pos, sizeof(int64_t), cudaMemcpyHostToDevice, st),
          "position upload");
    dpos = s.pos;
  }

  // --- 4.1 embeddings: h = token_embd[tok], no scaling                           h [n][D]
  check(cudaMemcpyAsync(s.tokens, s.host_tokens, static_cast<size_t>(n) * 4, cudaMemcpyHostToDevice,
                        st),
        "token upload");
  check(kernels::launch_embed_rows(static_cast<uint32_t>(w.token_embd.type), w.token_embd.data,
                                   w.token_embd.row_stride, D, s.tokens, n, 1.0f, s.h, st),
        "embedding");

  // taps: the residual stream h at the input of layer k (k = L: after the last layer) into the
  // tap rows of the slots that ask for it, then to the host at the end
  auto tap = [&](int64_t k) {
    if (!capture) return;
    for (size_t i = 0; i < tap_layers_.size(); ++i) {
      if (tap_layers_[i] != k) continue;
      check(cudaMemcpyAsync(s.tap + static_cast<int64_t>(i) * n_batch_ * D, s.h,
                            static_cast<size_t>(n * D) * 4, cudaMemcpyDeviceToDevice, st),
            "tap copy");
    }
  };

  int64_t kv_layer = 0, gdn = 0;
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const auto l = static_cast<size_t>(il);
    const Qwen35CudaModel::Weights::Layer& layer = w.layers[l];
    tap(il);
    check(kernels::launch_rms_norm(s.h, layer.attn_norm, n, D, eps, s.a, st), "attn_norm");
    if (c.is_gdn[l]) {
      // --- 4.4 Gated DeltaNet: projections, gates, conv + SiLU, L2 norms, delta rule
      linear(layer.attn_qkv, s.a, n, s.big, st, gemm);  // m [n][C]
      linear(layer.attn_gate, s.a, n, s.z, st, gemm);   // z [n][Hv·dv]
      linear(layer.ssm_alpha, s.a, n, s.alpha, st, gemm);
      linear(layer.ssm_beta, s.a, n, s.beta_in, st, gemm);
      check(kernels::launch_gdn_gates(s.alpha, s.beta_in, layer.ssm_dt_bias, layer.ssm_a, n, Hv,
                                      s.gamma, s.beta, st),
            "gdn gates");
      float* conv_state = s.conv + gdn * C * (Kc - 1);
      float* delta_state = s.delta + gdn * Hv * dk * dv;
      check(kernels::launch_causal_conv1d_silu(s.big, n, C, Kc, layer.ssm_conv1d, conv_state, s.u,
                                               st),
            "conv1d");
      check(kernels::launch_l2_norm_heads(s.u, n, 2 * Hk, dk, C, eps, st), "q/k l2 norm");
      check(kernels::launch_delta_rule(s.u, n, C, 0, Hk * dk, 2 * Hk * dk, Hk, Hv, dk, dv, s.gamma,
                                       s.beta, 1.0f / std::sqrt(static_cast<float>(dk)),
                                       delta_state, s.attn, st),
            "delta rule");
      // gated RMSNorm per head, then the out-projection
      check(kernels::launch_rms_norm(s.attn, layer.ssm_norm, n * Hv, dv, eps, s.attn, st),
            "ssm_norm");
      check(kernels::launch_silu_mul(s.z, s.attn, n * Hv * dv, s.attn, st), "ssm gate");
      linear(layer.ssm_out, s.attn, n, s.o, st, gemm);  // [n][D]
      ++gdn;
    } else {
      // --- 4.2 gated full attention
      const int64_t H = c.n_head[l], Hkv = c.n_head_kv[l];
      linear(layer.attn_q, s.a, n, s.big, st, gemm);  // [n][H][2][hd]
      check(kernels::launch_split_halves(s.big, n * H, hd, s.q, s.gate, st), "q/gate split");
      linear(layer.attn_k, s.a, n, s.kx, st, gemm);  // [n][Hkv·hd]
      linear(layer.attn_v, s.a, n, s.vx, st, gemm);
      check(kernels::launch_rms_norm(s.q, layer.attn_q_norm, n * H, hd, eps, s.q, st), "q_norm");
      check(kernels::launch_rms_norm(s.kx, layer.attn_k_norm, n * Hkv, hd, eps, s.kx, st),
            "k_norm");
      check(kernels::launch_rope_neox(s.q, n, H, hd, c.n_rot, pos0, theta_scale, w.rope_factors, st,
                                      dpos),
            "rope q");
      check(kernels::launch_rope_neox(s.kx, n, Hkv, hd, c.n_rot, pos0, theta_scale, w.rope_factors,
                                      st, dpos),
            "rope k");
      uint8_t* k_cache = s.k[static_cast<size_t>(kv_layer)];
      uint8_t* v_cache = s.v[static_cast<size_t>(kv_layer)];
      if (s.kv_format == kernels::KvFormat::kQ8_0) {
        check(kernels::launch_kv_store_q8_0(s.kx, s.vx, n, Hkv * hd, pos0, n_ctx_, k_cache, v_cache,
                                            st, dpos),
              "kv store");
      } else {
        check(kernels::launch_kv_store(s.kx, s.vx, n, Hkv * hd, pos0, n_ctx_,
                                       reinterpret_cast<uint16_t*>(k_cache),
                                       reinterpret_cast<uint16_t*>(v_cache), st, dpos),
              "kv store");
      }
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      if (n >= kernels::kGemmMinBatch && gemm.on) {
        check(kernels::launch_attention_prefill(s.q, k_cache, v_cache, n, pos0, n_ctx_, H, Hkv, hd,
                                                /*window=*/0, scale, /*cap=*/0.0f, s.attn, st,
                                                s.kv_format),
              "prefill attention");
      } else {
        // one launch per token, split by its context bucket: a row's bits do not depend on
        // the batch it is in
        for (int64_t t = 0; t < n; ++t) {
          const int64_t bucket = device_pos ? split_keys : decode_bucket(pos0 + t);
          const int n_split = kernels::attention_split_count(bucket, 1, H);
          check(kernels::launch_attention_decode(s.q + t * H * hd, k_cache, v_cache, 1, pos0 + t,
                                                 n_ctx_, H, Hkv, hd, /*window=*/0, scale,
                                                 /*cap=*/0.0f, n_split, s.partials,
                                                 s.attn + t * H * hd, st, dpos, s.kv_format),
                "attention");
        }
      }
      check(kernels::launch_sigmoid_mul(s.gate, n * H * hd, s.attn, st), "output gate");
      linear(layer.attn_output, s.attn, n, s.o, st, gemm);  // [n][D]
      ++kv_layer;
    }
    check(kernels::launch_add(s.o, n * D, s.h, st), "residual");

    // SwiGLU FFN on RMSNorm(h)
    const int64_t n_ff = c.n_ff[l];
    check(kernels::launch_rms_norm(s.h, layer.post_attention_norm, n, D, eps, s.a, st),
          "post_attention_norm");
    linear(layer.ffn_gate, s.a, n, s.gate, st, gemm);  // [n][n_ff]
    linear(layer.ffn_up, s.a, n, s.up, st, gemm);
    check(kernels::launch_silu_mul(s.gate, s.up, n * n_ff, s.gate, st), "swiglu");
    linear(layer.ffn_down, s.gate, n, s.o, st, gemm);  // [n][D]
    check(kernels::launch_add(s.o, n * D, s.h, st), "residual");
  }

  tap(c.n_layer);
  if (capture) {
    for (size_t i = 0; i < tap_layers_.size(); ++i) {
      const int64_t at = static_cast<int64_t>(i) * n_batch_ * D;
      check(cudaMemcpyAsync(s.host_tap + at, s.tap + at, static_cast<size_t>(n * D) * 4,
                            cudaMemcpyDeviceToHost, st),
            "tap download");
    }
  }

  // --- output: final norm and head for the last logit_rows rows
  if (logit_rows > 0) {
    const float* last = s.h + (n - logit_rows) * D;
    check(kernels::launch_rms_norm(last, w.output_norm, logit_rows, D, eps, s.a, st),
          "output_norm");
    linear(w.output, s.a, logit_rows, s.logits, st, gemm);  // [rows][V]
    check(cudaMemcpyAsync(s.host_logits, s.logits, static_cast<size_t>(logit_rows * V) * 4,
                          cudaMemcpyDeviceToHost, st),
          "logits download");
  }
}

}  // namespace boltrt::cuda

#include "backend/cuda/gemma4_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <string>

#include "backend/cpu/ops.h"
#include "backend/cuda/cublas_linear.h"
#include "backend/cuda/device_weights.h"
#include "backend/cuda/gemma4_math.h"
#include "gemm_quant.cuh"
#include "gemv_quant.cuh"
#include "gguf/gguf.h"
#include "model/gemma4.h"
#include "ops.cuh"
#include "quant/dequantize.h"
#include "quant/fp16.h"
#include "sub32_dispatch.cuh"
#include "util/error.h"

namespace boltrt::cuda {

struct Gemma4CudaModel::Weights {
  struct Layer {
    const float *attn_norm = nullptr, *q_norm = nullptr, *k_norm = nullptr;
    const float *post_attention_norm = nullptr, *ffn_norm = nullptr, *post_ffw_norm = nullptr;
    const float* post_norm = nullptr;
    DeviceMatrix q, k, v, o, gate, up, down, inp_gate, proj;
    float output_scale = 1.0f;
    // MoE layers (§5.7): router [E][D] with its input scale [D], the branch norms, and the
    // experts as one merged gate_up stack [E][2F][D] or split gate/up stacks [E][F][D], down
    // [E][D][F]
    bool moe = false;
    DeviceMatrix router;
    const float *router_scale = nullptr, *pre_ffw_norm_2 = nullptr;
    const float *post_ffw_norm_1 = nullptr, *post_ffw_norm_2 = nullptr;
    DeviceExperts gate_up_exps, gate_exps, up_exps, down_exps;
  };
  DeviceBuffer arena;  // every tensor, kAlign-aligned
  size_t bytes = 0;
  int converted = 0;
  DeviceMatrix token_embd, output, ple_proj;
  const float *output_norm = nullptr, *rope_freqs = nullptr, *ple_norm = nullptr;
  std::vector<Layer> layers;
};

std::string gemma4_unsupported_reason(const Gemma4Model& model) {
  const Gemma4Config& c = model.config();
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const Gemma4LayerConfig& lc = c.layers[static_cast<size_t>(il)];
    const Gemma4Layer& layer = model.layer(il);
    if (layer.is_moe()) {
      if (c.n_expert_used < 1 || c.n_expert_used > c.n_expert ||
          c.n_expert_used * Gemma4CudaSession::kMaxBatch > 65535) {
        return fmt::format("layer {} uses {} of {} experts", il, c.n_expert_used, c.n_expert);
      }
      if (c.n_ff_exp % 32 != 0) {
        return fmt::format("expert width {} is not a multiple of 32", c.n_ff_exp);
      }
      if (!layer.ffn_gate_inp_scale.data || !layer.pre_ffw_norm_2.data ||
          !layer.post_ffw_norm_1.data || !layer.post_ffw_norm_2.data || !layer.ffn_gate.present()) {
        return fmt::format("layer {} lacks a tensor of the 26B-A4B MoE layout", il);
      }
      for (const ExpertMatrices* x :
           {&layer.gate_up_exps, &layer.gate_exps, &layer.up_exps, &layer.down_exps}) {
        if (x->present() &&
            x->expert_stride != x->first.row_stride * static_cast<size_t>(x->first.rows)) {
          return fmt::format("layer {}: expert matrices are not stored back to back", il);
        }
        if (!x->scale.empty() && static_cast<int64_t>(x->scale.size()) != c.n_expert) {
          return fmt::format("layer {}: {} expert scales for {} experts", il, x->scale.size(),
                             c.n_expert);
        }
      }
    }
    if (!kernels::attention_prefill_head_dim_supported(lc.head_dim)) {
      return fmt::format(
          "layer {} has head size {} (the attention kernels take 64, 128, 192, 256 or 512)", il,
          lc.head_dim);
    }
    if (lc.n_rot > lc.head_dim || lc.n_rot % 2 != 0) {
      return fmt::format("layer {} rotates {} of {} dims", il, lc.n_rot, lc.head_dim);
    }
  }
  if (c.n_embd % 32 != 0) return fmt::format("embedding size {} is not a multiple of 32", c.n_embd);
  if (c.n_embd_per_layer % 32 != 0) {
    return fmt::format("per-layer embedding size {} is not a multiple of 32", c.n_embd_per_layer);
  }
  return "";
}

namespace {

// Hands every tensor of `model` to the uploader, pointers into `w`.
void collect_weights(const Gemma4Model& model, Gemma4CudaModel::Weights& w, Uploader& up) {
  const Gemma4Config& c = model.config();
  // The pointers handed to the uploader are filled by upload(), so they must not move: size
  // the layer vector first.
  w.layers.resize(static_cast<size_t>(c.n_layer));
  up.matrix(model.token_embd(), 1.0f, &w.token_embd);
  up.matrix(model.output().w, model.output().scale, &w.output);
  up.vector(model.output_norm(), &w.output_norm);
  up.vector(model.rope_freqs(), &w.rope_freqs);
  if (c.n_embd_per_layer > 0) {
    up.matrix(model.per_layer_model_proj().w, model.per_layer_model_proj().scale, &w.ple_proj);
    up.vector(model.per_layer_proj_norm(), &w.ple_norm);
  }
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const Gemma4Layer& h = model.layer(il);
    Gemma4CudaModel::Weights::Layer& d = w.layers[static_cast<size_t>(il)];
    up.vector(h.attn_norm, &d.attn_norm);
    up.matrix(h.attn_q.w, h.attn_q.scale, &d.q);
    up.vector(h.attn_q_norm, &d.q_norm);
    if (c.layers[static_cast<size_t>(il)].kv_source < 0) {
      up.matrix(h.attn_k.w, h.attn_k.scale, &d.k);
      up.vector(h.attn_k_norm, &d.k_norm);
      up.matrix(h.attn_v.w, h.attn_v.scale, &d.v);
    }
    up.matrix(h.attn_output.w, h.attn_output.scale, &d.o);
    up.vector(h.post_attention_norm, &d.post_attention_norm);
    up.vector(h.ffn_norm, &d.ffn_norm);
    up.matrix(h.ffn_gate.w, h.ffn_gate.scale, &d.gate);
    up.matrix(h.ffn_up.w, h.ffn_up.scale, &d.up);
    up.matrix(h.ffn_down.w, h.ffn_down.scale, &d.down);
    up.vector(h.post_ffw_norm, &d.post_ffw_norm);
    if (c.n_embd_per_layer > 0) {
      up.matrix(h.inp_gate.w, h.inp_gate.scale, &d.inp_gate);
      up.matrix(h.proj.w, h.proj.scale, &d.proj);
      up.vector(h.post_norm, &d.post_norm);
    }
    if (h.is_moe()) {
      d.moe = true;
      up.matrix(h.ffn_gate_inp.w, h.ffn_gate_inp.scale, &d.router);
      up.vector(h.ffn_gate_inp_scale, &d.router_scale);
      up.vector(h.pre_ffw_norm_2, &d.pre_ffw_norm_2);
      up.vector(h.post_ffw_norm_1, &d.post_ffw_norm_1);
      up.vector(h.post_ffw_norm_2, &d.post_ffw_norm_2);
      up.experts(h.gate_up_exps.first, c.n_expert, h.gate_up_exps.scale, &d.gate_up_exps);
      up.experts(h.gate_exps.first, c.n_expert, h.gate_exps.scale, &d.gate_exps);
      up.experts(h.up_exps.first, c.n_expert, h.up_exps.scale, &d.up_exps);
      up.experts(h.down_exps.first, c.n_expert, h.down_exps.scale, &d.down_exps);
    }
    d.output_scale = h.output_scale;
  }
}

}  // namespace

size_t gemma4_cuda_weight_bytes(const Gemma4Model& model) {
  Gemma4CudaModel::Weights w;
  Uploader up;
  collect_weights(model, w, up);
  return up.total();
}

Gemma4CudaModel::Gemma4CudaModel(const Gemma4Model& model, int device_index)
    : host_(model), weights_(std::make_unique<Weights>()) {
  device_ = open_device(device_index);
  if (std::string reason = gemma4_unsupported_reason(model); !reason.empty()) {
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

Gemma4CudaModel::~Gemma4CudaModel() = default;

size_t Gemma4CudaModel::weight_bytes() const {
  return weights_->bytes;
}
int Gemma4CudaModel::converted_tensors() const {
  return weights_->converted;
}

// ---- session -----------------------------------------------------------------------------------

struct Gemma4CudaSession::State {
  cudaStream_t stream = nullptr;
  DeviceBuffer kv;  // K and V of every owning layer
  // F16 values, or Q8_0 blocks (--kv-type q8_0: 34 bytes per 32 values, the CPU cache's bytes)
  kernels::KvFormat kv_format = kernels::KvFormat::kF16;
  std::vector<uint8_t*> k, v;  // per layer (shared layers point at their source)
  std::vector<int64_t> cells;  // per layer: cells of the storage it reads
  DeviceBuffer scratch;
  float *h = nullptr, *a = nullptr, *o = nullptr, *q = nullptr, *kx = nullptr, *vx = nullptr;
  float *attn = nullptr, *gate = nullptr, *up = nullptr, *ple = nullptr, *ple_tok = nullptr;
  float *logits = nullptr, *partials = nullptr;
  // MoE (§5.7): router logits [B][E]; per (token, slot) pair the routing weight [B*K], the
  // expert index [B*K], the expert's gate and up rows [B*K][F] and down output [B*K][D]; the
  // weighted expert sum [B][D]
  float *router = nullptr, *moe_weights = nullptr, *moe_gate = nullptr, *moe_up = nullptr;
  float *moe_y = nullptr, *moe_sum = nullptr;
  int32_t* moe_selected = nullptr;
  int32_t* moe_order = nullptr;  // [B*K] the pairs grouped by expert (batches)
  int32_t* tokens = nullptr;
  size_t partial_floats = 0;
  PinnedBuffer pinned;  // tokens, per-layer embedding rows, logits
  int32_t* host_tokens = nullptr;
  float* host_ple = nullptr;
  float* host_logits = nullptr;
  int64_t logit_rows = 0;     // capacity of `logits` / `host_logits`
  DeviceBuffer logit_buffer;  // all_logits: grown to the rows asked for
  PinnedBuffer host_logit_buffer;

  // Decode as CUDA graphs: the single-token forward pass captured once per context bucket
  // (the attention split count depends on the keys; everything else on the position reads
  // *pos on the device), replayed for every token of the bucket. Keyed by the bucket's key
  // count; a graph holds the buffer addresses of its capture, so growing a buffer drops them.
  bool use_graphs = true;
  // BOLTRT_CUDA_GEMM=0: batches through the GEMV and decode attention kernels only (A/B runs,
  // a fallback should the tensor-core path misbehave on a new device)
  bool use_prefill_kernels = true;
  // cuBLAS for F16/BF16 matrices in batches (BOLTRT_CUDA_CUBLAS=0: the tensor-core GEMM of
  // kernels/ for them too); blas_scratch holds the batch's activations as f16/bf16
  std::unique_ptr<CublasLinear> cublas;
  void* blas_scratch = nullptr;
  int64_t* pos = nullptr;       // device: the position of the single token
  int64_t* host_pos = nullptr;  // pinned staging for it
  // taps (set_tap_layers): [taps][n_batch][D] on the device, the same in pinned memory
  DeviceBuffer tap_buffer;
  PinnedBuffer host_tap_buffer;
  float* tap = nullptr;
  float* host_tap = nullptr;
  std::map<int64_t, cudaGraphExec_t> graphs;

  void drop_graphs() {
    for (auto& [bucket, exec] : graphs) cudaGraphExecDestroy(exec);
    graphs.clear();
  }
  ~State() {
    drop_graphs();
    cublas.reset();  // its handle is bound to the stream
    if (stream) cudaStreamDestroy(stream);
  }
};

namespace {

// A session's device memory, computed from the model alone (no device): the constructor
// allocates exactly this, gemma4_cuda_session_memory reports it, and the out-of-memory check
// compares it with the free memory before allocating.
struct SessionPlan {
  int64_t n_ctx = 0, n_batch = 0;
  kernels::KvFormat kv_format = kernels::KvFormat::kF16;
  std::vector<int64_t> cells;     // per layer: cells of the storage it reads
  std::vector<size_t> kv_offset;  // per owning layer: its K at the offset, V after it
  std::vector<size_t> v_offset;   // per owning layer: V relative to K
  size_t kv_bytes = 0;
  size_t partial_floats = 0;
  std::vector<int64_t> floats;  // scratch slots, in State's order (see the constructor)
  size_t scratch_bytes = 0;
};

SessionPlan plan_session(const Gemma4Model& host, const SessionOptions& options) {
  const Gemma4Config& c = host.config();
  if (options.kv_type != KvType::F16 && options.kv_type != KvType::Q8_0) {
    fail("the CUDA backend keeps its KV cache in f16 or q8_0; --kv-type {} is not supported",
         kv_type_name(options.kv_type));
  }
  if (options.n_ctx <= 0) fail("context size {} must be > 0", options.n_ctx);
  SessionPlan plan;
  plan.n_ctx = c.n_ctx_train > 0 ? std::min(options.n_ctx, c.n_ctx_train) : options.n_ctx;
  plan.n_batch =
      std::max<int64_t>(1, std::min({options.n_batch, Gemma4CudaSession::kMaxBatch, plan.n_ctx}));
  plan.kv_format =
      options.kv_type == KvType::Q8_0 ? kernels::KvFormat::kQ8_0 : kernels::KvFormat::kF16;
  // bytes of one cell of a layer's K (or V) cache: rows of n_head_kv * head_dim values (a
  // multiple of 64: whole Q8_0 blocks)
  auto cell_bytes = [&](const Gemma4LayerConfig& lc) {
    const int64_t row = lc.n_head_kv * lc.head_dim;
    return static_cast<size_t>(plan.kv_format == kernels::KvFormat::kQ8_0 ? q8_0_row_bytes(row)
                                                                          : row * 2);
  };
  // KV cache: full layers keep n_ctx cells, window layers a ring of window - 1 + n_batch
  // (the window of the oldest query of a micro-batch plus the micro-batch), like KvCache.
  const size_t L = static_cast<size_t>(c.n_layer);
  plan.cells.assign(L, 0);
  plan.kv_offset.assign(L, 0);
  plan.v_offset.assign(L, 0);
  for (size_t il = 0; il < L; ++il) {
    const Gemma4LayerConfig& lc = c.layers[il];
    if (lc.kv_source >= 0) continue;
    plan.cells[il] = lc.sliding ? std::min(plan.n_ctx, c.n_swa - 1 + plan.n_batch) : plan.n_ctx;
    plan.kv_offset[il] = plan.kv_bytes;
    plan.v_offset[il] = align_up(static_cast<size_t>(plan.cells[il]) * cell_bytes(lc));
    plan.kv_bytes += 2 * plan.v_offset[il];
  }
  for (size_t il = 0; il < L; ++il) {
    const Gemma4LayerConfig& lc = c.layers[il];
    const size_t src = lc.kv_source >= 0 ? static_cast<size_t>(lc.kv_source) : il;
    const Gemma4LayerConfig& sc = c.layers[src];
    if (sc.kv_source >= 0 || sc.n_head_kv != lc.n_head_kv || sc.head_dim != lc.head_dim) {
      fail("layer {} shares the KV of layer {} whose layout differs", il, src);
    }
    plan.cells[il] = plan.cells[src];
  }

  // scratch for n_batch tokens
  const int64_t B = plan.n_batch, D = c.n_embd, P = c.n_embd_per_layer, LP = c.n_layer * P;
  int64_t q_width = 0, kv_width = 0, ff = 0, max_hd = 0;
  for (const Gemma4LayerConfig& lc : c.layers) {
    q_width = std::max(q_width, lc.n_head * lc.head_dim);
    kv_width = std::max(kv_width, lc.n_head_kv * lc.head_dim);
    ff = std::max({ff, lc.n_ff, P});
    max_hd = std::max(max_hd, lc.head_dim);
  }
  for (int64_t il = 0; il < c.n_layer; ++il) ff = std::max(ff, host.layer(il).ffn_gate.w.rows);
  const bool any_moe = c.n_expert > 0;
  const int64_t E = any_moe ? c.n_expert : 0, K = any_moe ? c.n_expert_used : 0;
  const int64_t F = any_moe ? c.n_ff_exp : 0;
  // split-KV partial states: attention_split_count keeps tokens * heads * splits <= 512
  plan.partial_floats = static_cast<size_t>(512 * (max_hd + 2));
  const int64_t logit_rows = 1;  // grown on demand by all_logits calls
  plan.floats = {B * D, B * D, B * D, B * q_width, B * kv_width, B * kv_width, B * q_width, B * ff,
                 B * ff, B * LP, B * LP, logit_rows * c.n_vocab,
                 static_cast<int64_t>(plan.partial_floats), B * E, B * K, B * K * F, B * K * F,
                 B * K * D, B * D,
                 B * K,  // int32 expert indices
                 B * K,  // int32 pair order (grouped by expert)
                 // cuBLAS activations: B rows of the widest matrix input, as halves
                 (B * std::max({D, q_width, ff}) + 1) / 2,
                 B,   // int32 tokens
                 2};  // int64 position
  for (int64_t f : plan.floats) plan.scratch_bytes += align_up(static_cast<size_t>(f) * 4);
  return plan;
}

}  // namespace

SessionMemory gemma4_cuda_session_memory(const Gemma4Model& model, const SessionOptions& options) {
  const SessionPlan plan = plan_session(model, options);
  return {plan.kv_bytes, plan.scratch_bytes};
}

Gemma4CudaSession::Gemma4CudaSession(std::shared_ptr<const Gemma4CudaModel> model,
                                     const SessionOptions& options)
    : model_(std::move(model)), state_(std::make_unique<State>()) {
  const Gemma4Model& host = model_->host();
  const Gemma4Config& c = host.config();
  const SessionPlan plan = plan_session(host, options);
  n_ctx_ = plan.n_ctx;
  n_batch_ = plan.n_batch;
  State& s = *state_;
  s.kv_format = plan.kv_format;
  check(cudaSetDevice(model_->device().index), "cudaSetDevice");
  {  // one clear error before allocating anything when the session cannot fit
    size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    const std::string what = fmt::format(
        "the KV cache for {} tokens ({}, {}) and {} of scratch for batches of {}", n_ctx_,
        kv_type_name(options.kv_type), mib(plan.kv_bytes), mib(plan.scratch_bytes), n_batch_);
    if (std::string why = device_memory_shortfall(what, plan.kv_bytes + plan.scratch_bytes,
                                                  free_bytes, total_bytes);
        !why.empty()) {
      fail("{} (the weights hold {}; try a smaller --ctx-size{})", why, mib(model_->weight_bytes()),
           options.kv_type == KvType::F16 ? " or --kv-type q8_0" : "");
    }
  }
  check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");

  const size_t L = static_cast<size_t>(c.n_layer);
  try {
    s.kv = DeviceBuffer(plan.kv_bytes);
  } catch (const Error& e) {
    fail("the KV cache for {} tokens needs {} of device memory: {}", n_ctx_, mib(plan.kv_bytes),
         e.what());
  }
  s.cells = plan.cells;
  s.k.assign(L, nullptr);
  s.v.assign(L, nullptr);
  for (size_t il = 0; il < L; ++il) {
    const Gemma4LayerConfig& lc = c.layers[il];
    const size_t src = lc.kv_source >= 0 ? static_cast<size_t>(lc.kv_source) : il;
    auto* base = static_cast<uint8_t*>(s.kv.data()) + plan.kv_offset[src];
    s.k[il] = base;
    s.v[il] = base + plan.v_offset[src];
  }

  // scratch for n_batch tokens
  const int64_t B = n_batch_, P = c.n_embd_per_layer, LP = c.n_layer * P;
  s.partial_floats = plan.partial_floats;
  s.logit_rows = 1;
  const std::vector<int64_t>& floats = plan.floats;
  s.scratch = DeviceBuffer(plan.scratch_bytes);
  auto* p = static_cast<uint8_t*>(s.scratch.data());
  float *selected = nullptr, *order = nullptr, *blas_scratch = nullptr;
  float** slots[] = {&s.h,        &s.a,      &s.o,           &s.q,         &s.kx,      &s.vx,
                     &s.attn,     &s.gate,   &s.up,          &s.ple,       &s.ple_tok, &s.logits,
                     &s.partials, &s.router, &s.moe_weights, &s.moe_gate,  &s.moe_up,  &s.moe_y,
                     &s.moe_sum,  &selected, &order,         &blas_scratch};
  if (std::size(slots) + 2 != floats.size()) fail("session scratch plan out of step");
  for (size_t i = 0; i < std::size(slots); ++i) {
    *slots[i] = reinterpret_cast<float*>(p);
    p += align_up(static_cast<size_t>(floats[i]) * 4);
  }
  s.moe_selected = reinterpret_cast<int32_t*>(selected);
  s.moe_order = reinterpret_cast<int32_t*>(order);
  s.blas_scratch = blas_scratch;
  s.tokens = reinterpret_cast<int32_t*>(p);
  p += align_up(static_cast<size_t>(B) * 4);
  s.pos = reinterpret_cast<int64_t*>(p);

  s.pinned = PinnedBuffer(align_up(static_cast<size_t>(B) * 4) +
                          align_up(static_cast<size_t>(B * LP) * 4) +
                          align_up(static_cast<size_t>(c.n_vocab) * 4) + kAlign);
  auto* hp = static_cast<uint8_t*>(s.pinned.data());
  s.host_tokens = reinterpret_cast<int32_t*>(hp);
  s.host_ple = reinterpret_cast<float*>(hp + align_up(static_cast<size_t>(B) * 4));
  s.host_logits = reinterpret_cast<float*>(hp + align_up(static_cast<size_t>(B) * 4) +
                                           align_up(static_cast<size_t>(B * LP) * 4));
  s.host_pos = reinterpret_cast<int64_t*>(hp + align_up(static_cast<size_t>(B) * 4) +
                                          align_up(static_cast<size_t>(B * LP) * 4) +
                                          align_up(static_cast<size_t>(c.n_vocab) * 4));
  // BOLTRT_CUDA_GRAPHS=0: launch the decode kernels one by one (A/B runs, debugging)
  if (const char* env = std::getenv("BOLTRT_CUDA_GRAPHS"); env && std::string(env) == "0") {
    s.use_graphs = false;
  }
  if (const char* env = std::getenv("BOLTRT_CUDA_GEMM"); env && std::string(env) == "0") {
    s.use_prefill_kernels = false;
  }
  if (const char* env = std::getenv("BOLTRT_CUDA_CUBLAS"); !env || std::string(env) != "0") {
    s.cublas = std::make_unique<CublasLinear>();
  }
}

Gemma4CudaSession::~Gemma4CudaSession() = default;

int64_t Gemma4CudaSession::n_vocab() const {
  return model_->host().config().n_vocab;
}

size_t Gemma4CudaSession::device_bytes() const {
  return state_->kv.size() + state_->scratch.size();
}

void Gemma4CudaSession::rollback(int64_t n) {
  if (n < 0 || n > n_past_) fail("rollback to {} outside [0, {}]", n, n_past_);
  if (n == 0) {
    n_past_ = 0;
    return;
  }
  const Gemma4Config& c = model_->host().config();
  for (size_t il = 0; il < c.layers.size(); ++il) {
    if (!c.layers[il].sliding) continue;
    // the ring holds positions [n_past - cells, n_past); position n needs [n - window + 1, n)
    const int64_t needed = std::max<int64_t>(0, n - c.n_swa + 1);
    const int64_t held = std::max<int64_t>(0, n_past_ - state_->cells[il]);
    if (needed < held) {
      fail(
          "cannot roll back from {} to {} tokens: the sliding-window cache keeps only the last "
          "{} positions",
          n_past_, n, state_->cells[il]);
    }
  }
  n_past_ = n;
}

std::span<const float> Gemma4CudaSession::decode(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t V = n_vocab();
  if (n == 0) fail("decode: no tokens");
  if (n_past_ + n > n_ctx_) {
    fail("decode: {} tokens after {} do not fit in the context of {}", n, n_past_, n_ctx_);
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= V) fail("decode: token id {} outside the vocabulary [0, {})", t, V);
  }
  logits_.resize(static_cast<size_t>((all_logits ? n : 1) * V));
  taps_.clear();
  const int64_t start = n_past_;
  try {
    for (int64_t done = 0; done < n; done += n_batch_) {
      const int64_t m = std::min(n_batch_, n - done);
      const bool last_chunk = done + m == n;
      float* out = all_logits ? logits_.data() + done * V : (last_chunk ? logits_.data() : nullptr);
      forward(tokens.data() + done, m, n_past_, all_logits, out);
      n_past_ += m;
    }
  } catch (...) {
    n_past_ = start;
    throw;
  }
  return {logits_.data(), logits_.size()};
}

void Gemma4CudaSession::forward(const int32_t* tokens, int64_t n, int64_t pos0, bool all_logits,
                                float* logits) {
  const Gemma4Model& host = model_->host();
  const Gemma4Config& c = host.config();
  State& s = *state_;
  const int64_t L = c.n_layer, P = c.n_embd_per_layer, V = c.n_vocab;
  check(cudaSetDevice(model_->device().index), "cudaSetDevice");

  // host side first: the tokens and their per-layer embedding rows into pinned staging (the
  // table stays in host memory; only the batch's rows move), the logits buffers grown
  std::memcpy(s.host_tokens, tokens, static_cast<size_t>(n) * 4);
  if (P > 0) {
    const WeightView& table = host.per_layer_token_embd();
    for (int64_t t = 0; t < n; ++t) {
      dequantize_row(table.type,
                     static_cast<const uint8_t*>(table.data) +
                         static_cast<size_t>(tokens[t]) * table.row_stride,
                     s.host_ple + t * L * P, table.cols);
    }
  }
  const int64_t rows = logits ? (all_logits ? n : 1) : 0;
  if (rows > s.logit_rows) {  // all_logits: grow the logits buffers to the rows asked for
    s.drop_graphs();          // they captured the old addresses
    s.logit_buffer = DeviceBuffer(static_cast<size_t>(rows * V) * 4);
    s.host_logit_buffer = PinnedBuffer(static_cast<size_t>(rows * V) * 4);
    s.logit_rows = rows;
    s.logits = static_cast<float*>(s.logit_buffer.data());
    s.host_logits = static_cast<float*>(s.host_logit_buffer.data());
  }

  if (n == 1 && rows == 1 && s.use_graphs) {
    // one token: replay the graph of its context bucket (keys rounded up to a power of two
    // from 256), capturing it on first use
    const int64_t bucket = decode_bucket(pos0);
    *s.host_pos = pos0;
    auto it = s.graphs.find(bucket);
    if (it == s.graphs.end()) {
      const cudaGraphExec_t exec =
          capture_graph(s.stream, [&] { enqueue(1, pos0, 1, /*device_pos=*/true, bucket); });
      it = s.graphs.emplace(bucket, exec).first;
    }
    check(cudaGraphLaunch(it->second, s.stream), "graph launch");
  } else {
    enqueue(n, pos0, rows, /*device_pos=*/false, pos0 + n);
  }
  // Every forward ends synchronised (for decode, the one wait per token: the logits the
  // sampler needs): the pinned staging is reused by the next call, and a device fault
  // surfaces here as one error.
  check(cudaStreamSynchronize(s.stream), "forward");
  if (logits) std::memcpy(logits, s.host_logits, static_cast<size_t>(rows * V) * 4);
  if (!tap_layers_.empty()) {
    append_taps(s.host_tap, n, static_cast<int64_t>(tap_layers_.size()), n_batch_, c.n_embd, taps_);
  }
}

void Gemma4CudaSession::set_tap_layers(std::vector<int32_t> layers) {
  const Gemma4Config& c = model_->host().config();
  for (int32_t k : layers) {
    if (k < 0 || k > c.n_layer) fail("set_tap_layers: layer {} outside [0, {}]", k, c.n_layer);
  }
  State& s = *state_;
  s.drop_graphs();  // they captured the old tap copies (or none)
  tap_layers_ = std::move(layers);
  taps_.clear();
  const size_t floats = tap_layers_.size() * static_cast<size_t>(n_batch_ * c.n_embd);
  s.tap_buffer = DeviceBuffer(floats * 4);
  s.host_tap_buffer = PinnedBuffer(floats * 4);
  s.tap = static_cast<float*>(s.tap_buffer.data());
  s.host_tap = static_cast<float*>(s.host_tap_buffer.data());
}

// §5.7, from the post-attention residual s.h, the dense branch's output in s.o [n][D]:
//   o = post_ffw_norm_1(o) + post_ffw_norm_2(sum_j w_j * expert_j(pre_ffw_norm_2(h)))
// with the router on rms_norm(h) / sqrt(D) * router_scale. Every (token, slot) pair runs as
// one row of the expert GEMVs (one launch per matrix for the whole batch; the selected
// experts never leave the device). Mirrors Gemma4Model::feed_forward_moe.
void Gemma4CudaSession::enqueue_moe(int64_t il, int64_t n) {
  const Gemma4Config& c = model_->host().config();
  const Gemma4CudaModel::Weights::Layer& layer = model_->weights().layers[static_cast<size_t>(il)];
  State& s = *state_;
  cudaStream_t st = s.stream;
  const int64_t D = c.n_embd, E = c.n_expert, F = c.n_ff_exp;
  const int K = static_cast<int>(c.n_expert_used);
  const int64_t pairs = n * K;
  const float eps = c.rms_eps;
  check(kernels::launch_rms_norm(s.o, layer.post_ffw_norm_1, n, D, eps, s.o, st),
        "post_ffw_norm_1");
  // router logits [n][E] and the top-K experts of each token
  check(kernels::launch_rms_norm(s.h, layer.router_scale, n, D, eps, s.a, st), "router norm");
  check(kernels::launch_scale(s.a, n * D, 1.0f / std::sqrt(static_cast<float>(D)), st),
        "router scale");
  linear(layer.router, s.a, n, s.router, st, GemmPath{/*on=*/false});
  check(kernels::launch_moe_route(s.router, n, static_cast<int>(E), K, s.moe_selected,
                                  s.moe_weights, st),
        "moe route");
  // batches: visit the pairs expert by expert (each expert's weights then come from L2 after
  // its first pair); a single token's K experts are distinct anyway
  const int32_t* order = nullptr;
  if (n > 1) {
    check(kernels::launch_moe_group(s.moe_selected, pairs, static_cast<int>(E), s.moe_order, st),
          "moe group");
    order = s.moe_order;
  }
  // experts on pre_ffw_norm_2(h): gate, up [pairs][F] (x shared by a token's K slots)
  check(kernels::launch_rms_norm(s.h, layer.pre_ffw_norm_2, n, D, eps, s.a, st), "pre_ffw_norm_2");
  auto experts = [&](const DeviceExperts& x, int64_t row0, int64_t rows, const float* in,
                     int in_pairs_per_row, float* out, const char* what) {
    check(kernels::launch_gemv_experts(static_cast<uint32_t>(x.type), x.rows_from(row0), rows,
                                       x.cols, x.row_stride, x.expert_stride, s.moe_selected, pairs,
                                       in, in_pairs_per_row, x.scale, out, st, order),
          what);
  };
  if (layer.gate_up_exps.present()) {  // merged [E][2F][D]: gate rows first (no scales)
    const DeviceExperts& gu = layer.gate_up_exps;
    DeviceExperts unscaled = gu;
    unscaled.scale = nullptr;
    experts(unscaled, 0, F, s.a, K, s.moe_gate, "expert gate");
    experts(unscaled, F, F, s.a, K, s.moe_up, "expert up");
  } else {
    experts(layer.gate_exps, 0, F, s.a, K, s.moe_gate, "expert gate");
    experts(layer.up_exps, 0, F, s.a, K, s.moe_up, "expert up");
  }
  check(kernels::launch_gelu_mul(s.moe_gate, s.moe_up, F, pairs, F, s.moe_gate, st),
        "expert geglu");
  experts(layer.down_exps, 0, D, s.moe_gate, 1, s.moe_y, "expert down");  // [pairs][D]
  check(kernels::launch_moe_combine(s.moe_y, s.moe_weights, n, K, D, s.moe_sum, st), "moe combine");
  check(kernels::launch_rms_norm_add(s.moe_sum, layer.post_ffw_norm_2, n, D, eps, s.o, st),
        "post_ffw_norm_2");
}

void Gemma4CudaSession::enqueue(int64_t n, int64_t pos0, int64_t logit_rows, bool device_pos,
                                int64_t split_keys) {
  const Gemma4Model& host = model_->host();
  const Gemma4Config& c = host.config();
  const Gemma4CudaModel::Weights& w = model_->weights();
  State& s = *state_;
  cudaStream_t st = s.stream;
  const int64_t D = c.n_embd, L = c.n_layer, P = c.n_embd_per_layer, V = c.n_vocab;
  const float eps = c.rms_eps;
  // GEMMs for batches (see linear)
  const GemmPath gemm{s.use_prefill_kernels, s.cublas.get(), s.blas_scratch};
  // device_pos: kernels read the position from s.pos (a graph replays for any position)
  const int64_t* dpos = nullptr;
  if (device_pos) {
    check(cudaMemcpyAsync(s.pos, s.host_pos, sizeof(int64_t), cudaMemcpyHostToDevice, st),
          "position upload");
    dpos = s.pos;
  }

  // --- 5.1 embeddings: h = token_embd[tok] * sqrt(D)                              h [n][D]
  check(cudaMemcpyAsync(s.tokens, s.host_tokens, static_cast<size_t>(n) * 4, cudaMemcpyHostToDevice,
                        st),
        "token upload");
  check(kernels::launch_embed_rows(static_cast<uint32_t>(w.token_embd.type), w.token_embd.data,
                                   w.token_embd.row_stride, D, s.tokens, n,
                                   std::sqrt(static_cast<float>(D)), s.h, st),
        "embedding");

  // --- 5.2 per-layer embeddings (rows staged in s.host_ple by forward)
  if (P > 0) {
    check(cudaMemcpyAsync(s.ple_tok, s.host_ple, static_cast<size_t>(n * L * P) * 4,
                          cudaMemcpyHostToDevice, st),
          "per-layer embedding upload");
    linear(w.ple_proj, s.h, n, s.ple, st, gemm);  // [n][L*P]
    check(kernels::launch_ple_mix(
              s.ple, s.ple_tok, w.ple_norm, n * L, P, 1.0f / std::sqrt(static_cast<float>(D)),
              std::sqrt(static_cast<float>(P)), 1.0f / std::sqrt(2.0f), eps, st),
          "per-layer embedding mix");
  }

  // taps: the residual stream h at the input of layer k (k = L: after the last layer) into
  // the tap rows of the slots that ask for it, then to the host at the end
  auto tap = [&](int64_t k) {
    for (size_t i = 0; i < tap_layers_.size(); ++i) {
      if (tap_layers_[i] != k) continue;
      check(cudaMemcpyAsync(s.tap + static_cast<int64_t>(i) * n_batch_ * D, s.h,
                            static_cast<size_t>(n * D) * 4, cudaMemcpyDeviceToDevice, st),
            "tap copy");
    }
  };

  for (int64_t il = 0; il < L; ++il) {
    const Gemma4LayerConfig& lc = c.layers[static_cast<size_t>(il)];
    const Gemma4CudaModel::Weights::Layer& layer = w.layers[static_cast<size_t>(il)];
    tap(il);
    const int64_t hd = lc.head_dim, H = lc.n_head, Hkv = lc.n_head_kv;
    const float theta_scale = std::pow(lc.rope_base, -2.0f / static_cast<float>(lc.n_rot));
    const float* freq_factors = lc.sliding ? nullptr : w.rope_freqs;

    // --- 5.3 attention
    check(kernels::launch_rms_norm(s.h, layer.attn_norm, n, D, eps, s.a, st), "attn_norm");
    linear(layer.q, s.a, n, s.q, st, gemm);  // [n][H*hd]
    check(kernels::launch_rms_norm(s.q, layer.q_norm, n * H, hd, eps, s.q, st), "q_norm");
    check(kernels::launch_rope_neox(s.q, n, H, hd, lc.n_rot, pos0, theta_scale, freq_factors, st,
                                    dpos),
          "rope q");
    if (lc.kv_source < 0) {
      linear(layer.k, s.a, n, s.kx, st, gemm);  // [n][Hkv*hd]
      if (layer.v.present()) {
        linear(layer.v, s.a, n, s.vx, st, gemm);
      } else {  // K=V layer: V is the raw K projection
        check(cudaMemcpyAsync(s.vx, s.kx, static_cast<size_t>(n * Hkv * hd) * 4,
                              cudaMemcpyDeviceToDevice, st),
              "K=V copy");
      }
      check(kernels::launch_rms_norm(s.kx, layer.k_norm, n * Hkv, hd, eps, s.kx, st), "k_norm");
      check(kernels::launch_rms_norm(s.vx, nullptr, n * Hkv, hd, eps, s.vx, st), "v_norm");
      check(kernels::launch_rope_neox(s.kx, n, Hkv, hd, lc.n_rot, pos0, theta_scale, freq_factors,
                                      st, dpos),
            "rope k");
      uint8_t* k_cache = s.k[static_cast<size_t>(il)];
      uint8_t* v_cache = s.v[static_cast<size_t>(il)];
      const int64_t cells = s.cells[static_cast<size_t>(il)];
      if (s.kv_format == kernels::KvFormat::kQ8_0) {
        check(kernels::launch_kv_store_q8_0(s.kx, s.vx, n, Hkv * hd, pos0, cells, k_cache, v_cache,
                                            st, dpos),
              "kv store");
      } else {
        check(kernels::launch_kv_store(s.kx, s.vx, n, Hkv * hd, pos0, cells,
                                       reinterpret_cast<uint16_t*>(k_cache),
                                       reinterpret_cast<uint16_t*>(v_cache), st, dpos),
              "kv store");
      }
    }
    // many queries: flash attention (K/V tiles shared by a block's queries); a few: the
    // split-KV decode kernel, which spreads one query's keys over many blocks
    if (n >= kernels::kGemmMinBatch && gemm.on && !device_pos) {
      check(kernels::launch_attention_prefill(
                s.q, s.k[static_cast<size_t>(il)], s.v[static_cast<size_t>(il)], n, pos0,
                s.cells[static_cast<size_t>(il)], H, Hkv, hd, lc.sliding ? c.n_swa : 0,
                /*scale=*/1.0f, /*cap=*/0.0f, s.attn, st, s.kv_format),
            "prefill attention");
    } else if (n <= kernels::kGemvMaxBatch) {
      // Decode and verify-sized batches: one launch per token, split as the one-token graph
      // of its context bucket splits it, so a row's bits do not depend on the batch it is in
      // (drafted greedy output equals plain decoding) nor on whether graphs are on.
      for (int64_t t = 0; t < n; ++t) {
        const int64_t bucket = device_pos ? split_keys : decode_bucket(pos0 + t);
        const int64_t max_keys = lc.sliding ? std::min(bucket, c.n_swa) : bucket;
        const int n_split = kernels::attention_split_count(max_keys, 1, H);
        check(kernels::launch_attention_decode(
                  s.q + t * H * hd, s.k[static_cast<size_t>(il)], s.v[static_cast<size_t>(il)], 1,
                  pos0 + t, s.cells[static_cast<size_t>(il)], H, Hkv, hd, lc.sliding ? c.n_swa : 0,
                  /*scale=*/1.0f, /*cap=*/0.0f, n_split, s.partials, s.attn + t * H * hd, st, dpos,
                  s.kv_format),
              "attention");
      }
    } else {
      // split over the keys a query can see at most (split_keys: the graph's bucket)
      const int64_t max_keys = lc.sliding ? std::min(split_keys, c.n_swa) : split_keys;
      const int n_split = kernels::attention_split_count(max_keys, n, H);
      check(kernels::launch_attention_decode(
                s.q, s.k[static_cast<size_t>(il)], s.v[static_cast<size_t>(il)], n, pos0,
                s.cells[static_cast<size_t>(il)], H, Hkv, hd, lc.sliding ? c.n_swa : 0,
                /*scale=*/1.0f, /*cap=*/0.0f, n_split, s.partials, s.attn, st, dpos, s.kv_format),
            "attention");
    }
    linear(layer.o, s.attn, n, s.o, st, gemm);  // [n][D]
    check(kernels::launch_rms_norm_add(s.o, layer.post_attention_norm, n, D, eps, s.h, st),
          "post_attention_norm");

    // --- 5.6 feed-forward (dense; the always-on branch of MoE layers)
    const int64_t n_ff = layer.gate.rows;
    check(kernels::launch_rms_norm(s.h, layer.ffn_norm, n, D, eps, s.a, st), "ffn_norm");
    linear(layer.gate, s.a, n, s.gate, st, gemm);  // [n][n_ff]
    linear(layer.up, s.a, n, s.up, st, gemm);
    check(kernels::launch_gelu_mul(s.gate, s.up, n_ff, n, n_ff, s.gate, st), "geglu");
    linear(layer.down, s.gate, n, s.o, st, gemm);  // [n][D]
    // --- 5.7 mixture of experts: o = post_ffw_norm_1(dense) + post_ffw_norm_2(experts)
    if (layer.moe) enqueue_moe(il, n);
    check(kernels::launch_rms_norm_add(s.o, layer.post_ffw_norm, n, D, eps, s.h, st),
          "post_ffw_norm");

    // --- 5.8 per-layer embedding injection
    if (P > 0) {
      linear(layer.inp_gate, s.h, n, s.gate, st, gemm);  // [n][P]
      check(kernels::launch_gelu_mul(s.gate, s.ple + il * P, L * P, n, P, s.gate, st),
            "per-layer gate");
      linear(layer.proj, s.gate, n, s.o, st, gemm);  // [n][D]
      check(kernels::launch_rms_norm_add(s.o, layer.post_norm, n, D, eps, s.h, st), "post_norm");
    }
    // --- 5.9 layer output scalar
    if (layer.output_scale != 1.0f) {
      check(kernels::launch_scale(s.h, n * D, layer.output_scale, st), "layer_output_scale");
    }
  }

  tap(L);
  if (!tap_layers_.empty()) {
    for (size_t i = 0; i < tap_layers_.size(); ++i) {
      const int64_t at = static_cast<int64_t>(i) * n_batch_ * D;
      check(cudaMemcpyAsync(s.host_tap + at, s.tap + at, static_cast<size_t>(n * D) * 4,
                            cudaMemcpyDeviceToHost, st),
            "tap download");
    }
  }

  // --- 5.10 output: final norm, head, soft-cap (the last logit_rows rows)
  if (logit_rows > 0) {
    const float* last = s.h + (n - logit_rows) * D;
    check(kernels::launch_rms_norm(last, w.output_norm, logit_rows, D, eps, s.a, st),
          "output_norm");
    linear(w.output, s.a, logit_rows, s.logits, st, gemm);  // [rows][V]
    if (c.logit_softcap > 0.0f) {
      check(kernels::launch_softcap(s.logits, logit_rows * V, c.logit_softcap, st), "softcap");
    }
    check(cudaMemcpyAsync(s.host_logits, s.logits, static_cast<size_t>(logit_rows * V) * 4,
                          cudaMemcpyDeviceToHost, st),
          "logits download");
  }
}

}  // namespace boltrt::cuda

// Gemma 4 (general.architecture = "gemma4"): E2B, E4B (Nemotron 3.5 Bolt), 26B-A4B (MoE), 31B.
//
// gemma4.cpp holds, in this order:
//   1. Gemma4Config::from_gguf   metadata -> per-layer hyper-parameters
//   2. Gemma4Model (constructor) tensor binding: views into the mmapped file, shapes checked
//   3. Gemma4Model::forward      the forward pass, straight-line (shared/docs/gemma4.md §5)
// Shapes in comments are in ggml order [ne0, ne1]: a matrix [in, out] maps in -> out.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "model/layer_taps.h"
#include "model/weights.h"
#include "runtime/kv_cache.h"

namespace boltrt {

namespace gguf {
class File;
}
class ThreadPool;

struct Gemma4LayerConfig {
  bool sliding = false;    // sliding-window ("local") layer, else full ("global") attention
  int64_t n_head = 0;      // query heads
  int64_t n_head_kv = 0;   // KV heads
  int64_t head_dim = 0;    // 256 on window layers, 512 on full layers (released models)
  int64_t n_rot = 0;       // rotated dims (NEOX); equal to head_dim in released models
  float rope_base = 0.0f;  // 1e4 window, 1e6 full
  int64_t n_ff = 0;        // dense MLP width (E2B doubles it on shared-KV layers)
  int32_t kv_source = -1;  // >= 0: reuses that layer's KV cache and owns none
};

struct Gemma4Config {
  int64_t n_vocab = 0;
  int64_t n_embd = 0;   // D
  int64_t n_layer = 0;  // L
  int64_t n_ctx_train = 0;
  int64_t n_swa = 0;             // sliding window, positions including the current one
  int64_t n_embd_per_layer = 0;  // P, 0: no per-layer embeddings
  int64_t n_layer_kv = 0;        // layers [0, n_layer_kv) own a KV cache
  int64_t n_expert = 0;          // MoE: experts per layer (0: dense model)
  int64_t n_expert_used = 0;     // MoE: top-k
  int64_t n_ff_exp = 0;          // MoE: expert MLP width
  float rms_eps = 1e-6f;
  float logit_softcap = 0.0f;  // 0: none
  std::vector<Gemma4LayerConfig> layers;

  // Reads and checks the gemma4.* keys; throws boltrt::Error naming the file and key.
  static Gemma4Config from_gguf(const gguf::File& file);
};

// n_expert matrices of rows x cols stored back to back ([cols, rows, n_expert]).
struct ExpertMatrices {
  WeightView first;          // expert 0
  size_t expert_stride = 0;  // bytes between experts
  std::vector<float> scale;  // per-expert output scale (empty: none)
  // All experts as one matrix of n_expert * rows rows, with LanePacks' copy of the whole stack
  // where it makes one (an expert whose first row starts a 16-row group reads its part).
  WeightView stack;
  bool present() const { return first.data != nullptr; }
  WeightView expert(int64_t e) const { return weight_rows(stack, e * first.rows, first.rows); }
};

struct Gemma4Layer {
  // attention
  F32Vector attn_norm;            // [D]
  Matrix attn_q;                  // [D, H*hd]
  F32Vector attn_q_norm;          // [hd]
  Matrix attn_k;                  // [D, Hkv*hd]  (absent on shared-KV layers: unused there)
  F32Vector attn_k_norm;          // [hd]
  Matrix attn_v;                  // [D, Hkv*hd]  absent: V = raw K projection (K=V layers)
  Matrix attn_output;             // [H*hd, D]
  F32Vector post_attention_norm;  // [D]
  // dense MLP (also the always-on branch of MoE layers)
  F32Vector ffn_norm;       // [D]
  Matrix ffn_gate, ffn_up;  // [D, n_ff]
  Matrix ffn_down;          // [n_ff, D]
  F32Vector post_ffw_norm;  // [D]
  // MoE (present iff ffn_gate_inp exists)
  Matrix ffn_gate_inp;                                         // [D, n_expert] router
  F32Vector ffn_gate_inp_scale;                                // [D]
  F32Vector pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2;  // [D]
  ExpertMatrices gate_up_exps;        // [D, 2*n_ff_exp, E] merged (gate rows first), or:
  ExpertMatrices gate_exps, up_exps;  // [D, n_ff_exp, E] each
  ExpertMatrices down_exps;           // [n_ff_exp, D, E], scale = ffn_down_exps.scale
  // per-layer embeddings (P > 0)
  Matrix inp_gate;      // [D, P]
  Matrix proj;          // [P, D]
  F32Vector post_norm;  // [D]
  // layer_output_scale (1 when absent)
  float output_scale = 1.0f;

  bool is_moe() const { return ffn_gate_inp.present(); }
};

// Scratch memory for one forward call of up to max_batch tokens (reused between calls).
struct Gemma4Workspace {
  // Keys attended per pass (longer contexts are attended chunk by chunk with an online softmax,
  // which bounds each query's scores to this many floats).
  int64_t attention_chunk = 2048;
  std::vector<float> h, a, q, k, v, attn, o, gate, up, ple, ple_tok;
  std::vector<float> moe_x, moe_out, moe_rows, moe_gu, moe_act, moe_y, router;
  std::vector<float> rope_cos, rope_sin;
  std::vector<float> last;
  cpu::AttentionAccumulator attention;
};

// One sequence's share of a forward batch: n_tokens consecutive tokens at positions
// pos0 .. pos0+n_tokens-1 of the sequence whose cache is `kv` (holding [0, pos0)).
struct Gemma4Sequence {
  KvCache* kv = nullptr;
  int64_t pos0 = 0;
  int64_t n_tokens = 0;
};

class Gemma4Model {
 public:
  // Opens and maps a GGUF file (no copy of the weights) and binds every tensor.
  static std::unique_ptr<Gemma4Model> load(const std::string& path);
  explicit Gemma4Model(std::unique_ptr<gguf::File> file);
  ~Gemma4Model();

  const Gemma4Config& config() const { return config_; }
  const gguf::File& file() const { return *file_; }
  // Makes the CPU backend's packed weight copies (LanePacks) now rather than in the first
  // forward pass; the CPU sessions' maker calls it.
  void pack_weights() const { lane_packs_.ready(); }
  const Gemma4Layer& layer(int64_t i) const { return layers_.at(static_cast<size_t>(i)); }
  // Cache layout: row sizes, windows and sharing per layer.
  std::vector<KvLayerSpec> kv_layout() const;
  // The global tensors, for backends that copy the weights elsewhere (src/backend/cuda).
  const WeightView& token_embd() const { return token_embd_; }
  const Matrix& output() const { return output_; }
  const F32Vector& output_norm() const { return output_norm_; }
  const F32Vector& rope_freqs() const { return rope_freqs_; }
  const WeightView& per_layer_token_embd() const { return per_layer_token_embd_; }
  const Matrix& per_layer_model_proj() const { return per_layer_model_proj_; }
  const F32Vector& per_layer_proj_norm() const { return per_layer_proj_norm_; }

  // Runs n_tokens tokens at positions pos0 .. pos0+n_tokens-1 (the cache holds [0, pos0)),
  // writing their K/V into `kv`. Writes logits (n_vocab floats per row) of the last token, or
  // of every token when all_logits, into `logits` (null: no logits, e.g. an early prefill
  // chunk). n_tokens <= kv.max_batch(). Does not change kv.n_past().
  // taps (optional): hidden states to capture, see LayerTaps.
  void forward(const int32_t* tokens, int64_t n_tokens, int64_t pos0, KvCache& kv,
               Gemma4Workspace& ws, ThreadPool* pool, float* logits, bool all_logits,
               const LayerTaps* taps = nullptr) const;

  // The same for several sequences in one batch: `tokens` holds each sequence's tokens in
  // order, every projection runs once over all of them, attention per sequence. Logit rows:
  // each sequence's last token (one row per sequence), or every token when all_logits.
  void forward(const int32_t* tokens, std::span<const Gemma4Sequence> sequences,
               Gemma4Workspace& ws, ThreadPool* pool, float* logits, bool all_logits,
               const LayerTaps* taps = nullptr) const;

  // The output head (§5.10) over `rows` final hidden rows h [rows][D] (the residual stream
  // after the last layer, before the final norm: tap id n_layer): final norm, head, soft-cap
  // -> logits [rows][n_vocab]. Uses ws.last as scratch.
  void output_logits(const float* h, int64_t rows, Gemma4Workspace& ws, ThreadPool* pool,
                     float* logits) const;

 private:
  void feed_forward_moe(const Gemma4Layer& layer, int64_t n_tokens, Gemma4Workspace& ws,
                        ThreadPool* pool) const;

  std::unique_ptr<gguf::File> file_;
  Gemma4Config config_;
  std::vector<std::vector<float>> converted_;  // owned f32 copies of non-f32 vectors
  LanePacks lane_packs_;  // packed Q4_0 / Q5_0 / Q8_0 / Q4_K / Q5_K matrices (WeightView::lanes)
  // global tensors
  WeightView token_embd_;            // [D, V]
  Matrix output_;                    // [D, V] (token_embd when absent: tied)
  F32Vector output_norm_;            // [D]
  F32Vector rope_freqs_;             // [hd_full/2] frequency divisors for full layers
  WeightView per_layer_token_embd_;  // [P*L, V]
  Matrix per_layer_model_proj_;      // [D, P*L]
  F32Vector per_layer_proj_norm_;    // [P]
  std::vector<Gemma4Layer> layers_;
};

}  // namespace boltrt

// Qwen3.5 (dense, GGUF architecture "qwen35"), docs/qwen35.md. A hybrid of Gated DeltaNet
// (linear-attention, recurrent state) layers and gated full-attention layers.
//
// This file holds, in reading order:
//   1. Qwen35Config::from_gguf   metadata -> hyper-parameters and the layer schedule, with the
//                                checks llama.cpp imposes (§2.4), so a file llama.cpp refuses is
//                                refused here with one clear error.
//   2. Qwen35Model (load)        tensor binding: views into the mmapped file, shapes checked
//   3. Qwen35Model::forward      the forward pass, straight-line (§4)
// Shapes in comments are in ggml order [ne0, ne1]: a matrix [in, out] maps in -> out; activation
// buffers are written [n][width] (token-major).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/ops.h"
#include "model/layer_taps.h"
#include "model/weights.h"
#include "runtime/kv_cache.h"

namespace boltrt {

namespace gguf {
class File;
}
class ThreadPool;

struct Qwen35Config {
  int64_t n_embd = 0;       // D
  int64_t n_block = 0;      // block_count: trunk layers + MTP blocks
  int64_t n_nextn = 0;      // MTP ("nextn") blocks stored after the trunk, present but unused
  int64_t n_layer = 0;      // L = n_block − n_nextn, the layers the forward pass runs
  int64_t n_ctx_train = 0;  // context_length
  float rms_eps = 0.0f;     // every RMSNorm and the q/k L2Norm

  // per block (size n_block): FFN width, attention heads, KV heads
  std::vector<int64_t> n_ff, n_head, n_head_kv;
  // is_gdn[i]: block i is a Gated DeltaNet layer; otherwise gated full attention (MTP blocks
  // always attention)
  std::vector<bool> is_gdn;

  // full attention
  int64_t head_dim = 0;                    // hd = key_length = value_length
  int64_t n_rot = 0;                       // rotated dims per head (IMROPE), even, ≤ hd
  std::array<int64_t, 4> rope_sections{};  // M-RoPE sections [s0, s1, s2, s3] in rotation pairs
  float rope_base = 10000.0f;

  // Gated DeltaNet
  int64_t conv_kernel = 0;   // Kc
  int64_t ssm_d_state = 0;   // dk = dv (state_size)
  int64_t ssm_n_v_head = 0;  // Hv (time_step_rank)
  int64_t ssm_n_k_head = 0;  // Hk (group_count), divides Hv
  int64_t ssm_d_inner = 0;   // Hv·dv (inner_size)
  // conv channels C = [q | k | v] = 2·Hk·dk + Hv·dv
  int64_t conv_channels() const { return 2 * ssm_n_k_head * ssm_d_state + ssm_d_inner; }

  int64_t n_gdn_layers() const;   // GDN layers among the trunk's n_layer
  int64_t n_attn_layers() const;  // full-attention layers among the trunk's n_layer

  // Per-sequence memory (§5.1), for the memory figures. Recurrent state is always F32: per GDN
  // layer a conv window of Kc−1 raw inputs [C] and Hv delta states dk × dv; it does not grow
  // with the context. The KV cache of the trunk's attention layers grows by kv_bytes_per_token.
  int64_t conv_state_bytes_per_layer() const;
  int64_t delta_state_bytes_per_layer() const;
  int64_t recurrent_state_bytes() const;  // all trunk GDN layers, one sequence
  int64_t kv_bytes_per_token(int64_t bytes_per_element) const;

  static Qwen35Config from_gguf(const gguf::File& file);
};

struct Qwen35Layer {
  F32Vector attn_norm;            // [D] before the token mixer
  F32Vector post_attention_norm;  // [D] before the FFN (despite its name)
  Matrix ffn_gate, ffn_up;        // [D, n_ff]
  Matrix ffn_down;                // [n_ff, D]
  // gated full attention (§4.2)
  Matrix attn_q;                       // [D, 2·H·hd]: per head h, [q_h | gate_h]
  Matrix attn_k, attn_v;               // [D, Hkv·hd]
  Matrix attn_output;                  // [H·hd, D]
  F32Vector attn_q_norm, attn_k_norm;  // [hd], shared by all heads
  // Gated DeltaNet (§4.4)
  Matrix attn_qkv;        // [D, C] conv input m, channels [q | k | v]
  Matrix attn_gate;       // [D, Hv·dv] z
  Matrix ssm_beta;        // [D, Hv]
  Matrix ssm_alpha;       // [D, Hv]
  F32Vector ssm_conv1d;   // [Kc, C]: channel c's Kc taps contiguous, tap Kc−1 = current token
  F32Vector ssm_dt_bias;  // [Hv]
  F32Vector ssm_a;        // [Hv], −exp(A_log): already negative
  F32Vector ssm_norm;     // [dv] gated RMSNorm weight (stored raw, no +1)
  Matrix ssm_out;         // [Hv·dv, D]
};

// The recurrent part of one sequence (§5.1), F32, for every trunk GDN layer in order: the conv
// window (the last Kc−1 raw inputs per channel, llama.cpp's [Kc−1, C] layout: state[c·(Kc−1) + j],
// oldest first) and Hv delta states of dk × dv (row = key dim). A fresh sequence is all zeros.
struct Qwen35State {
  std::vector<float> conv;   // n_gdn × C × (Kc−1)
  std::vector<float> delta;  // n_gdn × Hv × dk × dv
  void clear();
  size_t bytes() const { return (conv.size() + delta.size()) * sizeof(float); }
};

// Scratch memory of one forward call (reused between calls).
struct Qwen35Workspace {
  int64_t attention_chunk = 2048;  // keys per attention pass (bounds each query's scores)
  std::vector<float> h, a, o, big, gate, z, ab, gamma, beta, q, k, v, attn;
  std::vector<float> rope_cos, rope_sin, last;
  cpu::AttentionAccumulator attention;
};

// One sequence's share of a forward batch: n_tokens consecutive tokens at positions
// pos0 .. pos0+n_tokens−1 of the sequence whose KV cache is `kv` (holding [0, pos0)) and whose
// recurrent state is `state` (that after token pos0−1).
struct Qwen35Sequence {
  KvCache* kv = nullptr;
  Qwen35State* state = nullptr;
  int64_t pos0 = 0;
  int64_t n_tokens = 0;
};

class Qwen35Model {
 public:
  // Opens and maps a GGUF file (no copy of the weights) and binds every trunk tensor. A file
  // that is not a usable qwen35 model is one boltrt::Error naming the file and the problem.
  static std::unique_ptr<Qwen35Model> load(const std::string& path);
  explicit Qwen35Model(std::unique_ptr<gguf::File> file);
  ~Qwen35Model();

  const Qwen35Config& config() const { return config_; }
  const gguf::File& file() const { return *file_; }
  // Makes the CPU backend's packed weight copies (LanePacks) now rather than in the first
  // forward pass; the CPU sessions' maker calls it.
  void pack_weights() const { lane_packs_.ready(); }
  int64_t n_vocab() const { return n_vocab_; }
  // The weights, for backends that copy them elsewhere (src/backend/cuda).
  const WeightView& token_embd() const { return token_embd_; }
  const Matrix& output() const { return output_; }
  const F32Vector& output_norm() const { return output_norm_; }
  const Qwen35Layer& layer(int64_t il) const { return layers_[static_cast<size_t>(il)]; }
  // One KV layer per trunk full-attention layer, in layer order (GDN layers have none).
  std::vector<KvLayerSpec> kv_layout() const;
  // A zeroed recurrent state of the right size.
  Qwen35State new_state() const;

  // Runs n tokens at positions pos0 .. pos0+n−1 of one sequence whose KV cache holds [0, pos0)
  // and whose recurrent state is that after token pos0−1; writes their K/V and advances `state`
  // past them. Logits (n_vocab per row) of the last token, or of every token when all_logits,
  // into `logits` (null: none). n ≤ kv.max_batch(). Does not change kv.n_past().
  // The GDN recurrence runs token by token and every other step is per token or batch-invariant,
  // so a token's bits do not depend on how a prompt is split into calls or on the thread count.
  // taps (optional): hidden states to capture (LayerTaps: id k = the input of layer k).
  void forward(const int32_t* tokens, int64_t n, int64_t pos0, KvCache& kv, Qwen35State& state,
               Qwen35Workspace& ws, ThreadPool* pool, float* logits, bool all_logits,
               const LayerTaps* taps = nullptr) const;
  // The same for several sequences in one batch: `tokens` holds each sequence's tokens in
  // order; every projection, norm and the FFN run once over all of them (the weights are read
  // once), attention and the GDN conv + delta rule per sequence on its own KV cache and state.
  // Logit rows: each sequence's last token (one row per sequence), or every token when
  // all_logits. Every step is per row or batch-invariant, so each sequence gets the bits it
  // gets alone.
  void forward(const int32_t* tokens, std::span<const Qwen35Sequence> sequences,
               Qwen35Workspace& ws, ThreadPool* pool, float* logits, bool all_logits,
               const LayerTaps* taps = nullptr) const;

 private:
  void attention_layer(int64_t il, int64_t kv_layer, std::span<const Qwen35Sequence> sequences,
                       int64_t n, Qwen35Workspace& ws, ThreadPool* pool) const;
  void delta_net_layer(int64_t il, int64_t gdn, std::span<const Qwen35Sequence> sequences,
                       int64_t n, Qwen35Workspace& ws, ThreadPool* pool) const;

  std::unique_ptr<gguf::File> file_;
  Qwen35Config config_;
  int64_t n_vocab_ = 0;
  std::vector<std::vector<float>> converted_;  // owned f32 copies of non-f32 vectors
  LanePacks lane_packs_;
  WeightView token_embd_;            // [D, V]
  Matrix output_;                    // [D, V] (token_embd when absent: tied)
  F32Vector output_norm_;            // [D]
  std::vector<Qwen35Layer> layers_;  // trunk layers only (MTP blocks are not run)
  std::vector<int64_t> layer_slot_;  // per trunk layer: its KV layer or its GDN state index
};

}  // namespace boltrt

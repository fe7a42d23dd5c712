// Gemma 4: configuration, weight binding and forward pass. See gemma4.h for the layout of this
// file and shared/docs/gemma4.md for the math (section numbers below refer to it).
#include "model/gemma4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string_view>

#include "backend/cpu/ops.h"
#include "gguf/gguf.h"
#include "model/gguf_metadata.h"
#include "quant/dequantize.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt {

// =============================================================================================
// 1. Configuration from metadata (§2, §4)
// =============================================================================================
Gemma4Config Gemma4Config::from_gguf(const gguf::File& file) {
  const std::string& path = file.path();
  if (file.architecture() != "gemma4") {
    fail("{}: general.architecture is '{}', expected 'gemma4'", path, file.architecture());
  }
  const ArchMetadata meta(file, "gemma4");
  Gemma4Config c;
  c.n_embd = meta.required_int("embedding_length");
  c.n_layer = meta.required_int("block_count");
  c.n_ctx_train = meta.required_int("context_length");
  if (c.n_embd <= 0 || c.n_layer <= 0 || c.n_layer > 4096) {
    fail("{}: embedding_length {} / block_count {} out of range", path, c.n_embd, c.n_layer);
  }
  const size_t L = static_cast<size_t>(c.n_layer);
  c.rms_eps = meta.required_float("attention.layer_norm_rms_epsilon");
  c.n_swa = meta.required_int("attention.sliding_window");
  c.n_embd_per_layer = meta.required_int("embedding_length_per_layer_input");
  c.logit_softcap = meta.optional_float("final_logit_softcapping", 0.0f);
  c.n_expert = meta.optional_int("expert_count", 0);
  c.n_expert_used = meta.optional_int("expert_used_count", 0);
  const int64_t n_shared = meta.optional_int("attention.shared_kv_layers", 0);
  c.n_layer_kv = c.n_layer - n_shared;
  if (n_shared < 0 || c.n_layer_kv < 1 || (n_shared > 0 && c.n_layer_kv < 2)) {
    fail("{}: attention.shared_kv_layers = {} leaves {} layers with their own KV (need >= 2)", path,
         n_shared, c.n_layer_kv);
  }
  if (c.n_swa <= 0) fail("{}: attention.sliding_window = {} must be > 0", path, c.n_swa);
  if (c.n_embd_per_layer < 0) fail("{}: embedding_length_per_layer_input < 0", path);

  const auto n_ff = meta.ints("feed_forward_length", c.n_layer, true, 0);
  const auto n_head = meta.ints("attention.head_count", c.n_layer, true, 0);
  std::vector<int64_t> n_head_kv = n_head;
  if (meta.has("attention.head_count_kv")) {
    n_head_kv = meta.ints("attention.head_count_kv", c.n_layer, true, 0);
  }
  const auto n_ff_exp = meta.ints("expert_feed_forward_length", c.n_layer, false, 0);
  c.n_ff_exp = n_ff_exp[0];

  // head sizes and rotation widths: key_length defaults to D / H, the SWA ones to the full ones
  if (n_head[0] <= 0) fail("{}: attention.head_count must be > 0", path);
  const int64_t head_dim_full = meta.optional_int("attention.key_length", c.n_embd / n_head[0]);
  if (meta.optional_int("attention.value_length", head_dim_full) != head_dim_full) {
    fail("{}: attention.value_length must equal attention.key_length ({})", path, head_dim_full);
  }
  const int64_t head_dim_swa = meta.required_int("attention.key_length_swa");
  if (meta.required_int("attention.value_length_swa") != head_dim_swa) {
    fail("{}: attention.value_length_swa must equal attention.key_length_swa ({})", path,
         head_dim_swa);
  }
  const int64_t n_rot_full = meta.optional_int("rope.dimension_count", head_dim_full);
  const int64_t n_rot_swa = meta.optional_int("rope.dimension_count_swa", n_rot_full);
  const float base_full = meta.optional_float("rope.freq_base", 10000.0f);
  const float base_swa = meta.optional_float("rope.freq_base_swa", 10000.0f);

  const std::string pattern_key = meta.key("attention.sliding_window_pattern");
  const gguf::Value* pattern = file.find(pattern_key);
  if (!pattern) fail("{}: missing key '{}'", path, pattern_key);
  const gguf::Array* pattern_array = pattern->as_array();
  if (!pattern_array || pattern_array->items.size() != L) {
    fail("{}: key '{}' must be an array of {} booleans", path, pattern_key, L);
  }

  c.layers.resize(L);
  for (size_t il = 0; il < L; ++il) {
    Gemma4LayerConfig& l = c.layers[il];
    auto sliding = pattern_array->items[il].as_int();
    if (!sliding) fail("{}: key '{}' holds a non-boolean value", path, pattern_key);
    l.sliding = *sliding != 0;
    l.n_head = n_head[il];
    l.n_head_kv = n_head_kv[il];
    l.head_dim = l.sliding ? head_dim_swa : head_dim_full;
    l.n_rot = l.sliding ? n_rot_swa : n_rot_full;
    l.rope_base = l.sliding ? base_swa : base_full;
    l.n_ff = n_ff[il];
    if (l.n_head <= 0 || l.n_head_kv <= 0 || l.n_head % l.n_head_kv != 0) {
      fail("{}: layer {}: {} query heads cannot be grouped over {} KV heads", path, il, l.n_head,
           l.n_head_kv);
    }
    if (l.head_dim <= 0 || l.n_rot <= 0 || l.n_rot > l.head_dim || l.n_rot % 2 != 0) {
      fail("{}: layer {}: head size {} / rotated dims {} invalid", path, il, l.head_dim, l.n_rot);
    }
    if (l.n_ff <= 0) fail("{}: layer {}: feed_forward_length {} must be > 0", path, il, l.n_ff);
    if (static_cast<int64_t>(il) >= c.n_layer_kv) {
      // llama.cpp's reuse rule: window layers read the last-but-one owning layer, full layers
      // the last one (§5.5).
      l.kv_source = static_cast<int32_t>(c.n_layer_kv - (l.sliding ? 2 : 1));
    }
  }
  for (size_t il = 0; il < L; ++il) {
    const Gemma4LayerConfig& l = c.layers[il];
    if (l.kv_source < 0) continue;
    const Gemma4LayerConfig& s = c.layers[static_cast<size_t>(l.kv_source)];
    if (s.head_dim != l.head_dim || s.n_head_kv != l.n_head_kv || (s.sliding && !l.sliding)) {
      fail("{}: layer {} shares the KV cache of layer {}, whose attention layout differs", path, il,
           l.kv_source);
    }
  }

  // vocabulary: the embedding's row count, checked against the tokenizer when there is one
  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (!embd) fail("{}: missing tensor 'token_embd.weight'", path);
  c.n_vocab = embd->ne[1];
  if (const gguf::Array* tokens = file.get_array("tokenizer.ggml.tokens")) {
    if (static_cast<int64_t>(tokens->items.size()) != c.n_vocab) {
      fail("{}: tokenizer has {} tokens but token_embd.weight has {} rows", path,
           tokens->items.size(), c.n_vocab);
    }
  }
  return c;
}

// =============================================================================================
// 2. Weight binding: every tensor is a view into the mapped file, checked against its shape.
// =============================================================================================
namespace {

// [cols, rows, n_expert] stack of matrices plus the optional per-expert "<base>.scale".
ExpertMatrices experts(const TensorBinder& bind, const std::string& base, int64_t cols,
                       int64_t rows, int64_t n_expert, bool required) {
  ExpertMatrices e;
  if (const gguf::TensorInfo* t = bind.get(base + ".weight", {cols, rows, n_expert}, required)) {
    e.first = bind.view(*t);
    e.expert_stride = e.first.row_stride * static_cast<size_t>(rows);
    e.stack = e.first;
    e.stack.rows = rows * n_expert;
    bind.pack(e.stack);
    if (const gguf::TensorInfo* s = bind.get(base + ".scale", {n_expert}, false)) {
      const float* f = bind.to_f32(*s);
      e.scale.assign(f, f + n_expert);
    }
  }
  return e;
}

}  // namespace

std::unique_ptr<Gemma4Model> Gemma4Model::load(const std::string& path) {
  return std::make_unique<Gemma4Model>(gguf::File::open(path));
}

Gemma4Model::~Gemma4Model() = default;

Gemma4Model::Gemma4Model(std::unique_ptr<gguf::File> file) : file_(std::move(file)) {
  config_ = Gemma4Config::from_gguf(*file_);
  const Gemma4Config& c = config_;
  const TensorBinder bind(*file_, converted_, lane_packs_);
  const int64_t D = c.n_embd, V = c.n_vocab, L = c.n_layer, P = c.n_embd_per_layer;

  token_embd_ = bind.view(*bind.get("token_embd.weight", {D, V}, true));
  output_ = bind.matrix("output", D, V, false);
  if (!output_.present()) {  // tied head
    output_.w = token_embd_;
    lane_packs_.pack(output_.w);
  }
  output_norm_ = bind.vector("output_norm.weight", D, true);
  if (P > 0) {
    per_layer_token_embd_ = bind.view(*bind.get("per_layer_token_embd.weight", {P * L, V}, true));
    per_layer_model_proj_ = bind.matrix("per_layer_model_proj", D, P * L, true);
    per_layer_proj_norm_ = bind.vector("per_layer_proj_norm.weight", P, true);
  }

  layers_.resize(static_cast<size_t>(L));
  for (int64_t il = 0; il < L; ++il) {
    const Gemma4LayerConfig& lc = c.layers[static_cast<size_t>(il)];
    Gemma4Layer& l = layers_[static_cast<size_t>(il)];
    const std::string p = "blk." + std::to_string(il) + ".";
    const int64_t hd = lc.head_dim, q_dim = lc.n_head * hd, kv_dim = lc.n_head_kv * hd;
    const bool owns_kv = lc.kv_source < 0;

    if (!lc.sliding && !rope_freqs_.data) {
      rope_freqs_ = bind.vector("rope_freqs.weight", hd / 2, true);
    }
    l.attn_norm = bind.vector(p + "attn_norm.weight", D, true);
    l.attn_q = bind.matrix(p + "attn_q", D, q_dim, true);
    l.attn_q_norm = bind.vector(p + "attn_q_norm.weight", hd, true);
    if (owns_kv) {  // shared layers may carry K/V weights; they are never used
      l.attn_k = bind.matrix(p + "attn_k", D, kv_dim, true);
      l.attn_k_norm = bind.vector(p + "attn_k_norm.weight", hd, true);
      l.attn_v = bind.matrix(p + "attn_v", D, kv_dim, false);
    }
    l.attn_output = bind.matrix(p + "attn_output", q_dim, D, true);
    l.post_attention_norm = bind.vector(p + "post_attention_norm.weight", D, true);

    l.ffn_norm = bind.vector(p + "ffn_norm.weight", D, true);
    l.ffn_gate = bind.matrix(p + "ffn_gate", D, lc.n_ff, true);
    l.ffn_up = bind.matrix(p + "ffn_up", D, lc.n_ff, true);
    l.ffn_down = bind.matrix(p + "ffn_down", lc.n_ff, D, true);
    l.post_ffw_norm = bind.vector(p + "post_ffw_norm.weight", D, true);
    if (const gguf::TensorInfo* s = bind.get(p + "layer_output_scale.weight", {1}, false)) {
      l.output_scale = bind.to_f32(*s)[0];
    }

    if (bind.find(p + "ffn_gate_inp.weight")) {
      const int64_t E = c.n_expert, F = c.n_ff_exp;
      if (E <= 0 || c.n_expert_used <= 0 || c.n_expert_used > E || F <= 0) {
        fail(
            "{}: layer {} has experts but expert_count {} / expert_used_count {} / "
            "expert_feed_forward_length {} are not usable",
            file_->path(), il, E, c.n_expert_used, F);
      }
      // (its ".scale" is the router's per-channel input scale, not a scale2)
      l.ffn_gate_inp = bind.matrix(p + "ffn_gate_inp", D, E, true, /*with_scale2=*/false);
      l.ffn_gate_inp_scale = bind.vector(p + "ffn_gate_inp.scale", D, true);
      l.pre_ffw_norm_2 = bind.vector(p + "pre_ffw_norm_2.weight", D, true);
      l.post_ffw_norm_1 = bind.vector(p + "post_ffw_norm_1.weight", D, true);
      l.post_ffw_norm_2 = bind.vector(p + "post_ffw_norm_2.weight", D, true);
      l.gate_up_exps = experts(bind, p + "ffn_gate_up_exps", D, 2 * F, E, false);
      if (!l.gate_up_exps.present()) {
        l.gate_exps = experts(bind, p + "ffn_gate_exps", D, F, E, true);
        l.up_exps = experts(bind, p + "ffn_up_exps", D, F, E, true);
      }
      l.down_exps = experts(bind, p + "ffn_down_exps", F, D, E, true);
    }

    if (P > 0) {
      l.inp_gate = bind.matrix(p + "inp_gate", D, P, true);
      l.proj = bind.matrix(p + "proj", P, D, true);
      l.post_norm = bind.vector(p + "post_norm.weight", D, true);
    }
  }
}

std::vector<KvLayerSpec> Gemma4Model::kv_layout() const {
  std::vector<KvLayerSpec> specs;
  for (const Gemma4LayerConfig& l : config_.layers) {
    KvLayerSpec s;
    s.source = l.kv_source;
    if (l.kv_source < 0) s.row_size = l.n_head_kv * l.head_dim;
    if (l.sliding) s.window = config_.n_swa;
    specs.push_back(s);
  }
  return specs;
}

// =============================================================================================
// 3. Forward pass (§5)
// =============================================================================================
namespace {

void add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

// One row of an embedding table as f32.
void embedding_row(const WeightView& table, int32_t token, float* out) {
  dequantize_row(
      table.type,
      static_cast<const uint8_t*>(table.data) + static_cast<size_t>(token) * table.row_stride, out,
      table.cols);
}

}  // namespace

void Gemma4Model::forward(const int32_t* tokens, int64_t n, int64_t pos0, KvCache& kv,
                          Gemma4Workspace& ws, ThreadPool* pool, float* logits, bool all_logits,
                          const LayerTaps* taps) const {
  const Gemma4Sequence one{&kv, pos0, n};
  forward(tokens, std::span<const Gemma4Sequence>(&one, 1), ws, pool, logits, all_logits, taps);
}

void Gemma4Model::forward(const int32_t* tokens, std::span<const Gemma4Sequence> sequences,
                          Gemma4Workspace& ws, ThreadPool* pool, float* logits, bool all_logits,
                          const LayerTaps* taps) const {
  const Gemma4Config& c = config_;
  const int64_t D = c.n_embd, L = c.n_layer, P = c.n_embd_per_layer;
  const float eps = c.rms_eps;
  // token t of the batch sits at position pos[t] of its sequence
  std::vector<int64_t> pos;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Gemma4Sequence& s = sequences[i];
    for (size_t j = 0; j < i; ++j) {
      if (sequences[j].kv == s.kv) fail("forward: one KV cache appears twice in a batch");
    }
    if (s.n_tokens <= 0) fail("forward: a sequence with {} tokens", s.n_tokens);
    if (s.n_tokens > s.kv->max_batch()) {
      fail("forward: {} tokens exceed the batch size {}", s.n_tokens, s.kv->max_batch());
    }
    if (s.pos0 + s.n_tokens > s.kv->n_ctx()) {
      fail("forward: positions up to {} exceed the context of {}", s.pos0 + s.n_tokens,
           s.kv->n_ctx());
    }
    for (int64_t k = 0; k < s.n_tokens; ++k) pos.push_back(s.pos0 + k);
  }
  const int64_t n = static_cast<int64_t>(pos.size());
  if (n == 0) return;
  if (taps != nullptr) taps->check(L);
  // Copies the residual stream h [n][D] into every tap slot that asks for the input of layer k.
  auto capture = [&](int64_t k, const float* hs) {
    if (taps != nullptr) taps->capture(k, hs, n, D);
  };
  for (int64_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= c.n_vocab) {
      fail("token id {} outside the vocabulary [0, {})", tokens[t], c.n_vocab);
    }
  }

  // --- 5.1 embeddings: h = token_embd[tok] * sqrt(D)                              h [n][D]
  float* h = sized(ws.h, n * D);
  const float embd_scale = std::sqrt(static_cast<float>(D));
  for (int64_t t = 0; t < n; ++t) {
    embedding_row(token_embd_, tokens[t], h + t * D);
    for (int64_t i = 0; i < D; ++i) h[t * D + i] *= embd_scale;
  }

  // --- 5.2 per-layer embeddings: ple[t][l*P + p]                                 ple [n][L*P]
  float* ple = nullptr;
  if (P > 0) {
    ple = sized(ws.ple, n * L * P);
    float* tok = sized(ws.ple_tok, n * L * P);
    linear(per_layer_model_proj_, h, n, ple, pool);  // [D, L*P]
    const float proj_scale = 1.0f / std::sqrt(static_cast<float>(D));
    const float tok_scale = std::sqrt(static_cast<float>(P));
    const float mix_scale = 1.0f / std::sqrt(2.0f);
    for (int64_t t = 0; t < n; ++t)
      embedding_row(per_layer_token_embd_, tokens[t], tok + t * L * P);
    for (int64_t i = 0; i < n * L * P; ++i) ple[i] *= proj_scale;
    for (int64_t s = 0; s < n * L; ++s) {  // each layer's slice normed on its own
      cpu::rms_norm(ple + s * P, per_layer_proj_norm_.data, P, eps, ple + s * P);
    }
    for (int64_t i = 0; i < n * L * P; ++i) ple[i] = (ple[i] + tok[i] * tok_scale) * mix_scale;
  }

  // RoPE angles per token for the two layer kinds (window: plain; full: with rope_freqs).
  int64_t max_half = 0;
  for (const Gemma4LayerConfig& lc : c.layers) max_half = std::max(max_half, lc.n_rot / 2);
  float* rope_cos = sized(ws.rope_cos, 2 * n * max_half);
  float* rope_sin = sized(ws.rope_sin, 2 * n * max_half);
  for (int64_t kind = 0; kind < 2; ++kind) {
    const bool sliding = kind == 0;
    auto it = std::find_if(c.layers.begin(), c.layers.end(),
                           [&](const Gemma4LayerConfig& lc) { return lc.sliding == sliding; });
    if (it == c.layers.end()) continue;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t at = (kind * n + t) * max_half;
      cpu::rope_angles(pos[static_cast<size_t>(t)], it->n_rot, it->rope_base,
                       sliding ? nullptr : rope_freqs_.data, rope_cos + at, rope_sin + at);
    }
  }

  float* a = sized(ws.a, n * D);
  float* o = sized(ws.o, n * D);
  for (int64_t il = 0; il < L; ++il) {
    const Gemma4LayerConfig& lc = c.layers[static_cast<size_t>(il)];
    const Gemma4Layer& layer = layers_[static_cast<size_t>(il)];
    const int64_t hd = lc.head_dim, H = lc.n_head, Hkv = lc.n_head_kv;
    const int64_t kind = lc.sliding ? 0 : 1;
    capture(il, h);

    // --- 5.3 attention
    for (int64_t t = 0; t < n; ++t)
      cpu::rms_norm(h + t * D, layer.attn_norm.data, D, eps, a + t * D);
    float* q = sized(ws.q, n * H * hd);
    linear(layer.attn_q, a, n, q, pool);  // [n][H*hd]
    cpu::rms_norm_rows(q, n * H, hd, layer.attn_q_norm.data, eps);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t at = (kind * n + t) * max_half;
      cpu::rope_neox(q + t * H * hd, H, hd, lc.n_rot, rope_cos + at, rope_sin + at);
    }
    if (lc.kv_source < 0) {
      float* k = sized(ws.k, n * Hkv * hd);
      float* v = sized(ws.v, n * Hkv * hd);
      linear(layer.attn_k, a, n, k, pool);  // [n][Hkv*hd]
      if (layer.attn_v.present()) {
        linear(layer.attn_v, a, n, v, pool);
      } else {
        std::memcpy(v, k, static_cast<size_t>(n * Hkv * hd) * sizeof(float));  // K=V layer
      }
      cpu::rms_norm_rows(k, n * Hkv, hd, layer.attn_k_norm.data, eps);
      cpu::rms_norm_rows(v, n * Hkv, hd, nullptr, eps);  // weightless V norm
      for (int64_t t = 0; t < n; ++t) {
        const int64_t at = (kind * n + t) * max_half;
        cpu::rope_neox(k + t * Hkv * hd, Hkv, hd, lc.n_rot, rope_cos + at, rope_sin + at);
      }
    }
    // per sequence: store the new K/V, then attend over the keys visible to its tokens
    float* attn = sized(ws.attn, n * H * hd);
    int64_t first = 0;  // the sequence's first row in the batch
    for (const Gemma4Sequence& s : sequences) {
      KvCache& kv = *s.kv;
      if (lc.kv_source < 0) {
        for (int64_t t = first; t < first + s.n_tokens; ++t) {
          kv.write(static_cast<int32_t>(il), pos[static_cast<size_t>(t)],
                   ws.k.data() + t * Hkv * hd, ws.v.data() + t * Hkv * hd);
        }
      }
      // keys from the window of the first token (5.4) to the last token, read in place in the
      // cache's format, in chunks at fixed positions (kv_begin + i * chunk) that bound each
      // query's scores
      const int64_t kv_begin = lc.sliding ? std::max<int64_t>(0, s.pos0 - c.n_swa + 1) : 0;
      const int64_t kv_end = s.pos0 + s.n_tokens;
      const int64_t chunk =
          std::min<int64_t>(kv_end - kv_begin, std::max<int64_t>(1, ws.attention_chunk));
      ws.attention.begin(s.n_tokens, H, hd);
      for (int64_t b = kv_begin; b < kv_end; b += chunk) {
        const int64_t e = std::min(kv_end, b + chunk);
        const KvCache::View rows = kv.view(static_cast<int32_t>(il), b, e);
        ws.attention.add(q + first * H * hd, s.pos0, rows.k, rows.v, e - b, b, Hkv,
                         lc.sliding ? c.n_swa : 0, /*scale=*/1.0f, pool);
      }
      ws.attention.finish(attn + first * H * hd);
      first += s.n_tokens;
    }
    linear(layer.attn_output, attn, n, o, pool);  // [n][D]
    for (int64_t t = 0; t < n; ++t) {
      cpu::rms_norm(o + t * D, layer.post_attention_norm.data, D, eps, o + t * D);
    }
    add(h, o, n * D);

    // --- 5.6 / 5.7 feed-forward: f in o
    if (layer.is_moe()) {
      feed_forward_moe(layer, n, ws, pool);
    } else {
      for (int64_t t = 0; t < n; ++t)
        cpu::rms_norm(h + t * D, layer.ffn_norm.data, D, eps, a + t * D);
      float* gate = sized(ws.gate, n * lc.n_ff);
      float* up = sized(ws.up, n * lc.n_ff);
      linear(layer.ffn_gate, a, n, gate, pool);  // [n][n_ff]
      linear(layer.ffn_up, a, n, up, pool);
      cpu::geglu(gate, up, gate, n * lc.n_ff);
      linear(layer.ffn_down, gate, n, o, pool);  // [n][D]
    }
    for (int64_t t = 0; t < n; ++t)
      cpu::rms_norm(o + t * D, layer.post_ffw_norm.data, D, eps, o + t * D);
    add(h, o, n * D);

    // --- 5.8 per-layer embedding injection
    if (P > 0) {
      float* g = sized(ws.gate, n * P);
      linear(layer.inp_gate, h, n, g, pool);  // [n][P]
      cpu::gelu_inplace(g, n * P);
      for (int64_t t = 0; t < n; ++t) {
        const float* slice = ple + (t * L + il) * P;
        for (int64_t i = 0; i < P; ++i) g[t * P + i] *= slice[i];
      }
      linear(layer.proj, g, n, o, pool);  // [n][D]
      for (int64_t t = 0; t < n; ++t)
        cpu::rms_norm(o + t * D, layer.post_norm.data, D, eps, o + t * D);
      add(h, o, n * D);
    }

    // --- 5.9 layer output scalar
    if (layer.output_scale != 1.0f) {
      for (int64_t i = 0; i < n * D; ++i) h[i] *= layer.output_scale;
    }
  }

  capture(L, h);

  // --- 5.10 output: final norm, head, soft-cap (only for the rows asked for)
  if (!logits) return;
  if (all_logits) {
    output_logits(h, n, ws, pool, logits);
    return;
  }
  // each sequence's last row, gathered into o (free here)                        [rows][D]
  int64_t rows = 0, end = 0;
  for (const Gemma4Sequence& s : sequences) {
    end += s.n_tokens;
    std::memcpy(o + rows * D, h + (end - 1) * D, static_cast<size_t>(D) * sizeof(float));
    ++rows;
  }
  output_logits(o, rows, ws, pool, logits);
}

void Gemma4Model::output_logits(const float* h, int64_t rows, Gemma4Workspace& ws, ThreadPool* pool,
                                float* logits) const {
  const Gemma4Config& c = config_;
  const int64_t D = c.n_embd;
  float* hn = sized(ws.last, rows * D);
  for (int64_t r = 0; r < rows; ++r) {
    cpu::rms_norm(h + r * D, output_norm_.data, D, c.rms_eps, hn + r * D);
  }
  linear(output_, hn, rows, logits, pool);  // [rows][V]
  if (c.logit_softcap > 0.0f) cpu::softcap(logits, rows * c.n_vocab, c.logit_softcap);
}

// §5.7: dense branch + routed experts, both from the post-attention residual ws.h; result in ws.o.
void Gemma4Model::feed_forward_moe(const Gemma4Layer& layer, int64_t n, Gemma4Workspace& ws,
                                   ThreadPool* pool) const {
  const Gemma4Config& c = config_;
  const int64_t D = c.n_embd, E = c.n_expert, K = c.n_expert_used, F = c.n_ff_exp;
  const int64_t n_ff = layer.ffn_gate.w.rows;
  const float eps = c.rms_eps;
  const float* h = ws.h.data();
  float* a = ws.a.data();
  float* f1 = ws.o.data();

  // dense branch -> f1
  for (int64_t t = 0; t < n; ++t) cpu::rms_norm(h + t * D, layer.ffn_norm.data, D, eps, a + t * D);
  float* gate = sized(ws.gate, n * n_ff);
  float* up = sized(ws.up, n * n_ff);
  linear(layer.ffn_gate, a, n, gate, pool);
  linear(layer.ffn_up, a, n, up, pool);
  cpu::geglu(gate, up, gate, n * n_ff);
  linear(layer.ffn_down, gate, n, f1, pool);
  for (int64_t t = 0; t < n; ++t)
    cpu::rms_norm(f1 + t * D, layer.post_ffw_norm_1.data, D, eps, f1 + t * D);

  // router: logits = ffn_gate_inp * (rms_norm0(h) / sqrt(D) * scale)            [n][E]
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(D));
  for (int64_t t = 0; t < n; ++t) {
    cpu::rms_norm(h + t * D, nullptr, D, eps, a + t * D);
    for (int64_t i = 0; i < D; ++i)
      a[t * D + i] = a[t * D + i] * inv_sqrt_d * layer.ffn_gate_inp_scale.data[i];
  }
  float* router = sized(ws.router, n * E);
  linear(layer.ffn_gate_inp, a, n, router, pool);
  std::vector<int32_t> selected(static_cast<size_t>(n * K));
  std::vector<float> weights(static_cast<size_t>(n * K));
  for (int64_t t = 0; t < n; ++t) {
    cpu::route_top_k(router + t * E, E, K, selected.data() + t * K, weights.data() + t * K);
  }

  // experts, one batched matmul per expert over the tokens that chose it -> f2
  float* x2 = sized(ws.moe_x, n * D);
  for (int64_t t = 0; t < n; ++t)
    cpu::rms_norm(h + t * D, layer.pre_ffw_norm_2.data, D, eps, x2 + t * D);
  float* f2 = sized(ws.moe_out, n * D);
  std::fill(f2, f2 + n * D, 0.0f);
  float* rows = sized(ws.moe_rows, n * D);
  float* gu = sized(ws.moe_gu, n * 2 * F);
  float* act = sized(ws.moe_act, n * F);
  float* y = sized(ws.moe_y, n * D);
  std::vector<int64_t> members;
  std::vector<float> member_weight;
  for (int64_t e = 0; e < E; ++e) {
    members.clear();
    member_weight.clear();
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < K; ++j) {
        if (selected[static_cast<size_t>(t * K + j)] == e) {
          members.push_back(t);
          member_weight.push_back(weights[static_cast<size_t>(t * K + j)]);
        }
      }
    }
    const int64_t m = static_cast<int64_t>(members.size());
    if (m == 0) continue;
    for (int64_t r = 0; r < m; ++r) {
      std::memcpy(rows + r * D, x2 + members[static_cast<size_t>(r)] * D,
                  static_cast<size_t>(D) * sizeof(float));
    }
    if (layer.gate_up_exps.present()) {
      matmul(layer.gate_up_exps.expert(e), rows, m, gu, pool);  // [m][2F]: gate then up
      for (int64_t r = 0; r < m; ++r)
        cpu::geglu(gu + r * 2 * F, gu + r * 2 * F + F, act + r * F, F);
    } else {
      float* g = gu;
      float* u = gu + m * F;
      matmul(layer.gate_exps.expert(e), rows, m, g, pool);  // [m][F]
      matmul(layer.up_exps.expert(e), rows, m, u, pool);
      if (!layer.gate_exps.scale.empty()) {
        for (int64_t i = 0; i < m * F; ++i) g[i] *= layer.gate_exps.scale[static_cast<size_t>(e)];
      }
      if (!layer.up_exps.scale.empty()) {
        for (int64_t i = 0; i < m * F; ++i) u[i] *= layer.up_exps.scale[static_cast<size_t>(e)];
      }
      cpu::geglu(g, u, act, m * F);
    }
    matmul(layer.down_exps.expert(e), act, m, y, pool);  // [m][D]
    const float down_scale =
        layer.down_exps.scale.empty() ? 1.0f : layer.down_exps.scale[static_cast<size_t>(e)];
    for (int64_t r = 0; r < m; ++r) {
      float* dst = f2 + members[static_cast<size_t>(r)] * D;
      const float w = member_weight[static_cast<size_t>(r)];
      for (int64_t i = 0; i < D; ++i) dst[i] += (y[r * D + i] * down_scale) * w;
    }
  }
  for (int64_t t = 0; t < n; ++t)
    cpu::rms_norm(f2 + t * D, layer.post_ffw_norm_2.data, D, eps, f2 + t * D);
  add(f1, f2, n * D);
}

}  // namespace boltrt

#include "model/dflash.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/ops.h"
#include "gguf/gguf.h"
#include "model/qwen35.h"
#include "quant/dequantize.h"
#include "util/error.h"

namespace boltrt {

// ---------------------------------------------------------------------------------------------
// 1. Configuration
// ---------------------------------------------------------------------------------------------

DFlashConfig DFlashConfig::from_gguf(const gguf::File& file) {
  const std::string arch = file.architecture();
  if (arch != "dflash") {
    fail("{}: general.architecture is '{}', expected 'dflash' (a DFlash draft model)", file.path(),
         arch);
  }
  auto required = [&](const char* suffix) {
    auto v = file.get_int(std::string("dflash.") + suffix);
    if (!v) fail("{}: missing key 'dflash.{}'", file.path(), suffix);
    if (*v <= 0) fail("{}: key 'dflash.{}' is {}, expected > 0", file.path(), suffix, *v);
    return *v;
  };
  DFlashConfig c;
  c.n_embd = required("embedding_length");
  c.n_layer = required("block_count");
  c.n_ff = required("feed_forward_length");
  c.n_head = required("attention.head_count");
  c.n_head_kv = file.get_int("dflash.attention.head_count_kv").value_or(c.n_head);
  c.head_dim = file.get_int("dflash.attention.key_length").value_or(c.n_embd / c.n_head);
  const int64_t value_length = file.get_int("dflash.attention.value_length").value_or(c.head_dim);
  c.n_rot = file.get_int("dflash.rope.dimension_count").value_or(c.head_dim);
  c.rope_base = static_cast<float>(file.get_float("dflash.rope.freq_base").value_or(10000.0));
  auto eps = file.get_float("dflash.attention.layer_norm_rms_epsilon");
  if (!eps) fail("{}: missing key 'dflash.attention.layer_norm_rms_epsilon'", file.path());
  c.rms_eps = static_cast<float>(*eps);
  c.block_size = file.get_int("dflash.block_size").value_or(16);
  c.embedding_scale_key = static_cast<float>(file.get_float("dflash.embedding_scale").value_or(0));

  if (c.n_head_kv <= 0 || c.n_head % c.n_head_kv != 0) {
    fail("{}: dflash.attention.head_count_kv = {} does not divide head_count = {}", file.path(),
         c.n_head_kv, c.n_head);
  }
  if (c.head_dim <= 0 || value_length != c.head_dim) {
    fail("{}: dflash.attention.key_length = {} and value_length = {} must be equal and > 0",
         file.path(), c.head_dim, value_length);
  }
  if (c.n_rot <= 0 || c.n_rot > c.head_dim || c.n_rot % 2 != 0) {
    fail("{}: dflash.rope.dimension_count = {} must be even and in (0, {}]", file.path(), c.n_rot,
         c.head_dim);
  }
  if (c.block_size < 2 || c.block_size > 256) {
    fail("{}: dflash.block_size = {} is outside [2, 256]", file.path(), c.block_size);
  }

  // Mask token: tokenizer key since the converter refactor, dflash.mask_token_id before it.
  auto mask = file.get_int("tokenizer.ggml.mask_token_id");
  if (!mask) mask = file.get_int("dflash.mask_token_id");
  if (!mask) {
    fail("{}: missing key 'tokenizer.ggml.mask_token_id' (the draft's mask token)", file.path());
  }
  if (*mask < 0 || *mask > std::numeric_limits<int32_t>::max()) {
    fail("{}: tokenizer.ggml.mask_token_id = {} is not a token id", file.path(), *mask);
  }
  c.mask_token = static_cast<int32_t>(*mask);

  const gguf::Array* layers = file.get_array("dflash.target_layers");
  if (!layers) fail("{}: missing key 'dflash.target_layers'", file.path());
  if (layers->items.empty()) fail("{}: key 'dflash.target_layers' is empty", file.path());
  for (size_t i = 0; i < layers->items.size(); ++i) {
    auto id = layers->items[i].as_int();
    if (!id || *id < 1 || *id > std::numeric_limits<int32_t>::max()) {
      fail("{}: dflash.target_layers[{}] is not a layer id >= 1 (ids are stored +1)", file.path(),
           i);
    }
    c.target_layers.push_back(static_cast<int32_t>(*id));
  }

  // Variants this engine does not run yet: say so instead of producing wrong drafts.
  if (file.get_int("dflash.attention.sliding_window").value_or(0) > 0) {
    fail("{}: dflash.attention.sliding_window: sliding-window drafts are not supported",
         file.path());
  }
  if (file.get_bool("dflash.attention.causal").value_or(false)) {
    fail("{}: dflash.attention.causal = true: causal drafts are not supported", file.path());
  }
  if (const gguf::Array* s = file.get_array("dflash.rope.dimension_sections")) {
    for (const gguf::Value& v : s->items) {
      if (v.as_int().value_or(0) != 0) {
        fail("{}: dflash.rope.dimension_sections: M-RoPE drafts are not supported", file.path());
      }
    }
  }
  if (file.get_int("dflash.hyper_connection_count").value_or(0) > 0 ||
      file.find_tensor("markov_w1.weight") || file.find_tensor("selector_hidden.weight")) {
    fail("{}: DFlash2 / DSpark drafts are not supported (plain DFlash only)", file.path());
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// 2. Tensor binding and target checks
// ---------------------------------------------------------------------------------------------

namespace {

class Binder {
 public:
  Binder(const gguf::File& file, std::vector<std::vector<float>>& converted, LanePacks& packs)
      : file_(file), converted_(converted), packs_(packs) {}

  const gguf::TensorInfo* get(const std::string& name, int64_t ne0, int64_t ne1,
                              bool required) const {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (!t) {
      if (required) fail("{}: missing tensor '{}'", file_.path(), name);
      return nullptr;
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
      fail("{}: tensor '{}' has shape [{}, {}, {}, {}], expected [{}, {}]", file_.path(), name,
           t->ne[0], t->ne[1], t->ne[2], t->ne[3], ne0, ne1);
    }
    if (!type_traits(t->type).computable) {
      fail("{}: tensor '{}' has type {}, which boltrt cannot compute with", file_.path(), name,
           type_traits(t->type).name);
    }
    return t;
  }

  WeightView view(const gguf::TensorInfo& t) const {
    WeightView w;
    w.type = t.type;
    w.data = file_.tensor_data(t);
    w.cols = t.ne[0];
    w.rows = t.ne[1];
    w.row_stride = row_size(t.type, t.ne[0]);
    return w;
  }

  // [in, out] matrix plus its optional "<base>.scale" scalar.
  Matrix matrix(const std::string& base, int64_t in, int64_t out, bool required) const {
    Matrix m;
    if (const gguf::TensorInfo* t = get(base + ".weight", in, out, required)) {
      m.w = view(*t);
      packs_.pack(m.w);
      if (const gguf::TensorInfo* s = get(base + ".scale", 1, 1, false)) m.scale = to_f32(*s)[0];
    }
    return m;
  }

  const float* vector(const std::string& name, int64_t n) const {
    return to_f32(*get(name, n, 1, true));
  }

  const float* to_f32(const gguf::TensorInfo& t) const {
    if (t.type == GgmlType::F32) return reinterpret_cast<const float*>(file_.tensor_data(t));
    std::vector<float>& out = converted_.emplace_back(static_cast<size_t>(t.n_elements()));
    dequantize_row(t.type, file_.tensor_data(t), out.data(), t.n_elements());
    return out.data();
  }

 private:
  const gguf::File& file_;
  std::vector<std::vector<float>>& converted_;
  LanePacks& packs_;
};

}  // namespace

DFlashTarget::DFlashTarget(const Gemma4Model& model)
    : n_embd(model.config().n_embd),
      n_layer(model.config().n_layer),
      n_vocab(model.config().n_vocab),
      target_file(&model.file()),
      head(model.output()) {}

DFlashTarget::DFlashTarget(const Qwen35Model& model)
    : n_embd(model.config().n_embd),
      n_layer(model.config().n_layer),
      n_vocab(model.n_vocab()),
      target_file(&model.file()),
      head(model.output()) {}

std::unique_ptr<DFlashDraft> DFlashDraft::load(const std::string& path,
                                               const DFlashTarget& target) {
  return std::make_unique<DFlashDraft>(gguf::File::open(path), target);
}

DFlashDraft::~DFlashDraft() = default;

DFlashDraft::DFlashDraft(std::unique_ptr<gguf::File> file, const DFlashTarget& target)
    : file_(std::move(file)), target_(target), config_(DFlashConfig::from_gguf(*file_)) {
  DFlashConfig& c = config_;
  const DFlashTarget& t = target;
  const std::string& path = file_->path();
  const int64_t D = c.n_embd;

  // The draft must fit its target: same hidden size (it reads the target's embeddings and
  // head), same vocabulary, tapped layers inside the target, mask token a real token.
  if (D != t.n_embd) {
    fail("{}: dflash.embedding_length = {} but the target's hidden size is {}", path, D, t.n_embd);
  }
  for (size_t i = 0; i < c.target_layers.size(); ++i) {
    if (c.target_layers[i] >= t.n_layer) {
      fail(
          "{}: dflash.target_layers[{}] = {} is out of range for a target with {} layers "
          "(stored ids are HF ids + 1, so at most {})",
          path, i, c.target_layers[i], t.n_layer, t.n_layer - 1);
    }
  }
  if (const gguf::Array* tokens = file_->get_array("tokenizer.ggml.tokens")) {
    if (static_cast<int64_t>(tokens->items.size()) != t.n_vocab) {
      fail("{}: tokenizer.ggml.tokens has {} tokens but the target's vocabulary has {}", path,
           tokens->items.size(), t.n_vocab);
    }
  }
  if (c.mask_token >= t.n_vocab) {
    fail("{}: mask token {} is outside the target's vocabulary of {}", path, c.mask_token,
         t.n_vocab);
  }

  Binder bind(*file_, converted_, lane_packs_);
  fc_ = bind.matrix("fc", c.n_taps() * D, D, true);
  hidden_norm_ = bind.vector("enc.output_norm.weight", D);
  output_norm_ = bind.vector("output_norm.weight", D);

  // Optional reduced vocabulary: d2t[i] = target token of draft head row i.
  c.n_vocab_draft = t.n_vocab;
  if (const gguf::TensorInfo* d2t = file_->find_tensor("d2t")) {
    if (d2t->type != GgmlType::I64 || d2t->n_dims != 1) {
      fail("{}: tensor 'd2t' must be a 1-d I64 tensor", path);
    }
    c.n_vocab_draft = d2t->ne[0];
    const auto* ids = reinterpret_cast<const int64_t*>(file_->tensor_data(*d2t));
    d2t_.assign(ids, ids + c.n_vocab_draft);
    for (size_t i = 0; i < d2t_.size(); ++i) {
      if (d2t_[i] < 0 || d2t_[i] >= t.n_vocab) {
        fail("{}: d2t[{}] = {} is outside the target's vocabulary of {}", path, i, d2t_[i],
             t.n_vocab);
      }
    }
  }

  // Embedding and head: the draft's own when it ships them, else the target's (tied head when
  // the target has no output.weight). A reduced vocabulary needs its own head.
  if (const gguf::TensorInfo* e = bind.get("token_embd.weight", D, t.n_vocab, false)) {
    token_embd_ = bind.view(*e);
  }
  output_ = bind.matrix("output", D, c.n_vocab_draft, false);
  if (has_d2t() && !output_.present()) {
    fail("{}: a draft with d2t (reduced vocabulary) needs its own 'output.weight'", path);
  }
  const gguf::File& tf = target.file();
  Binder target_bind(tf, converted_, lane_packs_);
  if (!token_embd_.data) {
    token_embd_ = target_bind.view(*target_bind.get("token_embd.weight", D, t.n_vocab, true));
  }
  // the target's head (its output.weight, or its tied token_embd), with the target's packed copy
  if (!output_.present()) output_ = target.output();

  const int64_t q_dim = c.n_head * c.head_dim;
  const int64_t kv_dim = c.n_head_kv * c.head_dim;
  layers_.resize(static_cast<size_t>(c.n_layer));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    DFlashLayer& l = layers_[static_cast<size_t>(il)];
    const std::string p = "blk." + std::to_string(il) + ".";
    if (file_->find_tensor(p + "attn_sinks.weight")) {
      fail("{}: tensor '{}attn_sinks.weight': attention sinks are not supported", path, p);
    }
    l.attn_norm = bind.vector(p + "attn_norm.weight", D);
    l.attn_q = bind.matrix(p + "attn_q", D, q_dim, true);
    l.attn_k = bind.matrix(p + "attn_k", D, kv_dim, true);
    l.attn_v = bind.matrix(p + "attn_v", D, kv_dim, true);
    l.attn_output = bind.matrix(p + "attn_output", q_dim, D, true);
    l.attn_q_norm = bind.vector(p + "attn_q_norm.weight", c.head_dim);
    l.attn_k_norm = bind.vector(p + "attn_k_norm.weight", c.head_dim);
    l.ffn_norm = bind.vector(p + "ffn_norm.weight", D);
    l.ffn_gate = bind.matrix(p + "ffn_gate", D, c.n_ff, true);
    l.ffn_up = bind.matrix(p + "ffn_up", D, c.n_ff, true);
    l.ffn_down = bind.matrix(p + "ffn_down", c.n_ff, D, true);
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Forward pass
// ---------------------------------------------------------------------------------------------

void DFlashKv::truncate(int64_t n) {
  if (n < 0) fail("dflash: cannot truncate the draft cache to {} rows", n);
  if (n >= n_rows) return;
  const int64_t dropped = n_rows - n;
  for (size_t il = 0; il < k.size(); ++il) {
    const size_t row = k[il].size() / static_cast<size_t>(n_rows);
    k[il].resize(static_cast<size_t>(n) * row);
    v[il].resize(static_cast<size_t>(n) * row);
  }
  n_rows = n;
  pos_end -= dropped;
}

namespace {

// Applies NEOX RoPE to n rows of n_heads heads, row r at position pos0 + r.
void rope_rows(float* x, int64_t n, int64_t pos0, int64_t n_heads, const DFlashConfig& c) {
  std::vector<float> cos(static_cast<size_t>(c.n_rot / 2)), sin(cos.size());
  for (int64_t r = 0; r < n; ++r) {
    cpu::rope_angles(pos0 + r, c.n_rot, c.rope_base, nullptr, cos.data(), sin.data());
    cpu::rope_neox(x + r * n_heads * c.head_dim, n_heads, c.head_dim, c.n_rot, cos.data(),
                   sin.data());
  }
}

}  // namespace

void DFlashDraft::inject(const float* taps, int64_t n_rows, DFlashKv& kv, ThreadPool* pool) const {
  const DFlashConfig& c = config_;
  const int64_t D = c.n_embd;
  const int64_t kv_dim = c.n_head_kv * c.head_dim;
  if (n_rows <= 0) return;
  if (kv.k.empty()) {
    kv.k.resize(static_cast<size_t>(c.n_layer));
    kv.v.resize(static_cast<size_t>(c.n_layer));
  }

  // context rows: ctx = hidden_norm(fc(taps))                                  [n][D]
  // (no per-layer input norm, MLP or residual: dflash.md A9.5)
  std::vector<float> ctx(static_cast<size_t>(n_rows * D));
  linear(fc_, taps, n_rows, ctx.data(), pool);
  for (int64_t r = 0; r < n_rows; ++r) {
    cpu::rms_norm(ctx.data() + r * D, hidden_norm_, D, c.rms_eps, ctx.data() + r * D);
  }

  std::vector<float> k(static_cast<size_t>(n_rows * kv_dim)), v(k.size());
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const DFlashLayer& l = layers_[static_cast<size_t>(il)];
    linear(l.attn_k, ctx.data(), n_rows, k.data(), pool);  // [n][Hkv*hd]
    linear(l.attn_v, ctx.data(), n_rows, v.data(), pool);
    cpu::rms_norm_rows(k.data(), n_rows * c.n_head_kv, c.head_dim, l.attn_k_norm, c.rms_eps);
    rope_rows(k.data(), n_rows, kv.pos_end, c.n_head_kv, c);
    auto& kl = kv.k[static_cast<size_t>(il)];
    auto& vl = kv.v[static_cast<size_t>(il)];
    kl.insert(kl.end(), k.begin(), k.end());
    vl.insert(vl.end(), v.begin(), v.end());
  }
  kv.n_rows += n_rows;
  kv.pos_end += n_rows;
}

void DFlashDraft::run_block(const int32_t* tokens, int64_t n, DFlashKv& kv, DFlashScratch& ws,
                            ThreadPool* pool) const {
  const DFlashConfig& c = config_;
  const int64_t D = c.n_embd;
  const int64_t q_dim = c.n_head * c.head_dim;
  const int64_t kv_dim = c.n_head_kv * c.head_dim;
  const int64_t n_vocab = target_.n_vocab;
  if (n < 2 || n > c.block_size) {
    fail("dflash draft: block of {} tokens, expected 2..{}", n, c.block_size);
  }
  for (int64_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= n_vocab) {
      fail("dflash draft: block token {} is outside the vocabulary of {}", tokens[t], n_vocab);
    }
  }
  if (kv.k.empty()) {
    kv.k.resize(static_cast<size_t>(c.n_layer));
    kv.v.resize(static_cast<size_t>(c.n_layer));
  }
  const int64_t n_ctx = kv.n_rows;
  const int64_t pos0 = kv.pos_end;  // block positions pos0 .. pos0+n-1
  const int64_t n_kv = n_ctx + n;

  // h = embedding rows of the block (raw target table: llama.cpp applies no scale)   [n][D]
  ws.h.resize(static_cast<size_t>(n * D));
  ws.a.resize(ws.h.size());
  ws.o.resize(ws.h.size());
  float* h = ws.h.data();
  float* a = ws.a.data();
  float* o = ws.o.data();
  for (int64_t t = 0; t < n; ++t) {
    dequantize_row(token_embd_.type,
                   static_cast<const uint8_t*>(token_embd_.data) +
                       static_cast<size_t>(tokens[t]) * token_embd_.row_stride,
                   h + t * D, D);
  }

  ws.q.resize(static_cast<size_t>(n * q_dim));
  ws.attn.resize(ws.q.size());
  ws.gate.resize(static_cast<size_t>(n * c.n_ff));
  ws.up.resize(ws.gate.size());
  float* q = ws.q.data();
  float* attn = ws.attn.data();
  const float kq_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  for (int64_t il = 0; il < c.n_layer; ++il) {
    const DFlashLayer& l = layers_[static_cast<size_t>(il)];
    // u = input_layernorm(h)
    for (int64_t t = 0; t < n; ++t) cpu::rms_norm(h + t * D, l.attn_norm, D, c.rms_eps, a + t * D);
    // Q, K, V of the block; QK-norm per head; RoPE at the block positions. The block's K/V
    // rows go right after the context rows of the layer's cache, [n_ctx + n][Hkv*hd], for
    // this call only (the cache is cut back below), so attention reads one contiguous array.
    std::vector<float>& kl = kv.k[static_cast<size_t>(il)];
    std::vector<float>& vl = kv.v[static_cast<size_t>(il)];
    kl.resize(static_cast<size_t>(n_kv * kv_dim));
    vl.resize(kl.size());
    float* k_block = kl.data() + n_ctx * kv_dim;
    float* v_block = vl.data() + n_ctx * kv_dim;
    linear(l.attn_q, a, n, q, pool);
    linear(l.attn_k, a, n, k_block, pool);
    linear(l.attn_v, a, n, v_block, pool);
    cpu::rms_norm_rows(q, n * c.n_head, c.head_dim, l.attn_q_norm, c.rms_eps);
    cpu::rms_norm_rows(k_block, n * c.n_head_kv, c.head_dim, l.attn_k_norm, c.rms_eps);
    rope_rows(q, n, pos0, c.n_head, c);
    rope_rows(k_block, n, pos0, c.n_head_kv, c);
    // Non-causal attention: cpu::attention masks keys after the query's position, so the
    // queries are placed at the last key index (n_kv - 1) and every key is visible to all.
    cpu::attention(q, n, /*q_pos0=*/n_kv - 1, kl.data(), vl.data(), n_kv, /*kv_pos0=*/0, c.n_head,
                   c.n_head_kv, c.head_dim, /*window=*/0, kq_scale, attn, pool);
    kl.resize(static_cast<size_t>(n_ctx * kv_dim));  // keeps the capacity for the next call
    vl.resize(kl.size());
    // h = h + o_proj(attn)
    linear(l.attn_output, attn, n, o, pool);
    for (int64_t i = 0; i < n * D; ++i) h[i] += o[i];
    // h = h + down(silu(gate(x)) * up(x)),  x = post_attention_layernorm(h)
    for (int64_t t = 0; t < n; ++t) cpu::rms_norm(h + t * D, l.ffn_norm, D, c.rms_eps, a + t * D);
    float* gate = ws.gate.data();
    const float* up = ws.up.data();
    linear(l.ffn_gate, a, n, gate, pool);
    linear(l.ffn_up, a, n, ws.up.data(), pool);
    cpu::silu_mul(gate, up, gate, n * c.n_ff);
    linear(l.ffn_down, gate, n, o, pool);
    for (int64_t i = 0; i < n * D; ++i) h[i] += o[i];
  }

  // slots 1..n-1 through the final norm                                        a [n-1][D]
  for (int64_t t = 1; t < n; ++t) {
    cpu::rms_norm(h + t * D, output_norm_, D, c.rms_eps, a + (t - 1) * D);
  }
}

void DFlashDraft::draft(const int32_t* tokens, int64_t n_block, const DFlashKv& kv, float* logits,
                        ThreadPool* pool) const {
  const DFlashConfig& c = config_;
  const int64_t n_vocab = target_.n_vocab;
  DFlashKv work = kv;  // run_block appends the block rows for the call
  DFlashScratch ws;
  run_block(tokens, n_block, work, ws, pool);

  // logits of slots 1..n-1: head(norm(h))                           [n-1][n_vocab(_draft)]
  const int64_t rows = n_block - 1;
  if (!has_d2t()) {
    linear(output_, ws.a.data(), rows, logits, pool);
    return;
  }
  std::vector<float> small(static_cast<size_t>(rows * c.n_vocab_draft));
  linear(output_, ws.a.data(), rows, small.data(), pool);
  for (int64_t r = 0; r < rows; ++r) {
    float* out = logits + r * n_vocab;
    for (int64_t i = 0; i < n_vocab; ++i) out[i] = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < c.n_vocab_draft; ++i) {
      out[d2t_[static_cast<size_t>(i)]] = small[static_cast<size_t>(r * c.n_vocab_draft + i)];
    }
  }
}

void DFlashDraft::draft_greedy(const int32_t* tokens, int64_t n_block, DFlashKv& kv,
                               DFlashScratch& ws, int32_t* out, ThreadPool* pool) const {
  run_block(tokens, n_block, kv, ws, pool);
  // argmax of head(norm(h)) per slot 1..n-1 (the first maximum, as std::max_element over the
  // logits draft() writes); with d2t the draft row maps to its target token
  const int64_t rows = n_block - 1;
  const int64_t V = c_vocab_rows();
  ws.logits.resize(static_cast<size_t>(rows * V));
  linear(output_, ws.a.data(), rows, ws.logits.data(), pool);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = ws.logits.data() + r * V;
    const int64_t best = cpu::argmax(row, V);
    out[r] = static_cast<int32_t>(has_d2t() ? d2t_[static_cast<size_t>(best)] : best);
  }
}

void DFlashDraft::forward(const float* taps, int64_t n_ctx, int32_t last_token, int64_t n_block,
                          float* logits, ThreadPool* pool) const {
  DFlashKv kv;
  inject(taps, n_ctx, kv, pool);
  std::vector<int32_t> block(static_cast<size_t>(std::max<int64_t>(n_block, 0)),
                             config_.mask_token);
  if (!block.empty()) block[0] = last_token;
  draft(block.data(), n_block, kv, logits, pool);
}

}  // namespace boltrt

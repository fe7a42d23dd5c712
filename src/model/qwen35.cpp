#include "model/qwen35.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <string_view>

#include "backend/cpu/causal_conv1d.h"
#include "backend/cpu/delta_rule.h"
#include "backend/cpu/gated_rms_norm.h"
#include "backend/cpu/gdn_gates.h"
#include "backend/cpu/imrope.h"
#include "gguf/gguf.h"
#include "model/gguf_metadata.h"
#include "quant/dequantize.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt {

int64_t Qwen35Config::n_gdn_layers() const {
  int64_t n = 0;
  for (int64_t i = 0; i < n_layer; ++i) n += is_gdn[static_cast<size_t>(i)] ? 1 : 0;
  return n;
}

int64_t Qwen35Config::n_attn_layers() const {
  return n_layer - n_gdn_layers();
}

int64_t Qwen35Config::conv_state_bytes_per_layer() const {
  return (conv_kernel - 1) * conv_channels() * static_cast<int64_t>(sizeof(float));
}

int64_t Qwen35Config::delta_state_bytes_per_layer() const {
  return ssm_n_v_head * ssm_d_state * ssm_d_state * static_cast<int64_t>(sizeof(float));
}

int64_t Qwen35Config::recurrent_state_bytes() const {
  return n_gdn_layers() * (conv_state_bytes_per_layer() + delta_state_bytes_per_layer());
}

int64_t Qwen35Config::kv_bytes_per_token(int64_t bytes_per_element) const {
  int64_t n = 0;  // K and V, Hkv heads of hd each, per trunk attention layer
  for (int64_t i = 0; i < n_layer; ++i) {
    const auto s = static_cast<size_t>(i);
    if (!is_gdn[s]) n += 2 * n_head_kv[s] * head_dim * bytes_per_element;
  }
  return n;
}

Qwen35Config Qwen35Config::from_gguf(const gguf::File& file) {
  const std::string& path = file.path();
  if (file.architecture() != "qwen35") {
    fail("{}: general.architecture is '{}', expected 'qwen35'", path, file.architecture());
  }
  const ArchMetadata meta(file, "qwen35");
  Qwen35Config c;
  c.n_ctx_train = meta.required_int("context_length");
  c.n_embd = meta.required_int("embedding_length");
  c.n_block = meta.required_int("block_count");
  c.n_nextn = meta.optional_int("nextn_predict_layers", 0);
  if (c.n_embd <= 0 || c.n_embd > (int64_t{1} << 20) || c.n_block <= 0 || c.n_block > 4096) {
    fail("{}: embedding_length {} / block_count {} out of range", path, c.n_embd, c.n_block);
  }
  if (c.n_nextn < 0 || c.n_nextn >= c.n_block) {
    fail("{}: nextn_predict_layers {} must be in [0, block_count {})", path, c.n_nextn, c.n_block);
  }
  c.n_layer = c.n_block - c.n_nextn;
  c.rms_eps = meta.required_float("attention.layer_norm_rms_epsilon");
  if (!(c.rms_eps > 0.0f)) fail("{}: attention.layer_norm_rms_epsilon must be > 0", path);

  // FFN width is loader-optional in llama.cpp, but 0 gives tensors that cannot match (§2.1)
  c.n_ff = meta.ints("feed_forward_length", c.n_block, true, 0);
  c.n_head = meta.ints("attention.head_count", c.n_block, true, 0);
  c.n_head_kv = meta.has("attention.head_count_kv")
                    ? meta.ints("attention.head_count_kv", c.n_block, true, 0)
                    : c.n_head;

  // layer schedule (§2.2): an explicit recurrent_layers list wins over the interval
  c.is_gdn.assign(static_cast<size_t>(c.n_block), false);
  if (meta.has("attention.recurrent_layers")) {
    const auto rec = meta.ints("attention.recurrent_layers", c.n_block, true, 0);
    for (size_t i = 0; i < rec.size(); ++i) c.is_gdn[i] = rec[i] != 0;
  } else {
    const int64_t interval = meta.optional_int("full_attention_interval", 4);
    if (interval <= 0) fail("{}: full_attention_interval = {} must be > 0", path, interval);
    for (int64_t i = 0; i < c.n_layer; ++i) {
      c.is_gdn[static_cast<size_t>(i)] = (i + 1) % interval != 0;
    }
  }
  for (int64_t i = c.n_layer; i < c.n_block; ++i) {
    if (c.is_gdn[static_cast<size_t>(i)]) {
      fail("{}: MTP block {} is marked recurrent; MTP blocks are attention blocks", path, i);
    }
  }
  // llama.cpp v0.4.0 aborts at context creation when either half of the hybrid memory is empty
  if (c.n_gdn_layers() == 0 || c.n_attn_layers() == 0) {
    fail("{}: needs at least one Gated DeltaNet and one full-attention layer ({} and {})", path,
         c.n_gdn_layers(), c.n_attn_layers());
  }

  // full attention: hd defaults to D / H (released models override it: 4B has D/H = 160, hd 256)
  for (int64_t i = 0; i < c.n_block; ++i) {
    const auto s = static_cast<size_t>(i);
    if (c.is_gdn[s]) continue;
    if (c.n_head[s] <= 0 || c.n_head_kv[s] <= 0 || c.n_head[s] % c.n_head_kv[s] != 0) {
      fail("{}: block {}: head_count {} / head_count_kv {} (need > 0, head_count a multiple)", path,
           i, c.n_head[s], c.n_head_kv[s]);
    }
  }
  for (int64_t i = 0; i < c.n_block; ++i) {
    if (c.n_ff[static_cast<size_t>(i)] <= 0) {
      fail("{}: block {}: feed_forward_length must be > 0", path, i);
    }
  }
  const int64_t first_attn_heads = [&] {
    for (int64_t i = 0; i < c.n_block; ++i) {
      if (!c.is_gdn[static_cast<size_t>(i)]) return c.n_head[static_cast<size_t>(i)];
    }
    return int64_t{1};
  }();
  c.head_dim = meta.optional_int("attention.key_length", c.n_embd / first_attn_heads);
  if (meta.optional_int("attention.value_length", c.head_dim) != c.head_dim) {
    fail("{}: attention.value_length must equal attention.key_length ({})", path, c.head_dim);
  }
  if (c.head_dim <= 0 || c.head_dim > 4096) {
    fail("{}: attention.key_length {} out of range", path, c.head_dim);
  }
  c.n_rot = meta.optional_int("rope.dimension_count", c.head_dim);
  if (c.n_rot <= 0 || c.n_rot > c.head_dim || c.n_rot % 2 != 0) {
    fail("{}: rope.dimension_count {} must be even and in (0, key_length {}]", path, c.n_rot,
         c.head_dim);
  }
  const auto sections = meta.ints("rope.dimension_sections", 4, true, 0);
  int64_t section_sum = 0;
  for (size_t j = 0; j < 4; ++j) {
    if (sections[j] < 0) fail("{}: rope.dimension_sections has a negative entry", path);
    c.rope_sections[j] = sections[j];
    section_sum += sections[j];
  }
  if (section_sum > c.head_dim || (sections[0] <= 0 && sections[1] <= 0 && sections[2] <= 0)) {
    fail(
        "{}: rope.dimension_sections [{}, {}, {}, {}]: sum must be <= key_length {} and one of "
        "the first three > 0",
        path, sections[0], sections[1], sections[2], sections[3], c.head_dim);
  }
  c.rope_base = meta.optional_float("rope.freq_base", 10000.0f);
  if (!(c.rope_base > 0.0f)) fail("{}: rope.freq_base must be > 0", path);

  // Gated DeltaNet (§2.4): square per-head states (dv = inner / Hv = dk), Hk divides Hv
  c.conv_kernel = meta.required_int("ssm.conv_kernel");
  c.ssm_d_inner = meta.required_int("ssm.inner_size");
  c.ssm_d_state = meta.required_int("ssm.state_size");
  c.ssm_n_v_head = meta.required_int("ssm.time_step_rank");
  c.ssm_n_k_head = meta.required_int("ssm.group_count");
  if (c.conv_kernel < 1 || c.conv_kernel > 64) {
    fail("{}: ssm.conv_kernel {} out of range [1, 64]", path, c.conv_kernel);
  }
  if (c.ssm_d_state <= 0 || c.ssm_d_state > 4096 || c.ssm_n_v_head <= 0 || c.ssm_n_v_head > 4096 ||
      c.ssm_n_k_head <= 0 || c.ssm_n_v_head % c.ssm_n_k_head != 0) {
    fail(
        "{}: ssm.state_size {} / time_step_rank {} / group_count {} (need > 0, group_count "
        "dividing time_step_rank)",
        path, c.ssm_d_state, c.ssm_n_v_head, c.ssm_n_k_head);
  }
  if (c.ssm_d_inner != c.ssm_d_state * c.ssm_n_v_head) {
    fail("{}: ssm.inner_size {} must equal state_size {} * time_step_rank {} (square states)", path,
         c.ssm_d_inner, c.ssm_d_state, c.ssm_n_v_head);
  }
  return c;
}

// =============================================================================================
// 2. Weight binding: every trunk tensor is a view into the mapped file, checked against its shape
// =============================================================================================

void Qwen35State::clear() {
  std::fill(conv.begin(), conv.end(), 0.0f);
  std::fill(delta.begin(), delta.end(), 0.0f);
}

std::unique_ptr<Qwen35Model> Qwen35Model::load(const std::string& path) {
  return std::make_unique<Qwen35Model>(gguf::File::open(path));
}

Qwen35Model::~Qwen35Model() = default;

Qwen35Model::Qwen35Model(std::unique_ptr<gguf::File> file) : file_(std::move(file)) {
  config_ = Qwen35Config::from_gguf(*file_);
  const Qwen35Config& c = config_;
  const std::string& path = file_->path();
  const TensorBinder bind(*file_, converted_, lane_packs_);
  const int64_t D = c.n_embd, hd = c.head_dim, dk = c.ssm_d_state;
  const int64_t Hv = c.ssm_n_v_head, C = c.conv_channels();

  const gguf::TensorInfo* embd = bind.find("token_embd.weight");
  if (!embd) fail("{}: missing tensor 'token_embd.weight'", path);
  n_vocab_ = embd->ne[1];
  if (const gguf::Array* tokens = file_->get_array("tokenizer.ggml.tokens")) {
    if (static_cast<int64_t>(tokens->items.size()) != n_vocab_) {
      fail("{}: tokenizer has {} tokens but token_embd.weight has {} rows", path,
           tokens->items.size(), n_vocab_);
    }
  }
  token_embd_ = bind.view(*bind.get("token_embd.weight", {D, n_vocab_}, true));
  output_ = bind.matrix("output", D, n_vocab_, false);
  if (!output_.present()) {  // tied head
    output_.w = token_embd_;
    lane_packs_.pack(output_.w);
  }
  output_norm_ = bind.vector("output_norm.weight", D, true);

  layers_.resize(static_cast<size_t>(c.n_layer));
  int64_t n_kv = 0, n_gdn = 0;
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const auto s = static_cast<size_t>(il);
    Qwen35Layer& l = layers_[s];
    const std::string p = "blk." + std::to_string(il) + ".";
    const int64_t n_ff = c.n_ff[s];
    l.attn_norm = bind.vector(p + "attn_norm.weight", D, true);
    l.post_attention_norm = bind.vector(p + "post_attention_norm.weight", D, true);
    l.ffn_gate = bind.matrix(p + "ffn_gate", D, n_ff, true);
    l.ffn_up = bind.matrix(p + "ffn_up", D, n_ff, true);
    l.ffn_down = bind.matrix(p + "ffn_down", n_ff, D, true);
    if (bind.find(p + "ffn_gate_inp.weight")) {
      fail("{}: layer {} has a router (ffn_gate_inp): a qwen35moe file, not dense qwen35", path,
           il);
    }
    if (c.is_gdn[s]) {
      layer_slot_.push_back(n_gdn++);
      l.attn_qkv = bind.matrix(p + "attn_qkv", D, C, true);
      l.attn_gate = bind.matrix(p + "attn_gate", D, Hv * dk, true);
      l.ssm_beta = bind.matrix(p + "ssm_beta", D, Hv, true);
      l.ssm_alpha = bind.matrix(p + "ssm_alpha", D, Hv, true);
      l.ssm_conv1d = bind.values(p + "ssm_conv1d.weight", {c.conv_kernel, C}, true);
      l.ssm_dt_bias = bind.vector(p + "ssm_dt.bias", Hv, true);
      l.ssm_a = bind.vector(p + "ssm_a", Hv, true);
      l.ssm_norm = bind.vector(p + "ssm_norm.weight", dk, true);
      l.ssm_out = bind.matrix(p + "ssm_out", Hv * dk, D, true);
    } else {
      layer_slot_.push_back(n_kv++);
      const int64_t H = c.n_head[s], Hkv = c.n_head_kv[s];
      l.attn_q = bind.matrix(p + "attn_q", D, 2 * H * hd, true);
      l.attn_k = bind.matrix(p + "attn_k", D, Hkv * hd, true);
      l.attn_v = bind.matrix(p + "attn_v", D, Hkv * hd, true);
      l.attn_output = bind.matrix(p + "attn_output", H * hd, D, true);
      l.attn_q_norm = bind.vector(p + "attn_q_norm.weight", hd, true);
      l.attn_k_norm = bind.vector(p + "attn_k_norm.weight", hd, true);
    }
  }
}

std::vector<KvLayerSpec> Qwen35Model::kv_layout() const {
  std::vector<KvLayerSpec> specs;
  for (int64_t il = 0; il < config_.n_layer; ++il) {
    const auto s = static_cast<size_t>(il);
    if (config_.is_gdn[s]) continue;
    KvLayerSpec spec;
    spec.row_size = config_.n_head_kv[s] * config_.head_dim;
    specs.push_back(spec);
  }
  return specs;
}

Qwen35State Qwen35Model::new_state() const {
  const Qwen35Config& c = config_;
  Qwen35State st;
  st.conv.assign(static_cast<size_t>(c.n_gdn_layers() * c.conv_channels() * (c.conv_kernel - 1)),
                 0.0f);
  st.delta.assign(
      static_cast<size_t>(c.n_gdn_layers() * c.ssm_n_v_head * c.ssm_d_state * c.ssm_d_state), 0.0f);
  return st;
}

// =============================================================================================
// 3. Forward pass (§4)
// =============================================================================================
namespace {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

void run(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t, int)>& work) {
  if (pool && n > 1) {
    pool->parallel_for(n, 1, work);
  } else {
    work(0, n, 0);
  }
}

}  // namespace

void Qwen35Model::forward(const int32_t* tokens, int64_t n, int64_t pos0, KvCache& kv,
                          Qwen35State& state, Qwen35Workspace& ws, ThreadPool* pool, float* logits,
                          bool all_logits, const LayerTaps* taps) const {
  const Qwen35Sequence one{&kv, &state, pos0, n};
  forward(tokens, std::span<const Qwen35Sequence>(&one, 1), ws, pool, logits, all_logits, taps);
}

void Qwen35Model::forward(const int32_t* tokens, std::span<const Qwen35Sequence> sequences,
                          Qwen35Workspace& ws, ThreadPool* pool, float* logits, bool all_logits,
                          const LayerTaps* taps) const {
  const Qwen35Config& c = config_;
  if (taps != nullptr) taps->check(c.n_layer);
  const int64_t D = c.n_embd, V = n_vocab_;
  const float eps = c.rms_eps;
  const size_t conv_size =
      static_cast<size_t>(c.n_gdn_layers() * c.conv_channels() * (c.conv_kernel - 1));
  const size_t delta_size =
      static_cast<size_t>(c.n_gdn_layers() * c.ssm_n_v_head * c.ssm_d_state * c.ssm_d_state);
  // token t of the batch sits at position pos[t] of its sequence
  std::vector<int64_t> pos;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Qwen35Sequence& s = sequences[i];
    for (size_t j = 0; j < i; ++j) {
      if (sequences[j].kv == s.kv || sequences[j].state == s.state)
        fail("forward: one sequence appears twice in a batch");
    }
    if (s.n_tokens <= 0) fail("forward: {} tokens", s.n_tokens);
    if (s.n_tokens > s.kv->max_batch())
      fail("forward: {} tokens exceed the batch size {}", s.n_tokens, s.kv->max_batch());
    if (s.pos0 + s.n_tokens > s.kv->n_ctx()) {
      fail("forward: positions up to {} exceed the context of {}", s.pos0 + s.n_tokens,
           s.kv->n_ctx());
    }
    if (s.state->conv.size() != conv_size || s.state->delta.size() != delta_size) {
      fail("forward: the recurrent state does not belong to this model");
    }
    for (int64_t k = 0; k < s.n_tokens; ++k) pos.push_back(s.pos0 + k);
  }
  const int64_t n = static_cast<int64_t>(pos.size());
  if (n == 0) return;
  for (int64_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= V) {
      fail("token id {} outside the vocabulary [0, {})", tokens[t], V);
    }
  }

  // --- 4.1 embeddings: h = token_embd[tok], no scaling                          h [n][D]
  float* h = sized(ws.h, n * D);
  for (int64_t t = 0; t < n; ++t) {
    dequantize_row(token_embd_.type,
                   static_cast<const uint8_t*>(token_embd_.data) +
                       static_cast<size_t>(tokens[t]) * token_embd_.row_stride,
                   h + t * D, D);
  }

  // --- 4.3 IMROPE angles per token (text: T, H, W streams at p, E unrotated)   [n][n_rot/2]
  const int64_t half = c.n_rot / 2;
  float* rope_cos = sized(ws.rope_cos, n * half);
  float* rope_sin = sized(ws.rope_sin, n * half);
  for (int64_t t = 0; t < n; ++t) {
    cpu::imrope_text_angles(pos[static_cast<size_t>(t)], c.n_rot, c.rope_base, c.rope_sections,
                            rope_cos + t * half, rope_sin + t * half);
  }

  float* a = sized(ws.a, n * D);
  float* o = sized(ws.o, n * D);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const auto s = static_cast<size_t>(il);
    const Qwen35Layer& layer = layers_[s];
    if (taps != nullptr) taps->capture(il, h, n, D);
    // token mixer on RMSNorm(h): a -> o                                          [n][D]
    for (int64_t t = 0; t < n; ++t)
      cpu::rms_norm(h + t * D, layer.attn_norm.data, D, eps, a + t * D);
    if (c.is_gdn[s]) {
      delta_net_layer(il, layer_slot_[s], sequences, n, ws, pool);
    } else {
      attention_layer(il, layer_slot_[s], sequences, n, ws, pool);
    }
    for (int64_t i = 0; i < n * D; ++i) h[i] += o[i];

    // SwiGLU FFN on RMSNorm(h) (post_attention_norm is the pre-FFN norm)
    const int64_t n_ff = c.n_ff[s];
    for (int64_t t = 0; t < n; ++t) {
      cpu::rms_norm(h + t * D, layer.post_attention_norm.data, D, eps, a + t * D);
    }
    float* gate = sized(ws.gate, n * n_ff);
    float* up = sized(ws.big, n * n_ff);
    linear(layer.ffn_gate, a, n, gate, pool);  // [n][n_ff]
    linear(layer.ffn_up, a, n, up, pool);
    cpu::silu_mul(gate, up, gate, n * n_ff);
    linear(layer.ffn_down, gate, n, o, pool);  // [n][D]
    for (int64_t i = 0; i < n * D; ++i) h[i] += o[i];
  }

  if (taps != nullptr) taps->capture(c.n_layer, h, n, D);

  // --- output: final norm and head, only for the rows asked for: every row, or each
  // sequence's last                                                              hn [rows][D]
  if (!logits) return;
  const int64_t rows = all_logits ? n : static_cast<int64_t>(sequences.size());
  float* hn = sized(ws.last, rows * D);
  if (all_logits) {
    for (int64_t r = 0; r < n; ++r) cpu::rms_norm(h + r * D, output_norm_.data, D, eps, hn + r * D);
  } else {
    int64_t end = 0;
    for (size_t i = 0; i < sequences.size(); ++i) {
      end += sequences[i].n_tokens;
      cpu::rms_norm(h + (end - 1) * D, output_norm_.data, D, eps, hn + static_cast<int64_t>(i) * D);
    }
  }
  linear(output_, hn, rows, logits, pool);  // [rows][V]
}

// §4.2 gated full attention of ws.a [n][D] into ws.o [n][D]: projections over all n rows,
// attention per sequence against its own cache
void Qwen35Model::attention_layer(int64_t il, int64_t kv_layer,
                                  std::span<const Qwen35Sequence> sequences, int64_t n,
                                  Qwen35Workspace& ws, ThreadPool* pool) const {
  const Qwen35Config& c = config_;
  const Qwen35Layer& layer = layers_[static_cast<size_t>(il)];
  const int64_t H = c.n_head[static_cast<size_t>(il)], Hkv = c.n_head_kv[static_cast<size_t>(il)];
  const int64_t hd = c.head_dim, half = c.n_rot / 2;
  const float eps = c.rms_eps;

  // q and gate interleaved per head: [n][H][2][hd] -> q [n][H·hd], gate [n][H·hd]
  float* qg = sized(ws.big, n * 2 * H * hd);
  linear(layer.attn_q, ws.a.data(), n, qg, pool);
  float* q = sized(ws.q, n * H * hd);
  float* gate = sized(ws.gate, n * H * hd);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t head = 0; head < H; ++head) {
      const float* src = qg + (t * H + head) * 2 * hd;
      std::copy(src, src + hd, q + (t * H + head) * hd);
      std::copy(src + hd, src + 2 * hd, gate + (t * H + head) * hd);
    }
  }
  float* k = sized(ws.k, n * Hkv * hd);
  float* v = sized(ws.v, n * Hkv * hd);
  linear(layer.attn_k, ws.a.data(), n, k, pool);  // [n][Hkv·hd]
  linear(layer.attn_v, ws.a.data(), n, v, pool);
  cpu::rms_norm_rows(q, n * H, hd, layer.attn_q_norm.data, eps);  // per head, then RoPE
  cpu::rms_norm_rows(k, n * Hkv, hd, layer.attn_k_norm.data, eps);
  for (int64_t t = 0; t < n; ++t) {
    const float* cs = ws.rope_cos.data() + t * half;
    const float* sn = ws.rope_sin.data() + t * half;
    cpu::rope_neox(q + t * H * hd, H, hd, c.n_rot, cs, sn);
    cpu::rope_neox(k + t * Hkv * hd, Hkv, hd, c.n_rot, cs, sn);
  }

  // per sequence: store the new K/V, then causal softmax(q·k / sqrt(hd)) · v over its cached +
  // new positions, keys read in place in the cache's format, in chunks at fixed positions
  // (i * chunk) that bound each query's scores
  float* attn = sized(ws.attn, n * H * hd);
  int64_t first = 0;  // the sequence's first row in the batch
  for (const Qwen35Sequence& s : sequences) {
    KvCache& kv = *s.kv;
    for (int64_t t = 0; t < s.n_tokens; ++t) {
      const int64_t row = first + t;
      kv.write(static_cast<int32_t>(kv_layer), s.pos0 + t, k + row * Hkv * hd, v + row * Hkv * hd);
    }
    const int64_t kv_end = s.pos0 + s.n_tokens;
    const int64_t chunk = std::min<int64_t>(kv_end, std::max<int64_t>(1, ws.attention_chunk));
    ws.attention.begin(s.n_tokens, H, hd);
    for (int64_t b = 0; b < kv_end; b += chunk) {
      const int64_t e = std::min(kv_end, b + chunk);
      const KvCache::View rows = kv.view(static_cast<int32_t>(kv_layer), b, e);
      ws.attention.add(q + first * H * hd, s.pos0, rows.k, rows.v, e - b, b, Hkv, /*window=*/0,
                       1.0f / std::sqrt(static_cast<float>(hd)), pool);
    }
    ws.attention.finish(attn + first * H * hd);
    first += s.n_tokens;
  }
  for (int64_t i = 0; i < n * H * hd; ++i) attn[i] *= sigmoid(gate[i]);  // output gate
  linear(layer.attn_output, attn, n, ws.o.data(), pool);                 // [n][D]
}

// §4.4 Gated DeltaNet of ws.a [n][D] into ws.o [n][D], advancing each sequence's GDN state slot
// `gdn`: projections over all n rows, the conv and the delta rule per sequence
void Qwen35Model::delta_net_layer(int64_t il, int64_t gdn,
                                  std::span<const Qwen35Sequence> sequences, int64_t n,
                                  Qwen35Workspace& ws, ThreadPool* pool) const {
  const Qwen35Config& c = config_;
  const Qwen35Layer& layer = layers_[static_cast<size_t>(il)];
  const int64_t C = c.conv_channels(), Kc = c.conv_kernel;
  const int64_t Hk = c.ssm_n_k_head, Hv = c.ssm_n_v_head, dk = c.ssm_d_state, dv = dk;
  const float eps = c.rms_eps;
  const float* x = ws.a.data();

  // projections: m [n][C] (conv input), z [n][Hv·dv], alpha and beta [n][Hv] each
  float* m = sized(ws.big, n * C);
  float* z = sized(ws.z, n * Hv * dv);
  float* alpha = sized(ws.ab, 2 * n * Hv);
  float* beta_in = alpha + n * Hv;
  linear(layer.attn_qkv, x, n, m, pool);
  linear(layer.attn_gate, x, n, z, pool);
  linear(layer.ssm_alpha, x, n, alpha, pool);
  linear(layer.ssm_beta, x, n, beta_in, pool);

  // gates per (token, value head), stored head-major [Hv][n] for the per-head recurrence (a
  // sequence's rows stay contiguous within each head)
  float* gamma = sized(ws.gamma, Hv * n);
  float* beta = sized(ws.beta, Hv * n);
  {
    std::vector<float> g_t(static_cast<size_t>(Hv)), b_t(static_cast<size_t>(Hv));
    for (int64_t t = 0; t < n; ++t) {
      cpu::gdn_gates(alpha + t * Hv, beta_in + t * Hv, layer.ssm_dt_bias.data, layer.ssm_a.data, Hv,
                     g_t.data(), b_t.data());
      for (int64_t hv = 0; hv < Hv; ++hv) {
        gamma[hv * n + t] = g_t[static_cast<size_t>(hv)];
        beta[hv * n + t] = b_t[static_cast<size_t>(hv)];
      }
    }
  }

  // first row of each sequence in the batch
  std::vector<int64_t> first(sequences.size() + 1, 0);
  for (size_t i = 0; i < sequences.size(); ++i) first[i + 1] = first[i] + sequences[i].n_tokens;

  // causal depthwise conv over time with each sequence's carried window, then SiLU: u [n][C]
  // (in ws.q)
  float* u = sized(ws.q, n * C);
  for (size_t i = 0; i < sequences.size(); ++i) {
    float* conv_state = sequences[i].state->conv.data() + gdn * C * (Kc - 1);
    const int64_t r0 = first[i];
    run(pool, C, [&](int64_t b, int64_t e, int) {
      cpu::causal_conv1d(sequences[i].n_tokens, Kc, b, e, m + r0 * C, C, layer.ssm_conv1d.data,
                         conv_state, u + r0 * C, C);
    });
  }
  for (int64_t i = 0; i < n * C; ++i) u[i] = silu(u[i]);

  // L2-normalised q and k heads; v is used as it is
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t g = 0; g < 2 * Hk; ++g)
      cpu::l2_norm(u + t * C + g * dk, dk, eps, u + t * C + g * dk);
  }

  // gated delta rule per (sequence, value head h), h paired with key head h mod Hk (tiled
  // order, §3.6), token by token on that sequence's state: o [n][Hv·dv] (in ws.attn)
  float* out = sized(ws.attn, n * Hv * dv);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const auto n_seq = static_cast<int64_t>(sequences.size());
  run(pool, n_seq * Hv, [&](int64_t b, int64_t e, int) {
    for (int64_t job = b; job < e; ++job) {
      const auto i = static_cast<size_t>(job / Hv);
      const int64_t hv = job % Hv, g = hv % Hk, r0 = first[i], rows = sequences[i].n_tokens;
      float* delta_state = sequences[i].state->delta.data() + gdn * Hv * dk * dv;
      cpu::DeltaRuleHead head;
      head.n = rows;
      head.dk = dk;
      head.dv = dv;
      head.q = u + r0 * C + g * dk;
      head.k = u + r0 * C + Hk * dk + g * dk;
      head.v = u + r0 * C + 2 * Hk * dk + hv * dv;
      head.q_stride = head.k_stride = head.v_stride = C;
      head.g = gamma + hv * n + r0;
      head.beta = beta + hv * n + r0;
      head.state = delta_state + hv * dk * dv;
      head.out = out + r0 * Hv * dv + hv * dv;
      head.out_stride = Hv * dv;
      cpu::delta_rule_recurrent(head);
      // the query scale 1/sqrt(dk), applied to the output as llama.cpp does (the same value,
      // linear, but rounded where llama.cpp rounds it)
      for (int64_t t = 0; t < rows; ++t) {
        float* o = out + (r0 + t) * Hv * dv + hv * dv;
        for (int64_t j = 0; j < dv; ++j) o[j] *= q_scale;
      }
    }
  });

  // gated RMSNorm per head: RMSNorm(o, ssm_norm) ⊙ SiLU(z), then the out-projection
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t hv = 0; hv < Hv; ++hv) {
      float* oh = out + (t * Hv + hv) * dv;
      cpu::gated_rms_norm(oh, z + (t * Hv + hv) * dv, layer.ssm_norm.data, dv, eps, oh);
    }
  }
  linear(layer.ssm_out, out, n, ws.o.data(), pool);  // [n][D]
}

}  // namespace boltrt

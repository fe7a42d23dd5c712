#include "model/gemma4_synth.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/synth_vocab.h"
#include "model/synth_weights.h"
#include "quant/ggml_type.h"
#include "quant/quant_mix.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt::model {

namespace {

// The per-preset rules from which any layer count is derived (shared/docs/gemma4.md §2.3, §7).
struct PresetRule {
  std::string_view name;
  int64_t n_layer;
  int64_t period;     // full-attention layer at il % period == period - 1 (and the last layer)
  int64_t shared_kv;  // at the preset's own layer count
  int64_t n_embd, n_head, head_dim_swa, head_dim_full;
  int64_t n_head_kv_swa, n_head_kv_full;
  int64_t n_ff, n_ff_shared;  // n_ff_shared != n_ff: per-layer array (double-wide MLP)
  int64_t n_embd_per_layer;
  int64_t n_expert, n_expert_used, n_ff_exp;
  bool k_eq_v_on_full, kv_on_shared_layers, tied_output;
  int64_t n_vocab, context_length, sliding_window;
};

constexpr PresetRule kPresets[] = {
    // name            L  per shr   D    H  hdS hdF kvS kvF   ff  ffSh   P  E  k  ffE  K=V kvSh tied
    // V     ctx  win
    {"tiny", 6,  3, 3, 256, 4,     64,    128,  2,   2,    512,
     512,    64, 0, 0, 0,   false, false, true, 512, 4096, 8},
    {"tiny-e2b-like", 10,   5,    5,   256,  4, 64, 128, 1, 1, 256, 512, 32, 0, 0, 0,
     false,           true, true, 512, 4096, 8},
    {"tiny-moe", 6, 3, 0, 256, 4,    64,    128,   2,   1,    256,
     256,        0, 8, 2, 128, true, false, false, 512, 4096, 8},
    {"e2b", 35,  5, 20, 1536, 8,     256,   512,  1,      1,      6144,
     12288, 256, 0, 0,  0,    false, false, true, 262144, 131072, 512},
    {"e4b", 42,  6, 18, 2560, 8,     256,   512,  2,      2,      10240,
     10240, 256, 0, 0,  0,    false, false, true, 262144, 131072, 512},
    {"26b-a4b", 30, 6,   0, 2816, 16,   256,   512,  8,      2,      2112,
     2112,      0,  128, 8, 704,  true, false, true, 262144, 262144, 1024},
    {"31b", 60, 6, 0, 5376, 32,   256,   512,  16,     4,      21504,
     21504, 0,  0, 0, 0,    true, false, true, 262144, 262144, 1024},
};

}  // namespace

std::vector<std::string> gemma4_preset_names() {
  return preset_names(kPresets);
}

Gemma4Config gemma4_preset(std::string_view name, int64_t n_layer) {
  const PresetRule* rule = &find_preset(kPresets, "gemma4", name);
  const int64_t L = n_layer > 0 ? n_layer : rule->n_layer;
  if (L > 512) fail("gemma4 preset '{}': {} layers, llama.cpp allows at most 512", name, L);
  Gemma4Config c;
  c.preset = std::string(name);
  c.n_embd = rule->n_embd;
  c.n_layer = L;
  c.n_head = rule->n_head;
  c.head_dim_swa = rule->head_dim_swa;
  c.head_dim_full = rule->head_dim_full;
  c.n_embd_per_layer = rule->n_embd_per_layer;
  c.n_expert = rule->n_expert;
  c.n_expert_used = rule->n_expert_used;
  c.n_ff_exp = rule->n_ff_exp;
  c.k_eq_v_on_full = rule->k_eq_v_on_full;
  c.kv_on_shared_layers = rule->kv_on_shared_layers;
  c.tied_output = rule->tied_output;
  c.n_vocab = rule->n_vocab;
  c.context_length = rule->context_length;
  c.sliding_window = rule->sliding_window;

  c.is_swa.resize(L);
  for (int64_t il = 0; il < L; ++il) c.is_swa[il] = il % rule->period != rule->period - 1;
  c.is_swa[L - 1] = false;  // the last layer is always a full-attention layer

  // Shared KV: keep the preset's fraction, then move the boundary so that the last layer owning
  // KV is a full layer and the one before it a SWA layer (llama.cpp's reuse rule reads
  // kv_start-1 for full and kv_start-2 for SWA layers).
  if (rule->shared_kv > 0) {
    int64_t kv_start = L - (rule->shared_kv * L + rule->n_layer / 2) / rule->n_layer;
    kv_start = std::max<int64_t>(kv_start, 2);
    while (kv_start < L && !(!c.is_swa[kv_start - 1] && c.is_swa[kv_start - 2])) ++kv_start;
    c.shared_kv_layers = kv_start < L ? L - kv_start : 0;
  }
  const int64_t kv_start = L - c.shared_kv_layers;
  c.n_head_kv.resize(L);
  c.n_ff.resize(L);
  for (int64_t il = 0; il < L; ++il) {
    c.n_head_kv[il] = c.is_swa[il] ? rule->n_head_kv_swa : rule->n_head_kv_full;
    c.n_ff[il] = il >= kv_start ? rule->n_ff_shared : rule->n_ff;
  }
  c.n_head_kv_as_array = rule->n_head_kv_swa != rule->n_head_kv_full;
  c.n_ff_as_array = rule->n_ff_shared != rule->n_ff;
  return c;
}

namespace {

using Spec = SynthTensor;

void apply_quant_mix(std::vector<Spec>& specs, const Gemma4Config& c, std::string_view type) {
  apply_synth_quant_mix(specs, "gemma4", c.n_layer, c.n_expert, type);
}

std::vector<Spec> build_specs(const Gemma4Config& c, std::string_view file_type,
                              double block_output_scale) {
  std::vector<Spec> specs;
  const int64_t D = c.n_embd, L = c.n_layer, P = c.n_embd_per_layer;
  auto matrix = [&](std::string name, std::vector<int64_t> ne, double stddev = 0) {
    Spec s{std::move(name), std::move(ne), GgmlType::F32, {}};
    s.type = synth_matrix_type(file_type, s.ne[0]);
    s.init = WeightInit::normal(0.0, stddev > 0 ? stddev : 1.0 / std::sqrt(double(s.ne[0])));
    specs.push_back(std::move(s));
  };
  auto vec = [&](std::string name, std::vector<int64_t> ne, WeightInit init) {
    specs.push_back(Spec{std::move(name), std::move(ne), GgmlType::F32, init});
  };
  auto norm = [&](std::string name, int64_t n, double scale = 1.0) {
    vec(std::move(name), {n}, WeightInit::normal(scale, 0.1 * scale));
  };

  // Global tensors. token_embd rows have RMS 1/sqrt(D), so h = row * sqrt(D) has RMS 1.
  matrix("token_embd.weight", {D, c.n_vocab});
  if (P > 0) {
    matrix("per_layer_token_embd.weight", {P * L, c.n_vocab}, 1.0 / std::sqrt(double(P)));
    matrix("per_layer_model_proj.weight", {D, P * L});
    norm("per_layer_proj_norm.weight", P);
  }
  norm("output_norm.weight", D);
  if (!c.tied_output) matrix("output.weight", {D, c.n_vocab});
  bool any_full = std::find(c.is_swa.begin(), c.is_swa.end(), false) != c.is_swa.end();
  if (any_full) {
    int64_t rotating = static_cast<int64_t>(c.partial_rotary * c.head_dim_full / 2);
    vec("rope_freqs.weight", {c.head_dim_full / 2}, WeightInit::rope_freqs(rotating));
  }

  const int64_t kv_start = L - c.shared_kv_layers;
  for (int64_t il = 0; il < L; ++il) {
    auto n = [&](std::string_view part) { return fmt::format("blk.{}.{}", il, part); };
    const bool swa = c.is_swa[il];
    const int64_t hd = swa ? c.head_dim_swa : c.head_dim_full;
    const int64_t hkv = c.n_head_kv[il];
    const bool has_kv = il < kv_start;
    // Q and K are RMS-normalised per head; norm weights of hd^-1/4 keep q.k (attention scale
    // 1.0) at unit variance instead of sqrt(hd), so the softmax is neither flat nor one-hot.
    const double qk_norm = 1.0 / std::sqrt(std::sqrt(double(hd)));
    norm(n("attn_norm.weight"), D);
    matrix(n("attn_q.weight"), {D, c.n_head * hd});
    norm(n("attn_q_norm.weight"), hd, qk_norm);
    if (has_kv || c.kv_on_shared_layers) {
      matrix(n("attn_k.weight"), {D, hkv * hd});
      norm(n("attn_k_norm.weight"), hd, qk_norm);
      if (swa || !c.k_eq_v_on_full) matrix(n("attn_v.weight"), {D, hkv * hd});
    }
    matrix(n("attn_output.weight"), {c.n_head * hd, D});
    norm(n("post_attention_norm.weight"), D, block_output_scale);
    norm(n("ffn_norm.weight"), D);
    matrix(n("ffn_gate.weight"), {D, c.n_ff[il]});
    matrix(n("ffn_up.weight"), {D, c.n_ff[il]});
    matrix(n("ffn_down.weight"), {c.n_ff[il], D});
    norm(n("post_ffw_norm.weight"), D, block_output_scale);
    if (c.n_expert > 0) {
      // Router input is RMSNorm(h)/sqrt(D) (RMS 1/sqrt(D)); std 2 weights give router logits
      // of std ~2, so the top-k choice is well separated (no near-ties between engines).
      Spec router{
          n("ffn_gate_inp.weight"), {D, c.n_expert}, GgmlType::F32, WeightInit::normal(0.0, 2.0)};
      specs.push_back(router);
      norm(n("ffn_gate_inp.scale"), D);
      norm(n("pre_ffw_norm_2.weight"), D);
      norm(n("post_ffw_norm_1.weight"), D);
      norm(n("post_ffw_norm_2.weight"), D);
      if (c.split_experts) {
        matrix(n("ffn_gate_exps.weight"), {D, c.n_ff_exp, c.n_expert});
        matrix(n("ffn_up_exps.weight"), {D, c.n_ff_exp, c.n_expert});
      } else {
        matrix(n("ffn_gate_up_exps.weight"), {D, 2 * c.n_ff_exp, c.n_expert});
      }
      matrix(n("ffn_down_exps.weight"), {c.n_ff_exp, D, c.n_expert});
      norm(n("ffn_down_exps.scale"), c.n_expert);
    }
    if (P > 0) {
      matrix(n("inp_gate.weight"), {D, P});
      matrix(n("proj.weight"), {P, D});
      norm(n("post_norm.weight"), D, block_output_scale);
    }
    norm(n("layer_output_scale.weight"), 1, 1.0);
  }
  if (!synth_uniform_type(file_type)) apply_quant_mix(specs, c, file_type);
  return specs;
}

void check_config(const Gemma4Config& c) {
  auto need = [&](bool ok, std::string_view what) {
    if (!ok) fail("gemma4 synth config '{}': {}", c.preset, what);
  };
  need(c.n_layer >= 1 && c.n_layer <= 512, "block count must be 1..512");
  need(c.n_embd > 0 && c.n_head > 0 && c.head_dim_swa > 0 && c.head_dim_full > 0,
       "sizes must be > 0");
  need(c.head_dim_full % 2 == 0 && c.head_dim_swa % 2 == 0, "head dims must be even");
  need(static_cast<int64_t>(c.is_swa.size()) == c.n_layer, "sliding_window_pattern length != L");
  need(static_cast<int64_t>(c.n_head_kv.size()) == c.n_layer, "head_count_kv length != L");
  need(static_cast<int64_t>(c.n_ff.size()) == c.n_layer, "feed_forward_length length != L");
  for (int64_t il = 0; il < c.n_layer; ++il) {
    need(c.n_head_kv[il] > 0 && c.n_head % c.n_head_kv[il] == 0,
         "head_count must be a multiple of head_count_kv");
  }
  need(c.shared_kv_layers >= 0 && c.shared_kv_layers < c.n_layer, "shared_kv_layers must be < L");
  if (c.shared_kv_layers > 0) {
    int64_t s = c.n_layer - c.shared_kv_layers;
    need(s >= 2 && !c.is_swa[s - 1] && c.is_swa[s - 2],
         "the two layers before the shared ones must be SWA then full");
  }
  need(c.n_expert == 0 || (c.n_expert_used > 0 && c.n_expert_used <= c.n_expert && c.n_ff_exp > 0),
       "expert counts inconsistent");
  need(c.n_vocab > 0 && c.context_length > 0 && c.sliding_window > 0,
       "vocab/context/window must be > 0");
}

}  // namespace

namespace {

// Fills `w` with the model's metadata and lazily produced tensors; nothing is generated until
// the writer runs the producers. `pool` must outlive the writer's write().
Gemma4SynthStats prepare(const Gemma4Config& c, const Gemma4SynthOptions& options, gguf::Writer& w,
                         std::unique_ptr<ThreadPool>& pool) {
  check_config(c);
  const uint32_t file_type = synth_file_type(options.type);

  // Vocabulary first: it fixes n_vocab.
  SynthVocab vocab;
  std::unique_ptr<gguf::File> vocab_file;
  if (!options.vocab_from.empty()) {
    vocab_file = gguf::File::open(options.vocab_from);
  } else {
    vocab = build_synth_vocab(c.n_vocab);
  }
  Gemma4Config config = c;
  if (vocab_file) {
    const gguf::Array* tokens = vocab_file->get_array("tokenizer.ggml.tokens");
    if (!tokens) fail("{}: no tokenizer.ggml.tokens to copy", options.vocab_from);
    config.n_vocab = static_cast<int64_t>(tokens->items.size());
  } else {
    config.n_vocab = static_cast<int64_t>(vocab.tokens.size());
  }

  const std::string a = "gemma4.";
  w.set_string("general.architecture", "gemma4");
  w.set_string("general.name",
               fmt::format("boltrt synthetic gemma4 {} seed {}", c.preset, options.seed));
  w.set_u32("general.file_type", file_type);
  if (file_type != 0 && file_type != 1 && file_type != 32)
    w.set_u32("general.quantization_version", 2);
  w.set_u32(a + "context_length", static_cast<uint32_t>(config.context_length));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(config.n_embd));
  w.set_u32(a + "block_count", static_cast<uint32_t>(config.n_layer));
  if (config.n_ff_as_array) {
    std::vector<int32_t> ff(config.n_ff.begin(), config.n_ff.end());
    w.set_array_i32(a + "feed_forward_length", ff);
  } else {
    w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(config.n_ff[0]));
  }
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(config.n_head));
  if (config.n_head_kv_as_array) {
    std::vector<int32_t> kv(config.n_head_kv.begin(), config.n_head_kv.end());
    w.set_array_i32(a + "attention.head_count_kv", kv);
  } else {
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(config.n_head_kv[0]));
  }
  w.set_u32(a + "attention.key_length", static_cast<uint32_t>(config.head_dim_full));
  w.set_u32(a + "attention.value_length", static_cast<uint32_t>(config.head_dim_full));
  w.set_u32(a + "attention.key_length_swa", static_cast<uint32_t>(config.head_dim_swa));
  w.set_u32(a + "attention.value_length_swa", static_cast<uint32_t>(config.head_dim_swa));
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(config.head_dim_full));
  w.set_u32(a + "rope.dimension_count_swa", static_cast<uint32_t>(config.head_dim_swa));
  w.set_f32(a + "rope.freq_base", config.rope_base_full);
  w.set_f32(a + "rope.freq_base_swa", config.rope_base_swa);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", config.rms_eps);
  w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(config.sliding_window));
  w.set_array_bool(a + "attention.sliding_window_pattern", config.is_swa);
  w.set_u32(a + "attention.shared_kv_layers", static_cast<uint32_t>(config.shared_kv_layers));
  w.set_u32(a + "embedding_length_per_layer_input", static_cast<uint32_t>(config.n_embd_per_layer));
  w.set_f32(a + "final_logit_softcapping", config.logit_softcap);
  if (config.n_expert > 0) {
    w.set_u32(a + "expert_count", static_cast<uint32_t>(config.n_expert));
    w.set_u32(a + "expert_used_count", static_cast<uint32_t>(config.n_expert_used));
    w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(config.n_ff_exp));
  }
  if (vocab_file) {
    for (const gguf::KeyValue& kv : vocab_file->metadata()) {
      if (kv.key.starts_with("tokenizer.")) w.set(kv.key, kv.value);
    }
  } else {
    write_synth_vocab(w, vocab);
  }

  std::vector<Spec> specs = build_specs(config, options.type, options.block_output_scale);
  const int threads = std::max(1, options.threads);
  if (threads > 1) pool = std::make_unique<ThreadPool>(threads);
  Gemma4SynthStats stats;
  for (const Spec& s : specs) {
    int64_t elements = 1;
    for (int64_t d : s.ne) elements *= d;
    stats.n_params += static_cast<uint64_t>(elements);
  }
  const bool random_blocks =
      options.random_blocks < 0 ? stats.n_params > 300'000'000 : options.random_blocks > 0;
  add_synth_tensors(w, specs, options.seed, random_blocks, options.zero_weights, pool);
  stats.n_tensors = specs.size();
  stats.file_bytes = w.file_size();
  stats.n_vocab = config.n_vocab;
  return stats;
}

}  // namespace

Gemma4SynthStats plan_gemma4_synth(const Gemma4Config& config, const Gemma4SynthOptions& options) {
  gguf::Writer w;
  std::unique_ptr<ThreadPool> pool;
  return prepare(config, options, w, pool);
}

Gemma4SynthStats write_gemma4_synth(const Gemma4Config& config, const Gemma4SynthOptions& options,
                                    const std::string& path) {
  gguf::Writer w;
  std::unique_ptr<ThreadPool> pool;
  Gemma4SynthStats stats = prepare(config, options, w, pool);
  w.write(path);
  return stats;
}

}  // namespace boltrt::model

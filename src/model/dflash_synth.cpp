#include "model/dflash_synth.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "gguf/gguf_writer.h"
#include "model/synth_weights.h"
#include "quant/quantize.h"
#include "util/error.h"

namespace boltrt::model {

void write_dflash_synth(const DFlashSynthTarget& target, const DFlashSynthOptions& o,
                        const std::string& path) {
  const int64_t D = target.n_embd;
  std::vector<int32_t> ids = o.target_layer_ids;
  if (ids.empty()) {
    const int64_t last = std::max<int64_t>(1, target.n_layer - 3);
    for (int64_t i = 0; i < 3; ++i) ids.push_back(static_cast<int32_t>(1 + (last - 1) * i / 2));
  }
  if (o.n_head <= 0 || o.n_head_kv <= 0 || o.n_head % o.n_head_kv != 0 || o.head_dim <= 0 ||
      o.head_dim % 2 != 0 || o.n_layer <= 0 || o.n_ff <= 0 || o.block_size < 2) {
    fail("synth-draft: bad draft shape options");
  }
  if (o.n_vocab_draft < 0 || o.n_vocab_draft > target.n_vocab) {
    fail("synth-draft: draft vocabulary {} exceeds the target's {}", o.n_vocab_draft,
         target.n_vocab);
  }
  const int32_t mask = o.mask_token >= 0 ? o.mask_token : static_cast<int32_t>(target.n_vocab - 1);

  gguf::Writer w;
  w.set_string("general.architecture", "dflash");
  w.set_string("general.name", "boltrt synthetic dflash draft");
  w.set_u32("dflash.embedding_length", static_cast<uint32_t>(D));
  w.set_u32("dflash.block_count", static_cast<uint32_t>(o.n_layer));
  w.set_u32("dflash.feed_forward_length", static_cast<uint32_t>(o.n_ff));
  w.set_u32("dflash.attention.head_count", static_cast<uint32_t>(o.n_head));
  w.set_u32("dflash.attention.head_count_kv", static_cast<uint32_t>(o.n_head_kv));
  w.set_u32("dflash.attention.key_length", static_cast<uint32_t>(o.head_dim));
  w.set_u32("dflash.attention.value_length", static_cast<uint32_t>(o.head_dim));
  w.set_f32("dflash.attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_f32("dflash.rope.freq_base", o.rope_base);
  w.set_u32("dflash.context_length", static_cast<uint32_t>(target.n_ctx_train));
  w.set_u32("dflash.block_size", static_cast<uint32_t>(o.block_size));
  std::vector<int32_t> stored;
  for (int32_t id : ids) stored.push_back(id + 1);  // llama.cpp taps layer inputs
  w.set_array_i32("dflash.target_layers", stored);
  if (o.tokenizer_from) {
    for (const gguf::KeyValue& kv : o.tokenizer_from->metadata()) {
      if (kv.key.starts_with("tokenizer.") && kv.key != "tokenizer.ggml.mask_token_id") {
        w.set(kv.key, kv.value);
      }
    }
  }
  w.set_u32("tokenizer.ggml.mask_token_id", static_cast<uint32_t>(mask));

  // Weights: one PRNG stream per tensor; matrices ~N(0, 1/in), norms ~1 +- 0.1.
  auto data = std::make_shared<std::vector<std::vector<uint8_t>>>();
  if (!can_quantize(o.matrix_type) || type_traits(o.matrix_type).block_size <= 0)
    fail("synth-draft: cannot write matrices of type {}", type_traits(o.matrix_type).name);
  auto add = [&](const std::string& name, std::vector<int64_t> ne, double mean, double stddev,
                 GgmlType type = GgmlType::F32) {
    int64_t count = 1;
    for (int64_t d : ne) count *= d;
    std::vector<float> v(static_cast<size_t>(count));
    const uint64_t seed = tensor_stream_seed(o.seed, name);
    const int64_t rows = count / ne[0];
    for (int64_t r = 0; r < rows; ++r) {
      draw_row(WeightInit::normal(mean, stddev), seed, r, v.data() + r * ne[0], ne[0]);
    }
    if (ne[0] % type_traits(type).block_size != 0) type = GgmlType::F32;
    auto& bytes = data->emplace_back(static_cast<size_t>(rows) * row_size(type, ne[0]));
    const size_t row_bytes = row_size(type, ne[0]);
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(type, v.data() + r * ne[0], bytes.data() + static_cast<size_t>(r) * row_bytes,
                   ne[0]);
    }
    w.add_tensor_data(name, type, ne, bytes.data());
  };
  auto mat = [&](const std::string& name, int64_t in, int64_t out) {
    add(name, {in, out}, 0.0, 1.0 / std::sqrt(static_cast<double>(in)), o.matrix_type);
  };
  auto norm = [&](const std::string& name, int64_t n) { add(name, {n}, 1.0, 0.1); };

  const int64_t n_taps = static_cast<int64_t>(ids.size());
  data->reserve(static_cast<size_t>(8 + 11 * o.n_layer));
  mat("fc.weight", n_taps * D, D);
  norm("enc.output_norm.weight", D);
  norm("output_norm.weight", D);
  for (int64_t il = 0; il < o.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    norm(p + "attn_norm.weight", D);
    mat(p + "attn_q.weight", D, o.n_head * o.head_dim);
    mat(p + "attn_k.weight", D, o.n_head_kv * o.head_dim);
    mat(p + "attn_v.weight", D, o.n_head_kv * o.head_dim);
    mat(p + "attn_output.weight", o.n_head * o.head_dim, D);
    norm(p + "attn_q_norm.weight", o.head_dim);
    norm(p + "attn_k_norm.weight", o.head_dim);
    norm(p + "ffn_norm.weight", D);
    mat(p + "ffn_gate.weight", D, o.n_ff);
    mat(p + "ffn_up.weight", D, o.n_ff);
    mat(p + "ffn_down.weight", o.n_ff, D);
  }
  std::vector<int64_t> d2t;
  if (o.n_vocab_draft > 0) {
    // reduced vocabulary: every other target token from 0, then the rest in order
    for (int64_t i = 0; i < target.n_vocab && static_cast<int64_t>(d2t.size()) < o.n_vocab_draft;
         i += 2) {
      d2t.push_back(i);
    }
    for (int64_t i = 1; static_cast<int64_t>(d2t.size()) < o.n_vocab_draft; i += 2) {
      d2t.push_back(i);
    }
    mat("output.weight", D, o.n_vocab_draft);
    const int64_t ne[1] = {o.n_vocab_draft};
    w.add_tensor_data("d2t", GgmlType::I64, ne, d2t.data());
  }
  w.write(path);
}

}  // namespace boltrt::model

#include "model/qwen35.h"

#include <string>
#include <string_view>

#include "gguf/gguf.h"
#include "util/error.h"

namespace boltrt {

namespace {

// Reads "qwen35.<name>" keys; a missing required key is one clear error naming the file and key.
class Metadata {
 public:
  explicit Metadata(const gguf::File& file) : file_(file) {}

  std::string key(std::string_view name) const { return "qwen35." + std::string(name); }

  int64_t required_int(std::string_view name) const {
    auto v = file_.get_int(key(name));
    if (!v) fail("{}: missing or non-integer key '{}'", file_.path(), key(name));
    return *v;
  }
  int64_t optional_int(std::string_view name, int64_t fallback) const {
    if (!file_.find(key(name))) return fallback;
    return required_int(name);
  }
  float required_float(std::string_view name) const {
    auto v = file_.get_float(key(name));
    if (!v) fail("{}: missing or non-numeric key '{}'", file_.path(), key(name));
    return static_cast<float>(*v);
  }
  float optional_float(std::string_view name, float fallback) const {
    if (!file_.find(key(name))) return fallback;
    return required_float(name);
  }
  // A key llama.cpp reads as "scalar, or array of exactly n values" (head_count,
  // feed_forward_length, recurrent_layers, rope.dimension_sections).
  std::vector<int64_t> ints(std::string_view name, int64_t n, bool required,
                            int64_t fallback) const {
    const std::string k = key(name);
    const gguf::Value* value = file_.find(k);
    if (!value) {
      if (required) fail("{}: missing key '{}'", file_.path(), k);
      return std::vector<int64_t>(static_cast<size_t>(n), fallback);
    }
    if (const gguf::Array* array = value->as_array()) {
      if (static_cast<int64_t>(array->items.size()) != n) {
        fail("{}: key '{}' has {} values, expected {}", file_.path(), k, array->items.size(), n);
      }
      std::vector<int64_t> out;
      for (const gguf::Value& item : array->items) {
        auto v = item.as_int();
        if (!v) fail("{}: key '{}' holds a non-integer value", file_.path(), k);
        out.push_back(*v);
      }
      return out;
    }
    auto v = value->as_int();
    if (!v) fail("{}: key '{}' is not an integer", file_.path(), k);
    return std::vector<int64_t>(static_cast<size_t>(n), *v);
  }

 private:
  const gguf::File& file_;
};

}  // namespace

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
  const Metadata meta(file);
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
  c.n_head_kv = file.find(meta.key("attention.head_count_kv"))
                    ? meta.ints("attention.head_count_kv", c.n_block, true, 0)
                    : c.n_head;

  // layer schedule (§2.2): an explicit recurrent_layers list wins over the interval
  c.is_gdn.assign(static_cast<size_t>(c.n_block), false);
  if (file.find(meta.key("attention.recurrent_layers"))) {
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

}  // namespace boltrt

// Tensor type selection of llama-quantize (quant-formats.md §10), for the file types in
// quant_mix.h, with its imatrix rule and its --pure / type override options.
#include "quant/quant_mix.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <regex>

#include "util/error.h"

namespace boltrt {
namespace {

struct FileTypeName {
  std::string_view name;
  FileType type;
};
constexpr FileTypeName kFileTypeNames[] = {
    {"F32", FileType::F32},       {"F16", FileType::F16},       {"BF16", FileType::BF16},
    {"Q4_0", FileType::Q4_0},     {"Q4_1", FileType::Q4_1},     {"Q5_0", FileType::Q5_0},
    {"Q5_1", FileType::Q5_1},     {"Q8_0", FileType::Q8_0},     {"Q4_K_S", FileType::Q4_K_S},
    {"Q4_K_M", FileType::Q4_K_M}, {"Q5_K_S", FileType::Q5_K_S}, {"Q5_K_M", FileType::Q5_K_M},
    {"Q6_K", FileType::Q6_K},
};

enum class Category {
  Output,
  TokenEmbd,
  AttnQkv,
  AttnKvB,
  AttnV,
  AttnK,
  AttnQ,
  AttnOutput,
  FfnUp,
  FfnGate,
  FfnDown,
  Other
};

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

Category category_of(std::string_view name) {
  if (name == "output.weight") return Category::Output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") {
    return Category::TokenEmbd;
  }
  if (contains(name, "attn_qkv.weight")) return Category::AttnQkv;
  if (contains(name, "attn_kv_b.weight")) return Category::AttnKvB;
  if (contains(name, "attn_v.weight")) return Category::AttnV;
  if (contains(name, "attn_k.weight")) return Category::AttnK;
  if (contains(name, "attn_q.weight")) return Category::AttnQ;
  if (contains(name, "attn_output.weight")) return Category::AttnOutput;
  if (contains(name, "ffn_up")) return Category::FfnUp;
  if (contains(name, "ffn_gate")) return Category::FfnGate;
  if (contains(name, "ffn_down")) return Category::FfnDown;
  return Category::Other;
}

bool is_attn_v_like(Category c) {
  return c == Category::AttnV || c == Category::AttnQkv || c == Category::AttnKvB;
}

// sscanf(name, "blk.%d.") as llama.cpp's weight ordering and layer lookup use it: the number
// after "blk." (leading spaces and a sign allowed), or nullopt.
std::optional<int> layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return std::nullopt;
  size_t i = 4;
  while (i < name.size() && std::isspace(static_cast<unsigned char>(name[i]))) ++i;
  bool negative = false;
  if (i < name.size() && (name[i] == '+' || name[i] == '-')) negative = name[i++] == '-';
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
  long long v = 0;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    v = std::min<long long>(v * 10 + (name[i] - '0'), INT_MAX);
  }
  return static_cast<int>(negative ? -v : v);
}

int n_dims_of(const TensorDesc& t) {
  for (int d = 3; d >= 1; --d) {
    if (t.ne[d] > 1) return d + 1;
  }
  return 1;
}

bool is_quantized(GgmlType t) {
  return t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16;
}

bool use_more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

struct State {
  const ModelDesc& model;
  FileType ftype;
  bool falcon;
  bool has_imatrix;
  std::optional<GgmlType> output_type;  // --output-tensor-type
  bool tied_embeddings = true;
  int n_attention_wv = 0;
  int i_attention_wv = 0;
  int i_ffn_down = 0;
};

// The mix rules (§10.2), starting from the file type's default type.
GgmlType mix_rules(State& s, const TensorDesc& t, Category category, GgmlType type) {
  const FileType f = s.ftype;
  const int64_t n_expert = std::max<int64_t>(1, s.model.n_expert);
  if (category == Category::Output || (s.tied_embeddings && category == Category::TokenEmbd)) {
    if (s.output_type) return *s.output_type;
    if (s.falcon || t.ne[0] % type_traits(type).block_size != 0) return GgmlType::Q8_0;
    return type != GgmlType::Q8_0 ? GgmlType::Q6_K : type;
  }
  if (category == Category::TokenEmbd) return type;
  if (is_attn_v_like(category)) {
    if ((f == FileType::Q4_K_M || f == FileType::Q5_K_M) &&
        use_more_bits(s.i_attention_wv, s.n_attention_wv)) {
      type = GgmlType::Q6_K;
    } else if (f == FileType::Q4_K_S && s.i_attention_wv < 4) {
      type = GgmlType::Q5_K;
    }
    if (s.model.n_expert == 8) type = GgmlType::Q8_0;
    ++s.i_attention_wv;
    return type;
  }
  if (category == Category::AttnK) return s.model.n_expert == 8 ? GgmlType::Q8_0 : type;
  if (category == Category::FfnDown) {
    int i_layer = s.i_ffn_down;
    const int n_layer = static_cast<int>(s.model.n_layer);
    if (n_expert > 1) {
      const std::optional<int> layer = layer_of(t.name);
      if (!layer) fail("quantize: cannot determine the layer of tensor '{}'", t.name);
      if (*layer < 0 || *layer >= n_layer) {
        fail("quantize: tensor '{}' has layer {}, outside [0, {})", t.name, *layer, n_layer);
      }
      i_layer = *layer;
    }
    if (f == FileType::Q4_K_M) {
      if (s.falcon) {
        type = i_layer < n_layer / 16            ? GgmlType::Q6_K
               : use_more_bits(i_layer, n_layer) ? GgmlType::Q5_K
                                                 : GgmlType::Q4_K;
      } else if (use_more_bits(i_layer, n_layer)) {
        type = GgmlType::Q6_K;
      }
    } else if (f == FileType::Q5_K_M && use_more_bits(i_layer, n_layer)) {
      type = GgmlType::Q6_K;
    } else if (f == FileType::Q4_K_S && !s.falcon && i_layer < n_layer / 8) {
      type = GgmlType::Q5_K;
    } else if ((f == FileType::Q4_0 || f == FileType::Q5_0) && s.has_imatrix &&
               i_layer < n_layer / 8) {
      type = f == FileType::Q4_0 ? GgmlType::Q4_1 : GgmlType::Q5_1;
    }
    ++s.i_ffn_down;
    return type;
  }
  if (category == Category::AttnOutput && !s.falcon && s.model.n_expert == 8 &&
      (f == FileType::Q4_K_S || f == FileType::Q4_K_M)) {
    return GgmlType::Q5_K;
  }
  return type;
}

// Step 5: a row length that is not a multiple of the block size.
GgmlType shape_fallback(const TensorDesc& t, GgmlType target, bool& fell_back) {
  const int64_t ncols = t.ne[0];
  if (ncols % type_traits(target).block_size == 0) return target;
  fell_back = true;
  GgmlType result = target;
  switch (target) {
    case GgmlType::IQ4_XS:
      result = GgmlType::IQ4_NL;
      break;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
      result = GgmlType::Q4_0;
      break;
    case GgmlType::Q4_K:
      result = GgmlType::Q5_0;
      break;
    case GgmlType::Q5_K:
      result = GgmlType::Q5_1;
      break;
    case GgmlType::Q6_K:
      result = GgmlType::Q8_0;
      break;
    default:
      break;  // 32-element types stay, then become F16 below
  }
  if (ncols % type_traits(result).block_size != 0) result = GgmlType::F16;
  return result;
}

// An override that is used as given: its block size must divide the rows.
GgmlType exact_override(const TensorDesc& t, GgmlType type, std::string_view option) {
  const TypeTraits& traits = type_traits(type);
  if (t.ne[0] % traits.block_size != 0) {
    fail("quantize: {} {}: tensor '{}' has rows of {}, not a multiple of the {} block size {}",
         option, traits.name, t.name, t.ne[0], traits.name, traits.block_size);
  }
  return type;
}

using Patterns = std::vector<std::pair<std::regex, GgmlType>>;

const std::pair<std::regex, GgmlType>* first_match(const Patterns& patterns,
                                                   const std::string& name) {
  for (const auto& p : patterns) {
    if (std::regex_search(name, p.first)) return &p;
  }
  return nullptr;
}

// Steps 2-5 of §10.1 for a quantizable tensor.
GgmlType choose_type(State& s, const TensorDesc& t, const TypeOverrides& ov,
                     const Patterns& patterns, GgmlType default_type, bool& fell_back) {
  const Category category = category_of(t.name);
  if (ov.token_embedding_type && category == Category::TokenEmbd &&
      !(t.name == "per_layer_token_embd.weight" && first_match(patterns, t.name))) {
    return exact_override(t, *ov.token_embedding_type, "--token-embedding-type");
  }
  if (ov.output_type && category == Category::Output) {
    return exact_override(t, *ov.output_type, "--output-tensor-type");
  }
  if (!is_quantized(default_type)) return default_type;
  GgmlType type = default_type;
  const auto* manual = first_match(patterns, t.name);
  if (manual) {
    type = manual->second;
  } else if (!ov.pure) {
    type = mix_rules(s, t, category, type);
  }
  return shape_fallback(t, type, fell_back);
}

}  // namespace

std::optional<FileType> file_type_from_name(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "Q4_K") return FileType::Q4_K_M;  // llama-quantize's aliases
  if (upper == "Q5_K") return FileType::Q5_K_M;
  for (const auto& n : kFileTypeNames) {
    if (n.name == upper) return n.type;
  }
  return std::nullopt;
}

std::string_view file_type_name(FileType t) {
  for (const auto& n : kFileTypeNames) {
    if (n.type == t) return n.name;
  }
  return "unknown";
}

std::string file_type_names() {
  std::string out;
  for (const auto& n : kFileTypeNames) {
    if (!out.empty()) out += ", ";
    out += n.name;
  }
  return out + " (Q4_K = Q4_K_M, Q5_K = Q5_K_M)";
}

GgmlType file_type_default(FileType t) {
  switch (t) {
    case FileType::F32:
      return GgmlType::F32;
    case FileType::F16:
      return GgmlType::F16;
    case FileType::BF16:
      return GgmlType::BF16;
    case FileType::Q4_0:
      return GgmlType::Q4_0;
    case FileType::Q4_1:
      return GgmlType::Q4_1;
    case FileType::Q5_0:
      return GgmlType::Q5_0;
    case FileType::Q5_1:
      return GgmlType::Q5_1;
    case FileType::Q8_0:
      return GgmlType::Q8_0;
    case FileType::Q4_K_S:
    case FileType::Q4_K_M:
      return GgmlType::Q4_K;
    case FileType::Q5_K_S:
    case FileType::Q5_K_M:
      return GgmlType::Q5_K;
    case FileType::Q6_K:
      return GgmlType::Q6_K;
  }
  fail("quantize: file type {} is not supported", static_cast<uint32_t>(t));
}

bool tensor_allows_quantization(const TensorDesc& t) {
  if (n_dims_of(t) < 2) return false;
  const std::string_view name = t.name;
  if (!name.ends_with("weight")) return false;
  static constexpr std::string_view kExcluded[] = {
      "_norm.weight",
      "ffn_gate_inp.weight",
      "ffn_gate_tid2eid.weight",
      "altup",
      "laurel",
      "per_layer_model_proj",
      "ssm_conv1d",
      "shortconv.conv.weight",
      "indexer.k_proj.weight",
      "indexer.q_proj.weight",
      "time_mix_first.weight",
      "time_mix_w0.weight",
      "time_mix_w1.weight",
      "time_mix_w2.weight",
      "time_mix_v0.weight",
      "time_mix_v1.weight",
      "time_mix_v2.weight",
      "time_mix_a0.weight",
      "time_mix_a1.weight",
      "time_mix_a2.weight",
      "time_mix_g1.weight",
      "time_mix_g2.weight",
      "time_mix_decay_w1.weight",
      "time_mix_decay_w2.weight",
      "time_mix_lerp_fused.weight",
      "attn_rel_b.weight",
      ".position_embd",
      "sam.pos_embd",
      "sam.neck.",
      "sam.net_",
      ".rel_pos",
      ".patch_embd",
      ".patch_merger",
      "a.rvq.codebook",
      "mm.a.code_embd",
  };
  for (std::string_view part : kExcluded) {
    if (contains(name, part)) return false;
  }
  // Positional and token-type embeddings (BERT-style names).
  return name != "position_embd.weight" && name != "token_types.weight";
}

std::vector<TensorPlan> plan_quantization(const ModelDesc& model, FileType ftype, bool has_imatrix,
                                          const TypeOverrides& overrides) {
  const GgmlType default_type = file_type_default(ftype);
  Patterns patterns;
  for (const auto& [pattern, type] : overrides.tensor_types) {
    try {
      patterns.emplace_back(std::regex(pattern), type);
    } catch (const std::regex_error& e) {
      fail("quantize: --tensor-type pattern '{}' is not a valid regular expression ({})", pattern,
           e.what());
    }
  }
  std::vector<size_t> order(model.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const std::string& na = model.tensors[a].name;
    const std::string& nb = model.tensors[b].name;
    const int la = layer_of(na).value_or(-1), lb = layer_of(nb).value_or(-1);
    return la != lb ? la < lb : na < nb;
  });

  State s{model, ftype, model.arch == "falcon", has_imatrix, overrides.output_type};
  for (const TensorDesc& t : model.tensors) {
    const Category c = category_of(t.name);
    if (is_attn_v_like(c)) ++s.n_attention_wv;
    if (c == Category::Output) s.tied_embeddings = false;
  }

  std::vector<TensorPlan> plans;
  plans.reserve(order.size());
  for (size_t index : order) {
    const TensorDesc& t = model.tensors[index];
    TensorPlan p;
    p.index = index;
    p.target = t.type;
    p.quantizable = tensor_allows_quantization(t);
    if (p.quantizable) p.target = choose_type(s, t, overrides, patterns, default_type, p.fallback);
    plans.push_back(p);
  }
  return plans;
}

}  // namespace boltrt

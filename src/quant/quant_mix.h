// llama-quantize's choice of tensor types for a model file type ("Q4_K_M" etc.), reproduced from
// shared/docs/quant-formats.md §10: which tensors are quantized at all, the per-category mix
// rules (Q6_K for the output / tied embeddings, use_more_bits layers of attn_v and ffn_down, ...)
// and the fallback when a row length is not a multiple of the target's block size.
// Pure functions of the tensor list, so the Gemma 4 mixes are testable without model files.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "quant/ggml_type.h"

namespace boltrt {

// llama.cpp's llama_ftype ids (the value written to general.file_type).
enum class FileType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q8_0 = 7,
  Q5_0 = 8,
  Q5_1 = 9,
  Q4_K_S = 14,
  Q4_K_M = 15,
  Q5_K_S = 16,
  Q5_K_M = 17,
  Q6_K = 18,
  BF16 = 32,
};

// Names as llama-quantize accepts them (case-insensitive), including its aliases
// "Q4_K" = Q4_K_M and "Q5_K" = Q5_K_M. nullopt when unknown or unsupported.
std::optional<FileType> file_type_from_name(std::string_view name);
std::string_view file_type_name(FileType t);  // "Q4_K_M"
std::string file_type_names();                // comma-separated list for help texts
GgmlType file_type_default(FileType t);       // the type most tensors get

struct TensorDesc {
  std::string name;
  GgmlType type = GgmlType::F32;
  int64_t ne[4] = {1, 1, 1, 1};
};

struct ModelDesc {
  std::string arch;      // general.architecture
  int64_t n_layer = 0;   // <arch>.block_count (llama.cpp's n_layer_all)
  int64_t n_expert = 0;  // <arch>.expert_count, 0 when absent
  std::vector<TensorDesc> tensors;
};

// The user's choices that take precedence over the mix (llama-quantize's options of the same
// names, quant-formats.md §10.1 step 2), in this order of precedence:
//  * token_embedding_type: token_embd.weight and per_layer_token_embd.weight (the latter unless a
//    tensor_types pattern matches its name); exact, no shape fallback.
//  * output_type: output.weight, exact; with tied embeddings (no output.weight) and no
//    token_embedding_type it also replaces the mix's type for the token embeddings.
//  * tensor_types: (regex, type) pairs; the first pattern found anywhere in a quantizable tensor's
//    name (std::regex_search, ECMAScript) gives its type instead of the mix.
//  * pure: every other quantizable tensor gets the file type's default type (no mix rules).
// Overridden tensors still take the shape fallback, and (like `pure`) do not advance the mix's
// attn_v / ffn_down counters.
struct TypeOverrides {
  bool pure = false;
  std::optional<GgmlType> output_type;
  std::optional<GgmlType> token_embedding_type;
  std::vector<std::pair<std::string, GgmlType>> tensor_types;
};

struct TensorPlan {
  size_t index = 0;  // into ModelDesc::tensors
  GgmlType target = GgmlType::F32;
  bool quantizable = false;  // false: copied unchanged
  bool fallback = false;     // the mix's type did not fit the row length
};

// The tensors in the order llama.cpp writes them (non-layer tensors first, then by layer number,
// then by name) with the type each one gets. Throws boltrt::Error for a tensor whose layer
// number is out of range in a MoE model (as llama.cpp does).
// has_imatrix: an importance matrix is used, which changes one rule (Q4_0/Q5_0 files get
// Q4_1/Q5_1 for ffn_down in the first n_layer/8 layers).
// Throws boltrt::Error for an invalid tensor_types pattern, or for an exact override
// (token_embedding_type, output_type) whose block size does not divide the tensor's rows.
std::vector<TensorPlan> plan_quantization(const ModelDesc& model, FileType ftype,
                                          bool has_imatrix = false,
                                          const TypeOverrides& overrides = {});

// Whether llama-quantize would quantize this tensor at all (§10.1 step 1).
bool tensor_allows_quantization(const TensorDesc& t);

}  // namespace boltrt

// llama-quantize's type overrides in plan_quantization (quant-formats.md §10.1 step 2):
// --pure, --output-tensor-type, --token-embedding-type and --tensor-type PATTERN=TYPE, on a
// synthetic 16-layer tensor list. Expected layer sets come from use_more_bits(i, 16) =
// i < 2 || i >= 14 || (i - 2) % 3 == 2, i.e. {0, 1, 4, 7, 10, 13, 14, 15}.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "quant/quant_mix.h"
#include "util/error.h"

namespace boltrt {
namespace {

constexpr int kLayers = 16;
const std::set<int> kMoreBits = {0, 1, 4, 7, 10, 13, 14, 15};

void add(ModelDesc& m, const std::string& name, std::initializer_list<int64_t> ne,
         GgmlType type = GgmlType::F32) {
  TensorDesc t;
  t.name = name;
  t.type = type;
  int d = 0;
  for (int64_t v : ne) t.ne[d++] = v;
  m.tensors.push_back(t);
}

// A gemma4-like list: tied embeddings unless `with_output`; ffn_down rows of 704 (not a multiple
// of 256) in layer 3 only.
ModelDesc model(bool with_output = false) {
  ModelDesc m;
  m.arch = "gemma4";
  m.n_layer = kLayers;
  add(m, "token_embd.weight", {512, 1000});
  add(m, "per_layer_token_embd.weight", {256, 1000});
  add(m, "output_norm.weight", {512});
  if (with_output) add(m, "output.weight", {512, 1000});
  for (int i = 0; i < kLayers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    add(m, b + "attn_norm.weight", {512});
    add(m, b + "attn_q.weight", {512, 512});
    add(m, b + "attn_k.weight", {512, 256});
    add(m, b + "attn_v.weight", {512, 256});
    add(m, b + "attn_output.weight", {512, 512});
    add(m, b + "ffn_up.weight", {512, 1024});
    add(m, b + "ffn_down.weight", {i == 3 ? 704 : 1024, 512});
  }
  return m;
}

std::map<std::string, GgmlType> plan(const ModelDesc& m, FileType f, const TypeOverrides& ov) {
  std::map<std::string, GgmlType> out;
  for (const TensorPlan& p : plan_quantization(m, f, false, ov)) {
    out[m.tensors[p.index].name] = p.target;
  }
  return out;
}

std::set<int> layers_with(const std::map<std::string, GgmlType>& types, const std::string& suffix,
                          GgmlType type) {
  std::set<int> layers;
  for (int i = 0; i < kLayers; ++i) {
    if (types.at("blk." + std::to_string(i) + "." + suffix) == type) layers.insert(i);
  }
  return layers;
}

TEST(QuantOverrides, NoOverridesIsTheMix) {
  const auto t = plan(model(), FileType::Q4_K_M, {});
  EXPECT_EQ(t.at("token_embd.weight"), GgmlType::Q6_K);  // tied: the output rule
  EXPECT_EQ(t.at("per_layer_token_embd.weight"), GgmlType::Q6_K);
  EXPECT_EQ(layers_with(t, "attn_v.weight", GgmlType::Q6_K), kMoreBits);
  EXPECT_EQ(t.at("blk.3.ffn_down.weight"), GgmlType::Q5_0);  // Q4_K falls back at 704
  EXPECT_EQ(t.at("blk.0.ffn_down.weight"), GgmlType::Q6_K);
  EXPECT_EQ(t.at("output_norm.weight"), GgmlType::F32);
}

TEST(QuantOverrides, PureGivesTheDefaultTypeWithShapeFallback) {
  TypeOverrides ov;
  ov.pure = true;
  const auto t = plan(model(), FileType::Q4_K_M, ov);
  for (const auto& [name, type] : t) {
    SCOPED_TRACE(name);
    if (name.find("norm") != std::string::npos) {
      EXPECT_EQ(type, GgmlType::F32);
    } else if (name == "blk.3.ffn_down.weight") {
      EXPECT_EQ(type, GgmlType::Q5_0);
    } else {
      EXPECT_EQ(type, GgmlType::Q4_K);  // tied embeddings included: no output rule
    }
  }
}

TEST(QuantOverrides, OutputTypeAppliesToTiedEmbeddingsThroughTheMix) {
  TypeOverrides ov;
  ov.output_type = GgmlType::Q8_0;
  auto t = plan(model(), FileType::Q4_K_M, ov);
  EXPECT_EQ(t.at("token_embd.weight"), GgmlType::Q8_0);
  EXPECT_EQ(t.at("per_layer_token_embd.weight"), GgmlType::Q8_0);
  EXPECT_EQ(layers_with(t, "attn_v.weight", GgmlType::Q6_K), kMoreBits);
  // With --pure the mix (and so the tied-embedding rule) is skipped.
  ov.pure = true;
  t = plan(model(), FileType::Q4_K_M, ov);
  EXPECT_EQ(t.at("token_embd.weight"), GgmlType::Q4_K);
  // Untied: output.weight takes it exactly, the embeddings keep the default type.
  ov.pure = false;
  ov.output_type = GgmlType::Q5_1;
  t = plan(model(true), FileType::Q4_K_M, ov);
  EXPECT_EQ(t.at("output.weight"), GgmlType::Q5_1);
  EXPECT_EQ(t.at("token_embd.weight"), GgmlType::Q4_K);
  // Float file types too (the override comes before the "is the default quantized" check).
  t = plan(model(true), FileType::F16, ov);
  EXPECT_EQ(t.at("output.weight"), GgmlType::Q5_1);
  EXPECT_EQ(t.at("token_embd.weight"), GgmlType::F16);
}

TEST(QuantOverrides, TokenEmbeddingTypeUnlessAPatternNamesThePerLayerTable) {
  TypeOverrides ov;
  ov.token_embedding_type = GgmlType::Q8_0;
  ov.output_type = GgmlType::Q4_0;  // does not reach the embeddings: theirs comes first
  auto t = plan(model(), FileType::Q4_K_M, ov);
  EXPECT_EQ(t.at("token_embd.weight"), GgmlType::Q8_0);
  EXPECT_EQ(t.at("per_layer_token_embd.weight"), GgmlType::Q8_0);
  ov.tensor_types = {{"per_layer", GgmlType::Q5_0}};
  t = plan(model(), FileType::Q4_K_M, ov);
  EXPECT_EQ(t.at("per_layer_token_embd.weight"), GgmlType::Q5_0);
  EXPECT_EQ(t.at("token_embd.weight"), GgmlType::Q8_0);  // only the per-layer table can be named
  ov.tensor_types = {{"^token_embd", GgmlType::Q5_0}};
  t = plan(model(), FileType::Q4_K_M, ov);
  EXPECT_EQ(t.at("token_embd.weight"), GgmlType::Q8_0);
}

TEST(QuantOverrides, FirstMatchingPatternWinsAndSkipsTheMixCounters) {
  TypeOverrides ov;
  ov.tensor_types = {{"blk\\.0\\.attn_v", GgmlType::Q8_0},
                     {"attn_(q|k)\\.", GgmlType::Q5_K},
                     {"attn_o", GgmlType::Q4_0},
                     {"ffn_down", GgmlType::Q6_K}};
  const auto t = plan(model(), FileType::Q4_K_M, ov);
  EXPECT_EQ(t.at("blk.0.attn_v.weight"), GgmlType::Q8_0);
  EXPECT_EQ(t.at("blk.5.attn_q.weight"), GgmlType::Q5_K);
  EXPECT_EQ(t.at("blk.5.attn_k.weight"), GgmlType::Q5_K);
  EXPECT_EQ(t.at("blk.5.attn_output.weight"), GgmlType::Q4_0);
  // Layer 0's attn_v did not advance the attn_v ordinal: layer k has ordinal k - 1 (n stays 16).
  std::set<int> shifted;
  for (int k = 1; k < kLayers; ++k) {
    if (kMoreBits.count(k - 1)) shifted.insert(k);
  }
  EXPECT_EQ(layers_with(t, "attn_v.weight", GgmlType::Q6_K), shifted);
  // Overrides take the shape fallback: Q6_K at 704 columns is Q8_0.
  EXPECT_EQ(t.at("blk.3.ffn_down.weight"), GgmlType::Q8_0);
  EXPECT_EQ(layers_with(t, "ffn_down.weight", GgmlType::Q6_K).size(), size_t{kLayers - 1});
  EXPECT_EQ(t.at("blk.7.ffn_up.weight"), GgmlType::Q4_K);    // no pattern: the mix
  EXPECT_EQ(t.at("blk.7.attn_norm.weight"), GgmlType::F32);  // not quantizable: no override
}

TEST(QuantOverrides, PatternsDoNothingForFloatFileTypes) {
  TypeOverrides ov;
  ov.tensor_types = {{"attn", GgmlType::Q8_0}};
  const auto t = plan(model(), FileType::F16, ov);
  EXPECT_EQ(t.at("blk.2.attn_q.weight"), GgmlType::F16);
}

TEST(QuantOverrides, BadOverridesAreOneLineErrors) {
  TypeOverrides ov;
  ov.tensor_types = {{"attn_(v", GgmlType::Q8_0}};
  try {
    plan_quantization(model(), FileType::Q4_K_M, false, ov);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'attn_(v'"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  // An exact override whose block does not divide the rows (no fallback for those).
  ModelDesc m = model();
  m.tensors[0].ne[0] = 704;
  ov = {};
  ov.token_embedding_type = GgmlType::Q4_K;
  try {
    plan_quantization(m, FileType::Q4_K_M, false, ov);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("token_embd.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("704"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace boltrt

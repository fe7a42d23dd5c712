// llama-quantize's tensor type mix for Gemma 4 shapes (quant-formats.md §10.3), on synthetic
// tensor lists built from gemma4.md §3.2 (no model file needed). The layer sets in the
// expectations are the ones §10.3 lists.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "quant/quant_mix.h"

namespace boltrt {
namespace {

void add(ModelDesc& m, const std::string& name, std::initializer_list<int64_t> ne,
         GgmlType type = GgmlType::BF16) {
  TensorDesc t;
  t.name = name;
  t.type = type;
  int d = 0;
  for (int64_t v : ne) t.ne[d++] = v;
  m.tensors.push_back(t);
}

struct Shape {
  int64_t D, L, P, n_ff, q_swa, kv_swa, q_full, kv_full;
  std::set<int> full_layers;
  bool k_eq_v;  // no attn_v on full layers
  bool moe;
};

// A gemma4 tensor list in file order (deliberately not llama.cpp's order).
ModelDesc gemma4(const Shape& s) {
  ModelDesc m;
  m.arch = "gemma4";
  m.n_layer = s.L;
  m.n_expert = s.moe ? 128 : 0;
  add(m, "token_embd.weight", {s.D, 262144});
  if (s.P > 0) {
    add(m, "per_layer_token_embd.weight", {s.P * s.L, 262144});
    add(m, "per_layer_model_proj.weight", {s.D, s.P * s.L});
    add(m, "per_layer_proj_norm.weight", {s.P}, GgmlType::F32);
  }
  add(m, "output_norm.weight", {s.D}, GgmlType::F32);
  add(m, "rope_freqs.weight", {256}, GgmlType::F32);
  for (int i = 0; i < s.L; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const bool full = s.full_layers.count(i) > 0;
    add(m, b + "attn_norm.weight", {s.D}, GgmlType::F32);
    add(m, b + "attn_q.weight", {s.D, full ? s.q_full : s.q_swa});
    add(m, b + "attn_k.weight", {s.D, full ? s.kv_full : s.kv_swa});
    if (!(full && s.k_eq_v)) add(m, b + "attn_v.weight", {s.D, full ? s.kv_full : s.kv_swa});
    add(m, b + "attn_output.weight", {full ? s.q_full : s.q_swa, s.D});
    add(m, b + "ffn_gate.weight", {s.D, s.n_ff});
    add(m, b + "ffn_up.weight", {s.D, s.n_ff});
    add(m, b + "ffn_down.weight", {s.n_ff, s.D});
    add(m, b + "layer_output_scale.weight", {1}, GgmlType::F32);
    if (s.moe) {
      add(m, b + "ffn_gate_inp.weight", {s.D, 128});
      add(m, b + "ffn_gate_inp.scale", {s.D}, GgmlType::F32);
      add(m, b + "ffn_gate_up_exps.weight", {s.D, 1408, 128});
      add(m, b + "ffn_down_exps.weight", {704, s.D, 128});
      add(m, b + "ffn_down_exps.scale", {128}, GgmlType::F32);
    }
    if (s.P > 0) {
      add(m, b + "inp_gate.weight", {s.D, s.P});
      add(m, b + "proj.weight", {s.P, s.D});
    }
  }
  return m;
}

// name -> planned type
std::map<std::string, GgmlType> plan(const ModelDesc& m, FileType f) {
  std::map<std::string, GgmlType> out;
  for (const TensorPlan& p : plan_quantization(m, f)) out[m.tensors[p.index].name] = p.target;
  return out;
}

std::set<int> layers_with(const std::map<std::string, GgmlType>& types, const std::string& suffix,
                          GgmlType type, int n_layer) {
  std::set<int> layers;
  for (int i = 0; i < n_layer; ++i) {
    auto it = types.find("blk." + std::to_string(i) + "." + suffix);
    if (it != types.end() && it->second == type) layers.insert(i);
  }
  return layers;
}

std::set<int> range(int a, int b) {  // [a, b]
  std::set<int> s;
  for (int i = a; i <= b; ++i) s.insert(i);
  return s;
}
std::set<int> join(std::set<int> a, const std::set<int>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

const Shape kE4B{2560,  42,   256, 10240, 2048, 512, 4096, 1024, {5, 11, 17, 23, 29, 35, 41},
                 false, false};
const Shape k26B{2816, 30, 0, 2112, 4096, 2048, 8192, 1024, {5, 11, 17, 23, 29}, true, true};

TEST(QuantMix, E4BQ4KM) {
  const auto t = plan(gemma4(kE4B), FileType::Q4_K_M);
  EXPECT_EQ(t.at("token_embd.weight"), GgmlType::Q6_K);  // tied embeddings take the output rule
  EXPECT_EQ(t.at("per_layer_token_embd.weight"), GgmlType::Q6_K);
  EXPECT_EQ(t.at("per_layer_model_proj.weight"), GgmlType::BF16);  // excluded: kept
  EXPECT_EQ(t.at("per_layer_proj_norm.weight"), GgmlType::F32);
  EXPECT_EQ(t.at("rope_freqs.weight"), GgmlType::F32);
  EXPECT_EQ(t.at("blk.3.layer_output_scale.weight"), GgmlType::F32);  // 1-D
  EXPECT_EQ(t.at("blk.3.attn_q.weight"), GgmlType::Q4_K);
  EXPECT_EQ(t.at("blk.3.proj.weight"), GgmlType::Q4_K);  // ne0 = 256
  EXPECT_EQ(t.at("blk.3.inp_gate.weight"), GgmlType::Q4_K);
  std::set<int> expected = join(range(0, 4), range(36, 41));
  for (int i = 7; i <= 34; i += 3) expected.insert(i);
  EXPECT_EQ(layers_with(t, "ffn_down.weight", GgmlType::Q6_K, 42), expected);
  EXPECT_EQ(layers_with(t, "ffn_down.weight", GgmlType::Q4_K, 42).size(), 42 - expected.size());
  // Every layer keeps attn_v here, so attn_v follows the same use_more_bits pattern.
  EXPECT_EQ(layers_with(t, "attn_v.weight", GgmlType::Q6_K, 42), expected);
}

TEST(QuantMix, E2BFfnDown) {
  Shape e2b{1536, 35, 256, 6144, 2048, 256, 4096, 512, {4, 9, 14, 19, 24, 29, 34}, false, false};
  const auto t = plan(gemma4(e2b), FileType::Q4_K_M);
  std::set<int> expected = join(range(0, 3), range(30, 34));
  for (int i = 6; i <= 27; i += 3) expected.insert(i);
  EXPECT_EQ(layers_with(t, "ffn_down.weight", GgmlType::Q6_K, 35), expected);
}

TEST(QuantMix, MoE26BFallbacksAndAttnVOrdinals) {
  const auto t = plan(gemma4(k26B), FileType::Q4_K_M);
  const std::set<int> more = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29};
  std::set<int> rest;
  for (int i = 0; i < 30; ++i) {
    if (!more.count(i)) rest.insert(i);
  }
  // 2112 % 256 = 64 and 704 % 256 = 192: Q6_K falls back to Q8_0, Q4_K to Q5_0.
  EXPECT_EQ(layers_with(t, "ffn_down.weight", GgmlType::Q8_0, 30), more);
  EXPECT_EQ(layers_with(t, "ffn_down.weight", GgmlType::Q5_0, 30), rest);
  EXPECT_EQ(layers_with(t, "ffn_down_exps.weight", GgmlType::Q8_0, 30), more);
  EXPECT_EQ(layers_with(t, "ffn_down_exps.weight", GgmlType::Q5_0, 30), rest);
  EXPECT_EQ(layers_with(t, "ffn_gate_up_exps.weight", GgmlType::Q4_K, 30), range(0, 29));
  EXPECT_EQ(layers_with(t, "ffn_gate_inp.weight", GgmlType::BF16, 30), range(0, 29));
  EXPECT_EQ(t.at("blk.0.ffn_gate_inp.scale"), GgmlType::F32);
  // attn_v exists on the 25 SWA layers only; use_more_bits runs over their ordinals.
  EXPECT_EQ(layers_with(t, "attn_v.weight", GgmlType::Q6_K, 30),
            (std::set<int>{0, 1, 2, 6, 9, 13, 16, 20, 24, 25, 26, 27, 28}));
  const auto q5 = plan(gemma4(k26B), FileType::Q5_K_M);
  EXPECT_EQ(layers_with(q5, "ffn_down.weight", GgmlType::Q5_1, 30), rest);
  const auto q40 = plan(gemma4(k26B), FileType::Q4_0);
  EXPECT_EQ(layers_with(q40, "ffn_down_exps.weight", GgmlType::Q4_0, 30), range(0, 29));
}

TEST(QuantMix, Dense31BAttnV) {
  std::set<int> full;
  for (int i = 5; i < 60; i += 6) full.insert(i);
  const Shape s31{5376, 60, 0, 21504, 8192, 4096, 16384, 2048, full, true, false};
  const auto t = plan(gemma4(s31), FileType::Q4_K_M);
  std::set<int> down = join(range(0, 6), range(52, 59));
  for (int i = 9; i <= 51; i += 3) down.insert(i);
  EXPECT_EQ(layers_with(t, "ffn_down.weight", GgmlType::Q6_K, 60), down);
  EXPECT_EQ(layers_with(t, "attn_v.weight", GgmlType::Q6_K, 60),
            (std::set<int>{0,  1,  2,  3,  4,  6,  9,  13, 16, 20, 24, 27, 31,
                           34, 38, 42, 45, 49, 51, 52, 54, 55, 56, 57, 58}));
}

TEST(QuantMix, Q8_0AndQ4_0) {
  const auto q8 = plan(gemma4(kE4B), FileType::Q8_0);
  EXPECT_EQ(q8.at("token_embd.weight"), GgmlType::Q8_0);
  EXPECT_EQ(q8.at("per_layer_token_embd.weight"), GgmlType::Q8_0);
  EXPECT_EQ(layers_with(q8, "ffn_down.weight", GgmlType::Q8_0, 42), range(0, 41));
  EXPECT_EQ(layers_with(q8, "attn_v.weight", GgmlType::Q8_0, 42), range(0, 41));
  const auto q4 = plan(gemma4(kE4B), FileType::Q4_0);
  EXPECT_EQ(q4.at("token_embd.weight"), GgmlType::Q6_K);
  EXPECT_EQ(layers_with(q4, "ffn_down.weight", GgmlType::Q4_0, 42), range(0, 41));
  const auto q6 = plan(gemma4(kE4B), FileType::Q6_K);
  EXPECT_EQ(layers_with(q6, "ffn_down.weight", GgmlType::Q6_K, 42), range(0, 41));
}

TEST(QuantMix, ImatrixRuleForQ4_0) {
  const ModelDesc m = gemma4(kE4B);
  std::map<std::string, GgmlType> t;
  for (const TensorPlan& p : plan_quantization(m, FileType::Q4_0, /*has_imatrix=*/true)) {
    t[m.tensors[p.index].name] = p.target;
  }
  EXPECT_EQ(layers_with(t, "ffn_down.weight", GgmlType::Q4_1, 42), range(0, 4));  // i < 42/8
  EXPECT_EQ(layers_with(t, "ffn_down.weight", GgmlType::Q4_0, 42), range(5, 41));
  EXPECT_EQ(layers_with(t, "ffn_up.weight", GgmlType::Q4_0, 42), range(0, 41));
}

TEST(QuantMix, UntiedOutputAndShapeFallbacks) {
  ModelDesc m;
  m.arch = "llama";
  m.n_layer = 1;
  add(m, "token_embd.weight", {4096, 1000});
  add(m, "output.weight", {4096, 1000});
  add(m, "blk.0.ffn_up.weight", {4000, 64});   // 4000 % 256 != 0, % 32 == 0
  add(m, "blk.0.ffn_gate.weight", {100, 64});  // not even a multiple of 32
  add(m, "blk.0.attn_q.weight", {4096, 4096});
  const auto plans = plan_quantization(m, FileType::Q4_K_M);
  std::map<std::string, TensorPlan> t;
  for (const auto& p : plans) t[m.tensors[p.index].name] = p;
  EXPECT_EQ(t["token_embd.weight"].target, GgmlType::Q4_K);  // untied: default type
  EXPECT_EQ(t["output.weight"].target, GgmlType::Q6_K);
  EXPECT_EQ(t["blk.0.ffn_up.weight"].target, GgmlType::Q5_0);
  EXPECT_TRUE(t["blk.0.ffn_up.weight"].fallback);
  EXPECT_EQ(t["blk.0.ffn_gate.weight"].target, GgmlType::F16);
  EXPECT_FALSE(t["blk.0.attn_q.weight"].fallback);
  const auto q8 = plan(m, FileType::Q8_0);
  EXPECT_EQ(q8.at("blk.0.ffn_gate.weight"), GgmlType::F16);
  EXPECT_EQ(q8.at("output.weight"), GgmlType::Q8_0);
}

TEST(QuantMix, WeightsMapOrder) {
  ModelDesc m;
  m.n_layer = 12;
  for (const char* n : {"blk.10.a.weight", "output_norm.weight", "blk.2.b.weight", "blk.2.a.weight",
                        "token_embd.weight", "blk.1.z.weight"}) {
    add(m, n, {32});
  }
  std::vector<std::string> names;
  for (const auto& p : plan_quantization(m, FileType::Q8_0))
    names.push_back(m.tensors[p.index].name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"output_norm.weight", "token_embd.weight", "blk.1.z.weight",
                                      "blk.2.a.weight", "blk.2.b.weight", "blk.10.a.weight"}));
}

TEST(QuantMix, FileTypeNames) {
  EXPECT_EQ(file_type_from_name("Q4_K_M"), FileType::Q4_K_M);
  EXPECT_EQ(file_type_from_name("q4_k"), FileType::Q4_K_M);
  EXPECT_EQ(file_type_from_name("Q6_K"), FileType::Q6_K);
  EXPECT_EQ(file_type_from_name("q8_0"), FileType::Q8_0);
  EXPECT_EQ(file_type_from_name("IQ2_XXS"), std::nullopt);
  EXPECT_EQ(static_cast<uint32_t>(FileType::Q4_K_M), 15u);
  EXPECT_EQ(file_type_name(FileType::Q4_0), "Q4_0");
}

}  // namespace
}  // namespace boltrt

// Synthetic Gemma 4 models: layouts per shared/docs/gemma4.md, determinism, weight statistics,
// every weight type, and the acceptance check: llama.cpp loads and runs every tiny preset.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gguf/gguf.h"
#include "model/gemma4_synth.h"
#include "quant/dequantize.h"
#include "support/paths.h"
#include "util/error.h"

namespace boltrt::model {
namespace {

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

std::string synth(const std::string& dir, const std::string& preset, Gemma4SynthOptions o = {},
                  const std::string& tag = "", Gemma4Config* override_config = nullptr) {
  Gemma4Config c = override_config ? *override_config : gemma4_preset(preset);
  std::string path = dir + "/" + preset + tag + "-" + o.type + ".gguf";
  write_gemma4_synth(c, o, path);
  return path;
}

std::vector<float> tensor_values(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {};
  std::vector<float> out(static_cast<size_t>(t->n_elements()));
  const int64_t rows = t->n_elements() / t->ne[0];
  const size_t rs = row_size(t->type, t->ne[0]);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t->type, f.tensor_data(*t) + r * rs, out.data() + r * t->ne[0], t->ne[0]);
  }
  return out;
}

void mean_std(const std::vector<float>& v, double& mean, double& sd) {
  double s = 0, s2 = 0;
  for (float x : v) s += x, s2 += double(x) * x;
  mean = s / v.size();
  sd = std::sqrt(std::max(0.0, s2 / v.size() - mean * mean));
}

TEST(Gemma4Synth, TinyLayout) {
  auto dir = test::scratch_dir("synth_tiny");
  auto f = gguf::File::open(synth(dir, "tiny"));
  EXPECT_EQ(f->architecture(), "gemma4");
  EXPECT_EQ(f->get_arch_int("block_count"), 6);
  EXPECT_EQ(f->get_arch_int("embedding_length"), 256);
  EXPECT_EQ(f->get_arch_int("attention.shared_kv_layers"), 3);
  EXPECT_EQ(f->get_arch_int("embedding_length_per_layer_input"), 64);
  EXPECT_EQ(f->get_arch_int("attention.key_length"), 128);
  EXPECT_EQ(f->get_arch_int("attention.key_length_swa"), 64);
  EXPECT_EQ(f->find("gemma4.attention.head_count_kv")->type, gguf::ValueType::UINT32);
  const gguf::Array* pattern = f->get_array("gemma4.attention.sliding_window_pattern");
  ASSERT_NE(pattern, nullptr);
  std::vector<bool> swa;
  for (const auto& v : pattern->items) swa.push_back(std::get<bool>(v.data));
  EXPECT_EQ(swa, (std::vector<bool>{true, true, false, true, true, false}));
  // Layers 3..5 share KV: no attn_k/attn_v there; layers 0..2 own it.
  for (int il = 0; il < 6; ++il) {
    bool own = il < 3;
    EXPECT_EQ(f->find_tensor(fmt::format("blk.{}.attn_k.weight", il)) != nullptr, own) << il;
    EXPECT_EQ(f->find_tensor(fmt::format("blk.{}.attn_v.weight", il)) != nullptr, own) << il;
    EXPECT_NE(f->find_tensor(fmt::format("blk.{}.inp_gate.weight", il)), nullptr);
    EXPECT_NE(f->find_tensor(fmt::format("blk.{}.layer_output_scale.weight", il)), nullptr);
  }
  const gguf::TensorInfo* q2 = f->find_tensor("blk.2.attn_q.weight");  // full layer
  ASSERT_NE(q2, nullptr);
  EXPECT_EQ(q2->ne[0], 256);
  EXPECT_EQ(q2->ne[1], 4 * 128);
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);  // tied
  const gguf::TensorInfo* ple = f->find_tensor("per_layer_token_embd.weight");
  ASSERT_NE(ple, nullptr);
  EXPECT_EQ(ple->ne[0], 64 * 6);
  EXPECT_EQ(ple->ne[1], 512);
  auto rope = tensor_values(*f, "rope_freqs.weight");
  ASSERT_EQ(rope.size(), 64u);
  EXPECT_EQ(rope[15], 1.0f);
  EXPECT_EQ(rope[16], 1e30f);
  // A vocabulary that tokenizes: the real Gemma 4 control ids and byte tokens.
  const gguf::Array* tokens = f->get_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens->items.size(), 512u);
  EXPECT_EQ(*tokens->items[2].as_string(), "<bos>");
  EXPECT_EQ(*tokens->items[1].as_string(), "<eos>");
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gemma4");
  EXPECT_GT(f->get_array("tokenizer.ggml.merges")->items.size(), 50u);
}

TEST(Gemma4Synth, E2bLikeLayout) {
  auto dir = test::scratch_dir("synth_e2b_like");
  auto f = gguf::File::open(synth(dir, "tiny-e2b-like"));
  const gguf::Array* ff = f->get_array("gemma4.feed_forward_length");
  ASSERT_NE(ff, nullptr);
  ASSERT_EQ(ff->items.size(), 10u);
  EXPECT_EQ(ff->type, gguf::ValueType::INT32);
  EXPECT_EQ(ff->items[4].as_int(), 256);
  EXPECT_EQ(ff->items[5].as_int(), 512);  // double-wide on the shared-KV layers
  EXPECT_EQ(f->get_arch_int("attention.shared_kv_layers"), 5);
  EXPECT_EQ(f->find_tensor("blk.7.ffn_up.weight")->ne[1], 512);
  // This variant keeps (unused) K/V weights on the shared layers.
  EXPECT_NE(f->find_tensor("blk.9.attn_k.weight"), nullptr);
  EXPECT_NE(f->find_tensor("blk.9.attn_v.weight"), nullptr);
}

TEST(Gemma4Synth, MoeLayout) {
  auto dir = test::scratch_dir("synth_moe");
  auto f = gguf::File::open(synth(dir, "tiny-moe"));
  const gguf::Array* kv = f->get_array("gemma4.attention.head_count_kv");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->items[0].as_int(), 2);
  EXPECT_EQ(kv->items[2].as_int(), 1);
  EXPECT_EQ(f->get_arch_int("expert_count"), 8);
  EXPECT_EQ(f->get_arch_int("expert_used_count"), 2);
  EXPECT_EQ(f->get_arch_int("embedding_length_per_layer_input"), 0);
  EXPECT_EQ(f->find_tensor("blk.2.attn_v.weight"), nullptr);  // K=V on full layers
  EXPECT_NE(f->find_tensor("blk.1.attn_v.weight"), nullptr);
  const gguf::TensorInfo* gu = f->find_tensor("blk.0.ffn_gate_up_exps.weight");
  ASSERT_NE(gu, nullptr);
  EXPECT_EQ(gu->ne[1], 2 * 128);
  EXPECT_EQ(gu->ne[2], 8);
  EXPECT_NE(f->find_tensor("blk.0.ffn_down_exps.scale"), nullptr);
  EXPECT_NE(f->find_tensor("blk.0.ffn_gate_inp.scale"), nullptr);
  EXPECT_NE(f->find_tensor("output.weight"), nullptr);  // untied
  EXPECT_EQ(f->find_tensor("per_layer_token_embd.weight"), nullptr);

  Gemma4Config split = gemma4_preset("tiny-moe");
  split.split_experts = true;
  auto g = gguf::File::open(synth(dir, "tiny-moe", {}, "-split", &split));
  EXPECT_EQ(g->find_tensor("blk.0.ffn_gate_up_exps.weight"), nullptr);
  EXPECT_EQ(g->find_tensor("blk.0.ffn_gate_exps.weight")->ne[1], 128);
  EXPECT_EQ(g->find_tensor("blk.0.ffn_up_exps.weight")->ne[2], 8);
}

TEST(Gemma4Synth, RealShapesMatchTheSpecTensorCounts) {
  // shared/docs/gemma4.md §3.2: 658 tensors for 26B-A4B and 833 for 31B (real files' logs).
  Gemma4SynthOptions o;
  o.type = "q4_0";
  auto moe = plan_gemma4_synth(gemma4_preset("26b-a4b"), o);
  EXPECT_EQ(moe.n_tensors, 658u);
  auto big = plan_gemma4_synth(gemma4_preset("31b"), o);
  EXPECT_EQ(big.n_tensors, 833u);
  EXPECT_EQ(big.n_vocab, 262144);
  auto e2b = gemma4_preset("e2b");
  EXPECT_EQ(e2b.shared_kv_layers, 20);
  EXPECT_EQ(e2b.n_ff[14], 6144);
  EXPECT_EQ(e2b.n_ff[15], 12288);
  auto e4b = gemma4_preset("e4b");
  EXPECT_EQ(e4b.n_layer, 42);
  EXPECT_EQ(e4b.shared_kv_layers, 18);
  for (int il = 0; il < 42; ++il) EXPECT_EQ(e4b.is_swa[il], il % 6 != 5) << il;
  // E4B: 42 x 17 + 6 = 720 (§3.2) minus attn_k, attn_k_norm, attn_v on the 18 shared layers.
  auto e4b_plan = plan_gemma4_synth(e4b, o);
  EXPECT_EQ(e4b_plan.n_tensors, 720u - 18 * 3);
  EXPECT_NEAR(double(e4b_plan.n_params), 7.46e9, 0.01e9);
  EXPECT_NEAR(double(big.n_params), 30.7e9, 0.1e9);
  EXPECT_NEAR(double(moe.n_params), 25.2e9, 0.1e9);
}

TEST(Gemma4Synth, LayerOverrideKeepsTheRules) {
  for (const auto& name : gemma4_preset_names()) {
    for (int64_t layers : {1, 2, 3, 7, 13, 40}) {
      SCOPED_TRACE(name + " " + std::to_string(layers));
      Gemma4Config c = gemma4_preset(name, layers);
      ASSERT_EQ(c.n_layer, layers);
      EXPECT_FALSE(c.is_swa.back());
      if (c.shared_kv_layers > 0) {
        int64_t s = layers - c.shared_kv_layers;
        EXPECT_FALSE(c.is_swa[s - 1]);
        EXPECT_TRUE(c.is_swa[s - 2]);
      }
      if (name.starts_with("tiny")) {
        EXPECT_NO_THROW(plan_gemma4_synth(c, {}));
      }
    }
  }
  EXPECT_THROW(gemma4_preset("nope"), Error);
  EXPECT_THROW(gemma4_preset("tiny", 513), Error);
  Gemma4SynthOptions bad;
  bad.type = "q3_k";
  EXPECT_THROW(plan_gemma4_synth(gemma4_preset("tiny"), bad), Error);
}

TEST(Gemma4Synth, DeterministicForAnySeedAndThreadCount) {
  auto dir = test::scratch_dir("synth_determinism");
  Gemma4SynthOptions a;
  a.type = "q4_k_m";
  Gemma4SynthOptions b = a;
  b.threads = 3;
  Gemma4SynthOptions c = a;
  c.seed = 2;
  auto pa = synth(dir, "tiny-moe", a, "-a");
  auto pb = synth(dir, "tiny-moe", b, "-b");
  auto pc = synth(dir, "tiny-moe", c, "-c");
  EXPECT_EQ(read_all(pa), read_all(pb));
  EXPECT_NE(read_all(pa), read_all(pc));
}

TEST(Gemma4Synth, WeightScalesKeepActivationsSane) {
  auto dir = test::scratch_dir("synth_scales");
  auto f = gguf::File::open(synth(dir, "tiny"));
  double mean, sd;
  mean_std(tensor_values(*f, "token_embd.weight"), mean, sd);
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(sd, 1.0 / 16, 0.003);  // 1/sqrt(D), D = 256
  mean_std(tensor_values(*f, "blk.0.ffn_down.weight"), mean, sd);
  EXPECT_NEAR(sd, 1.0 / std::sqrt(512.0), 0.002);  // 1/sqrt(fan_in)
  mean_std(tensor_values(*f, "blk.0.attn_norm.weight"), mean, sd);
  EXPECT_NEAR(mean, 1.0, 0.03);
  EXPECT_NEAR(sd, 0.1, 0.02);
  mean_std(tensor_values(*f, "blk.0.attn_q_norm.weight"), mean, sd);
  EXPECT_NEAR(mean, std::pow(64.0, -0.25), 0.03);  // hd^-1/4 keeps q.k at unit scale
}

TEST(Gemma4Synth, EveryWeightType) {
  auto dir = test::scratch_dir("synth_types");
  auto f32 = gguf::File::open(synth(dir, "tiny"));
  auto ref = tensor_values(*f32, "blk.1.ffn_gate.weight");
  struct Case {
    std::string type;
    GgmlType ffn_gate, attn_v_layer2, proj;
    double max_rel_rms;  // quantization error against the f32 draws
  };
  const Case cases[] = {
      {"f16", GgmlType::F16, GgmlType::F16, GgmlType::F16, 1e-3},
      {"bf16", GgmlType::BF16, GgmlType::BF16, GgmlType::BF16, 6e-3},
      {"q8_0", GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, 0.01},
      {"q4_0", GgmlType::Q4_0, GgmlType::Q4_0, GgmlType::Q4_0, 0.15},
      {"q4_k", GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q8_0, 0.15},
      {"q6_k", GgmlType::Q6_K, GgmlType::Q6_K, GgmlType::Q8_0, 0.04},
      {"q4_k_m", GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_0, 0.15},  // llama-quantize mix
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type);
    Gemma4SynthOptions o;
    o.type = c.type;
    auto f = gguf::File::open(synth(dir, "tiny", o));
    EXPECT_EQ(f->find_tensor("blk.1.ffn_gate.weight")->type, c.ffn_gate);
    // Q4_K_M gives attn_v / ffn_down Q6_K on llama-quantize's "more bits" layers (2 of 6).
    EXPECT_EQ(f->find_tensor("blk.2.attn_v.weight")->type, c.attn_v_layer2);
    EXPECT_EQ(f->find_tensor("blk.0.attn_v.weight")->type, c.ffn_gate);
    // proj has rows of P = 64: too short for K-quant blocks (uniform types fall back to Q8_0,
    // the llama-quantize mix to its own fallback, Q5_0).
    EXPECT_EQ(f->find_tensor("blk.0.proj.weight")->type, c.proj);
    EXPECT_EQ(f->find_tensor("blk.0.attn_norm.weight")->type, GgmlType::F32);
    // Small models quantize the same float draws, so they approximate the f32 model.
    auto q = tensor_values(*f, "blk.1.ffn_gate.weight");
    ASSERT_EQ(q.size(), ref.size());
    double err = 0, norm = 0;
    for (size_t i = 0; i < q.size(); ++i)
      err += (q[i] - ref[i]) * (q[i] - ref[i]), norm += ref[i] * ref[i];
    EXPECT_LT(std::sqrt(err / norm), c.max_rel_rms);
  }
  // Random blocks (what the big presets use): the requested scale, no mean bias.
  for (const char* type : {"q8_0", "q4_0", "q4_k", "q6_k"}) {
    SCOPED_TRACE(type);
    Gemma4SynthOptions o;
    o.type = type;
    o.random_blocks = 1;
    auto f = gguf::File::open(synth(dir, "tiny", o, "-random"));
    double mean, sd;
    mean_std(tensor_values(*f, "blk.1.ffn_gate.weight"), mean, sd);
    EXPECT_NEAR(sd, 1.0 / 16, 0.1 / 16);
    EXPECT_NEAR(mean, 0.0, 0.05 / 16);
  }
}

TEST(Gemma4Synth, VocabularyFromAnotherFile) {
  std::string vocab = test::source_dir() + "/tests/data/vocab/ggml-vocab-gemma-4.gguf";
  if (!std::filesystem::exists(vocab)) {
    GTEST_SKIP() << vocab << " is missing (run tools/fetch-test-data.sh)";
  }
  auto dir = test::scratch_dir("synth_vocab_from");
  Gemma4Config c = gemma4_preset("tiny", 2);
  c.n_embd_per_layer = 0;
  Gemma4SynthOptions o;
  o.type = "q4_0";
  o.vocab_from = vocab;
  std::string path = dir + "/real-vocab.gguf";
  auto stats = write_gemma4_synth(c, o, path);
  EXPECT_EQ(stats.n_vocab, 262144);
  auto f = gguf::File::open(path);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->ne[1], 262144);
  EXPECT_EQ(f->get_array("tokenizer.ggml.tokens")->items.size(), 262144u);
  EXPECT_GT(f->get_array("tokenizer.ggml.merges")->items.size(), 500000u);
}

// The acceptance check: llama.cpp loads every tiny preset (and the layout variants) and produces
// finite, non-degenerate logits for a few tokens.
TEST(Gemma4Synth, LlamaCppRunsEveryTinyPreset) {
  std::string bin = test::llama_ref_bin();
  if (bin.empty()) {
    GTEST_SKIP()
        << "llama-ref is not built (shared/tools/llama-ref/build.sh); cannot run llama_logits";
  }
  auto dir = test::scratch_dir("synth_llama");
  struct Variant {
    std::string preset, type, tag;
    bool split = false, untied = false;
  };
  const Variant variants[] = {
      {"tiny", "f32", ""},
      {"tiny-e2b-like", "f32", ""},
      {"tiny-moe", "f32", ""},
      {"tiny", "q4_k_m", "", false, true},
      {"tiny-moe", "q8_0", "-split", true, false},
      {"tiny-e2b-like", "bf16", ""},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.preset + " " + v.type + v.tag);
    Gemma4Config c = gemma4_preset(v.preset);
    c.split_experts = v.split;
    if (v.untied) c.tied_output = false;
    Gemma4SynthOptions o;
    o.type = v.type;
    std::string path = synth(dir, v.preset, o, v.tag + (v.untied ? "-untied" : ""), &c);
    std::string out;
    int rc = test::run_command(
        "LD_LIBRARY_PATH=" + bin + " " + bin + "/llama_logits " + path + " 2,17,99 2>/dev/null",
        &out);
    ASSERT_EQ(rc, 0) << out;
    std::istringstream lines(out);
    std::string line;
    int n_lines = 0;
    while (std::getline(lines, line)) {
      std::istringstream in(line);
      int pos, argmax;
      in >> pos >> argmax;
      EXPECT_EQ(pos, n_lines);
      std::vector<double> logits;
      for (double x; in >> x;) logits.push_back(x);
      ASSERT_EQ(logits.size(), 512u);
      double mean = 0, sd = 0;
      for (double x : logits) {
        ASSERT_TRUE(std::isfinite(x));
        mean += x / logits.size();
      }
      for (double x : logits) sd += (x - mean) * (x - mean) / logits.size();
      sd = std::sqrt(sd);
      EXPECT_GT(sd, 0.3) << "logits nearly constant";
      EXPECT_LT(sd, 10.0) << "logits exploded";
      ++n_lines;
    }
    EXPECT_EQ(n_lines, 3);
  }
}

}  // namespace
}  // namespace boltrt::model

namespace boltrt::model {
namespace {

// Our reader on a file llama.cpp's own writer made (llama-quantize), and our q4_k_m mix against
// the one llama-quantize picks for the same model: identical type for every tensor.
TEST(Gemma4Synth, LlamaQuantizeAgreesWithOurMixAndReadsBack) {
  std::string bin = test::llama_ref_bin();
  if (bin.empty()) {
    GTEST_SKIP()
        << "llama-ref is not built (shared/tools/llama-ref/build.sh); cannot run llama-quantize";
  }
  auto dir = test::scratch_dir("synth_llama_quantize");
  std::string f32 = synth(dir, "tiny-moe");
  std::string theirs = dir + "/llama-q4_k_m.gguf";
  std::string out;
  int rc = test::run_command(
      "LD_LIBRARY_PATH=" + bin + " " + bin + "/llama-quantize " + f32 + " " + theirs + " Q4_K_M",
      &out);
  ASSERT_EQ(rc, 0) << out;
  Gemma4SynthOptions o;
  o.type = "q4_k_m";
  auto a = gguf::File::open(theirs);
  auto b = gguf::File::open(synth(dir, "tiny-moe", o));
  EXPECT_TRUE(a->warnings().empty()) << a->warnings()[0];
  EXPECT_EQ(a->get_int("general.file_type"), b->get_int("general.file_type"));
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (const auto& t : b->tensors()) {
    const gguf::TensorInfo* u = a->find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(type_traits(u->type).name, type_traits(t.type).name) << t.name;
    for (int d = 0; d < 4; ++d) EXPECT_EQ(u->ne[d], t.ne[d]) << t.name;
  }
}

}  // namespace
}  // namespace boltrt::model

// Synthetic qwen35 GGUFs (model/qwen35_synth.h): the metadata reads back as the layout asked for,
// the tensor set is the one llama.cpp creates (§3: 14 per GDN layer, 11 per attention layer,
// 2 global + 1 untied, +4 per MTP block beyond its attention-layer tensors), the bytes do not
// depend on the thread count, and llama.cpp loads the files (when llama-ref is built).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>

#include "boltrt/error.h"
#include "gguf/gguf.h"
#include "model/qwen35.h"
#include "model/qwen35_synth.h"
#include "support/paths.h"

namespace boltrt {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST(Qwen35Synth, TinyLayoutReadsBack) {
  const std::string dir = test::scratch_dir("qwen35_synth_tiny");
  model::Qwen35SynthConfig c = model::qwen35_preset("tiny");
  c.n_nextn = 1;
  c.tied_output = false;
  model::Qwen35SynthOptions o;
  o.type = "q8_0";
  const auto stats = model::write_qwen35_synth(c, o, dir + "/m.gguf");
  auto file = gguf::File::open(dir + "/m.gguf");
  const Qwen35Config q = Qwen35Config::from_gguf(*file);
  EXPECT_EQ(q.n_embd, 256);
  EXPECT_EQ(q.n_block, 9);
  EXPECT_EQ(q.n_layer, 8);
  EXPECT_EQ(q.n_nextn, 1);
  EXPECT_EQ(q.n_gdn_layers(), 6);
  EXPECT_EQ(q.n_attn_layers(), 2);
  EXPECT_FALSE(q.is_gdn[3]);
  EXPECT_FALSE(q.is_gdn[8]);  // MTP block: attention
  EXPECT_EQ(q.ssm_n_k_head, 2);
  EXPECT_EQ(q.ssm_n_v_head, 4);
  EXPECT_EQ(q.ssm_d_state, 32);
  EXPECT_EQ(q.head_dim, 64);
  EXPECT_EQ(q.n_rot, 16);
  // 6 GDN * 14 + 2 attention * 11 + 3 global (untied) + MTP (11 + 4)
  EXPECT_EQ(stats.n_tensors, 6u * 14 + 2 * 11 + 3 + 15);
  EXPECT_EQ(file->tensors().size(), stats.n_tensors);
  ASSERT_NE(file->find_tensor("output.weight"), nullptr);
  ASSERT_NE(file->find_tensor("blk.8.nextn.eh_proj.weight"), nullptr);
  EXPECT_EQ(file->find_tensor("blk.0.attn_qkv.weight")->ne[1], 2 * 2 * 32 + 4 * 32);
  EXPECT_EQ(file->get_string("tokenizer.ggml.pre").value_or(""), "qwen35");
}

TEST(Qwen35Synth, BytesDoNotDependOnThreads) {
  const std::string dir = test::scratch_dir("qwen35_synth_threads");
  model::Qwen35SynthConfig c = model::qwen35_preset("tiny");
  model::Qwen35SynthOptions o;
  o.type = "q4_k_m";
  o.threads = 1;
  model::write_qwen35_synth(c, o, dir + "/a.gguf");
  o.threads = 2;
  model::write_qwen35_synth(c, o, dir + "/b.gguf");
  EXPECT_EQ(slurp(dir + "/a.gguf"), slurp(dir + "/b.gguf"));
}

TEST(Qwen35Synth, RealPresetsHaveTheReleasedShapes) {
  const std::string dir = test::scratch_dir("qwen35_synth_presets");
  for (const char* name : {"0.8b", "4b"}) {
    model::Qwen35SynthConfig c = model::qwen35_preset(name);
    model::Qwen35SynthOptions o;
    o.zero_weights = true;  // layout only, written sparse
    o.type = "q4_k_m";
    model::write_qwen35_synth(c, o, dir + "/m.gguf");
    auto file = gguf::File::open(dir + "/m.gguf");
    const Qwen35Config q = Qwen35Config::from_gguf(*file);
    EXPECT_EQ(q.n_attn_layers() * 3, q.n_gdn_layers()) << name;
    EXPECT_EQ(file->find_tensor("token_embd.weight")->ne[1], 248320) << name;
    const int64_t tensors = q.n_gdn_layers() * 14 + q.n_attn_layers() * 11 + 2 +
                            (file->find_tensor("output.weight") ? 1 : 0);
    EXPECT_EQ(static_cast<int64_t>(file->tensors().size()), tensors) << name;
  }
}

TEST(Qwen35Synth, BadPresetIsOneClearError) {
  EXPECT_THROW(model::qwen35_preset("70b"), Error);
}

TEST(Qwen35Synth, LlamaCppLoadsIt) {
  const std::string bin = test::llama_ref_bin();
  if (bin.empty()) GTEST_SKIP() << "llama-ref is not built (shared/tools/llama-ref/build.sh)";
  const std::string dir = test::scratch_dir("qwen35_synth_llama");
  model::Qwen35SynthConfig c = model::qwen35_preset("tiny");
  c.n_nextn = 1;
  model::write_qwen35_synth(c, {}, dir + "/m.gguf");
  std::string out;
  ASSERT_EQ(test::run_command(bin + "/llama_logits " + dir + "/m.gguf 1,2,3 1", &out), 0) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3);
}

}  // namespace
}  // namespace boltrt

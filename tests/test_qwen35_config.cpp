// Qwen35Config::from_gguf (docs/qwen35.md §2): the released 4B shape's metadata gives the
// hyper-parameters and layer schedule of §2.5, and every constraint llama.cpp imposes (§2.4) is
// one clear error rather than a crash later.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "boltrt/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/qwen35.h"

namespace {

using boltrt::Qwen35Config;
using boltrt::gguf::Writer;

// 4B metadata (§2.5): D 2560, 32 blocks, H 16 / Hkv 4, hd 256, n_rot 64, GDN Hk 16, Hv 32, dk 128
// Keys a test has already set are kept (the writer refuses duplicate keys).
void write_4b(Writer& out) {
  struct Skip {
    Writer& w;
    void set_string(const std::string& k, std::string v) {
      if (!w.has(k)) w.set_string(k, std::move(v));
    }
    void set_u32(const std::string& k, uint32_t v) {
      if (!w.has(k)) w.set_u32(k, v);
    }
    void set_f32(const std::string& k, float v) {
      if (!w.has(k)) w.set_f32(k, v);
    }
    void set_array_i32(const std::string& k, const std::vector<int32_t>& v) {
      if (!w.has(k)) w.set_array_i32(k, v);
    }
  } w{out};
  w.set_string("general.architecture", "qwen35");
  w.set_u32("qwen35.context_length", 262144);
  w.set_u32("qwen35.embedding_length", 2560);
  w.set_u32("qwen35.block_count", 32);
  w.set_u32("qwen35.feed_forward_length", 9216);
  w.set_u32("qwen35.attention.head_count", 16);
  w.set_u32("qwen35.attention.head_count_kv", 4);
  w.set_u32("qwen35.attention.key_length", 256);
  w.set_u32("qwen35.attention.value_length", 256);
  w.set_u32("qwen35.rope.dimension_count", 64);
  const std::vector<int32_t> sections{11, 11, 10, 0};
  w.set_array_i32("qwen35.rope.dimension_sections", sections);
  w.set_f32("qwen35.rope.freq_base", 1e7f);
  w.set_f32("qwen35.attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_u32("qwen35.ssm.conv_kernel", 4);
  w.set_u32("qwen35.ssm.inner_size", 4096);
  w.set_u32("qwen35.ssm.state_size", 128);
  w.set_u32("qwen35.ssm.time_step_rank", 32);
  w.set_u32("qwen35.ssm.group_count", 16);
  w.set_u32("qwen35.full_attention_interval", 4);
}

// `edit` sets its keys first; the 4B shape fills in the rest.
Qwen35Config load(const std::function<void(Writer&)>& edit) {
  Writer w;
  edit(w);
  write_4b(w);
  const std::vector<uint8_t> bytes = w.write_to_memory();
  const auto file = boltrt::gguf::File::parse(bytes, "test.gguf");
  return Qwen35Config::from_gguf(*file);
}

TEST(Qwen35Config, Released4BShape) {
  const Qwen35Config c = load([](Writer&) {});
  EXPECT_EQ(c.n_embd, 2560);
  EXPECT_EQ(c.n_layer, 32);
  EXPECT_EQ(c.n_nextn, 0);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.n_rot, 64);
  EXPECT_EQ(c.rope_sections, (std::array<int64_t, 4>{11, 11, 10, 0}));
  EXPECT_FLOAT_EQ(c.rope_base, 1e7f);
  EXPECT_EQ(c.n_head_kv[0], 4);
  EXPECT_EQ(c.conv_channels(), 2 * 16 * 128 + 4096);  // 8192
  EXPECT_EQ(c.n_gdn_layers(), 24);
  EXPECT_EQ(c.n_attn_layers(), 8);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(c.is_gdn[size_t(i)], i % 4 != 3) << i;
  // §5.1 for 4B: conv window 24 × 96 KiB, delta state 24 × 2 MiB, F16 KV 32 KiB per token
  EXPECT_EQ(c.conv_state_bytes_per_layer(), 96 * 1024);
  EXPECT_EQ(c.delta_state_bytes_per_layer(), 2 * 1024 * 1024);
  EXPECT_EQ(c.recurrent_state_bytes(), 24 * (96 * 1024 + 2 * 1024 * 1024));
  EXPECT_EQ(c.kv_bytes_per_token(2), 32 * 1024);
}

TEST(Qwen35Config, ExplicitScheduleWinsAndMtpBlocksAreAttention) {
  const Qwen35Config c = load([](Writer& w) {
    // 4 blocks, the last one MTP: trunk GDN, attention, GDN; MTP entry 0
    std::vector<uint32_t> rec{1, 0, 1, 0};
    w.set_array_u32("qwen35.attention.recurrent_layers", rec);
    w.set_u32("qwen35.nextn_predict_layers", 1);
    w.set_u32("qwen35.block_count", 4);
  });
  EXPECT_EQ(c.n_block, 4);
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.is_gdn, (std::vector<bool>{true, false, true, false}));
}

struct BadCase {
  const char* what;
  const char* message;  // a fragment of the error, so it fails for the stated reason
  std::function<void(Writer&)> edit;
};

TEST(Qwen35Config, RefusesWhatLlamaCppRefuses) {
  const std::vector<BadCase> cases = {
      {"dv != dk", "square states", [](Writer& w) { w.set_u32("qwen35.ssm.inner_size", 4000); }},
      {"Hk does not divide Hv", "dividing time_step_rank",
       [](Writer& w) { w.set_u32("qwen35.ssm.group_count", 12); }},
      {"value_length != key_length", "must equal attention.key_length",
       [](Writer& w) { w.set_u32("qwen35.attention.value_length", 128); }},
      {"odd n_rot", "must be even",
       [](Writer& w) { w.set_u32("qwen35.rope.dimension_count", 63); }},
      {"n_rot > hd", "must be even",
       [](Writer& w) { w.set_u32("qwen35.rope.dimension_count", 512); }},
      {"interval 0", "full_attention_interval = 0",
       [](Writer& w) { w.set_u32("qwen35.full_attention_interval", 0); }},
      {"only attention", "at least one Gated DeltaNet",
       [](Writer& w) { w.set_u32("qwen35.full_attention_interval", 1); }},
      {"sections of 3", "has 3 values, expected 4",
       [](Writer& w) {
         const std::vector<int32_t> s{11, 11, 10};
         w.set_array_i32("qwen35.rope.dimension_sections", s);
       }},
  };
  for (const BadCase& bad : cases) {
    try {
      load(bad.edit);
      ADD_FAILURE() << bad.what << ": loaded";
    } catch (const boltrt::Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad.message), std::string::npos)
          << bad.what << ": " << e.what();
    }
  }
}

}  // namespace

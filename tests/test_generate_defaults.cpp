// Sampler defaults from a GGUF's general.sampling.* keys.
#include <gtest/gtest.h>

#include "generate/sampling_defaults.h"
#include "gguf/gguf_writer.h"
#include "util/error.h"

namespace boltrt {
namespace {

std::unique_ptr<gguf::File> file_with(const std::function<void(gguf::Writer&)>& fill) {
  gguf::Writer writer;
  writer.set_string("general.architecture", "gemma4");
  fill(writer);
  const std::vector<uint8_t> bytes = writer.write_to_memory();
  return gguf::File::parse(bytes, "defaults.gguf");
}

TEST(SamplingDefaults, KeysReplaceBuiltInDefaults) {
  const auto file = file_with([](gguf::Writer& w) {
    w.set_f32("general.sampling.temp", 1.0f);
    w.set_i32("general.sampling.top_k", 64);
    w.set_f32("general.sampling.top_p", 0.9f);
    w.set_f32("general.sampling.min_p", 0.0f);
    w.set_i32("general.sampling.penalty_last_n", 128);
    w.set_f32("general.sampling.penalty_repeat", 1.1f);
  });
  SamplerConfig base;
  base.seed = 5;
  const SamplerConfig c = sampling_defaults_from_gguf(*file, base);
  EXPECT_EQ(c.temperature, 1.0f);
  EXPECT_EQ(c.top_k, 64);
  EXPECT_EQ(c.top_p, 0.9f);
  EXPECT_EQ(c.min_p, 0.0f);
  EXPECT_EQ(c.penalty_last_n, 128);
  EXPECT_EQ(c.repeat_penalty, 1.1f);
  EXPECT_EQ(c.seed, 5u);
}

TEST(SamplingDefaults, AbsentKeysKeepDefaults) {
  const auto file = file_with([](gguf::Writer& w) { w.set_i32("general.sampling.top_k", 20); });
  const SamplerConfig c = sampling_defaults_from_gguf(*file, SamplerConfig{});
  EXPECT_EQ(c.top_k, 20);
  EXPECT_EQ(c.temperature, SamplerConfig{}.temperature);
  EXPECT_EQ(c.top_p, SamplerConfig{}.top_p);
  EXPECT_EQ(c.min_p, SamplerConfig{}.min_p);
}

TEST(SamplingDefaults, BadValuesNameTheKey) {
  const auto wrong_type =
      file_with([](gguf::Writer& w) { w.set_string("general.sampling.top_k", "forty"); });
  try {
    sampling_defaults_from_gguf(*wrong_type, SamplerConfig{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("general.sampling.top_k"), std::string::npos) << e.what();
  }
  const auto zero_penalty =
      file_with([](gguf::Writer& w) { w.set_f32("general.sampling.penalty_repeat", 0.0f); });
  EXPECT_THROW(sampling_defaults_from_gguf(*zero_penalty, SamplerConfig{}), Error);
  const auto huge = file_with(
      [](gguf::Writer& w) { w.set_i64("general.sampling.penalty_last_n", int64_t{1} << 40); });
  EXPECT_THROW(sampling_defaults_from_gguf(*huge, SamplerConfig{}), Error);
  // A negative window switches the penalties off, as libllama clamps it.
  const auto negative =
      file_with([](gguf::Writer& w) { w.set_i32("general.sampling.penalty_last_n", -1); });
  EXPECT_EQ(sampling_defaults_from_gguf(*negative, SamplerConfig{}).penalty_last_n, 0);
}

}  // namespace
}  // namespace boltrt

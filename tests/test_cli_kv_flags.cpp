// llama.cpp's -ctk / -ctv spellings of the KV cache type, rewritten by `boltrt` main() to
// --cache-type-k / --cache-type-v: accepted on the tiny model, and a bad value fails with one
// error line.
#include <gtest/gtest.h>

#include <string>

#include "support/paths.h"

namespace boltrt {
namespace {

std::string logits_command(const std::string& kv_args) {
  return test::cli_path() + " logits -m " + test::source_dir() +
         "/models/tiny/tiny-f32.gguf -p 2,3 " + kv_args;
}

TEST(CliKvFlags, CtkCtvSelectTheCacheType) {
  std::string with_f16, with_long, with_f32;
  ASSERT_EQ(test::run_command(logits_command("-ctk f16 -ctv f16"), &with_f16), 0) << with_f16;
  ASSERT_EQ(test::run_command(logits_command("--kv-type f16"), &with_long), 0) << with_long;
  ASSERT_EQ(test::run_command(logits_command("-ctk=f32 -ctv=f32"), &with_f32), 0) << with_f32;
  // Two lines "pos argmax v0 ... v1919", the same whichever spelling chose f16.
  EXPECT_EQ(with_f16.rfind("0 ", 0), 0u) << with_f16.substr(0, 200);
  EXPECT_NE(with_f16.find("\n1 "), std::string::npos);
  EXPECT_EQ(with_f16, with_long);
}

TEST(CliKvFlags, UnknownTypeFailsWithOneLine) {
  std::string out;
  EXPECT_EQ(test::run_command(logits_command("-ctk bogus -ctv bogus"), &out), 1);
  EXPECT_EQ(out, "boltrt: error: --kv-type: 'bogus' is not one of f16, f32, q8_0, q4_0\n");
}

}  // namespace
}  // namespace boltrt

// DFlash with the target on the CUDA device (the draft model runs on the CPU and reads the
// device session's hidden-state taps): greedy output with --draft equals plain decoding on the
// device, byte for byte, because every row of a verify batch (up to 8 rows) gets the bits of a
// one-token step (gemma4_cuda.cpp: per-row GEMV arithmetic, split-KV attention per token with
// its bucket's split). The shipped tiny model and its trained draft; fixed draft lengths, so
// every round drafts. On a GPU or the CUDA emulator; skips with the reason otherwise.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/cuda_skip.h"
#include "support/paths.h"

namespace boltrt {
namespace {

using test::shell_quote;

class CudaDFlash : public ::testing::Test {
 protected:
  void SetUp() override { BOLTRT_SKIP_WITHOUT_CUDA_DEVICE(); }

  static test::CommandOutput generate(const std::string& prompt, const std::string& extra) {
    const std::string tiny = test::source_dir() + "/models/tiny/";
    return test::run_command_split(shell_quote(test::cli_path()) + " generate -m " +
                                   shell_quote(tiny + "tiny-q8_0.gguf") + " -p " +
                                   shell_quote(prompt) + " -n 32 --temp 0 --device cuda " + extra);
  }
};

TEST_F(CudaDFlash, DraftedGreedyOutputEqualsPlainDeviceDecoding) {
  const std::string draft =
      " --draft " + shell_quote(test::source_dir() + "/models/tiny/tiny-dflash.gguf");
  for (const char* prompt : {"Mr. Darcy walked"}) {
    const auto plain = generate(prompt, "");
    ASSERT_EQ(plain.status, 0) << plain.err;
    ASSERT_GT(plain.out.size(), 40u) << plain.out;
    for (const char* lengths : {"--draft-min 7 --draft-max 7", "--draft-min 3 --draft-max 3"}) {
      const auto drafted = generate(prompt, draft + " " + lengths);
      ASSERT_EQ(drafted.status, 0) << drafted.err;
      EXPECT_EQ(drafted.out, plain.out) << prompt << " with " << lengths;
      // it did draft: the acceptance line reports rounds
      EXPECT_NE(drafted.err.find("draft: "), std::string::npos) << drafted.err;
      EXPECT_EQ(drafted.err.find("over 0 rounds"), std::string::npos) << drafted.err;
    }
  }
}

}  // namespace
}  // namespace boltrt

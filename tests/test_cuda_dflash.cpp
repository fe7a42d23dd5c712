// DFlash with the target on the CUDA device (the draft model runs on the CPU and reads the
// device session's hidden-state taps): greedy output with --draft equals plain decoding on the
// device, byte for byte, because every row of a verify batch (up to 8 rows) gets the bits of a
// one-token step (gemma4_cuda.cpp: per-row GEMV arithmetic, split-KV attention per token with
// its bucket's split). The shipped tiny model and its trained draft; fixed draft lengths, so
// every round drafts. The same for a Qwen3.5 target (synthetic model and draft): its device
// session captures the taps, and every rejected tail rolls the recurrent state back through a
// device checkpoint. On a GPU or the CUDA emulator; skips with the reason otherwise.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/dflash_synth.h"
#include "model/qwen35.h"
#include "model/qwen35_synth.h"
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

TEST_F(CudaDFlash, Qwen35DraftedGreedyOutputEqualsPlainDeviceDecoding) {
  const std::string dir = test::scratch_dir("cuda_dflash_qwen35");
  const std::string target_path = dir + "/tiny.gguf", draft_path = dir + "/draft.gguf";
  model::write_qwen35_synth(model::qwen35_preset("tiny"), {}, target_path);
  {
    auto target = Qwen35Model::load(target_path);
    const Qwen35Config& c = target->config();
    model::DFlashSynthOptions o;
    o.tokenizer_from = &target->file();
    model::write_dflash_synth({c.n_embd, c.n_layer, target->n_vocab(), c.n_ctx_train}, o,
                              draft_path);
  }
  auto run = [&](const std::string& extra) {
    return test::run_command_split(
        shell_quote(test::cli_path()) + " generate -m " + shell_quote(target_path) + " -p " +
        shell_quote("hello the world is") + " -n 24 --temp 0 --device cuda --json" + extra);
  };
  const auto plain = run("");
  ASSERT_EQ(plain.status, 0) << plain.err;
  for (const char* lengths : {"--draft-min 4 --draft-max 4", "--draft-min 2 --draft-max 2"}) {
    const auto drafted = run(" --draft " + shell_quote(draft_path) + " " + lengths);
    ASSERT_EQ(drafted.status, 0) << drafted.err;
    const auto a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(drafted.out);
    EXPECT_EQ(b["tokens"], a["tokens"]) << lengths;
    EXPECT_EQ(b["text"], a["text"]) << lengths;
    ASSERT_TRUE(b.contains("draft")) << drafted.out;
    EXPECT_GT(b["draft"]["rounds"].get<int64_t>(), 0) << lengths;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace boltrt

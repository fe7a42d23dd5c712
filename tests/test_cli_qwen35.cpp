// The CLI on a qwen35 file (issue 21, step 5): `boltrt generate` greedy text equals
// llama-completion's on a synthetic model (when llama-ref is built), `batch` runs it through
// batched sequences (one forward pass per step) with the same text, and what the architecture
// cannot do (CUDA, drafts) and an architecture boltrt does not know are one clear error each.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "support/paths.h"
#include "text/utf8.h"

namespace boltrt {
namespace {

using test::shell_quote;

class CliQwen35 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("cli_qwen35");
    model_ = dir_ + "/tiny.gguf";
    const auto r =
        test::run_command_split(shell_quote(test::cli_path()) +
                                " synth --arch qwen35 --preset tiny -o " + shell_quote(model_));
    synth_error_ = r.status == 0 ? "" : r.out + r.err;
  }
  void SetUp() override { ASSERT_EQ(synth_error_, "") << "cannot synthesize the test model"; }
  static std::string boltrt(const std::string& args) {
    return shell_quote(test::cli_path()) + " " + args;
  }
  static std::string dir_, model_, synth_error_;
};
std::string CliQwen35::dir_, CliQwen35::model_, CliQwen35::synth_error_;

const char* kPrompt = "hello the world is";

TEST_F(CliQwen35, GreedyGenerateEqualsLlamaCompletion) {
  const auto ours = test::run_command_split(boltrt("generate -m " + shell_quote(model_) + " -p " +
                                                   shell_quote(kPrompt) +
                                                   " -n 24 --temp 0 -t 2 --kv-type f32 --json"));
  ASSERT_EQ(ours.status, 0) << ours.err;
  const auto doc = nlohmann::json::parse(ours.out);
  EXPECT_EQ(doc["n_tokens"].get<int>(), 24);
  const std::string bin = test::llama_ref_bin();
  if (bin.empty()) GTEST_SKIP() << "llama-ref is not built (shared/tools/llama-ref/build.sh)";
  // A complete llama-completion run ends its stdout with "\n\n" (test::run_reference).
  const auto theirs = test::run_reference(
      shell_quote(bin + "/llama-completion") + " -m " + shell_quote(model_) + " -p " +
          shell_quote(kPrompt) +
          " -n 24 --temp 0 -t 2 -ctk f32 -ctv f32 -fa off -no-cnv --no-display-prompt "
          "--no-warmup --simple-io </dev/null",
      [](const test::CommandOutput& r) {
        return r.out.size() >= 2 && r.out.compare(r.out.size() - 2, 2, "\n\n") == 0;
      });
  ASSERT_EQ(theirs.status, 0) << theirs.err;
  ASSERT_TRUE(theirs.out.size() >= 2 && theirs.out.compare(theirs.out.size() - 2, 2, "\n\n") == 0)
      << "llama-completion ended 5 runs without its last lines:\n"
      << theirs.out;
  const std::string text = theirs.out.substr(0, theirs.out.size() - 2);  // the generated text
  // llama-completion prints byte tokens as raw bytes; boltrt writes valid UTF-8 (U+FFFD).
  EXPECT_EQ(doc["text"].get<std::string>(), text::sanitize_utf8(text)) << theirs.out;
}

TEST_F(CliQwen35, BatchRunsInterleavedSequencesWithTheSameText) {
  const std::string in = dir_ + "/in.jsonl", out = dir_ + "/out.jsonl";
  std::ofstream(in) << R"({"id":"a","prompt":"hello the world is","max_tokens":8,"temperature":0})"
                    << "\n"
                    << R"({"id":"b","prompt":"the cat","max_tokens":8,"temperature":0})"
                    << "\n";
  const auto r = test::run_command_split(boltrt("batch -m " + shell_quote(model_) + " --input " +
                                                shell_quote(in) + " --output " + shell_quote(out) +
                                                " --parallel 2 -t 2 --overwrite"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream lines(out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const auto doc = nlohmann::json::parse(line);
    const std::string prompt = doc["id"] == "a" ? "hello the world is" : "the cat";
    const auto alone =
        test::run_command_split(boltrt("generate -m " + shell_quote(model_) + " -p " +
                                       shell_quote(prompt) + " -n 8 --temp 0 -t 1"));
    ASSERT_EQ(alone.status, 0) << alone.err;
    EXPECT_EQ(doc["text"].get<std::string>(), alone.out) << doc["id"];
    ++n;
  }
  EXPECT_EQ(n, 2);
}

TEST_F(CliQwen35, UnsupportedRequestsAreOneClearError) {
  auto err = [&](const std::string& args) {
    const auto r = test::run_command_split(boltrt(args));
    EXPECT_NE(r.status, 0) << args;
    return r.err;
  };
  // a draft that is not a DFlash file (drafts for qwen35 targets: test_qwen35_dflash.cpp)
  EXPECT_NE(err("generate -m " + shell_quote(model_) + " -p hi -n 2 --draft " + shell_quote(model_))
                .find("general.architecture is 'qwen35', expected 'dflash'"),
            std::string::npos);
  // the same file claiming another architecture
  const std::string other = dir_ + "/llama.gguf";
  {
    auto file = gguf::File::open(model_);
    gguf::Writer w;
    for (const gguf::KeyValue& kv : file->metadata()) {
      if (kv.key == "general.architecture") continue;
      w.set(kv.key, kv.value);
    }
    w.set_string("general.architecture", "llama");
    w.write(other);
  }
  EXPECT_NE(err("generate -m " + shell_quote(other) + " -p hi -n 2")
                .find("architecture 'llama' is not supported (supported: gemma4, qwen35)"),
            std::string::npos);
}

}  // namespace
}  // namespace boltrt

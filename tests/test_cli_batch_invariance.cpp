// Batch invariance end to end on the CPU: every output row's bits are independent of how many
// rows share a matmul, which other sequences are in the batch, how a prompt is split into
// micro-batches and the thread count. Consequences checked here with exact equality:
//   `boltrt logits` prints the same bytes for -b 1 / 3 / 7 / 512 and -t 1 / 2, for every weight
//   type the synthesizer writes and every KV type, at each SIMD level;
//   drafted greedy output (--draft) equals plain decoding for every draft length the policy can
//   pick (fixed lengths 1..15 and the adaptive one);
//   `boltrt batch --parallel N` writes the same results for every N;
//   a chat session that reuses its cached prefix answers as a fresh session does.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "boltrt/boltrt.h"
#include "support/paths.h"

namespace boltrt {
namespace {

using test::shell_quote;

namespace fs = std::filesystem;
using Outcome = test::CommandOutput;

std::string boltrt() {
  return shell_quote(test::cli_path());
}

std::string tiny(const std::string& name) {
  return test::source_dir() + "/models/tiny/" + name;
}

// 40 token ids below the tiny vocabulary's 256 (the synthesizer's tiny preset has more).
const char* kIds =
    "2,17,200,45,45,99,3,128,7,250,31,64,12,90,111,5,6,77,180,222,13,14,15,16,40,41,42,43,100,"
    "101,102,150,151,152,153,9,8,60,61,62";

class CliBatchInvariance : public ::testing::Test {
 protected:
  // One synthetic tiny-preset model per weight type (llama-quantize mixes included), and a
  // mixture-of-experts one.
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("cli_batch_invariance");
    for (const char* type :
         {"f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m", "q5_k_m", "q4_1", "q5_1"}) {
      const std::string path = dir_ + "/tiny-" + type + ".gguf";
      const Outcome r = test::run_command_split(boltrt() + " synth --preset tiny --type " + type +
                                                " -o " + shell_quote(path));
      if (r.status != 0) {
        error_ += std::string(type) + ": " + r.err;
        continue;
      }
      models_[type] = path;
    }
    // mixture of experts: tokens grouped by expert, so an expert's matmul batch depends on the
    // routing of the other tokens
    const std::string moe = dir_ + "/tiny-moe-q4_k_m.gguf";
    const Outcome r = test::run_command_split(
        boltrt() + " synth --preset tiny-moe --type q4_k_m -o " + shell_quote(moe));
    if (r.status != 0) error_ += "tiny-moe: " + r.err;
    models_["moe-q4_k_m"] = moe;
  }
  void SetUp() override { ASSERT_EQ(error_, "") << "cannot synthesize the test models"; }

  static std::string logits(const std::string& model, const std::string& args,
                            const std::string& env = "") {
    const Outcome r = test::run_command_split(env + " " + boltrt() + " logits -m " +
                                              shell_quote(model) + " -p " + kIds + " " + args);
    EXPECT_EQ(r.status, 0) << model << " " << args << ": " << r.err;
    EXPECT_FALSE(r.out.empty());
    return r.out;
  }

  // The same bytes for every micro-batch size and thread count.
  static void expect_invariant(const std::string& model, const std::string& args,
                               const std::string& env = "") {
    const std::string want = logits(model, args + " -b 1 -t 1", env);
    for (const char* split : {"-b 3 -t 2", "-b 7 -t 2", "-b 512 -t 1", "-b 512 -t 2"}) {
      EXPECT_TRUE(logits(model, args + " " + split, env) == want)
          << fs::path(model).filename().string() << " " << args << " " << split << " " << env
          << " prints other logits than -b 1 -t 1";
    }
  }

  static std::string dir_, error_;
  static std::map<std::string, std::string> models_;
};
std::string CliBatchInvariance::dir_, CliBatchInvariance::error_;
std::map<std::string, std::string> CliBatchInvariance::models_;

TEST_F(CliBatchInvariance, LogitsIndependentOfMicroBatchAndThreadsForEveryWeightType) {
  expect_invariant(tiny("tiny-f32.gguf"), "");
  expect_invariant(tiny("tiny-q8_0.gguf"), "");
  expect_invariant(tiny("tiny-q4_k.gguf"), "");
  for (const auto& [type, path] : models_) expect_invariant(path, "");
}

TEST_F(CliBatchInvariance, LogitsIndependentOfMicroBatchAndThreadsForEveryKvType) {
  for (const char* kv : {"f16", "f32", "q8_0", "q4_0"}) {
    expect_invariant(tiny("tiny-f32.gguf"), std::string("--kv-type ") + kv);
    expect_invariant(models_.at("q4_k_m"), std::string("--kv-type ") + kv);
  }
}

// The run-time dispatch picks the best level; each lower one must hold it too.
TEST_F(CliBatchInvariance, LogitsIndependentOfMicroBatchAndThreadsAtEverySimdLevel) {
  for (const char* level : {"scalar", "avx2", "neon"}) {
    const std::string env = std::string("BOLTRT_SIMD=") + level;
    expect_invariant(tiny("tiny-f32.gguf"), "", env);
    expect_invariant(models_.at("q4_k_m"), "", env);
    expect_invariant(models_.at("q8_0"), "", env);
  }
}

TEST_F(CliBatchInvariance, DraftedGreedyOutputEqualsPlainDecodingForEveryDraftLength) {
  const std::string base = boltrt() + " generate -m " + shell_quote(tiny("tiny-f32.gguf")) +
                           " -p 'Mr. Darcy walked' -n 96 --temp 0 -t 2";
  const Outcome plain = test::run_command_split(base);
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_FALSE(plain.out.empty());
  const std::string draft = " --draft " + shell_quote(tiny("tiny-dflash.gguf"));
  // fixed lengths (--draft-min = --draft-max) give every verify batch size; then the adaptive
  // policy, whose timed choice differs from run to run
  std::vector<std::string> policies;
  for (const int n : {1, 2, 3, 4, 5, 7, 8, 11, 15}) {
    const std::string len = std::to_string(n);
    policies.push_back(std::string(" --draft-max ") + len + " --draft-min " + len);
  }
  for (int i = 0; i < 3; ++i) policies.push_back("");
  for (const std::string& policy : policies) {
    const Outcome r = test::run_command_split(base + draft + policy);
    ASSERT_EQ(r.status, 0) << policy << ": " << r.err;
    EXPECT_EQ(r.out, plain.out) << "with" << policy;
  }
}

TEST_F(CliBatchInvariance, BatchResultsIndependentOfParallelSequences) {
  const std::string input = dir_ + "/requests.jsonl";
  {
    std::ofstream f(input);
    const char* prompts[] = {"Mr. Darcy walked",
                             "Elizabeth said",
                             "It is a truth",
                             "The ball at Netherfield",
                             "Jane",
                             "Lady Catherine was",
                             "Pemberley",
                             "Mrs. Bennet cried"};
    int id = 0;
    for (const char* p : prompts) {
      std::string name = "r";
      name += std::to_string(id);
      f << nlohmann::json{{"id", name}, {"prompt", p}, {"max_tokens", 24 + 5 * id}}.dump() << "\n";
      ++id;
    }
  }
  // the tiny model, and a random one whose flat distributions are full of near ties
  for (const std::string& model : {tiny("tiny-f32.gguf"), models_.at("q4_k_m")}) {
    std::map<std::string, std::string> want;
    for (const int parallel : {1, 2, 3, 5, 8}) {
      for (const std::string threads : {"1", "2"}) {
        const std::string output =
            dir_ + "/results-" + std::to_string(parallel) + "-" + threads + ".jsonl";
        const Outcome r = test::run_command_split(
            boltrt() + " batch -m " + shell_quote(model) + " --input " + shell_quote(input) +
            " --output " + shell_quote(output) + " --temp 0 --progress off --overwrite -t " +
            threads + " --parallel " + std::to_string(parallel));
        ASSERT_EQ(r.status, 0) << r.err;
        std::ifstream in(output);
        std::string line;
        std::map<std::string, std::string> got;
        while (std::getline(in, line)) {
          const auto doc = nlohmann::json::parse(line);
          got[doc.at("id").get<std::string>()] = doc.at("text").get<std::string>();
        }
        ASSERT_EQ(got.size(), 8u) << "parallel " << parallel;
        if (want.empty()) want = got;
        EXPECT_EQ(got, want) << model << ": parallel " << parallel << " threads " << threads;
      }
    }
  }
}

// A session that keeps its KV cache (the second turn reuses the first's prefix, computed with
// other micro-batches) answers exactly as a fresh session given the whole history at once.
api::Message turn(const std::string& role, const std::string& content) {
  api::Message m;
  m.role = role;
  m.content = content;
  return m;
}

TEST_F(CliBatchInvariance, ChatPrefixReuseEqualsAFreshPrefill) {
  for (const std::string& path : {tiny("tiny-f32.gguf"), models_.at("q4_k_m")}) {
    SCOPED_TRACE(path);
    const auto model = api::Model::load(path);
    api::Request first;
    first.messages = {turn("user", "Tell me about Mr. Darcy.")};
    first.max_tokens = 40;
    first.sampling.temperature = 0;
    api::Session reused(model);
    const api::Result a = reused.generate(first);
    api::Request second = first;
    second.messages.push_back(turn("assistant", a.text));
    second.messages.push_back(turn("user", "And Elizabeth?"));
    const api::Result b = reused.generate(second);
    EXPECT_LT(b.stats.prompt_evaluated, b.stats.prompt_tokens)
        << "the second turn should reuse the cached prefix";
    api::Session fresh(model);
    const api::Result c = fresh.generate(second);
    EXPECT_EQ(c.stats.prompt_evaluated, c.stats.prompt_tokens);
    EXPECT_EQ(b.tokens, c.tokens);
    EXPECT_EQ(b.text, c.text);
  }
}

}  // namespace
}  // namespace boltrt

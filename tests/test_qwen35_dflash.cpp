// DFlash drafts for a Qwen3.5 target (issue 21 item 5; llama.cpp's dflash drafts Qwen3-style
// backbones and checkpoints hybrid targets' recurrent state, shared/docs/dflash.md A3, A7): the
// draft loads against a qwen35 model (its embedding and head borrowed), the target's sessions
// capture the tapped hidden states in decode and decode_batch alike, and speculative decoding is
// lossless: greedy `generate --draft` prints the tokens plain decoding prints (every verify
// batch rolls the target back through its recurrent-state checkpoints), and `batch --draft
// --parallel 2` writes what `batch` writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/dflash.h"
#include "model/dflash_synth.h"
#include "model/qwen35.h"
#include "model/qwen35_session.h"
#include "model/qwen35_synth.h"
#include "support/paths.h"
#include "util/error.h"

namespace boltrt {
namespace {

using test::shell_quote;

class Qwen35DFlash : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("qwen35_dflash");
    target_ = dir_ + "/tiny.gguf";
    draft_ = dir_ + "/draft.gguf";
    model::write_qwen35_synth(model::qwen35_preset("tiny"), {}, target_);
    auto target = Qwen35Model::load(target_);
    const Qwen35Config& c = target->config();
    model::DFlashSynthOptions o;
    o.tokenizer_from = &target->file();
    o.block_size = 4;
    model::write_dflash_synth({c.n_embd, c.n_layer, target->n_vocab(), c.n_ctx_train}, o, draft_);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string boltrt(const std::string& args) {
    return shell_quote(test::cli_path()) + " " + args;
  }
  static std::string dir_, target_, draft_;
};
std::string Qwen35DFlash::dir_, Qwen35DFlash::target_, Qwen35DFlash::draft_;

TEST_F(Qwen35DFlash, DraftLoadsAgainstTheTargetAndSessionsCaptureTaps) {
  auto target = Qwen35Model::load(target_);
  auto draft = DFlashDraft::load(draft_, *target);
  const DFlashConfig& dc = draft->config();
  EXPECT_EQ(dc.n_embd, target->config().n_embd);
  EXPECT_EQ(draft->target().n_vocab, target->n_vocab());
  ASSERT_FALSE(dc.target_layers.empty());

  // taps of a decode() equal the same tokens' taps through decode_batch(), and the input of
  // layer 0 is the token embedding itself
  SessionOptions so;
  so.n_ctx = 64;
  const std::vector<int32_t> tokens = {5, 17, 3, 99, 42};
  const int64_t D = target->config().n_embd, T = dc.n_taps() + 1;
  std::vector<int32_t> layers = dc.target_layers;
  layers.push_back(0);
  Qwen35Session one(*target, so, nullptr), two(*target, so, nullptr);
  one.set_tap_layers(layers);
  two.set_tap_layers(layers);
  one.decode(tokens);
  Qwen35Session* sessions[] = {&two};
  const std::span<const int32_t> lists[] = {tokens};
  Qwen35Session::decode_batch(sessions, lists);
  ASSERT_EQ(one.taps().size(), tokens.size() * static_cast<size_t>(T * D));
  EXPECT_TRUE(
      std::equal(one.taps().begin(), one.taps().end(), two.taps().begin(), two.taps().end()));
  std::vector<float> embedding(static_cast<size_t>(D));
  for (size_t t = 0; t < tokens.size(); ++t) {
    const float* tap0 = one.taps().data() + (t * static_cast<size_t>(T) + dc.target_layers.size()) *
                                                static_cast<size_t>(D);
    const WeightView& e = target->token_embd();
    ASSERT_EQ(e.type, GgmlType::F32);
    const auto* row = reinterpret_cast<const float*>(static_cast<const uint8_t*>(e.data) +
                                                     static_cast<size_t>(tokens[t]) * e.row_stride);
    EXPECT_TRUE(std::equal(row, row + D, tap0)) << "token " << t;
  }
  // a rollback re-runs tokens without touching the last call's taps
  const std::vector<float> before(one.taps().begin(), one.taps().end());
  one.rollback(2);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), one.taps().begin(), one.taps().end()));
  EXPECT_THROW(one.set_tap_layers({static_cast<int32_t>(target->config().n_layer + 1)}), Error);
}

TEST_F(Qwen35DFlash, GreedyDraftingEqualsPlainDecoding) {
  const std::string common = "generate -m " + shell_quote(target_) + " -p " +
                             shell_quote("hello the world is") + " -n 40 --temp 0 -t 2 --json";
  const auto plain = test::run_command_split(boltrt(common));
  ASSERT_EQ(plain.status, 0) << plain.err;
  const auto plain_doc = nlohmann::json::parse(plain.out);
  // also a draft written by `boltrt synth-draft` for the qwen35 target
  const std::string cli_draft = dir_ + "/cli-draft.gguf";
  const auto made =
      test::run_command_split(boltrt("synth-draft --dflash-for " + shell_quote(target_) +
                                     " --block-size 6 -o " + shell_quote(cli_draft)));
  ASSERT_EQ(made.status, 0) << made.err;
  for (const std::string& policy :
       {std::string(" --draft ") + shell_quote(draft_),
        " --draft " + shell_quote(draft_) + " --draft-max 3",
        " --draft " + shell_quote(draft_) + " --draft-min 2 --draft-max 2",
        " --draft " + shell_quote(cli_draft)}) {
    const auto drafted = test::run_command_split(boltrt(common + policy));
    ASSERT_EQ(drafted.status, 0) << policy << ": " << drafted.err;
    const auto doc = nlohmann::json::parse(drafted.out);
    EXPECT_EQ(doc["tokens"], plain_doc["tokens"]) << policy;
    EXPECT_EQ(doc["text"], plain_doc["text"]) << policy;
    ASSERT_TRUE(doc.contains("draft")) << drafted.out;
    EXPECT_GT(doc["draft"]["rounds"].get<int64_t>(), 0) << policy;
    EXPECT_GT(doc["draft"]["drafted"].get<int64_t>(), 0) << policy;
  }
}

TEST_F(Qwen35DFlash, BatchWithDraftWritesWhatBatchWrites) {
  const std::string requests = dir_ + "/requests.jsonl";
  std::ofstream(requests) << R"({"id": "a", "prompt": "hello the world is", "max_tokens": 20})"
                          << "\n"
                          << R"({"id": "b", "prompt": "the cat", "max_tokens": 12})"
                          << "\n"
                          << R"({"id": "c", "prompt": "once", "max_tokens": 16})"
                          << "\n";
  auto run = [&](const std::string& extra, const std::string& out) {
    const auto r = test::run_command_split(
        boltrt("batch -m " + shell_quote(target_) + " --input " + shell_quote(requests) +
               " --output " + shell_quote(out) + " --overwrite --temp 0 -t 2" + extra));
    EXPECT_EQ(r.status, 0) << extra << ": " << r.err;
    std::map<std::string, std::string> texts;
    std::ifstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      const auto doc = nlohmann::json::parse(line);
      texts[doc["id"].get<std::string>()] = doc["text"].get<std::string>();
    }
    return texts;
  };
  const auto plain = run(" --parallel 1", dir_ + "/plain.jsonl");
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(run(" --parallel 2 --draft " + shell_quote(draft_), dir_ + "/drafted.jsonl"), plain);
}

}  // namespace
}  // namespace boltrt

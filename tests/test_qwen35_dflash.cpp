// DFlash drafts for a Qwen3.5 target (issue 21 item 5; llama.cpp's dflash drafts Qwen3-style
// backbones and checkpoints hybrid targets' recurrent state, shared/docs/dflash.md A3, A7): the
// draft loads against a qwen35 model (its embedding and head borrowed), the target's sessions
// capture the tapped hidden states in decode and decode_batch alike, and speculative decoding is
// lossless: greedy `generate --draft` prints the tokens plain decoding prints (every verify
// batch rolls the target back through its recurrent-state checkpoints), and `batch --draft
// --parallel 2` writes what `batch` writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
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

// tests/data/dflash/golden_qwen35.bin (make_golden.sh BUILD qwen35): llama.cpp v0.4.0 running
// the synthetic qwen35 target `synth --arch qwen35 --preset tiny --seed 1` with the draft
// `synth-draft --seed 1` for it: the hidden states llama.cpp tapped for an 11-token prompt and
// its draft's logits for the block after it, both contexts with f32 K/V and no flash attention.
// Our session's taps must be llama.cpp's (measured 1.5e-6, 2.5e-6 and 6.2e-6 of the largest
// value for the inputs of layers 2, 4 and 6; with llama.cpp's default f16 cache and flash
// attention the two taps after the attention layer differ by 8e-5 and 1.4e-4), and our draft fed
// llama.cpp's taps must give its logits (6e-7 relative).
TEST_F(Qwen35DFlash, TapsAndDraftLogitsMatchLlamaCpp) {
  const std::string path = test::source_dir() + "/tests/data/dflash/golden_qwen35.bin";
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr) << path;
  int32_t h[6];
  ASSERT_EQ(std::fread(h, sizeof(h), 1, f), 1u);
  const int32_t n_ctx = h[0], n_taps = h[1], n_embd = h[2], n_block = h[3], n_vocab = h[4],
                last_token = h[5];
  std::vector<int32_t> prompt(static_cast<size_t>(n_ctx));
  std::vector<float> taps(static_cast<size_t>(n_ctx * n_taps * n_embd));
  std::vector<float> want(static_cast<size_t>((n_block - 1) * n_vocab));
  ASSERT_EQ(std::fread(prompt.data(), 4, prompt.size(), f), prompt.size());
  ASSERT_EQ(std::fread(taps.data(), 4, taps.size(), f), taps.size());
  ASSERT_EQ(std::fread(want.data(), 4, want.size(), f), want.size());
  std::fclose(f);

  const std::string target_path = dir_ + "/golden-target.gguf",
                    draft_path = dir_ + "/golden-draft.gguf";
  const auto made =
      test::run_command_split(boltrt("synth --arch qwen35 --preset tiny --type f32 --seed 1 -o " +
                                     shell_quote(target_path)) +
                              " && " +
                              boltrt("synth-draft --dflash-for " + shell_quote(target_path) +
                                     " --seed 1 -o " + shell_quote(draft_path)));
  ASSERT_EQ(made.status, 0) << made.err;
  auto target = Qwen35Model::load(target_path);
  auto draft = DFlashDraft::load(draft_path, *target);
  ASSERT_EQ(draft->config().n_taps(), n_taps);
  ASSERT_EQ(target->config().n_embd, n_embd);
  ASSERT_EQ(target->n_vocab(), n_vocab);

  // taps: the inputs of the stored target layers, as llama.cpp extracts them
  SessionOptions so;
  so.n_ctx = 64;
  so.kv_type = KvType::F32;  // as the golden's target context (f32 cache, no flash attention)
  Qwen35Session session(*target, so, nullptr);
  session.set_tap_layers(draft->config().target_layers);
  const auto logits = session.decode(prompt);
  EXPECT_EQ(std::max_element(logits.begin(), logits.end()) - logits.begin(), last_token);
  // per tap: the largest |error| over the largest |value|
  ASSERT_EQ(session.taps().size(), taps.size());
  std::vector<double> tap_err(static_cast<size_t>(n_taps)), tap_abs(static_cast<size_t>(n_taps));
  for (size_t i = 0; i < taps.size(); ++i) {
    const size_t k = (i / static_cast<size_t>(n_embd)) % static_cast<size_t>(n_taps);
    tap_err[k] = std::max(tap_err[k], static_cast<double>(std::abs(session.taps()[i] - taps[i])));
    tap_abs[k] = std::max(tap_abs[k], static_cast<double>(std::abs(taps[i])));
  }
  for (size_t k = 0; k < tap_err.size(); ++k) {
    std::printf("tap %zu (input of layer %d): max |err| %.3g of max |value| %.3g\n", k,
                draft->config().target_layers[k], tap_err[k], tap_abs[k]);
  }

  std::vector<float> got(want.size());
  draft->forward(taps.data(), n_ctx, last_token, n_block, got.data(), nullptr);
  double max_err = 0, max_abs = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_err = std::max(max_err, static_cast<double>(std::abs(got[i] - want[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::abs(want[i])));
  }
  for (int32_t s = 0; s + 1 < n_block; ++s) {
    const float* g = got.data() + s * n_vocab;
    const float* w = want.data() + s * n_vocab;
    EXPECT_EQ(std::max_element(g, g + n_vocab) - g, std::max_element(w, w + n_vocab) - w)
        << "slot " << s + 1;
  }
  std::printf("draft logits vs llama.cpp: max |err| %.3g (max |logit| %.3g)\n", max_err, max_abs);
  for (size_t k = 0; k < tap_err.size(); ++k)
    EXPECT_LT(tap_err[k], 1e-5 * tap_abs[k]) << "tap " << k;
  EXPECT_LT(max_err, 1e-5 * max_abs);
}

}  // namespace
}  // namespace boltrt

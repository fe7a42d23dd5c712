// The shipped DFlash draft of the tiny model (models/tiny/tiny-dflash.gguf, trained by
// models/train/train_dflash.py) through `boltrt generate --draft`: on the demo's prompts and a
// few more, greedy speculative output must be the plain greedy output token for token, and the
// draft must actually be good, i.e. the mean number of tokens committed per verify round (bonus
// token included) must stay above a floor measured on the shipped files with margin
// (MODEL_CARD.md, "DFlash draft"). A random-weight draft of the same shape commits ~1.0 per round.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/paths.h"

namespace boltrt {
namespace {

using test::shell_quote;

namespace fs = std::filesystem;
using nlohmann::json;

const std::string& model() {
  static const std::string path = test::source_dir() + "/models/tiny/tiny-q8_0.gguf";
  return path;
}
const std::string& draft() {
  static const std::string path = test::source_dir() + "/models/tiny/tiny-dflash.gguf";
  return path;
}

json generate(const std::string& args) {
  const std::string command = shell_quote(test::cli_path()) + " generate -m " +
                              shell_quote(model()) + " -t 1 --temp 0 --json " + args;
  const test::CommandOutput r = test::run_command_split(command);
  EXPECT_EQ(r.status, 0) << command << "\n" << r.err;
  if (r.status != 0) return json::object();
  return json::parse(r.out);
}

struct Case {
  const char* args;  // prompt and length
  double floor;      // per-prompt floor of the mean acceptance length
};

// The first two are tools/demo.sh's prompts; train_dflash.py drops every training sequence whose
// prompt shares their words. Measured (fixed 7 / adaptive, 1 and 2 threads alike): 5.73 / 5.73,
// 1.48 / 1.36, 2.14 / 1.50, 5.73 / 5.73. Austen prose loops, which the draft has learnt to
// continue; the chat answers spell out the user's word, which it mostly has not.
const Case kCases[] = {
    {"-p 'It is a truth universally acknowledged, that' -n 64", 4.5},
    {"--chat --reasoning on -p 'Reverse the word: garden' -n 120", 1.2},
    {"--chat --reasoning off -p 'What is 347 + 586?' -n 48", 1.25},
    {"-p 'Emma Woodhouse, handsome, clever, and rich' -n 64", 4.5},
};

// Mean tokens per verify round over all four prompts with a fixed draft length of 7 (= block
// size - 1): measured 3.06 (128 drafted tokens accepted in 62 rounds). The adaptive length
// (DraftLengthPolicy) maximises tokens per second, not tau: it drafts shorter when a round's
// measured cost grows with its length and skips drafting where acceptance is poor, so its tau
// depends on the machine's timings (2.2-3.5 measured on these prompts with the 2026-12 CPU
// kernels): the floors bind the fixed length; the adaptive one must match plain decoding and
// draft at all (its choices are tested deterministically in test_speculative).
constexpr double kMeanFloor = 2.5;

TEST(TinyDFlash, DraftedOutputEqualsPlainAndAcceptsAboveTheFloor) {
  ASSERT_TRUE(fs::exists(model())) << model();
  ASSERT_TRUE(fs::exists(draft())) << draft();
  int64_t accepted = 0, rounds = 0, adaptive_accepted = 0, adaptive_rounds = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.args);
    const json plain = generate(c.args);
    for (const std::string mode : {"", " --draft-max 7 --draft-min 7"}) {
      SCOPED_TRACE(mode.empty() ? "adaptive draft length" : "fixed draft length 7");
      const json drafted =
          generate(std::string(c.args) + " --draft " + shell_quote(draft()) + mode);
      ASSERT_TRUE(plain.contains("tokens") && drafted.contains("draft"));
      EXPECT_EQ(drafted["tokens"], plain["tokens"]);
      EXPECT_EQ(drafted["text"], plain["text"]);
      EXPECT_EQ(drafted["finish_reason"], plain["finish_reason"]);
      const json& d = drafted["draft"];
      const double tau = d["mean_acceptance_length"].get<double>();
      if (!mode.empty()) {
        EXPECT_GE(tau, c.floor) << d.dump();
        accepted += d["accepted"].get<int64_t>();
        rounds += d["rounds"].get<int64_t>();
      } else {
        adaptive_accepted += d["accepted"].get<int64_t>();
        adaptive_rounds += d["rounds"].get<int64_t>();
      }
    }
  }
  ASSERT_GT(rounds, 0);
  const double mean = static_cast<double>(accepted + rounds) / static_cast<double>(rounds);
  EXPECT_GE(mean, kMeanFloor) << accepted << " drafted tokens accepted over " << rounds
                              << " rounds";
  ASSERT_GT(adaptive_rounds, 0);
  std::printf("adaptive draft length: %lld drafted tokens accepted over %lld rounds, tau %.2f\n",
              static_cast<long long>(adaptive_accepted), static_cast<long long>(adaptive_rounds),
              static_cast<double>(adaptive_accepted + adaptive_rounds) /
                  static_cast<double>(adaptive_rounds));
}

}  // namespace
}  // namespace boltrt

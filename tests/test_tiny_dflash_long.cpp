// The shipped tiny model with its trained DFlash draft (models/tiny/tiny-q8_0.gguf +
// tiny-dflash.gguf), in process, on long generations: for the 20 prompts of goldens.json (Austen
// openings and chats with thinking on and off), greedy speculative decoding must give the plain
// greedy tokens exactly, for 256 tokens each with end-of-generation masked (twice the model's
// 128-token sliding window, so the window rings roll back across their wrap-around many times)
// and, for four of them, until the 512-token context is full. Fixed draft length 7 on even
// prompts, the adaptive length on odd ones. Exact equality holds by construction, not by logit
// margins: a verify batch of up to 16 rows gives every row the bits of a one-token step (Q8_0:
// gemm_q8_0_exact; attention and norms per row). Before that kernel the first prompt diverged
// at position 143, where plain decoding's top two logits were 6.6e-4 apart.
// (test_cli_tiny_dflash.cpp checks the CLI and the acceptance floors on shorter runs;
// test_speculative.cpp the synthetic pairs.)
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "generate/speculative.h"
#include "model/dflash.h"
#include "model/gemma4.h"
#include "model/gemma4_session.h"
#include "support/paths.h"

namespace boltrt {
namespace {

using nlohmann::json;

GenerationVocab tiny_vocab() {
  GenerationVocab v;
  v.piece = [](int32_t) { return std::string(); };  // tokens are compared, not text
  v.end_of_generation = {1, 106};                   // <eos>, <turn|>
  return v;
}

SamplerConfig greedy() {
  SamplerConfig s;
  s.temperature = 0.0f;
  return s;
}

TEST(TinyDFlashLong, GreedyEqualsPlainFor20PromptsAcrossTheWindowAndToTheContextLimit) {
  const std::string dir = test::source_dir() + "/models/tiny/";
  std::ifstream in(dir + "goldens.json");
  ASSERT_TRUE(in) << dir << "goldens.json";
  const json goldens = json::parse(in);
  auto target = Gemma4Model::load(dir + "tiny-q8_0.gguf");
  auto draft = DFlashDraft::load(dir + "tiny-dflash.gguf", *target);
  SessionOptions so;
  so.n_ctx = 512;
  Gemma4Session plain_session(*target, so, nullptr);
  Gemma4Session spec_session(*target, so, nullptr);
  DFlashDrafter drafter(*draft, nullptr);
  Generator plain(plain_session, tiny_vocab(), greedy());

  int prompts = 0, to_context_limit = 0;
  int64_t tokens = 0;
  SpeculativeStats fixed_total;
  for (const json& g : goldens["goldens"]) {
    const auto prompt = g["prompt_ids"].get<std::vector<int32_t>>();
    SCOPED_TRACE(g["prompt"].get<std::string>());
    GenerationOptions o;
    o.ignore_end_of_generation = true;
    const bool until_full = prompts % 5 == 0;  // 4 of the 20
    o.max_tokens = until_full ? -1 : 256;
    const GenerationResult want = plain.generate(prompt, o);
    ASSERT_EQ(want.finish_reason,
              until_full ? FinishReason::kContextFull : FinishReason::kMaxTokens);
    ASSERT_GE(want.tokens.size(), 256u);

    SpeculativeOptions spec_options;
    spec_options.adaptive = prompts % 2 == 1;
    SpeculativeGenerator spec(spec_session, drafter, tiny_vocab(), greedy(), spec_options);
    const SpeculativeResult got = spec.generate(prompt, o);
    size_t same = 0;
    while (same < want.tokens.size() && same < got.generation.tokens.size() &&
           got.generation.tokens[same] == want.tokens[same])
      ++same;
    ASSERT_EQ(got.generation.tokens, want.tokens) << "first difference at generated token " << same
                                                  << " (position " << prompt.size() + same << ")";
    EXPECT_EQ(got.generation.finish_reason, want.finish_reason);
    EXPECT_GT(got.speculative.n_rounds, 0);
    if (!spec_options.adaptive) {
      fixed_total.n_rounds += got.speculative.n_rounds;
      fixed_total.n_drafted += got.speculative.n_drafted;
      fixed_total.n_accepted += got.speculative.n_accepted;
    }
    ++prompts;
    to_context_limit += until_full ? 1 : 0;
    tokens += static_cast<int64_t>(want.tokens.size());
  }
  EXPECT_EQ(prompts, 20);
  EXPECT_EQ(to_context_limit, 4);
  // A trained draft, not a random one (which commits ~1.0 tokens per round): 3.55 measured
  // (the Austen continuations loop, the chats' masked ends do not).
  EXPECT_GT(fixed_total.mean_acceptance_length(), 3.0);
  std::printf("%d prompts, %lld tokens; fixed length 7: %lld/%lld accepted, tau %.2f\n", prompts,
              static_cast<long long>(tokens), static_cast<long long>(fixed_total.n_accepted),
              static_cast<long long>(fixed_total.n_drafted), fixed_total.mean_acceptance_length());
}

}  // namespace
}  // namespace boltrt

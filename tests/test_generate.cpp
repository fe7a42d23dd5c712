// The generation loop driven by a scripted fake LanguageModel: end of generation, stop strings
// split across tokens, max tokens, context full, cancellation, UTF-8 split across tokens and
// invalid UTF-8, cache reuse, --ignore-eos masking and the TokenController hook.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "generate/text_stream.h"
#include "generate_fakes.h"
#include "util/error.h"

namespace boltrt {
namespace {

constexpr int32_t kEnd = 0;  // end-of-generation token in every test vocabulary

struct Fixture {
  std::vector<std::string> pieces;
  ScriptedModel model;
  std::unique_ptr<Generator> generator;
  std::vector<std::string> streamed;

  // pieces[0] is the end token; `script` lists the tokens to produce after the prompt.
  Fixture(std::vector<std::string> vocab_pieces, std::vector<int32_t> script, size_t prompt_size,
          int64_t n_ctx = 64)
      : pieces(std::move(vocab_pieces)), model(static_cast<int64_t>(pieces.size()), n_ctx) {
    model.next = [script, prompt_size](const std::vector<int32_t>& context) {
      const size_t produced = context.size() - prompt_size;
      return produced < script.size() ? script[produced] : kEnd;
    };
    GenerationVocab vocab;
    vocab.piece = [this](int32_t id) { return pieces[static_cast<size_t>(id)]; };
    vocab.end_of_generation = {kEnd};
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    greedy.seed = 1;
    generator = std::make_unique<Generator>(model, vocab, greedy);
  }

  GenerationResult run(const std::vector<int32_t>& prompt, GenerationOptions options = {}) {
    streamed.clear();
    options.on_text = [this](std::string_view text) { streamed.emplace_back(text); };
    GenerationResult result = generator->generate(prompt, options);
    std::string joined;
    for (const auto& s : streamed) joined += s;
    EXPECT_EQ(joined, result.text) << "streamed text differs from the result text";
    return result;
  }
};

const std::vector<std::string> kWords = {"<end>", "He", "llo", " wor", "ld", "!", "P"};

TEST(Generate, StopsAtEndOfGeneration) {
  Fixture f(kWords, {1, 2, 3, 4, 5, kEnd, 1}, 2);
  const auto result = f.run({6, 6});
  EXPECT_EQ(result.text, "Hello world!");
  EXPECT_EQ(result.finish_reason, FinishReason::kEndOfGeneration);
  EXPECT_EQ(to_string(result.finish_reason), "eog");
  EXPECT_EQ(result.tokens, (std::vector<int32_t>{1, 2, 3, 4, 5, kEnd}));
  EXPECT_EQ(result.stats.n_tokens, 6);
  EXPECT_EQ(result.stats.n_prompt_tokens, 2);
  EXPECT_EQ(result.stats.n_prompt_evaluated, 2);
  EXPECT_GE(result.stats.ttft_ms, 0.0);
  EXPECT_GE(result.stats.tokens_per_second, 0.0);
  // The prompt in one call, then one call per generated token except the end token.
  EXPECT_EQ(f.model.decode_sizes, (std::vector<int64_t>{2, 1, 1, 1, 1, 1}));
}

TEST(Generate, MaxTokens) {
  Fixture f(kWords, {1, 2, 3, 4, 5}, 1);
  GenerationOptions options;
  options.max_tokens = 2;
  const auto result = f.run({6}, options);
  EXPECT_EQ(result.text, "Hello");
  EXPECT_EQ(result.finish_reason, FinishReason::kMaxTokens);
  EXPECT_EQ(to_string(result.finish_reason), "length");
  EXPECT_EQ(f.model.decode_sizes, (std::vector<int64_t>{1, 1}));  // the last token is not decoded
  EXPECT_EQ(f.generator->cached_tokens(), (std::vector<int32_t>{6, 1}));

  options.max_tokens = 0;
  const auto none = f.run({6}, options);
  EXPECT_TRUE(none.tokens.empty());
  EXPECT_EQ(none.finish_reason, FinishReason::kMaxTokens);
}

TEST(Generate, StopStringSplitAcrossTokensIsNeverShown) {
  // "Hel" "lo" " w" "x": the stop string "lo w" spans two tokens.
  Fixture f({"<end>", "Hel", "lo", " w", "x"}, {1, 2, 3, 4}, 1);
  GenerationOptions options;
  options.stop_strings = {"lo w"};
  const auto result = f.run({4}, options);
  EXPECT_EQ(result.text, "Hel");
  EXPECT_EQ(result.finish_reason, FinishReason::kStopString);
  EXPECT_EQ(result.stop_string, "lo w");
  EXPECT_EQ(result.tokens, (std::vector<int32_t>{1, 2, 3}));
  // "l" could start "lo w" and waits; with "lo" the first "l" is known to be text.
  EXPECT_EQ(f.streamed, (std::vector<std::string>{"He", "l"}));
}

TEST(Generate, PartialStopMatchIsReleasedWhenItDiverges) {
  Fixture f({"<end>", "ab", "d", "abc", "x"}, {1, 2, 1, kEnd}, 1);
  GenerationOptions options;
  options.stop_strings = {"abc", "zzz"};
  const auto result = f.run({4}, options);
  EXPECT_EQ(result.text, "abdab");  // the final "ab" is released at the end
  EXPECT_EQ(result.finish_reason, FinishReason::kEndOfGeneration);
  EXPECT_EQ(f.streamed, (std::vector<std::string>{"abd", "ab"}));
}

TEST(Generate, StopStringInsideOneToken) {
  Fixture f({"<end>", "one", " two\nthree", "four"}, {1, 2, 3}, 1);
  GenerationOptions options;
  options.stop_strings = {"\n"};
  const auto result = f.run({3}, options);
  EXPECT_EQ(result.text, "one two");
  EXPECT_EQ(result.finish_reason, FinishReason::kStopString);
}

TEST(Generate, ContextFull) {
  Fixture f(kWords, {1, 2, 3, 4, 5, 1, 2, 3}, 3, /*n_ctx=*/6);
  const auto result = f.run({6, 6, 6});
  // Positions 3..5 hold the first three generated tokens; the fourth needs no position.
  EXPECT_EQ(result.tokens, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(result.text, "Hello world");
  EXPECT_EQ(result.finish_reason, FinishReason::kContextFull);
  EXPECT_EQ(to_string(result.finish_reason), "context_full");
}

TEST(Generate, PromptLongerThanContext) {
  Fixture f(kWords, {1, 2, 3, 4, 5}, 4, /*n_ctx=*/6);
  const std::vector<int32_t> prompt = {6, 1, 2, 3, 4, 5, 6, 1};
  try {
    f.run(prompt);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("8 tokens"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  // Truncation keeps the first token and the most recent ones, leaving room for max_tokens.
  GenerationOptions options;
  options.overflow = ContextOverflow::kTruncateLeft;
  options.max_tokens = 2;
  const auto result = f.run(prompt, options);
  EXPECT_EQ(result.stats.n_prompt_tokens, 4);
  EXPECT_EQ(result.stats.n_truncated, 4);
  EXPECT_EQ(f.generator->cached_tokens(), (std::vector<int32_t>{6, 5, 6, 1, 1}));
  EXPECT_EQ(result.text, "Hello");
  EXPECT_EQ(result.finish_reason, FinishReason::kMaxTokens);
}

TEST(Generate, EmptyPromptAndBadTokensAreErrors) {
  Fixture f(kWords, {1}, 1);
  EXPECT_THROW(f.run({}), Error);
  EXPECT_THROW(f.run({99}), Error);
  EXPECT_THROW(f.run({-1}), Error);
}

TEST(Generate, TokenCallbackCancels) {
  Fixture f(kWords, {1, 2, 3, 4, 5}, 1);
  GenerationOptions options;
  std::vector<int32_t> seen;
  options.on_token = [&](const TokenEvent& event) {
    seen.push_back(event.token);
    EXPECT_FALSE(event.forced);
    EXPECT_EQ(event.index, static_cast<int64_t>(seen.size()) - 1);
    return seen.size() < 3;
  };
  const auto result = f.run({6}, options);
  EXPECT_EQ(seen, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(result.tokens, seen);
  EXPECT_EQ(result.text, "Hello wor");  // the cancelling token's text is kept
  EXPECT_EQ(result.finish_reason, FinishReason::kCancelled);
}

TEST(Generate, CancelFlagStopsBeforeTheNextModelCall) {
  Fixture f(kWords, {1, 2, 3, 4, 5}, 1);
  std::atomic<bool> cancel{false};
  GenerationOptions options;
  options.cancel = &cancel;
  options.on_token = [&](const TokenEvent& event) {
    if (event.index == 1) cancel = true;  // as a SIGINT handler would
    return true;
  };
  const auto result = f.run({6}, options);
  EXPECT_EQ(result.tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(result.finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(f.model.decode_sizes, (std::vector<int64_t>{1, 1}));

  // Set before the call: nothing is generated.
  const auto none = f.run({6}, options);
  EXPECT_TRUE(none.tokens.empty());
  EXPECT_EQ(none.finish_reason, FinishReason::kCancelled);
}

bool valid_utf8(const std::string& s) {
  std::string out;
  return decode_utf8_replacing(s, true, out) == s.size() && out == s;
}

TEST(Generate, MultiByteCharactersSplitAcrossTokens) {
  // "é" = C3 A9 split over two tokens; "😀" = F0 9F 98 80 over three.
  Fixture f({"<end>", "caf\xC3", "\xA9 ", "\xF0\x9F", "\x98", "\x80!"}, {1, 2, 3, 4, 5}, 1);
  const auto result = f.run({1});
  EXPECT_EQ(result.text, "caf\xC3\xA9 \xF0\x9F\x98\x80!");
  for (const auto& chunk : f.streamed) EXPECT_TRUE(valid_utf8(chunk)) << chunk;
  EXPECT_EQ(f.streamed, (std::vector<std::string>{"caf", "\xC3\xA9 ", "\xF0\x9F\x98\x80!"}));
}

TEST(Generate, InvalidUtf8BecomesReplacementCharacter) {
  // A stray byte, a lead byte followed by ASCII, and a character cut off by the end token.
  Fixture f({"<end>", "a\xFF", "\xC3", "b", "\xE2\x82"}, {1, 2, 3, 4, kEnd}, 1);
  const auto result = f.run({3});
  EXPECT_EQ(result.text,
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
  for (const auto& chunk : f.streamed) EXPECT_TRUE(valid_utf8(chunk)) << chunk;
}

TEST(TextStream, ReplacementFollowsMaximalSubparts) {
  // Expected values are Python's bytes.decode("utf-8", "replace").
  struct Case {
    std::string in, out;
  };
  const std::string R = "\xEF\xBF\xBD";
  const Case cases[] = {
      {"\xED\xA0\x80", R + R + R},          // surrogate: ED then two stray continuations
      {"\xC0\xAF", R + R},                  // overlong lead byte
      {"\xF0\x9F\x98", R},                  // unfinished 4-byte character
      {"\xF4\x90\x80\x80", R + R + R + R},  // above U+10FFFF
      {"\xE2\x82x", R + "x"},
      {"\xF0\x9F\x98\x80\xF0\x9F", "\xF0\x9F\x98\x80" + R},
      {"plain", "plain"},
  };
  for (const auto& c : cases) {
    std::string out;
    EXPECT_EQ(decode_utf8_replacing(c.in, true, out), c.in.size());
    EXPECT_EQ(out, c.out);
  }
  std::string out;
  EXPECT_EQ(decode_utf8_replacing("ok\xF0\x9F\x98", false, out), 2u);  // waits for the last byte
  EXPECT_EQ(out, "ok");
}

TEST(TextStream, StopStringAcrossCharacterPieces) {
  TextStream stream({"END"});
  EXPECT_EQ(stream.push("abE"), "ab");
  EXPECT_EQ(stream.push("N"), "");
  EXPECT_EQ(stream.push("Dzz"), "");
  EXPECT_TRUE(stream.stopped());
  EXPECT_EQ(stream.text(), "ab");
  EXPECT_EQ(stream.finish(), "");
}

TEST(Generate, ReusesTheCachedPrefix) {
  // The model answers 1 2 end after any prompt of length 2, then 3 end after length 5.
  Fixture f(kWords, {}, 0);
  f.model.next = [](const std::vector<int32_t>& context) -> int32_t {
    if (context.size() == 2) return 1;
    if (context.size() == 3) return 2;
    if (context.size() == 5) return 3;
    return kEnd;
  };
  auto first = f.run({6, 6});
  EXPECT_EQ(first.tokens, (std::vector<int32_t>{1, 2, kEnd}));
  EXPECT_EQ(f.generator->cached_tokens(), (std::vector<int32_t>{6, 6, 1, 2}));
  // Next turn: history + answer + new user token. Only the new token is evaluated.
  auto second = f.run({6, 6, 1, 2, 5});
  EXPECT_EQ(second.stats.n_prompt_evaluated, 1);
  EXPECT_EQ(second.text, " wor");
  // A prompt that diverges early rolls the cache back to the common prefix.
  f.model.decode_sizes.clear();
  f.run({6, 5, 5});
  EXPECT_EQ(f.model.decode_sizes.front(), 2);
  EXPECT_EQ(f.model.context().front(), 6);
}

TEST(Generate, StartsOverWhenTheCacheCannotRollBackFarEnough) {
  Fixture f(kWords, {}, 0);
  f.model.next = [](const std::vector<int32_t>&) { return kEnd; };
  f.model.max_rollback = 2;
  f.run({6, 6, 6, 6, 6, 6});
  f.model.decode_sizes.clear();
  const auto result = f.run({6, 5});  // common prefix 1: a rollback of 5 is refused
  EXPECT_EQ(result.stats.n_prompt_evaluated, 2);
  EXPECT_EQ(f.model.context(), (std::vector<int32_t>{6, 5}));
  EXPECT_EQ(f.generator->cached_tokens(), (std::vector<int32_t>{6, 5}));
}

TEST(Generate, IgnoreEndOfGenerationMasksEndTokens) {
  Fixture f(kWords, {1, kEnd}, 1);
  f.model.runner_up = [](const std::vector<int32_t>&) { return 5; };
  GenerationOptions options;
  options.ignore_end_of_generation = true;
  options.max_tokens = 4;
  const auto result = f.run({6}, options);
  EXPECT_EQ(result.tokens, (std::vector<int32_t>{1, 5, 5, 5}));
  EXPECT_EQ(result.text, "He!!!");
  EXPECT_EQ(result.finish_reason, FinishReason::kMaxTokens);
}

// Forces "P P" after the first sampled token and asks the loop to go on while forcing.
class ForcingController : public TokenController {
 public:
  std::vector<int32_t> prompt;
  std::vector<std::pair<int32_t, bool>> commits;
  int pending = 0;

  void begin(std::span<const int32_t> p) override { prompt.assign(p.begin(), p.end()); }
  int32_t before_sample(std::span<float> logits) override {
    EXPECT_EQ(logits.size(), kWords.size());
    if (pending > 0) return 6;
    logits[4] = 100.0f;  // steer the first sampled token to "ld"
    return -1;
  }
  void on_commit(int32_t token, bool forced) override {
    commits.emplace_back(token, forced);
    if (!forced && commits.size() == 1) pending = 2;
    if (forced) --pending;
  }
  bool must_continue() const override { return pending > 0; }
  std::unique_ptr<TokenController> clone() const override {
    return std::make_unique<ForcingController>(*this);
  }
};

TEST(Generate, ControllerEditsLogitsAndForcesTokens) {
  Fixture f(kWords, {1, 2, 3, 4, 5}, 1);
  ForcingController controller;
  GenerationOptions options;
  options.controller = &controller;
  options.max_tokens = 1;  // the controller's closing sequence still completes
  std::vector<bool> forced;
  options.on_token = [&](const TokenEvent& e) {
    forced.push_back(e.forced);
    return true;
  };
  const auto result = f.run({2}, options);
  EXPECT_EQ(controller.prompt, (std::vector<int32_t>{2}));
  EXPECT_EQ(result.tokens, (std::vector<int32_t>{4, 6, 6}));
  EXPECT_EQ(forced, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(result.text, "ldPP");
  EXPECT_EQ(result.finish_reason, FinishReason::kMaxTokens);
}

TEST(Generate, SamplerSeesThePromptForPenalties) {
  // A strong repeat penalty on the prompt's token pushes greedy sampling to the runner-up.
  ScriptedModel model(4, 16);
  model.next = [](const std::vector<int32_t>&) { return 1; };
  model.runner_up = [](const std::vector<int32_t>&) { return 2; };
  GenerationVocab vocab;
  vocab.piece = [](int32_t id) { return std::string(1, static_cast<char>('a' + id)); };
  vocab.end_of_generation = {0};
  SamplerConfig config;
  config.temperature = 0.0f;
  config.repeat_penalty = 4.0f;  // 10 / 4 = 2.5 < 5
  Generator generator(model, vocab, config);
  GenerationOptions options;
  options.max_tokens = 1;
  EXPECT_EQ(generator.generate(std::vector<int32_t>{1}, options).tokens, (std::vector<int32_t>{2}));
  EXPECT_EQ(generator.generate(std::vector<int32_t>{3}, options).tokens, (std::vector<int32_t>{1}));
}

}  // namespace
}  // namespace boltrt

namespace boltrt {
namespace {

// Property: however the bytes are split into pieces, the stream releases the same text as
// decoding everything at once and cutting at the first stop string, and it never releases a
// partial character.
TEST(TextStream, AnySplitGivesTheWholeTextDecoding) {
  std::mt19937 rng(12345);
  const std::vector<std::string> alphabet = {
      "a",    "b",    "\n",          "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
      "\xFF", "\xC3", "\xED\xA0\x80"};
  const std::vector<std::string> stops = {"ab\n", "\xC3\xA9\xC3\xA9", "b\xE2\x82\xAC"};
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) bytes += alphabet[rng() % alphabet.size()];
    std::string whole;
    decode_utf8_replacing(bytes, true, whole);
    std::vector<std::string> active;
    if (trial % 2 == 0) active = stops;
    size_t cut = std::string::npos;
    for (const auto& s : active) cut = std::min(cut, whole.find(s));
    const std::string expected = cut == std::string::npos ? whole : whole.substr(0, cut);

    TextStream stream(active);
    std::string released;
    size_t at = 0;
    while (at < bytes.size()) {
      const size_t len = 1 + rng() % 4;
      const std::string chunk = stream.push(std::string_view(bytes).substr(at, len));
      std::string check;
      ASSERT_EQ(decode_utf8_replacing(chunk, true, check), chunk.size());
      ASSERT_EQ(check, chunk) << "released an invalid or partial character";
      released += chunk;
      at += len;
    }
    released += stream.finish();
    ASSERT_EQ(released, expected) << "trial " << trial;
    ASSERT_EQ(stream.stopped(), cut != std::string::npos);
  }
}

}  // namespace
}  // namespace boltrt

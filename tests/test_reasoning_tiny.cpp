// The reasoning controller end to end on the shipped tiny Gemma 4 (models/tiny, trained with
// `<|channel>thought\n ... <channel|>` sections): real tokenizer, chat template, model and
// generation loop, greedy. Unlimited thinking closes by itself; a budget cuts it after exactly
// that many tokens and the model still answers; budget 0 gives no reasoning; a small token limit
// keeps the answer reserve.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "generate/reasoning.h"
#include "model/gemma4.h"
#include "model/gemma4_session.h"
#include "support/paths.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace boltrt {
namespace {

class TinyReasoning : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = test::source_dir() + "/models/tiny/tiny-f32.gguf";
    if (!std::filesystem::exists(path)) return;
    model_ = Gemma4Model::load(path).release();
    tokenizer_ = text::Tokenizer::from_gguf(model_->file()).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete model_;
    tokenizer_ = nullptr;
    model_ = nullptr;
  }
  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << "models/tiny/tiny-f32.gguf missing";
  }

  struct Outcome {
    GenerationResult result;
    text::ParsedOutput parsed;
    int64_t thinking = 0, reasoning = 0, forced = 0;
    std::string forced_text;
  };

  // One greedy chat turn with thinking on in the template (unless `template_thinking` is false).
  Outcome run(ReasoningConfig config, int64_t max_tokens, bool template_thinking = true) {
    const auto tmpl = text::ChatTemplate::for_tokenizer(*tokenizer_);
    text::ChatOptions chat;
    chat.enable_thinking = template_thinking;
    const text::ChatPrompt prompt =
        tmpl.render({{"user", "What is 347 + 586?", {}, "", ""}}, text::Json(), chat);
    const std::vector<int32_t> ids = tokenizer_->encode(prompt.text, true, true);

    auto vocab = ReasoningVocab::for_tokenizer(*tokenizer_);
    EXPECT_TRUE(vocab.has_value());
    config.max_tokens = max_tokens;
    ReasoningController controller(std::move(*vocab), config);

    SessionOptions session_options;
    session_options.n_ctx = 512;
    session_options.kv_type = KvType::F32;
    Gemma4Session session(*model_, session_options, nullptr);
    GenerationVocab gv;
    const text::Tokenizer* tok = tokenizer_;
    gv.piece = [tok](int32_t id) { return tok->piece(id, false); };
    gv.end_of_generation = tokenizer_->eog_tokens();
    SamplerConfig greedy;
    greedy.temperature = 0;
    greedy.seed = 1;
    Generator generator(session, gv, greedy);

    Outcome out;
    GenerationOptions options;
    options.max_tokens = max_tokens;
    options.controller = &controller;
    options.on_token = [&](const TokenEvent& e) {
      if (e.forced) out.forced_text += tok->piece(e.token);
      return true;
    };
    out.result = generator.generate(ids, options);
    std::string raw;  // the output with its markers, as the parser reads it
    for (int32_t t : out.result.tokens) {
      if (!tokenizer_->is_eog(t)) raw += tokenizer_->piece(t);
    }
    out.parsed = text::parse_gemma4_output(raw, prompt.generation_prompt);
    out.thinking = controller.thinking_tokens();
    out.reasoning = controller.reasoning_tokens();
    out.forced = controller.forced_tokens();
    return out;
  }

  static inline Gemma4Model* model_ = nullptr;
  static inline text::Tokenizer* tokenizer_ = nullptr;
};

ReasoningConfig budget(int64_t n, int64_t word_grace = 0) {
  ReasoningConfig c;
  c.mode = ReasoningMode::kOn;
  c.budget = n;
  c.word_grace = word_grace;
  return c;
}

TEST_F(TinyReasoning, UnlimitedThinkingClosesByItself) {
  const Outcome o = run(budget(-1), 300);
  EXPECT_EQ(o.forced, 0);
  EXPECT_GT(o.thinking, 5);
  EXPECT_EQ(o.result.finish_reason, FinishReason::kEndOfGeneration);
  EXPECT_FALSE(o.parsed.reasoning.empty());
  EXPECT_FALSE(o.parsed.content.empty());
}

TEST_F(TinyReasoning, BudgetCutsThinkingAndTheModelStillAnswers) {
  const Outcome unlimited = run(budget(-1), 300);
  ASSERT_GT(unlimited.thinking, 8);
  const int64_t cut = unlimited.thinking / 2;
  const Outcome o = run(budget(cut), 300);
  EXPECT_EQ(o.thinking, cut);  // ASCII thoughts, no word grace: exactly the budget
  EXPECT_EQ(o.forced_text, std::string(kDefaultBudgetMessage) + "<channel|>");
  EXPECT_GT(o.reasoning, cut);  // the message counts as reasoning
  EXPECT_TRUE(o.parsed.reasoning.ends_with(std::string(kDefaultBudgetMessage)) ||
              o.parsed.reasoning.ends_with("answer."))
      << o.parsed.reasoning;
  EXPECT_EQ(o.result.finish_reason, FinishReason::kEndOfGeneration);
  EXPECT_FALSE(o.parsed.content.empty());
  // With the default word grace the cut lands at a word boundary, a few tokens later at most.
  const Outcome graced = run(budget(cut, 4), 300);
  EXPECT_GE(graced.thinking, cut);
  EXPECT_LE(graced.thinking, cut + 4 + 3);
}

TEST_F(TinyReasoning, BudgetZeroGivesNoReasoning) {
  // Thinking on in the template: the model opens its channel, which is closed at once.
  const Outcome o = run(budget(0), 300);
  EXPECT_EQ(o.thinking, 0);
  EXPECT_EQ(o.reasoning, 0);
  EXPECT_EQ(o.forced_text, "thought\n<channel|>");
  EXPECT_TRUE(o.parsed.reasoning.empty()) << o.parsed.reasoning;
  EXPECT_FALSE(o.parsed.content.empty());
  // What the option helpers do for budget 0: the template pre-fills the closed channel.
  ASSERT_FALSE(budget(0).enable_thinking(true));
  const Outcome off = run(budget(0), 300, /*template_thinking=*/false);
  EXPECT_EQ(off.forced, 0);
  EXPECT_TRUE(off.parsed.reasoning.empty());
  EXPECT_FALSE(off.parsed.content.empty());
}

TEST_F(TinyReasoning, TokenLimitKeepsTheAnswerReserve) {
  const Outcome unlimited = run(budget(-1), 300);
  const int64_t max_tokens = unlimited.thinking / 2 + 20;
  ReasoningConfig c = budget(-1);
  c.answer_reserve = 16;
  const Outcome o = run(c, max_tokens);
  EXPECT_LT(o.thinking, unlimited.thinking);
  EXPECT_FALSE(o.parsed.content.empty()) << "thinking ate the whole limit";
  // The answer (after the forced <channel|>) got its reserve, or ended by itself before.
  const int32_t close = tokenizer_->find("<channel|>");
  const auto it = std::find(o.result.tokens.rbegin(), o.result.tokens.rend(), close);
  ASSERT_NE(it, o.result.tokens.rend());
  const auto answer_tokens = it - o.result.tokens.rbegin();
  EXPECT_GT(answer_tokens, 0);
  EXPECT_TRUE(o.result.finish_reason == FinishReason::kEndOfGeneration || answer_tokens >= 16)
      << answer_tokens;
  EXPECT_LE(static_cast<int64_t>(o.result.tokens.size()), max_tokens);
}

}  // namespace
}  // namespace boltrt

// The reasoning controller (issue 9) in the real generation loop over a scripted model with a
// tiny in-memory vocabulary: budgets 0, 1 and N, the exact boundary, a multi-byte character and
// a word at the boundary, the model closing early, a half-emitted end marker, token-limit
// exhaustion with the answer reserve, thinking off, unlimited budgets, clone(); plus the
// markers of the real Gemma 4 vocabulary and the display helper.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "api/fake_backend.h"
#include "api/model_backend.h"
#include "generate/reasoning.h"
#include "generate/reasoning_display.h"
#include "generate/reply_splitter.h"
#include "generate_fakes.h"
#include "gguf/gguf.h"
#include "support/paths.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace boltrt {
namespace {

// Ids 0..kBytes-1 are the words below; kBytes + b is the byte b.
constexpr int32_t kEos = 0, kOpen = 1, kClose = 2, kThought = 3, kNl = 4, kWord = 5, kThe = 6,
                  kIng = 7, kThinkOpen = 8, kEndA = 9, kEndB = 10, kCallOpen = 11, kCallClose = 12,
                  kToolA = 13, kToolB = 14, kToolC = 15, kBytes = 16;
const std::vector<std::string> kWords = {
    "",       "<|channel>", "<channel|>", "thought", "\n",           " word",        " the",
    "ing",    "<think>",    "</",         "think>",  "<|tool_call>", "<tool_call|>", "<tool",
    "_call>", "</tool"};

int32_t byte(unsigned char b) {
  return kBytes + b;
}

std::string piece_of(int32_t id) {
  if (id >= kBytes) return std::string(1, static_cast<char>(id - kBytes));
  return static_cast<size_t>(id) < kWords.size() ? kWords[static_cast<size_t>(id)] : "";
}

// Longest word first, then single bytes.
std::vector<int32_t> encode(std::string_view text) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i < text.size()) {
    int32_t best = -1;
    size_t best_len = 0;
    for (int32_t id = 1; id < static_cast<int32_t>(kWords.size()); ++id) {
      const std::string& w = kWords[static_cast<size_t>(id)];
      if (!w.empty() && w.size() > best_len && text.substr(i, w.size()) == w) {
        best = id;
        best_len = w.size();
      }
    }
    if (best < 0) {
      out.push_back(byte(static_cast<unsigned char>(text[i])));
      ++i;
    } else {
      out.push_back(best);
      i += best_len;
    }
  }
  return out;
}

ReasoningVocab gemma_like_vocab() {
  ReasoningVocab v;
  v.start = {kOpen};
  v.label = "thought\n";
  v.end = {kClose};
  v.end_of_generation = {kEos};
  v.piece = piece_of;
  v.encode = encode;
  return v;
}

// ... with Gemma 4's tool-call markers, one token each.
ReasoningVocab gemma_like_vocab_with_tools() {
  ReasoningVocab v = gemma_like_vocab();
  v.tool_call_open = {kCallOpen};
  v.tool_call_close = {kCallClose};
  return v;
}

// A Qwen-like vocabulary whose end marker "</think>" takes two tokens.
ReasoningVocab two_token_end_vocab() {
  ReasoningVocab v;
  v.start = {kThinkOpen};
  v.end = {kEndA, kEndB};
  v.end_of_generation = {kEos};
  v.piece = piece_of;
  v.encode = encode;
  return v;
}

// ... whose tool-call markers take two tokens too: "<tool" "_call>" ... "</tool" "_call>".
ReasoningVocab two_token_vocab_with_tools() {
  ReasoningVocab v = two_token_end_vocab();
  v.tool_call_open = {kToolA, kToolB};
  v.tool_call_close = {kToolC, kToolB};
  return v;
}

// The prompts: thinking on (the model opens the block itself), pre-opened block, thinking off.
const std::vector<int32_t> kPromptOn = {byte('Q'), byte('?'), kNl};
const std::vector<int32_t> kPromptPreOpened = {byte('Q'), byte('?'), kNl, kOpen, kThought, kNl};
const std::vector<int32_t> kPromptOff = {byte('Q'), byte('?'), kNl, kOpen, kThought, kNl, kClose};

// The model writes `thought` from its first token and, once a block was closed (by it or by the
// controller), `answer` counted from just after that first end marker, then <eos>.
struct Script {
  std::vector<int32_t> thought;
  std::vector<int32_t> answer;
};

struct Outcome {
  GenerationResult result;
  std::unique_ptr<ReasoningController> controller;
  std::vector<bool> forced;  // per generated token
};

Outcome run(const Script& script, const std::vector<int32_t>& prompt, ReasoningConfig config,
            int64_t max_tokens = -1, ReasoningVocab vocab = gemma_like_vocab(),
            int64_t n_ctx = 4096) {
  const std::vector<int32_t> end = vocab.end;
  ScriptedModel model(kBytes + 256, n_ctx);
  const size_t prompt_size = prompt.size();
  model.next = [&, prompt_size](const std::vector<int32_t>& context) -> int32_t {
    // Position of the first token after the first complete end marker in the generated part.
    size_t answer_from = std::string::npos;
    for (size_t i = prompt_size; i + end.size() <= context.size(); ++i) {
      if (std::equal(end.begin(), end.end(), context.begin() + static_cast<ptrdiff_t>(i))) {
        answer_from = i + end.size();
        break;
      }
    }
    if (answer_from != std::string::npos) {
      const size_t k = context.size() - answer_from;
      return k < script.answer.size() ? script.answer[k] : kEos;
    }
    const size_t k = context.size() - prompt_size;
    return k < script.thought.size() ? script.thought[k] : kEos;
  };
  GenerationVocab gv;
  gv.piece = piece_of;
  gv.end_of_generation = {kEos};
  SamplerConfig greedy;
  greedy.temperature = 0;
  greedy.seed = 1;
  Generator generator(model, gv, greedy);

  config.max_tokens = max_tokens;
  Outcome r;
  r.controller = std::make_unique<ReasoningController>(std::move(vocab), config);
  GenerationOptions options;
  options.max_tokens = max_tokens;
  options.controller = r.controller.get();
  options.on_token = [&r](const TokenEvent& e) {
    r.forced.push_back(e.forced);
    return true;
  };
  r.result = generator.generate(prompt, options);
  return r;
}

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::vector<int32_t> repeat(int32_t token, size_t n) {
  return std::vector<int32_t>(n, token);
}

ReasoningConfig with_budget(int64_t budget, ReasoningMode mode = ReasoningMode::kOn) {
  ReasoningConfig c;
  c.mode = mode;
  c.budget = budget;
  c.budget_message = "\nOK.\n";
  return c;
}

const std::vector<int32_t> kMessage = {kNl, byte('O'), byte('K'), byte('.'), kNl};
const std::vector<int32_t> kOpenLabel = {kOpen, kThought, kNl};
const std::vector<int32_t> kAnswer = {byte('A'), byte('!')};

size_t count_forced(const Outcome& r) {
  return std::count(r.forced.begin(), r.forced.end(), true);
}

TEST(Reasoning, UnlimitedBudgetLetsTheModelThinkAndClose) {
  const auto thought = concat({kOpenLabel, repeat(kWord, 50), {kClose}});
  const Outcome r = run({thought, kAnswer}, kPromptOn, with_budget(-1));
  EXPECT_EQ(r.result.tokens, concat({thought, kAnswer, {kEos}}));
  EXPECT_EQ(count_forced(r), 0u);
  EXPECT_EQ(r.controller->thinking_tokens(), 50);
  EXPECT_EQ(r.controller->reasoning_tokens(), 50);
  EXPECT_EQ(r.controller->state(), ReasoningController::State::kAnswering);
}

TEST(Reasoning, BudgetZeroClosesASelfOpenedBlockAtOnce) {
  const auto thought = concat({kOpenLabel, repeat(kWord, 10), {kClose}});
  const Outcome r = run({thought, kAnswer}, kPromptOn, with_budget(0));
  // The model opens the channel; its label and end marker are forced, no thinking token.
  EXPECT_EQ(r.result.tokens, concat({kOpenLabel, {kClose}, kAnswer, {kEos}}));
  EXPECT_EQ(r.forced, (std::vector<bool>{false, true, true, true, false, false, false}));
  EXPECT_EQ(r.controller->thinking_tokens(), 0);
  EXPECT_EQ(r.controller->reasoning_tokens(), 0);
}

TEST(Reasoning, BudgetZeroWithAPreOpenedBlockForcesOnlyTheEndMarker) {
  // llama.cpp #28356: the pre-opened "<|channel>thought\n" must not leak thinking at budget 0.
  const Outcome r = run({repeat(kWord, 10), kAnswer}, kPromptPreOpened, with_budget(0));
  EXPECT_EQ(r.result.tokens, concat({{kClose}, kAnswer, {kEos}}));
  EXPECT_TRUE(r.forced[0]);
  EXPECT_EQ(r.controller->reasoning_tokens(), 0);
}

TEST(Reasoning, BudgetOneThenMessageAndEndMarker) {
  const auto thought = concat({kOpenLabel, repeat(kWord, 10), {kClose}});
  const Outcome r = run({thought, kAnswer}, kPromptOn, with_budget(1));
  EXPECT_EQ(r.result.tokens, concat({kOpenLabel, {kWord}, kMessage, {kClose}, kAnswer, {kEos}}));
  EXPECT_EQ(count_forced(r), kMessage.size() + 1);
  EXPECT_EQ(r.controller->thinking_tokens(), 1);
  EXPECT_EQ(r.controller->reasoning_tokens(), 1 + static_cast<int64_t>(kMessage.size()));
  EXPECT_EQ(r.controller->forced_tokens(), static_cast<int64_t>(kMessage.size()) + 1);
}

TEST(Reasoning, ExactBoundary) {
  // Ten thinking tokens ending a word: budget 10 lets the model close on its own (no forcing);
  // budget 9 cuts after exactly nine tokens; budget 11 is never reached.
  const std::vector<int32_t> words = concat({repeat(kWord, 9), {byte('.')}});
  const auto thought = concat({kOpenLabel, words, {kClose}});
  for (int64_t budget : {9, 10, 11}) {
    SCOPED_TRACE(budget);
    const Outcome r = run({thought, kAnswer}, kPromptOn, with_budget(budget));
    if (budget >= 10) {
      EXPECT_EQ(r.result.tokens, concat({thought, kAnswer, {kEos}}));
      EXPECT_EQ(count_forced(r), 0u);
      EXPECT_EQ(r.controller->reasoning_tokens(), 10);
    } else {
      EXPECT_EQ(r.result.tokens,
                concat({kOpenLabel, repeat(kWord, 9), kMessage, {kClose}, kAnswer, {kEos}}));
      EXPECT_EQ(r.controller->thinking_tokens(), 9);
    }
  }
}

TEST(Reasoning, MultiByteCharacterAtTheBoundaryIsFinished) {
  // " word" then "é" as two byte tokens, then a 4-byte emoji as four byte tokens.
  const std::vector<int32_t> text = {kWord,      byte(0xC3), byte(0xA9), byte(0xF0),
                                     byte(0x9F), byte(0x98), byte(0x80), kWord};
  const auto thought = concat({kOpenLabel, text, {kClose}});
  {  // the budget ends after the first byte of "é": its second byte is still taken
    ReasoningConfig c = with_budget(2);
    c.word_grace = 0;
    const Outcome r = run({thought, kAnswer}, kPromptOn, c);
    EXPECT_EQ(
        r.result.tokens,
        concat({kOpenLabel, {kWord, byte(0xC3), byte(0xA9)}, kMessage, {kClose}, kAnswer, {kEos}}));
    EXPECT_EQ(r.controller->thinking_tokens(), 3);
  }
  {  // ... after the first byte of the emoji: three more bytes
    ReasoningConfig c = with_budget(4);
    c.word_grace = 0;
    const Outcome r = run({thought, kAnswer}, kPromptOn, c);
    EXPECT_EQ(r.result.tokens, concat({kOpenLabel,
                                       std::vector<int32_t>(text.begin(), text.begin() + 7),
                                       kMessage,
                                       {kClose},
                                       kAnswer,
                                       {kEos}}));
    EXPECT_EQ(r.controller->thinking_tokens(), 7);
  }
}

TEST(Reasoning, WordGraceFinishesTheCurrentWord) {
  // " word" "ing" "ing" " the": a budget of 1 ends inside the word.
  const std::vector<int32_t> text = {kWord, kIng, kIng, kThe, kThe};
  const auto thought = concat({kOpenLabel, text, {kClose}});
  for (int64_t grace : {0, 1, 2, 4}) {
    SCOPED_TRACE(grace);
    ReasoningConfig c = with_budget(1);
    c.word_grace = grace;
    const Outcome r = run({thought, kAnswer}, kPromptOn, c);
    const size_t taken = 1 + static_cast<size_t>(std::min<int64_t>(grace, 2));
    EXPECT_EQ(r.result.tokens, concat({kOpenLabel,
                                       std::vector<int32_t>(text.begin(), text.begin() + taken),
                                       kMessage,
                                       {kClose},
                                       kAnswer,
                                       {kEos}}));
    EXPECT_EQ(r.controller->thinking_tokens(), static_cast<int64_t>(taken));
  }
}

TEST(Reasoning, ModelClosingEarlyIsLeftAlone) {
  const auto thought = concat({kOpenLabel, repeat(kWord, 3), {kClose}});
  const auto answer = repeat(kThe, 40);  // a long answer is not limited by the budget
  const Outcome r = run({thought, answer}, kPromptOn, with_budget(5));
  EXPECT_EQ(r.result.tokens, concat({thought, answer, {kEos}}));
  EXPECT_EQ(count_forced(r), 0u);
  EXPECT_EQ(r.controller->reasoning_tokens(), 3);
}

TEST(Reasoning, HalfEmittedEndMarkerIsCompletedNotDuplicated) {
  // "<think>" a b "</" ...: at budget 3 the model has begun "</think>"; only "think>" is forced,
  // without the message (it would land inside the marker).
  const std::vector<int32_t> thought = {kThinkOpen, kWord, kWord, kEndA,
                                        kWord,      kWord, kEndA, kEndB};
  const Outcome r = run({thought, kAnswer}, kPromptOn, with_budget(3), -1, two_token_end_vocab());
  EXPECT_EQ(r.result.tokens, (std::vector<int32_t>{kThinkOpen, kWord, kWord, kEndA, kEndB,
                                                   byte('A'), byte('!'), kEos}));
  EXPECT_EQ(r.forced, (std::vector<bool>{false, false, false, false, true, false, false, false}));
  EXPECT_EQ(r.controller->thinking_tokens(), 2);
  EXPECT_EQ(r.controller->reasoning_tokens(), 2);
}

TEST(Reasoning, BrokenOffMarkerPrefixCountsAsThinking) {
  // "</" followed by ordinary text is text; the model's own "</think>" then closes the block.
  const std::vector<int32_t> thought = {kThinkOpen, kWord, kEndA, kWord, kEndA, kEndA, kEndB};
  const Outcome r = run({thought, kAnswer}, kPromptOn, with_budget(-1), -1, two_token_end_vocab());
  EXPECT_EQ(r.result.tokens, concat({thought, kAnswer, {kEos}}));
  EXPECT_EQ(r.controller->thinking_tokens(), 4);  // word </ word </
}

TEST(Reasoning, TokenLimitKeepsTheAnswerReserve) {
  // The model would think forever; max_tokens 40 with a reserve of 10: thinking stops so that
  // whatever may come before the answer (up to 3 bytes of a character, message 5, end 1: 9
  // tokens) leaves at least 10 tokens for the answer.
  const auto thought = concat({kOpenLabel, repeat(kWord, 500)});
  const auto answer = repeat(kThe, 100);
  ReasoningConfig c = with_budget(-1);
  c.answer_reserve = 10;
  const Outcome r = run({thought, answer}, kPromptOn, c, 40);
  EXPECT_EQ(r.result.finish_reason, FinishReason::kMaxTokens);
  ASSERT_EQ(r.result.tokens.size(), 40u);
  // generated + 9 + reserve >= 40 after 21 tokens: 3 (open, label) + 18 thinking; ASCII text
  // needs no character completion, so the answer gets 13.
  EXPECT_EQ(r.result.tokens,
            concat({kOpenLabel, repeat(kWord, 18), kMessage, {kClose}, repeat(kThe, 13)}));
  EXPECT_EQ(r.controller->thinking_tokens(), 18);
  // A budget larger than the room left shrinks the same way; the automatic reserve is
  // min(128, max_tokens / 2) = 20.
  c = with_budget(1000);
  const Outcome automatic = run({thought, answer}, kPromptOn, c, 40);
  EXPECT_EQ(automatic.result.tokens,
            concat({kOpenLabel, repeat(kWord, 8), kMessage, {kClose}, repeat(kThe, 23)}));
}

TEST(Reasoning, TokenLimitInsideAMultiTokenMarkerStillKeepsTheReserve) {
  // Two-token markers: the token limit (22, reserve 2; before the answer at most 3 + 1 + 2 + 5
  // + 2 = 13 tokens) binds on "<tool" (after 7 tokens). The model completes the opener, the
  // call's closer, message and end marker are forced, and the answer still gets 22 - 17 = 5.
  const ReasoningVocab vocab = two_token_vocab_with_tools();
  const auto thought = concat({{kThinkOpen}, repeat(kWord, 5), {kToolA, kToolB}, repeat(kIng, 50)});
  ReasoningConfig c = with_budget(-1);
  c.answer_reserve = 2;
  const Outcome r = run({thought, repeat(kThe, 100)}, kPromptOn, c, 22, vocab);
  EXPECT_EQ(r.result.tokens, concat({{kThinkOpen},
                                     repeat(kWord, 5),
                                     {kToolA, kToolB, kToolC, kToolB},
                                     encode("\nOK.\n"),
                                     {kEndA, kEndB},
                                     repeat(kThe, 5)}));
  EXPECT_EQ(r.result.finish_reason, FinishReason::kMaxTokens);
}

TEST(Reasoning, TinyTokenLimitStillFinishesTheClosing) {
  // max_tokens 2: the block is closed at once (label + end marker forced) and must_continue()
  // carries the loop past the limit to the end of the marker.
  const auto thought = concat({kOpenLabel, repeat(kWord, 50)});
  ReasoningConfig c = with_budget(-1);
  c.answer_reserve = 0;
  const Outcome r = run({thought, kAnswer}, kPromptOn, c, 2);
  EXPECT_EQ(r.result.tokens, concat({kOpenLabel, {kClose}}));
  EXPECT_EQ(r.result.finish_reason, FinishReason::kMaxTokens);
  EXPECT_EQ(r.controller->reasoning_tokens(), 0);
}

TEST(Reasoning, ThinkingOffIsPassiveAndClosesAStrayBlock) {
  const Outcome plain = run({kAnswer, {}}, kPromptOff, with_budget(-1, ReasoningMode::kOff));
  EXPECT_EQ(plain.result.tokens, concat({kAnswer, {kEos}}));
  EXPECT_EQ(count_forced(plain), 0u);
  EXPECT_EQ(plain.controller->state(), ReasoningController::State::kOff);
  // A model that reopens a thought channel anyway gets it closed with no thinking.
  const auto thought = concat({kOpenLabel, repeat(kWord, 5), {kClose}});
  const Outcome stray = run({thought, kAnswer}, kPromptOff, with_budget(-1, ReasoningMode::kOff));
  EXPECT_EQ(stray.result.tokens, concat({kOpenLabel, {kClose}, kAnswer, {kEos}}));
  EXPECT_EQ(stray.controller->reasoning_tokens(), 0);
}

TEST(Reasoning, BudgetIsSharedByLaterBlocks) {
  // Blocks of 3 and 3 tokens with budget 4: the second block is cut after one token.
  const auto thought = concat({kOpenLabel, repeat(kWord, 3), {kClose}});
  const auto answer = concat({{byte('x')}, kOpenLabel, repeat(kWord, 3), {kClose}, {byte('y')}});
  ReasoningConfig c = with_budget(4);
  c.word_grace = 0;
  const Outcome r = run({thought, answer}, kPromptOn, c);
  // The forced closing takes the model's positions of its remaining words, its end marker and
  // "y"; the model then ends.
  EXPECT_EQ(r.result.tokens,
            concat({thought, {byte('x')}, kOpenLabel, {kWord}, kMessage, {kClose}, {kEos}}));
  EXPECT_EQ(r.controller->thinking_tokens(), 4);
}

TEST(Reasoning, BlockBudgetGivesEveryBlockItsOwnBudget) {
  // Two blocks of three words; each block may think two tokens. The model's answer text (x, the
  // second block, y) is counted from the first end marker, so forced tokens take its places.
  const auto thought = concat({kOpenLabel, repeat(kWord, 3), {kClose}});
  const auto answer = concat({{byte('x')}, kOpenLabel, repeat(kWord, 3), {kClose}, {byte('y')}});
  ReasoningConfig c = with_budget(-1);
  c.block_budget = 2;
  c.word_grace = 0;
  const Outcome r = run({thought, answer}, kPromptOn, c);
  EXPECT_EQ(r.result.tokens, concat({kOpenLabel,
                                     repeat(kWord, 2),
                                     kMessage,
                                     {kClose},
                                     {byte('x')},
                                     kOpenLabel,
                                     repeat(kWord, 2),
                                     kMessage,
                                     {kClose},
                                     {kEos}}));
  EXPECT_EQ(r.controller->thinking_tokens(), 4);
  EXPECT_EQ(r.controller->reasoning_tokens(), 4 + 2 * static_cast<int64_t>(kMessage.size()));
  // The reply budget still caps the sum: 3 in all leaves the second block one token.
  c.budget = 3;
  const Outcome capped = run({thought, answer}, kPromptOn, c);
  EXPECT_EQ(capped.result.tokens, concat({kOpenLabel,
                                          repeat(kWord, 2),
                                          kMessage,
                                          {kClose},
                                          {byte('x')},
                                          kOpenLabel,
                                          {kWord},
                                          kMessage,
                                          {kClose},
                                          {kEos}}));
  EXPECT_EQ(capped.controller->thinking_tokens(), 3);
  // A block budget above what the model thinks changes nothing.
  c.budget = -1;
  c.block_budget = 3;
  EXPECT_EQ(run({thought, answer}, kPromptOn, c).result.tokens, concat({thought, answer, {kEos}}));
  // Block budget 0: no thinking, and the template is rendered with thinking off.
  c.block_budget = 0;
  EXPECT_FALSE(c.enable_thinking(true));
  const Outcome none = run({thought, answer}, kPromptOn, c);
  // Both blocks are closed at once; the model's own later "word word <channel|>" then lands in
  // the answer as text.
  EXPECT_EQ(none.result.tokens, concat({kOpenLabel,
                                        {kClose},
                                        {byte('x')},
                                        kOpenLabel,
                                        {kClose},
                                        repeat(kWord, 2),
                                        {kClose, byte('y'), kEos}}));
  EXPECT_EQ(none.controller->thinking_tokens(), 0);
}

TEST(Reasoning, BudgetNeverCutsInsideAToolCall) {
  // The budget (3) is spent by the tool-call opener: the model finishes its call (five argument
  // tokens and the closer), then the closing is forced at once (the closer ends a "word").
  const std::vector<int32_t> call = concat({{kCallOpen}, repeat(kIng, 5), {kCallClose}});
  const auto thought = concat({kOpenLabel, repeat(kWord, 2), call, repeat(kWord, 4), {kClose}});
  const Outcome r =
      run({thought, kAnswer}, kPromptOn, with_budget(3), -1, gemma_like_vocab_with_tools());
  EXPECT_EQ(r.result.tokens,
            concat({kOpenLabel, repeat(kWord, 2), call, kMessage, {kClose}, kAnswer, {kEos}}));
  EXPECT_EQ(r.controller->thinking_tokens(), 2 + static_cast<int64_t>(call.size()));
  EXPECT_EQ(count_forced(r), kMessage.size() + 1);
  // Without tool-call markers in the vocabulary the same budget cuts right after the opener.
  const Outcome unguarded = run({thought, kAnswer}, kPromptOn, with_budget(3));
  EXPECT_EQ(
      unguarded.result.tokens,
      concat({kOpenLabel, repeat(kWord, 2), {kCallOpen}, kMessage, {kClose}, kAnswer, {kEos}}));
  // The budget spent inside the call (2 arguments in): the same result.
  const Outcome inside =
      run({thought, kAnswer}, kPromptOn, with_budget(5), -1, gemma_like_vocab_with_tools());
  EXPECT_EQ(inside.result.tokens, r.result.tokens);
}

TEST(Reasoning, ToolCallThatNeverClosesIsClosedAfterItsGrace) {
  // A call that runs on: after `tool_call_grace` tokens past the budget its closer is forced,
  // then the message and the end marker.
  const auto thought = concat({kOpenLabel, {kWord, kCallOpen}, repeat(kIng, 50)});
  ReasoningConfig c = with_budget(2);
  c.tool_call_grace = 4;
  const Outcome r = run({thought, kAnswer}, kPromptOn, c, -1, gemma_like_vocab_with_tools());
  EXPECT_EQ(r.result.tokens, concat({kOpenLabel,
                                     {kWord, kCallOpen},
                                     repeat(kIng, 4),
                                     {kCallClose},
                                     kMessage,
                                     {kClose},
                                     kAnswer,
                                     {kEos}}));
  EXPECT_EQ(r.controller->thinking_tokens(), 6);
  EXPECT_EQ(count_forced(r), 1 + kMessage.size() + 1);
  EXPECT_EQ(r.controller->reasoning_tokens(), 6 + static_cast<int64_t>(kMessage.size()));
}

TEST(Reasoning, BudgetNeverCutsInsideAMultiTokenMarker) {
  // Two-token tool-call markers "<tool" "_call>" / "</tool" "_call>" and end marker "</"
  // "think>". The budget (2) is spent by "<tool": the model completes the opener, writes its
  // call, completes the closer, and only then is the closing forced.
  const ReasoningVocab vocab = two_token_vocab_with_tools();
  const std::vector<int32_t> message = encode("\nOK.\n");
  const std::vector<int32_t> call = {kToolA, kToolB, kWord, kWord, kToolC, kToolB};
  const auto thought = concat({{kThinkOpen, kWord}, call, repeat(kWord, 5), {kEndA, kEndB}});
  const Outcome r = run({thought, kAnswer}, kPromptOn, with_budget(2), -1, vocab);
  EXPECT_EQ(r.result.tokens,
            concat({{kThinkOpen, kWord}, call, message, {kEndA, kEndB}, kAnswer, {kEos}}));
  EXPECT_EQ(r.controller->thinking_tokens(), 1 + static_cast<int64_t>(call.size()));
  // A begun opener that breaks off was text: the model may finish it (one token), no more.
  ReasoningConfig c = with_budget(2);
  c.word_grace = 0;
  const auto broken = concat({{kThinkOpen, kWord, kToolA}, repeat(kWord, 5), {kEndA, kEndB}});
  const Outcome b = run({broken, kAnswer}, kPromptOn, c, -1, vocab);
  EXPECT_EQ(b.result.tokens,
            concat({{kThinkOpen, kWord, kToolA, kWord}, message, {kEndA, kEndB}, kAnswer, {kEos}}));
  EXPECT_EQ(b.controller->thinking_tokens(), 3);
  // The budget spent just after "</tool" inside the call: the model's closer is completed by
  // the model, not cut.
  const Outcome late = run({thought, kAnswer}, kPromptOn, with_budget(6), -1, vocab);
  EXPECT_EQ(late.result.tokens, r.result.tokens);
}

TEST(Reasoning, ContextRoomKeepsTheAnswerReserve) {
  // No token limit and a budget far above the context: the context (n_ctx 60, prompt 3: room
  // for 58 tokens) limits thinking so that the closing and an answer of min(128, 58/2) = 29
  // tokens fit. Closing starts when generated + (3 UTF-8 + message 5 + end 1) + 29 >= 58, i.e.
  // after 20 tokens (3 for the open marker and label, 17 thinking).
  const auto thought = concat({kOpenLabel, repeat(kWord, 500)});
  const auto answer = repeat(kThe, 500);
  ReasoningConfig c = with_budget(1000);
  const Outcome r = run({thought, answer}, kPromptOn, c, -1, gemma_like_vocab(), 60);
  EXPECT_EQ(r.controller->context_room(), 58);
  EXPECT_EQ(r.controller->answer_reserve(), 29);
  EXPECT_EQ(r.result.finish_reason, FinishReason::kContextFull);
  EXPECT_EQ(r.result.tokens,
            concat({kOpenLabel, repeat(kWord, 17), kMessage, {kClose}, repeat(kThe, 32)}));
  // A token limit above the room changes nothing; one below it binds instead.
  EXPECT_EQ(run({thought, answer}, kPromptOn, c, 1000, gemma_like_vocab(), 60).result.tokens,
            r.result.tokens);
  const Outcome limited = run({thought, answer}, kPromptOn, c, 40, gemma_like_vocab(), 60);
  EXPECT_EQ(limited.controller->answer_reserve(), 20);
  EXPECT_EQ(limited.result.tokens,
            concat({kOpenLabel, repeat(kWord, 8), kMessage, {kClose}, repeat(kThe, 23)}));
  // An explicit reserve.
  c.answer_reserve = 5;
  const Outcome explicit_reserve = run({thought, answer}, kPromptOn, c, -1, gemma_like_vocab(), 60);
  // generated + 9 + 5 >= 58 after 44 tokens: 41 thinking.
  EXPECT_EQ(explicit_reserve.result.tokens,
            concat({kOpenLabel, repeat(kWord, 41), kMessage, {kClose}, repeat(kThe, 8)}));
}

TEST(Reasoning, ContextRoomPropertyClosingAlwaysCompleteAnswerGetsItsReserve) {
  // For every context size, with ASCII words or 4-byte characters spelled byte by byte (the
  // character must be finished before the closing), with and without word grace: the thought
  // block is always closed (message + end marker complete) and the answer gets at least its
  // reserve; thinking never outruns the budget.
  const std::vector<int32_t> emoji = {byte(0xF0), byte(0x9F), byte(0x98), byte(0x80)};
  std::vector<int32_t> emojis;
  for (int i = 0; i < 200; ++i) emojis.insert(emojis.end(), emoji.begin(), emoji.end());
  const std::vector<int32_t> words = concat({repeat(kWord, 3), repeat(kIng, 2)});
  std::vector<int32_t> word_text;
  for (int i = 0; i < 200; ++i) word_text.insert(word_text.end(), words.begin(), words.end());
  const auto answer = repeat(kThe, 1000);
  for (const auto* text : {&emojis, &word_text}) {
    for (int64_t grace : {0, 4}) {
      for (int64_t n_ctx = 30; n_ctx <= 160; ++n_ctx) {
        SCOPED_TRACE(testing::Message() << "n_ctx " << n_ctx << " grace " << grace
                                        << (text == &emojis ? " emoji" : " words"));
        ReasoningConfig c = with_budget(100);
        c.word_grace = grace;
        const Outcome r =
            run({concat({kOpenLabel, *text}), answer}, kPromptOn, c, -1, gemma_like_vocab(), n_ctx);
        const auto& t = r.result.tokens;
        const auto close = std::find(t.begin(), t.end(), kClose);
        ASSERT_NE(close, t.end());
        const auto answer_tokens = t.end() - close - 1;
        EXPECT_GE(answer_tokens, r.controller->answer_reserve());
        EXPECT_EQ(std::vector<int32_t>(close - static_cast<ptrdiff_t>(kMessage.size()), close),
                  kMessage);
        EXPECT_LE(r.controller->thinking_tokens(), 100 + grace + 3);
        EXPECT_EQ(r.controller->thinking_tokens() % (text == &emojis ? 4 : 1), 0)
            << "a character was split";
        EXPECT_EQ(static_cast<int64_t>(t.size()), n_ctx - 3 + 1);  // the whole room was used
      }
    }
  }
}

TEST(Reasoning, ToolCallAtTheContextLimitIsClosedInTime) {
  // The context (n_ctx 40: room 38) binds inside a tool call: its closer, the message and the
  // end marker are forced while they still fit, and the answer keeps its reserve (4).
  // Closing starts when generated + (3 + 0 + closer 1 + message 5 + end 1) + 4 >= 38: after 24
  // tokens (open marker and label 3, " word", the opener, 19 call tokens).
  const auto thought = concat({kOpenLabel, {kWord, kCallOpen}, repeat(kIng, 100)});
  ReasoningConfig c = with_budget(-1);
  c.answer_reserve = 4;
  const Outcome r =
      run({thought, repeat(kThe, 100)}, kPromptOn, c, -1, gemma_like_vocab_with_tools(), 40);
  EXPECT_EQ(r.result.finish_reason, FinishReason::kContextFull);
  EXPECT_EQ(r.result.tokens, concat({kOpenLabel,
                                     {kWord, kCallOpen},
                                     repeat(kIng, 19),
                                     {kCallClose},
                                     kMessage,
                                     {kClose},
                                     repeat(kThe, 7)}));
}

TEST(Reasoning, QuotedMarkerInThePromptDoesNotArm) {
  // The prompt mentions <|channel> earlier but ends elsewhere: the controller stays outside.
  const std::vector<int32_t> prompt = {kOpen, byte('h'), byte('i'), kNl};
  const Outcome r = run({kAnswer, {}}, prompt, with_budget(0));
  EXPECT_EQ(r.result.tokens, concat({kAnswer, {kEos}}));
  EXPECT_EQ(count_forced(r), 0u);
}

TEST(Reasoning, CloneCarriesStateAndIsIndependent) {
  ReasoningController c(gemma_like_vocab(), with_budget(2));
  c.begin(kPromptOn);
  std::vector<float> logits(kBytes + 256, 0.0f);
  for (int32_t t : kOpenLabel) c.on_commit(t, false);
  c.on_commit(kWord, false);
  EXPECT_EQ(c.state(), ReasoningController::State::kThinking);
  auto copy = c.clone();
  auto* scratch = dynamic_cast<ReasoningController*>(copy.get());
  ASSERT_NE(scratch, nullptr);
  // A drafted token walked through the scratch copy crosses the budget there only.
  scratch->on_commit(kThe, false);
  EXPECT_EQ(scratch->state(), ReasoningController::State::kFinishing);
  EXPECT_EQ(scratch->before_sample(logits), kMessage[0]);
  EXPECT_EQ(c.state(), ReasoningController::State::kThinking);
  EXPECT_EQ(c.thinking_tokens(), 1);
  EXPECT_EQ(c.before_sample(logits), -1);
  // before_sample does not change state: asking twice gives the same answer.
  EXPECT_EQ(scratch->before_sample(logits), kMessage[0]);
  // Committing something other than the forced token while closing is a loop bug.
  EXPECT_TRUE(scratch->forced_run().empty());  // finishing: what comes next depends on logits
  scratch->on_commit(kMessage[0], true);
  EXPECT_EQ(scratch->forced_run(),
            concat({std::vector<int32_t>(kMessage.begin() + 1, kMessage.end()), {kClose}}));
  EXPECT_TRUE(c.forced_run().empty());
  EXPECT_THROW(scratch->on_commit(kWord, false), Error);
}

TEST(Reasoning, ConfigParsingAndThinkingSwitch) {
  EXPECT_EQ(parse_reasoning_mode("on"), ReasoningMode::kOn);
  EXPECT_EQ(parse_reasoning_mode("off"), ReasoningMode::kOff);
  EXPECT_EQ(parse_reasoning_mode("auto"), ReasoningMode::kAuto);
  EXPECT_THROW(parse_reasoning_mode("maybe"), Error);
  ReasoningConfig c;
  EXPECT_FALSE(c.enable_thinking(false));
  EXPECT_TRUE(c.enable_thinking(true));
  c.mode = ReasoningMode::kOn;
  EXPECT_TRUE(c.enable_thinking(false));
  c.budget = 0;
  EXPECT_FALSE(c.enable_thinking(true));
  c.budget = -2;
  EXPECT_THROW(c.validate(), Error);
  c.budget = 5;
  c.answer_reserve = -3;
  EXPECT_THROW(c.validate(), Error);
  c.answer_reserve = -1;
  EXPECT_EQ(c.effective_answer_reserve(), 0);  // no token limit
  c.max_tokens = 100;
  EXPECT_EQ(c.effective_answer_reserve(), 50);
  c.max_tokens = 1000;
  EXPECT_EQ(c.effective_answer_reserve(), 128);
  c.answer_reserve = 7;
  EXPECT_EQ(c.effective_answer_reserve(), 7);
  EXPECT_EQ(c.answer_reserve_for(-1), 0);
  c.answer_reserve = -1;
  EXPECT_EQ(c.answer_reserve_for(60), 30);
  c.block_budget = -2;
  EXPECT_THROW(c.validate(), Error);
  c.block_budget = 3;
  c.tool_call_grace = -1;
  EXPECT_THROW(c.validate(), Error);
}

TEST(Reasoning, RealGemma4VocabularyMarkersByText) {
  const std::string path = test::source_dir() + "/tests/data/vocab/ggml-vocab-gemma-4.gguf";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " missing; run tools/fetch-test-data.sh";
  const auto file = gguf::File::open(path);
  const auto tok = text::Tokenizer::from_gguf(*file);
  auto vocab = ReasoningVocab::for_tokenizer(*tok);
  ASSERT_TRUE(vocab.has_value());
  EXPECT_EQ(vocab->start, std::vector<int32_t>{tok->find("<|channel>")});
  EXPECT_EQ(vocab->end, std::vector<int32_t>{tok->find("<channel|>")});
  EXPECT_EQ(vocab->start[0], 100);  // gemma4.md §8.2
  EXPECT_EQ(vocab->end[0], 101);
  EXPECT_EQ(vocab->tool_call_open, std::vector<int32_t>{tok->find("<|tool_call>")});
  EXPECT_EQ(vocab->tool_call_close, std::vector<int32_t>{tok->find("<tool_call|>")});
  EXPECT_EQ(vocab->tool_call_open[0], 48);  // gemma4.md §8.2 (there UNCONFIRMED)
  EXPECT_EQ(vocab->tool_call_close[0], 49);
  ReasoningConfig config = with_budget(0);
  ReasoningController c(*vocab, config);
  // The template's thinking-on generation prompt, then the model opening its channel: at budget
  // 0 the label "thought\n" and <channel|> are forced, as the thinking-off template writes them.
  c.begin(tok->encode("<|turn>user\nHi<turn|>\n<|turn>model\n", true, true));
  c.on_commit(tok->find("<|channel>"), false);
  std::vector<float> logits(static_cast<size_t>(tok->n_vocab()), 0.0f);
  std::string forced;
  while (c.must_continue()) {
    const int32_t t = c.before_sample(logits);
    ASSERT_GE(t, 0);
    forced += tok->piece(t);
    c.on_commit(t, true);
  }
  EXPECT_EQ(forced, "thought\n<channel|>");
  // The default message tokenizes to ordinary text.
  ReasoningController with_message(*vocab, ReasoningConfig{});
  EXPECT_EQ(tok->decode(with_message.message_tokens()), kDefaultBudgetMessage);
}

// Speculative decoding as shared/docs/reasoning.md B9 describes it, on the scripted model: a
// drafter proposes K tokens (here: the model's own greedy continuation, ignorant of the budget),
// the target walks them through a clone() of the controller, accepts drafts up to the first
// disagreement (a forced token counts as the target's choice) and emits its correction; the real
// controller then commits only the accepted tokens. The stream must equal plain decoding for
// every budget, i.e. a boundary inside a drafted block is exact.
std::vector<int32_t> speculative_run(const Script& script, const std::vector<int32_t>& prompt,
                                     ReasoningConfig config, size_t draft_size) {
  const size_t n_vocab = kBytes + 256;
  auto next = [&](const std::vector<int32_t>& context) -> int32_t {
    size_t answer_from = std::string::npos;
    for (size_t i = prompt.size(); i < context.size(); ++i) {
      if (context[i] == kClose) {
        answer_from = i + 1;
        break;
      }
    }
    if (answer_from != std::string::npos) {
      const size_t k = context.size() - answer_from;
      return k < script.answer.size() ? script.answer[k] : kEos;
    }
    const size_t k = context.size() - prompt.size();
    return k < script.thought.size() ? script.thought[k] : kEos;
  };
  auto logits_after = [&](const std::vector<int32_t>& context) {
    std::vector<float> row(n_vocab, 0.0f);
    row[static_cast<size_t>(next(context))] = 10.0f;
    return row;
  };
  ReasoningController controller(gemma_like_vocab(), config);
  controller.begin(prompt);
  std::vector<int32_t> context = prompt;
  while (context.size() - prompt.size() < 200) {
    std::vector<int32_t> draft, hypothesis = context;
    for (size_t i = 0; i < draft_size; ++i) {
      draft.push_back(next(hypothesis));
      hypothesis.push_back(draft.back());
    }
    // Verify: target rows for positions 0..K, walked through a scratch copy.
    auto scratch = controller.clone();
    std::vector<int32_t> accepted, verify_context = context;
    for (size_t j = 0; j <= draft.size(); ++j) {
      std::vector<float> row = logits_after(verify_context);
      int32_t token = scratch->before_sample(row);
      if (token < 0)
        token = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      accepted.push_back(token);
      if (j == draft.size() || token != draft[j] || token == kEos) break;
      scratch->on_commit(token, false);
      verify_context.push_back(token);
    }
    // Commit the accepted prefix (and the correction) to the real controller.
    for (int32_t token : accepted) {
      std::vector<float> row = logits_after(context);
      const int32_t forced = controller.before_sample(row);
      EXPECT_TRUE(forced < 0 || forced == token);
      controller.on_commit(token, forced >= 0);
      context.push_back(token);
      if (token == kEos)
        return std::vector<int32_t>(context.begin() + prompt.size(), context.end());
    }
  }
  return std::vector<int32_t>(context.begin() + prompt.size(), context.end());
}

TEST(Reasoning, BoundaryInsideADraftedBlockIsExact) {
  const std::vector<int32_t> text = {kWord, kIng,       kWord,      byte(0xC3), byte(0xA9),
                                     kThe,  byte('.'),  kWord,      kIng,       kIng,
                                     kThe,  byte(0xE2), byte(0x82), byte(0xAC), kWord};
  const auto thought = concat({kOpenLabel, text, {kClose}});
  const auto answer = repeat(kThe, 6);
  for (int64_t budget = -1; budget <= static_cast<int64_t>(text.size()) + 1; ++budget) {
    for (size_t k : {1u, 4u, 16u}) {
      SCOPED_TRACE(testing::Message() << "budget " << budget << " draft " << k);
      const ReasoningConfig config = with_budget(budget);
      const Outcome plain = run({thought, answer}, kPromptOn, config);
      EXPECT_EQ(speculative_run({thought, answer}, kPromptOn, config, k), plain.result.tokens);
    }
  }
}

// Through the TextModel interface (what `generate`/`chat` hold), with the reply split as the CLI
// splits it: the budget cuts the reasoning, the answer follows.
TEST(Reasoning, TextModelChatWithBudget) {
  FakeTextModel text;
  auto tokens = [&](std::string_view s) { return text.tokenize(s, false); };
  text.replies = {tokens("<|channel>thought\nabc Z<channel|>Hi")};
  ReasoningConfig config = with_budget(2);
  config.budget_message = ".";
  auto controller = make_reasoning_controller(text, config);
  ASSERT_NE(controller, nullptr);
  SamplerConfig greedy;
  greedy.temperature = 0;
  Generator generator(text.model(), text.vocab(), greedy);
  const std::vector<ChatMessage> messages = {{"user", "Q"}};
  const auto prompt = text.tokenize(text.render_chat(messages, config.enable_thinking(true)), true);
  ReplySplitter splitter(text.reasoning_markers(),
                         ReplySplitter::prompt_opens_reasoning(prompt, text.reasoning_markers()));
  GenerationOptions options;
  options.controller = controller.get();
  options.on_token = [&](const TokenEvent& e) {
    splitter.push(e.token, e.piece);
    return true;
  };
  const GenerationResult result = generator.generate(prompt, options);
  splitter.finish();
  // "a" "b" hit the budget, "c" finishes the word, " " would start a new one: "." and the end
  // marker are forced in its place; the model's own end marker later is a stray one.
  EXPECT_EQ(splitter.reasoning(), "abc.");
  EXPECT_EQ(splitter.content(), "Hi");
  EXPECT_EQ(controller->thinking_tokens(), 3);
  EXPECT_EQ(controller->reasoning_tokens(), 4);
  EXPECT_EQ(result.finish_reason, FinishReason::kEndOfGeneration);
}

// Through the ModelBackend interface (what the API and `batch` hold). The fake backend thinks
// its rendered prompt text ("user: hello world") and is cut after three bytes.
TEST(Reasoning, ModelBackendWithBudget) {
  auto backend = make_fake_backend(512);
  ReasoningConfig config = with_budget(3);
  config.word_grace = 0;
  config.budget_message = "!";
  auto controller = make_reasoning_controller(*backend, config);
  ASSERT_NE(controller, nullptr);
  auto sequence = backend->new_sequence();
  SamplerConfig greedy;
  greedy.temperature = 0;
  Generator generator(*sequence, backend->vocab(), greedy);
  const nlohmann::ordered_json messages =
      nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hello world"}])");
  const auto prompt =
      prepare_prompt(*backend, "", messages, nlohmann::ordered_json(), /*thinking=*/true).tokens;
  GenerationOptions options;
  options.controller = controller.get();
  options.max_tokens = 100;
  const GenerationResult result = generator.generate(prompt, options);
  ASSERT_GE(result.tokens.size(), 6u);
  EXPECT_EQ(std::vector<int32_t>(result.tokens.begin(), result.tokens.begin() + 6),
            (std::vector<int32_t>{kFakeThinkOpen, 'u', 's', 'e', '!', kFakeThinkClose}));
  EXPECT_EQ(controller->thinking_tokens(), 3);
  EXPECT_EQ(controller->reasoning_tokens(), 4);
}

TEST(ReasoningDisplay, HiddenByDefaultDimOnTerminalsPlainInPipes) {
  using Piece = ReplySplitter::Piece;
  using Channel = ReplySplitter::Channel;
  EXPECT_EQ(reasoning_display(false, true), ReasoningDisplay::kHide);
  EXPECT_EQ(reasoning_display(true, true), ReasoningDisplay::kDim);
  EXPECT_EQ(reasoning_display(true, false), ReasoningDisplay::kPlain);
  const std::vector<Piece> pieces = {
      {Channel::kReasoning, "hmm"}, {Channel::kReasoning, " ok"}, {Channel::kContent, "Yes"}};
  auto print = [&](ReasoningDisplay d) {
    std::ostringstream out;
    {
      ReasoningPrinter p(out, d);
      p.write(pieces);
    }
    return out.str();
  };
  EXPECT_EQ(print(ReasoningDisplay::kHide), "Yes");
  EXPECT_EQ(print(ReasoningDisplay::kPlain), "hmm okYes");
  EXPECT_EQ(print(ReasoningDisplay::kDim), "\033[2mhmm ok\033[0mYes");
  std::ostringstream out;
  {
    ReasoningPrinter p(out, ReasoningDisplay::kDim);
    p.write(std::vector<Piece>{{Channel::kReasoning, "x"}});
  }
  EXPECT_EQ(out.str(), "\033[2mx\033[0m");  // the destructor ends the dim span
}

}  // namespace
}  // namespace boltrt

// The reasoning budget under DFlash speculative decoding (issue 9 item 4, shared/docs/reasoning.md
// B9), end to end on the shipped tiny Gemma 4 (models/tiny/tiny-f32.gguf, trained with thought
// sections): real tokenizer, chat template, model, the speculative loop and the plain one.
//
// The drafters know nothing of the budget: a perfect one (the target's own greedy continuation,
// so whole blocks are accepted and the budget boundary falls inside a drafted block), a partly
// wrong one, and a synthesized (random-weight) DFlash draft. Whatever the drafter, the forced
// closing must land on the same token as without a draft and the whole output must be the
// plain output: the loop consults the controller once per committed token, and rejected drafts
// never reach it. The CLI test runs `boltrt generate --draft` against `boltrt generate`.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "generate/gguf_text_model.h"
#include "generate/reasoning.h"
#include "generate/speculative.h"
#include "model/dflash.h"
#include "model/dflash_synth.h"
#include "model/gemma4.h"
#include "model/gemma4_session.h"
#include "support/paths.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace boltrt {
namespace {

using test::shell_quote;

namespace fs = std::filesystem;

std::string tiny_path() {
  return test::source_dir() + "/models/tiny/tiny-f32.gguf";
}

// Proposes the target's own greedy continuation (a second session on the same model), ignorant
// of the budget; with `corrupt` > 0 every token is replaced by its successor id with that
// probability (rejections at every depth).
class OracleDrafter : public BlockDrafter {
 public:
  OracleDrafter(const Gemma4Model& model, int64_t max_draft, double corrupt)
      : max_draft_(max_draft), corrupt_(corrupt), session_(model, options(), nullptr) {}
  int64_t max_draft() const override { return max_draft_; }
  std::vector<int32_t> tap_layers() const override { return {}; }
  void reset() override {
    session_.reset();
    rng_ = 12345;
  }
  void add_context(std::span<const int32_t> tokens, const float*) override {
    session_.decode(tokens);
  }
  int64_t context_end() const override { return session_.n_past(); }
  void propose(int32_t last, int64_t n, int32_t* out) override {
    const int64_t start = session_.n_past();
    int32_t t = last;
    for (int64_t i = 0; i < n; ++i) {
      const auto logits = session_.decode(std::span<const int32_t>(&t, 1));
      t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      rng_ = rng_ * 6364136223846793005ull + 1442695040888963407ull;
      if (corrupt_ > 0 && static_cast<double>(rng_ >> 11) / 9007199254740992.0 < corrupt_) {
        t = static_cast<int32_t>((t + 1) % session_.n_vocab());
      }
      out[i] = t;
    }
    session_.rollback(start);
  }

  static SessionOptions options() {
    SessionOptions so;
    so.n_ctx = 512;
    so.n_batch = 16;
    so.kv_type = KvType::F32;
    return so;
  }

 private:
  int64_t max_draft_;
  double corrupt_;
  uint64_t rng_ = 12345;
  Gemma4Session session_;
};

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<bool> forced;
  int64_t thinking = 0, reasoning = 0, forced_count = 0;
  int64_t context_room = 0, answer_reserve = 0;
  FinishReason finish = FinishReason::kEndOfGeneration;
  SpeculativeStats spec;
};

class ReasoningSpeculative : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(tiny_path())) return;
    model_ = Gemma4Model::load(tiny_path()).release();
    tokenizer_ = text::Tokenizer::from_gguf(model_->file()).release();
    const std::string path = test::scratch_dir("reasoning_spec") + "/draft.gguf";
    model::DFlashSynthOptions o;
    o.block_size = 16;
    model::write_dflash_synth(model_->config(), o, path);
    draft_ = DFlashDraft::load(path, *model_).release();
    fs::remove(path);  // mapped; the file can go
  }
  static void TearDownTestSuite() {
    delete draft_;
    delete tokenizer_;
    delete model_;
    draft_ = nullptr;
    tokenizer_ = nullptr;
    model_ = nullptr;
  }
  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << tiny_path() << " missing";
  }

  static std::vector<int32_t> prompt() {
    const auto tmpl = text::ChatTemplate::for_tokenizer(*tokenizer_);
    text::ChatOptions chat;
    chat.enable_thinking = true;
    const text::ChatPrompt p =
        tmpl.render({{"user", "What is 347 + 586?", {}, "", ""}}, text::Json(), chat);
    return tokenizer_->encode(p.text, true, true);
  }

  static GenerationVocab vocab() {
    GenerationVocab gv;
    const text::Tokenizer* tok = tokenizer_;
    gv.piece = [tok](int32_t id) { return tok->piece(id, false); };
    gv.end_of_generation = tokenizer_->eog_tokens();
    return gv;
  }

  static ReasoningConfig budget(int64_t n) {
    ReasoningConfig c;
    c.mode = ReasoningMode::kOn;
    c.budget = n;
    return c;
  }

  // drafter == nullptr: the plain Generator.
  static Outcome generate(ReasoningConfig config, int64_t max_tokens, int64_t n_ctx,
                          BlockDrafter* drafter, const SamplerConfig& sampling,
                          const SpeculativeOptions& so = {}) {
    auto rv = ReasoningVocab::for_tokenizer(*tokenizer_);
    EXPECT_TRUE(rv.has_value());
    config.max_tokens = max_tokens;
    ReasoningController controller(std::move(*rv), config);
    SessionOptions session_options = OracleDrafter::options();
    session_options.n_ctx = n_ctx;
    Gemma4Session session(*model_, session_options, nullptr);

    Outcome run;
    GenerationOptions options;
    options.max_tokens = max_tokens;
    options.controller = &controller;
    options.on_token = [&run](const TokenEvent& e) {
      run.forced.push_back(e.forced);
      return true;
    };
    GenerationResult result;
    if (drafter == nullptr) {
      Generator generator(session, vocab(), sampling);
      result = generator.generate(prompt(), options);
    } else {
      SpeculativeGenerator generator(session, *drafter, vocab(), sampling, so);
      SpeculativeResult r = generator.generate(prompt(), options);
      result = std::move(r.generation);
      run.spec = r.speculative;
    }
    run.tokens = result.tokens;
    run.finish = result.finish_reason;
    run.thinking = controller.thinking_tokens();
    run.reasoning = controller.reasoning_tokens();
    run.forced_count = controller.forced_tokens();
    run.context_room = controller.context_room();
    run.answer_reserve = controller.answer_reserve();
    return run;
  }

  static SamplerConfig greedy() {
    SamplerConfig s;
    s.temperature = 0;
    s.seed = 1;
    return s;
  }

  static void expect_same(const Outcome& spec, const Outcome& plain) {
    EXPECT_EQ(spec.tokens, plain.tokens);
    EXPECT_EQ(spec.forced, plain.forced);  // the forced closing lands on the same tokens
    EXPECT_EQ(spec.thinking, plain.thinking);
    EXPECT_EQ(spec.reasoning, plain.reasoning);
    EXPECT_EQ(spec.forced_count, plain.forced_count);
    EXPECT_EQ(spec.finish, plain.finish);
  }

  static size_t first_forced(const Outcome& r) {
    return static_cast<size_t>(std::find(r.forced.begin(), r.forced.end(), true) -
                               r.forced.begin());
  }

  static inline Gemma4Model* model_ = nullptr;
  static inline text::Tokenizer* tokenizer_ = nullptr;
  static inline DFlashDraft* draft_ = nullptr;
};

TEST_F(ReasoningSpeculative, BudgetHoldsExactlyWithEveryDrafter) {
  const Outcome unlimited = generate(budget(-1), 300, 512, nullptr, greedy());
  ASSERT_GT(unlimited.thinking, 40) << "the tiny model thinks less than the budgets below";
  ASSERT_EQ(unlimited.forced_count, 0);

  OracleDrafter perfect(*model_, 15, 0.0);
  OracleDrafter partly(*model_, 7, 0.3);
  DFlashDrafter dflash(*draft_, nullptr);
  struct Case {
    const char* name;
    BlockDrafter* drafter;
    SpeculativeOptions options;
  };
  SpeculativeOptions fixed;
  fixed.adaptive = false;
  const std::vector<Case> cases = {{"perfect K=15", &perfect, fixed},
                                   {"partly right K=7", &partly, {}},
                                   {"dflash", &dflash, {}}};
  for (int64_t b : {-1, 0, 1, 13, 31}) {
    ReasoningConfig config = budget(b);
    config.word_grace = b == 31 ? 4 : 0;  // one budget with the word grace
    const Outcome plain = generate(config, 300, 512, nullptr, greedy());
    if (b > 0 && config.word_grace == 0) {
      EXPECT_EQ(plain.thinking, b);  // the budget holds exactly (ASCII thoughts, no grace)
    }
    if (b >= 0) {
      EXPECT_GT(plain.forced_count, 0);
    }
    for (const Case& c : cases) {
      SCOPED_TRACE(testing::Message() << "budget " << b << ", " << c.name);
      const Outcome spec = generate(config, 300, 512, c.drafter, greedy(), c.options);
      expect_same(spec, plain);
      EXPECT_GT(spec.spec.n_rounds, 0);
      if (c.drafter == &perfect) {
        // Whole blocks accepted up to the forced closing, which the budget-blind draft gets
        // wrong: the boundary lies inside a drafted block and is still exact.
        EXPECT_GT(spec.spec.n_accepted, static_cast<int64_t>(spec.tokens.size()) / 2);
        if (b > 0) {
          EXPECT_LT(spec.spec.n_accepted, spec.spec.n_drafted);
          EXPECT_EQ(first_forced(spec), first_forced(plain));
        }
      }
    }
  }
}

TEST_F(ReasoningSpeculative, ContextRoomHoldsWithADraft) {
  // A context only 90 tokens past the prompt and no budget: the controller closes the thought
  // so that the answer keeps min(128, room / 2) tokens; with a draft the same.
  const int64_t n_ctx = static_cast<int64_t>(prompt().size()) + 90;
  const Outcome plain = generate(budget(-1), -1, n_ctx, nullptr, greedy());
  EXPECT_EQ(plain.context_room, 91);
  EXPECT_EQ(plain.answer_reserve, 45);
  const int32_t close = tokenizer_->find("<channel|>");
  const auto it = std::find(plain.tokens.begin(), plain.tokens.end(), close);
  ASSERT_NE(it, plain.tokens.end()) << "the thought block was never closed";
  EXPECT_TRUE(plain.forced[static_cast<size_t>(it - plain.tokens.begin())]);
  const auto answer_tokens = plain.tokens.end() - it - 1;
  EXPECT_TRUE(answer_tokens >= 45 || plain.finish == FinishReason::kEndOfGeneration)
      << answer_tokens;
  OracleDrafter perfect(*model_, 15, 0.0);
  OracleDrafter partly(*model_, 7, 0.3);
  SpeculativeOptions fixed;
  fixed.adaptive = false;
  expect_same(generate(budget(-1), -1, n_ctx, &perfect, greedy(), fixed), plain);
  expect_same(generate(budget(-1), -1, n_ctx, &partly, greedy()), plain);
}

TEST_F(ReasoningSpeculative, SampledWithTheSameSeedEqualsPlain) {
  SamplerConfig sampled;
  sampled.temperature = 0.8f;
  sampled.seed = 42;
  OracleDrafter partly(*model_, 7, 0.3);
  for (int64_t b : {0, 13}) {
    SCOPED_TRACE(b);
    const Outcome plain = generate(budget(b), 200, 512, nullptr, sampled);
    expect_same(generate(budget(b), 200, 512, &partly, sampled), plain);
  }
}

// Counts the verify rounds (one add_context() per round with drafted tokens) around another
// drafter.
class CountingDrafter : public BlockDrafter {
 public:
  explicit CountingDrafter(BlockDrafter& inner) : inner_(inner) {}
  int64_t max_draft() const override { return inner_.max_draft(); }
  std::vector<int32_t> tap_layers() const override { return inner_.tap_layers(); }
  void reset() override { inner_.reset(); }
  bool rollback(int64_t n) override { return inner_.rollback(n); }
  void add_context(std::span<const int32_t> tokens, const float* taps) override {
    ++calls;
    inner_.add_context(tokens, taps);
  }
  int64_t context_end() const override { return inner_.context_end(); }
  void propose(int32_t last, int64_t n, int32_t* out) override {
    ++proposals;
    inner_.propose(last, n, out);
  }
  int64_t calls = 0, proposals = 0;

 private:
  BlockDrafter& inner_;
};

TEST_F(ReasoningSpeculative, ForcedClosingIsVerifiedInOnePass) {
  // The closing is known once its first token is forced: the loop verifies the rest in place of
  // drafted guesses (reasoning.md B9 step 5), so the forced tokens span two verify rounds (the
  // one whose correction is the first forced token, then one for the rest), not one round each.
  OracleDrafter perfect(*model_, 15, 0.0);
  CountingDrafter counting(perfect);
  SpeculativeOptions fixed;
  fixed.adaptive = false;
  ReasoningConfig config = budget(13);
  config.word_grace = 0;
  auto rv = ReasoningVocab::for_tokenizer(*tokenizer_);
  ASSERT_TRUE(rv.has_value());
  config.max_tokens = 300;
  ReasoningController controller(std::move(*rv), config);
  Gemma4Session session(*model_, OracleDrafter::options(), nullptr);
  SpeculativeGenerator generator(session, counting, vocab(), greedy(), fixed);
  std::vector<int64_t> round_of_forced;
  GenerationOptions options;
  options.max_tokens = 300;
  options.controller = &controller;
  options.on_token = [&](const TokenEvent& e) {
    if (e.forced) round_of_forced.push_back(counting.calls);
    return true;
  };
  const SpeculativeResult r = generator.generate(prompt(), options);
  const Outcome plain = generate(config, 300, 512, nullptr, greedy());
  EXPECT_EQ(r.generation.tokens, plain.tokens);
  ASSERT_EQ(static_cast<int64_t>(round_of_forced.size()), controller.forced_tokens());
  ASSERT_GT(round_of_forced.size(), 3u);
  const auto rounds = round_of_forced.back() - round_of_forced.front() + 1;
  EXPECT_EQ(rounds, 1 + (static_cast<int64_t>(round_of_forced.size()) - 1 + 14) / 15)
      << round_of_forced.size() << " forced tokens";
}

// What the CLI's controller sees (ReasoningVocab::of a TextModel): Gemma 4's tool-call markers
// are found through the model's tokenizer, so the tool-call guard is on in generate/chat.
TEST_F(ReasoningSpeculative, TextModelVocabularyHasTheToolCallMarkers) {
  TextModelOptions o;
  o.path = tiny_path();
  o.threads = 1;
  const auto text = load_text_model(o);
  const auto vocab = ReasoningVocab::of(*text);
  ASSERT_TRUE(vocab.has_value());
  EXPECT_EQ(vocab->tool_call_open, std::vector<int32_t>{tokenizer_->find("<|tool_call>")});
  EXPECT_EQ(vocab->tool_call_close, std::vector<int32_t>{tokenizer_->find("<tool_call|>")});
  EXPECT_NE(vocab->tool_call_open[0], text::kNoToken);
}

// `boltrt generate --draft` on the CLI: a synthesized draft for the tiny model, the same JSON
// (tokens, reasoning, content, reasoning_tokens) as without it.
TEST(ReasoningSpeculativeCli, GenerateWithDraftEqualsWithout) {
  if (!fs::exists(tiny_path())) GTEST_SKIP() << tiny_path() << " missing";
  const std::string dir = test::scratch_dir("reasoning_spec_cli");
  const std::string draft = dir + "/draft.gguf";
  const std::string boltrt = shell_quote(test::cli_path());
  const auto synth =
      test::run_command_split(boltrt + " synth-draft --dflash-for " + shell_quote(tiny_path()) +
                              " --block-size 8 -o " + shell_quote(draft));
  ASSERT_EQ(synth.status, 0) << synth.out << synth.err;
  for (const std::string extra :
       {"--reasoning-budget 17", "--reasoning-budget 0", "--reasoning-budget -1 -c 120"}) {
    SCOPED_TRACE(extra);
    const std::string command = boltrt + " generate -m " + shell_quote(tiny_path()) +
                                " -t 1 --kv-type f32 --chat --reasoning on -n 200 --temp 0 "
                                "--json -p " +
                                shell_quote("What is 347 + 586?") + " " + extra;
    const auto plain = test::run_command_split(command);
    ASSERT_EQ(plain.status, 0) << plain.err;
    const auto drafted = test::run_command_split(command + " --draft " + shell_quote(draft));
    ASSERT_EQ(drafted.status, 0) << drafted.err;
    const auto p = nlohmann::json::parse(plain.out);
    const auto d = nlohmann::json::parse(drafted.out);
    EXPECT_EQ(d["tokens"], p["tokens"]);
    EXPECT_EQ(d["reasoning"], p["reasoning"]);
    EXPECT_EQ(d["content"], p["content"]);
    EXPECT_EQ(d["reasoning_tokens"], p["reasoning_tokens"]);
    EXPECT_EQ(d["finish_reason"], p["finish_reason"]);
    EXPECT_GT(d["draft"]["drafted"].get<int64_t>(), 0);
    EXPECT_FALSE(p["content"].get<std::string>().empty()) << plain.out;
    if (extra == "--reasoning-budget 17") {
      EXPECT_NE(p["reasoning"].get<std::string>().find(std::string(kDefaultBudgetMessage)),
                std::string::npos)
          << plain.out;
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace boltrt

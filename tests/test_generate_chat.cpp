// The chat loop and reply splitting on a scripted byte-level model: piped conversations, history
// and cache reuse, reasoning shown / dimmed / hidden, slash commands, multi-line input,
// cancellation, errors.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "generate/chat_loop.h"
#include "generate/reply_splitter.h"
#include "generate_fakes.h"
#include "support/paths.h"

namespace boltrt {
namespace {

using Piece = ReplySplitter::Piece;
using Channel = ReplySplitter::Channel;

std::string joined(const std::vector<Piece>& pieces, Channel channel) {
  std::string out;
  for (const auto& p : pieces) {
    if (p.channel == channel) out += p.text;
  }
  return out;
}

TEST(ReplySplitter, SeparatesReasoningAndDropsTheLabel) {
  ReplySplitter s(ReasoningMarkers{1, 2, "thought\n"});
  std::vector<Piece> all;
  auto feed = [&](int32_t token, std::string_view bytes) {
    for (auto& p : s.push(token, bytes)) all.push_back(p);
  };
  feed(1, "");
  feed(10, "thou");
  feed(11, "ght\nLet me");
  feed(12, " think");
  feed(2, "");
  feed(13, "Answer");
  for (auto& p : s.finish()) all.push_back(p);
  EXPECT_EQ(s.reasoning(), "Let me think");
  EXPECT_EQ(s.content(), "Answer");
  EXPECT_EQ(joined(all, Channel::kReasoning), "Let me think");
  EXPECT_EQ(joined(all, Channel::kContent), "Answer");
  EXPECT_EQ(s.reasoning_tokens(), 3);
}

TEST(ReplySplitter, LabelMismatchIsReasoningAndStrayCloseIsIgnored) {
  ReplySplitter s(ReasoningMarkers{1, 2, "thought\n"});
  s.push(1, "");
  s.push(10, "thinking hard");
  s.push(2, "");
  s.push(2, "");  // a lone close marker
  s.push(11, "ok");
  s.push(1, "");  // an empty extra block
  s.push(2, "");
  s.push(12, "!");
  s.finish();
  EXPECT_EQ(s.reasoning(), "thinking hard");
  EXPECT_EQ(s.content(), "ok!");
}

TEST(ReplySplitter, Utf8PerChannelAndPreOpenedBlock) {
  ReplySplitter s(ReasoningMarkers{1, 2, "thought\n"}, /*starts_in_reasoning=*/true);
  s.push(10, "\xC3");  // half of "é" ...
  s.push(2, "");       // ... cut by the close marker: U+FFFD in the reasoning
  s.push(11, "\xE2\x82");
  s.push(12, "\xAC");  // "€" across two tokens
  s.finish();
  EXPECT_EQ(s.reasoning(), "\xEF\xBF\xBD");
  EXPECT_EQ(s.content(), "\xE2\x82\xAC");
}

TEST(ReplySplitter, WithoutMarkersEverythingIsContent) {
  ReplySplitter s(std::nullopt);
  s.push(1, "a");
  s.push(2, "b");
  s.finish();
  EXPECT_EQ(s.content(), "ab");
  EXPECT_EQ(s.reasoning(), "");
}

struct ChatFixture {
  FakeTextModel text;
  std::unique_ptr<Generator> generator;
  std::ostringstream out, err;
  std::unique_ptr<ChatLoop> loop;

  explicit ChatFixture(ChatOptions options = {}, int64_t n_ctx = 4096) : text(n_ctx) {
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    greedy.seed = 1;
    generator = std::make_unique<Generator>(text.model(), text.vocab(), greedy);
    loop = std::make_unique<ChatLoop>(text, *generator, options, out, err);
  }
  void reply(std::string_view s) { text.replies.push_back(text.tokenize(s, false)); }
  void run(const std::vector<std::string>& lines) {
    size_t next = 0;
    loop->run([&](const char*) -> std::optional<std::string> {
      if (next == lines.size()) return std::nullopt;
      return lines[next++];
    });
  }
};

TEST(ChatLoop, PipedConversationKeepsHistoryAndReusesTheCache) {
  ChatFixture f;
  f.reply("Hello!");
  f.reply("Fine.");
  f.run({"hi", "how are you?"});
  EXPECT_EQ(f.out.str(), "Hello!\nFine.\n");
  EXPECT_EQ(f.err.str(), "");
  ASSERT_EQ(f.loop->history().size(), 4u);
  EXPECT_EQ(f.loop->history()[1].content, "Hello!");
  EXPECT_EQ(f.loop->history()[3].content, "Fine.");
  EXPECT_EQ(f.text.last_prompt,
            "<user>hi<asst>Hello!<user>how are you?<gen><|channel>thought\n<channel|>");
  // The second prompt shares "<user>hi<asst>Hello" with the cache of the first turn.
  const auto& stats = f.loop->last_result()->stats;
  EXPECT_LT(stats.n_prompt_evaluated, stats.n_prompt_tokens);
  EXPECT_EQ(stats.n_prompt_tokens,
            static_cast<int64_t>(f.text.tokenize(f.text.last_prompt, true).size()));
}

TEST(ChatLoop, ReasoningHiddenDimmedOrPlain) {
  for (auto display : {ReasoningDisplay::kHide, ReasoningDisplay::kDim, ReasoningDisplay::kPlain}) {
    ChatOptions options;
    options.thinking = true;
    options.reasoning = display;
    ChatFixture f(options);
    f.reply("<|channel>thought\nsum it<channel|>4");
    f.run({"2+2?"});
    const std::string expected = display == ReasoningDisplay::kHide  ? "4\n"
                                 : display == ReasoningDisplay::kDim ? "\033[2msum it\033[0m\n4\n"
                                                                     : "sum it\n4\n";
    EXPECT_EQ(f.out.str(), expected);
    EXPECT_EQ(f.loop->history()[1].content, "4");  // thoughts never enter the history
    EXPECT_EQ(f.text.last_prompt, "<user>2+2?<gen>");
  }
}

TEST(ChatLoop, Commands) {
  ChatFixture f;
  f.reply("A");
  f.reply("B");
  f.reply("C");
  f.run({"/system be brief", "q1", "/think on", "/reset", "q2", "/think maybe", "/nope", "/system",
         "/stats", "/help", "/exit", "never read"});
  const std::string out = f.out.str();
  EXPECT_NE(out.find("(system prompt set)"), std::string::npos);
  EXPECT_NE(out.find("(thinking on)"), std::string::npos);
  EXPECT_NE(out.find("(conversation cleared)"), std::string::npos);
  EXPECT_NE(out.find("(system prompt removed)"), std::string::npos);
  EXPECT_NE(out.find("finish: eog"), std::string::npos);
  EXPECT_NE(out.find("/think on|off"), std::string::npos);
  EXPECT_EQ(f.err.str(),
            "error: /think takes on or off\nerror: unknown command /nope (try /help)\n");
  // After /reset the history holds only q2; the system prompt and thinking applied to it.
  ASSERT_EQ(f.loop->history().size(), 2u);
  EXPECT_EQ(f.loop->history()[0].content, "q2");
  EXPECT_EQ(f.text.last_prompt, "<sys>be brief<user>q2<gen>");
  // The model answered the first user turn of its context: after /reset that is reply "A".
  EXPECT_EQ(f.loop->history()[1].content, "A");
}

TEST(ChatLoop, SaveAndLoad) {
  const std::string dir = test::scratch_dir("chat_save_load");
  ChatFixture f;
  f.reply("one");
  f.run({"/system sys", "first", "/save " + dir + "/c.json"});
  ChatFixture g;
  g.reply("one");
  g.reply("two");
  g.run({"/load " + dir + "/c.json", "second"});
  EXPECT_EQ(g.err.str(), "");
  ASSERT_EQ(g.loop->history().size(), 4u);
  EXPECT_EQ(g.loop->history()[3].content, "two");
  EXPECT_EQ(g.text.last_prompt,
            "<sys>sys<user>first<asst>one<user>second<gen><|channel>thought\n<channel|>");
  std::ofstream(dir + "/bad.json") << "{\"messages\": [{\"role\": 3}]}";
  g.run({"/load " + dir + "/bad.json", "/load " + dir + "/missing.json", "/save"});
  EXPECT_EQ(g.loop->history().size(), 4u);  // unchanged
  const std::string err = g.err.str();
  EXPECT_NE(err.find("bad.json: a message lacks"), std::string::npos) << err;
  EXPECT_NE(err.find("missing.json: cannot open"), std::string::npos) << err;
  EXPECT_NE(err.find("/save needs a file name"), std::string::npos) << err;
}

TEST(ChatLoop, MultiLineInput) {
  ChatFixture f;
  f.reply("ok");
  f.run({"line one\\", "line two"});
  ASSERT_EQ(f.loop->history().size(), 2u);
  EXPECT_EQ(f.loop->history()[0].content, "line one\nline two");
}

TEST(ChatLoop, CancelStopsTheAnswerNotTheLoop) {
  ChatFixture f;
  f.reply("abcdefgh");
  f.reply("next");
  // Simulate Ctrl-C during the third model call of the answer (the prompt, "a", "b"): the
  // loop stops before drawing the token those logits are for.
  auto next = f.text.scripted.next;
  int calls = 0;
  f.text.scripted.next = [&, next](const std::vector<int32_t>& context) {
    if (f.loop->answering() && ++calls == 3) f.loop->cancel_flag() = true;
    return next(context);
  };
  f.run({"go", "again"});
  EXPECT_EQ(f.out.str(), "ab\n(stopped)\nnext\n");
  EXPECT_EQ(f.loop->history()[1].content, "ab");
}

TEST(ChatLoop, PromptTooLongIsAnErrorAndTheLoopGoesOn) {
  ChatFixture f({}, /*n_ctx=*/24);
  f.reply("ok");
  f.reply("ok");
  f.run({std::string(40, 'x'), "hi"});
  EXPECT_NE(f.err.str().find("error: the prompt is"), std::string::npos) << f.err.str();
  ASSERT_EQ(f.loop->history().size(), 2u);
  EXPECT_EQ(f.loop->history()[0].content, "hi");
}

}  // namespace
}  // namespace boltrt

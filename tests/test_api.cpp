// The public API (include/boltrt/boltrt.h) over a scripted backend: tokenize/detokenize, chat
// template, generate with streaming, cancellation, limits, stop strings, reasoning split,
// statistics, errors, sessions sharing one model across threads, and the headers themselves
// (only standard and boltrt/ includes, so nothing internal leaks into an installed program).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

// A file that sees engine and public headers must name the few types both spell alike with
// boltrt::api:: (here FinishReason); programs using only <boltrt/boltrt.h> write boltrt::.
// clang-format off
#include "api/fake_backend.h"
#include "support/paths.h"
#include "api/api_internal.h"  // after the engine headers (see its comment)
// clang-format on

namespace {

std::shared_ptr<const boltrt::Model> fake_model(int64_t n_ctx = 256) {
  return boltrt::wrap_model_backend(boltrt::make_fake_backend(n_ctx));
}

boltrt::Message message(std::string role, std::string content) {
  boltrt::Message m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

boltrt::Request greedy(std::string prompt) {
  boltrt::Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  return r;
}

TEST(Api, ModelFacts) {
  auto model = fake_model(300);
  EXPECT_EQ(model->architecture(), "fake");
  EXPECT_EQ(model->vocab_size(), boltrt::kFakeVocab);
  EXPECT_EQ(model->context(), 300);
  EXPECT_TRUE(model->has_chat_template());
  EXPECT_STREQ(boltrt::version(), "0.1.0");
  EXPECT_STREQ(boltrt::to_string(boltrt::api::FinishReason::kLength), "length");
}

TEST(Api, TokenizeDetokenize) {
  boltrt::Session session(fake_model());
  EXPECT_EQ(session.tokenize("ab", false), (std::vector<int32_t>{'a', 'b'}));
  EXPECT_EQ(session.tokenize("ab<end>", true),
            (std::vector<int32_t>{'a', 'b', boltrt::kFakeEnd, boltrt::kFakeMarker}));
  const std::vector<int32_t> ids = {'h', 0xC3, 0xA9, boltrt::kFakeMarker, 0xE2};
  EXPECT_EQ(session.detokenize(ids), "h\xC3\xA9\xEF\xBF\xBD");  // control token prints nothing
  try {
    session.detokenize(std::vector<int32_t>{5, 9999});
    FAIL();
  } catch (const boltrt::Error& e) {
    EXPECT_STREQ(e.what(), "detokenize: token 9999 is outside the vocabulary of 261");
  }
}

TEST(Api, ChatTemplate) {
  boltrt::Session session(fake_model());
  const std::vector<boltrt::Message> messages = {message("system", "be brief"),
                                                 message("user", "hi")};
  EXPECT_EQ(session.apply_chat_template(messages), "system: be brief\nuser: hi\n");
  boltrt::ChatTemplateOptions thinking;
  thinking.thinking = true;
  EXPECT_EQ(session.apply_chat_template(messages, thinking),
            "<think-on>system: be brief\nuser: hi\n");
  const std::vector<boltrt::Message> bad = {message("robot", "x")};
  try {
    session.apply_chat_template(bad);
    FAIL();
  } catch (const boltrt::Error& e) {
    EXPECT_STREQ(e.what(),
                 "messages[0]: role 'robot' is not supported (system, user or assistant)");
  }
}

TEST(Api, GenerateStreamsEveryToken) {
  boltrt::Session session(fake_model());
  std::string streamed;
  std::vector<int64_t> indices;
  const boltrt::Result r = session.generate(greedy("hello"), [&](const boltrt::TokenInfo& t) {
    streamed += t.text;
    indices.push_back(t.index);
    EXPECT_FALSE(t.reasoning);
    return true;
  });
  EXPECT_EQ(r.text, "HELLO");
  EXPECT_EQ(r.content, "HELLO");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(streamed, "HELLO");
  EXPECT_EQ(r.finish_reason, boltrt::api::FinishReason::kEndOfGeneration);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{'H', 'E', 'L', 'L', 'O', boltrt::kFakeEnd}));
  EXPECT_EQ(indices, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(r.stats.prompt_tokens, 6);
  EXPECT_EQ(r.stats.prompt_evaluated, 6);
  EXPECT_EQ(r.stats.generated_tokens, 6);
  EXPECT_EQ(r.stats.reasoning_tokens, 0);
  EXPECT_GE(r.stats.time_to_first_token_ms, 0.0);
}

TEST(Api, LimitsStopStringsAndCancellation) {
  boltrt::Session session(fake_model());
  boltrt::Request request = greedy("abcdef");
  request.max_tokens = 3;
  boltrt::Result r = session.generate(request);
  EXPECT_EQ(r.text, "ABC");
  EXPECT_EQ(r.finish_reason, boltrt::api::FinishReason::kLength);

  request.max_tokens = -1;
  request.stop = {"DE"};
  r = session.generate(request);
  EXPECT_EQ(r.text, "ABC");
  EXPECT_EQ(r.content, "ABC");
  EXPECT_EQ(r.finish_reason, boltrt::api::FinishReason::kStop);

  request.stop.clear();
  r = session.generate(request, [](const boltrt::TokenInfo& t) { return t.index < 1; });
  EXPECT_EQ(r.text, "AB");
  EXPECT_EQ(r.finish_reason, boltrt::api::FinishReason::kCancelled);

  // A second call with the same prompt reuses the cached prefix.
  r = session.generate(request);
  EXPECT_EQ(r.text, "ABCDEF");
  EXPECT_LT(r.stats.prompt_evaluated, r.stats.prompt_tokens);
}

// logit_bias: the fake model gives its next letter 10 and every other token 0, so +20 on 'Q'
// makes every token 'Q'; an opposite entry for the same token cancels it.
TEST(Api, LogitBiasForcesAndBans) {
  boltrt::Session session(fake_model());
  boltrt::Request request = greedy("hello");
  request.max_tokens = 4;
  request.sampling.logit_bias = {{'Q', 20.0f}};
  EXPECT_EQ(session.generate(request).text, "QQQQ");
  request.sampling.logit_bias = {{'Q', 20.0f}, {'Q', -20.0f}};  // entries add up: no bias
  EXPECT_EQ(session.generate(request).text, "HELL");
  request.sampling.logit_bias = {{261, 1.0f}};
  try {
    session.generate(request);
    ADD_FAILURE() << "a token outside the vocabulary was accepted";
  } catch (const boltrt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("logit_bias names token 261"), std::string::npos)
        << e.what();
  }
  request.sampling.logit_bias.clear();
  EXPECT_EQ(session.generate(request).text, "HELL");  // the session is still usable
}

TEST(Api, ChatWithReasoning) {
  boltrt::Session session(fake_model());
  boltrt::Request request;
  request.messages = {message("user", "hi")};
  request.sampling.temperature = 0;
  request.reasoning = boltrt::Reasoning::kOn;
  std::string thought, answer;
  const boltrt::Result r = session.generate(request, [&](const boltrt::TokenInfo& t) {
    (t.reasoning ? thought : answer) += t.text;
    return true;
  });
  EXPECT_EQ(r.reasoning, "user: hi\n");
  EXPECT_EQ(r.content, "USER: HI\n");
  EXPECT_EQ(thought, "user: hi\n");
  EXPECT_EQ(answer, "USER: HI\n");
  EXPECT_EQ(r.stats.reasoning_tokens, 9);

  request.reasoning_budget = 2;  // the controller closes the thought
  request.reasoning_budget_message = " [done]";
  const boltrt::Result budgeted = session.generate(request);
  EXPECT_EQ(budgeted.reasoning, "user [done]");  // 2 tokens, the word finished, the message
  EXPECT_EQ(budgeted.stats.reasoning_tokens, 4 + 7);

  request.reasoning_budget = -1;  // a per-block cap: the fake model thinks in one block
  request.reasoning_block_budget = 2;
  const boltrt::Result block = session.generate(request);
  EXPECT_EQ(block.reasoning, "user [done]");
  EXPECT_EQ(block.stats.reasoning_tokens, 4 + 7);
  request.reasoning_block_budget = -1;

  request.reasoning_budget = 0;  // no thinking tokens at all
  const boltrt::Result direct = session.generate(request);
  EXPECT_EQ(direct.reasoning, "");
  EXPECT_EQ(direct.content, "USER: HI\n");
}

TEST(Api, ErrorsAreOneLineAndLeaveTheSessionUsable) {
  boltrt::Session session(fake_model(32));
  auto message_of = [&](const boltrt::Request& request) -> std::string {
    try {
      session.generate(request);
    } catch (const boltrt::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message_of(greedy(std::string(40, 'x'))),
            "the prompt is 41 tokens but the context holds 32 (one more is needed to generate); "
            "use a larger context or truncation");
  EXPECT_EQ(message_of(boltrt::Request{}),
            "generate: the request has neither a prompt nor messages");
  boltrt::Request bad = greedy("x");
  bad.sampling.repeat_penalty = 0;
  EXPECT_NE(message_of(bad), "");
  boltrt::Request tools;
  tools.messages = {message("user", "x")};
  tools.tools = {boltrt::Tool{"f", "", "{}"}};
  EXPECT_EQ(message_of(tools), "'tools' are not supported by this model's chat format");
  // A callback that throws: the exception reaches the caller, the session still works.
  EXPECT_THROW(
      session.generate(greedy("abc"),
                       [](const boltrt::TokenInfo&) -> bool { throw std::runtime_error("x"); }),
      std::runtime_error);
  EXPECT_EQ(session.generate(greedy("abc")).text, "ABC");
  EXPECT_THROW(boltrt::Session(nullptr), boltrt::Error);
  try {
    boltrt::Model::load("/nonexistent/model.gguf");
    FAIL();
  } catch (const boltrt::Error& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/model.gguf: no such file");
  }
}

TEST(Api, SessionsShareOneModelAcrossThreads) {
  auto model = fake_model();
  std::weak_ptr<const boltrt::Model> weak = model;
  std::vector<std::string> texts(6);
  {
    std::vector<boltrt::Session> sessions;
    for (size_t i = 0; i < texts.size(); ++i) sessions.emplace_back(model);
    model.reset();  // the sessions keep it alive
    EXPECT_FALSE(weak.expired());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < texts.size(); ++i) {
      threads.emplace_back([&, i] {
        for (int round = 0; round < 20; ++round)
          texts[i] = sessions[i].generate(greedy("thread " + std::to_string(i))).text;
      });
    }
    for (auto& t : threads) t.join();
  }
  EXPECT_TRUE(weak.expired());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(texts[i], "THREAD " + std::to_string(i));
}

TEST(Api, MovedFromSessionThrows) {
  boltrt::Session a(fake_model());
  boltrt::Session b(std::move(a));
  EXPECT_EQ(b.generate(greedy("q")).text, "Q");
  EXPECT_THROW(a.tokenize("x"), boltrt::Error);  // NOLINT(bugprone-use-after-move)
}

// Installed headers include only the standard library and each other.
TEST(Api, PublicHeadersIncludeNothingInternal) {
  namespace fs = std::filesystem;
  const std::regex include_line(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  int headers = 0;
  for (const auto& entry : fs::directory_iterator(boltrt::test::source_dir() + "/include/boltrt")) {
    ++headers;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, include_line)) continue;
      const std::string path = m[2];
      const bool standard =
          m[1] == "<" && path.find('.') == std::string::npos && path.find('/') == std::string::npos;
      const bool ours = m[1] == "<" && path.starts_with("boltrt/");
      EXPECT_TRUE(standard || ours) << entry.path() << ": " << line;
    }
  }
  EXPECT_GE(headers, 2);
}

}  // namespace

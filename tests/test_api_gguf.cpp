// The GGUF backend's text side (tokenizer, chat template, output parser) on a synthesized
// gemma4 file: what the API and `boltrt batch` build prompts with and take replies apart with.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "api/gguf_backend.h"
#include "batch/backend_engine.h"
#include "batch/runner.h"
#include "batch/sequence_batcher.h"
#include "model/gemma4_synth.h"
#include "support/paths.h"
#include "util/error.h"
// clang-format off
#include "api/api_internal.h"  // last: engine headers first (see its comment)
// clang-format on

namespace boltrt {
namespace {

using Json = nlohmann::ordered_json;

const std::string& synth_path() {
  static const std::string path = [] {
    // ctest runs each test in its own process, in parallel: one file per process.
    const std::string dir = test::scratch_dir("api_gguf-" + std::to_string(getpid()));
    const std::string file = dir + "/tiny.gguf";
    model::write_gemma4_synth(model::gemma4_preset("tiny"), {}, file);
    return file;
  }();
  return path;
}

GenerationResult reply_of(const GgufBackend& backend, const std::string& text) {
  GenerationResult r;
  r.tokens = backend.tokenize(text, /*add_special=*/false);
  r.tokens.push_back(backend.tokenizer().eog_tokens().front());
  r.finish_reason = engine::FinishReason::kEndOfGeneration;
  return r;
}

TEST(GgufBackend, TextSide) {
  auto backend = open_gguf_text(synth_path());
  EXPECT_EQ(backend->architecture(), "gemma4");
  EXPECT_TRUE(backend->has_chat_template());
  EXPECT_EQ(backend->tokenize("hello world", true),
            backend->tokenizer().encode("hello world", true, true));
  ASSERT_TRUE(backend->reasoning_markers());
  EXPECT_EQ(backend->reasoning_markers()->open, backend->tokenizer().find("<|channel>"));
  try {
    backend->new_sequence();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              synth_path() + ": opened for its vocabulary only; it cannot generate");
  }
}

TEST(GgufBackend, PromptsAndRepliesInGemma4Format) {
  auto backend = open_gguf_text(synth_path());
  const Json messages = Json::parse(R"([{"role":"user","content":"Hi"}])");
  const PreparedPrompt off = prepare_prompt(*backend, "", messages, Json(), false);
  EXPECT_EQ(off.chat.text, "<|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  EXPECT_EQ(off.tokens, backend->tokenize(off.chat.text, true));
  EXPECT_EQ(off.tokens.front(), backend->tokenizer().bos());
  const PreparedPrompt on = prepare_prompt(*backend, "", messages, Json(), true);
  EXPECT_EQ(on.chat.text,
            "<|turn>system\n<|think|><turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");

  // Thinking on: the thought channel becomes reasoning.
  ParsedReply r = backend->parse_reply(
      on.tokens, on.chat, Json(), reply_of(*backend, "<|channel>thought\nhmm<channel|>Hello!"));
  EXPECT_EQ(r.reasoning, "hmm");
  EXPECT_EQ(r.content, "Hello!");
  EXPECT_GT(r.reasoning_tokens, 0);

  // Tools: declared in the prompt, calls parsed out of the reply.
  const Json tools = Json::parse(
      R"([{"type":"function","function":{"name":"get_weather","description":"Weather.",)"
      R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])");
  const PreparedPrompt with_tools = prepare_prompt(*backend, "", messages, tools, false);
  EXPECT_NE(with_tools.chat.text.find("get_weather"), std::string::npos);
  r = backend->parse_reply(
      with_tools.tokens, with_tools.chat, tools,
      reply_of(*backend, "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>"));
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.content, "");

  // A plain prompt has no chat: BOS + text, reply split by markers only.
  const PreparedPrompt plain = prepare_prompt(*backend, "Once upon", Json(), Json(), false);
  EXPECT_EQ(plain.tokens, backend->tokenize("Once upon", true));
  r = backend->parse_reply(plain.tokens, plain.chat, Json(), reply_of(*backend, " a time"));
  EXPECT_EQ(r.content, " a time");
}

}  // namespace
}  // namespace boltrt

// ---- with the model -------------------------------------------------------------------------
namespace boltrt {
namespace {

TEST(Gemma4Sequences, OneForwardPassGivesEachSequenceItsOwnLogits) {
  auto backend = open_model_backend(synth_path(), BackendOptions{"cpu", 2, 256, "f32", ""});
  auto batched = backend->new_sequences(3);
  ASSERT_TRUE(batched->shares_weight_reads());
  std::vector<std::unique_ptr<LanguageModel>> alone;
  for (int i = 0; i < 3; ++i) alone.push_back(backend->new_sequence());
  const std::vector<std::vector<int32_t>> prompts = {
      backend->tokenize("hello world", true), backend->tokenize("The cat sat on the mat", true),
      backend->tokenize("a", true)};
  double worst = 0;
  for (int step = 0; step < 4; ++step) {
    std::vector<std::vector<int32_t>> tokens(3);
    std::vector<batch::DecodeItem> items(3);
    for (int i = 0; i < 3; ++i) {
      tokens[i] = step == 0 ? prompts[i] : std::vector<int32_t>{static_cast<int32_t>(7 + i + step)};
      items[i].slot = i;
      items[i].tokens = tokens[i];
    }
    batched->decode(items);
    for (int i = 0; i < 3; ++i) {
      ASSERT_FALSE(items[i].error);
      const auto want = alone[i]->decode(tokens[i]);
      ASSERT_EQ(items[i].logits.size(), want.size());
      float scale = 0;
      for (float x : want) scale = std::max(scale, std::abs(x));
      for (size_t k = 0; k < want.size(); ++k)
        worst = std::max(worst, double(std::abs(items[i].logits[k] - want[k])) / scale);
      EXPECT_EQ(batched->n_past(i), alone[i]->n_past());
    }
  }
  // The same computation, but a step's rows go through the multi-row matmul kernels instead of
  // the one-vector ones, which sum in another order; on this random model the difference
  // grows from 2e-7 at the prefill to 2e-4 after three decode steps (one prefill against
  // token-by-token decoding of one sequence differs by 4e-5, printed below). A wrong position,
  // cache or row would be off by O(1).
  EXPECT_LE(worst, 1e-3) << "batched and single-sequence logits differ";
  std::printf("max relative logit difference, batched vs alone: %.3g\n", worst);
  {
    auto chunk = backend->new_sequence(), one_by_one = backend->new_sequence();
    const auto& p = prompts[1];
    const auto x = chunk->decode(p);
    const std::vector<float> a(x.begin(), x.end());
    std::span<const float> b;
    for (int32_t t : p) b = one_by_one->decode(std::span<const int32_t>(&t, 1));
    double gap = 0, scale = 0;
    for (float v : a) scale = std::max(scale, double(std::abs(v)));
    for (size_t k = 0; k < a.size(); ++k) gap = std::max(gap, std::abs(a[k] - b[k]) / scale);
    std::printf("max relative logit difference, prefill vs token by token: %.3g\n", gap);
  }
  // A bad item fails alone; the others still run.
  std::vector<int32_t> good = {5}, bad = {static_cast<int32_t>(backend->n_vocab())};
  std::vector<batch::DecodeItem> items(2);
  items[0].slot = 0, items[0].tokens = good;
  items[1].slot = 1, items[1].tokens = bad;
  batched->decode(items);
  EXPECT_FALSE(items[0].error);
  EXPECT_EQ(items[0].logits.size(), static_cast<size_t>(backend->n_vocab()));
  ASSERT_TRUE(items[1].error);
  try {
    std::rethrow_exception(items[1].error);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), fmt::format("token {} is outside the vocabulary of {}",
                                                 backend->n_vocab(), backend->n_vocab()));
  }
}

}  // namespace
}  // namespace boltrt

namespace boltrt {
namespace {

TEST(ApiOnGemma4, GenerateStreamsAndThreadsAgree) {
  boltrt::ModelOptions options;
  options.threads = 2;
  options.context = 128;
  options.kv_type = boltrt::KvCacheType::kF32;
  auto model = boltrt::Model::load(synth_path(), options);
  EXPECT_EQ(model->architecture(), "gemma4");
  EXPECT_TRUE(model->has_chat_template());
  EXPECT_EQ(model->context(), 128);
  boltrt::Session session(model);
  boltrt::Request request;
  request.prompt = "Once upon a time";
  request.max_tokens = 6;
  request.sampling.temperature = 0;
  std::string reasoning, content;
  int64_t calls = 0;
  const boltrt::Result r = session.generate(request, [&](const boltrt::TokenInfo& t) {
    (t.reasoning ? reasoning : content) += t.text;
    EXPECT_EQ(t.index, calls++);
    return true;
  });
  EXPECT_EQ(calls, static_cast<int64_t>(r.tokens.size()));
  EXPECT_LE(r.tokens.size(), 6u);
  EXPECT_EQ(r.stats.generated_tokens, static_cast<int64_t>(r.tokens.size()));
  EXPECT_EQ(r.stats.prompt_tokens,
            static_cast<int64_t>(session.tokenize("Once upon a time").size()));
  EXPECT_EQ(reasoning, r.reasoning);
  EXPECT_EQ(content, r.content);
  if (r.tokens.size() == 6u) {
    EXPECT_EQ(r.finish_reason, boltrt::api::FinishReason::kLength);
  }

  // Chat, and two sessions on two threads: the same greedy tokens as the first session.
  boltrt::Request chat;
  chat.messages.push_back({"user", "hello there", "", {}, ""});
  chat.max_tokens = 5;
  chat.sampling.temperature = 0;
  const boltrt::Result first = session.generate(chat);
  std::vector<boltrt::Result> results(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      boltrt::Session own(model);
      results[i] = own.generate(chat);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& other : results) EXPECT_EQ(other.tokens, first.tokens);
}

// A session moving to an unrelated prompt after one longer than a sliding-window ring: the
// second prompt is evaluated in full and the session keeps working.
TEST(ApiOnGemma4, UnrelatedPromptAfterALongOne) {
  boltrt::ModelOptions options;
  options.threads = 2;
  options.context = 1024;
  boltrt::Session session(boltrt::Model::load(synth_path(), options));
  boltrt::Request request;
  request.max_tokens = 2;
  request.sampling.temperature = 0;
  for (int i = 0; i < 700; ++i) request.prompt += "the ";
  ASSERT_GT(session.tokenize(request.prompt).size(), 600u);
  EXPECT_EQ(session.generate(request).tokens.size(), 2u);
  request.prompt = "Hello";
  const boltrt::Result r = session.generate(request);
  EXPECT_EQ(r.tokens.size(), 2u);
  EXPECT_EQ(r.stats.prompt_evaluated, r.stats.prompt_tokens);
}

TEST(ApiOnGemma4, ChatTemplateWithTools) {
  boltrt::Session session(boltrt::Model::load(synth_path()));
  std::vector<boltrt::Message> messages = {{"user", "Weather in Paris?", "", {}, ""}};
  boltrt::ChatTemplateOptions options;
  options.tools = {
      {"get_weather", "Weather.", R"({"type":"object","properties":{"city":{"type":"string"}}})"}};
  const std::string prompt = session.apply_chat_template(messages, options);
  EXPECT_NE(prompt.find("get_weather"), std::string::npos) << prompt;
  EXPECT_TRUE(prompt.ends_with("<|turn>model\n<|channel>thought\n<channel|>")) << prompt;
  // An assistant turn with a tool call and the tool's answer, without a generation prompt.
  messages.push_back({"assistant", "", "", {{"c1", "get_weather", R"({"city":"Paris"})"}}, ""});
  messages.push_back({"tool", "sunny", "", {}, "c1"});
  options.add_generation_prompt = false;
  const std::string history = session.apply_chat_template(messages, options);
  EXPECT_NE(history.find("<|tool_call>call:get_weather{"), std::string::npos) << history;
  EXPECT_NE(history.find("sunny"), std::string::npos) << history;
  options.tools[0].parameters = "{not json";
  EXPECT_THROW(session.apply_chat_template(messages, options), boltrt::Error);
}

TEST(BatchOnGemma4, EveryRequestGetsOneResult) {
  const std::string dir = test::scratch_dir("batch_gemma4-" + std::to_string(getpid()));
  {
    std::ofstream in(dir + "/in.jsonl");
    for (int i = 0; i < 5; ++i)
      in << "{\"id\":" << i << ",\"messages\":[{\"role\":\"user\",\"content\":\"question " << i
         << "\"}],\"max_tokens\":" << 3 + i << ",\"temperature\":0}\n";
  }
  auto engine = batch::make_backend_engine(
      open_model_backend(synth_path(), BackendOptions{"cpu", 2, 128, "f16", ""}), 3);
  EXPECT_EQ(engine->describe(), "3 sequences batched into one forward pass per step");
  batch::BatchOptions o;
  o.input = dir + "/in.jsonl";
  o.output = dir + "/out.jsonl";
  o.parallel = 3;
  const batch::BatchSummary s = batch::run_batch(*engine, o);
  EXPECT_EQ(s.completed, 5);
  std::ifstream out(o.output);
  std::string line;
  std::set<int> ids;
  while (std::getline(out, line)) {
    const auto j = nlohmann::json::parse(line);
    const int id = j["id"];
    EXPECT_TRUE(ids.insert(id).second);
    EXPECT_LE(j["tokens"]["completion"].get<int>(), 3 + id);
    EXPECT_GT(j["tokens"]["prompt"].get<int>(), 5);
  }
  EXPECT_EQ(ids.size(), 5u);
}

}  // namespace
}  // namespace boltrt

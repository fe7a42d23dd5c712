// The GGUF backend's text side (tokenizer, chat template, output parser) on a synthesized
// gemma4 file: what the API and `boltrt batch` build prompts with and take replies apart with.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "api/gguf_backend.h"
#include "model/gemma4_synth.h"
#include "support/paths.h"
#include "util/error.h"

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
  r.finish_reason = FinishReason::kEndOfGeneration;
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

// Gemma 4 chat format against llama.cpp: tests/data/chat/chat.golden.json holds the prompts
// llama.cpp renders from the real tokenizer.chat_template of ggml-vocab-gemma-4.gguf for every
// conversation in conversations.json, and how its Gemma 4 parser splits every model output in
// outputs.json (made by tests/data/chat/golden_chat.cpp, see the README there).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "gguf/gguf.h"
#include "support/paths.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace boltrt::text {
namespace {

Json load_json(const std::string& name) {
  std::ifstream f(test::source_dir() + "/tests/data/chat/" + name);
  return Json::parse(
      std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()));
}

std::string show(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return out;
}

TEST(ChatTemplate, RendersLikeLlamaCpp) {
  const Json conversations = load_json("conversations.json");
  const Json golden = load_json("chat.golden.json");
  ASSERT_EQ(conversations.size(), golden["render"].size());
  size_t compared = 0;
  const ChatTemplate tmpl(ChatFormat::kGemma4);
  for (size_t i = 0; i < conversations.size(); ++i) {
    const Json& c = conversations[i];
    const Json& want = golden["render"][i];
    const std::string name = c["name"].get<std::string>();
    ASSERT_EQ(want["name"], c["name"]);
    ChatOptions opt;
    opt.add_generation_prompt = c.value("add_generation_prompt", true);
    opt.enable_thinking = c.value("enable_thinking", false);
    const Json tools = c.contains("tools") ? c["tools"] : Json();
    const std::vector<ChatMessage> messages = messages_from_json(c["messages"]);
    if (want.contains("error")) continue;  // llama.cpp cannot render it; see the tests below
    const ChatPrompt p = tmpl.render(messages, tools, opt);
    EXPECT_EQ(show(p.text), show(want["prompt"].get<std::string>())) << name;
    EXPECT_EQ(show(p.generation_prompt), show(want["generation_prompt"].get<std::string>()))
        << name;
    ++compared;
  }
  EXPECT_GE(compared, 30u);
}

// Where llama.cpp fails, we do what the template means instead (and say so).
TEST(ChatTemplate, CasesLlamaCppCannotRender) {
  const Json conversations = load_json("conversations.json");
  const ChatTemplate tmpl(ChatFormat::kGemma4);
  for (const Json& c : conversations) {
    const std::string name = c["name"].get<std::string>();
    const Json tools = c.contains("tools") ? c["tools"] : Json();
    if (name == "tool_call_raw_string_arguments") {
      // llama.cpp: "Failed to parse tool call arguments as JSON"; we refuse in one line too.
      try {
        tmpl.render(messages_from_json(c["messages"]), tools);
        ADD_FAILURE() << "expected an error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("arguments are not valid JSON"), std::string::npos);
      }
    } else if (name == "tool_type_list_llama_cpp_fails") {
      // llama.cpp's Jinja lacks map('upper'); Python's Jinja renders the upper-cased list.
      const ChatPrompt p = tmpl.render(messages_from_json(c["messages"]), tools);
      EXPECT_NE(p.text.find("items:{maxLength:5,type:[<|\"|>STRING<|\"|>,<|\"|>NULL<|\"|>]}"),
                std::string::npos)
          << show(p.text);
    }
  }
}

TEST(ChatTemplate, ParsesOutputLikeLlamaCpp) {
  const Json outputs = load_json("outputs.json");
  const Json golden = load_json("chat.golden.json");
  ASSERT_EQ(outputs.size(), golden["parse"].size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Json& o = outputs[i];
    const Json& want = golden["parse"][i];
    const std::string name = o["name"].get<std::string>();
    ASSERT_EQ(want["name"], o["name"]);
    const ParsedOutput got = parse_gemma4_output(o["output"].get<std::string>(),
                                                 want["generation_prompt"].get<std::string>(),
                                                 o.value("tools", Json::array()));
    EXPECT_TRUE(got.well_formed) << name;
    EXPECT_EQ(show(got.reasoning), show(want["reasoning_content"].get<std::string>())) << name;
    EXPECT_EQ(show(got.content), show(want["content"].get<std::string>())) << name;
    ASSERT_EQ(got.tool_calls.size(), want["tool_calls"].size()) << name;
    for (size_t k = 0; k < got.tool_calls.size(); ++k) {
      EXPECT_EQ(got.tool_calls[k].name, want["tool_calls"][k]["name"].get<std::string>()) << name;
      EXPECT_EQ(got.tool_calls[k].arguments, want["tool_calls"][k]["arguments"].get<std::string>())
          << name;
    }
  }
}

TEST(ChatTemplate, GenerationPromptMatchesRender) {
  // The render's generation prompt is what the parser needs: thinking off pre-fills the channel.
  const ChatTemplate tmpl;
  const std::vector<ChatMessage> msgs = {{"user", "Hi", {}, "", ""}};
  const ChatPrompt off = tmpl.render(msgs);
  EXPECT_EQ(off.text, "<|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  const ParsedOutput a = parse_gemma4_output("Hello!", off.generation_prompt);
  EXPECT_EQ(a.reasoning, "");
  EXPECT_EQ(a.content, "Hello!");
  const ChatPrompt on =
      tmpl.render(msgs, Json(), {.add_generation_prompt = true, .enable_thinking = true});
  EXPECT_EQ(on.text, "<|turn>system\n<|think|><turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
  const ParsedOutput b =
      parse_gemma4_output("<|channel>thought\nhmm<channel|>Hello!", on.generation_prompt);
  EXPECT_EQ(b.reasoning, "hmm");
  EXPECT_EQ(b.content, "Hello!");
}

TEST(ChatTemplate, MalformedOutputKeepsText) {
  // After a thinking-on prompt, "<|channel>" not followed by a thought cannot start a message:
  // llama.cpp throws; we keep the text as content and flag it.
  const ParsedOutput r = parse_gemma4_output("<|channel>final\nabc", "<|turn>model\n");
  EXPECT_FALSE(r.well_formed);
  EXPECT_EQ(r.content, "<|channel>final\nabc");
}

TEST(ChatTemplate, ParserSurvivesRandomOutput) {
  const Json tools = Json::parse(
      R"([{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])");
  const std::string parts[] = {"<|channel>",
                               "thought",
                               "<channel|>",
                               "<|tool_call>",
                               "call:f",
                               "{",
                               "}",
                               "a:",
                               "<|\"|>",
                               "1.5",
                               "[",
                               "]",
                               ",",
                               " ",
                               "\n",
                               "<tool_call|>",
                               "<|turn>model\n",
                               "text",
                               "\xE2\x82",
                               "\xFF"};
  uint64_t state = 99;
  for (int round = 0; round < 3000; ++round) {
    std::string out;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int n = static_cast<int>((state >> 33) % 16);
    for (int k = 0; k < n; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      out += parts[(state >> 33) % std::size(parts)];
    }
    for (const char* gen : {"<|turn>model\n", "<|turn>model\n<|channel>thought\n<channel|>"}) {
      const ParsedOutput r = parse_gemma4_output(out, gen, round % 2 ? tools : Json());
      EXPECT_LE(r.reasoning.size() + r.content.size(), out.size() + 64) << round;
      for (const ToolCall& c : r.tool_calls) EXPECT_EQ(c.name, "f");
    }
  }
}

TEST(ChatTemplate, FormatSelection) {
  std::string warning;
  EXPECT_EQ(ChatTemplate::for_source("", &warning).format(), ChatFormat::kNone);
  EXPECT_TRUE(warning.empty());
  EXPECT_EQ(ChatTemplate::for_source("{{ '<|tool_call>call:' }}", &warning).format(),
            ChatFormat::kGemma4);
  EXPECT_TRUE(warning.empty());
  EXPECT_EQ(ChatTemplate::for_source("{% for m in messages %}{{ m.content }}{% endfor %}", &warning)
                .format(),
            ChatFormat::kGemma4);
  EXPECT_NE(warning.find("built-in Gemma 4"), std::string::npos);
  EXPECT_THROW(ChatTemplate(ChatFormat::kNone).render({{"user", "x", {}, "", ""}}), Error);
}

TEST(ChatTemplate, MessagesFromJsonErrors) {
  EXPECT_THROW(messages_from_json(Json::object()), Error);
  EXPECT_THROW(messages_from_json(Json::parse(R"([{"content": "no role"}])")), Error);
  EXPECT_THROW(messages_from_json(Json::parse(R"([{"role": "user", "content": 5}])")), Error);
  EXPECT_THROW(
      messages_from_json(Json::parse(R"([{"role": "user", "content": [{"type": "image"}]}])")),
      Error);
}

// With the real vocabulary: its template is the one the goldens were made from, it is
// recognised, and a rendered prompt tokenizes to the special tokens it names.
TEST(ChatTemplate, RealVocabularyTemplate) {
  const std::string path = test::source_dir() + "/tests/data/vocab/ggml-vocab-gemma-4.gguf";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " missing; run tools/fetch-test-data.sh";
  const auto file = gguf::File::open(path);
  const auto tok = Tokenizer::from_gguf(*file);
  EXPECT_EQ(tok->chat_template().size(), 12045u);
  std::string warning;
  const ChatTemplate tmpl = ChatTemplate::for_tokenizer(*tok, &warning);
  EXPECT_EQ(tmpl.format(), ChatFormat::kGemma4);
  EXPECT_TRUE(warning.empty()) << warning;
  const ChatPrompt p = tmpl.render({{"user", "Hello", {}, "", ""}});
  const std::vector<TokenId> ids = tok->encode(p.text, true, true);
  const std::vector<TokenId> want = {tok->bos(),      tok->find("<|turn>"),    tok->find("user"),
                                     tok->find("\n"), tok->find("Hello"),      tok->find("<turn|>"),
                                     tok->find("\n"), tok->find("<|turn>"),    tok->find("model"),
                                     tok->find("\n"), tok->find("<|channel>"), tok->find("thought"),
                                     tok->find("\n"), tok->find("<channel|>")};
  EXPECT_EQ(ids, want);
}

}  // namespace
}  // namespace boltrt::text

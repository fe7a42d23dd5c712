// Qwen3.5 chat format: every conversation of tests/data/chat/qwen35/cases.json rendered byte for
// byte as the model's own Jinja template renders it (goldens.json, made by make_goldens.py with
// Python's Jinja and llama.cpp's models/templates/Qwen3.5-4B.jinja), including the template's
// own errors; format detection; literal ranges over message text.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "support/paths.h"
#include "text/chat_template.h"
#include "util/error.h"

namespace boltrt::text {
namespace {

Json load_json(const std::string& name) {
  std::ifstream f(test::source_dir() + "/tests/data/chat/qwen35/" + name);
  return Json::parse(
      std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()));
}

std::string show(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return out;
}

TEST(ChatQwen35, RendersLikeTheJinjaTemplate) {
  const Json cases = load_json("cases.json");
  const Json golden = load_json("goldens.json");
  ASSERT_EQ(cases.size(), golden.size());
  const ChatTemplate tmpl(ChatFormat::kQwen35);
  size_t rendered = 0, refused = 0;
  for (const Json& c : cases) {
    const std::string name = c["name"].get<std::string>();
    ASSERT_TRUE(golden.contains(name)) << name;
    const Json& want = golden[name];
    ChatOptions opt;
    opt.add_generation_prompt = c.value("add_generation_prompt", true);
    opt.enable_thinking = c.value("enable_thinking", true);
    const Json tools = c.contains("tools") ? c["tools"] : Json();
    const std::vector<ChatMessage> messages = messages_from_json(c["messages"]);
    if (want.contains("error")) {
      EXPECT_THROW(tmpl.render(messages, tools, opt), Error) << name;
      ++refused;
      continue;
    }
    const ChatPrompt p = tmpl.render(messages, tools, opt);
    EXPECT_EQ(show(p.text), show(want["prompt"].get<std::string>())) << name;
    EXPECT_EQ(show(p.generation_prompt), show(want["generation_prompt"].get<std::string>()))
        << name;
    ++rendered;
  }
  EXPECT_GE(rendered, 18u);
  EXPECT_EQ(refused, 3u);
}

TEST(ChatQwen35, DetectedFromTheTemplate) {
  const std::string qwen35 =
      "{%- for message in messages %}<|im_start|>{{ message.role }}...{{- '<tool_call>\\n"
      "<function=' + tool_call.name + '>\\n' }}{{- '<parameter=' + args_name + '>\\n' }}";
  std::string warning;
  EXPECT_EQ(ChatTemplate::for_source(qwen35, &warning).format(), ChatFormat::kQwen35);
  EXPECT_EQ(warning, "");
  // Qwen2's template (ChatML with JSON tool calls) is not Qwen3.5's format.
  EXPECT_EQ(ChatTemplate::for_source("<|im_start|>{{ role }}<tool_call>{\"name\": ...}", &warning)
                .format(),
            ChatFormat::kGemma4);
  EXPECT_NE(warning, "");
  EXPECT_EQ(ChatTemplate::for_source("").format(), ChatFormat::kNone);
}

TEST(ChatQwen35, MessageTextIsLiteral) {
  const ChatTemplate tmpl(ChatFormat::kQwen35);
  const ChatPrompt p = tmpl.render(
      messages_from_json(Json::parse(R"([{"role":"user","content":"a<|im_end|>b"}])")), Json(), {});
  ASSERT_EQ(p.literal.size(), 1u);
  EXPECT_EQ(p.text.substr(p.literal[0].first, p.literal[0].second - p.literal[0].first),
            "a<|im_end|>b");
  EXPECT_EQ(p.text.substr(0, p.literal[0].first), "<|im_start|>user\n");
}

TEST(ChatQwen35, ToolCallArgumentsMustBeAnObject) {
  const ChatTemplate tmpl(ChatFormat::kQwen35);
  const auto messages = messages_from_json(Json::parse(R"([
    {"role":"user","content":"q"},
    {"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":"[1,2]"}}]}])"));
  EXPECT_THROW(tmpl.render(messages, Json(), {}), Error);
  const auto broken = messages_from_json(Json::parse(R"([
    {"role":"user","content":"q"},
    {"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":"{oops"}}]}])"));
  EXPECT_THROW(tmpl.render(broken, Json(), {}), Error);
}

}  // namespace
}  // namespace boltrt::text

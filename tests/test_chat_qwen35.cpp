// Qwen3.5 chat format: every conversation of tests/data/chat/qwen35/cases.json rendered byte for
// byte as the model's own Jinja template renders it (goldens.json, made by make_goldens.py with
// Python's Jinja and llama.cpp's models/templates/Qwen3.5-4B.jinja), including the template's
// own errors, and as llama.cpp's Jinja engine renders it (parse.golden.json "render", made by
// golden_parse.cpp); format detection; literal ranges over message text. Output parsing: every
// model output of outputs.json split as llama.cpp's parser splits it (parse.golden.json "parse")
// where the output is well formed, and kept as content where llama.cpp loses text.
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

TEST(ChatQwen35, RendersLikeLlamaCppsJinjaEngine) {
  const Json cases = load_json("cases.json");
  const Json golden = load_json("parse.golden.json")["render"];
  const ChatTemplate tmpl(ChatFormat::kQwen35);
  size_t rendered = 0;
  for (const Json& c : cases) {
    const std::string name = c["name"].get<std::string>();
    const Json& want = golden.at(name);
    if (want.contains("error")) continue;  // the same three errors, checked above
    ChatOptions opt;
    opt.add_generation_prompt = c.value("add_generation_prompt", true);
    opt.enable_thinking = c.value("enable_thinking", true);
    const ChatPrompt p = tmpl.render(messages_from_json(c["messages"]),
                                     c.contains("tools") ? c["tools"] : Json(), opt);
    EXPECT_EQ(show(p.text), show(want["prompt"].get<std::string>())) << name;
    EXPECT_EQ(show(p.generation_prompt), show(want["generation_prompt"].get<std::string>()))
        << name;
    ++rendered;
  }
  EXPECT_GE(rendered, 18u);
}

TEST(ChatQwen35, ParsesLikeLlamaCpp) {
  const Json outputs = load_json("outputs.json");
  const Json tool_sets = load_json("tools.json");
  const Json golden = load_json("parse.golden.json")["parse"];
  size_t same = 0, kept = 0;
  for (const Json& o : outputs) {
    const std::string name = o["name"].get<std::string>();
    const Json& want = golden.at(name);
    const Json tools = o.contains("tools") ? tool_sets.at(o["tools"].get<std::string>()) : Json();
    ParseOptions options;
    options.parallel_tool_calls = o.value("parallel_tool_calls", true);
    const std::string output = o["output"].get<std::string>();
    const std::string generation_prompt = want["generation_prompt"].get<std::string>();
    const ParsedOutput got =
        parse_output(ChatFormat::kQwen35, output, generation_prompt, tools, options);
    if (name.starts_with("bad_") || name == "parallel_calls_not_allowed") {
      // llama.cpp drops this text or returns a truncated call; the text stays content here.
      EXPECT_FALSE(got.well_formed) << name;
      EXPECT_TRUE(got.tool_calls.empty()) << name;
      EXPECT_EQ(got.reasoning, want["reasoning_content"].get<std::string>()) << name;
      const size_t think_end = output.find("</think>");
      std::string rest = think_end == std::string::npos ? output : output.substr(think_end + 8);
      rest.erase(0, rest.find_first_not_of(" \n"));
      EXPECT_EQ(show(got.content), show(rest)) << name;
      ++kept;
      continue;
    }
    EXPECT_TRUE(got.well_formed) << name;
    EXPECT_EQ(show(got.reasoning), show(want["reasoning_content"].get<std::string>())) << name;
    EXPECT_EQ(show(got.content), show(want["content"].get<std::string>())) << name;
    ASSERT_EQ(got.tool_calls.size(), want["tool_calls"].size()) << name;
    for (size_t k = 0; k < got.tool_calls.size(); ++k) {
      EXPECT_EQ(got.tool_calls[k].name, want["tool_calls"][k]["name"].get<std::string>()) << name;
      EXPECT_EQ(got.tool_calls[k].arguments, want["tool_calls"][k]["arguments"].get<std::string>())
          << name;
      EXPECT_TRUE(Json::accept(got.tool_calls[k].arguments)) << name;
    }
    ++same;
  }
  EXPECT_EQ(same, 18u);
  EXPECT_EQ(kept, 9u);
}

TEST(ChatQwen35, ArgumentsAreTypedBySchema) {
  const Json tools = Json::parse(R"([{"type":"function","function":{"name":"f","parameters":{
      "type":"object","$defs":{"s":{"type":"string"}},"properties":{
      "a":{"type":"string"},"b":{"type":["string","null"]},"c":{"anyOf":[{"type":"integer"},
      {"type":"string"}]},"d":{"$ref":"#/$defs/s"},"e":{"type":"integer"},
      "f":{"type":"array","items":{"type":"string"}}}}}}])");
  const std::string out =
      "<tool_call>\n<function=f>\n<parameter=a>\n7\n</parameter>\n<parameter=b>\ntrue\n"
      "</parameter>\n<parameter=c>\n3\n</parameter>\n<parameter=d>\n[1]\n</parameter>\n"
      "<parameter=e>\n-12\n</parameter>\n<parameter=f>\n[\"x\"]\n</parameter>\n</function>\n"
      "</tool_call>";
  const ParsedOutput p = parse_qwen35_output(out, "<|im_start|>assistant\n", tools);
  ASSERT_TRUE(p.well_formed);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments,
            R"({"a":"7","b":"true","c":"3","d":"[1]","e":-12,"f":["x"]})");
  const Json parsed = Json::parse(p.tool_calls[0].arguments);
  EXPECT_TRUE(parsed["a"].is_string());
  EXPECT_TRUE(parsed["e"].is_number_integer());
  EXPECT_TRUE(parsed["f"].is_array());
}

TEST(ChatQwen35, MalformedOutputNeverThrows) {
  const Json tools = load_json("tools.json")["both"];
  const std::string good =
      "Thought.\n</think>\n\n<tool_call>\n<function=search>\n<parameter=query>\nq\n"
      "</parameter>\n<parameter=limit>\n1\n</parameter>\n</function>\n</tool_call>";
  const std::string text = good;
  // Every prefix (a reply cut anywhere) and every one-byte corruption parses without throwing;
  // only the whole text yields the call.
  size_t calls = 0;
  for (size_t n = 0; n <= text.size(); ++n) {
    const ParsedOutput p =
        parse_qwen35_output(text.substr(0, n), "<|im_start|>assistant\n<think>\n", tools);
    calls += p.tool_calls.size();
    if (!p.well_formed) {
      EXPECT_TRUE(p.tool_calls.empty());
    }
  }
  EXPECT_EQ(calls, 1u);
  for (size_t i = 0; i < text.size(); ++i) {
    for (char c : {'\0', '<', '>', '\n', '\xff'}) {
      std::string bad = text;
      bad[i] = c;
      const ParsedOutput p = parse_qwen35_output(bad, "<|im_start|>assistant\n<think>\n", tools);
      for (const ToolCall& call : p.tool_calls) EXPECT_TRUE(Json::accept(call.arguments));
    }
  }
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

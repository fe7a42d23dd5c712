// Qwen3.5 tool calls and reasoning beyond the template: the tool-call grammar
// (tool_call_gbnf(kQwen35, ...)) accepting a hand-written correct call and rejecting wrong ones,
// with the markers spelled as text (the qwen35 fixture vocabulary has no <tool_call> token) and
// as atomic tokens (a vocabulary laid out like Qwen3.5's); the grammar's calls parsing back into
// the same calls; and the reasoning-budget controller closing Qwen's pre-opened <think> block
// with "</think>", finding the markers by text.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "generate/reasoning.h"
#include "gguf/gguf.h"
#include "gguf_support/raw_gguf.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_vocabulary.h"
#include "support/paths.h"
#include "text/chat_template.h"
#include "text/pretokenizer.h"
#include "text/tokenizer.h"
#include "text/tool_grammar.h"
#include "text/utf8.h"
#include "util/error.h"

namespace boltrt {
namespace {

using text::Json;

const char* kTools = R"([
  {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7},
    "unit":{"enum":["C","F"]}},"required":["city","unit"]}}},
  {"type":"function","function":{"name":"ping"}}])";

// A byte-level vocabulary laid out like Qwen3.5's: the 256 characters of GPT-2's byte alphabet
// (no merges, so text is one token per byte), then the chat specials, <think>, </think>,
// <tool_call> and </tool_call> user-defined as in the released files.
std::unique_ptr<text::Tokenizer> qwen_like_tokenizer() {
  std::vector<std::pair<std::string, int>> tokens;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    text::append_utf8(s, text::byte_to_level_char(static_cast<uint8_t>(b)));
    tokens.emplace_back(s, 1);
  }
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) tokens.emplace_back(s, 3);
  for (const char* s : {"<think>", "</think>", "<tool_call>", "</tool_call>"}) {
    tokens.emplace_back(s, 4);
  }
  test::Bytes list, types, merges;
  list.u32(8).u64(tokens.size());
  types.u32(5).u64(tokens.size());
  for (const auto& [text, type] : tokens) {
    list.str(text);
    types.i32(type);
  }
  merges.u32(8).u64(0);
  test::RawFile file;
  file.kvs.push_back(test::kv_string("tokenizer.ggml.model", "gpt2"));
  file.kvs.push_back(test::kv_string("tokenizer.ggml.pre", "qwen35"));
  file.kvs.push_back({"tokenizer.ggml.tokens", 9, list});
  file.kvs.push_back({"tokenizer.ggml.token_type", 9, types});
  file.kvs.push_back({"tokenizer.ggml.merges", 9, merges});
  file.kvs.push_back(test::kv_u32("tokenizer.ggml.eos_token_id", 256));
  const std::vector<uint8_t> image = file.build();
  return text::Tokenizer::from_gguf(*gguf::File::parse(image, "qwen-like.gguf"));
}

const text::Tokenizer& qwen_like() {
  static const std::unique_ptr<text::Tokenizer> t = qwen_like_tokenizer();
  return *t;
}

const text::Tokenizer* fixture() {
  static std::unique_ptr<text::Tokenizer> t;
  const std::string path = test::source_dir() + "/tests/data/vocab/ggml-vocab-qwen35.gguf";
  if (!t && std::filesystem::exists(path)) t = text::Tokenizer::from_gguf(*gguf::File::open(path));
  return t.get();
}

std::shared_ptr<const grammar::TokenVocabulary> vocabulary_of(const text::Tokenizer& tok) {
  static std::map<const text::Tokenizer*, std::shared_ptr<const grammar::TokenVocabulary>> cache;
  auto& v = cache[&tok];
  if (!v) v = grammar::lazy_vocabulary_of(tok)();
  return v;
}

// Whether the grammar accepts `text` as the tokenizer writes it (special tokens parsed).
bool accepted(const std::string& gbnf, const text::Tokenizer& tok, const std::string& text) {
  grammar::Matcher m(
      std::make_shared<grammar::Engine>(grammar::parse_gbnf(gbnf), vocabulary_of(tok)));
  for (int32_t id : tok.encode(text, false, true)) {
    if (!m.accept(id)) return false;
  }
  return m.is_accepting();
}

text::ToolChoice choice(text::ToolChoice::Kind kind, std::string function = "",
                        bool parallel = true) {
  text::ToolChoice c;
  c.kind = kind;
  c.function = std::move(function);
  c.parallel = parallel;
  return c;
}

const std::string kCall =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n<parameter=unit>\n\"C\"\n</parameter>\n</function>\n"
    "</tool_call>";
const std::string kPing = "<tool_call>\n<function=ping>\n</function>\n</tool_call>";

void check_envelope(const text::Tokenizer& tok) {
  const Json tools = Json::parse(kTools);
  const std::string g = text::tool_call_gbnf(text::ChatFormat::kQwen35, tools,
                                             choice(text::ToolChoice::Kind::kRequired), tok);
  EXPECT_TRUE(accepted(g, tok, kCall));
  EXPECT_TRUE(accepted(g, tok, kPing));
  EXPECT_TRUE(accepted(g, tok, kCall + "\n" + kPing));
  EXPECT_TRUE(accepted(
      g, tok,
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nline 1\nline <2>\n</parameter>\n"
      "<parameter=unit>\n\"F\"\n</parameter>\n</function>\n</tool_call>"));
  // The required unit missing, days out of range, an undeclared unit, a JSON-quoted string
  // left unquoted, an undeclared function or parameter, no newline after the opener, text
  // instead of a call, a call that is not closed.
  auto replaced = [&](std::string_view from, std::string_view to) {
    std::string s = kCall;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_FALSE(accepted(g, tok, replaced("<parameter=unit>\n\"C\"\n</parameter>\n", "")));
  EXPECT_FALSE(accepted(g, tok, replaced("\n3\n", "\n9\n")));
  EXPECT_FALSE(accepted(g, tok, replaced("\"C\"", "\"K\"")));
  EXPECT_FALSE(accepted(g, tok, replaced("\"C\"", "C")));
  EXPECT_FALSE(accepted(g, tok, replaced("get_weather", "get_time")));
  EXPECT_FALSE(accepted(g, tok, replaced("<parameter=days>", "<parameter=hours>")));
  EXPECT_FALSE(accepted(g, tok, replaced("<tool_call>\n", "<tool_call>")));
  EXPECT_FALSE(accepted(g, tok, "It is sunny."));
  EXPECT_FALSE(accepted(g, tok, kCall.substr(0, kCall.size() - 12)));
  // A named function, without parallel calls.
  const std::string named =
      text::tool_call_gbnf(text::ChatFormat::kQwen35, tools,
                           choice(text::ToolChoice::Kind::kFunction, "ping", false), tok);
  EXPECT_TRUE(accepted(named, tok, kPing));
  EXPECT_FALSE(accepted(named, tok, kCall));
  EXPECT_FALSE(accepted(named, tok, kPing + "\n" + kPing));
  // auto: text, then optionally calls; none: text only.
  const std::string automatic = text::tool_call_gbnf(text::ChatFormat::kQwen35, tools,
                                                     choice(text::ToolChoice::Kind::kAuto), tok);
  EXPECT_TRUE(accepted(automatic, tok, "It is sunny."));
  EXPECT_TRUE(accepted(automatic, tok, "Let me check.\n\n" + kCall));
  const std::string none = text::tool_call_gbnf(text::ChatFormat::kQwen35, tools,
                                                choice(text::ToolChoice::Kind::kNone), tok);
  EXPECT_TRUE(accepted(none, tok, "It is sunny."));
  EXPECT_FALSE(accepted(none, tok, kPing));
  // What the grammar lets through parses into the call it spells.
  const text::ParsedOutput p =
      text::parse_output(text::ChatFormat::kQwen35, "Let me check.\n\n" + kCall + "\n" + kPing,
                         "<|im_start|>assistant\n<think>\n\n</think>\n\n", tools);
  ASSERT_TRUE(p.well_formed);
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"city":"São Paulo","days":3,"unit":"C"})");
  EXPECT_EQ(p.tool_calls[1].name, "ping");
  EXPECT_EQ(p.tool_calls[1].arguments, "{}");
}

TEST(Qwen35ToolGrammar, MarkersAsTextOnTheFixtureVocabulary) {
  const text::Tokenizer* tok = fixture();
  if (!tok) GTEST_SKIP() << "tests/data/vocab/ggml-vocab-qwen35.gguf is missing";
  EXPECT_EQ(tok->find("<tool_call>"), text::kNoToken);
  check_envelope(*tok);
}

TEST(Qwen35ToolGrammar, MarkersAsAtomicTokens) {
  const text::Tokenizer& tok = qwen_like();
  ASSERT_NE(tok.find("<tool_call>"), text::kNoToken);
  check_envelope(tok);
  const std::string g = text::tool_call_gbnf(text::ChatFormat::kQwen35, Json::parse(kTools),
                                             choice(text::ToolChoice::Kind::kRequired), tok);
  EXPECT_NE(g.find("call ::= <tool_call> "), std::string::npos);
  // The opener spelled byte by byte is not the token.
  grammar::Matcher m(std::make_shared<grammar::Engine>(grammar::parse_gbnf(g), vocabulary_of(tok)));
  EXPECT_FALSE(m.accept(tok.encode("<", false, false).at(0)));
}

TEST(Qwen35ToolGrammar, FormatsWithoutCallsAndBadDeclarations) {
  const text::Tokenizer& tok = qwen_like();
  const Json tools = Json::parse(kTools);
  const auto required = choice(text::ToolChoice::Kind::kRequired);
  EXPECT_EQ(text::tool_call_gbnf(text::ChatFormat::kNone, tools, required, tok), "");
  EXPECT_EQ(text::tool_call_gbnf(text::ChatFormat::kGemma4, tools, required, tok),
            text::gemma4_tool_call_gbnf(tools, required));
  EXPECT_THROW(
      text::qwen35_tool_call_gbnf(tools, choice(text::ToolChoice::Kind::kFunction, "nope"), false),
      Error);
  EXPECT_THROW(
      text::qwen35_tool_call_gbnf(Json::parse(R"([{"type":"function","function":{"name":"a>b"}}])"),
                                  required, false),
      Error);
  EXPECT_THROW(text::qwen35_tool_call_gbnf(Json::parse(R"({"not":"a list"})"), required, false),
               Error);
}

TEST(Qwen35Reasoning, MarkersByText) {
  EXPECT_EQ(text::thought_markers(text::ChatFormat::kQwen35).open, "<think>");
  EXPECT_EQ(text::thought_markers(text::ChatFormat::kQwen35).close, "</think>");
  EXPECT_EQ(text::thought_markers(text::ChatFormat::kGemma4).open, "<|channel>");
  const text::Tokenizer& tok = qwen_like();
  const auto vocab = ReasoningVocab::for_tokenizer(tok);
  ASSERT_TRUE(vocab.has_value());
  EXPECT_EQ(vocab->start, std::vector<int32_t>{tok.find("<think>")});
  EXPECT_EQ(vocab->end, std::vector<int32_t>{tok.find("</think>")});
  EXPECT_EQ(vocab->label, "\n");
  EXPECT_EQ(vocab->tool_call_open, std::vector<int32_t>{tok.find("<tool_call>")});
  EXPECT_EQ(vocab->tool_call_close, std::vector<int32_t>{tok.find("</tool_call>")});
  if (const text::Tokenizer* f = fixture()) {  // no <think> token: no markers
    EXPECT_FALSE(ReasoningVocab::for_tokenizer(*f).has_value());
  }
}

// Runs the controller over a model that always wants to write `think` (one byte each), starting
// from the Qwen3.5 generation prompt with thinking on, and returns the text written.
std::string run_budget(int64_t budget, int steps) {
  const text::Tokenizer& tok = qwen_like();
  ReasoningConfig config;
  config.mode = ReasoningMode::kOn;
  config.budget = budget;
  config.word_grace = 0;
  ReasoningController c(*ReasoningVocab::for_tokenizer(tok), config);
  const std::vector<int32_t> prompt =
      tok.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n", false, true);
  c.begin(prompt);
  // The prompt left the block open (its label "\n" written): thinking, or closing at once.
  EXPECT_EQ(c.state(), budget > 0 ? ReasoningController::State::kThinking
                                  : ReasoningController::State::kClosing);
  const int32_t x = tok.encode("x", false, false).at(0);
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()), 0.0f);
  logits[static_cast<size_t>(x)] = 1.0f;
  std::string out;
  for (int i = 0; i < steps; ++i) {
    const int32_t forced = c.before_sample(logits);
    const int32_t token = forced >= 0 ? forced : x;
    c.on_commit(token, forced >= 0);
    out += tok.piece(token, true);
  }
  return out;
}

TEST(Qwen35Reasoning, BudgetClosesTheThoughtWithThinkEnd) {
  const std::string out = run_budget(5, 80);
  const std::string want_prefix = "xxxxx" + std::string(kDefaultBudgetMessage) + "</think>";
  EXPECT_EQ(out.substr(0, want_prefix.size()), want_prefix);
  EXPECT_EQ(out.find("</think>", want_prefix.size()), std::string::npos);  // closed once
  // The text reads as Qwen's format: the reasoning, then the answer.
  const text::ParsedOutput p = text::parse_output(text::ChatFormat::kQwen35, out,
                                                  "<|im_start|>assistant\n<think>\n", Json());
  EXPECT_EQ(p.reasoning, "xxxxx" + std::string(kDefaultBudgetMessage));
  EXPECT_EQ(p.content, std::string(out.size() - want_prefix.size(), 'x'));
  // Budget 0: the pre-opened block is closed at once.
  EXPECT_EQ(run_budget(0, 10).substr(0, 8), "</think>");
}

}  // namespace
}  // namespace boltrt

// Constrained decoding end to end on the shipped tiny Gemma 4 (models/tiny): JSON Schema outputs
// at temperature 1 over many seeds all validate (independent validator) and end only when
// complete; greedy output with a grammar and the DFlash draft equals it without the draft;
// with reasoning on the thought stays free and the answer is constrained; and the CLI, batch
// surfaces (--json-schema, --grammar-file, response_format); the API in test_grammar_api.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "generate/gguf_text_model.h"
#include "generate/grammar_controller.h"
#include "generate/reasoning.h"
#include "generate/reply_splitter.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "support/json_schema_validator.h"
#include "support/paths.h"
#include "text/tool_grammar.h"
#include "util/error.h"

namespace boltrt {
namespace {

using Json = nlohmann::ordered_json;

const std::string& tiny_path() {
  static const std::string p = test::source_dir() + "/models/tiny/tiny-q8_0.gguf";
  return p;
}
const std::string& draft_path() {
  static const std::string p = test::source_dir() + "/models/tiny/tiny-dflash.gguf";
  return p;
}

TextModel& tiny() {
  static std::unique_ptr<TextModel> model = [] {
    TextModelOptions o;
    o.path = tiny_path();
    o.threads = 1;
    o.n_ctx = 1024;
    return load_text_model(o);
  }();
  return *model;
}

const char* kPersonSchema = R"({"type":"object","properties":{
    "name":{"type":"string","minLength":1,"maxLength":24},
    "age":{"type":"integer","minimum":18,"maximum":99},
    "height":{"type":"number","exclusiveMinimum":1.2,"maximum":2.25},
    "born":{"type":"string","format":"date"},
    "code":{"type":"string","pattern":"^[A-Z][a-z]+$","maxLength":6},
    "pair":{"type":"array","prefixItems":[{"type":"boolean"},{"enum":["x","y"]}],"items":false},
    "spouse":{"type":["string","null"]}},
    "required":["name","age","height","born","code","pair"]})";

struct GenRun {
  std::string reasoning, content, text;
  std::vector<int32_t> tokens;
  FinishReason finish;
  SpeculativeStats draft;
};

GenRun generate(const OutputConstraint& c, uint32_t seed, float temperature, bool thinking,
                int64_t budget, BlockDrafter* drafter, int64_t max_tokens = 400) {
  TextModel& m = tiny();
  std::vector<ChatMessage> messages = {
      {"user", "Describe Mr Darcy as JSON with his name, age, height and birthday."}};
  const std::vector<int32_t> prompt = m.tokenize(m.render_chat(messages, thinking), true);
  SamplerConfig sampling;
  sampling.seed = seed;
  sampling.temperature = temperature;
  Generator generator(m.model(), m.vocab(), sampling);
  if (drafter != nullptr) {
    SpeculativeOptions so;
    so.adaptive = false;
    generator.set_drafter(drafter, so);
  }
  ReasoningConfig rc;
  rc.mode = thinking ? ReasoningMode::kOn : ReasoningMode::kOff;
  rc.budget = budget;
  rc.max_tokens = max_tokens;
  auto reasoning = make_reasoning_controller(m, rc);
  auto grammar = make_grammar_controller(c, m.vocab(), m.model().n_vocab(), m.reasoning_markers(),
                                         thinking, reasoning.get());
  GenerationOptions options;
  options.max_tokens = max_tokens;
  // No constraint: the reasoning controller alone (the baseline a lazy grammar must equal).
  options.controller = grammar ? static_cast<TokenController*>(grammar.get()) : reasoning.get();
  ReplySplitter splitter(m.reasoning_markers(),
                         ReplySplitter::prompt_opens_reasoning(prompt, m.reasoning_markers()));
  options.on_token = [&](const TokenEvent& e) {
    splitter.push(e.token, e.piece);
    return true;
  };
  const GenerationResult r = generator.generate(prompt, options);
  splitter.finish();
  return {splitter.reasoning(), splitter.content(), r.text, r.tokens,
          r.finish_reason,      r.stats.draft};
}

TEST(GrammarGenerate, EveryFinishedOutputValidatesAtTemperatureOne) {
  const Json schema = Json::parse(kPersonSchema);
  const OutputConstraint c = OutputConstraint::json_schema(kPersonSchema);
  int finished = 0;
  for (uint32_t seed = 1; seed <= 24; ++seed) {
    const GenRun r = generate(c, seed, 1.0f, false, -1, nullptr);
    if (r.finish != FinishReason::kEndOfGeneration) continue;  // cut by the limit
    ++finished;
    Json value;
    ASSERT_NO_THROW(value = Json::parse(r.content)) << r.content;
    std::string why;
    EXPECT_TRUE(test::validate_json(schema, value, &why)) << why << ": " << r.content;
  }
  EXPECT_GE(finished, 12);
}

TEST(GrammarGenerate, EndOfGenerationOnlyWhenComplete) {
  // Under max_tokens the output is a prefix of a valid document; it never ends early.
  const OutputConstraint c = OutputConstraint::json_schema(kPersonSchema);
  for (uint32_t seed = 30; seed < 36; ++seed) {
    const GenRun r = generate(c, seed, 1.0f, false, -1, nullptr, 12);
    EXPECT_EQ(r.finish, FinishReason::kMaxTokens) << r.content;
    EXPECT_FALSE(Json::accept(r.content)) << r.content;
  }
}

TEST(GrammarGenerate, GreedyWithDraftEqualsWithout) {
  const OutputConstraint c = OutputConstraint::json_schema(kPersonSchema);
  const std::unique_ptr<BlockDrafter> drafter = tiny().load_drafter(draft_path());
  for (bool thinking : {false, true}) {
    const GenRun plain = generate(c, 5, 0.0f, thinking, 24, nullptr);
    const GenRun drafted = generate(c, 5, 0.0f, thinking, 24, drafter.get());
    EXPECT_EQ(plain.tokens, drafted.tokens) << plain.text << "\n---\n" << drafted.text;
    EXPECT_GT(drafted.draft.n_drafted, 0);
    EXPECT_EQ(plain.finish, FinishReason::kEndOfGeneration);
  }
  // and at temperature 1 with a seed every output still validates
  const Json schema = Json::parse(kPersonSchema);
  for (uint32_t seed = 40; seed < 46; ++seed) {
    const GenRun r = generate(c, seed, 1.0f, false, -1, drafter.get());
    if (r.finish != FinishReason::kEndOfGeneration) continue;
    std::string why;
    EXPECT_TRUE(test::validate_json(schema, Json::parse(r.content), &why)) << why << r.content;
  }
}

TEST(GrammarGenerate, DraftPrefixChecksDraftsAndRollsBack) {
  TextModel& m = tiny();
  auto g = make_grammar_controller(OutputConstraint::grammar("root ::= \"ab\" [0-9]+"), m.vocab(),
                                   m.model().n_vocab(), std::nullopt, false, nullptr);
  const std::vector<int32_t> prompt = m.tokenize("x", true);
  g->begin(prompt);
  std::vector<int32_t> drafted = m.tokenize("ab12", false);
  const std::vector<int32_t> bad = m.tokenize("c", false);
  const int64_t n = static_cast<int64_t>(drafted.size());
  drafted.insert(drafted.end(), bad.begin(), bad.end());
  EXPECT_EQ(g->draft_prefix(drafted), n);
  EXPECT_EQ(g->matcher().tokens_accepted(), 0u);  // rolled back
  EXPECT_EQ(g->draft_prefix(bad), 0);
}

TEST(GrammarGenerate, ThoughtStaysFreeAndTheAnswerIsConstrained) {
  const Json schema = Json::parse(kPersonSchema);
  const OutputConstraint c = OutputConstraint::json_schema(kPersonSchema);
  int thought = 0;
  for (uint32_t seed = 50; seed < 56; ++seed) {
    const GenRun r = generate(c, seed, 1.0f, true, 32, nullptr, 500);
    if (!r.reasoning.empty()) ++thought;
    if (r.finish != FinishReason::kEndOfGeneration) continue;
    std::string why;
    EXPECT_TRUE(test::validate_json(schema, Json::parse(r.content), &why)) << why << r.content;
  }
  EXPECT_GE(thought, 3);  // the tiny model thinks when asked to, and is let
}

// ---- CLI, batch, API -------------------------------------------------------------------------

std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(GrammarCli, GenerateWithJsonSchemaAndGrammarFile) {
  const std::string dir = test::scratch_dir("grammar_cli");
  const std::string schema = write_file(dir, "s.json", kPersonSchema);
  const auto out = test::run_command_split(
      fmt::format("{} generate -m {} --chat -p 'Mr Darcy?' -n 400 --temp 1 --seed 3 "
                  "--json-schema-file {} --json",
                  test::cli_path(), tiny_path(), schema));
  ASSERT_EQ(out.status, 0) << out.err;
  const Json result = Json::parse(out.out);
  ASSERT_EQ(result["finish_reason"], "eog");
  std::string why;
  EXPECT_TRUE(test::validate_json(Json::parse(kPersonSchema),
                                  Json::parse(result["content"].get<std::string>()), &why))
      << why;
  const std::string g = write_file(dir, "g.gbnf", "root ::= (\"yes\" | \"no\") \", sir\"\n");
  const auto yes = test::run_command_split(fmt::format(
      "{} generate -m {} -p 'Well' -n 20 --grammar-file {}", test::cli_path(), tiny_path(), g));
  ASSERT_EQ(yes.status, 0) << yes.err;
  EXPECT_TRUE(yes.out == "yes, sir" || yes.out == "no, sir") << yes.out;
  // --ignore-eos cannot keep a complete grammar going: it ends there
  const auto ended = test::run_command_split(fmt::format(
      "{} generate -m {} -p 'Well' -n 20 --ignore-eos --grammar 'root ::= \"ok\"' --json",
      test::cli_path(), tiny_path()));
  ASSERT_EQ(ended.status, 0) << ended.err;
  EXPECT_EQ(Json::parse(ended.out)["text"], "ok");
  EXPECT_EQ(Json::parse(ended.out)["finish_reason"], "eog");
  const auto bad = test::run_command_split(fmt::format(
      "{} generate -m {} -p 'Well' --grammar 'root ::= (\"a\"'", test::cli_path(), tiny_path()));
  EXPECT_EQ(bad.status, 1);
  EXPECT_EQ(bad.err, "boltrt: error: grammar: 1:10: unclosed '('\n");
  const auto unsupported = test::run_command_split(
      fmt::format("{} generate -m {} -p 'Well' -j '{{\"type\":\"string\",\"format\":\"uri\"}}'",
                  test::cli_path(), tiny_path()));
  EXPECT_EQ(unsupported.status, 1);
  EXPECT_EQ(unsupported.err, "boltrt: error: json schema: /format: unsupported format 'uri'\n");
}

TEST(GrammarCli, BatchResponseFormat) {
  const std::string dir = test::scratch_dir("grammar_batch");
  const Json schema = Json::parse(kPersonSchema);
  std::string lines;
  for (int i = 0; i < 4; ++i) {
    Json line = {{"id", i},
                 {"messages", {{{"role", "user"}, {"content", "Mr Darcy as JSON"}}}},
                 {"max_tokens", 400},
                 {"temperature", 1.0},
                 {"seed", 10 + i},
                 {"response_format",
                  {{"type", "json_schema"},
                   {"json_schema", {{"name", "person"}, {"schema", schema}, {"strict", true}}}}}};
    lines += line.dump() + "\n";
  }
  lines +=
      R"({"id":"obj","prompt":"Once","max_tokens":200,"seed":1,"response_format":{"type":"json_object"}})"
      "\n";
  lines +=
      R"({"id":"bad","prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string","not":{}}}}})"
      "\n";
  const std::string in = write_file(dir, "in.jsonl", lines);
  const auto run = test::run_command_split(fmt::format(
      "{} batch -m {} --input {} --output {}/out.jsonl", test::cli_path(), tiny_path(), in, dir));
  std::ifstream results(dir + "/out.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(results, line)) {
    const Json r = Json::parse(line);
    ++n;
    if (r["finish_reason"] != "eog") continue;
    const Json value = Json::parse(r["content"].get<std::string>());
    if (r["id"] == "obj") {
      EXPECT_TRUE(value.is_object());
      continue;
    }
    std::string why;
    EXPECT_TRUE(test::validate_json(schema, value, &why)) << why << line;
  }
  EXPECT_EQ(n, 5) << run.err;
  std::string errors;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().string().find("err") != std::string::npos) {
      std::ifstream f(entry.path());
      errors.assign(std::istreambuf_iterator<char>(f), {});
    }
  }
  EXPECT_NE(errors.find("json schema: /not: unsupported keyword 'not'"), std::string::npos)
      << errors << run.err;
}

// ---- tool calls ------------------------------------------------------------------------------

const char* kTools = R"([{"type":"function","function":{"name":"get_weather","parameters":{
    "type":"object","properties":{"city":{"type":"string","maxLength":12},
    "days":{"type":"integer","minimum":1,"maximum":7},"unit":{"enum":["C","F"]}},
    "required":["city","unit"]}}},
  {"type":"function","function":{"name":"ping"}}])";

bool tool_text_accepted(const std::string& gbnf, const std::string& text) {
  TextModel& m = tiny();
  grammar::Matcher matcher(std::make_shared<grammar::Engine>(
      grammar::parse_gbnf(gbnf), grammar_vocabulary(m.vocab(), m.model().n_vocab())));
  for (int32_t t : m.tokenize(text, false)) {
    if (!matcher.accept(t)) return false;
  }
  return matcher.is_accepting();
}

TEST(GrammarTools, Gemma4EnvelopeWithSchemaArguments) {
  const Json tools = Json::parse(kTools);
  text::ToolChoice required;
  required.kind = text::ToolChoice::Kind::kRequired;
  const std::string g = text::gemma4_tool_call_gbnf(tools, required);
  const std::string q = "<|\"|>";
  EXPECT_TRUE(tool_text_accepted(g, "<|tool_call>call:get_weather{city:" + q + "Bath" + q +
                                        ",unit:" + q + "C" + q + "}<tool_call|>"));
  EXPECT_TRUE(tool_text_accepted(g, "<|tool_call>call:get_weather{city:" + q + "Bath" + q +
                                        ",days:3,unit:" + q + "F" + q +
                                        "}<tool_call|>"
                                        "<|tool_call>call:ping{}<tool_call|>"));
  // JSON-quoted keys, '=' instead of ':', a plain quote for the string, a missing opener,
  // keys out of the template's order, a value out of range or enum, an unknown tool, no call
  EXPECT_FALSE(tool_text_accepted(g, "<|tool_call>call:get_weather{\"city\":" + q + "B" + q +
                                         ",unit:" + q + "C" + q + "}<tool_call|>"));
  EXPECT_FALSE(tool_text_accepted(g, "<|tool_call>call:get_weather{city=" + q + "B" + q +
                                         ",unit:" + q + "C" + q + "}<tool_call|>"));
  EXPECT_FALSE(tool_text_accepted(
      g, "<|tool_call>call:get_weather{city:\"B\",unit:" + q + "C" + q + "}<tool_call|>"));
  EXPECT_FALSE(tool_text_accepted(
      g, "<|tool_call>call:get_weather{city:B" + q + ",unit:" + q + "C" + q + "}<tool_call|>"));
  EXPECT_FALSE(tool_text_accepted(g, "<|tool_call>call:get_weather{unit:" + q + "C" + q +
                                         ",city:" + q + "B" + q + "}<tool_call|>"));
  EXPECT_FALSE(tool_text_accepted(g, "<|tool_call>call:get_weather{city:" + q + "B" + q +
                                         ",days:9,unit:" + q + "C" + q + "}<tool_call|>"));
  EXPECT_FALSE(tool_text_accepted(g, "<|tool_call>call:get_weather{city:" + q + "B" + q +
                                         ",unit:" + q + "K" + q + "}<tool_call|>"));
  EXPECT_FALSE(tool_text_accepted(g, "<|tool_call>call:get_time{}<tool_call|>"));
  EXPECT_FALSE(tool_text_accepted(g, "Hello"));
  // a named function, no parallel calls
  text::ToolChoice named;
  named.kind = text::ToolChoice::Kind::kFunction;
  named.function = "ping";
  named.parallel = false;
  const std::string one = text::gemma4_tool_call_gbnf(tools, named);
  EXPECT_TRUE(tool_text_accepted(one, "<|tool_call>call:ping{}<tool_call|>"));
  EXPECT_FALSE(tool_text_accepted(
      one, "<|tool_call>call:ping{}<tool_call|><|tool_call>call:ping{}<tool_call|>"));
  // auto: free text, then optionally calls; none: text only
  text::ToolChoice automatic;
  EXPECT_TRUE(tool_text_accepted(text::gemma4_tool_call_gbnf(tools, automatic), "Hello there."));
  EXPECT_TRUE(tool_text_accepted(text::gemma4_tool_call_gbnf(tools, automatic),
                                 "Let me see.<|tool_call>call:ping{}<tool_call|>"));
  text::ToolChoice none;
  none.kind = text::ToolChoice::Kind::kNone;
  EXPECT_FALSE(tool_text_accepted(text::gemma4_tool_call_gbnf(tools, none),
                                  "<|tool_call>call:ping{}<tool_call|>"));
  named.function = "nope";
  EXPECT_THROW(text::gemma4_tool_call_gbnf(tools, named), Error);
  try {
    text::gemma4_tool_call_gbnf(
        Json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
            "properties":{"x":{"type":"string","format":"uri"}}}}}])"),
        required);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "tools[0] (f): parameters: json schema: /properties/x/format: unsupported "
                 "format 'uri'");
  }
}

// tool_choice auto is a lazy grammar: until the model writes the call opener nothing is
// masked, so every reply without a call is token for token the unconstrained one, at
// temperature 1 (same seed) and greedily.
TEST(GrammarTools, LazyGrammarChangesNothingUntilTheOpener) {
  text::ToolChoice required;
  required.kind = text::ToolChoice::Kind::kRequired;
  const OutputConstraint lazy = OutputConstraint::lazy_grammar(
      text::gemma4_tool_call_gbnf(Json::parse(kTools), required), "<|tool_call>");
  const auto vocab = grammar_vocabulary(tiny().vocab(), tiny().model().n_vocab());
  const int32_t call = vocab->find("<|tool_call>");
  ASSERT_GE(call, 0);
  int compared = 0;
  for (uint32_t seed = 0; seed < 8; ++seed) {
    const float temperature = seed == 0 ? 0.0f : 1.0f;
    const GenRun with = generate(lazy, seed, temperature, false, -1, nullptr, 120);
    const GenRun without = generate(OutputConstraint{}, seed, temperature, false, -1, nullptr, 120);
    if (std::find(with.tokens.begin(), with.tokens.end(), call) != with.tokens.end()) continue;
    EXPECT_EQ(with.tokens, without.tokens) << "seed " << seed;
    EXPECT_EQ(with.finish, without.finish);
    ++compared;
  }
  EXPECT_GE(compared, 6);
  // With the DFlash draft: greedy output equals it without (drafts pass untouched while the
  // grammar waits), with and without a thought.
  const std::unique_ptr<BlockDrafter> drafter = tiny().load_drafter(draft_path());
  for (bool thinking : {false, true}) {
    const GenRun plain = generate(lazy, 5, 0.0f, thinking, 24, nullptr, 120);
    const GenRun drafted = generate(lazy, 5, 0.0f, thinking, 24, drafter.get(), 120);
    EXPECT_EQ(plain.tokens, drafted.tokens) << plain.text << "\n---\n" << drafted.text;
    EXPECT_GT(drafted.draft.n_drafted, 0);
  }
  // A draft is verified up to and including the opener; the grammar checks what follows.
  auto controller = make_grammar_controller(lazy, tiny().vocab(), tiny().model().n_vocab(),
                                            tiny().reasoning_markers(), false, nullptr);
  controller->begin({});
  std::vector<int32_t> drafted = tiny().tokenize("Let me see.", false);
  const int64_t before = static_cast<int64_t>(drafted.size());
  drafted.push_back(call);
  for (int32_t t : tiny().tokenize("nonsense", false)) drafted.push_back(t);
  EXPECT_EQ(controller->draft_prefix(drafted), before + 1);
  EXPECT_TRUE(controller->waiting());
}

// A trigger the vocabulary has no token for is watched in the text: the grammar switches on
// once the output spells it (even across tokens), the bytes from its start replayed, and then
// masks; before that, nothing is masked.
TEST(GrammarTools, LazyGrammarWithATextTrigger) {
  TextModel& m = tiny();
  const OutputConstraint c =
      OutputConstraint::lazy_grammar("root ::= \"CALL(\" [a-z]+ \")\"", "CALL(");
  auto controller =
      make_grammar_controller(c, m.vocab(), m.model().n_vocab(), std::nullopt, false, nullptr);
  ASSERT_NE(controller, nullptr);
  controller->begin({});
  const auto commit = [&](std::string_view text) {
    for (int32_t t : m.tokenize(text, false)) controller->on_commit(t, false);
  };
  std::vector<float> logits(static_cast<size_t>(m.model().n_vocab()), 0.0f);
  commit("She wrote CAL");
  EXPECT_TRUE(controller->waiting());
  EXPECT_EQ(controller->before_sample(logits), -1);
  EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float x) { return x == 0.0f; }));
  commit("L(ab");
  EXPECT_FALSE(controller->waiting());
  EXPECT_EQ(controller->before_sample(logits), -1);
  // Now only letters and ')' may follow.
  const std::vector<int32_t> close = m.tokenize(")", false);
  ASSERT_EQ(close.size(), 1u);
  EXPECT_EQ(logits[static_cast<size_t>(close[0])], 0.0f);
  const std::vector<int32_t> space = m.tokenize(" ", false);
  EXPECT_EQ(logits[static_cast<size_t>(space[0])], -INFINITY);
  commit(")");
  EXPECT_TRUE(controller->matcher().is_accepting());
  // A clone carries the state; a new begin() waits again.
  auto copy = controller->clone();
  controller->begin({});
  EXPECT_TRUE(controller->waiting());
  EXPECT_FALSE(static_cast<GrammarController*>(copy.get())->waiting());
}

// The batch tool tests' calls: `ping` with no arguments, or `get_weather` with arguments that
// validate against its schema. Returns how many calls there were.
int expect_valid_calls(const Json& calls, const Json& weather, const std::string& line) {
  for (const Json& call : calls) {
    const std::string name = call["function"]["name"];
    const Json args = Json::parse(call["function"]["arguments"].get<std::string>());
    if (name == "ping") {
      EXPECT_EQ(args, Json::object());
      continue;
    }
    EXPECT_EQ(name, "get_weather");
    std::string why;
    EXPECT_TRUE(test::validate_json(weather, args, &why)) << why << line;
  }
  return static_cast<int>(calls.size());
}

TEST(GrammarCli, BatchToolChoiceRequired) {
  const std::string dir = test::scratch_dir("grammar_tools");
  const Json tools = Json::parse(kTools);
  std::string lines;
  for (int i = 0; i < 4; ++i) {
    Json line = {{"id", i},
                 {"messages", {{{"role", "user"}, {"content", "Weather in Bath?"}}}},
                 {"tools", tools},
                 {"tool_choice",
                  i % 2 ? Json("required")
                        : Json({{"type", "function"}, {"function", {{"name", "get_weather"}}}})},
                 {"max_tokens", 300},
                 {"temperature", 1.0},
                 {"seed", 20 + i}};
    lines += line.dump() + "\n";
  }
  const std::string in = write_file(dir, "in.jsonl", lines);
  const auto run = test::run_command_split(fmt::format(
      "{} batch -m {} --input {} --output {}/out.jsonl", test::cli_path(), tiny_path(), in, dir));
  ASSERT_EQ(run.status, 0) << run.err;
  std::ifstream results(dir + "/out.jsonl");
  std::string line;
  int calls = 0;
  const Json weather = tools[0]["function"]["parameters"];
  while (std::getline(results, line)) {
    const Json r = Json::parse(line);
    if (r["finish_reason"] == "length") continue;
    EXPECT_EQ(r["finish_reason"], "tool_calls") << line;
    calls += expect_valid_calls(r["tool_calls"], weather, line);
  }
  EXPECT_GE(calls, 3);
}

// Batch request lines with tool_choice auto: the lazy grammar (the tiny model opens calls only
// with a logit bias on <|tool_call>, id 48, models/tiny/MODEL_CARD.md). Every finished reply is
// either text without a call marker or calls with valid arguments; both occur.
TEST(GrammarCli, BatchToolChoiceAutoCallsParse) {
  const std::string dir = test::scratch_dir("grammar_tools_auto");
  const Json tools = Json::parse(kTools);
  std::string lines;
  for (int i = 0; i < 16; ++i) {
    Json line = {{"id", i},
                 {"messages", {{{"role", "user"}, {"content", "What is the weather in Bath?"}}}},
                 {"tools", tools},
                 {"tool_choice", "auto"},
                 {"parallel_tool_calls", i % 2 == 0},
                 {"logit_bias", {{"48", 9.5}}},
                 {"max_tokens", 300},
                 {"temperature", 1.0},
                 {"seed", 100 + i}};
    lines += line.dump() + "\n";
  }
  const std::string in = write_file(dir, "in.jsonl", lines);
  const auto run = test::run_command_split(fmt::format(
      "{} batch -m {} --input {} --output {}/out.jsonl", test::cli_path(), tiny_path(), in, dir));
  ASSERT_EQ(run.status, 0) << run.err;
  std::ifstream results(dir + "/out.jsonl");
  std::string line;
  int with_calls = 0, text_only = 0;
  const Json weather = tools[0]["function"]["parameters"];
  while (std::getline(results, line)) {
    const Json r = Json::parse(line);
    if (r["finish_reason"] == "length") continue;
    EXPECT_EQ(r["content"].get<std::string>().find("<|tool_call>"), std::string::npos) << line;
    if (r["tool_calls"].empty()) {
      EXPECT_EQ(r["finish_reason"], "eog") << line;
      ++text_only;
      continue;
    }
    ++with_calls;
    EXPECT_EQ(r["finish_reason"], "tool_calls") << line;
    expect_valid_calls(r["tool_calls"], weather, line);
  }
  EXPECT_GE(with_calls, 2);
  EXPECT_GE(text_only, 2);
}

}  // namespace
}  // namespace boltrt

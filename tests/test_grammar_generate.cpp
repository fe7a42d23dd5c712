// Constrained decoding end to end on the shipped tiny Gemma 4 (models/tiny): JSON Schema outputs
// at temperature 1 over many seeds all validate (independent validator) and end only when
// complete; greedy output with a grammar and the DFlash draft equals it without the draft;
// with reasoning on the thought stays free and the answer is constrained; and the CLI, batch
// surfaces (--json-schema, --grammar-file, response_format); the API in test_grammar_api.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "generate/gguf_text_model.h"
#include "generate/grammar_controller.h"
#include "generate/reasoning.h"
#include "generate/reply_splitter.h"
#include "support/json_schema_validator.h"
#include "support/paths.h"
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
  options.controller = grammar.get();
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

}  // namespace
}  // namespace boltrt

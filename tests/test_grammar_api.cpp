// Structured output through the public C++ API (include/boltrt/boltrt.h): Request::json_schema
// and Request::grammar on the shipped tiny model; outputs checked by the independent validator.
#include <boltrt/boltrt.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/json_schema_validator.h"
#include "support/paths.h"

namespace boltrt {
namespace {

using Json = nlohmann::ordered_json;

const char* kSchema = R"({"type":"object","properties":{
    "name":{"type":"string","minLength":1,"maxLength":24},
    "age":{"type":"integer","minimum":18,"maximum":99},
    "born":{"type":"string","format":"date"}},"required":["name","age","born"]})";

TEST(GrammarApi, RequestJsonSchemaAndGrammar) {
  ModelOptions mo;
  mo.threads = 1;
  auto model = Model::load(test::source_dir() + "/models/tiny/tiny-q8_0.gguf", mo);
  Session session(model);
  Request request;
  request.messages.push_back(Message::text("user", "Mr Darcy as JSON"));
  request.json_schema = kSchema;
  request.max_tokens = 400;
  request.sampling.temperature = 1.0f;
  request.sampling.seed = 4;
  const Result r = session.generate(request);
  ASSERT_EQ(r.finish_reason, api::FinishReason::kEndOfGeneration);
  std::string why;
  EXPECT_TRUE(test::validate_json(Json::parse(kSchema), Json::parse(r.content), &why))
      << why << r.content;
  Request both = request;
  both.grammar = "root ::= \"x\"";
  EXPECT_THROW(session.generate(both), Error);
  Request g;
  g.prompt = "The weather";
  g.grammar = "root ::= \" is \" (\"fine\" | \"dreadful\") \".\"";
  g.max_tokens = 30;
  const Result w = session.generate(g);
  EXPECT_TRUE(w.text == " is fine." || w.text == " is dreadful.") << w.text;
}

// The two tools of the tool-choice tests: parameter schemas with ranges, enums and a format.
constexpr const char* kWeatherSchema =
    R"({"type":"object","properties":{"city":{"type":"string","maxLength":16},
      "days":{"type":"integer","minimum":1,"maximum":7},"unit":{"enum":["C","F"]}},
      "required":["city","unit"],"additionalProperties":false})";
constexpr const char* kDateSchema =
    R"({"type":"object","properties":{"day":{"type":"string","format":"date"}},
      "required":["day"]})";

TEST(GrammarApi, ToolChoiceRequiredAndNamedForceValidCalls) {
  ModelOptions mo;
  mo.threads = 1;
  auto model = Model::load(test::source_dir() + "/models/tiny/tiny-q8_0.gguf", mo);
  Session session(model);
  Request request;
  request.messages.push_back(Message::text("user", "What is the weather in Bath?"));
  request.tools = {{"get_weather", "Weather of a city", kWeatherSchema},
                   {"get_date", "A date", kDateSchema}};
  request.max_tokens = 300;
  request.sampling.temperature = 1.0f;
  int calls = 0;
  for (const std::string choice : {"required", "get_date"}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      request.tool_choice = choice;
      request.sampling.seed = seed;
      const Result r = session.generate(request);
      if (r.finish_reason == FinishReason::kLength) continue;
      ASSERT_EQ(r.finish_reason, FinishReason::kToolCalls) << r.text;
      EXPECT_EQ(r.content, "");
      ASSERT_FALSE(r.tool_calls.empty());
      for (const ToolCall& call : r.tool_calls) {
        ++calls;
        if (choice != "required") {
          EXPECT_EQ(call.name, choice);
        }
        const Json schema = Json::parse(call.name == "get_weather" ? kWeatherSchema : kDateSchema);
        std::string why;
        EXPECT_TRUE(test::validate_json(schema, Json::parse(call.arguments), &why))
            << why << ": " << call.arguments;
      }
    }
  }
  EXPECT_GE(calls, 6);
  request.tool_choice = "no_such_tool";
  EXPECT_THROW(session.generate(request), Error);
  request.tool_choice = "required";
  request.json_object = true;
  EXPECT_THROW(session.generate(request), Error);
}

// tool_choice auto: free text, or calls whose arguments validate. The tiny model was never
// trained on calls, so a logit bias on the call opener (<|tool_call>, id 48 in its vocabulary,
// models/tiny/MODEL_CARD.md) makes it open one in some replies; every reply that opens a call
// at temperature 1 must parse into that many calls with valid arguments, and text-only replies
// must still occur.
TEST(GrammarApi, ToolChoiceAutoCallsAlwaysParseAndTextStaysPossible) {
  ModelOptions mo;
  mo.threads = 1;
  auto model = Model::load(test::source_dir() + "/models/tiny/tiny-q8_0.gguf", mo);
  Session session(model);
  constexpr int32_t kCallOpener = 48;
  Request request;
  request.messages.push_back(Message::text("user", "What is the weather in Bath?"));
  request.tools = {{"get_weather", "Weather of a city", kWeatherSchema},
                   {"get_date", "A date", kDateSchema}};
  request.tool_choice = "auto";
  request.max_tokens = 300;
  request.sampling.temperature = 1.0f;
  request.sampling.logit_bias = {{kCallOpener, 9.5f}};
  int with_calls = 0, text_only = 0, calls = 0;
  for (uint32_t seed = 1; seed <= 32; ++seed) {
    request.sampling.seed = seed;
    request.parallel_tool_calls = seed % 2 == 0;
    int opened = 0;
    const Result r = session.generate(request, [&](const TokenInfo& t) {
      opened += t.id == kCallOpener && !t.reasoning;
      return true;
    });
    // Out of tokens or context: a budget, not the grammar, ended the reply.
    if (r.finish_reason == FinishReason::kLength || r.finish_reason == FinishReason::kContextFull)
      continue;
    if (opened == 0) {
      EXPECT_EQ(r.finish_reason, FinishReason::kEndOfGeneration) << r.text;
      EXPECT_TRUE(r.tool_calls.empty());
      ++text_only;
      continue;
    }
    ++with_calls;
    ASSERT_EQ(r.finish_reason, FinishReason::kToolCalls) << "seed " << seed << ": " << r.text;
    ASSERT_EQ(r.tool_calls.size(), static_cast<size_t>(opened)) << r.text;
    for (const ToolCall& call : r.tool_calls) {
      ++calls;
      ASSERT_TRUE(call.name == "get_weather" || call.name == "get_date") << call.name;
      const Json schema = Json::parse(call.name == "get_weather" ? kWeatherSchema : kDateSchema);
      std::string why;
      EXPECT_TRUE(test::validate_json(schema, Json::parse(call.arguments), &why))
          << why << ": " << call.arguments;
    }
  }
  EXPECT_GE(with_calls, 4);
  EXPECT_GE(text_only, 2);
  EXPECT_GE(calls, with_calls);
}

}  // namespace
}  // namespace boltrt

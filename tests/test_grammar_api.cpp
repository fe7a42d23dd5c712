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

}  // namespace
}  // namespace boltrt

// The chat endpoint's reply parsing, in process: a scripted model on the tiny model's Gemma 4
// vocabulary writes a fixed reply (tool calls, a thought block), and the server must return it
// the OpenAI way — tool_calls with ids and JSON arguments, finish_reason "tool_calls", the
// thought as reasoning_content — and stream it as the official clients accumulate it: a tool
// call's first delta carries index, id, type and name, later deltas only argument fragments
// that append.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/gguf_backend.h"
#include "batch/engine.h"
#include "batch/sequence_batcher.h"
#include "server/http.h"
#include "server/openai_request.h"
#include "server/openai_server.h"
#include "server/scheduler.h"
#include "support/paths.h"
#include "support/serve_support.h"
#include "text/tool_grammar.h"

namespace {

using json = nlohmann::ordered_json;
using namespace std::chrono_literals;

// Answers every prompt with `script` (then end of generation), one token per decode, each
// decode `delay` long so that a stream sees the reply grow.
class ScriptedModel : public boltrt::LanguageModel {
 public:
  ScriptedModel(std::vector<int32_t> script, int64_t n_vocab)
      : script_(std::move(script)), logits_(static_cast<size_t>(n_vocab), 0.0f) {}
  int64_t n_vocab() const override { return static_cast<int64_t>(logits_.size()); }
  int64_t n_ctx() const override { return 4096; }
  int64_t n_past() const override { return n_past_; }
  std::span<const float> decode(std::span<const int32_t> tokens, bool) override {
    if (n_past_ == 0) prompt_ = static_cast<int64_t>(tokens.size());
    n_past_ += static_cast<int64_t>(tokens.size());
    std::this_thread::sleep_for(2ms);
    const size_t next = static_cast<size_t>(n_past_ - prompt_);
    std::fill(logits_.begin(), logits_.end(), 0.0f);
    logits_[static_cast<size_t>(next < script_.size() ? script_[next] : script_.back())] = 10.0f;
    return logits_;
  }
  void rollback(int64_t n_past) override { n_past_ = n_past; }

 private:
  std::vector<int32_t> script_;
  std::vector<float> logits_;
  int64_t n_past_ = 0, prompt_ = 0;
};

class ScriptedEngine : public boltrt::batch::BatchEngine {
 public:
  ScriptedEngine(std::shared_ptr<boltrt::GgufBackend> backend, std::vector<int32_t> script)
      : backend_(std::move(backend)) {
    std::vector<std::unique_ptr<boltrt::LanguageModel>> sessions;
    sessions.push_back(std::make_unique<ScriptedModel>(std::move(script), backend_->n_vocab()));
    model_ = std::make_unique<boltrt::batch::InterleavedSessions>(std::move(sessions));
  }
  boltrt::batch::MultiSequenceModel& model() override { return *model_; }
  const boltrt::GenerationVocab& vocab() const override { return backend_->vocab(); }
  boltrt::PreparedPrompt prepare(const boltrt::batch::BatchRequest& r,
                                 bool thinking) const override {
    return boltrt::prepare_prompt(*backend_, r.prompt.value_or(""), r.messages.value_or(json()),
                                  r.tools.value_or(json()), thinking);
  }
  std::unique_ptr<boltrt::ReasoningController> controller(
      const boltrt::ReasoningConfig& config) const override {
    return boltrt::make_reasoning_controller(*backend_, config);
  }
  std::optional<boltrt::ReasoningMarkers> reasoning_markers() const override {
    return backend_->reasoning_markers();
  }
  boltrt::text::ToolCallGrammar tool_call_grammar(
      const json& tools, const boltrt::text::ToolChoice& choice) const override {
    return backend_->tool_call_grammar(tools, choice);
  }
  int64_t split_output(const boltrt::batch::BatchRequest& r, const boltrt::PreparedPrompt& prompt,
                       const boltrt::GenerationResult& result, const boltrt::ReasoningController*,
                       json& out) const override {
    const boltrt::ParsedReply reply =
        backend_->parse_reply(prompt.tokens, prompt.chat, r.tools.value_or(json()), result);
    out["reasoning"] = reply.reasoning;
    out["content"] = reply.content;
    if (r.tools) {
      out["tool_calls"] = json::array();
      for (const auto& c : reply.tool_calls)
        out["tool_calls"].push_back({{"id", c.id},
                                     {"type", "function"},
                                     {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    return reply.reasoning_tokens;
  }
  std::string describe() const override { return "scripted"; }

 private:
  std::shared_ptr<boltrt::GgufBackend> backend_;
  std::unique_ptr<boltrt::batch::MultiSequenceModel> model_;
};

std::shared_ptr<boltrt::GgufBackend> tiny_text() {
  static auto backend =
      boltrt::open_gguf_text(boltrt::test::source_dir() + "/models/tiny/tiny-q8_0.gguf");
  return backend;
}

// A server in this process whose model writes `reply` (text with Gemma 4 markers) and ends.
class ScriptedServer {
 public:
  explicit ScriptedServer(const std::string& reply) {
    auto backend = tiny_text();
    std::vector<int32_t> script = backend->tokenizer().encode(reply, false, true);
    script.push_back(backend->tokenizer().find("<turn|>"));
    engine_ = std::make_unique<ScriptedEngine>(backend, script);
    scheduler_ =
        std::make_unique<boltrt::server::Scheduler>(*engine_, boltrt::server::SchedulerOptions{});
    boltrt::server::OpenAiOptions options;
    options.sampling.temperature = 0;
    api_ = std::make_unique<boltrt::server::OpenAiServer>(*scheduler_, options);
    http_ = std::make_unique<boltrt::server::HttpServer>(
        boltrt::server::HttpLimits{},
        [this](const boltrt::server::HttpRequest& q, boltrt::server::HttpResponder& s) {
          api_->handle(q, s);
        },
        [](int status, std::string_view m) { return boltrt::server::error_body(status, m); });
    port_ = http_->listen("127.0.0.1", 0);
    thread_ = std::thread([this] { http_->run(); });
  }
  ~ScriptedServer() {
    http_->stop();
    scheduler_->stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  std::unique_ptr<ScriptedEngine> engine_;
  std::unique_ptr<boltrt::server::Scheduler> scheduler_;
  std::unique_ptr<boltrt::server::OpenAiServer> api_;
  std::unique_ptr<boltrt::server::HttpServer> http_;
  std::thread thread_;
  int port_ = 0;
};

const json kWeatherTool = {
    {"type", "function"},
    {"function",
     {{"name", "get_weather"},
      {"description", "Weather of a city"},
      {"parameters",
       {{"type", "object"},
        {"properties", {{"city", {{"type", "string"}}}, {"days", {{"type", "integer"}}}}},
        {"required", json::array({"city"})}}}}}};

json tool_request(bool stream) {
  json body = {{"model", "m"},
               {"messages", json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}})},
               {"tools", json::array({kWeatherTool})}};
  if (stream) body["stream"] = true;
  return body;
}

boltrt::test::HttpResponse post(int port, const json& body) {
  return boltrt::test::http_request(port, "POST", "/v1/chat/completions", body.dump());
}

std::vector<json> chunks_of(const std::string& body) {
  std::vector<json> out;
  for (size_t pos = 0; pos < body.size();) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (event == "data: [DONE]" || event.rfind("data: ", 0) != 0) continue;
    out.push_back(json::parse(event.substr(6)));
  }
  return out;
}

const std::string kCall =
    "<|tool_call>call:get_weather{city:<|\"|>Paris, France<|\"|>,days:3}<tool_call|>";

TEST(ServeTools, ToolCallMessage) {
  ScriptedServer server(kCall);
  const auto r = post(server.port(), tool_request(false));
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_FALSE(call["id"].get<std::string>().empty());
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris, France"}, {"days", 3}}));
}

TEST(ServeTools, ToolCallStreamsNameFirstThenArgumentFragments) {
  ScriptedServer server("Let me look.\n" + kCall + kCall);
  const auto r = post(server.port(), tool_request(true));
  ASSERT_EQ(r.status, 200);
  std::vector<std::string> ids(2), arguments(2);
  std::vector<int> fragments(2, 0);
  std::string content, finish;
  for (const json& chunk : chunks_of(r.body)) {
    if (chunk["choices"].empty()) continue;
    const json& c = chunk["choices"][0];
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (!c["delta"].contains("tool_calls")) continue;
    for (const json& t : c["delta"]["tool_calls"]) {
      const size_t i = t["index"];
      ASSERT_LT(i, 2u);
      if (ids[i].empty()) {  // first delta of this call: its identity
        ASSERT_TRUE(t.contains("id"));
        EXPECT_EQ(t["type"], "function");
        EXPECT_EQ(t["function"]["name"], "get_weather");
        ids[i] = t["id"];
      } else {
        EXPECT_FALSE(t.contains("id"));
        EXPECT_FALSE(t["function"].contains("name"));
      }
      arguments[i] += t["function"]["arguments"].get<std::string>();
      ++fragments[i];
    }
  }
  EXPECT_EQ(content, "Let me look.\n");
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_NE(ids[0], ids[1]);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(json::parse(arguments[i]), json({{"city", "Paris, France"}, {"days", 3}}));
    EXPECT_GT(fragments[i], 2) << "arguments streamed in pieces";
  }
}

TEST(ServeTools, ParallelToolCallsFalseKeepsOne) {
  ScriptedServer server(kCall + kCall);
  json request = tool_request(false);
  request["parallel_tool_calls"] = false;
  const auto r = post(server.port(), request);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["tool_calls"].size(), 1u);
}

TEST(ServeTools, ToolChoiceNone) {
  ScriptedServer server("Sunny.");
  json request = tool_request(false);
  request["tool_choice"] = "none";
  const auto r = post(server.port(), request);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["choices"][0]["message"]["content"], "Sunny.");
}

TEST(ServeTools, ForcedToolChoiceLetsALegalCallThroughAfterTheThought) {
  // The model thinks, then writes a call the tool-call grammar allows: the constraint starts
  // after the thought and changes nothing in it.
  ScriptedServer server("<|channel>thought\nThe user wants weather.<channel|>" + kCall);
  for (const json& choice :
       {json("required"), json({{"type", "function"}, {"function", {{"name", "get_weather"}}}})}) {
    json request = tool_request(false);
    request["tool_choice"] = choice;
    request["reasoning"] = "on";
    const auto r = post(server.port(), request);
    ASSERT_EQ(r.status, 200) << r.body;
    const json body = json::parse(r.body);
    const json& c = body["choices"][0];
    EXPECT_EQ(c["finish_reason"], "tool_calls") << choice.dump();
    EXPECT_EQ(c["message"]["reasoning_content"], "The user wants weather.");
    ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
    EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(
        json::parse(c["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
        json({{"city", "Paris, France"}, {"days", 3}}));
  }
}

TEST(ServeTools, ForcedToolChoiceErrorsNameTheField) {
  ScriptedServer server("Sunny.");
  json request = tool_request(false);
  request["tool_choice"] = "required";
  request["response_format"] = {{"type", "json_object"}};
  auto r = post(server.port(), request);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "tool_choice");
  // A parameters schema the grammar engine cannot compile: 400 naming the keyword and the tool.
  request.erase("response_format");
  request["tools"][0]["function"]["parameters"]["properties"]["days"]["multipleOf"] = 2;
  r = post(server.port(), request);
  EXPECT_EQ(r.status, 400) << r.body;
  const json error = json::parse(r.body)["error"];
  EXPECT_EQ(error["param"], "tools");
  const std::string message = error["message"];
  EXPECT_NE(message.find("unsupported keyword 'multipleOf'"), std::string::npos) << message;
  EXPECT_NE(message.find("get_weather"), std::string::npos) << message;
}

TEST(ServeTools, StreamedTextEqualsTheReplyWhereTheDetokenizerDropsSpaces) {
  // The detokenizer's clean-up drops a space before , . ? ! and around an apostrophe, depending
  // on the bytes after it, so a partial reply may end in a space that the whole reply does not
  // have (or lack one it has). The stream must not send such a tail early: whatever it sent
  // could not be taken back, and the rest of the reply would be lost.
  const std::string reply =
      "Yes , no . Maybe ? I ' m sure it 's so , and they 're here ' now ' . Well , we 've "
      "seen ' em , have n't we ? Indeed !";
  ScriptedServer server("<|channel>thought\nHmm , they 're ' here ' .<channel|>" + reply);
  json request = {{"model", "m"},
                  {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                  {"reasoning", "on"}};
  const auto r = post(server.port(), request);
  ASSERT_EQ(r.status, 200) << r.body;
  const json message = json::parse(r.body)["choices"][0]["message"];
  const std::string content = message["content"];
  EXPECT_NE(content, reply) << "the clean-up changed the text";
  request["stream"] = true;
  for (int i = 0; i < 3; ++i) {
    std::string streamed_reasoning, streamed_content;
    for (const json& chunk : chunks_of(post(server.port(), request).body)) {
      if (chunk["choices"].empty()) continue;
      const json& d = chunk["choices"][0]["delta"];
      if (d.contains("reasoning_content")) streamed_reasoning += d["reasoning_content"];
      if (d.contains("content")) streamed_content += d["content"];
    }
    EXPECT_EQ(streamed_content, content);
    EXPECT_EQ(streamed_reasoning, message["reasoning_content"]);
  }
}

TEST(ServeTools, ToolResultTurnIsRendered) {
  ScriptedServer server("It is sunny in Paris.");
  json request = tool_request(false);
  request["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        json::array(
            {{{"id", "call_1"},
              {"type", "function"},
              {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}})}});
  request["messages"].push_back(
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "{\"sky\":\"sunny\"}"}});
  const auto r = post(server.port(), request);
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  EXPECT_EQ(body["choices"][0]["message"]["content"], "It is sunny in Paris.");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  request["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{not json";
  const auto bad = post(server.port(), request);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json::parse(bad.body)["error"]["param"],
            "messages[1].tool_calls[0].function.arguments");
}

TEST(ServeTools, ReasoningContentInMessageAndDeltas) {
  ScriptedServer server("<|channel>thought\nThe user wants a greeting.<channel|>Hello!");
  json request = {{"model", "m"},
                  {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                  {"reasoning_effort", "low"}};
  const auto r = post(server.port(), request);
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "The user wants a greeting.");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hello!");
  EXPECT_GT(body["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int>(), 0);

  request["stream"] = true;
  const auto s = post(server.port(), request);
  std::string reasoning, content;
  for (const json& chunk : chunks_of(s.body)) {
    if (chunk["choices"].empty()) continue;
    const json& d = chunk["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "The user wants a greeting.");
  EXPECT_EQ(content, "Hello!");
}

}  // namespace

namespace {

TEST(ServeTools, LogprobsAreTheModelsLogSoftmax) {
  ScriptedServer server("<|channel>thought\nHmm.<channel|>Yes, indeed.");
  const json request = {{"model", "m"},
                        {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                        {"reasoning", "on"},
                        {"logprobs", true},
                        {"top_logprobs", 2}};
  const auto r = post(server.port(), request);
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = json::parse(r.body)["choices"][0];
  ASSERT_EQ(choice["message"]["content"], "Yes, indeed.");
  // The scripted model puts 10 on its token and 0 on the other V-1: log-softmax exactly.
  const double v = static_cast<double>(tiny_text()->n_vocab());
  const double z = std::log(std::exp(10.0) + (v - 1));
  const json& content = choice["logprobs"]["content"];
  std::string text;
  for (const json& t : content) {
    text += t["token"].get<std::string>();
    EXPECT_NEAR(t["logprob"].get<double>(), 10.0 - z, 1e-4);
    std::string bytes;
    for (const json& b : t["bytes"]) bytes += static_cast<char>(b.get<int>());
    EXPECT_EQ(bytes, t["token"]);
    ASSERT_EQ(t["top_logprobs"].size(), 2u);
    EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]);
    EXPECT_NEAR(t["top_logprobs"][1]["logprob"].get<double>(), 0.0 - z, 1e-4);
  }
  EXPECT_EQ(text, "Yes, indeed.") << "content tokens only, the thought left out";

  json streamed = request;
  streamed["stream"] = true;
  const auto s = post(server.port(), streamed);
  std::string stream_text;
  for (const json& chunk : chunks_of(s.body)) {
    if (chunk["choices"].empty() || chunk["choices"][0]["logprobs"].is_null()) continue;
    for (const json& t : chunk["choices"][0]["logprobs"]["content"])
      stream_text += t["token"].get<std::string>();
  }
  EXPECT_EQ(stream_text, "Yes, indeed.");

  // Under a response_format the chain is recorder -> grammar -> reasoning controller: the
  // thought is still told from the content, and the logprobs are still the model's own.
  ScriptedServer constrained("<|channel>thought\nHmm.<channel|>{\"a\": [1, true]}");
  json with_format = request;
  with_format["response_format"] = {{"type", "json_object"}};
  const auto f = post(constrained.port(), with_format);
  ASSERT_EQ(f.status, 200) << f.body;
  const json fc = json::parse(f.body)["choices"][0];
  EXPECT_EQ(fc["message"]["content"], "{\"a\": [1, true]}");
  EXPECT_EQ(fc["message"]["reasoning_content"], "Hmm.");
  std::string format_text;
  for (const json& t : fc["logprobs"]["content"]) {
    format_text += t["token"].get<std::string>();
    EXPECT_NEAR(t["logprob"].get<double>(), 10.0 - z, 1e-4);
  }
  EXPECT_EQ(format_text, "{\"a\": [1, true]}");

  json bad = request;
  bad.erase("logprobs");
  const auto needs = post(server.port(), bad);
  EXPECT_EQ(needs.status, 400);
  EXPECT_EQ(json::parse(needs.body)["error"]["param"], "top_logprobs");
}

}  // namespace

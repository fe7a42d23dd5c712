// `boltrt batch` machinery on a scripted fake model: request parsing and validation, the
// results file (partial-line recovery, no duplicates, write failures), the sequence batcher,
// whole runs through run_batch (errors file, resume, --parallel, shards) and through the CLI
// (a full disk via RLIMIT_FSIZE, kill -9 at random moments followed by --resume).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/fake_backend.h"
#include "batch/backend_engine.h"
#include "batch/progress.h"
#include "batch/request.h"
#include "batch/result_file.h"
#include "batch/runner.h"
#include "batch/sequence_batcher.h"
#include "support/paths.h"
#include "util/error.h"

extern char** environ;

namespace boltrt::batch {
namespace {

using nlohmann::json;

std::unique_ptr<BatchEngine> fake_engine(int parallel, int64_t n_ctx, int delay_us) {
  return make_backend_engine(make_fake_backend(n_ctx, delay_us), parallel);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<json> read_lines(const std::string& path) {
  std::vector<json> lines;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) lines.push_back(json::parse(line));
  return lines;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string error_of(const std::string& line) {
  try {
    parse_request(line, 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BatchRequest, ParsesOpenAIStyleFields) {
  const BatchRequest r = parse_request(
      R"({"id":"q1","prompt":"Hi","max_tokens":5,"temperature":0.5,"top_p":0.9,"stop":["\n","END"],)"
      R"("seed":7,"reasoning":"off","reasoning_budget":12,"reasoning_block_budget":5,"top_k":3,"min_p":0.1,"frequency_penalty":)"
      R"(0.5,"presence_penalty":-1,"unknown_field":[1]})",
      3);
  EXPECT_EQ(r.line, 3);
  EXPECT_EQ(r.key, "\"q1\"");
  EXPECT_EQ(*r.prompt, "Hi");
  EXPECT_EQ(*r.max_tokens, 5);
  EXPECT_FLOAT_EQ(*r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*r.top_p, 0.9f);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(*r.seed, 7u);
  EXPECT_EQ(r.reasoning, ReasoningMode::kOff);
  EXPECT_EQ(*r.reasoning_budget, 12);
  EXPECT_EQ(*r.reasoning_block_budget, 5);
  EXPECT_EQ(*r.top_k, 3);
  EXPECT_FLOAT_EQ(*r.min_p, 0.1f);
  EXPECT_FLOAT_EQ(*r.frequency_penalty, 0.5f);
  EXPECT_FLOAT_EQ(*r.presence_penalty, -1.0f);
  EXPECT_TRUE(r.logit_bias.empty());
  const BatchRequest biased =
      parse_request(R"({"id":"b","prompt":"x","logit_bias":{"90":100,"7":-2.5}})", 1);
  ASSERT_EQ(biased.logit_bias.size(), 2u);
  EXPECT_EQ(biased.logit_bias[0].token, 90);
  EXPECT_FLOAT_EQ(biased.logit_bias[0].bias, 100.0f);
  EXPECT_EQ(biased.logit_bias[1].token, 7);
  EXPECT_FLOAT_EQ(biased.logit_bias[1].bias, -2.5f);

  const BatchRequest c = parse_request(
      R"({"id":42,"messages":[{"role":"user","content":"x"}],"stop":"S","reasoning":true,)"
      R"("max_completion_tokens":9,"tools":[{"type":"function"}]})",
      1);
  EXPECT_EQ(c.key, "42");
  EXPECT_FALSE(c.prompt);
  EXPECT_EQ(c.messages->size(), 1u);
  EXPECT_EQ(c.stop, std::vector<std::string>{"S"});
  EXPECT_EQ(c.reasoning, ReasoningMode::kOn);
  EXPECT_EQ(*c.max_tokens, 9);
  EXPECT_EQ(c.tools->size(), 1u);
}

TEST(BatchRequest, RejectsBadLinesWithOneLineReasons) {
  EXPECT_EQ(error_of(R"({"prompt":"x"})"), "missing 'id'");
  EXPECT_EQ(error_of(R"({"id":"a"})"), "missing 'prompt' or 'messages'");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","messages":[]})"),
            "give either 'prompt' or 'messages', not both");
  EXPECT_EQ(error_of(R"({"id":1.5,"prompt":"x"})"),
            "'id' must be a string or an integer, not number");
  EXPECT_EQ(error_of(R"({"id":"","prompt":"x"})"), "'id' is empty");
  EXPECT_EQ(error_of(R"([1,2])"), "a request must be a JSON object, not array");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","max_tokens":-1})"),
            "field 'max_tokens' must be >= 0");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","max_tokens":"5"})"),
            "field 'max_tokens' must be an integer, not string");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","temperature":-0.1})"),
            "field 'temperature' must be >= 0");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","top_p":0})"), "field 'top_p' must be in (0, 1]");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","stop":[1]})"),
            "field 'stop' must hold strings only");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","seed":4294967295})"),
            "field 'seed' must be in [0, 4294967294]");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","reasoning":"maybe"})"),
            "field 'reasoning' must be true, false, \"on\", \"off\" or \"auto\", not \"maybe\"");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","reasoning_budget":-2})"),
            "field 'reasoning_budget' must be >= -1");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","reasoning_block_budget":-3})"),
            "field 'reasoning_block_budget' must be >= -1");
  EXPECT_EQ(error_of(R"({"id":"a","messages":[{"content":"x"}]})"),
            "messages[0] has no string 'role'");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","tools":[]})"), "field 'tools' needs 'messages'");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","logit_bias":{"a1":1}})"),
            "'logit_bias' key 'a1' is not a token id (a decimal integer)");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","logit_bias":{"5":-100.5}})"),
            "'logit_bias.5' must be between -100 and 100");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","logit_bias":{"5":"up"}})"),
            "'logit_bias.5' must be a number, not string");
  EXPECT_EQ(error_of(R"({"id":"a","prompt":"x","logit_bias":[[5,1]]})"),
            "'logit_bias' must be an object mapping token ids to biases, not array");
  EXPECT_EQ(error_of("{\"id\":\"a\",\"prompt\":\"\xC3\"}"), "invalid UTF-8 at byte 20");
  EXPECT_EQ(error_of(R"({"id":"a",)").rfind("bad JSON: ", 0), 0u);
}

TEST(BatchRequest, Utf8Validation) {
  size_t at = 99;
  EXPECT_TRUE(is_valid_utf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));  // a é € 😀
  EXPECT_FALSE(is_valid_utf8("ab\xC0\xAF", &at));                       // overlong '/'
  EXPECT_EQ(at, 2u);
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80", &at));  // surrogate U+D800
  EXPECT_EQ(at, 0u);
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80", &at));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("x\xE2\x82", &at));         // truncated
  EXPECT_EQ(at, 1u);
  EXPECT_FALSE(is_valid_utf8("\x80", &at));  // lone continuation byte
}

TEST(ResultFile, ResumeCutsPartialLineAndRefusesDuplicates) {
  const std::string dir = test::scratch_dir("batch_result_file");
  const std::string path = dir + "/out.jsonl";
  write_file(path, "{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":7}\n{\"id\":\"b\",\"te");
  ResultFile file;
  EXPECT_EQ(file.open_for_resume(path), 13);
  EXPECT_EQ(file.ids(), (std::unordered_set<std::string>{"\"a\"", "7"}));
  EXPECT_FALSE(file.write("\"a\"", "{\"id\":\"a\"}"));
  EXPECT_TRUE(file.write("\"b\"", "{\"id\":\"b\"}"));
  EXPECT_EQ(read_file(path), "{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":7}\n{\"id\":\"b\"}\n");

  write_file(path, "{\"id\":\"a\"}\nnot a result\n");
  try {
    ResultFile other;
    other.open_for_resume(path);
    FAIL() << "a file of non-results was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(
        std::string(e.what()),
        path + ":2: not a result line (no JSON object with an 'id'); is this a results file?");
  }
}

TEST(ResultFile, FailedWriteLeavesWholeLines) {
  const std::string dir = test::scratch_dir("batch_result_fail");
  const std::string path = dir + "/out.jsonl";
  ResultFile file;
  file.open_new(path, true);
  file.set_fail_after_bytes(25);
  EXPECT_TRUE(file.write("1", "{\"id\":1,\"text\":\"abc\"}"));  // 22 bytes + newline
  EXPECT_THROW(file.write("2", "{\"id\":2,\"text\":\"abc\"}"), WriteError);
  EXPECT_EQ(read_file(path), "{\"id\":1,\"text\":\"abc\"}\n");
  EXPECT_FALSE(file.contains("2"));
}

TEST(Progress, Format) {
  EXPECT_EQ(format_progress(5, 10, 2.0, 300, 10),
            "[#####     ] 5/10  2.50 req/s  150 tok/s  ETA 0:02");
  EXPECT_EQ(format_progress(0, 10, 0.0, 0, 4), "[    ] 0/10  0.00 req/s  0 tok/s  ETA --:--");
  EXPECT_EQ(format_progress(10, 10, 4000.0, 0, 4), "[####] 10/10  0.00 req/s  0 tok/s  ETA done");
  EXPECT_EQ(format_progress(1, 10000, 1.0, 0, 2), "[  ] 1/10000  1.00 req/s  0 tok/s  ETA 2:46:39");
}

// N threads generating through one SequenceBatcher get the same tokens as one session alone,
// and their decodes are merged into shared steps.
TEST(SequenceBatcher, ThreadsShareStepsAndGetTheirOwnTokens) {
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<LanguageModel>> sessions;
  for (int i = 0; i < kThreads; ++i)
    sessions.push_back(std::make_unique<FakeLanguageModel>(256, 0));
  InterleavedSessions model(std::move(sessions));
  SequenceBatcher batcher(model);
  std::vector<std::string> texts(kThreads);
  std::vector<std::thread> threads;
  std::latch all_joined(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto slot = batcher.slot_model(i);
      GenerationVocab vocab;
      vocab.piece = [](int32_t id) {
        return id < 256 ? std::string(1, static_cast<char>(id)) : std::string();
      };
      vocab.end_of_generation = {kFakeEnd};
      SamplerConfig greedy;
      greedy.temperature = 0;
      greedy.seed = 1;
      Generator generator(*slot, vocab, greedy);
      std::string prompt_text = "sequence number " + std::to_string(i) + std::string(i * 5, 'x');
      std::vector<int32_t> prompt(prompt_text.begin(), prompt_text.end());
      prompt.push_back(kFakeMarker);
      GenerationOptions options;
      options.batch_size = 4;  // several prefill steps per sequence
      SequenceBatcher::Participation participation(batcher);
      all_joined.arrive_and_wait();  // so that every step has all sequences still running
      texts[i] = generator.generate(prompt, options).text;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i)
    EXPECT_EQ(texts[i], upper("sequence number " + std::to_string(i) + std::string(i * 5, 'x')));
  // Sequence i decodes ceil((18 + 5i) / 4) prompt chunks and then 17 + 5i tokens (not the end
  // token): 22, 28, 34 and 41 items. Each step holds one item of every sequence still running,
  // so the steps are those of the longest sequence.
  EXPECT_EQ(batcher.items(), 22 + 28 + 34 + 41);
  EXPECT_EQ(batcher.steps(), 41);
}

struct RunFixture {
  std::string dir, input, output;
  explicit RunFixture(const std::string& name) {
    dir = test::scratch_dir(name);
    input = dir + "/in.jsonl";
    output = dir + "/out.jsonl";
  }
  BatchOptions options(int parallel = 1) const {
    BatchOptions o;
    o.input = input;
    o.output = output;
    o.parallel = parallel;
    o.sampling.temperature = 0;
    return o;
  }
};

std::string numbered_input(int n) {
  std::string text;
  for (int i = 0; i < n; ++i)
    text += fmt::format(R"({{"id":"r{}","prompt":"request {} says {}"}})", i, i,
                        std::string(static_cast<size_t>(i % 7), 'z')) +
            "\n";
  return text;
}

std::map<std::string, std::string> texts_by_id(const std::string& path) {
  std::map<std::string, std::string> texts;
  for (const json& line : read_lines(path)) {
    const std::string id = line["id"].get<std::string>();
    EXPECT_FALSE(texts.contains(id)) << "duplicate result for " << id;
    texts[id] = line["text"].get<std::string>();
  }
  return texts;
}

void expect_complete(const std::string& path, int n) {
  const auto texts = texts_by_id(path);
  ASSERT_EQ(texts.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const std::string id = fmt::format("r{}", i);
    ASSERT_TRUE(texts.contains(id)) << id;
    EXPECT_EQ(texts.at(id), upper(fmt::format("request {} says {}", i,
                                              std::string(static_cast<size_t>(i % 7), 'z'))));
  }
}

TEST(RunBatch, WritesResultsAndErrorsAndResumes) {
  RunFixture f("batch_run_errors");
  write_file(f.input,
             "{\"id\":\"a\",\"prompt\":\"hello\",\"max_tokens\":3}\n"
             "\n"
             "{\"id\":\"b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stop\":\"I\"}\n"
             "{oops\n"
             "{\"id\":\"a\",\"prompt\":\"again\"}\n"
             "{\"id\":\"long\",\"prompt\":\"" +
                 std::string(300, 'q') + "\"}\n");
  auto engine = fake_engine(1, 128, 0);
  BatchSummary s = run_batch(*engine, f.options());
  EXPECT_EQ(s.requests, 3);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.malformed, 2);
  const auto results = read_lines(f.output);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["id"], "a");
  EXPECT_EQ(results[0]["text"], "HEL");
  EXPECT_EQ(results[0]["finish_reason"], "length");
  EXPECT_EQ(results[0]["tokens"]["completion"], 3);
  EXPECT_EQ(results[0]["tokens"]["prompt"], 6);
  EXPECT_EQ(results[1]["id"], "b");
  EXPECT_EQ(results[1]["text"], "USER: H");
  EXPECT_EQ(results[1]["content"], "USER: H");
  EXPECT_EQ(results[1]["finish_reason"], "stop");
  EXPECT_TRUE(results[1]["timings"].contains("ttft_ms"));
  const auto errors = read_lines(f.output + ".errors.jsonl");
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0]["line"], 4);
  EXPECT_FALSE(errors[0].contains("id"));
  EXPECT_EQ(errors[1]["line"], 5);
  EXPECT_EQ(errors[1]["id"], "a");
  EXPECT_EQ(errors[1]["error"], "duplicate id \"a\" (first on line 1)");
  EXPECT_EQ(errors[2]["line"], 6);
  EXPECT_EQ(errors[2]["id"], "long");
  EXPECT_EQ(errors[2]["error"],
            "the prompt is 301 tokens but the context holds 128 (one more is needed to "
            "generate); use a larger context or truncation");

  // Without --resume an existing output is not clobbered.
  EXPECT_THROW(run_batch(*engine, f.options()), Error);
  // --resume: nothing left but the request that cannot run; errors file rewritten, not doubled.
  BatchOptions resume = f.options();
  resume.resume = true;
  s = run_batch(*engine, resume);
  EXPECT_EQ(s.already_done, 2);
  EXPECT_EQ(s.completed, 0);
  EXPECT_EQ(read_lines(f.output).size(), 2u);
  EXPECT_EQ(read_lines(f.output + ".errors.jsonl").size(), 3u);
}

// logit_bias on a line: +20 on 'Z' outweighs the fake model's 10 for the expected letter, so
// every token is 'Z'; on the next line -20 on 'Z' leaves the letters as they were; an id
// outside the vocabulary fails that line only.
TEST(RunBatch, LogitBiasForcesAndBansTokensPerLine) {
  RunFixture f("batch_logit_bias");
  write_file(f.input,
             "{\"id\":\"z\",\"prompt\":\"hello\",\"max_tokens\":3,\"logit_bias\":{\"90\":20}}\n"
             "{\"id\":\"n\",\"prompt\":\"hello\",\"max_tokens\":3,\"logit_bias\":{\"90\":-20}}\n"
             "{\"id\":\"far\",\"prompt\":\"hello\",\"logit_bias\":{\"261\":1}}\n");
  auto engine = fake_engine(1, 128, 0);
  const BatchSummary s = run_batch(*engine, f.options());
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  const auto results = read_lines(f.output);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["text"], "ZZZ");
  EXPECT_EQ(results[1]["text"], "HEL");
  const auto errors = read_lines(f.output + ".errors.jsonl");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]["id"], "far");
  EXPECT_EQ(errors[0]["error"],
            "'logit_bias' names token 261; the vocabulary has 261 tokens (0-260)");
}

TEST(RunBatch, ReasoningIsSplitFromContent) {
  RunFixture f("batch_run_reasoning");
  write_file(f.input, R"({"id":"t","messages":[{"role":"user","content":"hi"}],"reasoning":"on"})"
                      "\n"
                      R"({"id":"n","messages":[{"role":"user","content":"hi"}],"reasoning":false})"
                      "\n"
                      R"({"id":"x","messages":[{"role":"user","content":"hi"}],"tools":[{}]})"
                      "\n");
  auto engine = fake_engine(1, 128, 0);
  run_batch(*engine, f.options());
  const auto results = read_lines(f.output);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["reasoning"], "user: hi\n");
  EXPECT_EQ(results[0]["content"], "USER: HI\n");
  EXPECT_EQ(results[0]["tokens"]["reasoning"], 9);  // the thought's bytes; markers not counted
  EXPECT_EQ(results[1]["reasoning"], "");
  EXPECT_EQ(results[1]["content"], "USER: HI\n");
  EXPECT_EQ(results[1]["tokens"]["reasoning"], 0);
  const auto errors = read_lines(f.output + ".errors.jsonl");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]["error"], "'tools' are not supported by this model's chat format");
}

// The reasoning controller of issue 9 holds a request's budget: after the budget (plus at
// most the word grace) it forces the closing message and the end marker.
TEST(RunBatch, ReasoningBudgetHolds) {
  RunFixture f("batch_run_budget");
  write_file(f.input, R"({"id":"b","messages":[{"role":"user","content":"hi there everyone"}],)"
                      R"("reasoning":"on","reasoning_budget":3})"
                      "\n"
                      R"({"id":"d","messages":[{"role":"user","content":"hi"}],"reasoning":"on"})"
                      "\n"
                      R"({"id":"e","messages":[{"role":"user","content":"hi there everyone"}],)"
                      R"("reasoning":"on","reasoning_block_budget":3})"
                      "\n");
  auto engine = fake_engine(1, 256, 0);
  BatchOptions o = f.options();
  o.reasoning.budget_message = " (enough)";
  run_batch(*engine, o);
  const auto results = read_lines(f.output);
  ASSERT_EQ(results.size(), 3u);
  const std::string reasoning = results[0]["reasoning"];
  EXPECT_EQ(reasoning.rfind("use", 0), 0u) << reasoning;
  ASSERT_GE(reasoning.size(), 9u);
  EXPECT_EQ(reasoning.substr(reasoning.size() - 9), " (enough)") << reasoning;
  EXPECT_LE(reasoning.size(), 3u + 4u + 9u) << reasoning;  // budget + word grace + message
  EXPECT_EQ(results[0]["tokens"]["reasoning"], static_cast<int64_t>(reasoning.size()));
  // Without a budget the whole thought is kept.
  EXPECT_EQ(results[1]["reasoning"], "user: hi\n");
  // The fake model thinks in one block, so a per-block budget of 3 closes it as the total did.
  EXPECT_EQ(results[2]["reasoning"], reasoning);
  EXPECT_EQ(results[2]["tokens"]["reasoning"], results[0]["tokens"]["reasoning"]);
}

TEST(RunBatch, ParallelGivesTheSameResults) {
  RunFixture f("batch_run_parallel");
  write_file(f.input, numbered_input(23));
  for (int parallel : {1, 4, 8}) {
    auto engine = fake_engine(parallel, 256, 0);
    BatchOptions o = f.options(parallel);
    o.overwrite = true;
    const BatchSummary s = run_batch(*engine, o);
    EXPECT_EQ(s.completed, 23) << "parallel " << parallel;
    expect_complete(f.output, 23);
  }
}

TEST(RunBatch, SeedsMakeSampledRunsRepeatable) {
  RunFixture f("batch_run_seed");
  write_file(f.input, R"({"id":1,"prompt":"abc","temperature":5,"seed":11,"max_tokens":8})"
                      "\n");
  std::string first;
  for (int run = 0; run < 2; ++run) {
    auto engine = fake_engine(1, 64, 0);
    BatchOptions o = f.options();
    o.overwrite = true;
    o.sampling.top_k = 0;
    o.sampling.top_p = 1;
    o.sampling.min_p = 0;
    run_batch(*engine, o);
    const auto lines = read_lines(f.output);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0]["seed"], 11);
    if (run == 0)
      first = lines[0]["text"];
    else
      EXPECT_EQ(lines[0]["text"], first);
  }
}

TEST(RunBatch, FullDiskStopsCleanlyAndResumeFinishes) {
  RunFixture f("batch_run_full_disk");
  write_file(f.input, numbered_input(12));
  auto engine = fake_engine(3, 256, 0);
  BatchOptions o = f.options(3);
  o.fail_after_bytes = 1000;  // room for a few result lines
  try {
    run_batch(*engine, o);
    FAIL() << "the full disk went unnoticed";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("out.jsonl: No space left on device; stopped with "), std::string::npos)
        << message;
    EXPECT_NE(message.find("run again with --resume to finish"), std::string::npos) << message;
  }
  const auto partial = read_lines(f.output);  // whole lines only
  EXPECT_GE(partial.size(), 1u);
  EXPECT_LT(partial.size(), 12u);
  BatchOptions resume = f.options(3);
  resume.resume = true;
  const BatchSummary s = run_batch(*engine, resume);
  EXPECT_EQ(s.already_done, static_cast<int64_t>(partial.size()));
  EXPECT_EQ(s.completed, 12 - s.already_done);
  expect_complete(f.output, 12);
}

TEST(RunBatch, ShardsPartitionTheInput) {
  RunFixture f("batch_run_shards");
  write_file(f.input, numbered_input(17) + "{bad\n");
  std::string merged;
  int64_t malformed = 0;
  for (int i = 0; i < 4; ++i) {
    auto engine = fake_engine(2, 256, 0);
    BatchOptions o = f.options(2);
    parse_shard(fmt::format("{}/4", i), o);
    o.output = f.dir + fmt::format("/out.{}.jsonl", i);
    const BatchSummary s = run_batch(*engine, o);
    EXPECT_EQ(s.requests, (17 - i + 3) / 4) << "shard " << i;
    malformed += s.malformed;
    merged += read_file(o.output);
  }
  EXPECT_EQ(malformed, 1);  // line 18 belongs to shard 1 only
  write_file(f.output, merged);
  expect_complete(f.output, 17);
  BatchOptions o;
  EXPECT_THROW(parse_shard("4/4", o), Error);
  EXPECT_THROW(parse_shard("1", o), Error);
  EXPECT_THROW(parse_shard("a/2", o), Error);
}

// ---- through the CLI ----------------------------------------------------------------------

pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

int wait_status(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(BatchCli, KillNineAtRandomMomentsThenResumeGivesEachIdOnce) {
  RunFixture f("batch_cli_kill");
  constexpr int kRequests = 40;
  write_file(f.input, numbered_input(kRequests));
  const std::vector<std::string> command = {test::cli_path(),
                                            "batch",
                                            "--fake-model",
                                            "--fake-delay-us",
                                            "3000",
                                            "--input",
                                            f.input,
                                            "--output",
                                            f.output,
                                            "--parallel",
                                            "3",
                                            "--temp",
                                            "0",
                                            "--resume",
                                            "--progress",
                                            "off"};
  std::mt19937 rng(1234);
  int killed_mid_run = 0;
  for (int iteration = 0; iteration < 8; ++iteration) {
    const pid_t pid = spawn(command, f.dir + "/log.txt");
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 120)(rng)));
    const bool was_running = kill(pid, SIGKILL) == 0;
    const int status = wait_status(pid);
    if (was_running && status == 128 + SIGKILL) ++killed_mid_run;
    // Whatever the moment, the file holds whole results plus at most one partial line.
    const std::string content = read_file(f.output);
    std::istringstream lines(content);
    std::string line;
    std::set<std::string> ids;
    while (std::getline(lines, line)) {
      if (lines.eof() && content.back() != '\n') break;  // the partial last line
      const json result = json::parse(line);
      EXPECT_TRUE(ids.insert(result["id"].get<std::string>()).second) << "duplicate " << line;
    }
  }
  EXPECT_GT(killed_mid_run, 0);
  std::string log;
  ASSERT_EQ(test::run_command(
                [&] {
                  std::string c;
                  for (const auto& a : command) c += "'" + a + "' ";
                  return c;
                }(),
                &log),
            0)
      << log;
  expect_complete(f.output, kRequests);
}

TEST(BatchCli, InterruptStopsWith130ThenResumes) {
  RunFixture f("batch_cli_interrupt");
  write_file(f.input, numbered_input(30));
  const std::vector<std::string> command = {
      test::cli_path(), "batch",    "--fake-model", "--fake-delay-us", "3000", "--input",
      f.input,          "--output", f.output,       "--temp",          "0",    "--resume"};
  const pid_t pid = spawn(command, f.dir + "/log.txt");
  ASSERT_GT(pid, 0);
  // Interrupt once results are being written, so the handler is in place: a fixed 300 ms sleep
  // raced the start-up on a loaded CI machine (the default action then ends the process with the
  // same status 130, but without the message).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto a_result_written = [&] { return read_file(f.output).find('\n') != std::string::npos; };
  while (!a_result_written() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(a_result_written()) << "no result within 20 s";
  kill(pid, SIGINT);
  EXPECT_EQ(wait_status(pid), 130) << read_file(f.dir + "/log.txt");
  EXPECT_NE(read_file(f.dir + "/log.txt").find("interrupted; run again with --resume"),
            std::string::npos);
  EXPECT_LT(read_lines(f.output).size(), 30u);
  EXPECT_EQ(wait_status(spawn(command, f.dir + "/log.txt")), 0);
  expect_complete(f.output, 30);
}

TEST(BatchCli, FileSizeLimitStopsWithOneMessageThenResumes) {
  RunFixture f("batch_cli_fsize");
  write_file(f.input, numbered_input(20));
  const std::string base = "'" + test::cli_path() + "' batch --fake-model --input '" + f.input +
                           "' --output '" + f.output + "' --parallel 2 --temp 0 --progress off";
  // RLIMIT_FSIZE of 2 KiB with SIGXFSZ ignored: writes past it fail with EFBIG.
  std::string log;
  const int rc =
      test::run_command("bash -c \"trap '' XFSZ; ulimit -f 2; exec " + base + "\"", &log);
  EXPECT_EQ(rc, 1) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_EQ(log.rfind("boltrt: error: " + f.output + ": File too large; stopped with ", 0), 0u)
      << log;
  const auto partial = read_lines(f.output);
  EXPECT_GE(partial.size(), 1u);
  EXPECT_LT(partial.size(), 20u);
  log.clear();
  ASSERT_EQ(test::run_command(base + " --resume", &log), 0) << log;
  expect_complete(f.output, 20);
}

// A Slurm array of 4 (ids 1..4 here, so SLURM_ARRAY_TASK_MIN matters) and a Kubernetes
// Indexed Job of 4 each split the input; the merged outputs hold every id once.
TEST(BatchCli, SlurmAndKubernetesShards) {
  RunFixture f("batch_cli_shards");
  write_file(f.input, numbered_input(10));
  for (const char* scheduler : {"slurm", "k8s"}) {
    std::string merged;
    for (int i = 0; i < 4; ++i) {
      const std::string out = fmt::format("{}/{}.{}.jsonl", f.dir, scheduler, i);
      const std::string env =
          std::string(scheduler) == "slurm"
              ? fmt::format(
                    "SLURM_ARRAY_TASK_ID={} SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=4", i + 1)
              : fmt::format("JOB_COMPLETION_INDEX={}", i);
      std::string log;
      ASSERT_EQ(test::run_command(
                    fmt::format("env {} '{}' batch --fake-model --temp 0 --input '{}' --output "
                                "'{}' --resume {}",
                                env, test::cli_path(), f.input, out,
                                std::string(scheduler) == "k8s" ? "--shard-count 4" : ""),
                    &log),
                0)
          << log;
      EXPECT_EQ(read_lines(out).size(), i < 2 ? 3u : 2u) << scheduler << " shard " << i;
      merged += read_file(out);
    }
    write_file(f.output, merged);
    expect_complete(f.output, 10);
  }
}

TEST(BatchCli, ArgumentErrorsAreOneLine) {
  RunFixture f("batch_cli_args");
  write_file(f.input, numbered_input(1));
  auto run = [&](const std::string& args, std::string& log) {
    log.clear();
    return test::run_command(fmt::format("'{}' batch --fake-model {}", test::cli_path(), args),
                             &log);
  };
  std::string log;
  EXPECT_EQ(run("--input '" + f.input + "' --output '" + f.input + "'", log), 1);
  EXPECT_EQ(log, "boltrt: error: the output " + f.input + " is the input file\n");
  EXPECT_EQ(run("--input '" + f.dir + "/missing.jsonl' --output '" + f.output + "'", log), 1);
  EXPECT_EQ(log, "boltrt: error: " + f.dir + "/missing.jsonl: cannot open the input\n");
  EXPECT_EQ(run("--input '" + f.input + "' --output '" + f.output + "' --shard 3/2", log), 1);
  EXPECT_EQ(log, "boltrt: error: shard '3/2' needs 0 <= I < N\n");
}

}  // namespace
}  // namespace boltrt::batch

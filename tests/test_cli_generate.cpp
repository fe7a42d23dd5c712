// `boltrt generate` end to end on a synthesized tiny Gemma 4 (random weights, the real Gemma 4
// vocabulary when tools/fetch-test-data.sh has fetched it): greedy output equal to
// llama-completion's, JSON fields, stop strings, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "boltrt/boltrt.h"
#include "support/paths.h"

namespace boltrt {
namespace {

using test::shell_quote;

namespace fs = std::filesystem;

using Outcome = test::CommandOutput;

// Runs a shell command with stdout and stderr captured separately.
// llama-completion's stdout: the generated text, then " [end of text]\n" when it stopped at an
// end-of-generation token, then "\n\n".
std::string completion_text(std::string out) {
  for (const std::string suffix : {"\n\n", " [end of text]\n"}) {
    if (out.size() >= suffix.size() &&
        out.compare(out.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.resize(out.size() - suffix.size());
    }
  }
  return out;
}

Outcome run(const std::string& command) {
  return test::run_command_split(command);
}

std::string boltrt() {
  return shell_quote(test::cli_path());
}

class CliGenerate : public ::testing::Test {
 protected:
  // The tiny preset in q8_0 with the real Gemma 4 vocabulary when tools/fetch-test-data.sh has
  // fetched it (190 MB; readable text and the real chat template), else the synth's own.
  static void SetUpTestSuite() {
    const std::string dir = test::scratch_dir("cli_generate");
    model_ = dir + "/tiny-q8_0.gguf";
    const std::string vocab = test::source_dir() + "/tests/data/vocab/ggml-vocab-gemma-4.gguf";
    std::string command = boltrt() + " synth --preset tiny --type q8_0 -o " + shell_quote(model_);
    if (fs::exists(vocab)) command += " --vocab-from " + shell_quote(vocab);
    const Outcome r = run(command);
    synth_error_ = r.status == 0 ? "" : command + " failed: " + r.out + r.err;
  }
  void SetUp() override { ASSERT_EQ(synth_error_, "") << "cannot synthesize the test model"; }

  static std::string generate(const std::string& args) {
    return boltrt() + " generate -m " + shell_quote(model_) + " -t 2 " + args;
  }

  static std::string model_, synth_error_;
};
std::string CliGenerate::model_, CliGenerate::synth_error_;

const char* kPrompt = "The quick brown fox";

// Both sides keep the KV cache in f32 (llama-completion: no flash attention): with llama.cpp's
// default f16 cache and flash attention its logits move by ~1e-3, enough to change what a
// random model's flat distributions sample.
std::string llama_completion(const std::string& model, const std::string& args) {
  return shell_quote(test::llama_ref_bin() + "/llama-completion") + " -m " + shell_quote(model) +
         args +
         " -t 2 -ctk f32 -ctv f32 -fa off -no-cnv --no-display-prompt --no-warmup --simple-io "
         "</dev/null";
}

// The number of greedy tokens before the first near tie: the first step whose top-2 logit
// margin is at most the tolerance of test_gemma4_parity's f32 comparison (3e-3 of the largest
// |logit|; both engines quantize the activations the same way and keep the KV cache in f32, so
// only float summation orders differ). Past a near tie, rounding that differs between engines
// may pick the other token, and the rest of the text follows it; so the comparison stops there.
size_t tokens_before_near_tie(const std::string& model, const std::string& prompt,
                              const std::vector<int32_t>& generated) {
  constexpr double kTol = 3e-3;
  const auto loaded = api::Model::load(model);
  const api::Session session(loaded);
  std::vector<int32_t> ids = session.tokenize(prompt);
  const size_t n_prompt = ids.size();
  ids.insert(ids.end(), generated.begin(), generated.end());
  std::string list;
  for (const int32_t id : ids) {
    if (!list.empty()) list += ',';
    list += std::to_string(id);
  }
  const test::CommandOutput r = test::run_command_split(
      boltrt() + " logits -m " + shell_quote(model) + " --kv-type f32 -t 2 -p " + list);
  EXPECT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::vector<double>> rows;  // per position: "pos n_vocab v0 v1 ..."
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    int64_t pos = 0, n = 0;
    fields >> pos >> n;
    std::vector<double> row(static_cast<size_t>(n));
    for (double& v : row) fields >> v;
    rows.push_back(std::move(row));
  }
  EXPECT_EQ(rows.size(), ids.size());
  for (size_t k = 0; k < generated.size(); ++k) {
    if (n_prompt - 1 + k >= rows.size()) return k;
    std::vector<double> row = rows[n_prompt - 1 + k];
    if (row.size() < 2) return k;
    double max_abs = 0;
    for (const double v : row) max_abs = std::max(max_abs, std::abs(v));
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<>());
    if (row[0] - row[1] <= kTol * max_abs) return k;
  }
  return generated.size();
}

TEST_F(CliGenerate, GreedyMatchesLlamaCompletion) {
  const std::string args = " -p " + shell_quote(kPrompt) + " --temp 0 -c 256";
  const Outcome full = run(generate(args + " -n 16 --kv-type f32 --json"));
  ASSERT_EQ(full.status, 0) << full.err;
  std::vector<int32_t> tokens;
  const auto doc = nlohmann::json::parse(full.out);
  for (const auto& t : doc["tokens"]) tokens.push_back(t.get<int>());
  ASSERT_FALSE(tokens.empty());
  // Both engines write the tokens up to the first near tie (greedy: a prefix of the full run).
  const size_t n = tokens_before_near_tie(model_, kPrompt, tokens);
  if (test::llama_ref_bin().empty()) {
    GTEST_SKIP() << "llama-ref not built (~/.cache/llama-ref/build/bin); run tools/setup.sh (" << n
                 << " of " << tokens.size() << " greedy tokens before a near tie)";
  }
  // The shipped model and prompt are fixed: a near tie at the first step would mean the logits
  // changed (a failure, not a reason to skip the comparison).
  ASSERT_GT(n, 0u) << "the first greedy step is a near tie on this model";
  const std::string cut = " -n " + std::to_string(n);
  const Outcome ours = run(generate(args + cut + " --kv-type f32"));
  ASSERT_EQ(ours.status, 0) << ours.err;
  // A complete llama-completion run ends its stdout with "\n\n" (test::run_reference).
  const Outcome theirs =
      test::run_reference(llama_completion(model_, args + cut + " -s 1"), [](const Outcome& r) {
        return r.out.size() >= 2 && r.out.compare(r.out.size() - 2, 2, "\n\n") == 0;
      });
  ASSERT_EQ(theirs.status, 0) << theirs.err;
  EXPECT_FALSE(ours.out.empty());
  EXPECT_EQ(ours.out, completion_text(theirs.out)) << n << " of " << tokens.size() << " tokens";
}

// Seeded sampling against llama.cpp's own sampler chain, fed the logits boltrt sampled from:
// the same logits, the same chain and seed must give the same tokens, step by step. The chain
// runs in tests/llama_ref/llama_sampler_chain.cpp (libllama's samplers, as llama-completion
// builds them). Comparing whole llama-completion runs instead cannot be exact: on this q8_0
// model llama.cpp's one-token decode steps and its batched prompt pass give logits 0.07 apart
// from position 6 on (a requantized activation rounding the other way), so its sampled text
// changes with how its tokens were batched; greedy parity is GreedyMatchesLlamaCompletion's.
TEST_F(CliGenerate, SeededSamplingMatchesLlamaSamplerChain) {
  std::string error;
  const std::string chain = test::llama_ref_tool("llama_sampler_chain", &error);
  if (test::llama_ref_bin().empty()) {
    GTEST_SKIP() << "llama-ref not built (~/.cache/llama-ref/build/bin); run "
                    "../shared/tools/llama-ref/build.sh";
  }
  ASSERT_FALSE(chain.empty()) << error;
  const auto loaded = api::Model::load(model_);
  const std::vector<int32_t> prompt = api::Session(loaded).tokenize(kPrompt);
  const auto ids = [](const std::vector<int32_t>& v) {
    std::string list;
    for (const int32_t id : v) {
      if (!list.empty()) list += ',';
      list += std::to_string(id);
    }
    return list;
  };
  // Each chain takes another path through the samplers: top-k first (sorted from then on); the
  // whole vocabulary into top-p (its bucketed best-256 window); min-p on an unsorted list; the
  // penalties over the prompt and the generated window.
  const char* chains[] = {
      "--top-k 40 --top-p 0.95 --min-p 0.01 --temp 0.9 --seed 1234",
      "--top-k 0 --top-p 0.9 --min-p 0 --temp 1 --seed 7",
      "--top-k 0 --top-p 1 --min-p 0.05 --temp 0.7 --seed 99",
      ("--top-k 40 --top-p 0.95 --min-p 0.05 --temp 0.8 --seed 5 --repeat-penalty 1.3 "
       "--repeat-last-n 8 --frequency-penalty 0.2 --presence-penalty 0.1"),
  };
  const std::string dir = test::scratch_dir("seeded_sampling");
  for (const std::string args : chains) {
    SCOPED_TRACE(args);
    const Outcome ours = run(generate(" -p " + shell_quote(kPrompt) + " -n 12 -c 256 " + args +
                                      " --kv-type f32 --json"));
    ASSERT_EQ(ours.status, 0) << ours.err;
    const auto doc = nlohmann::json::parse(ours.out);
    const std::vector<int32_t> tokens = doc["tokens"].get<std::vector<int32_t>>();
    ASSERT_FALSE(tokens.empty());
    // A model stuck on one token would make the comparison meaningless.
    EXPECT_GE(std::set<int32_t>(tokens.begin(), tokens.end()).size(), 4u) << ours.out;
    // The logits each step sampled from: boltrt's are the same for any batching, so one pass
    // over prompt + tokens gives them; 9 digits carry every float exactly.
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), tokens.begin(), tokens.end());
    const Outcome logits = run(boltrt() + " logits -m " + shell_quote(model_) +
                               " --kv-type f32 -t 2 --digits 9 -p " + ids(all));
    ASSERT_EQ(logits.status, 0) << logits.err;
    std::istringstream lines(logits.out);
    std::ofstream rows(dir + "/rows.txt", std::ios::trunc);
    size_t n = 0;
    for (std::string line; std::getline(lines, line); ++n) {
      if (n + 1 >= prompt.size() && n + 1 < all.size()) rows << line << '\n';
    }
    rows.close();
    ASSERT_EQ(n, all.size());
    const Outcome theirs = run(shell_quote(chain) + " " + shell_quote(model_) + " " +
                               shell_quote(dir + "/rows.txt") + " " + ids(prompt) + " " + args);
    ASSERT_EQ(theirs.status, 0) << theirs.err;
    std::vector<int32_t> picked;
    std::istringstream picks(theirs.out);
    for (int32_t id = 0; picks >> id;) picked.push_back(id);
    EXPECT_EQ(picked, tokens);
  }
  // Another seed, another text (the distribution is flat enough for 12 tokens to differ).
  const Outcome first = run(
      generate(" -p " + shell_quote(kPrompt) + " -n 12 -c 256 " + chains[0] + " --kv-type f32"));
  std::string other_chain = chains[0];
  other_chain.replace(other_chain.find("1234"), 4, "99");
  const Outcome other = run(
      generate(" -p " + shell_quote(kPrompt) + " -n 12 -c 256 " + other_chain + " --kv-type f32"));
  EXPECT_NE(other.out, first.out);
}

TEST_F(CliGenerate, JsonFieldsAreConsistent) {
  const Outcome r = run(generate("-p " + shell_quote(kPrompt) + " -n 12 --temp 0 --json"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  for (const char* key : {"text", "n_tokens", "n_prompt_tokens", "ttft_ms", "tokens_per_second",
                          "finish_reason", "tokens", "seed"}) {
    EXPECT_TRUE(doc.contains(key)) << key;
  }
  EXPECT_EQ(doc["tokens"].size(), doc["n_tokens"].get<size_t>());
  EXPECT_LE(doc["n_tokens"].get<int>(), 12);
  EXPECT_GT(doc["n_prompt_tokens"].get<int>(), 0);
  EXPECT_GE(doc["ttft_ms"].get<double>(), 0.0);
  const std::string reason = doc["finish_reason"];
  EXPECT_TRUE(reason == "length" || reason == "eog") << reason;
  if (reason == "length") {
    EXPECT_EQ(doc["n_tokens"].get<int>(), 12);
  }
  // Streaming prints exactly the JSON text.
  const Outcome plain = run(generate("-p " + shell_quote(kPrompt) + " -n 12 --temp 0"));
  EXPECT_EQ(plain.out, doc["text"].get<std::string>());
}

TEST_F(CliGenerate, ChatJsonSplitsReasoningAndContent) {
  const Outcome r = run(generate("-p hello --chat --system 'be brief' -n 8 --temp 0 --json"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_TRUE(doc.contains("reasoning") && doc.contains("content") &&
              doc.contains("reasoning_tokens"));
  // With thinking off the answer starts after the pre-filled empty thought channel.
  EXPECT_EQ(doc["reasoning_tokens"].get<int>(), 0);
}

TEST_F(CliGenerate, StopStringEndsTheOutput) {
  const Outcome full = run(generate("-p " + shell_quote(kPrompt) + " -n 16 --temp 0 --json"));
  ASSERT_EQ(full.status, 0) << full.err;
  const std::string text = nlohmann::json::parse(full.out)["text"];
  ASSERT_GE(text.size(), 4u) << "the synthetic model wrote too little text to cut: " << text;
  // Stop at a piece of the greedy output: the output ends right before it.
  const std::string stop = text.substr(text.size() / 2, 2);
  const Outcome r = run(generate("-p " + shell_quote(kPrompt) + " -n 16 --temp 0 --json --stop " +
                                 shell_quote(stop)));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["finish_reason"], "stop");
  EXPECT_EQ(doc["text"].get<std::string>(), text.substr(0, text.find(stop)));
}

TEST_F(CliGenerate, Errors) {
  // Missing file, prompt longer than the context, bad flag, bad value: one line, non-zero.
  const Outcome missing = run(boltrt() + " generate -m /nonexistent/model.gguf -p hi");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("/nonexistent/model.gguf"), std::string::npos) << missing.err;
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;

  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "word ";
  const Outcome too_long = run(generate("-p " + shell_quote(long_prompt) + " -c 64"));
  EXPECT_EQ(too_long.status, 1);
  EXPECT_NE(too_long.err.find("context holds 64"), std::string::npos) << too_long.err;
  EXPECT_EQ(std::count(too_long.err.begin(), too_long.err.end(), '\n'), 1) << too_long.err;
  EXPECT_EQ(too_long.out, "");

  const Outcome truncated =
      run(generate("-p " + shell_quote(long_prompt) + " -c 64 -n 4 --truncate --json"));
  EXPECT_EQ(truncated.status, 0) << truncated.err;

  const Outcome bad_flag = run(generate("-p hi --no-such-flag"));
  EXPECT_NE(bad_flag.status, 0);
  EXPECT_NE(bad_flag.err.find("--no-such-flag"), std::string::npos) << bad_flag.err;

  const Outcome bad_value = run(generate("-p hi --kv-type q3"));
  EXPECT_NE(bad_value.status, 0);
  const Outcome no_prompt = run(generate(""));
  EXPECT_EQ(no_prompt.status, 1);
  EXPECT_NE(no_prompt.err.find("needs a prompt"), std::string::npos) << no_prompt.err;
  const Outcome system_without_chat = run(generate("-p hi --system x"));
  EXPECT_EQ(system_without_chat.status, 1);
  const Outcome bad_penalty = run(generate("-p hi --repeat-penalty 0"));
  EXPECT_EQ(bad_penalty.status, 1);
  EXPECT_NE(bad_penalty.err.find("repeat penalty"), std::string::npos) << bad_penalty.err;
}

// The shipped tiny model (trained with thought sections): a reasoning budget closes the thought
// with the budget message and the model still answers.
TEST(CliGenerateTinyModel, ReasoningBudgetClosesTheThought) {
  const std::string model = test::source_dir() + "/models/tiny/tiny-q4_k.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << "models/tiny/tiny-q4_k.gguf is not in this checkout";
  const Outcome r = run(boltrt() + " generate -m " + shell_quote(model) +
                        " -t 2 --chat --reasoning on --reasoning-budget 5 -n 64 --temp 0 --json "
                        "-p " +
                        shell_quote("Who is Elizabeth?"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const std::string reasoning = doc["reasoning"];
  EXPECT_NE(reasoning.find("I have thought enough; time to answer."), std::string::npos) << r.out;
  EXPECT_FALSE(doc["content"].get<std::string>().empty()) << r.out;
  EXPECT_GT(doc["reasoning_tokens"].get<int>(), 5) << r.out;  // 5 thought + the forced message
  // Reasoning off: no thought at all.
  const Outcome off =
      run(boltrt() + " generate -m " + shell_quote(model) +
          " -t 2 --chat --think off -n 32 --temp 0 --json -p " + shell_quote("Who is Elizabeth?"));
  ASSERT_EQ(off.status, 0) << off.err;
  const auto off_doc = nlohmann::json::parse(off.out);
  EXPECT_EQ(off_doc["reasoning"], "");
  EXPECT_EQ(off_doc["reasoning_tokens"], 0);
}

}  // namespace
}  // namespace boltrt

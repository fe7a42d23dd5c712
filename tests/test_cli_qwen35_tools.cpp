// The rest of the CLI on a qwen35 file (issue 21 item 5, issue 22 item 5): `quantize` gives
// llama-quantize's type mix and bytes, `perplexity` gives llama-perplexity's figures and the
// same bits for any thread count and batch size, `bench` runs (rows only, no timing), `eval`
// compares a Gemma 4 and a Qwen3.5 model in one report, `inspect` and `tokenize` read the file.
// The llama.cpp comparisons skip with a reason when llama-ref is not built.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quant/quant_mix.h"
#include "quant/quantize_model.h"
#include "support/paths.h"

namespace boltrt {
namespace {

using test::shell_quote;

std::string boltrt(const std::string& args) {
  return shell_quote(test::cli_path()) + " " + args;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), {});
}

// Two synthetic models: the tiny preset as it is (tied head, no MTP block), and one with a
// separate output head and an MTP block (whose tensors llama-quantize converts too).
class CliQwen35Tools : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("cli_qwen35_tools");
    model_ = dir_ + "/tiny.gguf";
    untied_ = dir_ + "/tiny-untied-mtp.gguf";
    for (const auto& [path, flags] : {std::pair{model_, std::string()},
                                      std::pair{untied_, std::string(" --untied --nextn 1")}}) {
      const auto r = test::run_command_split(
          boltrt("synth --arch qwen35 --preset tiny" + flags + " -o " + shell_quote(path)));
      if (r.status != 0) synth_error_ += r.out + r.err;
    }
  }
  void SetUp() override { ASSERT_EQ(synth_error_, "") << "cannot synthesize the test models"; }
  static std::string dir_, model_, untied_, synth_error_;
};
std::string CliQwen35Tools::dir_, CliQwen35Tools::model_, CliQwen35Tools::untied_,
    CliQwen35Tools::synth_error_;

// llama-quantize's Q4_K_M rules worked out by hand for the untied tiny model with one MTP block
// (block_count 9: delta-net layers 0-2, 4-6 with attn_qkv; attention layers 3, 7 and the MTP
// block 8 with attn_v). attn_qkv counts as attn_v: the 9 of them in layer order get Q6_K where
// use_more_bits(i, 9) holds (i < 1, i >= 7, (i - 1) % 3 == 2: i = 0, 3, 6, 7, 8, i.e. layers 0,
// 3, 6, 7, 8), Q4_K elsewhere; ffn_down the same by layer; the output head Q6_K; ssm_out has
// rows of 128, not a multiple of Q4_K's 256, so Q5_0; conv kernels, norms and 1-D tensors F32.
void expect_q4_k_m_mix(const gguf::File& q) {
  const std::pair<const char*, GgmlType> want[] = {
      {"output.weight", GgmlType::Q6_K},
      {"token_embd.weight", GgmlType::Q4_K},
      {"blk.0.attn_qkv.weight", GgmlType::Q6_K},
      {"blk.1.attn_qkv.weight", GgmlType::Q4_K},
      {"blk.2.attn_qkv.weight", GgmlType::Q4_K},
      {"blk.3.attn_v.weight", GgmlType::Q6_K},
      {"blk.4.attn_qkv.weight", GgmlType::Q4_K},
      {"blk.6.attn_qkv.weight", GgmlType::Q6_K},
      {"blk.7.attn_v.weight", GgmlType::Q6_K},
      {"blk.8.attn_v.weight", GgmlType::Q6_K},
      {"blk.0.ffn_down.weight", GgmlType::Q6_K},
      {"blk.1.ffn_down.weight", GgmlType::Q4_K},
      {"blk.3.ffn_down.weight", GgmlType::Q6_K},
      {"blk.5.ffn_down.weight", GgmlType::Q4_K},
      {"blk.8.ffn_down.weight", GgmlType::Q6_K},
      {"blk.0.ssm_out.weight", GgmlType::Q5_0},
      {"blk.0.ssm_alpha.weight", GgmlType::Q4_K},
      {"blk.0.attn_gate.weight", GgmlType::Q4_K},
      {"blk.3.attn_k.weight", GgmlType::Q4_K},
      {"blk.0.ssm_conv1d.weight", GgmlType::F32},
      {"blk.0.ssm_a", GgmlType::F32},
      {"blk.3.attn_q_norm.weight", GgmlType::F32},
  };
  for (const auto& [name, type] : want) {
    const gguf::TensorInfo* t = q.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(type_traits(t->type).name, type_traits(type).name) << name;
  }
}

// Our output follows our plan (llama-quantize's rules: attn_qkv of the delta-net layers counts
// as attn_v, ssm_conv1d and norms stay F32), loads and generates; with llama-ref, the file is
// byte-identical with llama-quantize's.
TEST_F(CliQwen35Tools, QuantizeIsByteIdenticalWithLlamaQuantize) {
  const std::string bin = test::llama_ref_bin();
  int compared = 0;
  for (const std::string& in : {model_, untied_}) {
    for (const char* ftype : {"Q8_0", "Q4_K_M", "Q4_0", "Q6_K"}) {
      SCOPED_TRACE(in + " " + ftype);
      const std::string out = in + "." + ftype + ".boltrt.gguf";
      const auto r = test::run_command_split(
          boltrt("quantize " + shell_quote(in) + " " + shell_quote(out) + " " + ftype + " -t 2"));
      ASSERT_EQ(r.status, 0) << r.err;
      const auto src = gguf::File::open(in);
      const auto q = gguf::File::open(out);
      const auto plans =
          plan_quantization(describe_model(*src), *file_type_from_name(ftype), false, {});
      ASSERT_EQ(q->tensors().size(), plans.size());
      int converted = 0;
      for (size_t i = 0; i < plans.size(); ++i) {
        const gguf::TensorInfo& t = q->tensors()[i];
        EXPECT_EQ(t.name, src->tensors()[plans[i].index].name);
        EXPECT_EQ(t.type, plans[i].target) << t.name;
        if (t.name.find("ssm_conv1d") != std::string::npos ||
            t.name.find("_norm") != std::string::npos) {
          EXPECT_EQ(t.type, GgmlType::F32) << t.name;
        }
        converted += t.type != src->tensors()[plans[i].index].type;
      }
      EXPECT_GT(converted, 10);
      if (in == untied_ && std::string(ftype) == "Q4_K_M") expect_q4_k_m_mix(*q);
      const auto g = test::run_command_split(
          boltrt("generate -m " + shell_quote(out) + " -p hello -n 4 --temp 0 -t 1"));
      EXPECT_EQ(g.status, 0) << g.err;
      if (bin.empty()) continue;
      const std::string ref = in + "." + ftype + ".llama.gguf";
      std::string log;
      ASSERT_EQ(test::run_command(shell_quote(bin + "/llama-quantize") + " " + shell_quote(in) +
                                      " " + shell_quote(ref) + " " + ftype + " 2",
                                  &log),
                0)
          << log;
      EXPECT_TRUE(read_all(out) == read_all(ref)) << "output differs from llama-quantize's " << ref;
      ++compared;
    }
  }
  if (bin.empty()) {
    GTEST_SKIP() << "llama-ref is not built (shared/tools/llama-ref/build.sh): skipped the "
                    "byte comparison with llama-quantize";
  }
  EXPECT_EQ(compared, 8);
}

struct Perplexity {
  std::vector<double> running;
  double ppl = 0, error = 0;
};

// "[1]12.3456,[2]11.9876,...\nFinal estimate: PPL = X +/- Y" (ours and llama-perplexity's).
Perplexity parse_perplexity(const std::string& out) {
  Perplexity p;
  const std::regex window(R"(\[(\d+)\]([0-9.]+),)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), window); it != std::sregex_iterator();
       ++it) {
    p.running.push_back(std::stod((*it)[2]));
  }
  std::smatch m;
  if (std::regex_search(out, m, std::regex(R"(Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+))"))) {
    p.ppl = std::stod(m[1]);
    p.error = std::stod(m[2]);
  }
  return p;
}

// The same windows for -t 1 and 2 and for batches of 32, 128 and 2048: the same bits (the
// delta-net recurrence runs token by token, matmul rows are batch invariant), so the same
// printed figures. With llama-ref: llama-perplexity's running estimates, final figure and
// error within the bound of the Gemma 4 F32 comparison (tests/test_perplexity.cpp, 1e-4
// relative; the F32 logits agree within 2e-5, tests/test_qwen35_parity.cpp). Measured
// (2026-12-05, x86-64): 1019.4568 +/- 74.88273 against llama-perplexity's 1019.4560 +/- 74.88271
// (8e-7 relative).
TEST_F(CliQwen35Tools, PerplexityIsDeterministicAndEqualsLlamaPerplexity) {
  const std::string text = test::source_dir() + "/tests/data/perplexity/sample.txt";
  auto ours = [&](const std::string& flags) {
    const auto r =
        test::run_command_split(boltrt("perplexity -m " + shell_quote(model_) + " -f " +
                                       shell_quote(text) + " -c 128 --chunks 3 " + flags));
    EXPECT_EQ(r.status, 0) << r.err;
    return r.out;
  };
  const std::string base = ours("-t 1 -b 128");
  EXPECT_EQ(ours("-t 2 -b 128"), base);
  EXPECT_EQ(ours("-t 2 -b 32"), base);
  EXPECT_EQ(ours("-t 2 -b 2048"), base);  // llama-perplexity's default: 16 windows per batch
  const Perplexity p = parse_perplexity(base);
  ASSERT_EQ(p.running.size(), 3u) << base;
  EXPECT_GT(p.ppl, 1.0);
  EXPECT_TRUE(std::isfinite(p.ppl));

  const std::string bin = test::llama_ref_bin();
  if (bin.empty()) {
    GTEST_SKIP() << "llama-ref is not built (shared/tools/llama-ref/build.sh): skipped the "
                    "comparison with llama-perplexity";
  }
  const test::CommandOutput reference =
      test::run_reference(shell_quote(bin + "/llama-perplexity") + " -m " + shell_quote(model_) +
                              " -f " + shell_quote(text) + " -c 128 --chunks 3 -t 2",
                          [](const test::CommandOutput& r) {
                            return (r.out + r.err).find("Final estimate") != std::string::npos;
                          });
  const std::string log = reference.out + reference.err;
  ASSERT_EQ(reference.status, 0) << log;
  const Perplexity ref = parse_perplexity(log);
  ASSERT_EQ(ref.running.size(), p.running.size()) << log;
  constexpr double kTol = 1e-4;
  for (size_t i = 0; i < ref.running.size(); ++i) {
    EXPECT_NEAR(p.running[i], ref.running[i], kTol * ref.running[i]) << "window " << i + 1;
  }
  EXPECT_NEAR(p.ppl, ref.ppl, kTol * ref.ppl);
  EXPECT_NEAR(p.error, ref.error, kTol * ref.error + 1e-5);
  std::printf("  perplexity: boltrt %.4f +/- %.5f, llama-perplexity %.4f +/- %.5f\n", p.ppl,
              p.error, ref.ppl, ref.error);
}

TEST_F(CliQwen35Tools, BenchRunsEveryRow) {
  const auto r = test::run_command_split(
      boltrt("bench -m " + shell_quote(model_) + " -p 64 -n 16 -r 1 -t 1,2 -o json"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc.size(), 4u) << r.out;
  for (size_t i = 0; i < doc.size(); ++i) {
    const auto& row = doc[i];
    EXPECT_EQ(row.at("model_type"), "qwen35 ?B all F32");
    EXPECT_EQ(row.at("backend"), "CPU");
    EXPECT_EQ(row.at("n_threads"), i < 2 ? 1 : 2);
    EXPECT_EQ(row.at("n_prompt"), i % 2 == 0 ? 64 : 0);
    EXPECT_EQ(row.at("n_gen"), i % 2 == 0 ? 0 : 16);
    EXPECT_GT(row.at("avg_ts").get<double>(), 0.0);
  }
  // A depth, markdown: rolls back to the depth's recurrent state before every repetition.
  const auto md = test::run_command_split(
      boltrt("bench -m " + shell_quote(model_) + " -p 8 -n 4 -d 16 -r 2 -t 1"));
  ASSERT_EQ(md.status, 0) << md.err;
  EXPECT_NE(md.out.find("| qwen35 ?B all F32 |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| pp8 @ d16 |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| tg4 @ d16 |"), std::string::npos) << md.out;
}

TEST_F(CliQwen35Tools, ABadDraftIsOneError) {
  // eval with a --draft that is not a DFlash file (drafts for qwen35 targets run:
  // test_qwen35_dflash.cpp; --device cuda runs: test_cuda_device's CliDeviceFlag)
  const auto r = test::run_command_split(boltrt("eval -m " + shell_quote(model_) +
                                                " --suite tool-calling --suite-size 1 --draft " +
                                                shell_quote(model_)));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("general.architecture is 'qwen35', expected 'dflash'"), std::string::npos)
      << r.err;
}

// Issue 22 item 5: the tool-calling suite and a task file on the shipped tiny Gemma 4 model and
// a synthetic Qwen3.5 model; the report covers both, every row checked again from its output.
TEST_F(CliQwen35Tools, EvalComparesGemmaAndQwenInOneReport) {
  const std::string tasks = dir_ + "/tasks.jsonl";
  std::ofstream(tasks)
      << R"({"id": "story", "category": "completion", "prompt": "Once upon a time", "max_tokens": 8, "check": {"type": "contains", "value": "the"}})"
      << "\n"
      << R"({"id": "greet", "category": "chat", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8, "reasoning": "off", "check": {"type": "regex", "pattern": "[Hh]ello"}})"
      << "\n";
  const std::string gemma = test::source_dir() + "/models/tiny/tiny-q8_0.gguf";
  const std::string report = dir_ + "/report.json";
  const auto r = test::run_command_split(boltrt(
      "eval -m " + shell_quote(gemma) + " -m " + shell_quote(model_) + " --tasks " +
      shell_quote(tasks) +
      " --suite tool-calling --suite-size 1 -t 1 --parallel 2 --progress off -o " +
      shell_quote(report) + " --html " + shell_quote(dir_ + "/report.html") + " --overwrite"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(report);
  const auto doc = nlohmann::json::parse(in);
  const auto& models = doc.at("models");
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].at("model"), gemma);
  EXPECT_EQ(models[1].at("model"), model_);
  // 2 task lines + 3 kinds (single, multiple, parallel) x 1 tool task.
  for (const auto& m : models) {
    const auto& rows = m.at("tasks");
    ASSERT_EQ(rows.size(), 5u) << m.at("model");
    int passed = 0;
    for (const auto& t : rows) {
      EXPECT_FALSE(t.contains("error")) << t.dump();
      const std::string id = t.at("id");
      const std::string out = t.at("output");
      if (id == "story") {
        EXPECT_EQ(t.at("passed"), out.find("the") != std::string::npos);
      }
      if (id == "greet") {
        EXPECT_EQ(t.at("passed"), out.find("ello") != std::string::npos);
      }
      // tool_choice "required": each model's own tool-call format is forced. The random
      // Qwen3.5 weights fill a string argument until max_tokens (128), so its call is cut off
      // and parses to no call; its envelope must still be Qwen's XML one.
      if (id.rfind("tool-", 0) == 0) {
        ASSERT_TRUE(t.at("tool_calls").is_array()) << t.dump();
        if (m.at("model") == gemma) {
          EXPECT_FALSE(t.at("tool_calls").empty()) << t.dump();
        } else {
          EXPECT_EQ(out.rfind("<tool_call>\n<function=", 0), 0u) << t.dump();
        }
      }
      EXPECT_GT(t.at("tokens").at("generated").get<int>(), 0) << t.dump();
      passed += t.at("passed").get<bool>() ? 1 : 0;
    }
    EXPECT_EQ(m.at("passed").get<int>(), passed);
    EXPECT_NEAR(m.at("accuracy").get<double>(), passed / 5.0, 1e-9);
    EXPECT_NE(r.out.find("| " + m.at("model").get<std::string>() + " |"), std::string::npos)
        << r.out;
  }
}

TEST_F(CliQwen35Tools, InspectAndTokenizeReadTheFile) {
  const auto inspect =
      test::run_command_split(boltrt("inspect " + shell_quote(untied_) + " --json"));
  ASSERT_EQ(inspect.status, 0) << inspect.err;
  const auto doc = nlohmann::json::parse(inspect.out);
  EXPECT_EQ(doc.at("architecture"), "qwen35");
  const auto file = gguf::File::open(untied_);
  EXPECT_EQ(doc.at("tensors").size(), file->tensors().size());

  const std::string prompt = "Hello world, 123 héllo!";
  const auto ours = test::run_command_split(
      boltrt("tokenize -m " + shell_quote(model_) + " -p " + shell_quote(prompt) + " --ids"));
  ASSERT_EQ(ours.status, 0) << ours.err;
  EXPECT_EQ(ours.out.rfind("[", 0), 0u) << ours.out;
  const std::string bin = test::llama_ref_bin();
  if (bin.empty()) {
    GTEST_SKIP() << "llama-ref is not built (shared/tools/llama-ref/build.sh): skipped the "
                    "comparison with llama-tokenize";
  }
  const auto theirs =
      test::run_command_split(shell_quote(bin + "/llama-tokenize") + " -m " + shell_quote(model_) +
                              " -p " + shell_quote(prompt) + " --ids --log-disable");
  ASSERT_EQ(theirs.status, 0) << theirs.err;
  EXPECT_EQ(ours.out, theirs.out);
}

}  // namespace
}  // namespace boltrt

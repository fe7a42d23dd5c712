// `boltrt quantize` end to end on synthetic gemma4 models (`boltrt synth`): the output's types
// follow the planned mix, its bytes are our quantizers' bytes, and, when llama-ref is built, it is
// byte-identical with llama-quantize's output for the same input and loads in llama.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "quant/dequantize.h"
#include "quant/quant_mix.h"
#include "quant/quantize.h"
#include "quant/quantize_model.h"
#include "support/paths.h"
#include "util/error.h"

namespace boltrt {
namespace {

std::string synth(const std::string& dir, const std::string& preset, const std::string& type) {
  const std::string path = dir + "/" + preset + "-" + type + ".gguf";
  std::string out;
  const int rc = test::run_command(
      test::cli_path() + " synth --preset " + preset + " --type " + type + " -t 2 -o " + path,
      &out);
  EXPECT_EQ(rc, 0) << out;
  return path;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), {});
}

// Checks the quantized file against the plan and against quantize_row on the input's rows.
void check_output(const std::string& in_path, const std::string& out_path, FileType ftype,
                  const TypeOverrides& overrides = {}) {
  const auto in = gguf::File::open(in_path);
  const auto out = gguf::File::open(out_path);
  EXPECT_EQ(out->get_int("general.file_type"), static_cast<int64_t>(ftype));
  EXPECT_EQ(out->get_int("general.quantization_version"), 2);
  EXPECT_EQ(out->metadata().back().key, "general.file_type");
  const ModelDesc model = describe_model(*in);
  const auto plans = plan_quantization(model, ftype, false, overrides);
  ASSERT_EQ(out->tensors().size(), plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    const gguf::TensorInfo& src = in->tensors()[plans[i].index];
    const gguf::TensorInfo& dst = out->tensors()[i];
    ASSERT_EQ(dst.name, src.name) << i;
    ASSERT_EQ(dst.type, plans[i].target) << dst.name;
    for (int d = 0; d < 4; ++d) ASSERT_EQ(dst.ne[d], src.ne[d]) << dst.name;
    // First and last row of every tensor.
    const int64_t n = src.ne[0], rows = src.ne[1] * src.ne[2] * src.ne[3];
    std::vector<float> x(static_cast<size_t>(n));
    std::vector<uint32_t> q(row_size(dst.type, n) / 4 + 1);
    for (int64_t r : {int64_t{0}, rows - 1}) {
      const uint8_t* expected =
          out->tensor_data(dst) + static_cast<size_t>(r) * row_size(dst.type, n);
      if (dst.type == src.type) {
        ASSERT_EQ(std::memcmp(expected, in->tensor_data(src) + r * row_size(src.type, n),
                              row_size(src.type, n)),
                  0)
            << dst.name;
        continue;
      }
      dequantize_row(src.type, in->tensor_data(src) + r * row_size(src.type, n), x.data(), n);
      quantize_row(dst.type, x.data(), q.data(), n);
      ASSERT_EQ(std::memcmp(expected, q.data(), row_size(dst.type, n)), 0)
          << dst.name << " row " << r;
    }
  }
}

struct Case {
  const char* preset;
  const char* source_type;
  const char* ftype;
};

class QuantizeModel : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeModel, MatchesPlanAndLlamaQuantize) {
  const Case c = GetParam();
  const std::string dir =
      test::scratch_dir(std::string("quantize-") + c.preset + "-" + c.source_type + "-" + c.ftype);
  const std::string in = synth(dir, c.preset, c.source_type);
  const std::string out = dir + "/boltrt.gguf";
  // Quantized sources are requantized (dequantized to f32 first), as llama-quantize's flag does.
  const std::string requantize = c.source_type[0] == 'q' ? " --allow-requantize " : " ";
  std::string log;
  ASSERT_EQ(test::run_command(test::cli_path() + " quantize" + requantize + in + " " + out + " " +
                                  c.ftype + " -t 2",
                              &log),
            0)
      << log;
  const auto ftype = file_type_from_name(c.ftype);
  ASSERT_TRUE(ftype.has_value());
  check_output(in, out, *ftype);

  const std::string bin = test::llama_ref_bin();
  if (bin.empty()) {
    GTEST_SKIP() << "llama-ref not built (~/.cache/llama-ref/build/bin): skipped the comparison "
                    "with llama-quantize and the llama.cpp load";
  }
  const std::string ref = dir + "/llama.gguf";
  ASSERT_EQ(test::run_command(
                bin + "/llama-quantize" + requantize + in + " " + ref + " " + c.ftype + " 2", &log),
            0)
      << log;
  const auto ours = gguf::File::open(out);
  const auto theirs = gguf::File::open(ref);
  ASSERT_EQ(ours->tensors().size(), theirs->tensors().size());
  for (size_t i = 0; i < ours->tensors().size(); ++i) {
    EXPECT_EQ(ours->tensors()[i].name, theirs->tensors()[i].name) << i;
    EXPECT_EQ(type_traits(ours->tensors()[i].type).name,
              type_traits(theirs->tensors()[i].type).name)
        << ours->tensors()[i].name;
  }
  EXPECT_TRUE(read_all(out) == read_all(ref)) << "output differs from llama-quantize's " << ref;
  // llama.cpp loads our file and evaluates a few tokens.
  ASSERT_EQ(test::run_command(
                bin + "/llama_logits " + out + " 2,10,20,30 1 > " + dir + "/logits.txt", &log),
            0)
      << log;
}

INSTANTIATE_TEST_SUITE_P(Gemma4, QuantizeModel,
                         ::testing::Values(Case{"tiny", "f32", "Q4_K_M"},
                                           Case{"tiny", "bf16", "Q8_0"},
                                           Case{"tiny-moe", "f32", "Q4_K_M"},
                                           Case{"tiny-e2b-like", "f16", "Q4_0"},
                                           Case{"tiny", "q8_0", "Q4_K_M"}),
                         [](const auto& info) {
                           std::string name = std::string(info.param.preset) + "_" +
                                              info.param.source_type + "_" + info.param.ftype;
                           for (char& ch : name) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// An imatrix GGUF as llama-imatrix writes it, with deterministic positive sums for every
// quantizable weight of `model_path` (per expert for 3-D tensors; expert 1 has count 0).
void write_imatrix(const std::string& model_path, const std::string& path) {
  const auto model = gguf::File::open(model_path);
  gguf::Writer w;
  w.set_string("general.type", "imatrix");
  w.set_array_string("imatrix.datasets", {"synthetic.txt"});
  w.set_u32("imatrix.chunk_count", 7);
  w.set_u32("imatrix.chunk_size", 512);
  static std::vector<std::vector<float>> keep;  // alive until write()
  keep.clear();
  uint32_t state = 12345;
  for (const auto& t : model->tensors()) {
    if (t.ne[1] <= 1 || !t.name.ends_with("weight")) continue;
    const int64_t ne0 = t.ne[0], ne2 = t.ne[2];
    keep.emplace_back(static_cast<size_t>(ne0 * ne2));
    for (float& v : keep.back()) {
      state = state * 1664525u + 1013904223u;
      v = 1.0f + static_cast<float>(state >> 8) / static_cast<float>(1 << 20);
    }
    const int64_t sums_ne[2] = {ne0, ne2};
    w.add_tensor_data(t.name + ".in_sum2", GgmlType::F32, sums_ne, keep.back().data());
    keep.emplace_back(static_cast<size_t>(ne2), 37.0f);
    if (ne2 > 1) keep.back()[1] = 0.0f;
    const int64_t counts_ne[2] = {1, ne2};
    w.add_tensor_data(t.name + ".counts", GgmlType::F32, counts_ne, keep.back().data());
  }
  w.write(path);
}

TEST(QuantizeModelCli, ImatrixMatchesLlamaQuantize) {
  const std::string bin = test::llama_ref_bin();
  const std::string dir = test::scratch_dir("quantize-imatrix");
  const std::pair<const char*, const char*> cases[] = {{"tiny-moe", "Q4_K_M"}, {"tiny", "Q4_0"}};
  for (const auto& [preset, ftype] : cases) {
    const std::string in = synth(dir, preset, "f32");
    const std::string imatrix = dir + "/" + preset + ".imatrix.gguf";
    write_imatrix(in, imatrix);
    const std::string out = dir + "/boltrt-" + preset + "-" + ftype + ".gguf";
    std::string log;
    ASSERT_EQ(test::run_command(test::cli_path() + " quantize --imatrix " + imatrix + " " + in +
                                    " " + out + " " + ftype + " -t 2",
                                &log),
              0)
        << log;
    const auto q = gguf::File::open(out);
    EXPECT_EQ(q->get_string("quantize.imatrix.dataset"), "synthetic.txt");
    EXPECT_EQ(q->get_int("quantize.imatrix.chunks_count"), 7);
    if (bin.empty()) continue;
    const std::string ref = dir + "/llama-" + preset + "-" + ftype + ".gguf";
    ASSERT_EQ(test::run_command(bin + "/llama-quantize --imatrix " + imatrix + " " + in + " " +
                                    ref + " " + ftype + " 2",
                                &log),
              0)
        << log;
    EXPECT_TRUE(read_all(out) == read_all(ref))
        << preset << " " << ftype << ": output differs from llama-quantize --imatrix";
  }
  if (bin.empty()) {
    GTEST_SKIP() << "llama-ref not built (~/.cache/llama-ref/build/bin): skipped the comparison "
                    "with llama-quantize --imatrix";
  }
}

TEST(QuantizeModelCli, ErrorsAreOneLine) {
  const std::string dir = test::scratch_dir("quantize-errors");
  std::string log;
  EXPECT_EQ(test::run_command(
                test::cli_path() + " quantize " + dir + "/missing.gguf " + dir + "/out.gguf Q4_K_M",
                &log),
            1);
  EXPECT_NE(log.find("boltrt: error:"), std::string::npos) << log;
  const std::string in = synth(dir, "tiny", "q8_0");
  EXPECT_EQ(
      test::run_command(test::cli_path() + " quantize " + in + " " + dir + "/o.gguf IQ1_S", &log),
      1);
  EXPECT_NE(log.find("unknown type 'IQ1_S'"), std::string::npos) << log;
  EXPECT_EQ(
      test::run_command(test::cli_path() + " quantize " + in + " " + dir + "/o.gguf Q4_K_M", &log),
      1);
  EXPECT_NE(log.find("--allow-requantize"), std::string::npos) << log;
  EXPECT_EQ(test::run_command(test::cli_path() + " quantize --allow-requantize " + in + " " + dir +
                                  "/o.gguf Q4_K_M",
                              &log),
            0)
      << log;
}

// --pure, --output-tensor-type, --token-embedding-type and --tensor-type: the output follows the
// plan made with the same overrides (tests/test_quant_overrides.cpp checks the plan itself), with
// our quantizers' bytes; with llama-ref, it is byte-identical with llama-quantize given the same
// options.
TEST(QuantizeModelCli, TypeOverridesMatchPlanAndLlamaQuantize) {
  struct OverrideCase {
    std::string flags;
    TypeOverrides overrides;
    std::string expect_tensor;  // a tensor whose type the options decide
    GgmlType expect_type;
  };
  std::vector<OverrideCase> cases(2);
  // Tied embeddings (tiny has no output.weight): --output-tensor-type reaches token_embd. The
  // pattern is lowercased, as llama-quantize does.
  cases[0].flags =
      "--output-tensor-type q8_0 --tensor-type 'blk\\.0\\.=q5_0' "
      "--tensor-type 'ATTN_V=q4_1'";
  cases[0].overrides.output_type = GgmlType::Q8_0;
  cases[0].overrides.tensor_types = {{"blk\\.0\\.", GgmlType::Q5_0}, {"attn_v", GgmlType::Q4_1}};
  cases[0].expect_tensor = "blk.1.attn_v.weight";
  cases[0].expect_type = GgmlType::Q4_1;
  cases[1].flags = "--pure --token-embedding-type Q4_0";
  cases[1].overrides.pure = true;
  cases[1].overrides.token_embedding_type = GgmlType::Q4_0;
  cases[1].expect_tensor = "per_layer_token_embd.weight";
  cases[1].expect_type = GgmlType::Q4_0;

  const std::string dir = test::scratch_dir("quantize-overrides");
  const std::string in = synth(dir, "tiny", "f32");
  const std::string bin = test::llama_ref_bin();
  for (size_t i = 0; i < cases.size(); ++i) {
    const OverrideCase& c = cases[i];
    SCOPED_TRACE(c.flags);
    const std::string out = dir + "/boltrt-" + std::to_string(i) + ".gguf";
    std::string log;
    ASSERT_EQ(test::run_command(
                  test::cli_path() + " quantize " + c.flags + " " + in + " " + out + " Q4_K_M -t 2",
                  &log),
              0)
        << log;
    check_output(in, out, FileType::Q4_K_M, c.overrides);
    bool found = false;
    const auto written = gguf::File::open(out);
    for (const auto& t : written->tensors()) {
      if (t.name != c.expect_tensor) continue;
      found = true;
      EXPECT_EQ(type_traits(t.type).name, type_traits(c.expect_type).name);
    }
    EXPECT_TRUE(found) << c.expect_tensor;
    if (bin.empty()) continue;
    const std::string ref = dir + "/llama-" + std::to_string(i) + ".gguf";
    ASSERT_EQ(test::run_command(
                  bin + "/llama-quantize " + c.flags + " " + in + " " + ref + " Q4_K_M 2", &log),
              0)
        << log;
    EXPECT_TRUE(read_all(out) == read_all(ref)) << "output differs from llama-quantize's " << ref;
  }
  std::filesystem::remove_all(dir);
  if (bin.empty()) {
    GTEST_SKIP() << "llama-ref not built (~/.cache/llama-ref/build/bin): skipped the comparison "
                    "with llama-quantize";
  }
}

TEST(QuantizeModelCli, BadTypeOverridesAreOneLineErrors) {
  const std::string dir = test::scratch_dir("quantize-override-errors");
  const std::string in = synth(dir, "tiny", "f32");
  const std::pair<const char*, const char*> cases[] = {
      {"--tensor-type attn_v", "is not PATTERN=TYPE"},
      {"--tensor-type =q8_0", "empty pattern"},
      {"--tensor-type attn_v=", "has no type"},
      {"--tensor-type 'attn_(v=q8_0'", "not a valid regular expression"},
      {"--output-tensor-type q9_9", "unknown type 'q9_9'"},
      {"--token-embedding-type iq2_xxs", "cannot write iq2_xxs"},
      {"--output-tensor-type q8_K", "cannot write q8_K"},
      // per_layer_token_embd rows are 384: not a multiple of 256, and exact types do not fall back.
      {"--token-embedding-type q4_k", "per_layer_token_embd.weight"},
  };
  for (const auto& [flags, message] : cases) {
    std::string log;
    EXPECT_EQ(test::run_command(
                  test::cli_path() + " quantize " + flags + " " + in + " " + dir + "/o.gguf Q4_K_M",
                  &log),
              1)
        << flags;
    EXPECT_NE(log.find("boltrt: error:"), std::string::npos) << flags << ": " << log;
    EXPECT_NE(log.find(message), std::string::npos) << flags << ": " << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << flags << ": " << log;
  }
  EXPECT_FALSE(std::ifstream(dir + "/o.gguf").good());
  std::filesystem::remove_all(dir);
}

TEST(QuantizeModelCli, NonFiniteWeightIsRejectedWithoutOutput) {
  const std::string dir = test::scratch_dir("quantize-nan");
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  std::vector<float> good(256 * 4, 0.5f), bad(256 * 4, 0.25f);
  bad[256 * 3 + 9] = std::numeric_limits<float>::quiet_NaN();
  const int64_t ne[2] = {256, 4};
  w.add_tensor_data("blk.0.attn_q.weight", GgmlType::F32, ne, good.data());
  w.add_tensor_data("blk.0.ffn_up.weight", GgmlType::F32, ne, bad.data());
  w.write(dir + "/in.gguf");
  QuantizeOptions options;
  options.ftype = FileType::Q4_K_M;
  options.threads = 2;
  try {
    quantize_model(dir + "/in.gguf", dir + "/out.gguf", options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("blk.0.ffn_up.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("row 3"), std::string::npos) << m;
    EXPECT_NE(m.find("non-finite"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_FALSE(std::ifstream(dir + "/out.gguf").good());
  // The same file without the NaN quantizes.
  options.ftype = FileType::Q8_0;
  bad[256 * 3 + 9] = 1.0f;
  gguf::Writer w2;
  w2.set_string("general.architecture", "llama");
  w2.set_u32("llama.block_count", 1);
  w2.add_tensor_data("blk.0.ffn_up.weight", GgmlType::F32, ne, bad.data());
  w2.write(dir + "/in2.gguf");
  const QuantizeSummary s = quantize_model(dir + "/in2.gguf", dir + "/out2.gguf", options);
  EXPECT_EQ(s.n_converted, 1u);
  EXPECT_EQ(gguf::File::open(dir + "/out2.gguf")->tensors()[0].type, GgmlType::Q8_0);
}

}  // namespace
}  // namespace boltrt

// End-to-end tests of `boltrt synth` and `boltrt inspect` (the built CLI, run as a process).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "quant/dequantize.h"
#include "support/paths.h"

namespace boltrt {
namespace {

struct CliRun {
  int rc;
  std::string out;
};

CliRun boltrt(const std::string& args) {
  CliRun r;
  r.rc = test::run_command(test::cli_path() + " " + args, &r.out);
  return r;
}

size_t count_lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

class CliInspect : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("cli_inspect");
    model_ = dir_ + "/tiny-q8.gguf";
    CliRun r = boltrt("synth --preset tiny --type q8_0 --seed 7 -t 2 -o " + model_);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("wrote " + model_ + ": gemma4 tiny (6 layers, q8_0 type), 99 tensors"),
              std::string::npos)
        << r.out;
  }
  static std::string dir_, model_;
};
std::string CliInspect::dir_, CliInspect::model_;

TEST_F(CliInspect, TextReport) {
  CliRun r = boltrt("inspect " + model_);
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* expected : {
           "architecture:   gemma4\n",
           "layers:         6\n",
           "embedding:      256\n",
           "vocab:          512\n",
           "metadata (",
           "  gemma4.attention.sliding_window_pattern  bool[6]        [true, true, false, true, "
           "true, false]\n",
           "string[512]    [\"<pad>\", \"<eos>\", \"<bos>\", \"<unk>\", \"<mask>\", \"<|turn>\", "
           "\"<turn|>\", \"<|think|>\", ... 504 more]\n",
           "tensors (99):\n",
           "  blk.0.attn_q.weight ",
           "totals by type:\n",
           "  f32          48 tensors",
           "  q8_0         51 tensors",
       }) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << "missing: " << expected << "\n" << r.out;
  }
  // The tensor table row: name, type, shape, bytes, offset as the reader sees them.
  auto f = gguf::File::open(model_);
  const gguf::TensorInfo* q = f->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  std::string row = fmt::format("{:<24} {:>14} {:>14}\n", "[256, 256]", q->nbytes, q->offset);
  EXPECT_NE(r.out.find(row), std::string::npos) << row;
}

TEST_F(CliInspect, JsonReport) {
  CliRun r = boltrt("inspect --json " + model_);
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "gemma4");
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["metadata"]["gemma4.block_count"], 6);
  EXPECT_EQ(j["metadata"]["gemma4.attention.layer_norm_rms_epsilon"], 1e-6);
  EXPECT_EQ(j["metadata"]["tokenizer.ggml.tokens"]["count"], 512);
  ASSERT_EQ(j["tensors"].size(), 99u);
  auto f = gguf::File::open(model_);
  uint64_t params = 0;
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const auto& t = f->tensors()[i];
    params += static_cast<uint64_t>(t.n_elements());
    EXPECT_EQ(j["tensors"][i]["name"], t.name);
    EXPECT_EQ(j["tensors"][i]["offset"], t.offset);
    EXPECT_EQ(j["tensors"][i]["bytes"], t.nbytes);
  }
  EXPECT_EQ(j["summary"]["params"], params);
  EXPECT_EQ(j["summary"]["by_type"]["q8_0"]["tensors"], 51);
}

TEST_F(CliInspect, TensorValuesAreDequantized) {
  auto f = gguf::File::open(model_);
  const gguf::TensorInfo* t = f->find_tensor("blk.1.ffn_up.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->type, GgmlType::Q8_0);
  std::vector<float> row(static_cast<size_t>(t->ne[0]));
  dequantize_row(t->type, f->tensor_data(*t), row.data(), t->ne[0]);
  CliRun r = boltrt("inspect --json --tensor blk.1.ffn_up.weight --values 5 " + model_);
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["values"].size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(j["values"][i].get<float>(), row[i]) << i;
  CliRun text = boltrt("inspect --tensor blk.1.ffn_up.weight --values 3 " + model_);
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find(fmt::format("{:.6g} {:.6g} {:.6g}\n", row[0], row[1], row[2])),
            std::string::npos)
      << text.out;
}

TEST_F(CliInspect, VocabularyOnlyFile) {
  std::string vocab = test::source_dir() + "/tests/data/vocab/ggml-vocab-gemma-4.gguf";
  if (!std::filesystem::exists(vocab)) {
    GTEST_SKIP() << vocab << " is missing (run tools/fetch-test-data.sh)";
  }
  CliRun r = boltrt("inspect " + vocab);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("vocab:          262144\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tensors (0):\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("parameters:     0 (0)\n"), std::string::npos) << r.out;
  EXPECT_LT(r.out.size(), 64u * 1024) << "long arrays must be abbreviated";
}

void expect_one_error_line(const CliRun& r, const std::string& message) {
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1u) << r.out;
  EXPECT_EQ(r.out, "boltrt: error: " + message + "\n");
}

TEST_F(CliInspect, HostileFilesGiveOneErrorLine) {
  std::string garbage = dir_ + "/garbage.gguf";
  std::ofstream(garbage, std::ios::binary) << "PK\x03\x04 this is a zip file, not GGUF";
  expect_one_error_line(boltrt("inspect " + garbage),
                        garbage + ": at byte 0: magic: expected \"GGUF\", found \"PK\\x03\\x04\"");

  // A model cut inside its tensor data.
  std::string cut = dir_ + "/cut.gguf";
  std::filesystem::copy_file(model_, cut, std::filesystem::copy_options::overwrite_existing);
  auto size = std::filesystem::file_size(cut);
  std::filesystem::resize_file(cut, size / 2);
  CliRun r = boltrt("inspect --json " + cut);
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(count_lines(r.out), 1u) << r.out;
  EXPECT_EQ(r.out.rfind("boltrt: error: " + cut + ": at byte ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("runs past the end of the file"), std::string::npos) << r.out;

  // A key length that points far past the end of the file.
  std::string hostile = dir_ + "/hostile.gguf";
  {
    std::ofstream out(hostile, std::ios::binary);
    const uint8_t header[] = {'G',  'G',  'U',  'F',  3,   0,   0,   0,   0,   0,   0,   0,
                              0,    0,    0,    0,    1,   0,   0,   0,   0,   0,   0,   0,
                              0xff, 0xff, 0xff, 0x0f, 0,   0,   0,   0,   'x', 'y', 'z', 'x',
                              'y',  'z',  'x',  'y',  'z', 'x', 'y', 'z', 'x', 'y', 'z', 'x'};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
  }
  expect_one_error_line(boltrt("inspect " + hostile),
                        hostile +
                            ": at byte 24: key #0: string length 268435455 runs past the end "
                            "of the file (16 bytes left)");

  expect_one_error_line(boltrt("inspect " + dir_ + "/missing.gguf"),
                        dir_ + "/missing.gguf: cannot open: No such file or directory");
  expect_one_error_line(boltrt("inspect --tensor nope " + model_),
                        model_ + ": no tensor named 'nope'");
}

TEST_F(CliInspect, SynthRejectsBadOptions) {
  CliRun r = boltrt("synth --preset huge -o " + dir_ + "/x.gguf");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("boltrt: error: unknown gemma4 preset 'huge'"), std::string::npos) << r.out;
  r = boltrt("synth --type q3_k -o " + dir_ + "/x.gguf");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("unknown weight type 'q3_k'"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x.gguf"));
}

}  // namespace
}  // namespace boltrt

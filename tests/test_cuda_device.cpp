// Device selection (--device cpu|cuda|auto, ModelOptions::device), testable on any machine:
// without CUDA in the build or without a usable GPU, "auto" runs on the CPU and "cuda" is one
// clear error line; with a GPU, "auto" picks it and generation on CUDA produces text.
#include <boltrt/boltrt.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "backend/device.h"
#include "model/gemma4_synth.h"
#include "model/qwen35_synth.h"
#include "support/paths.h"
#include "util/error.h"
#if defined(BOLTRT_CUDA_EMULATOR)
#include "backend/cuda_emulator/emulator.h"
#endif

namespace boltrt {
namespace {

using test::shell_quote;

bool cuda_usable() {
  return cuda_unavailable_reason().empty();
}

TEST(CudaDevice, NamesResolve) {
  EXPECT_EQ(resolve_device("cpu"), ComputeDevice::kCpu);
#if defined(BOLTRT_CUDA_EMULATOR)
  // The emulated device is for tests: only an explicit --device cuda selects it.
  ASSERT_TRUE(cuda_usable());
  EXPECT_EQ(resolve_device("auto"), ComputeDevice::kCpu);
  EXPECT_EQ(resolve_device("cuda"), ComputeDevice::kCuda);
#else
  EXPECT_EQ(resolve_device("auto"), cuda_usable() ? ComputeDevice::kCuda : ComputeDevice::kCpu);
#endif
  try {
    resolve_device("gpu");
    FAIL() << "'gpu' was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown device 'gpu' (auto, cpu or cuda)");
  }
}

TEST(CudaDevice, CudaWithoutAUsableDeviceIsOneClearLine) {
#if defined(BOLTRT_CUDA_EMULATOR)
  emu::select_device("none");  // the emulator without a device: cudaGetDeviceCount says 0
  struct Restore {
    ~Restore() { emu::select_device("h200"); }
  } restore;
#endif
  if (cuda_usable()) {
    // A real GPU is present: hide it from a child process (the CUDA runtime reads
    // CUDA_VISIBLE_DEVICES once, at its start), where --device cuda must be one error line and
    // --device auto must fall back to the CPU.
    const std::string model = shell_quote(test::source_dir() + "/models/tiny/tiny-q8_0.gguf");
    const std::string base = "CUDA_VISIBLE_DEVICES= " + shell_quote(test::cli_path()) +
                             " generate -m " + model + " -p 'Mr. Darcy' -n 4 --temp 0 ";
    const test::CommandOutput cuda = test::run_command_split(base + "--device cuda");
    EXPECT_EQ(cuda.status, 1) << cuda.err;
    EXPECT_EQ(cuda.err.rfind("boltrt: error: device cuda requested but no usable CUDA device: ", 0),
              0u)
        << cuda.err;
    EXPECT_EQ(std::count(cuda.err.begin(), cuda.err.end(), '\n'), 1) << cuda.err;
    const test::CommandOutput automatic = test::run_command_split(base + "--device auto");
    EXPECT_EQ(automatic.status, 0) << automatic.err;
    EXPECT_FALSE(automatic.out.empty());
    return;
  }
  EXPECT_EQ(cuda_built(), cuda_unavailable_reason().find("no CUDA backend") == std::string::npos);
  try {
    resolve_device("cuda");
    FAIL() << "cuda resolved without a device";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("device cuda requested but no usable CUDA device: ", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_GT(what.size(), std::string("device cuda requested but no usable CUDA device: ").size());
  }
}

class CudaDeviceModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("cuda_device");
    path_ = dir_ + "/tiny.gguf";
    model::write_gemma4_synth(model::gemma4_preset("tiny"), {}, path_);
    qwen35_path_ = dir_ + "/tiny-qwen35.gguf";
    model::write_qwen35_synth(model::qwen35_preset("tiny"), {}, qwen35_path_);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string dir_, path_, qwen35_path_;
};
std::string CudaDeviceModel::dir_, CudaDeviceModel::path_, CudaDeviceModel::qwen35_path_;

TEST_F(CudaDeviceModel, ApiDeviceOption) {
  ModelOptions options;
  options.context = 64;
  options.device = Device::kCpu;
  EXPECT_NO_THROW(Model::load(path_, options));
  options.device = Device::kAuto;
  EXPECT_NO_THROW(Model::load(path_, options));
  options.device = Device::kCuda;
  if (cuda_usable()) {
    auto model = Model::load(path_, options);
    Session session(model);
    Request request;
    request.prompt = "hello";
    request.max_tokens = 4;
    request.sampling.temperature = 0;
    EXPECT_FALSE(session.generate(request).tokens.empty());
    // The batch engine's speculative loop runs CPU sessions: a draft on the device is one
    // clear error, not a draft silently left out (any existing file: refused before loading).
    options.draft = path_;
    try {
      Model::load(path_, options);
      FAIL() << "a draft with device cuda loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--draft with --device cuda"), std::string::npos)
          << e.what();
    }
  } else {
    EXPECT_THROW(Model::load(path_, options), Error);
  }
}

// Both architectures with a CUDA runtime (Gemma 4, Qwen3.5): generate, batch and bench take
// --device; on a device (or the emulator) they run there and report the upload, elsewhere
// --device cuda is one error line.
TEST_F(CudaDeviceModel, CliDeviceFlag) {
  const std::string cli = shell_quote(test::cli_path()) + " ";
  const std::string requests = dir_ + "/requests.jsonl";
  std::ofstream(requests) << R"({"id": "a", "prompt": "hello", "max_tokens": 3})"
                          << "\n"
                          << R"({"id": "b", "prompt": "the cat", "max_tokens": 3})"
                          << "\n";
  for (const std::string& path : {path_, qwen35_path_}) {
    const std::string model = " -m " + shell_quote(path);
    for (const std::string command : {"generate", "bench", "batch"}) {
      const std::string args = command == "generate" ? model + " -p hi -n 2 --temp 0 -c 64"
                               : command == "bench"
                                   ? model + " -p 4 -n 2 -r 1"
                                   : model + " --input " + shell_quote(requests) + " --output " +
                                         shell_quote(dir_ + "/out.jsonl") +
                                         " --overwrite --temp 0 -c 64 --parallel 2";
      const auto cpu = test::run_command_split(cli + command + args + " --device cpu");
      EXPECT_EQ(cpu.status, 0) << command << " " << path << ": " << cpu.err;
      const auto bad = test::run_command_split(cli + command + args + " --device gpu");
      EXPECT_EQ(bad.status, 2) << command << ": " << bad.err;
      const auto cuda = test::run_command_split(cli + command + args + " --device cuda");
      if (cuda_usable()) {
        EXPECT_EQ(cuda.status, 0) << command << " " << path << ": " << cuda.err;
        // generate and bench print the load report; batch its summary
        EXPECT_NE(cuda.err.find(command == "batch" ? "2 written now" : "MiB of device memory"),
                  std::string::npos)
            << cuda.err;
      } else {
        EXPECT_EQ(cuda.status, 1) << command << ": " << cuda.err;
        EXPECT_EQ(
            cuda.err.rfind("boltrt: error: device cuda requested but no usable CUDA device: ", 0),
            0u)
            << cuda.err;
        EXPECT_EQ(std::count(cuda.err.begin(), cuda.err.end(), '\n'), 1) << cuda.err;
      }
    }
  }
}

}  // namespace
}  // namespace boltrt

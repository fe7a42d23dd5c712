// Device memory planning against real device sizes (the emulator's profiles,
// src/backend/cuda_emulator/runtime.cpp): full-size Gemma 4 layouts written as layout-only
// (zero-weight, sparse) files, so nothing of their 5-18 GB is generated or stored.
//   - E4B Q4_K_M with a 4K context fits a Jetson Orin Nano 8GB (the device NVIDIA quotes 15.5
//     tokens/s on): weights + KV cache + scratch within what cudaMemGetInfo reports free;
//   - 31B Q4_K_M does not fit an RTX 5070 (12 GB): loading fails before allocating anything,
//     with one line naming the MiB needed and free.
// Emulator builds only (the profiles are the emulator's).
#if defined(BOLTRT_CUDA_EMULATOR)
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "backend/cuda/gemma4_cuda.h"
#include "backend/cuda_emulator/emulator.h"
#include "gguf/gguf.h"
#include "model/gemma4.h"
#include "model/gemma4_session.h"
#include "model/gemma4_synth.h"
#include "support/paths.h"
#include "util/error.h"

namespace boltrt {
namespace {

std::string layout_file(const std::string& preset) {
  const std::string path = test::scratch_dir("cuda_memory_plan") + "/" + preset + ".gguf";
  if (!std::filesystem::exists(path)) {
    model::Gemma4SynthOptions options;
    options.type = "q4_k_m";
    options.zero_weights = true;
    model::write_gemma4_synth(model::gemma4_preset(preset), options, path);
  }
  return path;
}

class CudaMemoryPlan : public ::testing::Test {
 protected:
  void TearDown() override { emu::select_device("h200"); }
};

TEST_F(CudaMemoryPlan, E4bQ4KMWith4kContextFitsAnOrinNano) {
  emu::select_device("orin-nano");
  auto model = Gemma4Model::load(layout_file("e4b"));
  SessionOptions so;
  so.n_ctx = 4096;
  so.kv_type = KvType::F16;
  const size_t weights = cuda::gemma4_cuda_weight_bytes(*model);
  const size_t session = cuda::gemma4_cuda_session_memory(*model, so).total();
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  EXPECT_EQ(cuda::device_memory_shortfall("E4B", weights + session, free_bytes, total_bytes), "")
      << "weights " << weights / 1048576 << " MiB + session " << session / 1048576 << " MiB";
  // On the device: every tensor of the file except the per-layer token table, which stays in
  // host memory (only a batch's rows move), and the one-value layer output scales (read as
  // floats on the host), each allocation rounded up to 256 bytes.
  uint64_t file_tensors = 0;
  for (const gguf::TensorInfo& t : model->file().tensors()) {
    if (t.nbytes > 4) file_tensors += t.nbytes;
  }
  const WeightView& ple = model->per_layer_token_embd();
  const uint64_t ple_bytes = static_cast<uint64_t>(ple.rows) * ple.row_stride;
  EXPECT_GE(weights, file_tensors - ple_bytes);
  EXPECT_LT(weights, file_tensors - ple_bytes + 256 * model->file().tensors().size());
  std::printf(
      "E4B Q4_K_M on %s: weights %.0f MiB + session (4K, F16 KV) %.0f MiB, %.0f of %.0f "
      "MiB free\n",
      emu::current_profile().name.c_str(), weights / 1048576.0, session / 1048576.0,
      free_bytes / 1048576.0, total_bytes / 1048576.0);
}

TEST_F(CudaMemoryPlan, ThirtyOneBQ4KMOnAnRtx5070FailsWithOneLine) {
  emu::select_device("rtx5070");
  auto model = Gemma4Model::load(layout_file("31b"));
  size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  try {
    cuda::Gemma4CudaModel device(*model);
    FAIL() << "31B Q4_K_M was loaded onto a 12 GB device";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find("out of device memory: the weights need "), std::string::npos) << what;
    EXPECT_NE(what.find("MiB"), std::string::npos) << what;
    const size_t need = cuda::gemma4_cuda_weight_bytes(*model);
    EXPECT_NE(what.find(fmt::format("{:.1f} MiB", need / 1048576.0)), std::string::npos) << what;
  }
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free_before);  // nothing was allocated
}

}  // namespace
}  // namespace boltrt
#endif

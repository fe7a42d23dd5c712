#include "backend/device.h"

#include <fmt/format.h>

#include <cstdlib>
#include <mutex>

#include "gguf/gguf.h"
#include "model/gemma4.h"
#include "model/qwen35.h"
#include "util/error.h"
#if defined(BOLTRT_HAVE_CUDA)
#include "backend/cuda/gemma4_cuda.h"
#include "backend/cuda/qwen35_cuda.h"
#include "backend/cuda/self_check.h"
#if defined(BOLTRT_CUDA_EMULATOR)
#include "backend/cuda_emulator/emulator.h"
#endif
#endif

namespace boltrt {

bool cuda_built() {
#if defined(BOLTRT_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

std::string cuda_unavailable_reason() {
#if defined(BOLTRT_HAVE_CUDA)
  std::string why;
  if (cuda::probe_device(0, &why)) return "";
  return why.empty() ? "no usable CUDA device" : why;
#else
  return "this build has no CUDA backend (configure with -DBOLTRT_CUDA=ON)";
#endif
}

namespace {

// On a real GPU, the quick self-check the first time a process uses the device: "" when it
// passed, else the one line that says which kernel disagreed with the CPU. Under the emulator
// the kernels are checked by the test suite instead (and by `boltrt selftest`); running the
// check on every load there would only cost time. BOLTRT_CUDA_SELFCHECK=0 skips it,
// =1 forces it (also on the emulator).
std::string device_self_check_failure() {
#if defined(BOLTRT_HAVE_CUDA)
  static const std::string failure = [] {
    const char* env = std::getenv("BOLTRT_CUDA_SELFCHECK");
    const std::string mode = env ? env : "";
#if defined(BOLTRT_CUDA_EMULATOR)
    if (mode != "1") return std::string();
#endif
    if (mode == "0") return std::string();
    try {
      const cuda::SelfCheckReport report = cuda::self_check(/*full=*/false);
      const std::string bad = report.first_failure();
      return bad.empty() ? bad : "the CUDA self-check failed: " + bad;
    } catch (const Error& e) {
      return std::string("the CUDA self-check failed: ") + e.what();
    }
  }();
  return failure;
#else
  return "";
#endif
}

}  // namespace

ComputeDevice resolve_device(std::string_view name) {
  if (name == "cpu") return ComputeDevice::kCpu;
  if (name != "cuda" && name != "auto") {
    fail("unknown device '{}' (auto, cpu or cuda)", name);
  }
#if defined(BOLTRT_CUDA_EMULATOR)
  // The emulator is a test device: only an explicit --device cuda runs on it.
  if (name == "auto") return ComputeDevice::kCpu;
#endif
  const std::string why = cuda_unavailable_reason();
  if (!why.empty()) {
    if (name == "cuda") fail("device cuda requested but no usable CUDA device: {}", why);
    return ComputeDevice::kCpu;
  }
  if (const std::string bad = device_self_check_failure(); !bad.empty()) {
    if (name == "cuda") fail("{}", bad);
    static std::once_flag said;
    std::call_once(said, [&] { fmt::print(stderr, "boltrt: {}; running on the CPU\n", bad); });
    return ComputeDevice::kCpu;
  }
  return ComputeDevice::kCuda;
}

namespace {

// "auto" falls back to the CPU when `reason` (the model's unsupported-layout reason, computed
// only when CUDA is usable) is not empty; "cuda" then throws it.
template <class Model, class Reason>
ComputeDevice resolve_for_model(std::string_view name, const Model& model, Reason reason) {
  const ComputeDevice device = resolve_device(name);
  if (device != ComputeDevice::kCuda) return device;
  const std::string why = reason(model);
  if (why.empty()) return device;
  if (name == "cuda") fail("{}: cannot run on CUDA: {}", model.file().path(), why);
  return ComputeDevice::kCpu;
}

#if defined(BOLTRT_HAVE_CUDA)
// A model's upload (CudaModel) and its sessions (CudaSession); both runtimes share the report.
template <class CudaModel, class CudaSession>
class CudaRuntimeImpl : public CudaRuntime {
 public:
  template <class HostModel>
  explicit CudaRuntimeImpl(const HostModel& model) : model_(std::make_shared<CudaModel>(model)) {}

  std::unique_ptr<LanguageModel> new_session(const SessionOptions& options) const override {
    return std::make_unique<CudaSession>(model_, options);
  }

  std::string describe() const override {
    const cuda::DeviceInfo& d = model_->device();
    constexpr double kMiB = 1024.0 * 1024.0;
    std::string text = fmt::format(
        "CUDA device {} ({}, sm_{}{}): weights {:.0f} MiB of device memory, {:.0f} of {:.0f} MiB "
        "free after loading",
        d.index, d.name, d.compute_major, d.compute_minor,
        static_cast<double>(model_->weight_bytes()) / kMiB,
        static_cast<double>(model_->free_bytes_after_load()) / kMiB,
        static_cast<double>(model_->total_bytes()) / kMiB);
    if (model_->converted_tensors() > 0) {
      text += fmt::format(" ({} tensors converted to F16)", model_->converted_tensors());
    }
    return text;
  }

 private:
  std::shared_ptr<const CudaModel> model_;
};
#endif

// The checks every upload makes first, and the one line that says the device is emulated.
void before_upload() {
#if defined(BOLTRT_HAVE_CUDA)
  if (const std::string why = cuda_unavailable_reason(); !why.empty()) {
    fail("no usable CUDA device: {}", why);
  }
#if defined(BOLTRT_CUDA_EMULATOR)
  // Once per process: whoever reads the output knows no GPU ran it.
  static std::once_flag said;
  std::call_once(said, [] { fmt::print(stderr, "boltrt: {}\n", emu::describe()); });
#endif
#else
  fail("{}", cuda_unavailable_reason());
#endif
}

}  // namespace

ComputeDevice resolve_device(std::string_view name, const Gemma4Model& model) {
#if defined(BOLTRT_HAVE_CUDA)
  return resolve_for_model(name, model, cuda::gemma4_unsupported_reason);
#else
  return resolve_for_model(name, model, [](const Gemma4Model&) { return std::string(); });
#endif
}

ComputeDevice resolve_device(std::string_view name, const Qwen35Model& model) {
#if defined(BOLTRT_HAVE_CUDA)
  return resolve_for_model(name, model, cuda::qwen35_unsupported_reason);
#else
  return resolve_for_model(name, model, [](const Qwen35Model&) { return std::string(); });
#endif
}

std::shared_ptr<const CudaRuntime> load_cuda(const Gemma4Model& model) {
  before_upload();
#if defined(BOLTRT_HAVE_CUDA)
  return std::make_shared<CudaRuntimeImpl<cuda::Gemma4CudaModel, cuda::Gemma4CudaSession>>(model);
#else
  (void)model;
  return nullptr;
#endif
}

std::shared_ptr<const CudaRuntime> load_cuda(const Qwen35Model& model) {
  before_upload();
#if defined(BOLTRT_HAVE_CUDA)
  return std::make_shared<CudaRuntimeImpl<cuda::Qwen35CudaModel, cuda::Qwen35CudaSession>>(model);
#else
  (void)model;
  return nullptr;
#endif
}

}  // namespace boltrt

// Where a model runs: `--device cpu|cuda|auto` on the CLI and ModelOptions::device in the API.
// Always compiled; without CUDA in the build "cuda" is an error and "auto" is the CPU.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "runtime/language_model.h"
#include "runtime/session_options.h"

namespace boltrt {

class Gemma4Model;
class Qwen35Model;

enum class ComputeDevice { kCpu, kCuda };

// Whether this build has the CUDA backend.
bool cuda_built();

// "" when CUDA device 0 can run the kernels, else why not ("this build has no CUDA backend",
// "no CUDA-capable device is detected", "compute capability 7.5 < 8.0", ...).
std::string cuda_unavailable_reason();

// Resolves a device name: "cpu"; "cuda" (throws boltrt::Error, one line, when no usable CUDA
// device exists); "auto" (CUDA when usable, else the CPU). Any other name throws.
ComputeDevice resolve_device(std::string_view name);

// The same for a loaded model: "auto" also falls back to the CPU when the model's layout cannot
// run on CUDA (a head size the kernels lack, ...); "cuda" then throws naming the reason.
ComputeDevice resolve_device(std::string_view name, const Gemma4Model& model);
ComputeDevice resolve_device(std::string_view name, const Qwen35Model& model);

// A model's weights on the CUDA device, and sessions over them.
class CudaRuntime {
 public:
  virtual ~CudaRuntime() = default;
  // A sequence decoding on the device (F16 or Q8_0 KV cache in device memory).
  virtual std::unique_ptr<LanguageModel> new_session(const SessionOptions& options) const = 0;
  // One line for the load report: "CUDA device 0 (NVIDIA H200): weights 4,210 MiB, ...".
  virtual std::string describe() const = 0;
};

// Uploads `model` (which must outlive the result) to CUDA device 0. Throws boltrt::Error when
// the build has no CUDA, the device is unusable, the layout is unsupported, or device memory
// is short (naming the MiB needed).
std::shared_ptr<const CudaRuntime> load_cuda(const Gemma4Model& model);
std::shared_ptr<const CudaRuntime> load_cuda(const Qwen35Model& model);

}  // namespace boltrt

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

enum class ComputeDevice { kCpu, kCuda };

// Whether this build has the CUDA backend.
bool cuda_built();

// "" when CUDA device 0 can run the kernels, else why not ("this build has no CUDA backend",
// "no CUDA-capable device is detected", "compute capability 7.5 < 8.0", ...).
std::string cuda_unavailable_reason();

// Resolves a device name: "cpu"; "cuda" (throws boltrt::Error, one line, when no usable CUDA
// device exists); "auto" (CUDA when usable, else the CPU). Any other name throws.
ComputeDevice resolve_device(std::string_view name);

// The same for a loaded Gemma 4 model: "auto" also falls back to the CPU when the model's
// layout cannot run on CUDA (MoE layers, ...); "cuda" then throws naming the reason.
ComputeDevice resolve_device(std::string_view name, const Gemma4Model& model);

// A Gemma 4 model's weights on the CUDA device, and sessions over them.
class CudaGemma4 {
 public:
  virtual ~CudaGemma4() = default;
  // A sequence decoding on the device (F16 KV cache in device memory).
  virtual std::unique_ptr<LanguageModel> new_session(const SessionOptions& options) const = 0;
  // One line for the load report: "CUDA device 0 (NVIDIA H200): weights 4,210 MiB, ...".
  virtual std::string describe() const = 0;
};

// Uploads `model` (which must outlive the result) to CUDA device 0. Throws boltrt::Error when
// the build has no CUDA, the device is unusable, the layout is unsupported, or device memory
// is short (naming the MiB needed).
std::shared_ptr<const CudaGemma4> load_cuda_gemma4(const Gemma4Model& model);

}  // namespace boltrt

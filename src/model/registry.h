// The architecture registry: the one place that maps a GGUF file's general.architecture to the
// code that runs it, so the layers above src/model/ (api, generate, tools) name no architecture.
//
// Architectures with their own device runtime, drafts and multi-sequence batch path (gemma4)
// are loaded by those paths directly; every other registered architecture runs through this
// generic interface: CPU sessions (LanguageModel), no CUDA runtime, no speculative draft.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/language_model.h"
#include "runtime/session_options.h"

namespace boltrt {

namespace gguf {
class File;
}
class ThreadPool;

class LoadedModel {
 public:
  virtual ~LoadedModel() = default;
  virtual const gguf::File& file() const = 0;
  virtual int64_t n_ctx_train() const = 0;
  // A new sequence on the CPU. The model and pool must outlive it; pool may be null.
  virtual std::unique_ptr<LanguageModel> new_session(const SessionOptions& options,
                                                     ThreadPool* pool) const = 0;
};

// Every architecture boltrt runs.
std::vector<std::string> supported_architectures();

// Loads `path` when its architecture runs through LoadedModel; returns null when it is an
// architecture with its own full runtime (callers load it with that runtime: Gemma4Model).
// An architecture boltrt does not know is one clear error naming it and the supported ones.
std::unique_ptr<LoadedModel> load_generic_model(const std::string& path);

}  // namespace boltrt

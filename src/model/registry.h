// The architecture registry: the one place that maps a GGUF file's general.architecture to the
// code that runs it, so the layers above src/model/ (api, generate, tools) name no architecture.
//
// Architectures with their own device runtime and drafts (gemma4) are loaded by those paths
// directly; every other registered architecture runs through this generic interface: CPU
// sessions (LanguageModel) and multi-sequence batches (MultiSequenceModel), no CUDA runtime, no
// speculative draft.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/language_model.h"
#include "runtime/multi_sequence.h"
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
  // n sequences decoded together (`batch`, `serve`). The default interleaves n new_session()s
  // (each step reads the weights once per sequence); a model with a batched forward pass
  // overrides it (model/batched_sessions.h).
  virtual std::unique_ptr<MultiSequenceModel> new_sequences(int n, const SessionOptions& options,
                                                            ThreadPool* pool) const;
  // The one error each for what the generic path does not run: a CUDA device, a draft.
  [[noreturn]] void fail_no_cuda() const;
  [[noreturn]] void fail_no_draft() const;
};

// Every architecture boltrt runs.
std::vector<std::string> supported_architectures();

// Loads the opened `file` when its architecture runs through LoadedModel (the model takes the
// file); returns null and leaves `file` to the caller when it is the architecture with its own
// full runtime (callers construct Gemma4Model from it: the file is opened and parsed once).
// An architecture boltrt does not know is one clear error naming it and the supported ones.
std::unique_ptr<LoadedModel> load_generic_model(std::unique_ptr<gguf::File>& file);

}  // namespace boltrt

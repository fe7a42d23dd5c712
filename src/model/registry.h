// The architecture registry: the one place that maps a GGUF file's general.architecture to the
// code that runs it, so the layers above src/model/ (api, generate, tools) name no architecture.
//
// A LoadedModel makes CPU sessions (LanguageModel) and multi-sequence batches
// (MultiSequenceModel) for every architecture; Gemma 4 and Qwen3.5 also have a CUDA runtime and
// take DFlash drafts; what an architecture lacks is one clear error (fail_no_cuda,
// fail_no_draft).
#pragma once
#include <cstdint>
#include <functional>
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
class DFlashDraft;

class LoadedModel {
 public:
  virtual ~LoadedModel() = default;
  virtual const gguf::File& file() const = 0;
  virtual int64_t n_ctx_train() const = 0;
  // The sizes a DFlash draft for this model must fit: hidden size, trunk layers, vocabulary.
  struct DraftShape {
    int64_t n_embd = 0, n_layer = 0, n_vocab = 0;
  };
  virtual DraftShape draft_shape() const = 0;
  // A new sequence on the CPU. The model and pool must outlive it; pool may be null.
  virtual std::unique_ptr<LanguageModel> new_session(const SessionOptions& options,
                                                     ThreadPool* pool) const = 0;
  // n sequences decoded together (`batch`, `serve`). The default interleaves n new_session()s
  // (each step reads the weights once per sequence); a model with a batched forward pass
  // overrides it (model/batched_sessions.h).
  virtual std::unique_ptr<MultiSequenceModel> new_sequences(int n, const SessionOptions& options,
                                                            ThreadPool* pool) const;
  // Whether `device` ("auto", "cpu" or "cuda") puts the model on the CUDA device. "cuda" throws
  // one boltrt::Error when it cannot run there; "auto" then means the CPU. Default (no CUDA
  // runtime for the architecture): "cuda" is fail_no_cuda().
  virtual bool on_cuda(const std::string& device) const;
  // Uploads the weights to the CUDA device once; each call of the result makes a sequence
  // decoding there. The model must outlive the result. Default: fail_no_cuda().
  using DeviceSessions = std::function<std::unique_ptr<LanguageModel>(const SessionOptions&)>;
  virtual DeviceSessions cuda_sessions() const;
  // One line for the load report when on the device ("CUDA device 0 (...): weights ...").
  virtual std::string cuda_description() const { return ""; }
  // A DFlash draft for this model. The draft borrows the model's embedding and output head;
  // `owner` (the pointer that owns this model) is kept alive by the returned draft. Default:
  // fail_no_draft().
  virtual std::shared_ptr<const DFlashDraft> load_draft(
      const std::string& path, std::shared_ptr<const LoadedModel> owner) const;
  // The one error each for what an architecture does not run: a CUDA device, a draft.
  [[noreturn]] void fail_no_cuda() const;
  [[noreturn]] void fail_no_draft() const;
};

// Every architecture boltrt runs.
std::vector<std::string> supported_architectures();

// Loads the opened `file` (the model takes it: the file is opened and parsed once). An
// architecture boltrt does not know is one clear error naming it and the supported ones.
std::unique_ptr<LoadedModel> load_model(std::unique_ptr<gguf::File> file);

}  // namespace boltrt

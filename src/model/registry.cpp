#include "model/registry.h"

#include "backend/device.h"
#include "gguf/gguf.h"
#include "model/batched_sessions.h"
#include "model/dflash.h"
#include "model/gemma4.h"
#include "model/gemma4_session.h"
#include "model/qwen35.h"
#include "model/qwen35_session.h"
#include "util/error.h"

namespace boltrt {

namespace {

// A model whose sessions (Session(model, options, pool)) run on the CPU and batch several
// sequences in one forward pass (Session::decode_batch, model/batched_sessions.h).
template <class Model, class Session>
class CpuLoaded : public LoadedModel {
 public:
  explicit CpuLoaded(std::unique_ptr<gguf::File> file)
      : model_(std::make_unique<Model>(std::move(file))) {}
  const gguf::File& file() const override { return model_->file(); }
  int64_t n_ctx_train() const override { return model_->config().n_ctx_train; }
  DraftShape draft_shape() const override {
    const DFlashTarget t(*model_);
    return {t.n_embd, t.n_layer, t.n_vocab};
  }
  std::unique_ptr<LanguageModel> new_session(const SessionOptions& options,
                                             ThreadPool* pool) const override {
    model_->pack_weights();
    return std::make_unique<Session>(*model_, options, pool);
  }
  std::unique_ptr<MultiSequenceModel> new_sequences(int n, const SessionOptions& options,
                                                    ThreadPool* pool) const override {
    if (n < 1) fail("at least one sequence is needed, not {}", n);
    model_->pack_weights();
    std::vector<std::unique_ptr<Session>> sessions;
    for (int i = 0; i < n; ++i)
      sessions.push_back(std::make_unique<Session>(*model_, options, pool));
    return std::make_unique<BatchedSessions<Session>>(std::move(sessions));
  }

 protected:
  std::unique_ptr<Model> model_;
};

// A model that also runs on the CUDA device (backend/device.h: resolve_device and load_cuda
// for Model).
template <class Model, class Session>
class CudaLoaded : public CpuLoaded<Model, Session> {
 public:
  using CpuLoaded<Model, Session>::CpuLoaded;
  bool on_cuda(const std::string& device) const override {
    return resolve_device(device, *this->model_) == ComputeDevice::kCuda;
  }
  LoadedModel::DeviceSessions cuda_sessions() const override {
    if (!cuda_) cuda_ = load_cuda(*this->model_);
    std::shared_ptr<const CudaRuntime> cuda = cuda_;
    return [cuda](const SessionOptions& options) { return cuda->new_session(options); };
  }
  std::string cuda_description() const override { return cuda_ ? cuda_->describe() : ""; }

 private:
  mutable std::shared_ptr<const CudaRuntime> cuda_;  // uploaded on the first cuda_sessions()
};

// A model that also takes DFlash drafts (DFlashTarget: Gemma 4, Qwen3.5). The draft borrows
// the model's embedding and head.
template <class Model, class Session>
class DraftLoaded : public CudaLoaded<Model, Session> {
 public:
  using CudaLoaded<Model, Session>::CudaLoaded;
  std::shared_ptr<const DFlashDraft> load_draft(
      const std::string& path, std::shared_ptr<const LoadedModel> owner) const override {
    return std::shared_ptr<const DFlashDraft>(DFlashDraft::load(path, *this->model_).release(),
                                              [owner](const DFlashDraft* d) { delete d; });
  }
};

using Gemma4Loaded = DraftLoaded<Gemma4Model, Gemma4Session>;
using Qwen35Loaded = DraftLoaded<Qwen35Model, Qwen35Session>;

}  // namespace

std::vector<std::string> supported_architectures() {
  return {"gemma4", "qwen35"};
}

std::unique_ptr<MultiSequenceModel> LoadedModel::new_sequences(int n, const SessionOptions& options,
                                                               ThreadPool* pool) const {
  if (n < 1) fail("at least one sequence is needed, not {}", n);
  std::vector<std::unique_ptr<LanguageModel>> sessions;
  for (int i = 0; i < n; ++i) sessions.push_back(new_session(options, pool));
  return std::make_unique<InterleavedSessions>(std::move(sessions));
}

bool LoadedModel::on_cuda(const std::string& device) const {
  if (device == "cuda") fail_no_cuda();
  return false;
}

LoadedModel::DeviceSessions LoadedModel::cuda_sessions() const {
  fail_no_cuda();
}

std::shared_ptr<const DFlashDraft> LoadedModel::load_draft(
    const std::string&, std::shared_ptr<const LoadedModel>) const {
  fail_no_draft();
}

void LoadedModel::fail_no_cuda() const {
  fail("{}: --device cuda: boltrt has no CUDA runtime for architecture '{}' (use the CPU)",
       file().path(), file().architecture());
}

void LoadedModel::fail_no_draft() const {
  fail("{}: --draft: speculative drafts are not supported for architecture '{}'", file().path(),
       file().architecture());
}

std::unique_ptr<LoadedModel> load_model(std::unique_ptr<gguf::File> file) {
  const std::string arch = file->architecture();
  if (arch == "gemma4") return std::make_unique<Gemma4Loaded>(std::move(file));
  if (arch == "qwen35") return std::make_unique<Qwen35Loaded>(std::move(file));
  std::string known;
  for (const std::string& a : supported_architectures()) known += (known.empty() ? "" : ", ") + a;
  fail("{}: architecture '{}' is not supported (supported: {})", file->path(), arch, known);
}

}  // namespace boltrt

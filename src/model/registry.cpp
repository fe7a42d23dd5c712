#include "model/registry.h"

#include "gguf/gguf.h"
#include "model/batched_sessions.h"
#include "model/qwen35.h"
#include "model/qwen35_session.h"
#include "util/error.h"

namespace boltrt {

namespace {

// The architecture with its own runtime (CUDA, DFlash drafts, batched sequences).
constexpr const char* kFullRuntime = "gemma4";

class Qwen35Loaded : public LoadedModel {
 public:
  explicit Qwen35Loaded(std::unique_ptr<gguf::File> file)
      : model_(std::make_unique<Qwen35Model>(std::move(file))) {}
  const gguf::File& file() const override { return model_->file(); }
  int64_t n_ctx_train() const override { return model_->config().n_ctx_train; }
  std::unique_ptr<LanguageModel> new_session(const SessionOptions& options,
                                             ThreadPool* pool) const override {
    return std::make_unique<Qwen35Session>(*model_, options, pool);
  }
  std::unique_ptr<MultiSequenceModel> new_sequences(int n, const SessionOptions& options,
                                                    ThreadPool* pool) const override {
    if (n < 1) fail("at least one sequence is needed, not {}", n);
    std::vector<std::unique_ptr<Qwen35Session>> sessions;
    for (int i = 0; i < n; ++i)
      sessions.push_back(std::make_unique<Qwen35Session>(*model_, options, pool));
    return std::make_unique<BatchedSessions<Qwen35Session>>(std::move(sessions));
  }

 private:
  std::unique_ptr<Qwen35Model> model_;
};

}  // namespace

std::vector<std::string> supported_architectures() {
  return {kFullRuntime, "qwen35"};
}

std::unique_ptr<MultiSequenceModel> LoadedModel::new_sequences(int n, const SessionOptions& options,
                                                               ThreadPool* pool) const {
  if (n < 1) fail("at least one sequence is needed, not {}", n);
  std::vector<std::unique_ptr<LanguageModel>> sessions;
  for (int i = 0; i < n; ++i) sessions.push_back(new_session(options, pool));
  return std::make_unique<InterleavedSessions>(std::move(sessions));
}

void LoadedModel::fail_no_cuda() const {
  fail("{}: --device cuda: boltrt has no CUDA runtime for architecture '{}' (use the CPU)",
       file().path(), file().architecture());
}

void LoadedModel::fail_no_draft() const {
  fail("{}: --draft: speculative drafts are not supported for architecture '{}'", file().path(),
       file().architecture());
}

std::unique_ptr<LoadedModel> load_generic_model(std::unique_ptr<gguf::File>& file) {
  const std::string arch = file->architecture();
  if (arch == kFullRuntime) return nullptr;
  if (arch == "qwen35") return std::make_unique<Qwen35Loaded>(std::move(file));
  std::string known;
  for (const std::string& a : supported_architectures()) known += (known.empty() ? "" : ", ") + a;
  fail("{}: architecture '{}' is not supported (supported: {})", file->path(), arch, known);
}

}  // namespace boltrt

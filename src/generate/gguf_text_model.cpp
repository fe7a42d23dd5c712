#include "generate/gguf_text_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "generate/sampling_defaults.h"
#include "generate/speculative.h"
#include "gguf/gguf.h"
#include "grammar/token_vocabulary.h"
#include "model/dflash.h"
#include "model/registry.h"
#include "runtime/thread_pool.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace boltrt {
namespace {

// A session that can always be emptied: a reset starts a fresh session from the model (and
// asks it for the hidden-state taps a draft set), so a model whose cache cannot roll back to 0
// (a wrapped sliding-window ring) still starts over.
class ResettableSession : public LanguageModel {
 public:
  ResettableSession(std::shared_ptr<const LoadedModel> model, const SessionOptions& options,
                    ThreadPool* pool)
      : model_(std::move(model)), options_(options), pool_(pool) {
    session_ = model_->new_session(options_, pool_);
  }
  int64_t n_vocab() const override { return session_->n_vocab(); }
  int64_t n_ctx() const override { return session_->n_ctx(); }
  int64_t n_past() const override { return session_->n_past(); }
  std::span<const float> decode(std::span<const int32_t> tokens, bool all_logits) override {
    return session_->decode(tokens, all_logits);
  }
  void decode_verify(std::span<const int32_t> tokens) override { session_->decode_verify(tokens); }
  std::span<const float> verify_row(int64_t j) override { return session_->verify_row(j); }
  void rollback(int64_t n_past) override {
    if (n_past == 0 && session_->n_past() > 0) {
      session_.reset();
      session_ = model_->new_session(options_, pool_);
      if (!taps_.empty()) session_->set_tap_layers(taps_);
      return;
    }
    session_->rollback(n_past);
  }
  void set_tap_layers(std::vector<int32_t> layers) override {
    session_->set_tap_layers(layers);
    taps_ = std::move(layers);
  }
  std::span<const float> taps() const override { return session_->taps(); }

 private:
  std::shared_ptr<const LoadedModel> model_;
  SessionOptions options_;
  ThreadPool* pool_;
  std::vector<int32_t> taps_;  // the layers a draft asked for
  std::unique_ptr<LanguageModel> session_;
};

class GgufTextModel : public TextModel {
 public:
  // on_cuda: the sequence decodes on the CUDA device (weights uploaded there), else the CPU.
  GgufTextModel(std::shared_ptr<const LoadedModel> loaded, std::unique_ptr<ThreadPool> pool,
                const SessionOptions& session, bool on_cuda)
      : loaded_(std::move(loaded)),
        pool_(std::move(pool)),
        tokenizer_(text::Tokenizer::from_gguf(loaded_->file())),
        model_(on_cuda ? loaded_->cuda_sessions()(session)
                       : std::make_unique<ResettableSession>(loaded_, session, pool_.get())) {
    init();
  }

  const gguf::File& file() const { return loaded_->file(); }

  void init() {
    template_ = text::ChatTemplate::for_tokenizer(*tokenizer_, &template_warning_);
    grammar_vocabulary_ = grammar::lazy_vocabulary_of(*tokenizer_);
    if (model_->n_vocab() != tokenizer_->n_vocab()) {
      fail("{}: the model has {} logits but the vocabulary {} tokens", file().path(),
           model_->n_vocab(), tokenizer_->n_vocab());
    }
  }

  LanguageModel& model() override { return *model_; }

  std::vector<int32_t> tokenize(std::string_view text, bool add_special) const override {
    return tokenizer_->encode(text, add_special, /*parse_special=*/true);
  }

  GenerationVocab vocab() const override {
    GenerationVocab v;
    const text::Tokenizer* tokenizer = tokenizer_.get();
    v.piece = [tokenizer](int32_t id) { return tokenizer->piece(id, /*special=*/false); };
    v.end_of_generation = tokenizer_->eog_tokens();
    v.suppressed = tokenizer_->suppress_tokens();
    v.grammar_vocabulary = grammar_vocabulary_;
    return v;
  }

  bool has_chat_template() const override { return template_.format() != text::ChatFormat::kNone; }

  std::string render_chat(std::span<const ChatMessage> messages, bool thinking) const override {
    return render(messages, thinking).text;
  }

  std::vector<int32_t> tokenize_chat(std::span<const ChatMessage> messages,
                                     bool thinking) const override {
    const text::ChatPrompt prompt = render(messages, thinking);
    return tokenizer_->encode_with_literals(prompt.text, prompt.literal, /*add_special=*/true);
  }

  text::ChatPrompt render(std::span<const ChatMessage> messages, bool thinking) const {
    if (!template_warning_.empty()) {  // once, and only when the template is used
      fmt::print(stderr, "boltrt: warning: {}\n", template_warning_);
      template_warning_.clear();
    }
    std::vector<text::ChatMessage> converted;
    for (const auto& m : messages) {
      text::ChatMessage c;
      c.role = m.role;
      c.content = m.content;
      converted.push_back(std::move(c));
    }
    text::ChatOptions options;
    options.enable_thinking = thinking;
    return template_.render(converted, text::Json(), options);
  }

  std::optional<ReasoningMarkers> reasoning_markers() const override {
    if (template_.format() == text::ChatFormat::kNone) return std::nullopt;
    const text::ThoughtMarkerText thought = text::thought_markers(template_.format());
    const int32_t open = tokenizer_->find(thought.open);
    const int32_t close = tokenizer_->find(thought.close);
    if (open == text::kNoToken || close == text::kNoToken) return std::nullopt;
    return ReasoningMarkers{open, close, thought.label};
  }

  SamplerConfig sampling_defaults(const SamplerConfig& defaults) const override {
    return sampling_defaults_from_gguf(file(), defaults);
  }

  // The draft borrows these weights (embedding, output head) and runs on the same pool: no
  // second mapping of the target.
  std::unique_ptr<BlockDrafter> load_drafter(const std::string& path) const override {
    return std::make_unique<DFlashDrafter>(loaded_->load_draft(path, loaded_), pool_.get());
  }

 private:
  std::shared_ptr<const LoadedModel> loaded_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<LanguageModel> model_;
  text::ChatTemplate template_;
  mutable std::string template_warning_;
  std::function<std::shared_ptr<const grammar::TokenVocabulary>()> grammar_vocabulary_;
};

}  // namespace

std::unique_ptr<TextModel> load_text_model(const TextModelOptions& options) {
  const auto kv_type = kv_type_from_name(options.kv_type);
  if (!kv_type) fail("--kv-type: '{}' is not one of {}", options.kv_type, kv_type_names());
  if (options.on_progress) options.on_progress(0.0f);
  SessionOptions session;
  // 0 asks for the model's own context; the session clamps larger values to it.
  session.n_ctx = options.n_ctx > 0 ? options.n_ctx : std::numeric_limits<int32_t>::max();
  session.kv_type = *kv_type;
  if (options.n_batch > 0) session.n_batch = options.n_batch;
  // a chat reuses its history: a model with a recurrent state keeps copies of it along each
  // prompt so that a turn recomputes little of it (runtime/session_options.h)
  session.prompt_checkpoints = 4;
  auto pool = std::make_unique<ThreadPool>(std::max(1, options.threads));
  const std::shared_ptr<const LoadedModel> loaded = load_model(gguf::File::open(options.path));
  if (options.on_progress) options.on_progress(1.0f);
  const bool on_cuda = loaded->on_cuda(options.device);
  auto text = std::make_unique<GgufTextModel>(loaded, std::move(pool), session, on_cuda);
  if (on_cuda) fmt::print(stderr, "boltrt: {}\n", loaded->cuda_description());
  return text;
}

}  // namespace boltrt

// The ModelBackend of a GGUF file: its tokenizer, chat template (Gemma 4 turns, thinking, tools)
// and output parser from src/text, its sampling defaults, and sequences from a model factory.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "api/model_backend.h"
#include "gguf/gguf.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace boltrt {

class GgufBackend : public ModelBackend {
 public:
  using SequenceFactory = std::function<std::unique_ptr<LanguageModel>()>;
  using SequencesFactory = std::function<std::unique_ptr<MultiSequenceModel>(int n)>;
  using DrafterFactory = std::function<std::unique_ptr<BlockDrafter>()>;

  // `new_sequence` makes one sequence of the model (nullptr: the file's text side only; then
  // new_sequence() throws); `new_sequences`, when given, n sequences sharing forward passes.
  // `n_ctx` is the context per sequence.
  GgufBackend(std::shared_ptr<const gguf::File> file, SequenceFactory new_sequence, int64_t n_ctx,
              bool concurrent_decode, SequencesFactory new_sequences = nullptr);

  std::string architecture() const override { return file_->architecture(); }
  int64_t n_vocab() const override { return tokenizer_->n_vocab(); }
  int64_t n_ctx() const override { return n_ctx_; }
  std::unique_ptr<LanguageModel> new_sequence() override;
  bool concurrent_decode() const override { return concurrent_; }
  std::unique_ptr<MultiSequenceModel> new_sequences(int n) override;
  std::unique_ptr<BlockDrafter> new_drafter() override {
    return new_drafter_ ? new_drafter_() : nullptr;
  }
  // Makes new_drafter() return drafters (a draft loaded for this model).
  void set_drafter_factory(DrafterFactory factory) { new_drafter_ = std::move(factory); }

  std::vector<int32_t> tokenize(std::string_view text, bool add_special) const override;
  std::vector<int32_t> tokenize_chat(const RenderedChat& chat) const override;
  const GenerationVocab& vocab() const override { return vocab_; }
  bool has_chat_template() const override;
  std::string render_chat(std::span<const ChatMessage> messages, bool thinking) const override;
  std::optional<ReasoningMarkers> reasoning_markers() const override { return markers_; }
  SamplerConfig sampling_defaults(const SamplerConfig& defaults) const override;
  RenderedChat render_chat_json(const nlohmann::ordered_json& messages,
                                const nlohmann::ordered_json& tools, bool thinking,
                                bool add_generation_prompt = true) const override;
  text::ToolCallGrammar tool_call_grammar(const nlohmann::ordered_json& tools,
                                          const text::ToolChoice& choice) const override {
    return text::tool_call_grammar(template_.format(), tools, choice, *tokenizer_);
  }
  ParsedReply parse_reply(std::span<const int32_t> prompt, const RenderedChat& chat,
                          const nlohmann::ordered_json& tools,
                          const GenerationResult& result) const override;

  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  // A template warning (an unknown chat template falls back to Gemma 4's), or "".
  const std::string& template_warning() const { return template_warning_; }

 private:
  std::shared_ptr<const gguf::File> file_;
  SequenceFactory new_sequence_;
  SequencesFactory new_sequences_;
  DrafterFactory new_drafter_;
  int64_t n_ctx_;
  bool concurrent_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::string template_warning_;  // before template_: its constructor writes here
  text::ChatTemplate template_;
  GenerationVocab vocab_;
  std::optional<ReasoningMarkers> markers_;
};

// The text side of a GGUF file (a full model or a vocabulary-only file): tokenizer, chat
// template and parser, but no sequences.
std::shared_ptr<GgufBackend> open_gguf_text(const std::string& path);

}  // namespace boltrt

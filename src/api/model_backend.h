// ModelBackend — a loaded model as the public API (src/api) and `boltrt batch` (src/batch) use
// it: a factory of sequences (LanguageModels with their own KV cache) over shared weights, plus
// the text side (tokenizer, vocabulary, chat format). open_model_backend() builds one from a
// GGUF file; tests build a scripted one (fake_backend.h).
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "generate/generator.h"
#include "generate/text_model.h"
#include "runtime/language_model.h"
#include "text/tool_grammar.h"

namespace boltrt {
class MultiSequenceModel;

// A chat rendered for generation: the prompt text and the part of it that opens the
// assistant's turn (the reply parser reads the output as its continuation).
struct RenderedChat {
  std::string text;
  std::string generation_prompt;
  // Byte ranges of `text` holding message text (text::ChatPrompt::literal): tokenize_chat()
  // reads special-token markers only outside them.
  std::vector<std::pair<size_t, size_t>> literal;
};

// A reply taken apart. Tool calls are OpenAI-style: arguments as JSON text.
struct ParsedToolCall {
  std::string id, name, arguments;
};
struct ParsedReply {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
  int64_t reasoning_tokens = 0;
};

class ModelBackend {
 public:
  virtual ~ModelBackend() = default;

  virtual std::string architecture() const = 0;
  virtual int64_t n_vocab() const = 0;
  virtual int64_t n_ctx() const = 0;  // per sequence

  // A new sequence with an empty KV cache. Thread-safe.
  virtual std::unique_ptr<LanguageModel> new_sequence() = 0;
  // Whether sequences may decode() on different threads at the same time. When false, callers
  // serialise their decode calls (the forward pass uses the model's one thread pool).
  virtual bool concurrent_decode() const = 0;
  // A speculative-decoding drafter for one new sequence when the model was opened with a draft
  // (BackendOptions::draft), else null. Its calls use the model's compute threads like
  // decode() does: serialise them the same way. Thread-safe.
  virtual std::unique_ptr<BlockDrafter> new_drafter() { return nullptr; }
  // n sequences for `boltrt batch`. The default interleaves n new_sequence()s (each step reads
  // the weights once per sequence); a model with a multi-sequence forward pass overrides it.
  virtual std::unique_ptr<MultiSequenceModel> new_sequences(int n);

  // The text side; all const members are thread-safe.
  virtual std::vector<int32_t> tokenize(std::string_view text, bool add_special) const = 0;
  // A rendered chat with BOS as the vocabulary asks: message text is tokenized as text, never
  // as control tokens. The default tokenizes the whole text (a format without markers).
  virtual std::vector<int32_t> tokenize_chat(const RenderedChat& chat) const {
    return tokenize(chat.text, true);
  }
  virtual const GenerationVocab& vocab() const = 0;
  virtual bool has_chat_template() const = 0;
  virtual std::string render_chat(std::span<const ChatMessage> messages, bool thinking) const = 0;
  virtual std::optional<ReasoningMarkers> reasoning_markers() const = 0;
  virtual SamplerConfig sampling_defaults(const SamplerConfig& defaults) const = 0;

  // A conversation in OpenAI chat JSON ([{"role", "content", "tool_calls", "tool_call_id"}])
  // with OpenAI tool declarations (null or an array). The default handles system/user/assistant
  // text turns through render_chat() and rejects tools; a format with tool support overrides it.
  // Without `add_generation_prompt` the text ends after the last turn (only formats that can).
  virtual RenderedChat render_chat_json(const nlohmann::ordered_json& messages,
                                        const nlohmann::ordered_json& tools, bool thinking,
                                        bool add_generation_prompt = true) const;
  // The grammar that keeps the format's tool-call envelope for `tools` as `choice` asks, with
  // the arguments constrained by each function's parameters schema, lazy (triggered by the
  // call opener) for auto (text/tool_grammar.h); empty when the format has no tool calls.
  virtual text::ToolCallGrammar tool_call_grammar(const nlohmann::ordered_json& tools,
                                                  const text::ToolChoice& choice) const {
    (void)tools;
    (void)choice;
    return {};
  }
  // Splits a finished generation into reasoning / content / tool calls. The default uses the
  // reasoning markers (ReplySplitter) and finds no tool calls.
  virtual ParsedReply parse_reply(std::span<const int32_t> prompt, const RenderedChat& chat,
                                  const nlohmann::ordered_json& tools,
                                  const GenerationResult& result) const;
};

struct BackendOptions {
  std::string device = "auto";  // auto | cpu | cuda (auto: a GPU that passed the self-check)
  int threads = 0;              // 0: physical cores
  int64_t context = 4096;
  std::string kv_type = "f16";  // f16 | f32 | q8_0
  std::string draft;            // DFlash draft GGUF ("" = none)
};

// Loads a GGUF model file. Throws boltrt::Error naming the file and what is wrong.
std::shared_ptr<ModelBackend> open_model_backend(const std::string& path,
                                                 const BackendOptions& options);

// The prompt of a request: a plain prompt (messages null or empty) is tokenized as it is, a
// chat is rendered with the model's format and tokenized (BOS added as the vocabulary asks).
struct PreparedPrompt {
  std::vector<int32_t> tokens;
  RenderedChat chat;  // empty for a plain prompt
};
PreparedPrompt prepare_prompt(const ModelBackend& backend, const std::string& prompt,
                              const nlohmann::ordered_json& messages,
                              const nlohmann::ordered_json& tools, bool thinking);

}  // namespace boltrt

// TextModel — what `boltrt generate` and `boltrt chat` need from a loaded model file: the
// LanguageModel, a tokenizer, the vocabulary as the generation loop sees it, and the chat
// format. The CLI builds one from a GGUF file (the model, tokenizer and chat template of the
// text/ and model/ modules); tests build one from a scripted model, so the chat loop and the
// reply splitting are tested without a real model.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "generate/generator.h"
#include "runtime/language_model.h"
#include "util/error.h"

namespace boltrt {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// How a model marks its reasoning in the output, e.g. Gemma 4's `<|channel>thought\n ...
// <channel|>`: reasoning starts after `open` (and the `label` text right after it) and ends at
// `close`. Issue 9's reasoning controller uses the same markers.
struct ReasoningMarkers {
  int32_t open = -1;
  int32_t close = -1;
  std::string label;  // text after `open` that names the channel ("thought\n"), not reasoning
};

class TextModel {
 public:
  virtual ~TextModel() = default;

  virtual LanguageModel& model() = 0;
  // Text -> ids. `add_special` adds the BOS/prefix tokens the vocabulary asks for; special
  // tokens written in the text are recognised.
  virtual std::vector<int32_t> tokenize(std::string_view text, bool add_special) const = 0;
  // Token pieces (control tokens print nothing) and end-of-generation ids.
  virtual GenerationVocab vocab() const = 0;

  // The file's chat format; false means plain completion only.
  virtual bool has_chat_template() const = 0;
  // Renders a conversation, ending with the prompt for the assistant's next turn. `thinking`
  // switches the model's reasoning on or off as the format does it.
  virtual std::string render_chat(std::span<const ChatMessage> messages, bool thinking) const = 0;
  // render_chat() tokenized with BOS: the message text as text (a user who types a control
  // token's text gets those characters), the format's own markers as control tokens. The
  // default tokenizes the rendered text whole (a format without markers).
  virtual std::vector<int32_t> tokenize_chat(std::span<const ChatMessage> messages,
                                             bool thinking) const {
    return tokenize(render_chat(messages, thinking), true);
  }
  // The reasoning markers, when the format has them.
  virtual std::optional<ReasoningMarkers> reasoning_markers() const = 0;
  // Sampler defaults stored in the file (general.sampling.*); fields without a key keep the
  // values in `defaults`.
  virtual SamplerConfig sampling_defaults(const SamplerConfig& defaults) const = 0;

  // A speculative-decoding draft for model() (`--draft FILE`), sharing this model's weights
  // and threads: attach it with Generator::set_drafter. Throws boltrt::Error when the file is
  // not a draft that fits this model, or when this model cannot run drafts.
  virtual std::unique_ptr<BlockDrafter> load_drafter(const std::string& path) const {
    fail("{}: this model cannot run speculative-decoding drafts", path);
  }
};

}  // namespace boltrt

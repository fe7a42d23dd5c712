#include <filesystem>

#include "api/model_backend.h"
#include "util/error.h"

namespace boltrt {

std::vector<int32_t> prompt_tokens(const ModelBackend& backend, const std::string& prompt,
                                   std::span<const ChatMessage> messages, bool thinking) {
  if (messages.empty()) return backend.tokenize(prompt, true);
  std::string text;
  if (backend.has_chat_template()) {
    text = backend.render_chat(messages, thinking);
  } else {  // plain completion: the conversation is one running text, as `boltrt chat` does
    for (const auto& m : messages) text += m.content + "\n";
  }
  return backend.tokenize(text, true);
}

std::shared_ptr<ModelBackend> open_model_backend(const std::string& path, const BackendOptions&) {
  if (!std::filesystem::exists(path)) fail("{}: no such file", path);
  fail("{}: this build cannot run gemma4 models yet (the model code is not merged)", path);
}

}  // namespace boltrt

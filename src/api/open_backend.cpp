#include <algorithm>
#include <filesystem>

#include "api/model_backend.h"
#include "generate/reply_splitter.h"
#include "util/error.h"

namespace boltrt {

RenderedChat ModelBackend::render_chat_json(const nlohmann::ordered_json& messages,
                                            const nlohmann::ordered_json& tools,
                                            bool thinking) const {
  if (!tools.is_null() && !tools.empty())
    fail("'tools' are not supported by this model's chat format");
  std::vector<ChatMessage> turns;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    const std::string role = m.value("role", "");
    if (role != "system" && role != "user" && role != "assistant")
      fail("messages[{}]: role '{}' is not supported (system, user or assistant)", i, role);
    if (m.contains("tool_calls") && !m["tool_calls"].is_null() && !m["tool_calls"].empty())
      fail("messages[{}]: tool calls are not supported by this model's chat format", i);
    turns.push_back({role, m.contains("content") && m["content"].is_string()
                               ? m["content"].get<std::string>()
                               : std::string()});
  }
  RenderedChat chat;
  if (has_chat_template()) {
    chat.text = render_chat(turns, thinking);
  } else {  // plain completion: the conversation is one running text, as `boltrt chat` does
    for (const auto& t : turns) chat.text += t.content + "\n";
  }
  return chat;
}

ParsedReply ModelBackend::parse_reply(std::span<const int32_t> prompt, const RenderedChat&,
                                      const nlohmann::ordered_json&,
                                      const GenerationResult& result) const {
  const auto markers = reasoning_markers();
  ReplySplitter splitter(markers, ReplySplitter::prompt_opens_reasoning(prompt, markers));
  const auto& end = vocab().end_of_generation;
  for (int32_t token : result.tokens) {
    if (std::find(end.begin(), end.end(), token) != end.end()) continue;
    splitter.push(token, vocab().piece(token));
  }
  splitter.finish();
  if (result.finish_reason == FinishReason::kStopString) splitter.truncate_at(result.stop_string);
  ParsedReply reply;
  reply.reasoning = splitter.reasoning();
  reply.content = splitter.content();
  reply.reasoning_tokens = splitter.reasoning_tokens();
  return reply;
}

PreparedPrompt prepare_prompt(const ModelBackend& backend, const std::string& prompt,
                              const nlohmann::ordered_json& messages,
                              const nlohmann::ordered_json& tools, bool thinking) {
  PreparedPrompt prepared;
  if (messages.is_null() || messages.empty()) {
    prepared.tokens = backend.tokenize(prompt, true);
  } else {
    prepared.chat = backend.render_chat_json(messages, tools, thinking);
    prepared.tokens = backend.tokenize(prepared.chat.text, true);
  }
  return prepared;
}

std::shared_ptr<ModelBackend> open_model_backend(const std::string& path, const BackendOptions&) {
  if (!std::filesystem::exists(path)) fail("{}: no such file", path);
  fail("{}: this build cannot run gemma4 models yet (the model code is not merged)", path);
}

}  // namespace boltrt

#include <algorithm>
#include <filesystem>

#include "api/gguf_backend.h"
#include "api/model_backend.h"
#include "generate/reply_splitter.h"
#include "generate/speculative.h"
#include "gguf/gguf.h"
#include "model/dflash.h"
#include "model/registry.h"
#include "runtime/multi_sequence.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt {

RenderedChat ModelBackend::render_chat_json(const nlohmann::ordered_json& messages,
                                            const nlohmann::ordered_json& tools, bool thinking,
                                            bool add_generation_prompt) const {
  if (!add_generation_prompt && has_chat_template())
    fail("this model's chat format always ends with the assistant's turn");
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
    prepared.tokens = backend.tokenize_chat(prepared.chat);
  }
  return prepared;
}

std::unique_ptr<MultiSequenceModel> ModelBackend::new_sequences(int n) {
  if (n < 1) fail("at least one sequence is needed, not {}", n);
  std::vector<std::unique_ptr<LanguageModel>> sequences;
  for (int i = 0; i < n; ++i) sequences.push_back(new_sequence());
  return std::make_unique<InterleavedSessions>(std::move(sequences));
}

std::shared_ptr<ModelBackend> open_model_backend(const std::string& path,
                                                 const BackendOptions& options) {
  if (!std::filesystem::exists(path)) fail("{}: no such file", path);
  if (options.device != "auto" && options.device != "cpu" && options.device != "cuda")
    fail("unknown device '{}' (auto, cpu or cuda)", options.device);
  const auto kv_type = kv_type_from_name(options.kv_type);
  if (!kv_type) fail("unknown KV cache type '{}' (f16, f32 or q8_0)", options.kv_type);
  if (options.context < 1) fail("the context must be positive, not {}", options.context);
  if (options.threads < 0) fail("the thread count must not be negative, not {}", options.threads);
  if (!options.draft.empty() && !std::filesystem::exists(options.draft))
    fail("{}: no such file", options.draft);

  auto pool =
      std::make_shared<ThreadPool>(options.threads > 0 ? options.threads : physical_core_count());
  const std::shared_ptr<const LoadedModel> model = load_model(gguf::File::open(path));
  SessionOptions session_options;
  session_options.n_ctx = options.context;
  if (model->n_ctx_train() > 0)
    session_options.n_ctx = std::min(session_options.n_ctx, model->n_ctx_train());
  session_options.kv_type = *kv_type;
  // A sequence with a recurrent state can only go back to a copy of it: keep a few along each
  // prompt so that a slot or chat reusing a long cached prefix recomputes about one micro-batch
  // (ignored by attention-only models, whose KV cache rolls back anywhere).
  session_options.prompt_checkpoints = 4;
  // The file stays open as long as the model: the tokenizer reads it through the same handle.
  std::shared_ptr<const gguf::File> file(model, &model->file());
  if (model->on_cuda(options.device)) {
    // Sequences on the device share the uploaded weights; they decode one at a time. The
    // speculative loop of the batch engine runs CPU sessions only.
    if (!options.draft.empty())
      fail(
          "{}: --draft with --device cuda runs in generate and chat, not in batch, serve or "
          "the API yet (use the CPU, or no draft)",
          options.draft);
    LoadedModel::DeviceSessions sessions = model->cuda_sessions();
    return std::make_shared<GgufBackend>(
        file,
        [model, sessions, session_options]() -> std::unique_ptr<LanguageModel> {
          return sessions(session_options);
        },
        session_options.n_ctx, /*concurrent_decode=*/false);
  }
  // One draft for all sequences (immutable); each sequence gets a drafter with its own context.
  std::shared_ptr<const DFlashDraft> draft;
  if (!options.draft.empty()) draft = model->load_draft(options.draft, model);
  auto backend = std::make_shared<GgufBackend>(
      file,
      [model, pool, session_options]() -> std::unique_ptr<LanguageModel> {
        return model->new_session(session_options, pool.get());
      },
      session_options.n_ctx, /*concurrent_decode=*/false,
      [model, pool, session_options](int n) -> std::unique_ptr<MultiSequenceModel> {
        return model->new_sequences(n, session_options, pool.get());
      });
  if (draft) {
    backend->set_drafter_factory([draft, pool]() -> std::unique_ptr<BlockDrafter> {
      return std::make_unique<DFlashDrafter>(draft, pool.get());
    });
  }
  return backend;
}

}  // namespace boltrt

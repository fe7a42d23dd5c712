#include <algorithm>
#include <filesystem>

#include "api/gguf_backend.h"
#include "api/model_backend.h"
#include "backend/device.h"
#include "generate/reply_splitter.h"
#include "generate/speculative.h"
#include "gguf/gguf.h"
#include "model/batched_sessions.h"
#include "model/dflash.h"
#include "model/gemma4.h"
#include "model/registry.h"
#include "runtime/multi_sequence.h"
#include "runtime/session.h"
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

namespace {

// An architecture from the registry (model/registry.h): CPU sessions, and the model's own
// multi-sequence batches when several run; no CUDA runtime and no draft.
std::shared_ptr<ModelBackend> open_generic_backend(std::shared_ptr<const LoadedModel> model,
                                                   std::shared_ptr<ThreadPool> pool,
                                                   const BackendOptions& options, KvType kv_type) {
  if (options.device == "cuda") model->fail_no_cuda();
  if (!options.draft.empty()) model->fail_no_draft();
  SessionOptions session_options;
  session_options.n_ctx = options.context;
  if (model->n_ctx_train() > 0)
    session_options.n_ctx = std::min(session_options.n_ctx, model->n_ctx_train());
  session_options.kv_type = kv_type;
  // A sequence with a recurrent state can only go back to a copy of it: keep a few along each
  // prompt so that a slot or chat reusing a long cached prefix recomputes about one micro-batch.
  session_options.prompt_checkpoints = 4;
  std::shared_ptr<const gguf::File> file(model, &model->file());
  return std::make_shared<GgufBackend>(
      file,
      [model, pool, session_options]() -> std::unique_ptr<LanguageModel> {
        return model->new_session(session_options, pool.get());
      },
      session_options.n_ctx, /*concurrent_decode=*/false,
      [model, pool, session_options](int n) -> std::unique_ptr<MultiSequenceModel> {
        return model->new_sequences(n, session_options, pool.get());
      });
}

}  // namespace

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
  std::unique_ptr<gguf::File> opened = gguf::File::open(path);
  if (std::shared_ptr<const LoadedModel> generic = load_generic_model(opened)) {
    return open_generic_backend(std::move(generic), std::move(pool), options, *kv_type);
  }
  std::shared_ptr<const Gemma4Model> model = std::make_shared<const Gemma4Model>(std::move(opened));
  SessionOptions session_options;
  session_options.n_ctx = options.context;
  if (model->config().n_ctx_train > 0)
    session_options.n_ctx = std::min(session_options.n_ctx, model->config().n_ctx_train);
  session_options.kv_type = *kv_type;
  if (resolve_device(options.device, *model) == ComputeDevice::kCuda) {
    // Sequences on the device share the uploaded weights; they decode one at a time.
    std::shared_ptr<const CudaGemma4> cuda = load_cuda_gemma4(*model);
    std::shared_ptr<const gguf::File> file(model, &model->file());
    return std::make_shared<GgufBackend>(
        file,
        [model, cuda, session_options]() -> std::unique_ptr<LanguageModel> {
          return cuda->new_session(session_options);
        },
        session_options.n_ctx, /*concurrent_decode=*/false);
  }
  auto new_session = [model, pool, session_options] {
    return std::make_unique<Gemma4Session>(*model, session_options, pool.get());
  };
  GgufBackend::SequencesFactory new_sequences =
      [new_session](int n) -> std::unique_ptr<MultiSequenceModel> {
    std::vector<std::unique_ptr<Gemma4Session>> sessions;
    for (int i = 0; i < n; ++i) sessions.push_back(new_session());
    return std::make_unique<BatchedSessions<Gemma4Session>>(std::move(sessions));
  };
  // The file stays open as long as the model: the tokenizer reads it through the same handle.
  std::shared_ptr<const gguf::File> file(model, &model->file());
  auto backend = std::make_shared<GgufBackend>(
      file, [new_session]() -> std::unique_ptr<LanguageModel> { return new_session(); },
      session_options.n_ctx, /*concurrent_decode=*/false, std::move(new_sequences));
  if (!options.draft.empty()) {
    // One draft for all sequences (immutable); each sequence gets a drafter with its own
    // context. The draft borrows the target's embedding and output head: its deleter keeps
    // the target alive.
    std::shared_ptr<const DFlashDraft> draft(DFlashDraft::load(options.draft, *model).release(),
                                             [model](const DFlashDraft* d) { delete d; });
    backend->set_drafter_factory([draft, pool]() -> std::unique_ptr<BlockDrafter> {
      return std::make_unique<DFlashDrafter>(draft, pool.get());
    });
  }
  return backend;
}

}  // namespace boltrt

#include "api/gguf_backend.h"

#include <algorithm>

#include "generate/sampling_defaults.h"
#include "grammar/token_vocabulary.h"
#include "runtime/multi_sequence.h"
#include "util/error.h"

namespace boltrt {

GgufBackend::GgufBackend(std::shared_ptr<const gguf::File> file, SequenceFactory new_sequence,
                         int64_t n_ctx, bool concurrent_decode, SequencesFactory new_sequences)
    : file_(std::move(file)),
      new_sequence_(std::move(new_sequence)),
      new_sequences_(std::move(new_sequences)),
      n_ctx_(n_ctx),
      concurrent_(concurrent_decode),
      tokenizer_(text::Tokenizer::from_gguf(*file_)),
      template_warning_(),
      template_(text::ChatTemplate::for_tokenizer(*tokenizer_, &template_warning_)) {
  const text::Tokenizer* tokenizer = tokenizer_.get();
  // Output text: control tokens print nothing (llama.cpp's token_to_piece with special=false).
  vocab_.piece = [tokenizer](int32_t id) { return tokenizer->piece(id, /*special=*/false); };
  vocab_.end_of_generation = tokenizer_->eog_tokens();
  vocab_.suppressed = tokenizer_->suppress_tokens();  // tokenizer.ggml.suppress_tokens
  vocab_.grammar_vocabulary = grammar::lazy_vocabulary_of(*tokenizer_);
  const text::ThoughtMarkerText thought = text::thought_markers(template_.format());
  const int32_t open = tokenizer_->find(thought.open);
  const int32_t close = tokenizer_->find(thought.close);
  if (open != text::kNoToken && close != text::kNoToken)
    markers_ = ReasoningMarkers{open, close, thought.label};
}

std::unique_ptr<LanguageModel> GgufBackend::new_sequence() {
  if (!new_sequence_) fail("{}: opened for its vocabulary only; it cannot generate", file_->path());
  return new_sequence_();
}

std::unique_ptr<MultiSequenceModel> GgufBackend::new_sequences(int n) {
  if (!new_sequences_) return ModelBackend::new_sequences(n);
  if (n < 1) fail("at least one sequence is needed, not {}", n);
  return new_sequences_(n);
}

std::vector<int32_t> GgufBackend::tokenize(std::string_view text, bool add_special) const {
  return tokenizer_->encode(text, add_special, /*parse_special=*/true);
}

std::vector<int32_t> GgufBackend::tokenize_chat(const RenderedChat& chat) const {
  return tokenizer_->encode_with_literals(chat.text, chat.literal, /*add_special=*/true);
}

bool GgufBackend::has_chat_template() const {
  return template_.format() != text::ChatFormat::kNone;
}

std::string GgufBackend::render_chat(std::span<const ChatMessage> messages, bool thinking) const {
  std::vector<text::ChatMessage> turns;
  for (const auto& m : messages) turns.push_back({m.role, m.content, {}, {}, {}});
  text::ChatOptions options;
  options.enable_thinking = thinking;
  return template_.render(turns, text::Json(), options).text;
}

SamplerConfig GgufBackend::sampling_defaults(const SamplerConfig& defaults) const {
  return sampling_defaults_from_gguf(*file_, defaults);
}

RenderedChat GgufBackend::render_chat_json(const nlohmann::ordered_json& messages,
                                           const nlohmann::ordered_json& tools, bool thinking,
                                           bool add_generation_prompt) const {
  if (!has_chat_template()) {
    if (!tools.is_null() && !tools.empty())
      fail("'tools' need a chat template, and {} has none", file_->path());
    return ModelBackend::render_chat_json(messages, tools, thinking,
                                          add_generation_prompt);  // running text
  }
  text::ChatOptions options;
  options.enable_thinking = thinking;
  options.add_generation_prompt = add_generation_prompt;
  const text::ChatPrompt prompt =
      template_.render(text::messages_from_json(messages), tools, options);
  return {prompt.text, prompt.generation_prompt, prompt.literal};
}

ParsedReply GgufBackend::parse_reply(std::span<const int32_t> prompt, const RenderedChat& chat,
                                     const nlohmann::ordered_json& tools,
                                     const GenerationResult& result) const {
  // Reasoning and content by the markers, as `boltrt chat` streams them.
  ParsedReply reply = ModelBackend::parse_reply(prompt, chat, tools, result);
  if (chat.generation_prompt.empty() || !has_chat_template()) return reply;
  // Tool calls (and the exact split) by the chat format's output parser, on the text with its
  // special tokens.
  std::vector<int32_t> tokens;
  for (int32_t t : result.tokens)
    if (!tokenizer_->is_eog(t)) tokens.push_back(t);
  std::string output = tokenizer_->decode(tokens, /*remove_special=*/false,
                                          /*unparse_special=*/true);
  if (result.finish_reason == FinishReason::kStopString && !result.stop_string.empty()) {
    if (const size_t at = output.find(result.stop_string); at != std::string::npos)
      output.resize(at);
  }
  const text::ParsedOutput parsed =
      text::parse_output(template_.format(), output, chat.generation_prompt, tools);
  if (!parsed.well_formed) return reply;
  reply.reasoning = parsed.reasoning;
  reply.content = parsed.content;
  for (const auto& call : parsed.tool_calls)
    reply.tool_calls.push_back({call.id, call.name, call.arguments});
  return reply;
}

std::shared_ptr<GgufBackend> open_gguf_text(const std::string& path) {
  std::shared_ptr<const gguf::File> file = gguf::File::open(path);
  const int64_t n_ctx = file->get_arch_int("context_length").value_or(0);
  return std::make_shared<GgufBackend>(file, nullptr, n_ctx, false);
}

}  // namespace boltrt

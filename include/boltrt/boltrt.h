// boltrt — the public C++ API: load a Gemma 4 / Nemotron 3.5 Bolt GGUF model once, open any
// number of sessions on it, and generate text with streaming, cancellation, reasoning control
// and tool calls.
//
//   auto model = boltrt::Model::load("model.gguf");
//   boltrt::Session session(model);
//   boltrt::Request request;
//   request.messages.push_back(boltrt::Message::text("user", "Hello!"));
//   boltrt::Result result = session.generate(request, [](const boltrt::TokenInfo& t) {
//     std::fwrite(t.text.data(), 1, t.text.size(), stdout);
//     return true;  // false cancels
//   });
//
// Ownership: Model::load returns a std::shared_ptr<const Model>; every Session keeps its model
// alive, so the caller may drop its own pointer at any time.
//
// Thread safety: a Model is immutable after loading and may be shared by any number of
// sessions on any threads. A Session holds one conversation's state (its KV cache) and must be
// used by one thread at a time; different sessions may run on different threads at once (their
// forward passes take turns on the model's compute threads).
//
// Errors: every function reports failure by throwing boltrt::Error (see <boltrt/error.h>) with
// a one-line message; no function prints anything or aborts on bad input.
#pragma once
#include <boltrt/error.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace boltrt {
// The public types live in an inline namespace so that their linker names never collide with
// the engine's internal types of the same spelling; users simply write boltrt::Model.
inline namespace api {

/// The library version, "MAJOR.MINOR.PATCH".
const char* version();

/// Where the model runs.
enum class Device {
  kAuto,  ///< a CUDA GPU when one is present and the build has CUDA, else the CPU
  kCpu,   ///< the CPU
  kCuda,  ///< the first CUDA GPU; loading fails when there is none
};

/// Element type of the KV cache (memory per token versus accuracy).
enum class KvCacheType {
  kF16,   ///< 16-bit floats (default; what llama.cpp uses)
  kF32,   ///< 32-bit floats (exact, twice the memory)
  kQ8_0,  ///< 8-bit blocks (about half of F16)
};

/// How Model::load sets the model up.
struct ModelOptions {
  Device device = Device::kAuto;  ///< where to run (auto: a GPU that passes the self-check, else the CPU)
  int threads = 0;               ///< CPU compute threads; 0 = physical cores
  int64_t context = 4096;        ///< tokens each session can hold (prompt + answer)
  KvCacheType kv_type = KvCacheType::kF16;  ///< KV cache element type
  /// Optional DFlash draft GGUF for speculative decoding ("" = none). Every session then
  /// drafts tokens and verifies them in one batched forward pass: the output is what plain
  /// decoding gives (the same tokens at temperature 0, the same distribution above it), only
  /// faster when the draft guesses well. Loading fails when the draft does not fit the model.
  std::string draft;
  int64_t draft_max = -1;  ///< most drafted tokens per step; -1 = the draft's block size - 1
  int64_t draft_min = 1;   ///< adaptive lower bound; = draft_max: a fixed length every step
};

/// A function the model may call, declared to it in the chat prompt.
struct Tool {
  std::string name;         ///< function name, e.g. "get_weather"
  std::string description;  ///< what it does, for the model
  std::string parameters;   ///< JSON Schema of its arguments, as JSON text ("{}" when none)
};

/// One function call the model asked for.
struct ToolCall {
  std::string id;         ///< call id ("" when the format has none)
  std::string name;       ///< the tool's name
  std::string arguments;  ///< the arguments as JSON text
};

/// One turn of a conversation.
struct Message {
  std::string role;     ///< "system", "user", "assistant" or "tool"
  std::string content;  ///< the text of the turn (a tool's result for role "tool")
  /// An assistant turn's thinking (Gemma 4's template drops it from the history).
  std::string reasoning;
  std::vector<ToolCall> tool_calls;  ///< calls an assistant turn made
  std::string tool_call_id;          ///< for role "tool": the id of the call it answers

  /// A plain text turn, e.g. Message::text("user", "Hello!").
  static Message text(std::string role, std::string content) {
    Message m;
    m.role = std::move(role);
    m.content = std::move(content);
    return m;
  }
};

/// Options for Session::apply_chat_template.
struct ChatTemplateOptions {
  bool thinking = false;              ///< switch the model's reasoning on (Gemma 4: `<|think|>`)
  std::vector<Tool> tools;            ///< tools declared to the model
  bool add_generation_prompt = true;  ///< end with the opening of the assistant's turn
};

/// Whether the model reasons before answering.
enum class Reasoning {
  kAuto,  ///< the model's default (Gemma 4: off)
  kOn,    ///< think first
  kOff,   ///< answer directly
};

/// Sampling settings; the defaults are llama.cpp's (the file's general.sampling.* values win
/// when it has them and the request leaves a field at its default).
struct Sampling {
  float temperature = 0.8f;        ///< <= 0: greedy (always the most likely token)
  int32_t top_k = 40;              ///< keep the k most likely tokens; <= 0: off
  float top_p = 0.95f;             ///< nucleus sampling; >= 1: off
  float min_p = 0.05f;             ///< drop tokens below min_p x the top probability; <= 0: off
  float repeat_penalty = 1.0f;     ///< 1: off
  float frequency_penalty = 0.0f;  ///< OpenAI-style, over the last 64 tokens
  float presence_penalty = 0.0f;   ///< OpenAI-style, over the last 64 tokens
  uint32_t seed = 0xFFFFFFFFu;     ///< random-number seed; 0xFFFFFFFF = a random seed
  /// (token id, bias) pairs added to the logits before the rest of the chain (OpenAI's
  /// logit_bias): -100 all but bans a token, +100 all but forces it; entries for one token add
  /// up. Ids must be in the vocabulary, biases finite (or -infinity to ban).
  std::vector<std::pair<int32_t, float>> logit_bias;
};

/// What to generate: a raw prompt, or chat messages rendered with the model's chat template.
struct Request {
  std::string prompt;             ///< plain completion (used when `messages` is empty)
  std::vector<Message> messages;  ///< chat conversation; the answer is the next assistant turn
  std::vector<Tool> tools;        ///< tools declared to the model (chat only)
  int64_t max_tokens = -1;        ///< generated-token limit; < 0: until the end or a full context
  std::vector<std::string> stop;  ///< stop strings (not included in the text)
  Sampling sampling;              ///< sampling settings
  Reasoning reasoning = Reasoning::kAuto;  ///< thinking on or off (chat only)
  int64_t reasoning_budget = -1;           ///< most thinking tokens; -1: unlimited, 0: none
  /// Most thinking tokens of each thought block (a model may think several times in one answer,
  /// e.g. between tool calls); -1: unlimited. `reasoning_budget` still caps the total.
  int64_t reasoning_block_budget = -1;
  /// Text forced to close the thought when the budget is spent ("" = a short default phrase).
  std::string reasoning_budget_message;
  /// Structured output (at most one of the next three): the answer is constrained token by
  /// token to match a GBNF grammar (llama.cpp's syntax, start rule `root`) ...
  std::string grammar;
  /// ... or to be JSON valid against this JSON Schema (JSON text; an unsupported keyword is a
  /// boltrt::Error naming it) ...
  std::string json_schema;
  /// ... or to be any JSON object (OpenAI's response_format {"type": "json_object"}).
  /// With reasoning on, the thinking stays free and the constraint starts when it ends.
  bool json_object = false;
  /// With `tools`: "auto" (or ""; free text, and a call the model opens has arguments valid
  /// against the function's parameters schema), "none" (no calls), "required" (at least one
  /// call), or a function name (exactly a call of that function). Forcing needs a chat format
  /// with tool calls (Gemma 4); Result::finish_reason is then kToolCalls.
  std::string tool_choice;
  bool parallel_tool_calls = true;  ///< several calls in one reply allowed
};

/// Passed to the per-token callback after each generated token.
struct TokenInfo {
  int32_t id;             ///< the token id
  std::string_view text;  ///< text released with this token (whole UTF-8 characters; may be "";
                          ///< may hold the start of a stop string, which Result excludes)
  bool reasoning;         ///< the text belongs to the model's thinking, not its answer
  int64_t index;          ///< 0 for the first generated token
};

/// Called after each generated token; return false to stop generating (FinishReason::kCancelled).
using TokenCallback = std::function<bool(const TokenInfo& token)>;

/// Why generation ended.
enum class FinishReason {
  kEndOfGeneration,  ///< the model ended its turn
  kStop,             ///< a stop string was reached
  kLength,           ///< max_tokens was reached
  kContextFull,      ///< the session's context is full
  kCancelled,        ///< the callback returned false
  kToolCalls,        ///< the model ended its turn after calling tools (Result::tool_calls)
};

/// "eog", "stop", "length", "context_full", "cancelled" or "tool_calls".
const char* to_string(FinishReason reason);

/// Counters and timings of one generate() call.
struct Statistics {
  int64_t prompt_tokens = 0;     ///< prompt length in tokens
  int64_t prompt_evaluated = 0;  ///< prompt tokens computed (the rest was reused from the cache)
  int64_t generated_tokens = 0;  ///< tokens generated, end-of-turn token included
  int64_t reasoning_tokens = 0;  ///< of which thinking tokens
  double time_to_first_token_ms = 0;    ///< from the call to the first generated token
  double prompt_ms = 0;                 ///< prompt processing time
  double generation_ms = 0;             ///< first to last generated token
  double prompt_tokens_per_second = 0;  ///< prompt_evaluated / prompt time
  double tokens_per_second = 0;         ///< generation speed after the first token
  int64_t draft_steps = 0;              ///< verify steps with drafted tokens (ModelOptions::draft)
  int64_t draft_tokens = 0;             ///< drafted tokens verified
  int64_t draft_accepted = 0;  ///< drafted tokens kept (draft_accepted / draft_tokens: rate)
};

/// The outcome of Session::generate.
struct Result {
  std::string text;       ///< everything the model wrote (markers removed), stop string excluded
  std::string reasoning;  ///< its thinking ("" when it did not think)
  std::string content;    ///< its answer: the text outside the thinking and the tool calls
  std::vector<ToolCall> tool_calls;                             ///< tool calls it made, parsed
  std::vector<int32_t> tokens;                                  ///< the generated token ids
  FinishReason finish_reason = FinishReason::kEndOfGeneration;  ///< why it ended
  Statistics stats;                                             ///< counters and timings
};

/// A loaded model: weights, tokenizer and chat template. Immutable and thread-safe.
class Model {
 public:
  /// Loads a GGUF file (memory-mapped; the file must stay in place). Throws boltrt::Error for a
  /// missing, malformed or unsupported file or an option it cannot honour.
  static std::shared_ptr<const Model> load(const std::string& path,
                                           const ModelOptions& options = {});

  /// The architecture in the file, e.g. "gemma4".
  const std::string& architecture() const;
  /// The number of tokens in the vocabulary.
  int64_t vocab_size() const;
  /// Tokens one session can hold (ModelOptions::context).
  int64_t context() const;
  /// Whether the file has a chat template (otherwise only plain prompts work).
  bool has_chat_template() const;

  /// Internal: the implementation behind the public surface.
  struct Impl;
  /// Internal: wraps an implementation (used by the library itself and its tests).
  explicit Model(std::shared_ptr<Impl> impl);
  /// Releases the model (the file mapping and buffers).
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

 private:
  friend class Session;
  std::shared_ptr<Impl> impl_;
};

/// One conversation on a model: its own KV cache, sampler state and statistics. Use from one
/// thread at a time. Successive generate() calls reuse the cached prefix they share, so a chat
/// that re-sends its growing history only computes the new turn.
class Session {
 public:
  /// Opens a session (allocates its KV cache). Throws boltrt::Error when `model` is null.
  explicit Session(std::shared_ptr<const Model> model);
  /// Frees the KV cache.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  /// Moves the conversation to a new owner; the source becomes unusable.
  Session(Session&&) noexcept;
  /// Moves the conversation to a new owner; the source becomes unusable.
  Session& operator=(Session&&) noexcept;

  /// The model this session runs on.
  const std::shared_ptr<const Model>& model() const;

  /// Text to token ids. `add_special` adds the beginning-of-sequence token the model expects;
  /// special tokens written in the text (e.g. "<start_of_turn>") become their ids.
  std::vector<int32_t> tokenize(std::string_view text, bool add_special = true) const;
  /// Token ids to text (control tokens print nothing; invalid UTF-8 becomes U+FFFD).
  std::string detokenize(std::span<const int32_t> tokens) const;
  /// Renders a conversation with the model's chat template. Throws boltrt::Error when the
  /// model has none, or for a role or tool the format cannot express.
  std::string apply_chat_template(std::span<const Message> messages,
                                  const ChatTemplateOptions& options = {}) const;

  /// Generates a continuation of `request`, calling `on_token` (if given) after each token.
  /// Throws boltrt::Error for a bad request (e.g. a prompt longer than the context); an
  /// exception thrown by `on_token` propagates and leaves the session usable.
  Result generate(const Request& request, const TokenCallback& on_token = {});

  /// Forgets the conversation (empties the KV cache).
  void reset();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace api
}  // namespace boltrt

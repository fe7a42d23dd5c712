// The public API over the engine: Model = ModelBackend, Session = one sequence + Generator.
#include "api/api_internal.h"  // first: it orders the engine and public headers

namespace boltrt {
inline namespace api {
namespace {

using EngineFinish = engine::FinishReason;

// A sequence whose model calls take the model's lock, for backends whose forward pass must not
// run on two threads at once.
class LockedSequence : public LanguageModel {
 public:
  LockedSequence(std::unique_ptr<LanguageModel> inner, std::mutex& mutex)
      : inner_(std::move(inner)), mutex_(mutex) {}
  int64_t n_vocab() const override { return inner_->n_vocab(); }
  int64_t n_ctx() const override { return inner_->n_ctx(); }
  int64_t n_past() const override { return inner_->n_past(); }
  std::span<const float> decode(std::span<const int32_t> tokens, bool all_logits) override {
    std::lock_guard lock(mutex_);
    return inner_->decode(tokens, all_logits);
  }
  void rollback(int64_t n_past) override {
    std::lock_guard lock(mutex_);
    inner_->rollback(n_past);
  }
  // The lazy verify head (LanguageModel::decode_verify) passes through: verify_row runs the
  // output head on the shared thread pool, so it takes the lock too.
  void decode_verify(std::span<const int32_t> tokens) override {
    std::lock_guard lock(mutex_);
    inner_->decode_verify(tokens);
  }
  std::span<const float> verify_row(int64_t j) override {
    std::lock_guard lock(mutex_);
    return inner_->verify_row(j);
  }
  void set_tap_layers(std::vector<int32_t> layers) override {
    inner_->set_tap_layers(std::move(layers));
  }
  std::span<const float> taps() const override { return inner_->taps(); }

 private:
  std::unique_ptr<LanguageModel> inner_;
  std::mutex& mutex_;
};

FinishReason public_reason(EngineFinish reason) {
  switch (reason) {
    case EngineFinish::kEndOfGeneration:
      return FinishReason::kEndOfGeneration;
    case EngineFinish::kStopString:
      return FinishReason::kStop;
    case EngineFinish::kMaxTokens:
      return FinishReason::kLength;
    case EngineFinish::kContextFull:
      return FinishReason::kContextFull;
    case EngineFinish::kCancelled:
      return FinishReason::kCancelled;
  }
  return FinishReason::kCancelled;
}

using Json = nlohmann::ordered_json;

// Messages and tools in OpenAI chat JSON, the form the chat formats take.
Json messages_json(std::span<const Message> messages) {
  Json out = Json::array();
  for (const Message& m : messages) {
    Json turn = {{"role", m.role}, {"content", m.content}};
    if (!m.reasoning.empty()) turn["reasoning_content"] = m.reasoning;
    if (!m.tool_call_id.empty()) turn["tool_call_id"] = m.tool_call_id;
    if (!m.tool_calls.empty()) {
      turn["tool_calls"] = Json::array();
      for (const ToolCall& call : m.tool_calls) {
        turn["tool_calls"].push_back(
            {{"id", call.id},
             {"type", "function"},
             {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
    }
    out.push_back(std::move(turn));
  }
  return out;
}

Json tools_json(std::span<const Tool> tools) {
  if (tools.empty()) return Json();
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Tool& t = tools[i];
    if (t.name.empty()) fail("tools[{}]: the name is empty", i);
    Json parameters = Json::parse(t.parameters.empty() ? "{}" : t.parameters, nullptr, false);
    if (parameters.is_discarded())
      fail("tools[{}] ('{}'): parameters are not valid JSON", i, t.name);
    out.push_back(
        {{"type", "function"},
         {"function",
          {{"name", t.name}, {"description", t.description}, {"parameters", parameters}}}});
  }
  return out;
}

SamplerConfig engine_sampling(const ModelBackend& backend, const Sampling& s) {
  const Sampling defaults;
  SamplerConfig c = backend.sampling_defaults(SamplerConfig{});
  // A field left at the public default keeps the file's value (general.sampling.*).
  if (s.temperature != defaults.temperature) c.temperature = s.temperature;
  if (s.top_k != defaults.top_k) c.top_k = s.top_k;
  if (s.top_p != defaults.top_p) c.top_p = s.top_p;
  if (s.min_p != defaults.min_p) c.min_p = s.min_p;
  c.repeat_penalty = s.repeat_penalty;
  c.frequency_penalty = s.frequency_penalty;
  c.presence_penalty = s.presence_penalty;
  c.seed = s.seed;
  for (const auto& [token, bias] : s.logit_bias) {
    if (token < 0 || token >= backend.n_vocab())
      fail("sampling: logit_bias names token {}; the vocabulary has {} tokens", token,
           backend.n_vocab());
    c.logit_bias.push_back({token, bias});
  }
  c.validate();
  return c;
}

}  // namespace

const char* version() {
  return "0.1.0";
}

const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEndOfGeneration:
      return "eog";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kContextFull:
      return "context_full";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kToolCalls:
      return "tool_calls";
  }
  return "unknown";
}

// ---- Model ------------------------------------------------------------------------------------

Model::Model(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {
  if (!impl_ || !impl_->backend) fail("Model: no implementation");
}
Model::~Model() = default;

std::shared_ptr<const Model> wrap_model_backend(std::shared_ptr<ModelBackend> backend,
                                                const SpeculativeOptions& speculative) {
  auto impl = std::make_shared<Model::Impl>();
  impl->architecture = backend->architecture();
  impl->speculative = speculative;
  impl->backend = std::move(backend);
  return std::make_shared<const Model>(std::move(impl));
}

std::shared_ptr<const Model> Model::load(const std::string& path, const ModelOptions& options) {
  BackendOptions o;
  switch (options.device) {
    case Device::kAuto:
      o.device = "auto";
      break;
    case Device::kCpu:
      o.device = "cpu";
      break;
    case Device::kCuda:
      o.device = "cuda";
      break;
  }
  if (options.threads < 0) fail("ModelOptions.threads {} is negative", options.threads);
  if (options.context < 1) fail("ModelOptions.context {} must be positive", options.context);
  o.threads = options.threads;
  o.context = options.context;
  o.kv_type = options.kv_type == KvCacheType::kF32    ? "f32"
              : options.kv_type == KvCacheType::kQ8_0 ? "q8_0"
                                                      : "f16";
  o.draft = options.draft;
  SpeculativeOptions speculative;
  if (!options.draft.empty()) {
    if (options.draft_max == 0 || options.draft_max < -1)
      fail("ModelOptions.draft_max {} must be >= 1 (or -1)", options.draft_max);
    if (options.draft_min < 1) fail("ModelOptions.draft_min {} must be >= 1", options.draft_min);
    if (options.draft_max > 0 && options.draft_min > options.draft_max)
      fail("ModelOptions.draft_min {} is above draft_max {}", options.draft_min, options.draft_max);
    speculative.draft_max = options.draft_max;
    speculative.draft_min = options.draft_min;
    speculative.adaptive = options.draft_max < 0 || options.draft_min < options.draft_max;
  }
  return wrap_model_backend(open_model_backend(path, o), speculative);
}

const std::string& Model::architecture() const {
  return impl_->architecture;
}
int64_t Model::vocab_size() const {
  return impl_->backend->n_vocab();
}
int64_t Model::context() const {
  return impl_->backend->n_ctx();
}
bool Model::has_chat_template() const {
  return impl_->backend->has_chat_template();
}

// ---- Session ----------------------------------------------------------------------------------

struct Session::State {
  std::shared_ptr<const Model> model;
  ModelBackend* backend = nullptr;
  std::unique_ptr<LanguageModel> sequence;
  std::unique_ptr<BlockDrafter> drafter;  // with a draft (ModelOptions::draft), else null
  std::unique_ptr<Generator> generator;
};

Session::Session(std::shared_ptr<const Model> model) : state_(std::make_unique<State>()) {
  if (!model) fail("Session: the model is null");
  State& s = *state_;
  s.model = std::move(model);
  Model::Impl& impl = *s.model->impl_;
  s.backend = impl.backend.get();
  s.sequence = s.backend->new_sequence();
  if (!s.backend->concurrent_decode())
    s.sequence = std::make_unique<LockedSequence>(std::move(s.sequence), impl.decode_mutex);
  s.generator = std::make_unique<Generator>(*s.sequence, s.backend->vocab(),
                                            s.backend->sampling_defaults(SamplerConfig{}));
  s.drafter = s.backend->new_drafter();
  if (s.drafter) {
    // The drafter runs on the model's compute threads too: it takes the same lock.
    if (!s.backend->concurrent_decode())
      s.drafter = std::make_unique<LockedDrafter>(std::move(s.drafter), impl.decode_mutex);
    s.generator->set_drafter(s.drafter.get(), impl.speculative);
  }
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

const std::shared_ptr<const Model>& Session::model() const {
  if (!state_) fail("Session: used after a move");
  return state_->model;
}

std::vector<int32_t> Session::tokenize(std::string_view text, bool add_special) const {
  if (!state_) fail("Session: used after a move");
  return state_->backend->tokenize(text, add_special);
}

std::string Session::detokenize(std::span<const int32_t> tokens) const {
  if (!state_) fail("Session: used after a move");
  const ModelBackend& backend = *state_->backend;
  std::string bytes;
  for (int32_t id : tokens) {
    if (id < 0 || id >= backend.n_vocab())
      fail("detokenize: token {} is outside the vocabulary of {}", id, backend.n_vocab());
    bytes += backend.vocab().piece(id);
  }
  std::string text;
  decode_utf8_replacing(bytes, /*final=*/true, text);
  return text;
}

std::string Session::apply_chat_template(std::span<const Message> messages,
                                         const ChatTemplateOptions& options) const {
  if (!state_) fail("Session: used after a move");
  const ModelBackend& backend = *state_->backend;
  if (!backend.has_chat_template()) fail("this model has no chat template");
  return backend
      .render_chat_json(messages_json(messages), tools_json(options.tools), options.thinking,
                        options.add_generation_prompt)
      .text;
}

Result Session::generate(const Request& request, const TokenCallback& on_token) {
  if (!state_) fail("Session: used after a move");
  State& s = *state_;
  const ModelBackend& backend = *s.backend;
  if (request.prompt.empty() && request.messages.empty())
    fail("generate: the request has neither a prompt nor messages");
  if (!request.tools.empty() && request.messages.empty())
    fail("generate: tools need chat messages");
  ReasoningConfig reasoning;
  reasoning.mode = request.reasoning == Reasoning::kOn    ? ReasoningMode::kOn
                   : request.reasoning == Reasoning::kOff ? ReasoningMode::kOff
                                                          : ReasoningMode::kAuto;
  reasoning.budget = request.reasoning_budget;
  reasoning.block_budget = request.reasoning_block_budget;
  if (!request.reasoning_budget_message.empty())
    reasoning.budget_message = request.reasoning_budget_message;
  reasoning.max_tokens = request.max_tokens;
  reasoning.validate();
  // Thinking on renders the template's thinking switch; a budget of 0 renders it off.
  const bool thinking = reasoning.enable_thinking();

  const Json tools = tools_json(request.tools);
  const PreparedPrompt prepared = prepare_prompt(
      backend, request.prompt, request.messages.empty() ? Json() : messages_json(request.messages),
      tools, thinking);
  const std::vector<int32_t>& prompt = prepared.tokens;
  // The generator reuses the cached prefix this prompt shares with the last call and rolls the
  // rest back; sessions with sliding-window layers can only roll back a micro-batch, so a long
  // way back starts from an empty cache instead.
  constexpr size_t kMaxRollback = 256;
  const auto& cached = s.generator->cached_tokens();
  size_t common = 0;
  while (common < cached.size() && common < prompt.size() && cached[common] == prompt[common])
    ++common;
  if (cached.size() - common > kMaxRollback) s.generator->reset();
  s.generator->sampler() = Sampler(engine_sampling(backend, request.sampling));

  const auto markers = backend.reasoning_markers();
  ReplySplitter splitter(markers, ReplySplitter::prompt_opens_reasoning(prompt, markers));
  // The budget (and closing message) is held token by token; nullptr for formats without
  // thought markers.
  const std::unique_ptr<ReasoningController> controller =
      make_reasoning_controller(backend, reasoning);
  const int n_constraints =
      !request.grammar.empty() + !request.json_schema.empty() + (request.json_object ? 1 : 0);
  if (n_constraints > 1) fail("generate: give one of grammar, json_schema and json_object");
  OutputConstraint constraint;
  if (!request.grammar.empty()) constraint = OutputConstraint::grammar(request.grammar);
  if (!request.json_schema.empty()) constraint = OutputConstraint::json_schema(request.json_schema);
  if (request.json_object) constraint = OutputConstraint::json_object();
  if (!request.tools.empty()) {
    text::ToolChoice choice;
    const std::string& tc = request.tool_choice;
    if (tc == "none") {
      choice.kind = text::ToolChoice::Kind::kNone;
    } else if (tc == "required") {
      choice.kind = text::ToolChoice::Kind::kRequired;
    } else if (!tc.empty() && tc != "auto") {
      choice.kind = text::ToolChoice::Kind::kFunction;
      choice.function = tc;
    }
    choice.parallel = request.parallel_tool_calls;
    const bool forcing = choice.kind == text::ToolChoice::Kind::kRequired ||
                         choice.kind == text::ToolChoice::Kind::kFunction;
    if (forcing && constraint.active())
      fail("generate: tool_choice '{}' cannot be combined with a grammar or JSON schema", tc);
    if (!constraint.active()) {
      text::ToolCallGrammar tool_grammar = backend.tool_call_grammar(tools, choice);
      if (tool_grammar.empty() && forcing)
        fail("generate: tool_choice '{}' needs a chat format with tool calls", tc);
      if (!tool_grammar.empty())
        constraint = OutputConstraint::lazy_grammar(std::move(tool_grammar.gbnf),
                                                    std::move(tool_grammar.trigger));
    }
  }
  const std::unique_ptr<GrammarController> grammar =
      make_grammar_controller(constraint, backend.vocab(), backend.n_vocab(), markers,
                              thinking && !request.messages.empty(), controller.get());
  GenerationOptions options;
  options.controller = grammar ? static_cast<TokenController*>(grammar.get()) : controller.get();
  options.max_tokens = request.max_tokens;
  options.stop_strings = request.stop;
  std::string released;
  options.on_token = [&](const TokenEvent& event) {
    const auto pieces = splitter.push(event.token, event.piece);
    if (!on_token) return true;
    released.clear();
    bool reasoning = splitter.channel() == ReplySplitter::Channel::kReasoning;
    for (const auto& piece : pieces) {
      released += piece.text;
      reasoning = piece.channel == ReplySplitter::Channel::kReasoning;
    }
    return on_token(TokenInfo{event.token, released, reasoning, event.index});
  };
  GenerationResult generated = s.generator->generate(prompt, options);
  const ParsedReply reply = backend.parse_reply(prompt, prepared.chat, tools, generated);

  Result result;
  result.text = std::move(generated.text);
  result.reasoning = reply.reasoning;
  result.content = reply.content;
  for (const auto& call : reply.tool_calls)
    result.tool_calls.push_back({call.id, call.name, call.arguments});
  result.tokens = std::move(generated.tokens);
  result.finish_reason = public_reason(generated.finish_reason);
  if (result.finish_reason == FinishReason::kEndOfGeneration && !result.tool_calls.empty())
    result.finish_reason = FinishReason::kToolCalls;
  const GenerationStats& g = generated.stats;
  Statistics& st = result.stats;
  st.prompt_tokens = g.n_prompt_tokens;
  st.prompt_evaluated = g.n_prompt_evaluated;
  st.generated_tokens = g.n_tokens;
  st.reasoning_tokens = controller ? controller->reasoning_tokens() : reply.reasoning_tokens;
  st.time_to_first_token_ms = g.ttft_ms;
  st.prompt_ms = g.prompt_ms;
  st.generation_ms = g.generation_ms;
  st.prompt_tokens_per_second = g.prompt_tokens_per_second;
  st.tokens_per_second = g.tokens_per_second;
  st.draft_steps = g.draft.n_rounds;
  st.draft_tokens = g.draft.n_drafted;
  st.draft_accepted = g.draft.n_accepted;
  return result;
}

void Session::reset() {
  if (!state_) fail("Session: used after a move");
  state_->generator->reset();
}

}  // namespace api
}  // namespace boltrt
